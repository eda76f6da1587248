"""HashRing.get_bounded against a Python model of the rule.

The model walks the ring from the points uhashring shows
(``get_points``, ``get_node_pos``), not through the walk get_bounded uses,
and applies the bound written out: ``T = ceil(c * (t + 1))`` over the
loads of the nodes the ring holds, a node of weight ``w`` of ``W`` below
``max(ceil(T * w / W), 1)``.
"""
from __future__ import annotations

import math
import sysconfig
import types
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _support.leaks import RefsGained
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


def test_a_python_hash_fn_ring_follows_the_rule() -> None:
    ring = HashRing({f"engine-{i}": 1 + i % 3 for i in range(9)}, vnodes=12,
                    hash_fn=lambda key: hash(str(key)) & 0xFFFFFFFF)
    loads = {f"engine-{i}": (i * 7) % 11 for i in range(9)} | {"gone": 3}
    for key in KEYS[:100]:
        assert ring.get_bounded(key, loads) == model(ring, key, loads, 1.25)


class Name(str):
    """A str subclass: a name the ring's index cannot answer for."""


def copy_of(name: str) -> str:
    copy = "".join(list(name))
    assert copy == name and copy is not name
    return copy


@pytest.mark.parametrize("mode", MODES)
def test_names_that_are_other_objects_and_not_str(mode: dict[str, Any]) -> None:
    ring = HashRing({f"engine-{i}": 1 + i % 4 for i in range(10)}, vnodes=16, **mode)
    same = {f"engine-{i}": (i * 5) % 9 for i in range(10)}
    variants = [same, {copy_of(n): v for n, v in same.items()}, {Name(n): v for n, v in same.items()},
                {(copy_of(n) if i % 2 else Name(n)): v for i, (n, v) in enumerate(same.items())}]
    for key in KEYS[:150]:
        expected = model(ring, key, same, 1.1)
        assert all(ring.get_bounded(key, loads, 1.1) == expected for loads in variants)
    numbered = HashRing({i: 1 + i % 2 for i in range(8)}, vnodes=16, **mode)
    int_loads = {i: (i * 3) % 5 for i in range(10)}
    for key in KEYS[:150]:
        assert numbered.get_bounded(key, int_loads) == model(numbered, key, int_loads, 1.25)


@pytest.mark.parametrize("mode", MODES)
def test_equal_names_are_learned_until_the_next_change(mode: dict[str, Any]) -> None:
    # As a router's: the first equal names met are held and found by
    # address (with the GIL), other copies by value; after a change the
    # next call remakes the view and lets them go (it learns again).
    ring = HashRing({f"engine-{i}": 1 + i % 3 for i in range(8)}, vnodes=16, **mode)
    same = {f"engine-{i}": (i * 5) % 9 for i in range(8)}
    first = {copy_of(n): v for n, v in same.items()}
    second = {copy_of(n): v for n, v in same.items()}
    refs = RefsGained(first, second).gained

    learns = not sysconfig.get_config_var("Py_GIL_DISABLED")
    for key in KEYS[:150]:
        expected = model(ring, key, same, 1.1)
        assert ring.get_bounded(key, first, 1.1) == expected == ring.get_bounded(key, second, 1.1)
    assert (refs(first), refs(second)) == ([int(learns)] * 8, [0] * 8)
    ring.remove_node("engine-7")
    for key in KEYS[:150]:
        assert ring.get_bounded(key, first, 1.1) == model(ring, key, same, 1.1) != "engine-7"
    assert refs(first) == [int(learns and name != "engine-7") for name in first]
    del ring
    assert refs(first) == [0] * 8


@pytest.mark.parametrize("mode", MODES)
def test_every_change_is_seen_by_the_next_call(mode: dict[str, Any]) -> None:
    # The names and weights get_bounded reads are remade after each change:
    # a node removed, added (as another str object), or weighed again.
    ring = HashRing({f"engine-{i}": 1 for i in range(6)}, vnodes=16, **mode)
    loads = {f"engine-{i}": 1 + (i * 3) % 7 for i in range(10)}

    def check() -> None:
        for key in KEYS[:60]:
            assert ring.get_bounded(key, loads, 1.1) == model(ring, key, loads, 1.1)

    check()
    ring.remove_node("engine-2")
    check()
    ring.add_node(copy_of("engine-7"), {"weight": 3})
    check()
    ring.add_node("engine-0", {"weight": 4})
    check()
    ring["engine-2"] = 2
    check()


