"""Setting one node's weight on a router in one step.

The router is rebuilt with every node at its weight but this one's
changed (``_replace_nodes``, all-or-nothing, the add order kept so ties
break the same way): a lookup in another thread sees the old ring or the
new one, never the node missing, as a remove followed by an add would
show it.
"""
from __future__ import annotations

from typing import Protocol

#: Layouts whose weights are whole numbers (their references' integer weights).
_WHOLE = frozenset({"ketama", "nginx", "libmemcached", "haproxy"})


class WeightedRouter(Protocol):
    """The part of ``chash.ConsistentHashRouter`` used here."""

    @property
    def nodes(self) -> list[str] | tuple[str, ...]: ...

    @property
    def weights(self) -> dict[str, float]: ...

    @property
    def layout(self) -> str: ...

    def _replace_nodes(self, nodes: list[tuple[str, float]], /) -> None: ...


def whole_weights(router: WeightedRouter) -> bool:
    """True when the router's layout takes whole-number weights only."""
    return router.layout in _WHOLE


def set_weight(router: WeightedRouter, node: str, weight: float) -> float:
    """Gives ``node`` (in the router) this weight, rounded to a whole number
    >= 1 on layouts that need one; returns the weight set.  KeyError for a
    node not in the router, ValueError for a weight that is not > 0."""
    if not weight > 0:
        raise ValueError(f"weight must be > 0, not {weight!r}")
    if whole_weights(router):
        weight = float(max(1, round(weight)))
    weights = router.weights
    if node not in weights:
        raise KeyError(node)
    if weights[node] != weight:
        router._replace_nodes([(n, weight if n == node else weights[n]) for n in router.nodes])
    return weight
