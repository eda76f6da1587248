"""Routers from nginx's configuration: an ``upstream`` block with ``hash
KEY consistent`` and its ``server ... weight=N`` lines, read with the small
subset of nginx's syntax they use (words, quotes, escapes, comments)."""
from __future__ import annotations

from dataclasses import dataclass

from chash._chash import ConsistentHashRouter
from chash.compat.errors import ConfigError

__all__ = ["NginxServer", "nginx_servers", "nginx_upstream"]


@dataclass(frozen=True)
class NginxServer:
    """A ``server`` line of an upstream block."""

    address: str
    """The address exactly as written: the node id nginx hashes."""
    weight: int
    line: int


def _nginx_tokens(text: str) -> list[tuple[str, int]]:
    """Words, ``;``, ``{`` and ``}`` of nginx's syntax with their line
    numbers; quotes and backslash escapes as nginx reads them."""
    tokens: list[tuple[str, int]] = []
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif c == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif c in ";{}":
            tokens.append((c, line))
            i += 1
        elif c in "\"'":
            start_line = line
            j = i + 1
            word: list[str] = []
            while j < n and text[j] != c:
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                if text[j] == "\n":
                    line += 1
                word.append(text[j])
                j += 1
            if j >= n:
                raise ConfigError(f"line {start_line}: unterminated quoted string")
            tokens.append(("".join(word), start_line))
            i = j + 1
        else:
            j = i
            while j < n and text[j] not in " \t\r\n;{}#\"'":
                j += 1
            tokens.append((text[i:j], line))
            i = j
    return tokens


def nginx_servers(conf_text: str, name: str) -> list[NginxServer]:
    """The servers of ``upstream name { ... }`` in the order written, with
    their weights (an address may appear twice, as nginx allows).
    ``ConfigError`` naming the line when the block is missing, does not hash
    ``consistent``, or a server line is not one chash can route like nginx
    (``backup``, ``down``, a non-integer weight)."""
    tokens = _nginx_tokens(conf_text)
    start = None
    for k in range(len(tokens) - 2):
        if tokens[k][0] == "upstream" and tokens[k + 1][0] == name and tokens[k + 2][0] == "{":
            start = k + 3
            break
    if start is None:
        raise ConfigError(f"no 'upstream {name} {{ ... }}' block in the configuration")
    servers: list[NginxServer] = []
    consistent = False
    statement: list[tuple[str, int]] = []
    depth = 0
    k = start
    while k < len(tokens):
        word, line = tokens[k]
        k += 1
        if word == "{":
            depth += 1
            statement = []
            continue
        if word == "}":
            if depth == 0:
                break
            depth -= 1
            continue
        if word != ";":
            statement.append((word, line))
            continue
        if depth == 0 and statement:
            head, head_line = statement[0]
            args = [w for w, _ in statement[1:]]
            if head == "hash":
                if "consistent" not in args[1:]:
                    raise ConfigError(f"line {head_line}: 'hash' without 'consistent' is nginx's "
                                      "modulo hashing, not its ring; chash routes only "
                                      "'hash KEY consistent'")
                consistent = True
            elif head == "server":
                servers.append(_nginx_server(args, head_line))
        statement = []
    else:
        raise ConfigError(f"upstream {name}: the block is not closed")
    if not consistent:
        raise ConfigError(f"upstream {name}: no 'hash KEY consistent;' line; nginx would not "
                          "route it with a hash ring")
    if not servers:
        raise ConfigError(f"upstream {name}: no server line")
    return servers


def _nginx_server(args: list[str], line: int) -> NginxServer:
    if not args:
        raise ConfigError(f"line {line}: 'server' needs an address")
    weight = 1
    for param in args[1:]:
        if param.startswith("weight="):
            text = param[len("weight="):]
            if not text.isdigit() or int(text) < 1:
                raise ConfigError(f"line {line}: weight must be a whole number >= 1 (nginx's "
                                  f"weight=N), not {text!r}")
            weight = int(text)
        elif param == "backup":
            raise ConfigError(f"line {line}: nginx does not hash to 'backup' servers")
        elif param == "down":
            raise ConfigError(f"line {line}: a 'down' server keeps its points in nginx's ring "
                              "and is skipped at lookup; remove the line (or the node) instead")
    return NginxServer(args[0], weight, line)


def nginx_upstream(conf_text: str, name: str) -> ConsistentHashRouter:
    """A router that sends every key where nginx's ``upstream name`` with
    ``hash KEY consistent`` sends it (node ids: the server addresses as
    written; keys: the value of nginx's KEY, e.g. ``$request_uri``).

    >>> conf = '''upstream app { hash $arg_user consistent;
    ...     server 127.0.0.1:8001 weight=2; server 127.0.0.1:8002; }'''
    >>> router = nginx_upstream(conf, "app")
    >>> router.points
    {'127.0.0.1:8001': 320, '127.0.0.1:8002': 160}
    """
    # nginx accepts an address twice: both lines derive the same chain of
    # points, duplicates are dropped, so the node owns the longer chain,
    # that of the larger weight, at the place of its first line.
    weights: dict[str, int] = {}
    for server in nginx_servers(conf_text, name):
        weights[server.address] = max(weights.get(server.address, 0), server.weight)
    router = ConsistentHashRouter(layout="nginx")
    for address, weight in weights.items():
        router.add_service_node(address, weight)
    return router
