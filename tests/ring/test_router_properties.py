"""Properties of the ring over random node sets, weights and orders.

Collisions are included through a hash with only 64 positions: there, most
points are shared and the owner rule (smallest id by UTF-8 bytes) decides.
"""
from __future__ import annotations

import copy
import math
import os
import pickle
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chash
from _support.hashes import narrow_hash
from chash import HASHES, LAYOUTS, ConsistentHashRouter


class SubRouter(ConsistentHashRouter):
    pass


HASH_CHOICES = st.sampled_from(["md5", narrow_hash])
NODE_IDS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
WEIGHTS = st.sampled_from([0.01, 0.3, 0.5, 1, 1.0, 1.5, 2, 4])
KEYS = [f"key-{i}" for i in range(500)] + ["", "\x00", "\U0001F600", "节点"]


def cluster(min_size: int = 1, max_size: int = 7) -> st.SearchStrategy[dict[str, float]]:
    return st.dictionaries(NODE_IDS, WEIGHTS, min_size=min_size, max_size=max_size)


def build(nodes: dict[str, float], vnodes: int = 8, hash=narrow_hash, order=None,
          layout: str = "python", cls=ConsistentHashRouter) -> ConsistentHashRouter:
    router = cls(vnodes, hash=hash, layout=layout)
    for node in order if order is not None else nodes:
        router.add_service_node(node, nodes[node])
    return router


def moved(before: list, after: list) -> list[tuple[str | None, str | None]]:
    return [(b, a) for b, a in zip(before, after, strict=True) if b != a]


# -- insertion order -------------------------------------------------------


@given(nodes=cluster(max_size=8), hash=HASH_CHOICES, data=st.data(),
       detours=st.lists(NODE_IDS, max_size=3))
def test_routing_is_independent_of_insertion_order(nodes, hash, data, detours) -> None:
    first = build(nodes, hash=hash)
    order = data.draw(st.permutations(list(nodes)))
    second = ConsistentHashRouter(8, hash=hash)
    # Detours: nodes added and removed again, and weights changed and restored.
    for extra in detours:
        if extra not in nodes:
            second.add_service_node(extra, 3)
    for node in order:
        second.add_service_node(node, 2.5)
        second.add_service_node(node, nodes[node])
    for extra in detours:
        if extra not in nodes:
            second.discard_service_node(extra)
    second._check()
    assert second.hash_ring == first.hash_ring
    assert second.node_map == first.node_map
    assert second.get_target_nodes(KEYS) == first.get_target_nodes(KEYS)
    for key in KEYS[:20]:
        assert second.get_preference_list(key, len(nodes)) == first.get_preference_list(key, len(nodes))
    assert second.ownership() == pytest.approx(first.ownership(), abs=1e-12)
    assert second.key_distribution(KEYS) == first.key_distribution(KEYS)
    assert second.fingerprint() == first.fingerprint()
    assert second == first
    assert second.nodes == order


def test_shared_points_go_to_the_smallest_id_in_any_order() -> None:
    nodes = {"b": 1.0, "a": 1.0, "ab": 1.0, "é": 1.0, "Z": 1.0}
    forward = build(nodes, vnodes=20)
    backward = build(nodes, vnodes=20, order=list(nodes)[::-1])
    ring = forward.hash_ring
    assert len(set(ring)) < len(ring)
    expected: dict[int, str] = {}
    for node in nodes:
        for index in range(20):
            point = narrow_hash(f"{node}_virtual_{index}".encode())
            if point not in expected or node.encode() < expected[point].encode():
                expected[point] = node
    assert forward.node_map == expected == backward.node_map
    for point, owner in expected.items():
        # A key hashing exactly onto a shared point goes to its owner.
        key = next(k for k in (f"probe-{i}" for i in range(100000)) if narrow_hash(k.encode()) == point)
        assert forward.get_target_node(key) == owner == backward.get_target_node(key)


# -- minimal movement --------------------------------------------------------


