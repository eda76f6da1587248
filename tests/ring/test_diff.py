"""router.diff(other): the arcs whose owner differs, checked against routing.

For every layout, two routers (one changed from the other by adds, removes
and weight changes, or built in another order) are diffed, and then every
key of a sample and every hash at and beside each arc's ends is routed in
both: a key or hash moves exactly when an arc holds it, from that arc's
source to its target.
"""
from __future__ import annotations

import bisect
import collections
import pickle
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chash
from chash import ConsistentHashRouter, Move

# Every layout, the 64-bit ones with small rings so examples stay quick.
LAYOUTS: list[dict[str, Any]] = [
    {"layout": name} for name in chash.LAYOUTS
] + [
    {"layout": "envoy", "minimum_ring_size": 64, "maximum_ring_size": 512},
    {"layout": "grpc", "minimum_ring_size": 64, "maximum_ring_size": 512},
]
NAMES = [f"10.0.0.{i}:11211" for i in range(1, 8)]


def fit(layout: str, weight: int) -> float:
    """A weight the layout takes (nghttpx's ring has none: every backend 1)."""
    return 1.0 if layout == "nghttpx" else float(weight)


def layout_id(kwargs: dict[str, Any]) -> str:
    return str(kwargs["layout"])


def top(router: ConsistentHashRouter) -> int:
    return 2**64 - 1 if router.layout in ("envoy", "grpc") else 2**32 - 1


def holds(move: Move, h: int) -> bool:
    if move.start == move.end:
        return True
    if move.start < move.end:
        return move.start < h <= move.end
    return h > move.start or h <= move.end


def arc_of(moves: list[Move], h: int) -> Move | None:
    """The arc holding h (they are sorted by end and never overlap)."""
    ends = [m.end for m in moves]
    at = bisect.bisect_left(ends, h)
    for m in (moves[at % len(moves)], moves[0]) if moves else ():
        if holds(m, h):
            return m
    return None


def check_shape(moves: list[Move], maximum: int) -> None:
    for i, m in enumerate(moves):
        assert isinstance(m, Move) and isinstance(m, tuple)
        assert 0 <= m.start <= maximum and 0 <= m.end <= maximum
        if i:
            assert moves[i - 1].end < m.end and m.start >= moves[i - 1].end
            assert m.start < m.end
        assert m.source != m.target


def check_exact(old: ConsistentHashRouter, new: ConsistentHashRouter,
                keys: list[str]) -> list[Move]:
    moves = old.diff(new)
    maximum = top(old)
    check_shape(moves, maximum)
    for key in keys:
        h = old._calculate_hash(key)
        a, b = old.get_target_node(key), new.get_target_node(key)
        arc = arc_of(moves, h)
        if a == b:
            assert arc is None, (key, h, arc)
        else:
            assert arc is not None and (arc.source, arc.target) == (a, b), (key, h, arc)
    probes = {0, maximum}
    for m in moves:
        probes.update({m.start, m.end, (m.start + 1) & maximum, (m.end + 1) & maximum})
    for h in probes:
        a, b = old.get_target_node_by_hash(h), new.get_target_node_by_hash(h)
        arc = arc_of(moves, h)
        if a == b:
            assert arc is None, (h, arc)
        else:
            assert arc is not None and (arc.source, arc.target) == (a, b), (h, arc)
    return moves


KEYS = [f"user:{i}" for i in range(600)]

change = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(NAMES), st.integers(1, 3)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("weight"), st.sampled_from(NAMES), st.integers(1, 3)),
)


def apply(router: ConsistentHashRouter, op: str, name: str, weight: int) -> None:
    if op == "add" and name not in router:
        router.add_service_node(name, fit(router.layout, weight))
    elif op == "remove" and name in router and len(router) > 1:
        router.remove_service_node(name)
    elif op == "weight" and name in router and len(router) > 1:
        router.remove_service_node(name)
        router.add_service_node(name, fit(router.layout, weight))


@pytest.mark.parametrize("kwargs", LAYOUTS, ids=layout_id)
@settings(max_examples=25)
@given(start=st.lists(st.tuples(st.sampled_from(NAMES), st.integers(1, 3)), min_size=1,
                      max_size=5, unique_by=lambda p: p[0]),
       changes=st.lists(change, min_size=1, max_size=4))
def test_diff_is_exact(kwargs: dict[str, Any], start: list[tuple[str, int]],
                       changes: list[tuple[str, str, int]]) -> None:
    old = ConsistentHashRouter(**kwargs)
    for name, weight in start:
        old.add_service_node(name, fit(old.layout, weight))
    new = pickle.loads(pickle.dumps(old))
    for op, name, weight in changes:
        apply(new, op, name, weight)
    moves = check_exact(old, new, KEYS)
    back = check_exact(new, old, KEYS)
    # The way back is the same arcs with source and target swapped.
    assert [(m.start, m.end, m.target, m.source) for m in back] == [tuple(m) for m in moves]


