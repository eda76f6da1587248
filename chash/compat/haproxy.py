"""Routers from HAProxy 2.6's configuration: a backend with ``hash-type
consistent`` (its ``balance``, ``hash-type``, ``default-server`` and
``server`` lines, ``defaults`` inherited), the servers numbered as HAProxy
numbers them; layout ``haproxy``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from chash._chash import ConsistentHashRouter
from chash.compat.errors import ConfigError

if TYPE_CHECKING:
    from chash._chash import HashName

__all__ = ["HaproxyBackend", "HaproxyServer", "haproxy_backend", "haproxy_backend_config",
           "haproxy_servers"]

#: Section keywords of HAProxy's configuration: each starts a new section.
_HAPROXY_SECTIONS = frozenset({
    "global", "defaults", "frontend", "backend", "listen", "userlist", "peers", "resolvers",
    "mailers", "program", "http-errors", "ring", "cache", "fcgi-app",
})
#: ``balance`` algorithms that hash a string HAProxy takes from the request.
_HAPROXY_KEYED = ("uri", "url_param", "hash")
_HAPROXY_KEYED_CALLS = ("hdr(", "rdp-cookie(")
#: The router's hash for each ``hash-type consistent`` function, without
#: and with its ``avalanche`` modifier.
_HAPROXY_FUNCTIONS: dict[str, tuple[HashName, HashName]] = {
    "sdbm": ("sdbm", "sdbm_avalanche"),
    "djb2": ("djb2", "djb2_avalanche"),
    "wt6": ("wt6", "wt6_avalanche"),
    "crc32": ("crc32", "crc32_avalanche"),
}


@dataclass(frozen=True)
class HaproxyServer:
    """A ``server`` line of a backend, with the id HAProxy gives it."""

    name: str
    """The server's name: the router's node id."""
    weight: int
    """``weight N`` (0 to 256; 1 when not given): N x 16 ring points."""
    puid: int
    """Its id: ``id N`` when given, else numbered as HAProxy numbers it."""
    in_ring: bool
    """False for ``disabled``, ``backup`` and weight-0 servers, which hold no
    points (HAProxy sends keys to backup servers only when every active
    server is down, which a router does not follow)."""
    line: int


@dataclass(frozen=True)
class HaproxyBackend:
    """What of a backend decides where HAProxy sends a key."""

    name: str
    balance: str
    """The ``balance`` line's words, e.g. ``"hdr(X-Key)"`` or ``"uri whole"``."""
    hash: HashName
    """The router's hash: ``sdbm``, ``djb2``, ``wt6`` or ``crc32``, with
    ``_avalanche`` when the avalanche modifier applies."""
    servers: tuple[HaproxyServer, ...]