@given(nodes=cluster(), extra=NODE_IDS, weight=WEIGHTS, hash=HASH_CHOICES)
def test_adding_a_node_moves_keys_only_onto_it(nodes, extra, weight, hash) -> None:
    nodes.pop(extra, None)
    router = build(nodes, hash=hash)
    before = router.get_target_nodes(KEYS)
    ring_before, fingerprint_before = router.hash_ring, router.fingerprint()
    router.add_service_node(extra, weight)
    after = router.get_target_nodes(KEYS)
    assert all(now == extra for _, now in moved(before, after))
    router.remove_service_node(extra)
    assert router.get_target_nodes(KEYS) == before
    assert router.hash_ring == ring_before
    assert router.fingerprint() == fingerprint_before


@given(nodes=cluster(min_size=2), data=st.data(), hash=HASH_CHOICES)
def test_removing_a_node_moves_only_its_keys(nodes, data, hash) -> None:
    victim = data.draw(st.sampled_from(sorted(nodes)))
    router = build(nodes, hash=hash)
    before = router.get_target_nodes(KEYS)
    router.remove_service_node(victim)
    after = router.get_target_nodes(KEYS)
    assert all(was == victim for was, _ in moved(before, after))
    assert victim not in after
    router._check()


@given(nodes=cluster(), data=st.data(), low=WEIGHTS, high=WEIGHTS, hash=HASH_CHOICES)
def test_weight_changes_move_keys_only_onto_or_off_that_node(nodes, data, low, high, hash) -> None:
    low, high = sorted([low, high])
    node = data.draw(st.sampled_from(sorted(nodes)))
    nodes[node] = low
    router = build(nodes, hash=hash)
    before = router.get_target_nodes(KEYS)
    points_before = router.points
    router.add_service_node(node, high)  # raise
    raised = router.get_target_nodes(KEYS)
    assert all(now == node for _, now in moved(before, raised))
    assert router.points[node] >= points_before[node]
    assert {n: c for n, c in router.points.items() if n != node} == \
        {n: c for n, c in points_before.items() if n != node}
    router.add_service_node(node, low)  # lower again
    lowered = router.get_target_nodes(KEYS)
    assert all(was == node for was, _ in moved(raised, lowered))
    assert lowered == before
    assert router.weights[node] == low
    assert router == build(nodes, hash=hash)
    router._check()


@given(vnodes=st.integers(1, 1000),
       weight=st.floats(min_value=1e-6, max_value=40, allow_nan=False, allow_infinity=False))
def test_a_node_owns_round_half_even_of_vnodes_times_weight(vnodes, weight) -> None:
    router = ConsistentHashRouter(vnodes)
    router.add_service_node("n", weight)
    assert router.points == {"n": max(1, round(vnodes * weight))}
    assert len(router.hash_ring) == router.points["n"]
    assert router.weights == {"n": weight}


def test_point_counts_at_rounding_boundaries() -> None:
    router = ConsistentHashRouter(10)
    for node, weight, points in [("tiny", 0.01, 1), ("half", 0.05, 1), ("2.5", 0.25, 2),
                                 ("3.5", 0.35, 4), ("1.5", 0.15, 2), ("int", 3, 30),
                                 ("big", 12.34, 123)]:
        router.add_service_node(node, weight)
        assert router.points[node] == points, node


def test_adding_a_present_node_with_its_weight_changes_nothing() -> None:
    router = build({"a": 1.0, "b": 2.0, "c": 0.5})
    snapshot = (router.hash_ring, router.nodes, router.weights, router.fingerprint())
    router.add_service_node("a")
    router.add_service_node("a", 1)
    router.add_service_node("b", 2.0)
    router.add_service_node("c", weight=0.5)
    assert (router.hash_ring, router.nodes, router.weights, router.fingerprint()) == snapshot


def test_a_reweighed_node_keeps_its_place_and_a_readded_one_goes_last() -> None:
    router = build({"a": 1.0, "b": 1.0, "c": 1.0})
    router.add_service_node("a", 2)
    assert router.nodes == ["a", "b", "c"]
    router.remove_service_node("a")
    router.add_service_node("a")
    assert router.nodes == ["b", "c", "a"]
    assert list(router) == ["b", "c", "a"]


# -- preference lists --------------------------------------------------------


@given(nodes=cluster(max_size=8), key=st.text(max_size=8) | st.binary(max_size=8),
       n=st.integers(0, 10), hash=HASH_CHOICES)
