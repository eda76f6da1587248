"""Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam).

Plain consistent hashing ignores live load: a hot key range can pile
requests onto one node.  With a balance factor ``c`` and ``t`` requests in
flight, the cluster has ``T = ceil(c * (t + 1))`` slots and a node of
weight ``w`` out of a total ``W`` may hold ``max(ceil(T * w / W), 1)`` of
them (Envoy's ``hash_balance_factor`` rule with weights; with equal
weights, ``ceil(c * (t + 1) / n)``).  A key goes to the first node of its
router's preference list that is below its bound, so under light load
every key still goes to its owner, and under heavy load the overflow
spills to the next nodes in the router's own order (clockwise on a ring,
the next score for rendezvous, the next buckets for jump, the next table
entries for Maglev), never anywhere random.

The bookkeeping is in C (``chash._chash.BoundedLoads`` over the engine's
load table); this module adds ``route()``.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from chash._chash import BoundedLoads

__all__ = ["BoundedLoadRouter"]


class BoundedLoadRouter(BoundedLoads):
    """Routes keys through ``router`` while capping each node's in-flight load.

    ``router`` is a ``ConsistentHashRouter`` (any layout), ``MaglevRouter``,
    ``JumpRouter`` or ``RendezvousRouter``, or any object with their
    ``get_target_node``, ``get_preference_list`` and ``weights`` (or
    iterable nodes).  A node's bound follows its weight.

    Thread-safe, with or without the GIL: every acquire and release takes
    the object's own lock (each changes the load table), so calls on one
    BoundedLoadRouter run one at a time.  Every ``acquire`` must be paired with one ``release`` of the
    node it returned (``route()`` does both).  Nodes removed from the
    underlying router keep their in-flight count until released, and are
    never chosen again; weight changes take effect on the next acquire.
    """

    @contextmanager
    def route(self, key: str | bytes) -> Iterator[str]:
        """``with bounded.route(key) as node:`` acquires and always releases."""
        node = self.acquire(key)
        try:
            yield node
        finally:
            self.release(node)
