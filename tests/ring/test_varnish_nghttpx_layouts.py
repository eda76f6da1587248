"""layout="varnish" and layout="nghttpx" against plain-Python oracles of the
two programs' rings, written from their documented algorithms: Varnish
7.1's shard director (points "{ident}{i}", SHA-256's last 4 bytes
little-endian, replicas x weight, its bisection with no wrap above the
last point, its walk) and nghttpx 1.52's affinity ring (160 points from
the backend's sockaddr, first point >= key, wrap).  The real programs are
in tests/compat/test_ring_programs.py.
"""
from __future__ import annotations

import bisect
import hashlib
import pickle
import random
import socket
import struct

import pytest

from chash import ConsistentHashRouter
from chash.compat import nghttpx_id, varnish_key

# ------------------------------------------------------------------
# The oracles


def varnish_circle(backends: list[tuple[str, float]], replicas: int = 67) -> list[tuple[int, str]]:
    """The shard director's hashcircle: (point, ident), sorted by point,
    equal points in backend order (glibc's qsort is a stable merge sort)."""
    points = []
    for order, (ident, weight) in enumerate(backends):
        for j in range(int(replicas * weight)):
            value = int.from_bytes(hashlib.sha256(f"{ident}{j}".encode()).digest()[-4:], "little")
            points.append((value, order, ident))
    points.sort(key=lambda p: (p[0], p[1]))
    return [(value, ident) for value, _, ident in points]


def varnish_lookup(circle: list[tuple[int, str]], key: int) -> int:
    """shard_lookup(), as the director's documentation of its bisection reads."""
    n, low, high = len(circle), 0, len(circle)
    while True:
        i = (high + low) // 2
        if circle[i][0] == key:
            return i
        if i == n - 1:
            return n - 1
        if circle[i][0] < key <= circle[i + 1][0]:
            return i + 1
        if circle[i][0] > key:
            if i == 0:
                return 0
            high = i
        else:
            low = i


def varnish_walk(circle: list[tuple[int, str]], key: int) -> list[str]:
    """Distinct backends from the looked-up point on, wrapping (shard_next)."""
    start, seen = varnish_lookup(circle, key), []
    for step in range(len(circle)):
        ident = circle[(start + step) % len(circle)][1]
        if ident not in seen:
            seen.append(ident)
    return seen


def sockaddr(node: str) -> bytes:
    """What nghttpx hashes for a backend: its sockaddr as Linux lays it out
    on x86-64, or for ';dns' the host:port text."""
    if node.endswith(";dns"):
        return node.removesuffix(";dns").encode()
    host, _, port = node.rpartition(":")
    if host.startswith("["):
        addr = socket.inet_pton(socket.AF_INET6, host[1:-1])
        return struct.pack("<H", 10) + struct.pack(">H", int(port)) + bytes(4) + addr + bytes(4)
    addr = socket.inet_pton(socket.AF_INET, host)
    return struct.pack("<H", 2) + struct.pack(">H", int(port)) + addr + bytes(8)


def nghttpx_ring(nodes: list[str]) -> list[tuple[int, str]]:
    points = []
    for order, node in enumerate(nodes):
        key = sockaddr(node)
        for d in range(20):
            digest = hashlib.sha256(key + bytes([d])).digest()
            for w in range(8):
                points.append((int.from_bytes(digest[4 * w:4 * w + 4], "big"), order, node))
    points.sort(key=lambda p: (p[0], p[1]))
    return [(value, node) for value, _, node in points]


def nghttpx_pick(ring: list[tuple[int, str]], h: int) -> str:
    at = bisect.bisect_left([v for v, _ in ring], h)
    return ring[at % len(ring)][1]


def ip_hash(ip: str) -> int:
    """affinity=ip: the first 4 bytes of SHA-256 of the address text, big-endian."""
    return int.from_bytes(hashlib.sha256(ip.encode()).digest()[:4], "big")


def probe_hashes(ring: list[int], rng: random.Random) -> list[int]:
    """Random positions, every point, one either side, and the ends."""
    out = [0, 1, 2**32 - 1, 2**32 - 2] + [rng.randrange(2**32) for _ in range(300)]
    for value in ring:
        out += [value, max(0, value - 1), min(2**32 - 1, value + 1)]
    return out


# ------------------------------------------------------------------
# varnish