def test_preference_list_properties(nodes, key, n, hash) -> None:
    router = build(nodes, hash=hash)
    prefs = router.get_preference_list(key, n)
    assert len(prefs) == min(n, len(nodes))
    assert len(set(prefs)) == len(prefs)
    assert set(prefs) <= set(nodes)
    if n:
        assert prefs[0] == router.get_target_node(key)
    if n >= len(nodes):
        assert set(prefs) == set(nodes)
    for m in range(n + 1):
        assert router.get_preference_list(key, m) == prefs[:m]
    assert router.get_preference_list(key, 10**30) == router.get_preference_list(key, len(nodes))


@given(nodes=cluster(min_size=2, max_size=8), key=st.text(max_size=8), hash=HASH_CHOICES)
def test_failover_goes_to_the_next_node_of_the_preference_list(nodes, key, hash) -> None:
    router = build(nodes, hash=hash)
    full = router.get_preference_list(key, len(nodes))
    router.remove_service_node(full[0])
    assert router.get_target_node(key) == full[1]
    assert router.get_preference_list(key, len(nodes)) == full[1:]


def test_preference_list_on_small_rings() -> None:
    router = ConsistentHashRouter(5)
    assert router.get_preference_list("k", 0) == []
    assert router.get_preference_list("k", 3) == []
    router.add_service_node("only")
    assert router.get_preference_list("k", 0) == []
    assert router.get_preference_list("k", 1) == ["only"]
    assert router.get_preference_list(b"k", 5) == ["only"]


# -- introspection ----------------------------------------------------------


def arc_ownership(router: ConsistentHashRouter) -> dict[str, float]:
    """Each point owns the arc (previous point, point]; the first one wraps."""
    ring, owners = router.hash_ring, router.node_map
    share = {node: 0.0 for node in router.nodes}
    for i, point in enumerate(ring):
        previous = ring[i - 1] if i else ring[-1] - 2**32
        share[owners[point]] += (point - previous) / 2**32
    return share


@given(nodes=cluster(max_size=8), hash=HASH_CHOICES)
def test_ownership_sums_to_one_and_follows_the_arcs(nodes, hash) -> None:
    router = build(nodes, hash=hash)
    shares = router.ownership()
    assert list(shares) == router.nodes
    assert math.isclose(sum(shares.values()), 1.0, abs_tol=1e-9)
    assert all(0.0 <= share <= 1.0 for share in shares.values())
    for node, share in arc_ownership(router).items():
        assert math.isclose(shares[node], share, abs_tol=1e-9)


def test_ownership_matches_the_key_distribution_on_many_keys() -> None:
    router = build({f"node-{i}": w for i, w in enumerate([1, 1, 2, 0.5, 3, 1])}, vnodes=100, hash="md5")
    keys = [f"request-{i}" for i in range(40000)]
    counts = router.key_distribution(keys)
    assert list(counts) == router.nodes
    assert sum(counts.values()) == len(keys)
    shares = router.ownership()
    for node in router.nodes:
        assert abs(counts[node] / len(keys) - shares[node]) < 0.01, node
    # Heavier nodes own more.
    assert shares["node-4"] > shares["node-0"] > shares["node-3"]


def test_ownership_and_distribution_edge_cases() -> None:
    router = ConsistentHashRouter(10)
    assert router.ownership() == {}
    assert router.key_distribution(["a", "b"]) == {}
    router.add_service_node("solo", 0.01)
    assert router.ownership() == {"solo": 1.0}
    assert router.key_distribution([]) == {"solo": 0}
    router.add_service_node("other")
    counts = router.key_distribution(KEYS)
    assert counts.keys() == {"solo", "other"}
    assert sum(counts.values()) == len(KEYS)
    assert counts == {node: router.get_target_nodes(KEYS).count(node) for node in router.nodes}


def test_hash_ring_and_node_map_are_fresh_copies() -> None:
    router = build({"a": 1, "b": 1}, hash="md5")
    ring = router.hash_ring
    ring.clear()
    mapping = router.node_map
    mapping.clear()
    weights = router.weights
    weights["zzz"] = 9.0
    nodes = router.nodes
    nodes.append("zzz")
    assert len(router.hash_ring) == 16
    assert len(router.node_map) == 16
    assert router.weights == {"a": 1.0, "b": 1.0}
    assert router.nodes == ["a", "b"]
    assert router.hash_ring is not router.hash_ring


