"""HashRing.get_bounded against a Python model of the rule.

The model walks the ring from the points uhashring shows
(``get_points``, ``get_node_pos``), not through the walk get_bounded uses,
and applies the bound written out: ``T = ceil(c * (t + 1))`` over the
loads of the nodes the ring holds, a node of weight ``w`` of ``W`` below
``max(ceil(T * w / W), 1)``.
"""
from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chash.compat.uhashring import HashRing


def model(ring: HashRing, key: Any, loads: dict[Any, float], c: float) -> Any:
    points = ring.get_points()
    if not points:
        return None
    pos = ring.get_node_pos(key)
    order = list(dict.fromkeys(name for _, name in points[pos:] + points[:pos]))
    held = {name: load for name, load in loads.items() if name in ring.nodes}
    slots = math.ceil(c * (sum(held.values()) + 1))
    total_weight = sum(conf["weight"] for conf in ring.nodes.values())
    for name in order:
        if held.get(name, 0) < max(math.ceil(slots * ring.nodes[name]["weight"] / total_weight), 1):
            return name
    return order[0]


MODES = [{}, {"hash_fn": "ketama"}]
KEYS = [f"session-{i}" for i in range(300)]


@given(mode=st.sampled_from(MODES), weights=st.lists(st.integers(1, 5), min_size=1, max_size=12),
       loads=st.dictionaries(st.sampled_from([f"engine-{i}" for i in range(14)] + ["gone"]),
                             st.one_of(st.integers(0, 40), st.floats(0, 40)), max_size=14),
       c=st.sampled_from([1, 1.1, 1.25, 2.0, 3]))
def test_get_bounded_follows_the_rule(mode: dict[str, Any], weights: list[int], loads: dict[str, float],
                                      c: float) -> None:
    ring = HashRing({f"engine-{i}": w for i, w in enumerate(weights)}, vnodes=20, **mode)
    for key in KEYS[:60]:
        assert ring.get_bounded(key, loads, c) == model(ring, key, loads, c)


def test_no_load_is_get_node_and_a_loaded_owner_spills_clockwise() -> None:
    ring = HashRing([f"engine-{i}" for i in range(8)])
    assert all(ring.get_bounded(k, {}) == ring.get_node(k) for k in KEYS)
    assert all(ring.get_bounded(k, dict.fromkeys(ring.nodes, 0)) == ring.get_node(k) for k in KEYS)
    owner = ring.get_node("hot")
    nxt = list(ring.iterate_nodes("hot"))[1]
    # 8 nodes, t = 30 in flight, c = 1.25: T = 39, each node may hold 5.
    assert ring.get_bounded("hot", {owner: 5, nxt: 25}) == list(ring.iterate_nodes("hot"))[2]
    assert ring.get_bounded("hot", {owner: 4, nxt: 26}) == owner
    assert ring.get_bounded("hot", {owner: 5, "not-a-node": 10**6}) == nxt


def test_empty_ring_and_bad_arguments() -> None:
    assert HashRing().get_bounded("k", {"a": 1}) is None
    ring = HashRing(["a", "b"])
    for loads, error, words in (({"a": -1}, ValueError, "load of 'a'"), ({"a": math.nan}, ValueError, "load of 'a'"),
                                ({"b": "3"}, TypeError, "load of 'b'"), ({"b": None}, TypeError, "load of 'b'")):
        with pytest.raises(error, match=words):
            ring.get_bounded("k", loads)
    assert ring.get_bounded("k", {"elsewhere": -1}) == ring.get_node("k")  # ignored: not a node here
    for c, error in ((0.5, ValueError), (math.nan, ValueError), (math.inf, ValueError), ("2", TypeError)):
        with pytest.raises(error, match="balance_factor"):
            ring.get_bounded("k", {}, c)  # type: ignore[arg-type]
