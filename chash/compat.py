"""Rings that route exactly like nginx, twemproxy and libmemcached.

The layouts ``nginx``, ``ketama`` and ``libmemcached`` of
:class:`chash.ConsistentHashRouter` build those programs' rings; what they
need besides is each node id spelled as the program spells it, which is
what this module gives:

- :func:`twemproxy_id` / :func:`libmemcached_id`: the string twemproxy and
  libmemcached hash for a server (its name, else ``host:port``, or just
  ``host`` when the port is 11211);
- :func:`nginx_upstream`: a ready router from an nginx ``upstream`` block
  (``hash ... consistent`` and ``server ... weight=N`` lines);
- :func:`twemproxy_pool`: a ready router from a twemproxy (nutcracker)
  pool (``distribution: ketama``, ``hash: md5``);
- :func:`haproxy_backend`: a ready router from an HAProxy 2.6 backend with
  ``hash-type consistent`` (``balance``, ``hash-type`` and ``server``
  lines; layout ``haproxy``).

Configuration errors raise :class:`ConfigError` (a ``ValueError``) naming
the line.  No dependency: the small subsets of nginx's configuration
syntax, of HAProxy's and of YAML these files use are read here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chash._chash import ConsistentHashRouter

if TYPE_CHECKING:
    from chash._chash import HashName

__all__ = ["KETAMA_DEFAULT_PORT", "ConfigError", "HaproxyBackend", "HaproxyServer", "NginxServer",
           "TwemproxyServer", "haproxy_backend", "haproxy_backend_config", "haproxy_servers",
           "libmemcached_id", "nginx_servers", "nginx_upstream", "twemproxy_id", "twemproxy_pool",
           "twemproxy_servers"]

#: The port twemproxy and libmemcached leave out of a server's ring name.
KETAMA_DEFAULT_PORT = 11211


class ConfigError(ValueError):
    """A configuration chash cannot read or cannot route like its program;
    the message names the line."""


def twemproxy_id(host: str, port: int, name: str | None = None) -> str:
    """The string twemproxy hashes for a server: its name when it has one,
    else ``host:port``, or just ``host`` when the port is 11211 (kept out,
    as libmemcached does, so both rings agree).

    >>> twemproxy_id("10.0.0.1", 11211), twemproxy_id("10.0.0.1", 22122, "cache-a")
    ('10.0.0.1', 'cache-a')
    """
    if name:
        return name
    return host if port == KETAMA_DEFAULT_PORT else f"{host}:{port}"


def libmemcached_id(host: str, port: int = KETAMA_DEFAULT_PORT) -> str:
    """The string libmemcached (pylibmc, PHP memcached) hashes for a
    server: ``host:port``, or ``host`` when the port is 11211.  ``host`` is
    spelled as given to the client (a name is not resolved)."""
    return twemproxy_id(host, port)


# -- nginx ----------------------------------------------------------------------


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


# -- twemproxy ------------------------------------------------------------------


@dataclass(frozen=True)
class TwemproxyServer:
    """A server of a twemproxy pool, as written."""

    host: str
    port: int
    weight: int
    name: str | None
    line: int

    @property
    def node_id(self) -> str:
        """The string twemproxy hashes for it (:func:`twemproxy_id`)."""
        if self.host.startswith("/") and not self.name:
            return f"{self.host}:"  # a unix socket: twemproxy keeps the ':' of ":weight"
        return twemproxy_id(self.host, self.port, self.name)


_SERVER = re.compile(r"^(?P<addr>\S+?):(?P<port>\d+):(?P<weight>\d+)(?:\s+(?P<name>\S+))?$")
_SOCKET = re.compile(r"^(?P<addr>/\S+?):(?P<weight>\d+)(?:\s+(?P<name>\S+))?$")


def _yaml_scalar(text: str, line: int) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text[:1] in "\"'":
        raise ConfigError(f"line {line}: unterminated quoted string")
    return text


def _strip_comment(raw: str) -> str:
    # A '#' starts a comment at the start or after a blank, outside quotes.
    quote = ""
    for i, c in enumerate(raw):
        if quote:
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or raw[i - 1] in " \t"):
            return raw[:i]
    return raw


def _twemproxy_pools(yaml_text: str) -> dict[str, tuple[int, dict[str, tuple[str, int]],
                                                        list[tuple[str, int]]]]:
    """{pool: (line, {key: (scalar, line)}, [(server text, line)])} from
    the YAML subset nutcracker's files use."""
    pools: dict[str, tuple[int, dict[str, tuple[str, int]], list[tuple[str, int]]]] = {}
    current: tuple[int, dict[str, tuple[str, int]], list[tuple[str, int]]] | None = None
    in_servers = False
    key_indent = -1
    for number, raw in enumerate(yaml_text.splitlines(), start=1):
        body = _strip_comment(raw).rstrip()
        if not body.strip() or body.strip() in ("---", "..."):
            continue
        if "\t" in body[: len(body) - len(body.lstrip())]:
            raise ConfigError(f"line {number}: YAML does not allow tabs for indentation")
        indent = len(body) - len(body.lstrip(" "))
        text = body.strip()
        if indent == 0:
            if not text.endswith(":"):
                raise ConfigError(f"line {number}: expected 'POOL_NAME:', got {text!r}")
            pool = _yaml_scalar(text[:-1], number)
            if pool in pools:
                raise ConfigError(f"line {number}: pool {pool!r} is defined twice")
            current = (number, {}, [])
            pools[pool] = current
            in_servers, key_indent = False, -1
            continue
        if current is None:
            raise ConfigError(f"line {number}: indented line outside a pool")
        if text.startswith("- ") or text == "-":
            if not in_servers:
                raise ConfigError(f"line {number}: a list item outside 'servers:'")
            current[2].append((_yaml_scalar(text[1:], number), number))
            continue
        key, sep, value = text.partition(":")
        if not sep:
            raise ConfigError(f"line {number}: expected 'key: value', got {text!r}")
        if key_indent == -1:
            key_indent = indent
        elif indent != key_indent:
            raise ConfigError(f"line {number}: unexpected indentation")
        key = key.strip()
        if key in current[1] or (key == "servers" and current[2]):
            raise ConfigError(f"line {number}: {key!r} is set twice")
        if key == "servers":
            if value.strip():
                raise ConfigError(f"line {number}: 'servers:' must be followed by a list, one "
                                  "'- host:port:weight [name]' a line")
            in_servers = True
            current[1][key] = ("", number)
        else:
            in_servers = False
            current[1][key] = (_yaml_scalar(value, number), number)
    return pools


