"""chash.weights: one node's weight changed in one step moves keys only to
or from that node (checked with router.diff), slow start's ramp, and the
load controller's damped, bounded steps."""
from __future__ import annotations

import math
import pickle

import pytest

from chash import ConsistentHashRouter
from chash.weights import LoadController, SlowStart, set_weight

NAMES = [f"node-{i}" for i in range(6)]


def ring(layout: str = "python") -> ConsistentHashRouter:
    router = ConsistentHashRouter(layout=layout)  # type: ignore[arg-type]
    for name in NAMES:
        router.add_service_node(name)
    return router


def only_touches(before: ConsistentHashRouter, after: ConsistentHashRouter, node: str) -> bool:
    moves = before.diff(after)
    return bool(moves) and all(node in (m.source, m.target) for m in moves)


@pytest.mark.parametrize("layout", ["python", "node", "nginx"])
def test_set_weight_moves_only_that_nodes_keys(layout: str) -> None:
    router = ring(layout)
    before = pickle.loads(pickle.dumps(router))
    assert set_weight(router, "node-2", 3) == 3.0
    assert router.weights["node-2"] == 3.0 and list(router.nodes) == NAMES
    assert only_touches(before, router, "node-2")
    keys = [f"k{i}" for i in range(2000)]
    for key in keys:
        a, b = before.get_target_node(key), router.get_target_node(key)
        assert a == b or b == "node-2"  # a heavier node only gains keys


def test_set_weight_rounds_and_checks() -> None:
    router = ring("ketama")
    assert set_weight(router, "node-0", 2.4) == 2.0
    with pytest.raises(KeyError):
        set_weight(router, "nope", 1.0)
    with pytest.raises(ValueError, match="> 0"):
        set_weight(router, "node-0", 0)
    assert router.weights["node-0"] == 2.0


def test_slow_start_ramps_linearly_then_stops() -> None:
    ramp = SlowStart(10.0, floor=0.1)
    assert ramp.begin("n", 2.0, now=100.0) == pytest.approx(0.2)
    assert ramp.weight("n", 100.5) == pytest.approx(0.2)  # the floor
    assert ramp.step(105.0) == {"n": pytest.approx(1.0)}
    assert ramp.ramping() == ["n"]
    assert ramp.step(110.0) == {"n": pytest.approx(2.0)}  # full, answered once more
    assert ramp.ramping() == [] and ramp.step(111.0) == {}
    assert ramp.weight("n", 111.0) is None
    ramp.begin("n", 1.0, now=200.0)
    ramp.forget("n")
    assert ramp.ramping() == []
    for bad in (0, -1, math.inf):
        with pytest.raises(ValueError, match="duration"):
            SlowStart(bad)
    with pytest.raises(ValueError, match="floor"):
        SlowStart(1.0, floor=0)


def test_slow_start_applied_moves_only_the_ramping_node() -> None:
    router = ring()
    router.remove_service_node("node-5")
    ramp = SlowStart(4.0, floor=0.25)
    router.add_service_node("node-5", ramp.begin("node-5", 1.0, now=0.0))
    for now in (2.0, 3.0, 4.0):  # at 1.0 the ramp is still at its floor
        before = pickle.loads(pickle.dumps(router))
        for node, weight in ramp.step(now).items():
            set_weight(router, node, weight)
        assert only_touches(before, router, "node-5")
    assert router.weights["node-5"] == 1.0


def test_load_controller_moves_the_hot_node_down_boundedly() -> None:
    ctl = LoadController(min_weight=0.5, max_weight=2.0, damping=0.5, max_step=1.25)
    weights = dict.fromkeys(NAMES, 1.0)
    loads = dict.fromkeys(NAMES, 100.0)
    assert ctl.propose(weights, loads) is None  # balanced
    loads["node-3"] = 400.0
    node, weight = ctl.propose(weights, loads)  # type: ignore[misc]
    assert node == "node-3" and weight == pytest.approx(1 / 1.25)  # bounded step
    router = ring()
    before = pickle.loads(pickle.dumps(router))
    set_weight(router, node, weight)
    assert only_touches(before, router, "node-3")
    # Repeated steps stop at min_weight.
    for _ in range(10):
        proposal = ctl.propose(weights, loads)
        if proposal is None:
            break
        weights[proposal[0]] = proposal[1]
    assert weights["node-3"] == 0.5
    # A cold node goes up, damped: (mean/load) ** 0.5.
    cold = dict.fromkeys(NAMES, 100.0)
    cold["node-1"] = 80.0
    node, weight = LoadController(max_step=4).propose(dict.fromkeys(NAMES, 1.0), cold)  # type: ignore[misc]
    share = 80.0 / (sum(cold.values()) / len(NAMES))
    assert node == "node-1" and weight == pytest.approx(share ** -0.5)
    with pytest.raises(ValueError):
        LoadController(damping=2)
    with pytest.raises(ValueError):
        LoadController(min_weight=3, max_weight=2)
    assert ctl.propose(weights, {}) is None


