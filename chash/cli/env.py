"""Options from the environment: ``CHASH_<OPTION>`` for every ``--option``.

``with_environment(parser)`` makes each option of ``parser`` read a default
from the environment variable named after it (``--health-interval`` ->
``CHASH_HEALTH_INTERVAL``), as uvicorn does: the command line wins, the
variable comes next, then the built-in default.  Flags take ``1``,
``true``, ``yes``, ``on`` or ``0``, ``false``, ``no``, ``off``; a
repeatable option (``--backend``) takes one value, which for ``--backend``
may list several, comma-separated.  A variable that does not parse is
reported, naming the variable, when the command runs
(``check_environment``), so that a bad one never breaks other commands.
``environment_options`` tells which options a variable gave, which a
configuration file (``chash.cli.config_file``) then does not override.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["PREFIX", "check_environment", "environment_options", "option_value", "variable",
           "with_environment"]

#: What every variable's name starts with.
PREFIX = "CHASH_"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})
_STATE = "environment_state"
_GIVEN = "environment_options"


def variable(option: str) -> str:
    """The environment variable of ``option``: ``--max-body`` -> ``CHASH_MAX_BODY``."""
    return PREFIX + option.lstrip("-").replace("-", "_").upper()


def option_value(action: argparse.Action, text: str) -> Any:
    """``text`` as the option's value; ValueError with the reason if it is none."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        word = text.strip().lower()
        if word not in _TRUE | _FALSE:
            raise ValueError(f"expected 1/true/yes/on or 0/false/no/off, not {text!r}")
        return (word in _TRUE) == isinstance(action, argparse._StoreTrueAction)
    try:
        value = action.type(text) if callable(action.type) else text
    except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
        raise ValueError(str(exc) or f"invalid value {text!r}") from None
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise ValueError(f"{text!r} is not one of {choices}")
    return value


def with_environment(parser: argparse.ArgumentParser,
                     environ: Mapping[str, str] | None = None) -> None:
    """Give every option of ``parser`` its default from its variable in
    ``environ`` (default ``os.environ``), if set."""
    environ = os.environ if environ is None else environ
    appended: dict[str, Any] = {}
    errors: list[str] = []
    given: set[str] = set()
    for action in parser._actions:
        long = [o for o in action.option_strings if o.startswith("--")]
        if not long or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        name = variable(long[0])
        if name not in environ:
            continue
        try:
            value = option_value(action, environ[name])
        except ValueError as exc:
            errors.append(f"{name}: {exc}")
            continue
        given.add(action.dest)
        if isinstance(action, argparse._AppendAction):
            appended[action.dest] = [value]  # used only when the command line gives none
        else:
            action.default = value
    parser.set_defaults(**{_STATE: (appended, errors), _GIVEN: frozenset(given)})


def check_environment(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Report a variable that did not parse (``parser.error``, exit 2);
    give repeatable options the variable's value when the command line
    gave none."""
    appended, errors = getattr(args, _STATE, ({}, []))
    if errors:
        parser.error("; ".join(errors))
    for dest, value in appended.items():
        if not getattr(args, dest):
            setattr(args, dest, value)


def environment_options(args: argparse.Namespace) -> frozenset[str]:
    """The destinations of the options a variable gave (``args.max_body``
    for ``CHASH_MAX_BODY``), whether or not the command line overrode them."""
    given: frozenset[str] = getattr(args, _GIVEN, frozenset())
    return given