@pytest.mark.parametrize("kwargs", LAYOUTS, ids=layout_id)
def test_add_one_node_moves_keys_only_to_it(kwargs: dict[str, Any]) -> None:
    old = ConsistentHashRouter(**kwargs)
    for name in NAMES[:4]:
        old.add_service_node(name)
    new = pickle.loads(pickle.dumps(old))
    new.add_service_node(NAMES[4])
    moves = check_exact(old, new, KEYS)
    assert moves
    if kwargs["layout"] not in ("ketama", "envoy", "grpc"):
        # Layouts whose other nodes keep their points: keys only go to the new one.
        assert {m.target for m in moves} == {NAMES[4]}
    assert check_exact(old, old, KEYS) == []


@pytest.mark.parametrize("kwargs", LAYOUTS, ids=layout_id)
def test_every_key_moves_between_disjoint_rings(kwargs: dict[str, Any]) -> None:
    old, new = ConsistentHashRouter(**kwargs), ConsistentHashRouter(**kwargs)
    a, b = ("10.0.0.1:80", "10.0.0.2:80") if kwargs["layout"] == "nghttpx" else ("a", "b")
    old.add_service_node(a)
    new.add_service_node(b)
    moves = check_exact(old, new, KEYS[:50])
    assert len(moves) == 1 and moves[0].start == moves[0].end
    assert (moves[0].source, moves[0].target) == (a, b)


def every_first_point_at_7(data: bytes) -> int:
    """A hash putting every node's point 0 at 7 (shared), the rest apart."""
    return 7 if data.endswith(b"_0") else int.from_bytes(data[-2:], "big") * 1000 + len(data)


def test_shared_points_follow_the_tie_rule() -> None:
    # Equal points: the nodes sort by (hash, node identity); removing the
    # owner of a shared point hands its arc to the next node at 7 only.
    old = ConsistentHashRouter(2, hash=every_first_point_at_7)
    new = ConsistentHashRouter(2, hash=every_first_point_at_7)
    for name in ("b", "a", "c"):
        old.add_service_node(name)
    for name in ("c", "b"):
        new.add_service_node(name)
    assert check_exact(old, new, KEYS[:100]) == old.diff(new)
    moves = old.diff(new)
    assert moves and all(m.source == "a" for m in moves)
    assert any(holds(m, 7) for m in moves)  # 7 was a's (smallest id), now b's
    assert next(m for m in moves if holds(m, 7)).target == "b"


def test_errors() -> None:
    a = ConsistentHashRouter()
    a.add_service_node("x")
    with pytest.raises(TypeError, match="ConsistentHashRouter"):
        a.diff("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same layout and hash"):
        a.diff(ConsistentHashRouter(layout="node"))
    with pytest.raises(ValueError, match="same layout and hash"):
        a.diff(ConsistentHashRouter(hash="sha1"))
    with pytest.raises(ValueError, match="same layout and hash"):
        a.diff(ConsistentHashRouter(layout="envoy"))
    with pytest.raises(ValueError, match="same layout and hash"):
        ConsistentHashRouter(layout="envoy").diff(ConsistentHashRouter(layout="grpc"))
    with pytest.raises(ValueError, match="empty"):
        a.diff(ConsistentHashRouter())
    with pytest.raises(ValueError, match="empty"):
        ConsistentHashRouter().diff(a)
    assert ConsistentHashRouter().diff(ConsistentHashRouter()) == []
    assert list(a.nodes) == ["x"]  # nothing changed


def test_move_is_a_named_tuple() -> None:
    assert chash.Move is Move and Move.__module__ == "chash"
    m = Move(1, 2, "a", "b")
    assert m._fields == ("start", "end", "source", "target")
    assert tuple(m) == (1, 2, "a", "b") and m.source == "a"


def test_big_ring_diff_matches_key_routing() -> None:
    # 200 nodes x 160 points, one added and one removed.
    names = [f"n{i}" for i in range(200)]
    old = ConsistentHashRouter(160)
    old.add_service_nodes(names)
    new = pickle.loads(pickle.dumps(old))
    new.add_service_node("n-new")
    new.remove_service_node("n7")
    rng = random.Random(7)
    keys = [f"k{rng.random()}" for _ in range(3000)]
    moves = check_exact(old, new, keys)
    assert collections.Counter(m.source == "n7" or m.target == "n-new" for m in moves)[False] == 0
