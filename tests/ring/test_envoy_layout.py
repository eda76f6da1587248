"""ConsistentHashRouter(layout="envoy" | "grpc"): 64-bit rings rebuilt on
every change, against a plain-Python oracle of Envoy's and gRPC's rules
(tests/_support/envoy_reference.py), murmur2_64 against libstdc++ itself,
the router API, errors that leave the router as it was, threads."""
from __future__ import annotations

import pickle
import random
import subprocess
import threading
from pathlib import Path

import pytest
import xxhash

from _support import envoy_reference as ref
from _support.compat_programs import require
from chash import ConsistentHashRouter

HOSTS = [f"10.1.{i // 250}.{i % 250}:8080" for i in range(40)]


def build(layout: str, pairs: list[tuple[str, int]], **sizes: int) -> ConsistentHashRouter:
    router = ConsistentHashRouter(layout=layout, **sizes)  # type: ignore[arg-type]
    router._replace_nodes([(n, float(w)) for n, w in pairs])
    router._check()
    return router


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("layout", ["envoy", "grpc"])
def test_rings_match_the_oracle(layout: str, seed: int) -> None:
    rng = random.Random(seed)
    hosts = rng.sample(HOSTS, rng.randint(1, 12))
    weights = [rng.choice([1, 1, 2, 3, 7, 100]) for _ in hosts]
    lo = rng.choice([1, 5, 64, 1024, 5000])
    hi = rng.choice([lo, lo * 3, 8388608])
    router = build(layout, list(zip(hosts, weights, strict=False)), minimum_ring_size=lo, maximum_ring_size=hi)
    if layout == "grpc":
        lo, hi = ref.grpc_sizes(lo, hi)
    expected = ref.ring(hosts, weights, lo, hi)
    assert router.hash_ring == [p for p, _ in expected]
    assert router.points == dict(zip(hosts, ref.ring_counts(weights, lo, hi), strict=False))
    node_map = router.node_map
    assert all(node_map[p] == hosts[k] for p, k in expected)
    keys = [f"k{seed}-{i}" for i in range(200)]
    want = [hosts[ref.ring_lookup(expected, ref.xxh64(k.encode()))] for k in keys]
    assert router.get_target_nodes(keys) == want
    assert [router.get_target_node(k) for k in keys] == want
    assert [router.get_target_node_by_hash(router._calculate_hash(k)) for k in keys] == want
    probes = [0, 2**64 - 1] + [p for p, _ in expected[:20]] + [p + 1 for p, _ in expected[:20]]
    probes = [h % 2**64 for h in probes]
    assert router.get_target_nodes_by_hash(probes) == [hosts[ref.ring_lookup(expected, h)]
                                                       for h in probes]


def test_request_keys_hash_with_xxh64() -> None:
    router = build("envoy", [("a", 1)])
    for key in ["", "user-1", "ключ", b"\x00\xff"]:
        data = key if isinstance(key, bytes) else key.encode()
        assert router._calculate_hash(key) == xxhash.xxh64_intdigest(data)


