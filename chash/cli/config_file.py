"""A command's options from a TOML file: ``chash gateway --config gateway.toml``.

The keys are the command's own options, read off its argument parser, so
that an option added to the parser has its key at once: a long option's
name without the leading dashes, other dashes as underscores
(``--read-timeout`` -> ``read_timeout``, ``--no-health`` -> ``no_health``),
all at the top level of the file (no tables).  A key's value is what the
option takes on the command line, as a TOML value: a string, or a number
or a list where the option's argument type says so
(``chash.cli.args.FileValue``); ``true`` for a flag given (``false``: not
given); a list of values for a repeatable option (``backend``), or one.
Each value is parsed by the option's own argument type and checked
against its choices, as the command line's is.

An unknown key, a wrong type or a bad value is a ``ConfigFileError``
naming the file, the key and its line.  ``tomllib`` tells no key's line,
so ``key_lines`` finds them in the text: table headers, dotted and quoted
keys, multi-line strings and arrays are stepped over as TOML writes them.

``effective_text`` writes the options a command runs with back as a file
of this kind (``--check-config``); its SHA-256 (``digest``) names one
configuration, whatever file, flags and variables gave it.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chash.cli.args import file_value_of
from chash.cli.env import option_value

__all__ = ["ConfigFileError", "FileOptions", "convert", "digest", "effective_text",
           "effective_values", "given_options", "key_lines", "line_of", "option_keys",
           "read_options"]

#: Options that are no key of the file: the file itself.
NOT_KEYS = frozenset({"config", "check_config"})


class ConfigFileError(ValueError):
    """The configuration file cannot be read, is not TOML, or has an
    unknown key, a value of the wrong type or a bad value."""

    def __init__(self, path: str, message: str, key: str | None = None,
                 line: int | None = None) -> None:
        """``message``: what is wrong; ``key`` and ``line``: where, if known."""
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}" if key is None else f"{where}: {key}: {message}")
        self.path = path
        self.key = key
        self.line = line


@dataclass(frozen=True)
class FileOptions:
    """The options a file gives, parsed: ``values`` by destination
    (``args.read_timeout``), ``keys`` by the same."""

    path: str
    values: dict[str, Any]
    keys: dict[str, str]


def option_keys(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """``{key: action}`` for every long option of ``parser`` but help,
    version and the file's own options, in the parser's order."""
    keys: dict[str, argparse.Action] = {}
    for action in parser._actions:
        long = [o for o in action.option_strings if o.startswith("--")]
        if not long or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        key = long[0][2:].replace("-", "_")
        if key not in NOT_KEYS:
            keys[key] = action
    return keys


# -- where each key is -----------------------------------------------------------

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _Scanner:
    """A cursor over TOML text that counts lines."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.line = 1

    def peek(self, ahead: int = 0) -> str:
        index = self.at + ahead
        return self.text[index] if index < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        self.at += 1
        if char == "\n":
            self.line += 1
        return char

    def skip_blanks(self) -> None:
        while self.peek() in (" ", "\t"):
            self.take()

    def skip_comment(self) -> None:
        while self.peek() not in ("\n", ""):
            self.take()

    def string(self) -> str:
        """A string at the cursor (any of TOML's four kinds), its text
        with escapes left as written."""
        quote = self.take()
        if self.peek() == quote and self.peek(1) == quote:  # multi-line
            self.take()
            self.take()
            start = self.at
            while self.peek() != "":
                if quote == '"' and self.peek() == "\\":
                    self.take()
                    self.take()
                    continue
                if self.peek() == quote and self.peek(1) == quote and self.peek(2) == quote:
                    end = self.at
                    while self.peek() == quote:  # up to two quotes may end the content
                        self.take()
                    return self.text[start:end]
                self.take()
            return self.text[start:]
        start = self.at
        while self.peek() not in (quote, "\n", ""):
            if quote == '"' and self.peek() == "\\":
                self.take()
            self.take()
        end = self.at
        if self.peek() == quote:
            self.take()
        return self.text[start:end]

    def key(self) -> tuple[str, ...]:
        """A dotted key at the cursor: its parts, quoted ones unquoted."""
        parts = []
        while True:
            self.skip_blanks()
            quote = self.peek()
            if quote in ('"', "'"):
                raw = self.string()
                parts.append(_unescape(raw) if quote == '"' else raw)
            else:
                start = self.at
                while self.peek() in _BARE and self.peek() != "":
                    self.take()
                parts.append(self.text[start:self.at])
            self.skip_blanks()
            if self.peek() != ".":
                return tuple(parts)
            self.take()

    def value(self) -> None:
        """Step over a value: strings, nested arrays and inline tables,
        comments inside arrays; stop at the end of its line."""
        depth = 0
        while self.peek() != "":
            char = self.peek()
            if char in ('"', "'"):
                self.string()
            elif char in ("[", "{"):
                depth += 1
                self.take()
            elif char in ("]", "}"):
                depth -= 1
                self.take()
            elif char == "#":
                self.skip_comment()
            elif char == "\n" and depth <= 0:
                return
            else:
                self.take()