# -- fingerprint -------------------------------------------------------------


def test_fingerprint_shape_and_sensitivity() -> None:
    base = {"api-1": 1.0, "api-2": 1.0, "api-3": 2.0}
    router = build(base, vnodes=50, hash="md5")
    value = router.fingerprint()
    assert len(value) == 16 and all(c in "0123456789abcdef" for c in value)
    assert build(base, vnodes=50, hash="md5", order=["api-3", "api-1", "api-2"]).fingerprint() == value
    different = [
        build(base, vnodes=51, hash="md5"),
        build(base, vnodes=50, hash="sha1"),
        build(base, vnodes=50, hash="md5", layout="node"),
        build({**base, "api-4": 1.0}, vnodes=50, hash="md5"),
        build({"api-1": 1.0, "api-2": 1.0}, vnodes=50, hash="md5"),
        build({**base, "api-3": 1.0}, vnodes=50, hash="md5"),
        build({"api-1": 1.0, "api-2": 1.0, "api-9": 2.0}, vnodes=50, hash="md5"),
    ]
    values = {r.fingerprint() for r in different}
    assert value not in values
    assert len(values) == len(different)
    empty = ConsistentHashRouter(50)
    assert empty.fingerprint() == ConsistentHashRouter(50).fingerprint() != value
    assert ConsistentHashRouter(50, hash="sha1").fingerprint() != empty.fingerprint()


def test_fingerprint_follows_every_change() -> None:
    router = build({"a": 1.0, "b": 1.0}, vnodes=20, hash="md5")
    seen = {router.fingerprint()}
    for change in [lambda: router.add_service_node("c"),
                   lambda: router.add_service_node("a", 2),
                   lambda: router.remove_service_node("b"),
                   lambda: router.add_service_node("a", 0.5)]:
        change()
        assert router.fingerprint() not in seen
        seen.add(router.fingerprint())


def test_fingerprint_is_the_same_in_another_process() -> None:
    code = (
        "from chash import ConsistentHashRouter as R\n"
        "r = R(30)\n"
        "for n, w in [('x', 1), ('é', 2), ('\\U0001F600', 0.5)]: r.add_service_node(n, w)\n"
        "print(r.fingerprint())\n"
    )
    router = ConsistentHashRouter(30)
    for node, weight in [("\U0001F600", 0.5), ("x", 1), ("é", 2)]:
        router.add_service_node(node, weight)
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONIOENCODING="utf-8")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert out == router.fingerprint()


# Values computed before fingerprint() hashed each owner's id once a node
# instead of once a point: processes share the fingerprint (through Redis),
# so it must never change for a ring that already exists.
PINNED_FINGERPRINTS = [
    ("empty", "769e30691b41bf15"),
    ("python-md5", "63366de92659a6fe"),
    ("python-160", "4fca95744bce0f37"),
    ("node-layout", "474edfb04a0586b2"),
    ("ketama", "a647770f44130142"),
    ("xxh3-weights", "79e2110916fe738b"),
    ("murmur3-collide", "d08ee853616d1a3c"),
]


def pinned_ring(name: str) -> ConsistentHashRouter:
    rings: dict[str, tuple[tuple[object, ...], dict[str, object], list[str], dict[str, float]]] = {
        "empty": ((), {}, [], {}),
        "python-md5": ((), {}, ["a", "b", "c"], {}),
        "python-160": ((160,), {}, [f"backend-{i:04d}.svc:8080" for i in range(10)], {}),
        "node-layout": ((), {"layout": "node"}, ["10.0.0.1:11211", "10.0.0.2:11211"], {}),
        "ketama": ((), {"layout": "ketama"}, ["cache-1", "cache-2", "cache-3"], {}),
        "xxh3-weights": ((100,), {"hash": "xxh3"}, ["x", "y", "z"], {"y": 2.5}),
        "murmur3-collide": ((1,), {"hash": "murmur3"}, ["same", "same2", "ünïcode"], {}),
    }
    args, kwargs, nodes, weights = rings[name]
    router = ConsistentHashRouter(*args, **kwargs)  # type: ignore[arg-type]
    for node in nodes:
        router.add_service_node(node, weights.get(node, 1.0))
    return router


