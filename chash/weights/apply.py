"""Setting one node's weight on a router in one step.

``add_service_node`` of a node already present changes its weight in
place, all-or-nothing: the node gains or loses points of its own only, and
a lookup in another thread sees the old ring or the new one, never the
node missing, as a remove followed by an add would show it.
"""
from __future__ import annotations

from chash.routers import MutableRouter

#: The routers whose weights are set here (``chash.routers.MutableRouter``;
#: the old name, kept).
WeightedRouter = MutableRouter


def weight_rule(router: MutableRouter) -> str:
    """The weights the router's layout takes, as the router itself says
    (``weight_rule``: "real", "whole", "at_least_one" or "none")."""
    return router.weight_rule


def whole_weights(router: MutableRouter) -> bool:
    """True when the router's layout takes whole-number weights only."""
    return weight_rule(router) == "whole"


def weightless(router: MutableRouter) -> bool:
    """True when the router's layout has no weights (nghttpx's affinity
    ring, pymemcache's and Caddy's rendezvous, jump): nothing to ramp or
    steer."""
    return weight_rule(router) == "none"


def set_weight(router: MutableRouter, node: str, weight: float) -> float:
    """Gives ``node`` (in the router) this weight, rounded to a whole number
    >= 1 on layouts that need one (raised to 1 on varnish's, which takes
    real weights from 1); returns the weight set.  KeyError for a node not
    in the router, ValueError for a weight that is not > 0 or for a
    weightless layout's other than 1."""
    if not weight > 0:
        raise ValueError(f"weight must be > 0, not {weight!r}")
    if weightless(router) and weight != 1:
        raise ValueError(f"the {router.layout} layout has no weights: every node's is 1")
    if whole_weights(router):
        weight = float(max(1, round(weight)))
    elif weight_rule(router) == "at_least_one":
        weight = max(1.0, float(weight))
    weights = router.weights
    if node not in weights:
        raise KeyError(node)
    if weights[node] != weight:
        router.add_service_node(node, weight)
    return weight
