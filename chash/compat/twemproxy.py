"""Routers from twemproxy's (nutcracker's) configuration: a pool with
``distribution: ketama`` and ``hash: md5``, read with the small subset of
YAML its files use."""
from __future__ import annotations

import re
from dataclasses import dataclass

from chash._chash import ConsistentHashRouter
from chash.compat.errors import ConfigError
from chash.compat.node_ids import twemproxy_id

__all__ = ["TwemproxyServer", "twemproxy_pool", "twemproxy_servers"]


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