@pytest.mark.parametrize(("name", "expected"), PINNED_FINGERPRINTS,
                         ids=[n for n, _ in PINNED_FINGERPRINTS])
def test_fingerprint_values_are_pinned(name: str, expected: str) -> None:
    assert pinned_ring(name).fingerprint() == expected


# -- pickle, copy, == -----------------------------------------------------------


CONFIGS = ([("python", h) for h in HASHES] + [("node", h) for h in HASHES]
           + [("ketama", "md5"), ("python", narrow_hash), ("node", narrow_hash)])


def assert_same_router(a: ConsistentHashRouter, b: ConsistentHashRouter) -> None:
    assert type(a) is type(b)
    assert a == b and not (a != b)  # noqa: SIM202 (both operators are under test)
    assert (a.virtual_node_count, a.hash, a.layout) == (b.virtual_node_count, b.hash, b.layout)
    assert a.nodes == b.nodes
    assert a.weights == b.weights
    assert a.points == b.points
    assert a.hash_ring == b.hash_ring
    assert a.node_map == b.node_map
    assert a.fingerprint() == b.fingerprint()
    assert a.get_target_nodes(KEYS) == b.get_target_nodes(KEYS)
    assert [a.get_preference_list(k, 3) for k in KEYS[:30]] == [b.get_preference_list(k, 3) for k in KEYS[:30]]


@pytest.mark.parametrize("layout,hash", CONFIGS, ids=lambda v: getattr(v, "__name__", v))
def test_pickle_and_copy_round_trips_route_identically(layout, hash) -> None:
    # The compat layouts take integer weights, as their references.
    odd = 0.1 + 0.2 if layout in ("python", "node") else 3.0
    router = build({"api-1": 1.0, "é": odd, "\U0001F600": 2, "": 1.5 if odd != 3.0 else 5},
                   vnodes=24, hash=hash, layout=layout)
    clones = [pickle.loads(pickle.dumps(router, protocol)) for protocol in range(pickle.HIGHEST_PROTOCOL + 1)]
    clones += [copy.copy(router), copy.deepcopy(router)]
    for clone in clones:
        assert clone is not router
        assert_same_router(clone, router)
        assert clone.weights["é"] == odd  # the exact double survives
        assert clone.nodes == router.nodes  # insertion order too
        clone._check()
    # The copies are independent of the original.
    clone = clones[-1]
    clone.add_service_node("new")
    clone.remove_service_node("api-1")
    assert "new" not in router and "api-1" in router
    assert clone != router


def test_pickle_of_empty_and_default_routers() -> None:
    for router in [ConsistentHashRouter(), ConsistentHashRouter(layout="node"),
                   ConsistentHashRouter(layout="ketama"), ConsistentHashRouter(1, hash="xxh3")]:
        clone = pickle.loads(pickle.dumps(router))
        assert_same_router(clone, router)
        assert len(clone) == 0


def test_a_subclass_survives_pickle_and_copy() -> None:
    router = build({"a": 1, "b": 2}, cls=SubRouter)
    for clone in [pickle.loads(pickle.dumps(router)), copy.copy(router), copy.deepcopy(router)]:
        assert type(clone) is SubRouter
        assert_same_router(clone, router)


def test_equality_compares_configuration_and_weights() -> None:
    nodes = {"a": 1.0, "b": 2.0}
    router = build(nodes, hash="md5")
    assert router == build(nodes, hash="md5", order=["b", "a"])
    assert router != build(nodes, vnodes=9, hash="md5")
    assert router != build(nodes, hash="sha1")
    assert router != build(nodes, hash="md5", layout="node")
    assert router != build({"a": 1.0, "b": 1.0}, hash="md5")
    assert router != build({"a": 1.0}, hash="md5")
    assert router != build({**nodes, "c": 1.0}, hash="md5")
    assert ConsistentHashRouter(5) == ConsistentHashRouter(5)
    assert (router == 1) is False and (router != "a") is True
    assert router != router.nodes
    with pytest.raises(TypeError):
        router < router  # noqa: B015