def test_arguments_by_name_and_other_mappings() -> None:
    ring = HashRing([f"engine-{i}" for i in range(6)], vnodes=20)
    loads = {"engine-1": 9, "engine-4": 2.5, "gone": 7}
    for key in KEYS[:80]:
        expected = model(ring, key, loads, 1.5)
        assert ring.get_bounded(key, loads, 1.5) == expected
        assert ring.get_bounded(key=key, loads=loads, balance_factor=1.5) == expected
        assert ring.get_bounded(key, types.MappingProxyType(loads), balance_factor=1.5) == expected
        assert ring.get_bounded(key, Counter(loads), 1.5) == expected
    with pytest.raises(TypeError, match="missing required argument 'loads'"):
        ring.get_bounded("k")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'factor'"):
        ring.get_bounded("k", {}, factor=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'key'"):
        ring.get_bounded("k", {}, key="k")  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ring.get_bounded("k", [("engine-1", 3)])  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        ring.get_bounded("k", {"engine-1": 10**400})
    with pytest.raises(ValueError, match="load of 'engine-1'"):
        ring.get_bounded("k", {"engine-1": -10**400})
    with pytest.raises(TypeError, match="load of 'engine-1' must be a number, not bool"):
        ring.get_bounded("k", {"engine-1": True})


class Meddler(str):
    """A loads key equal to a node that removes a node when compared (once,
    or, with ``every``, at every comparison)."""

    ring: HashRing | None = None
    every = False

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        ring = Meddler.ring
        if not Meddler.every:
            Meddler.ring = None
        if ring is not None:
            name = next(n for n in ring.nodes if n != "engine-1")
            ring.remove_node(name)
            if Meddler.every:
                ring.add_node(name)
        return str.__eq__(self, other)


def test_a_ring_changed_during_the_call_is_read_again_not_misread() -> None:
    # The call starts again on the ring as changed: its answer is that
    # ring's, never one of a ring half read.
    ring = HashRing([f"engine-{i}" for i in range(6)], vnodes=20)
    Meddler.ring, Meddler.every = ring, False
    loads = {Meddler("engine-1"): 100}
    got = ring.get_bounded("k", loads)
    assert len(ring.nodes) == 5 and Meddler.ring is None
    assert got == model(ring, "k", {"engine-1": 100}, 1.25)
    ring._check()


def test_a_ring_changed_by_every_attempt_is_refused() -> None:
    ring = HashRing([f"engine-{i}" for i in range(6)], vnodes=20)
    Meddler.ring, Meddler.every = ring, True
    try:
        with pytest.raises(RuntimeError, match="the ring changed during the call"):
            ring.get_bounded("k", {Meddler("engine-1"): 100})
    finally:
        Meddler.ring, Meddler.every = None, False
    ring._check()
    assert ring.get_bounded("k", {"engine-1": 100}) == model(ring, "k", {"engine-1": 100}, 1.25)


class Weight(int):
    """A weight whose float() asks the ring itself: the view get_bounded
    makes is read while another call makes one too."""

    ring: HashRing | None = None

    def __float__(self) -> float:
        ring, Weight.ring = Weight.ring, None
        if ring is not None:
            ring.get_bounded("nested", {"engine-0": 1})
        return float(int(self))


def test_a_view_made_while_another_call_makes_one() -> None:
    ring = HashRing({f"engine-{i}": Weight(1 + i % 2) for i in range(5)}, vnodes=10)
    loads = {"engine-1": 3, "engine-3": 1}
    Weight.ring = ring
    assert ring.get_bounded("k", loads) == model(ring, "k", loads, 1.25)
    assert Weight.ring is None  # the nested call ran
    assert all(ring.get_bounded(k, loads) == model(ring, k, loads, 1.25) for k in KEYS[:50])