@pytest.fixture(scope="module")
def hash_bytes_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-line C++ program printing std::_Hash_bytes(arg, len, 0xc70f6907)
    of each argument: libstdc++ itself, the definition of MURMUR_HASH_2."""
    gxx = require("g++")
    folder = tmp_path_factory.mktemp("hash_bytes")
    source = folder / "hash_bytes.cc"
    source.write_text(
        "#include <bits/functional_hash.h>\n#include <cstdio>\n#include <cstring>\n"
        "int main(int argc, char **argv) { for (int i = 1; i < argc; i++)\n"
        "  std::printf(\"%zu\\n\", std::_Hash_bytes(argv[i], std::strlen(argv[i]), 0xc70f6907UL)); }\n")
    program = folder / "hash_bytes"
    subprocess.run([gxx, "-O1", "-o", str(program), str(source)], check=True, timeout=120)
    return program


def test_murmur2_64_points_are_libstdcxx_hash_bytes(hash_bytes_program: Path) -> None:
    hosts = ["127.0.0.1:80", "h", "a-much-longer-host-name.example.internal:443", "x" * 7, "y" * 8]
    router = build("envoy", [(h, 1) for h in hosts], minimum_ring_size=40)
    router = ConsistentHashRouter(layout="envoy", hash="murmur2_64", minimum_ring_size=40)
    router.add_service_nodes(hosts)
    keys = [f"{h}_{i}" for h in hosts for i in range(router.points[h])]
    out = subprocess.run([str(hash_bytes_program), *keys], check=True, capture_output=True,
                         text=True, timeout=60).stdout.split()
    assert sorted(int(v) for v in out) == router.hash_ring
    assert router.hash == "murmur2_64"


def test_grpc_caps_both_sizes_at_4096() -> None:
    router = build("grpc", [("a", 1), ("b", 1), ("c", 1)], minimum_ring_size=8388608,
                   maximum_ring_size=8388608)
    assert sum(router.points.values()) == 4096
    assert (router.minimum_ring_size, router.maximum_ring_size) == (8388608, 8388608)
    default = build("grpc", [("a", 1), ("b", 3)])
    assert (default.minimum_ring_size, default.maximum_ring_size) == (1024, 4096)
    assert default.points == {"a": 256, "b": 768}  # the lightest gets 1/4 of 1024
    envoy = build("envoy", [("a", 1), ("b", 3)], minimum_ring_size=8192)
    assert envoy.points == {"a": 2048, "b": 6144} and envoy.maximum_ring_size == 8388608
    capped = build("grpc", [("a", 1), ("b", 3)], minimum_ring_size=8192, maximum_ring_size=8192)
    assert capped.points == {"a": 1024, "b": 3072}


def test_membership_changes_rebuild_in_add_order() -> None:
    router = ConsistentHashRouter(layout="envoy", minimum_ring_size=12)
    router.add_service_node("127.0.0.1:80")
    router.add_service_nodes(["127.0.0.1:81", "127.0.0.1:82"], weight=2)
    assert router.nodes == ["127.0.0.1:80", "127.0.0.1:81", "127.0.0.1:82"]
    assert router.weights == {"127.0.0.1:80": 1.0, "127.0.0.1:81": 2.0, "127.0.0.1:82": 2.0}
    router.add_service_node("127.0.0.1:80", weight=2)  # a new weight, same place
    assert router.nodes[0] == "127.0.0.1:80" and router.weights["127.0.0.1:80"] == 2.0
    before = router.fingerprint()
    router.add_service_node("127.0.0.1:80", weight=2)  # the same weight: nothing
    assert router.fingerprint() == before
    router.remove_service_node("127.0.0.1:81")
    router.discard_service_node("127.0.0.1:81")
    assert router == build("envoy", [("127.0.0.1:80", 2), ("127.0.0.1:82", 2)], minimum_ring_size=12)
    with pytest.raises(KeyError):
        router.remove_service_node("127.0.0.1:81")
    router._check()
    assert len(router) == 2 and "127.0.0.1:82" in router and 5 not in router
    assert list(router) == ["127.0.0.1:80", "127.0.0.1:82"]


def test_pickle_fingerprint_and_equality() -> None:
    pairs = [("b", 1), ("a", 3), ("c", 2)]
    router = build("envoy", pairs, minimum_ring_size=100)
    murmur = ConsistentHashRouter(layout="envoy", hash="murmur2_64", minimum_ring_size=100)
    murmur._replace_nodes([(n, float(w)) for n, w in pairs])
    for r in (router, murmur, build("grpc", pairs)):
        copy = pickle.loads(pickle.dumps(r))
        assert copy == r and copy.fingerprint() == r.fingerprint()
        assert type(copy) is type(r) and isinstance(copy, ConsistentHashRouter)
        assert copy.layout == r.layout and copy.hash == r.hash
    assert router != murmur and router.fingerprint() != murmur.fingerprint()
    reordered = build("envoy", pairs[::-1], minimum_ring_size=100)
    assert reordered != router  # running sums go in add order
    assert build("envoy", pairs, minimum_ring_size=100).fingerprint() == router.fingerprint()
    assert "layout='envoy'" in repr(router) and "points=" in repr(router)


def test_preference_ownership_distribution() -> None:
    router = build("envoy", [(h, 1 + i % 3) for i, h in enumerate(HOSTS[:8])], minimum_ring_size=64)
    for key in ["a", "b", "c"]:
        prefs = router.get_preference_list(key, 20)
        assert prefs[0] == router.get_target_node(key) and len(set(prefs)) == len(prefs) == 8
    assert router.get_preference_list("a", 0) == []
    share = router.ownership()
    assert abs(sum(share.values()) - 1.0) < 1e-9 and set(share) == set(HOSTS[:8])
    keys = [f"u{i}" for i in range(500)]
    dist = router.key_distribution(keys)
    assert sum(dist.values()) == 500 and set(dist) == set(HOSTS[:8])
    assert router.memory_bytes > 8 * sum(router.points.values())
    empty = ConsistentHashRouter(layout="grpc")
    assert empty.get_target_node("a") is None and empty.get_target_nodes(["a"]) == [None]
    assert empty.get_target_node_by_hash(2**64 - 1) is None and empty.get_preference_list("a", 2) == []
    assert empty.hash_ring == [] and empty.ownership() == {}


def test_a_host_may_get_no_point() -> None:
    router = build("envoy", [("a", 1), ("b", 1), ("c", 1), ("d", 1)], minimum_ring_size=2,
                   maximum_ring_size=2)
    assert sorted(router.points.values()) == [0, 0, 1, 1]
    assert len(router.get_preference_list("k", 4)) == 2  # only hosts on the ring


@pytest.mark.parametrize("kwargs, error, text", [
    ({"virtual_node_count": 10}, ValueError, "minimum_ring_size and maximum_ring_size"),
    ({"hash": "md5"}, ValueError, "'xxh64' or 'murmur2_64'"),
    ({"hash": len}, TypeError, "hash must be a str"),
    ({"minimum_ring_size": 0}, ValueError, "between 1 and 8388608"),
    ({"maximum_ring_size": 8388609}, ValueError, "between 1 and 8388608"),
    ({"minimum_ring_size": 20, "maximum_ring_size": 10}, ValueError,
     "minimum_ring_size (20) > maximum_ring_size (10)"),
    ({"minimum_ring_size": 2.0}, TypeError, "must be int"),
    ({"minimum_ring_size": True}, TypeError, "must be int"),
])
def test_constructor_errors(kwargs: dict[str, object], error: type[Exception], text: str) -> None:
    with pytest.raises(error) as info:
        ConsistentHashRouter(layout="envoy", **kwargs)  # type: ignore[arg-type]
    assert text in str(info.value)


def test_other_constructor_errors() -> None:
    with pytest.raises(ValueError, match="takes hash 'xxh64'"):
        ConsistentHashRouter(layout="grpc", hash="murmur2_64")
    with pytest.raises(ValueError, match="apply to the envoy and grpc layouts only"):
        ConsistentHashRouter(layout="python", minimum_ring_size=5)


@pytest.mark.parametrize("weight, error", [
    (0, ValueError), (1.5, ValueError), (-2, ValueError), (2**32, ValueError),
    (float("nan"), ValueError), (True, TypeError), ("2", TypeError),
])
def test_bad_weights_leave_the_router_as_it_was(weight: object, error: type[Exception]) -> None:
    router = build("envoy", [("a", 1), ("b", 2)])
    before = (router.fingerprint(), router.nodes, router.weights)
    with pytest.raises(error):
        router.add_service_node("c", weight)  # type: ignore[arg-type]
    with pytest.raises(error):
        router.add_service_nodes(["c", "d"], weight)  # type: ignore[arg-type]
    with pytest.raises(error):
        router._replace_nodes([("c", weight)])  # type: ignore[list-item]
    assert (router.fingerprint(), router.nodes, router.weights) == before


def test_other_failed_changes_leave_the_router_as_it_was() -> None:
    router = build("envoy", [("a", 1), ("b", 2)])
    before = (router.fingerprint(), router.nodes, router.weights)
    with pytest.raises(ValueError, match="exceeds 2\\*\\*32 - 1"):
        router.add_service_nodes(["c", "d"], weight=2**31)
    with pytest.raises(ValueError, match="given twice"):
        router._replace_nodes([("c", 1), ("c", 2)])
    with pytest.raises(TypeError):
        router.add_service_nodes(["c", 5])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        router._replace_nodes([("c",)])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        router.get_target_node(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2\\*\\*64 - 1 for the envoy layout"):
        router.get_target_node_by_hash(2**64)
    with pytest.raises(ValueError, match="n must be >= 0"):
        router.get_preference_list("a", -1)
    assert (router.fingerprint(), router.nodes, router.weights) == before
    grpc = build("grpc", [("a", 2**31), ("b", 2**31)])  # gRPC sums in size_t
    assert sum(grpc.points.values()) == 1024


def test_lookups_while_another_thread_changes_the_ring() -> None:
    router = build("envoy", [(h, 1) for h in HOSTS[:4]], minimum_ring_size=256)
    allowed = set(HOSTS[:6])
    stop = threading.Event()
    errors: list[str] = []

    def read() -> None:
        while not stop.is_set():
            for node in router.get_target_nodes([f"k{i}" for i in range(64)]):
                if node not in allowed:
                    errors.append(repr(node))

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for i in range(150):
            router.add_service_node(HOSTS[4 + i % 2], weight=1 + i % 3)
            router.discard_service_node(HOSTS[4 + (i + 1) % 2])
    finally:
        stop.set()
        for t in readers:
            t.join(timeout=30)
    assert errors == []
    router._check()


def test_changes_lookups_and_error_paths_do_not_leak() -> None:
    import gc
    import sys
    import tracemalloc

    from chash import MaglevRouter

    names = ["".join(["leak-", str(i)]) for i in range(6)]
    keys = ["".join(["key-", str(i)]) for i in range(16)]
    routers = [ConsistentHashRouter(layout="envoy", minimum_ring_size=32),
               ConsistentHashRouter(layout="grpc", minimum_ring_size=16), MaglevRouter(101)]

    def cycle(i: int) -> None:
        for router in routers:
            router.add_service_node(names[i % 6], weight=1 + i % 3)
            router.get_target_node(keys[i % 16])
            router.get_target_nodes(keys)
            router.get_target_nodes_by_hash([i, 2**64 - 1 - i])
            router.get_preference_list(keys[i % 16], 3)
            router.discard_service_node(names[(i + 3) % 6])
            for method, args in ((router.get_target_node_by_hash, (-1,)),
                                 (router.add_service_node, (names[0], 0)),
                                 (router.remove_service_node, ("absent",))):
                try:
                    method(*args)
                except (ValueError, KeyError):
                    pass
            if i % 50 == 0:
                router.fingerprint(), router.ownership(), router.points, repr(router)
                pickle.loads(pickle.dumps(router))

    refcounts = [sys.getrefcount(s) for s in names + keys]
    for i in range(500):
        cycle(i)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(200):
            cycle(i)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        objects = len(gc.get_objects())
        for i in range(3000):
            cycle(i)
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - before
        objects_growth = len(gc.get_objects()) - objects
    finally:
        tracemalloc.stop()
    assert growth < 60_000, growth
    assert abs(objects_growth) < 50, objects_growth
    for router in routers:
        router._check()
        router._replace_nodes([])
    assert [sys.getrefcount(s) for s in names + keys] == refcounts
