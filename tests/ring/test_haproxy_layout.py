"""layout="haproxy": HAProxy 2.6's hash-type consistent ring in the router.

A pure-Python reference of the documented rules (points full_hash(puid *
4096 + j), weight x 16 of them; the nearest point either way, a tie to the
one before; key hashes from tests/_support/hashes.py) is compared with the
router on random shapes; then the ids: explicit, numbered as HAProxy
numbers servers, duplicates refused, kept by pickling, compared by ==;
the weights the layout takes, and the errors.  The real haproxy is asked
in tests/compat/test_haproxy_program.py.
"""
from __future__ import annotations

import bisect
import gc
import pickle
import random
import tracemalloc

import pytest

from _support.hashes import M32, full_hash, value
from chash import ConsistentHashRouter
from chash._chash import _rebuild

HAPROXY_HASHES = ["sdbm", "djb2", "wt6", "crc32", "sdbm_avalanche", "djb2_avalanche",
                  "wt6_avalanche", "crc32_avalanche"]


def ring(servers: list[tuple[str, int, int]]) -> list[tuple[int, int, str]]:
    """HAProxy's tree of (name, weight, puid) servers, inserted in order
    (equal points: the earlier server first)."""
    return sorted((full_hash((puid * 4096 + j) & M32), order, name)
                  for order, (name, weight, puid) in enumerate(servers)
                  for j in range(weight * 16))


def reference(points: list[tuple[int, int, str]], key: bytes, hash_name: str) -> str:
    """HAProxy's chash_get_server_hash on that tree."""
    values = [p[0] for p in points]
    h = value(hash_name, key)
    nxt = bisect.bisect_left(values, h)
    nxt = 0 if nxt == len(values) else nxt
    prev = nxt - 1 if nxt else len(values) - 1
    dp, dn = (h - values[prev]) & M32, (values[nxt] - h) & M32
    return points[prev][2] if dp <= dn else points[nxt][2]


@pytest.mark.parametrize("hash_name", HAPROXY_HASHES)
def test_routes_as_the_reference(hash_name: str) -> None:
    rng = random.Random(hash_name)
    servers = [(f"srv{k}", rng.randint(1, 12), rng.choice([k, 1000 + k, (k * 7919) % 50_000 + 1]))
               for k in range(1, 9)]
    servers = list({puid: s for s in servers for puid in [s[2]]}.values())  # distinct ids
    router = ConsistentHashRouter(layout="haproxy", hash=hash_name)
    for name, weight, puid in servers:
        router.add_service_node(name, weight, id=puid)
    keys = [f"key-{rng.getrandbits(40)}" for _ in range(3000)] + ["", "é", "\x00"]
    points = ring(servers)
    want = [reference(points, k.encode(), hash_name) for k in keys]
    assert router.get_target_nodes(keys) == want
    assert [router.get_target_node(k) for k in keys[:300]] == want[:300]
    assert router.points == {name: weight * 16 for name, weight, _ in servers}
    router._check()


def test_points_and_ownership() -> None:
    router = ConsistentHashRouter(layout="haproxy")
    router.add_service_node("a", 2, id=3)
    assert sorted(router.hash_ring) == sorted(full_hash(3 * 4096 + j) for j in range(32))
    assert router.virtual_node_count == 16 and router.hash == "sdbm_avalanche"
    router.add_service_node("b")
    assert abs(sum(router.ownership().values()) - 1.0) < 1e-12
    # Reweighing keeps the id and changes only the node's own points.
    before = set(router.hash_ring)
    router.add_service_node("a", 1)
    assert router.ids == {"a": 3, "b": 2} and set(router.hash_ring) < before
    # The preference list starts at the owner and walks on clockwise.
    for key in ("x", "y", "z"):
        assert router.get_preference_list(key, 2)[0] == router.get_target_node(key)


def test_ids_are_numbered_as_haproxy_numbers_servers() -> None:
    router = ConsistentHashRouter(layout="haproxy")
    router.add_service_node("a", id=5)      # own id; the counter moves 1 -> 2
    router.add_service_node("b")            # 2
    router.add_service_node("c", id=3)      # own id; counter 3 -> 4
    router.add_service_node("d")            # 4
    router.add_service_node("e")            # 5 is a's: 6
    router.add_service_nodes(["f", "g"])    # 7, 8
    assert router.ids == {"a": 5, "b": 2, "c": 3, "d": 4, "e": 6, "f": 7, "g": 8}
    router.remove_service_node("b")         # frees 2; the counter stays at 9
    router.add_service_node("h")
    assert router.ids["h"] == 9
    router.add_service_node("b", id=2)
    assert router.ids["b"] == 2


def test_id_errors_leave_the_router_as_it_was() -> None:
    router = ConsistentHashRouter(layout="haproxy")
    router.add_service_node("a", id=5)
    snapshot = (router.ids, router.hash_ring, router.fingerprint())
    with pytest.raises(ValueError, match="id 5 is already used by node 'a'"):
        router.add_service_node("b", id=5)
    with pytest.raises(ValueError, match="node 'a' has id 5, not 6"):
        router.add_service_node("a", id=6)
    for bad in (0, -1, 2**31, 2**64):
        with pytest.raises(ValueError, match="id must be between 1 and 2147483647"):
            router.add_service_node("b", id=bad)
    for wrong in ("1", 1.0, True):
        with pytest.raises(TypeError, match="id must be int or None"):
            router.add_service_node("b", id=wrong)  # type: ignore[arg-type]
    for weight in (0, 0.5, 257, 1.5, float("nan")):
        with pytest.raises(ValueError, match="integer weights from 1 to 256"):
            router.add_service_node("b", weight)
    with pytest.raises(ValueError, match="integer weights"):
        router.add_service_nodes(["b", "c"], 300)
    assert (router.ids, router.hash_ring, router.fingerprint()) == snapshot
    with pytest.raises(ValueError, match="id is for layout='haproxy' only"):
        ConsistentHashRouter().add_service_node("a", id=1)