def test_set_weight_follows_each_layouts_weights() -> None:
    from chash import RendezvousRouter
    from chash.weights import weightless

    varnish = ConsistentHashRouter(layout="varnish")
    varnish.add_service_nodes(["a", "b"])
    assert set_weight(varnish, "a", 0.3) == 1.0 and varnish.points["a"] == 67  # from 1
    assert set_weight(varnish, "a", 2.5) == 2.5 and varnish.points["a"] == 167
    envoy = ConsistentHashRouter(layout="envoy")
    envoy.add_service_nodes(["a", "b"])
    assert set_weight(envoy, "a", 2.4) == 2.0 and envoy.weights["a"] == 2.0  # whole
    squid = RendezvousRouter(layout="squid")
    squid.add_service_nodes(["a", "b"])
    assert set_weight(squid, "b", 0.2) == 1.0
    for router in (ConsistentHashRouter(layout="nghttpx"), RendezvousRouter(layout="caddy"),
                   RendezvousRouter(layout="pymemcache")):
        assert weightless(router)
        node = "10.0.0.1:80" if router.layout == "nghttpx" else "a"
        router.add_service_node(node)
        assert set_weight(router, node, 1.0) == 1.0
        with pytest.raises(ValueError, match="has no weights"):
            set_weight(router, node, 0.5)
        assert router.weights[node] == 1.0
    assert not weightless(varnish) and not weightless(RendezvousRouter())


RULES = [("ConsistentHashRouter", layout, rule) for layout, rule in (
    ("python", "real"), ("node", "real"), ("ketama", "whole"), ("nginx", "whole"),
    ("libmemcached", "whole"), ("haproxy", "whole"), ("varnish", "at_least_one"),
    ("nghttpx", "none"), ("envoy", "whole"), ("grpc", "whole"))] + [
    ("MaglevRouter", "envoy", "whole"), ("JumpRouter", "jump", "none"),
    ("JumpRouter", "guava", "none"), ("RendezvousRouter", "hrw", "real"),
    ("RendezvousRouter", "pymemcache", "none"), ("RendezvousRouter", "caddy", "none"),
    ("RendezvousRouter", "squid", "whole")]


@pytest.mark.parametrize("cls,layout,rule", RULES)
def test_weight_rule_is_what_the_layout_takes(cls: str, layout: str, rule: str) -> None:
    import chash
    from chash.weights import weightless, whole_weights

    router = getattr(chash, cls)(layout=layout)
    assert router.weight_rule == rule
    assert weightless(router) == (rule == "none") and whole_weights(router) == (rule == "whole")
    node = "10.0.0.1:80"
    # Each weight the rule refuses raises, and leaves the router without the node.
    refused = {"real": [0.0, -1.0], "whole": [1.5, 0.5], "at_least_one": [0.5],
               "none": [2.0, 0.5]}[rule]
    for weight in refused:
        with pytest.raises(ValueError):
            router.add_service_node(node, weight)
        assert node not in router
    # ... and each weight it takes is taken.
    taken = {"real": [0.5, 2.5], "whole": [3.0], "at_least_one": [1.5], "none": [1.0]}[rule]
    for weight in taken:
        router.add_service_node(node, weight)
        assert router.weights[node] == weight
    assert set_weight(router, node, 1.0) == 1.0


def test_jump_router_is_weightless() -> None:
    from chash import JumpRouter
    from chash.weights import weightless

    jump = JumpRouter()
    assert weightless(jump)
    jump.add_service_node("a")
    with pytest.raises(ValueError, match="has no weights"):
        set_weight(jump, "a", 2.0)
    assert set_weight(jump, "a", 1.0) == 1.0