@pytest.mark.parametrize("n", [1, 2, 3, 7, 20])
@pytest.mark.parametrize("replicas", [67, 1, 5])
def test_varnish_matches_the_director(n: int, replicas: int) -> None:
    rng = random.Random(n * 100 + replicas)
    backends = [(f"be{i}", 1.0 if i % 3 else 1.0 + (i % 4) * 0.75) for i in range(n)]
    router = ConsistentHashRouter(replicas, layout="varnish")
    for ident, weight in backends:
        router.add_service_node(ident, weight)
    router._check()
    circle = varnish_circle(backends, replicas)
    assert router.hash_ring == [value for value, _ in circle]
    assert router.points == {ident: int(replicas * weight) for ident, weight in backends}
    hashes = probe_hashes(router.hash_ring, rng)
    want = [circle[varnish_lookup(circle, h)][1] for h in hashes]
    assert router.get_target_nodes_by_hash(hashes) == want
    assert [router.get_target_node_by_hash(h) for h in hashes[:200]] == want[:200]
    keys = [f"user:{i}" for i in range(500)] + ["", "é", "/path?q=1"]
    assert router.get_target_nodes(keys) == [
        circle[varnish_lookup(circle, varnish_key(k))][1] for k in keys]
    for k in keys[:100]:
        assert router.get_preference_list(k, n) == varnish_walk(circle, varnish_key(k))


def test_varnish_quirks() -> None:
    """Above the last point the key stays with the last point's backend;
    two points in all send every key to the second.  (An exact hit on a
    shared point, where the bisection lands, is tests/c/test_varnish.c's:
    no idents at hand share a SHA-256 point.)"""
    router = ConsistentHashRouter(layout="varnish")
    router.add_service_nodes(["a", "b", "c"])
    ring = router.hash_ring
    last_owner = router.node_map[ring[-1]]
    first_owner = router.node_map[ring[0]]
    assert router.get_target_node_by_hash(2**32 - 1) == last_owner
    if first_owner != last_owner:  # the successor rule would wrap to the first point
        assert router.get_target_node_by_hash(ring[-1] + 1) != first_owner
    two = ConsistentHashRouter(1, layout="varnish")
    two.add_service_nodes(["x", "y"])
    second = two.node_map[two.hash_ring[1]]
    assert {two.get_target_node_by_hash(h) for h in (0, two.hash_ring[0], 2**31, 2**32 - 1)} == {second}
    assert two.ownership() == {second: 1.0, ({"x", "y"} - {second}).pop(): 0.0}


def test_varnish_weights_and_errors() -> None:
    router = ConsistentHashRouter(layout="varnish")
    router.add_service_node("a", 2.5)
    assert router.points == {"a": 167}  # trunc(67 * 2.5)
    router.add_service_node("a", 1.99)
    assert router.points == {"a": 133}
    for bad in (0.5, 0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"varnish layout takes weights >= 1"):
            router.add_service_node("b", bad)
    assert router.nodes == ["a"]
    for bad_hash in ("md5", "sha1", lambda data: 1):
        with pytest.raises(ValueError, match="varnish layout is defined over sha256 only"):
            ConsistentHashRouter(layout="varnish", hash=bad_hash)
    assert ConsistentHashRouter(layout="varnish", hash="sha256").hash == "sha256"
    assert ConsistentHashRouter(3, layout="varnish").virtual_node_count == 3


def test_varnish_key() -> None:
    router = ConsistentHashRouter(layout="varnish")
    for value in ["abc", "", "é", "user:1"]:
        assert varnish_key(value) == router._calculate_hash(value)
        assert varnish_key(value.encode()) == varnish_key(value)
    assert varnish_key("abc") == 2903834866
    with pytest.raises(TypeError):
        varnish_key(5)  # type: ignore[arg-type]


# ------------------------------------------------------------------
# nghttpx

V4 = [f"10.0.{i // 8}.{i % 8 + 1}:{8000 + i}" for i in range(20)]
V6 = ["[::1]:80", "[2001:db8::7:1]:443", "[fe80::1:2:3:4]:8080", "[::ffff:10.0.0.1]:81"]


@pytest.mark.parametrize("nodes", [V4[:3], V4[:7], V4, V6, V4[:3] + V6,
                                   [nghttpx_id("app.test", 80, dns=True), "10.0.0.9:80",
                                    nghttpx_id("::1", 81, dns=True)]],
                         ids=["3", "7", "20", "v6", "mixed", "dns"])
def test_nghttpx_matches_affinity(nodes: list[str]) -> None:
    rng = random.Random(len(nodes))
    router = ConsistentHashRouter(layout="nghttpx")
    router.add_service_nodes(nodes)
    router._check()
    ring = nghttpx_ring(nodes)
    assert router.hash_ring == [value for value, _ in ring]
    assert router.points == {node: 160 for node in nodes}
    hashes = probe_hashes(router.hash_ring, rng)
    want = [nghttpx_pick(ring, h) for h in hashes]
    assert router.get_target_nodes_by_hash(hashes) == want
    ips = [f"192.0.2.{i}" for i in range(256)] + ["::1", "2001:db8::1"]
    assert router.get_target_nodes(ips) == [nghttpx_pick(ring, ip_hash(ip)) for ip in ips]
    assert [router.get_target_node(ip) for ip in ips[:50]] == [
        nghttpx_pick(ring, ip_hash(ip)) for ip in ips[:50]]


