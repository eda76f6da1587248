"""``patch_memcache()``: python-memcached's ``Client`` picking its servers
with :class:`~chash.compat.uhashring.HashRing`, as uhashring's
``monkey.patch_memcache`` does.

After the patch a new ``memcache.Client`` builds a ring of its servers
(keyed by each server's address, with its weight, port and the server
object as the instance) in ``client.uhashring``; a key goes to the first
server along the ring from it that connects, trying the ring
``_SERVER_RETRIES`` times; a ``(hash, key)`` tuple key keeps the client's
own choice.  Patching twice wraps the already patched methods again, as
uhashring's does.
"""
from __future__ import annotations

from typing import Any

from chash._optional import require
from chash.compat.uhashring.ring import HashRing

__all__ = ["patch_memcache"]


def patch_memcache() -> None:
    """Make python-memcached's ``memcache.Client`` place keys on a
    ``HashRing`` of its servers (``ImportError`` without python-memcached)."""
    memcache: Any = require("memcache", user="chash.compat.uhashring.monkey", extra="memcache",
                            package="python-memcached")
    client = memcache.Client

    def _init(self: Any, servers: Any, *args: Any, **kwargs: Any) -> None:
        self._old_init(servers, *args, **kwargs)
        nodes = {server.ip: {"hostname": server.ip, "instance": server, "port": server.port,
                             "weight": server.weight} for server in self.servers}
        self.uhashring = HashRing(nodes)

    def _get_server(self: Any, key: Any) -> tuple[Any, Any]:
        if isinstance(key, tuple):
            return self._old_get_server(key)  # type: ignore[no-any-return]
        for _ in range(self._SERVER_RETRIES):
            for node in self.uhashring.range(key):
                if node["instance"].connect():
                    return node["instance"], key
        return None, None

    client._old_get_server = client._get_server
    client._old_init = client.__init__
    client.__init__ = _init
    client._get_server = _get_server
