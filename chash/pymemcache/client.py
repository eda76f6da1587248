"""``HashClient``: pymemcache's ``HashClient`` with a chash ring placing the keys."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from chash._optional import require
from chash.pymemcache.ring import RingHasher, hasher

if TYPE_CHECKING:
    from pymemcache.client.hash import HashClient as _Base  # type: ignore[import-untyped]

    from chash._chash import LayoutName
else:
    require("pymemcache", user="chash.pymemcache", extra="pymemcache")
    _Base = require("pymemcache.client.hash", user="chash.pymemcache",
                    extra="pymemcache", package="pymemcache").HashClient

__all__ = ["HashClient"]


def _server_key(server: object) -> str:
    if isinstance(server, str):
        return server
    if isinstance(server, tuple | list) and len(server) == 2:
        return f"{server[0]}:{server[1]}"
    raise TypeError(f"a server is 'HOST:PORT', (host, port) or a socket path, not {server!r}")


class HashClient(_Base):  # type: ignore[misc]
    """pymemcache's ``HashClient`` whose keys are placed by a chash ring.

    ``servers`` as pymemcache takes them (``"HOST:PORT"``, ``(host, port)``,
    a socket path); ``layout`` any ring layout (``"libmemcached"``, the
    default, and ``"ketama"`` agree key for key with pylibmc/libmemcached
    and twemproxy); ``weights={"HOST:PORT": w}``; every other keyword is
    pymemcache's (``retry_attempts``, ``dead_timeout``, ``use_pooling``,
    ``serde``, ...).  A server pymemcache marks dead leaves the ring, and
    comes back to it after ``dead_timeout``: only its keys move.
    """

    def __init__(self, servers: Iterable[Any], *, layout: LayoutName = "libmemcached",
                 weights: Mapping[str, float] | None = None, **kwargs: Any) -> None:
        if "hasher" in kwargs:
            raise TypeError("chash.pymemcache.HashClient places keys itself; pass layout= "
                            "(or use pymemcache's HashClient with hasher=chash.pymemcache.hasher())")
        servers = list(servers)
        known = {_server_key(s) for s in servers}
        unknown = sorted(set(weights or {}) - known)
        if unknown:
            raise ValueError(f"weights for servers not in the list: {unknown}")
        super().__init__(servers, hasher=hasher(layout, weights=weights), **kwargs)

    @property
    def ring(self) -> RingHasher:
        """The hasher: its ``router`` holds the servers alive now."""
        ring: RingHasher = self.hasher
        return ring
