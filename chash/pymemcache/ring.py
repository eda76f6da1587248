"""The hasher pymemcache's ``HashClient`` asks where a key goes, over a chash ring.

pymemcache names each server ``"HOST:PORT"`` (or a unix socket's path) and
calls the hasher's ``add_node``, ``remove_node`` and ``get_node``; this
module answers them from a :class:`chash.ConsistentHashRouter`.  On the
ring a server is named as libmemcached spells it
(:func:`chash.compat.libmemcached_id`: ``host:port``, or ``host`` alone on
port 11211), so the layouts ``"libmemcached"`` and ``"ketama"`` place
every key where pylibmc, PHP's memcached extension and twemproxy do.  No
pymemcache import here: the hasher is plain chash.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from chash._chash import ConsistentHashRouter
from chash.compat import libmemcached_id

if TYPE_CHECKING:
    from chash._chash import LayoutName

__all__ = ["RingHasher", "hasher", "ring_name"]

Key = str | bytes


def ring_name(server: str) -> str:
    """The ring name of a pymemcache server key: ``"10.0.0.1:11211"`` is
    ``"10.0.0.1"``, ``"10.0.0.1:11212"`` stays, a socket path stays."""
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return server
    return libmemcached_id(host, int(port))


def _check_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    if weights is None:
        return {}
    if not isinstance(weights, Mapping):
        raise TypeError(f"weights must be a mapping of 'HOST:PORT' to a weight, not {weights!r}")
    checked: dict[str, float] = {}
    for server, weight in weights.items():
        if not isinstance(server, str):
            raise TypeError(f"weights are keyed by 'HOST:PORT' strings, not {server!r}")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            raise ValueError(f"the weight of {server!r} must be a number > 0, not {weight!r}")
        checked[server] = float(weight)
    return checked


class RingHasher:
    """A pymemcache hasher over a chash ring; build its classes with
    :func:`hasher`.  pymemcache creates it with no argument, so the layout,
    router options and weights are the class's."""

    layout: ClassVar[LayoutName] = "libmemcached"
    router_options: ClassVar[Mapping[str, Any]] = {}
    weights: ClassVar[Mapping[str, float]] = {}

    def __init__(self) -> None:
        self._router = ConsistentHashRouter(layout=self.layout, **self.router_options)
        self._servers: dict[str, str] = {}   # ring name -> pymemcache's server key

    @property
    def router(self) -> ConsistentHashRouter:
        """The ring: the servers pymemcache holds alive, by ring name."""
        return self._router

    @property
    def nodes(self) -> list[str]:
        """pymemcache's keys of the servers on the ring."""
        return [self._servers[name] for name in self._router.nodes]

    def add_node(self, node: str) -> None:
        """Puts ``node`` (pymemcache's ``"HOST:PORT"``) on the ring with its
        weight; a node already there is left as it is."""
        name = ring_name(node)
        owner = self._servers.get(name)
        if owner == node:
            return
        if owner is not None:
            raise ValueError(f"{node!r} and {owner!r} have one ring name, {name!r}")
        self._router.add_service_node(name, self.weights.get(node, 1.0))
        self._servers[name] = node

    def remove_node(self, node: str) -> None:
        """Takes ``node`` off the ring: only its keys move.  ValueError when
        it is not on it (as pymemcache's own hasher)."""
        name = ring_name(node)
        if self._servers.get(name) != node:
            raise ValueError(f"No such node {node} to remove")
        self._router.remove_service_node(name)
        del self._servers[name]

    def get_node(self, key: Key) -> str | None:
        """pymemcache's key of the server owning ``key``; None when the ring
        is empty."""
        name = self._router.get_target_node(key)
        return None if name is None else self._servers[name]


def hasher(layout: LayoutName = "libmemcached", *, weights: Mapping[str, float] | None = None,
           **router_options: Any) -> type[RingHasher]:
    """A hasher class for pymemcache's own ``HashClient(servers,
    hasher=chash.pymemcache.hasher())``: keys placed by a chash ring of
    ``layout`` (any :class:`chash.ConsistentHashRouter` layout;
    ``"libmemcached"`` and ``"ketama"`` agree with libmemcached and
    twemproxy), servers weighted by ``weights`` (``{"HOST:PORT": w}``);
    ``router_options`` go to the router (``hash=``, ``virtual_node_count=``).
    Bad options raise here, not when pymemcache builds the hasher."""
    checked = _check_weights(weights)
    options = dict(router_options)
    ConsistentHashRouter(layout=layout, **options)  # the router's own errors, now
    return type("RingHasher", (RingHasher,), {
        "layout": layout, "router_options": options, "weights": checked,
        "__doc__": f"A pymemcache hasher over a chash ring of layout {layout!r}.",
    })