def test_routers_are_unhashable() -> None:
    router = ConsistentHashRouter()
    with pytest.raises(TypeError, match="unhashable"):
        hash(router)
    with pytest.raises(TypeError):
        {router}  # noqa: B018


# -- protocols -----------------------------------------------------------------


def test_len_contains_iter() -> None:
    router = build({"a": 1, "ab": 1, "é": 1, "": 1}, hash="md5")
    assert len(router) == 4
    assert list(iter(router)) == ["a", "ab", "é", ""]
    assert "a" in router and "" in router and "é" in router
    assert "abc" not in router and "A" not in router
    for other in [1, None, b"a", bytearray(b"a"), ("a",), 1.5, "\ud800"]:
        assert (other in router) is False
    router.remove_service_node("a")
    assert "a" not in router and len(router) == 3


def test_repr_shows_the_configuration_and_size() -> None:
    router = build({"a": 1, "b": 1, "c": 2}, vnodes=50, hash="md5")
    text = repr(router)
    assert text.startswith("ConsistentHashRouter(")
    for part in ["virtual_node_count=50", "hash='md5'", "layout='python'", "nodes=3", "points=200"]:
        assert part in text, part
    node_text = repr(ConsistentHashRouter(layout="node", hash="xxh3"))
    for part in ["virtual_node_count=150", "hash='xxh3'", "layout='node'", "nodes=0", "points=0"]:
        assert part in node_text, part
    assert repr(SubRouter(3)).startswith("SubRouter(")
    assert "narrow_hash" in repr(ConsistentHashRouter(3, hash=narrow_hash))


def test_layout_defaults_and_properties() -> None:
    assert set(LAYOUTS) == {"python", "node", "ketama", "nginx", "libmemcached", "haproxy",
                            "varnish", "nghttpx"}
    for layout, vnodes, hash_name in [("python", 100, "md5"), ("node", 150, "md5"),
                                      ("ketama", 160, "md5"), ("nginx", 160, "crc32"),
                                      ("libmemcached", 100, "one_at_a_time"),
                                      ("haproxy", 16, "sdbm_avalanche"),
                                      ("varnish", 67, "sha256"), ("nghttpx", 160, "sha256")]:
        router = ConsistentHashRouter(layout=layout)
        assert router.virtual_node_count == vnodes
        assert router.layout == layout
        assert router.hash == hash_name
        assert ConsistentHashRouter(layout=layout, hash=None).hash == hash_name
        node = "10.0.0.1:80" if layout == "nghttpx" else "n"
        router.add_service_node(node)
        assert router.points == {node: vnodes}
        assert router.memory_bytes >= 8 * vnodes
    router = ConsistentHashRouter(3, hash=narrow_hash)
    assert router.hash is narrow_hash


def test_module_constants() -> None:
    assert HASHES == ("md5", "sha1", "murmur2", "murmur3", "xxh32", "xxh64", "xxh3", "fnv1a", "crc32",
                      "one_at_a_time", "sdbm", "djb2", "wt6", "sdbm_avalanche", "djb2_avalanche",
                      "wt6_avalanche", "crc32_avalanche",
                      "sha256", "murmur3_128")
    assert LAYOUTS == ("python", "node", "ketama", "nginx", "libmemcached", "haproxy", "varnish",
                       "nghttpx")
    assert chash.MAX_VIRTUAL_NODES == 1_000_000
    for name in ["MAX_VIRTUAL_NODES", "MAX_NODE_POINTS", "MAX_POINTS", "MAX_NODES"]:
        assert type(getattr(chash, name)) is int and getattr(chash, name) > 0
    assert chash.MAX_VIRTUAL_NODES <= chash.MAX_NODE_POINTS <= chash.MAX_POINTS
    for name in ["ConsistentHashRouter", "HASHES", "LAYOUTS", "MAX_VIRTUAL_NODES",
                 "MAX_NODE_POINTS", "MAX_POINTS", "MAX_NODES"]:
        assert name in chash.__all__
    with pytest.raises(ValueError, match="more than"):
        ConsistentHashRouter(chash.MAX_VIRTUAL_NODES).add_service_node(
            "n", (chash.MAX_NODE_POINTS + 1) / chash.MAX_VIRTUAL_NODES)