def _unescape(raw: str) -> str:
    """A basic string's escapes (the JSON ones and ``\\UXXXXXXXX``)."""
    if "\\" not in raw:
        return raw
    try:
        return str(json.loads(f'"{raw}"'))
    except ValueError:
        return raw


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line (1-based) where each key of TOML ``text`` is first given,
    by its full path: a table header's keys (``[a.b]`` -> ``("a", "b")``),
    each key under it, each prefix of a dotted key.  The keys of inline
    tables are not listed (``line_of`` falls back to their table's)."""
    lines: dict[tuple[str, ...], int] = {}
    scan = _Scanner(text)
    table: tuple[str, ...] = ()
    while scan.peek() != "":
        scan.skip_blanks()
        char = scan.peek()
        if char in ("\n", "\r"):
            scan.take()
        elif char == "#":
            scan.skip_comment()
        elif char == "[":
            line = scan.line
            scan.take()
            if scan.peek() == "[":
                scan.take()
            table = scan.key()
            for end in range(1, len(table) + 1):
                lines.setdefault(table[:end], line)
            scan.skip_comment()
        else:
            line = scan.line
            key = scan.key()
            for end in range(1, len(key) + 1):
                lines.setdefault(table + key[:end], line)
            if scan.peek() == "=":
                scan.take()
            scan.value()
    return lines


def line_of(lines: dict[tuple[str, ...], int], path: tuple[str, ...]) -> int | None:
    """The line of ``path``, or of its longest prefix that has one."""
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


# -- values ----------------------------------------------------------------------

_TOML_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               list: "an array", dict: "a table"}


def _kind(value: object) -> str:
    for kind, name in _TOML_NAMES.items():
        if isinstance(value, kind):
            return name
    return f"a {type(value).__name__}"  # dates and times


def _expected(types: Iterable[type]) -> str:
    names = [_TOML_NAMES.get(t, t.__name__) for t in types]
    if int in types and float in types:
        names = [n for n in names if n != "an integer"]
    return " or ".join(names)


def _one(action: argparse.Action, value: object) -> Any:
    """One value of ``action`` from the file."""
    accepts = file_value_of(action.type).types
    if isinstance(value, bool) or not isinstance(value, accepts):
        raise ValueError(f"expected {_expected(accepts)}, not {_kind(value)}")
    if isinstance(value, list):
        for item in value:
            if isinstance(item, (bool, list, dict)) or not isinstance(item, (str, int, float)):
                raise ValueError(f"expected an array of numbers or strings, not one holding "
                                 f"{_kind(item)}")
        text = ",".join(map(str, value))
    else:
        text = str(value)
    return option_value(action, text)


def convert(action: argparse.Action, value: object) -> Any:
    """``value`` from the file as the option's parsed value (what the
    command line would give ``args``); ValueError saying why not."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, not {_kind(value)}")
        return value == isinstance(action, argparse._StoreTrueAction)
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        return [_one(action, item) for item in items]
    return _one(action, value)


def read_options(path: str, parser: argparse.ArgumentParser) -> FileOptions:
    """The options the file at ``path`` gives ``parser``'s command;
    ``ConfigFileError`` for the first thing wrong in it."""
    try:
        with open(path, "rb") as file:
            text = file.read().decode("utf-8")
    except OSError as exc:
        raise ConfigFileError(path, f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(path, f"not UTF-8 text: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(path, f"not valid TOML: {exc}") from None
    lines = key_lines(text)
    keys = option_keys(parser)
    values: dict[str, Any] = {}
    named: dict[str, str] = {}
    for key, value in data.items():
        line = line_of(lines, (key,))
        action = keys.get(key)
        if action is None:
            close = difflib.get_close_matches(key, list(keys), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigFileError(path, f"unknown key{hint}", key, line)
        try:
            values[action.dest] = convert(action, value)
        except ValueError as exc:
            raise ConfigFileError(path, str(exc), key, line) from None
        named[action.dest] = key
    return FileOptions(path, values, named)


# -- which options the command line gave -----------------------------------------

def given_options(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The destinations of the options ``argv`` (the command's own
    arguments, already parsed once) gives, whatever their value."""
    saved = [(action, action.default) for action in parser._actions]
    defaults, parser._defaults = parser._defaults, {}
    try:
        for action in parser._actions:
            action.default = argparse.SUPPRESS
        namespace, _ = parser.parse_known_args(argv)
    finally:
        parser._defaults = defaults
        for action, default in saved:
            action.default = default
    return set(vars(namespace))


# -- the effective configuration -------------------------------------------------

def _toml(value: object) -> str:
    """A plain value as TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (frozenset, set)):
        return "[" + ", ".join(_toml(item) for item in sorted(value)) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _element(action: argparse.Action, value: object) -> str:
    text = file_value_of(action.type).text
    return _toml(value if text is None else text(value))


def effective_values(parser: argparse.ArgumentParser, args: argparse.Namespace,
                     ) -> dict[str, str | None]:
    """``{key: its value in args, as TOML}`` for every key of ``parser``'s
    command, in the parser's order (None: the option has no value)."""
    values: dict[str, str | None] = {}
    for key, action in option_keys(parser).items():
        value = getattr(args, action.dest, None)
        if isinstance(action, argparse._StoreFalseAction):
            value = not value
        if value is None:
            values[key] = None
        elif isinstance(action, argparse._AppendAction):
            values[key] = "[" + ", ".join(_element(action, v) for v in value) + "]"
        else:
            values[key] = _element(action, value)
    return values


def effective_text(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """Every key of ``parser``'s command with its value in ``args``, as a
    TOML file (in the parser's order; an option with no value as a
    comment): reading it back gives the same options."""
    return "".join(f"# {key}: not set\n" if value is None else f"{key} = {value}\n"
                   for key, value in effective_values(parser, args).items())


def digest(text: str) -> str:
    """``sha256:`` and the hex SHA-256 of ``text`` (UTF-8)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