def test_constructor_errors() -> None:
    for bad in ("md5", "xxh64", "one_at_a_time"):
        with pytest.raises(ValueError, match="the haproxy layout takes hash"):
            ConsistentHashRouter(layout="haproxy", hash=bad)
    with pytest.raises(ValueError, match="the haproxy layout takes hash"):
        ConsistentHashRouter(layout="haproxy", hash=lambda data: 1)
    with pytest.raises(ValueError, match="16 points per unit of weight"):
        ConsistentHashRouter(100, layout="haproxy")
    assert ConsistentHashRouter(16, layout="haproxy").virtual_node_count == 16
    # The new hashes are hashes like any other for the other layouts.
    router = ConsistentHashRouter(hash="wt6")
    router.add_service_node("a")
    assert router._calculate_hash("hello") == 3538347703


def test_pickle_equality_and_fingerprint_cover_the_ids() -> None:
    router = ConsistentHashRouter(layout="haproxy", hash="crc32")
    router.add_service_node("a", 3, id=9)
    router.add_service_node("b")
    router.add_service_node("c")
    router.remove_service_node("c")         # the counter has moved past 3
    copy = pickle.loads(pickle.dumps(router))
    assert copy == router and copy.ids == router.ids and copy.fingerprint() == router.fingerprint()
    copy.add_service_node("d")
    router.add_service_node("d")
    assert copy.ids["d"] == router.ids["d"] == 4
    other = ConsistentHashRouter(layout="haproxy", hash="crc32")
    other.add_service_node("a", 3, id=9)
    other.add_service_node("b", id=5)       # same names and weights, another id
    other.add_service_node("d", id=4)
    assert other != router and other.fingerprint() != router.fingerprint()
    # Rebuilt from (node, weight, id) triples, the counter given or not.
    rebuilt = _rebuild(ConsistentHashRouter, 16, "crc32", "haproxy",
                       [("a", 3.0, 9), ("b", 1.0, 2), ("d", 1.0, 4)], 5)
    assert rebuilt == router
    with pytest.raises(ValueError, match="next_id is for the haproxy layout only"):
        _rebuild(ConsistentHashRouter, 100, "md5", "python", [("a", 1.0)], 5)


def test_replace_nodes_takes_the_ids_along() -> None:
    router = ConsistentHashRouter(layout="haproxy")
    router.add_service_node("old", id=4)
    router._replace_nodes([("a", 2.0, 7), ("b", 1.0)])
    assert router.ids == {"a": 7, "b": 2} and router.points == {"a": 32, "b": 16}
    with pytest.raises(ValueError, match="already used"):
        router._replace_nodes([("x", 1.0, 3), ("y", 1.0, 3)])
    assert router.ids == {"a": 7, "b": 2}
    router.add_service_node("c")
    assert router.ids["c"] == 3
    router._check()


def test_add_many_numbers_in_order_and_reweighs_present_nodes() -> None:
    router = ConsistentHashRouter(layout="haproxy")
    router.add_service_node("a", id=2)
    router.add_service_nodes(["x", "a", "x", "y", "z"], 3)
    # a's own id moved the counter to 2: x takes 3, y 4, z 5; a is reweighed.
    assert router.ids == {"a": 2, "x": 3, "y": 4, "z": 5}
    assert router.points == {"a": 48, "x": 48, "y": 48, "z": 48}
    one_by_one = ConsistentHashRouter(layout="haproxy")
    one_by_one.add_service_node("a", 3, id=2)
    for node in ("x", "y", "z"):
        one_by_one.add_service_node(node, 3)
    assert one_by_one == router and one_by_one.fingerprint() == router.fingerprint()
    with pytest.raises(TypeError, match="node id must be str"):
        router.add_service_nodes(["n1", 5])  # type: ignore[list-item]
    assert router.ids == {"a": 2, "x": 3, "y": 4, "z": 5}
    router.add_service_node("n1")
    assert router.ids["n1"] == 6
    router._check()


def test_id_cycles_do_not_leak() -> None:
    router = ConsistentHashRouter(layout="haproxy")
    router.add_service_node("base", id=1)
    names = [f"n{k}" for k in range(8)]

    def cycle(i: int) -> None:
        node = names[i & 7]
        if i & 1:
            router.add_service_nodes([node, "base", f"m{i & 3}"], 2)
            router.remove_service_node(f"m{i & 3}")
        else:
            router.add_service_node(node, 2, id=100 + (i & 7))
        router.add_service_node(node, 1)
        router.get_target_nodes(["a", "b", "c", "d", "e"])
        router.get_preference_list("k", 3)
        for bad in (lambda: router.add_service_node("x", id=1),
                    lambda: router.add_service_node(node, id=2**31 - 1),
                    lambda: router.add_service_nodes(["y", 5]),  # type: ignore[list-item]
                    lambda: router.add_service_node("x", 300)):
            with pytest.raises((ValueError, TypeError)):
                bad()
        router.remove_service_node(node)
        if i % 50 == 0:
            pickle.loads(pickle.dumps(router))
            router.ids, router.ownership(), router.fingerprint()

    for i in range(1000):
        cycle(i)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(500):
            cycle(i)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0], len(gc.get_objects())
        for i in range(8000):
            cycle(i)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0], len(gc.get_objects())
    finally:
        tracemalloc.stop()
    assert after[0] - before[0] < 50_000 and abs(after[1] - before[1]) < 100, (before, after)
    assert router.ids == {"base": 1}
    router._check()