def _haproxy_words(raw: str, line: int) -> list[str]:
    """The words of one configuration line as HAProxy splits it: blanks
    separate, ``#`` starts a comment, quotes group, a backslash escapes."""
    words: list[str] = []
    word: list[str] = []
    quote = ""
    in_word = False
    i = 0
    while i < len(raw):
        c = raw[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"' and i + 1 < len(raw):
                i += 1
                word.append(raw[i])
            else:
                word.append(c)
        elif c in "\"'":
            quote, in_word = c, True
        elif c == "\\" and i + 1 < len(raw):
            i += 1
            word.append(raw[i])
            in_word = True
        elif c == "#":
            break
        elif c in " \t\r":
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
        else:
            word.append(c)
            in_word = True
        i += 1
    if quote:
        raise ConfigError(f"line {line}: unterminated quoted string")
    if in_word:
        words.append("".join(word))
    return words


_Section = tuple[str, str, int, list[tuple[list[str], int]]]


def _haproxy_sections(cfg_text: str) -> list[_Section]:
    """``(keyword, name, line, [(words, line)])`` for every section in
    order, the section's own line first."""
    sections: list[_Section] = []
    for number, raw in enumerate(cfg_text.splitlines(), start=1):
        words = _haproxy_words(raw, number)
        if not words:
            continue
        if words[0] in _HAPROXY_SECTIONS:
            name = words[1] if len(words) > 1 and words[1] != "from" else ""
            sections.append((words[0], name, number, [(words, number)]))
        elif sections:
            sections[-1][3].append((words, number))
        else:
            raise ConfigError(f"line {number}: {words[0]!r} outside any section")
    return sections


def _haproxy_hash(words: list[str], line: int) -> HashName:
    """The router's hash for ``hash-type consistent [function [avalanche]]``."""
    if len(words) < 2 or words[1] != "consistent":
        kind = words[1] if len(words) > 1 else "(none)"
        raise ConfigError(f"line {line}: hash-type {kind}: chash routes HAProxy's "
                          "'hash-type consistent' ring only ('map-based' is a modulo table)")
    if len(words) == 2:
        return "sdbm_avalanche"  # 'consistent' alone: sdbm and the avalanche, as HAProxy sets it
    function = words[2]
    if function not in _HAPROXY_FUNCTIONS:
        raise ConfigError(f"line {line}: hash-type consistent {function}: HAProxy 2.6's hash "
                          "functions are sdbm, djb2, wt6 and crc32 (later versions' 'none' "
                          "is not supported)")
    if len(words) > 4 or (len(words) == 4 and words[3] != "avalanche"):
        raise ConfigError(f"line {line}: hash-type takes 'avalanche' as its only modifier, "
                          f"not {' '.join(words[3:])!r}")
    return _HAPROXY_FUNCTIONS[function][len(words) == 4]


def _haproxy_balance(words: list[str], line: int) -> str:
    """The ``balance`` words, checked: an algorithm whose key is a string."""
    algo = words[1] if len(words) > 1 else ""
    args = words[2:]
    keyed = algo in _HAPROXY_KEYED or (algo.startswith(_HAPROXY_KEYED_CALLS)
                                       and algo.endswith(")") and not algo.endswith("()"))
    if not keyed:
        why = ("hashes the client address's 32-bit words, not a string key"
               if algo == "source" else "does not hash a key")
        raise ConfigError(f"line {line}: balance {algo or '(none)'} {why}; chash routes "
                          "balance hdr(NAME), uri, url_param, rdp-cookie(NAME) and hash EXPR")
    if algo.startswith("hdr(") and args:
        raise ConfigError(f"line {line}: balance {algo} {' '.join(args)}: only the whole "
                          "header value can be routed ('use_domain_only' is not supported)")
    if algo == "uri" and any(a != "whole" for a in args):
        raise ConfigError(f"line {line}: balance uri {' '.join(args)}: 'len', 'depth' and "
                          "'path-only' change what is hashed and are not supported")
    if algo == "url_param" and len(args) != 1:
        raise ConfigError(f"line {line}: balance url_param takes one parameter name "
                          "('check_post' is not supported)")
    return " ".join(words[1:])


def _haproxy_number(text: str | None, what: str, line: int, low: int, high: int) -> int:
    if text is None or not text.isdigit() or not low <= int(text) <= high:
        raise ConfigError(f"line {line}: {what} must be a whole number from {low} to {high}, "
                          f"not {text!r}")
    return int(text)


def _haproxy_server_params(params: list[str], line: int,
                           settings: dict[str, int | None]) -> dict[str, int | None]:
    """weight, id, disabled and backup of a server or default-server line,
    over the settings it starts from (other settings do not move keys)."""
    found = dict(settings)
    k = 0
    while k < len(params):
        param = params[k]
        value = params[k + 1] if k + 1 < len(params) else None
        if param == "weight":
            found["weight"] = _haproxy_number(value, "weight", line, 0, 256)
            k += 2
        elif param == "id":
            found["id"] = _haproxy_number(value, "id", line, 1, 2**31 - 1)
            k += 2
        elif param in ("disabled", "enabled"):
            found["disabled"] = int(param == "disabled")
            k += 1
        elif param == "hash-key":
            if value != "id":
                raise ConfigError(f"line {line}: hash-key {value}: HAProxy 3.0's other server "
                                  "keys (addr, addr-port, guid, id32) are not supported; 2.6 "
                                  "hashes the id")
            k += 2
        elif param in ("backup", "no-backup"):
            found["backup"] = int(param == "backup")
            k += 1
        else:
            k += 1
    return found


def haproxy_backend_config(cfg_text: str, backend: str) -> HaproxyBackend:
    """The ``balance``, ``hash-type`` and servers of ``backend`` (a
    ``backend`` or ``listen`` section); ``balance``, ``hash-type`` and
    ``default-server`` are inherited from the ``defaults`` section before
    it (or the one named by ``from``) when the backend does not set them.
    The servers come with the ids HAProxy 2.6 gives them.  ``ConfigError``
    naming the line for what chash cannot route like HAProxy."""
    found: _Section | None = None
    inherited: dict[str, tuple[list[str], int]] = {}
    named: dict[str, dict[str, tuple[list[str], int]]] = {}
    for section in _haproxy_sections(cfg_text):
        keyword, name, _, lines = section
        if keyword == "defaults":
            inherited = {words[0]: (words, n) for words, n in lines[1:]
                         if words[0] in ("balance", "hash-type", "default-server")}
            if name:
                named[name] = inherited
        elif keyword in ("backend", "listen") and name == backend:
            head = lines[0][0]
            if "from" in head[2:]:
                parent = head[head.index("from") + 1] if head.index("from") + 1 < len(head) else ""
                if parent not in named:
                    raise ConfigError(f"line {lines[0][1]}: no 'defaults {parent}' section "
                                      "before it")
                inherited = named[parent]
            found = section
            break
    if found is None:
        raise ConfigError(f"no 'backend {backend}' or 'listen {backend}' section in the "
                          "configuration")
    settings = dict(inherited)
    defaults: dict[str, int | None] = {"weight": 1, "disabled": 0, "backup": 0}
    if "default-server" in inherited:
        words, n = inherited["default-server"]
        defaults = _haproxy_server_params(words[1:], n, defaults)
    raw: list[tuple[str, dict[str, int | None], int]] = []
    for words, n in found[3][1:]:
        if words[0] in ("balance", "hash-type"):
            settings[words[0]] = (words, n)
        elif words[0] == "default-server":
            defaults = _haproxy_server_params(words[1:], n, defaults)
        elif words[0] == "server-template":
            raise ConfigError(f"line {n}: server-template is not supported: write the servers out")
        elif words[0] == "server":
            if len(words) < 2:
                raise ConfigError(f"line {n}: 'server' needs a name")
            raw.append((words[1], _haproxy_server_params(words[3:], n, {**defaults, "id": None}), n))
    line = found[2]
    if "balance" not in settings:
        raise ConfigError(f"line {line}: backend {backend} has no 'balance' line: HAProxy "
                          "balances it round robin, without a hash")
    balance = _haproxy_balance(*settings["balance"])
    if "hash-type" not in settings:
        raise ConfigError(f"line {line}: backend {backend} has no 'hash-type consistent' line: "
                          "HAProxy's default is map-based, a modulo table, not a ring")
    return HaproxyBackend(backend, balance, _haproxy_hash(*settings["hash-type"]),
                          _haproxy_number_servers(raw))


def _haproxy_number_servers(raw: list[tuple[str, dict[str, int | None], int]]
                            ) -> tuple[HaproxyServer, ...]:
    """Ids as HAProxy 2.6 gives them (cfgparse.c, check_config_validity):
    the explicit ids are all known first; then a counter from 1 walks the
    servers in config order, a server without an id taking the first free
    id at or after it, and moves one past the server (past the id taken,
    or one step for a server with its own id)."""
    used: dict[int, int] = {}
    for _, params, n in raw:
        puid = params["id"]
        if puid is not None:
            if puid in used:
                raise ConfigError(f"line {n}: id {puid} is already used on line {used[puid]}")
            used[puid] = n
    servers: list[HaproxyServer] = []
    seen: dict[str, int] = {}
    next_id = 1
    for name, params, n in raw:
        if name in seen:
            raise ConfigError(f"line {n}: a server named {name!r} is already on line "
                              f"{seen[name]}: the router's nodes need distinct names")
        seen[name] = n
        own = params["id"]
        if own is None:
            while next_id in used:
                next_id += 1
            puid = next_id
            used[puid] = n
        else:
            puid = own
        next_id += 1
        weight = params["weight"] or 0
        in_ring = weight > 0 and not params["disabled"] and not params["backup"]
        servers.append(HaproxyServer(name, weight, puid, in_ring, n))
    return tuple(servers)


def haproxy_servers(cfg_text: str, backend: str) -> list[HaproxyServer]:
    """The servers of ``backend`` in config order, with their ids
    (:func:`haproxy_backend_config`)."""
    return list(haproxy_backend_config(cfg_text, backend).servers)


def haproxy_backend(cfg_text: str, backend: str) -> ConsistentHashRouter:
    """A router that sends every key where HAProxy 2.6 sends it in
    ``backend`` (``balance`` hdr(NAME), uri, url_param, rdp-cookie(NAME) or
    hash EXPR, with ``hash-type consistent``): layout ``haproxy``, the
    hash function of ``hash-type``, node ids the server names, each with
    its weight and the id HAProxy gives it, added in config order.

    The key is the string HAProxy hashes: for ``hdr(NAME)`` the header's
    first value (up to a comma, blanks trimmed), for ``uri`` the URI up to
    the ``?`` (all of it with ``whole``), for ``url_param`` the parameter's
    value.  ``disabled``, ``backup`` and weight-0 servers hold no points.

    >>> router = haproxy_backend('''
    ... backend app
    ...     balance hdr(X-User)
    ...     hash-type consistent
    ...     server a 10.0.0.1:80 weight 2
    ...     server b 10.0.0.2:80 id 7
    ... ''', "app")
    >>> router.ids, router.points
    ({'a': 1, 'b': 7}, {'a': 32, 'b': 16})
    """
    config = haproxy_backend_config(cfg_text, backend)
    members = [server for server in config.servers if server.in_ring]
    if not members:
        raise ConfigError(f"backend {backend}: no server takes keys (every one is disabled, "
                          "backup or of weight 0)")
    router = ConsistentHashRouter(layout="haproxy", hash=config.hash)
    for server in members:
        router.add_service_node(server.name, server.weight, id=server.puid)
    return router