def twemproxy_servers(yaml_text: str, pool: str) -> list[TwemproxyServer]:
    """The servers of a pool in the order twemproxy builds its ring from
    them: sorted by ring name, shorter names first, then bytewise.
    ``ConfigError`` naming the line when the pool is missing or does not
    hash like libketama (``distribution: ketama`` and ``hash: md5``)."""
    pools = _twemproxy_pools(yaml_text)
    if pool not in pools:
        raise ConfigError(f"no pool {pool!r} in the configuration (pools: "
                          f"{', '.join(sorted(pools)) or 'none'})")
    line, keys, items = pools[pool]
    dist, dist_line = keys.get("distribution", ("ketama", line))
    if dist != "ketama":
        raise ConfigError(f"line {dist_line}: distribution {dist!r}: chash routes twemproxy's "
                          "'ketama' distribution only")
    hash_name, hash_line = keys.get("hash", ("fnv1a_64", line))
    if hash_name != "md5":
        raise ConfigError(f"line {hash_line}: hash {hash_name!r}: chash routes twemproxy's ketama "
                          "ring with 'hash: md5' (libketama's key hash) only"
                          + ("; twemproxy's default is fnv1a_64" if "hash" not in keys else ""))
    if not items:
        raise ConfigError(f"line {line}: pool {pool!r} has no servers")
    servers: list[TwemproxyServer] = []
    for text, number in items:
        match = _SERVER.match(text)
        socket = None if match else _SOCKET.match(text)
        if match:
            port = int(match["port"])
            if not 0 < port < 65536:
                raise ConfigError(f"line {number}: invalid port {port}")
            host = match["addr"]
        elif socket:
            match, port, host = socket, 0, socket["addr"]
        else:
            raise ConfigError(f"line {number}: expected 'host:port:weight [name]' or "
                              f"'/path/to/socket:weight [name]', got {text!r}")
        weight = int(match["weight"])
        if weight < 1:
            raise ConfigError(f"line {number}: the weight must be >= 1")
        servers.append(TwemproxyServer(host, port, weight, match["name"], number))
    seen: dict[str, int] = {}
    for server in servers:
        if server.node_id in seen:
            raise ConfigError(f"line {server.line}: a server named {server.node_id!r} is already "
                              f"on line {seen[server.node_id]}")
        seen[server.node_id] = server.line
    servers.sort(key=lambda s: (len(s.node_id.encode("utf-8")), s.node_id.encode("utf-8")))
    return servers


def twemproxy_pool(yaml_text: str, pool: str) -> ConsistentHashRouter:
    """A router that sends every key where twemproxy (nutcracker 0.5) sends
    it in pool ``pool`` (``distribution: ketama``, ``hash: md5``): node ids
    as :func:`twemproxy_id` spells them, added in twemproxy's order (sorted
    by name), with their weights.  Servers ejected by
    ``auto_eject_hosts`` are not followed: remove them from the router.

    >>> router = twemproxy_pool('''alpha:
    ...   listen: 127.0.0.1:22121
    ...   hash: md5
    ...   distribution: ketama
    ...   servers:
    ...    - 127.0.0.1:11211:1
    ...    - 127.0.0.1:11212:1 cache-b
    ... ''', "alpha")
    >>> router.nodes
    ['cache-b', '127.0.0.1']
    """
    servers = twemproxy_servers(yaml_text, pool)
    router = ConsistentHashRouter(layout="ketama")
    ids = [server.node_id for server in servers]
    weights = {server.weight for server in servers}
    if len(weights) == 1:
        router.add_service_nodes(ids, weights.pop())
    else:
        # One node at a time rebuilds the ring each time; a pickle-style
        # rebuild takes them all at once.
        from chash._chash import _rebuild
        router = _rebuild(ConsistentHashRouter, router.virtual_node_count, "md5", "ketama",
                          [(s.node_id, float(s.weight)) for s in servers])
    return router


# -- HAProxy --------------------------------------------------------------------

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
