"""Node ids as twemproxy and libmemcached spell them: the string each
hashes for a server (its name, else ``host:port``, or just ``host`` when
the port is 11211)."""
from __future__ import annotations

__all__ = ["KETAMA_DEFAULT_PORT", "libmemcached_id", "twemproxy_id"]

#: The port twemproxy and libmemcached leave out of a server's ring name.
KETAMA_DEFAULT_PORT = 11211


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