def test_nghttpx_errors() -> None:
    router = ConsistentHashRouter(layout="nghttpx")
    for bad in ["localhost:80", "10.0.0.1", "10.0.0.1:99999", "::1:80", "[::1]", "a:b:80",
                "010.0.0.1:80", "10.0.0.1:80;DNS", ""]:
        with pytest.raises(ValueError, match="nghttpx layout names a backend"):
            router.add_service_node(bad)
        with pytest.raises(ValueError, match="nghttpx layout names a backend"):
            router.add_service_nodes(["10.0.0.2:80", bad])
    assert len(router) == 0
    with pytest.raises(ValueError, match="no weights"):
        router.add_service_node("10.0.0.1:80", 2.0)
    with pytest.raises(ValueError, match="no weights"):
        router.add_service_nodes(["10.0.0.1:80"], weight=0.5)
    with pytest.raises(ValueError, match="160 points"):
        ConsistentHashRouter(100, layout="nghttpx")
    with pytest.raises(ValueError, match="nghttpx layout is defined over sha256 only"):
        ConsistentHashRouter(layout="nghttpx", hash="xxh64")
    assert ConsistentHashRouter(160, layout="nghttpx").virtual_node_count == 160


def test_nghttpx_id() -> None:
    assert nghttpx_id("10.0.0.1", 8080) == "10.0.0.1:8080"
    assert nghttpx_id("2001:db8::1", 443) == "[2001:db8::1]:443"
    assert nghttpx_id("app.test", 80, dns=True) == "app.test:80;dns"
    assert nghttpx_id("::1", 80, dns=True) == "[::1]:80;dns"
    assert nghttpx_id("10.0.0.1", 0) == "10.0.0.1:0"
    for host, port, dns in [("app.test", 80, False), ("", 80, True), ("10.0.0.1", 65536, False),
                            ("10.0.0.1", -1, False), ("10.0.0.1", True, False),
                            ("fe80::1%eth0", 80, False), ("a;b", 80, True), ("a:b", 80, True)]:
        with pytest.raises(ValueError):
            nghttpx_id(host, port, dns=dns)  # type: ignore[arg-type]
    # Every id it makes is a node the layout takes.
    router = ConsistentHashRouter(layout="nghttpx")
    router.add_service_nodes([nghttpx_id("10.0.0.1", 1), nghttpx_id("::2", 2),
                              nghttpx_id("cache-1.internal", 3, dns=True)])
    assert len(router) == 3


# ------------------------------------------------------------------
# Both: what every layout does


@pytest.mark.parametrize("layout,nodes", [("varnish", ["a", "b", "c", "d"]), ("nghttpx", V4[:4])])
def test_pickle_equality_fingerprint_and_diff(layout: str, nodes: list[str]) -> None:
    router = ConsistentHashRouter(layout=layout)
    for i, node in enumerate(nodes):
        router.add_service_node(node, 1.0 + (i if layout == "varnish" else 0))
    copy = pickle.loads(pickle.dumps(router))
    assert copy == router and copy.fingerprint() == router.fingerprint()
    assert copy.layout == layout and copy.hash_ring == router.hash_ring
    other = ConsistentHashRouter(layout=layout)
    for node in reversed(nodes):
        other.add_service_node(node, router.weights[node])
    # Another add order: the same points, ties (none here) aside.
    assert other.hash_ring == router.hash_ring
    copy.remove_service_node(nodes[1])
    assert copy != router
    moves = router.diff(copy)
    assert moves and {m.source for m in moves} == {nodes[1]}
    keys = [f"k{i}" for i in range(2000)]
    moved = {k for k in keys if router.get_target_node(k) != copy.get_target_node(k)}
    assert moved == {k for k in keys if router.get_target_node(k) == nodes[1]}
    with pytest.raises(ValueError):
        router.diff(ConsistentHashRouter(layout="python"))


def test_a_sick_backend_walked_past_or_taken_out() -> None:
    """Varnish walks past a sick backend; a ring it is taken out of routes
    by the smaller ring.  They differ only on keys above the smaller ring's
    last point (docs/compat.md)."""
    rng = random.Random(11)
    differing = 0
    for trial in range(8):
        nodes = [f"t{trial}-be{i}" for i in range(5)]
        full = ConsistentHashRouter(layout="varnish")
        full.add_service_nodes(nodes)
        # Every other trial, the backend holding the last point (where they differ).
        sick = full.node_map[full.hash_ring[-1]] if trial % 2 else rng.choice(nodes)
        smaller = ConsistentHashRouter(layout="varnish")
        smaller.add_service_nodes([node for node in nodes if node != sick])
        top = smaller.hash_ring[-1]
        for i in range(3000):
            key = f"k{trial}-{i}"
            walked = next(node for node in full.get_preference_list(key, 5) if node != sick)
            if walked != smaller.get_target_node(key):
                differing += 1
                assert varnish_key(key) > top
    assert differing  # the difference is real
