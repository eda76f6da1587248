"""chash.RendezvousRouter: its interface, its bad input, and the layouts'
properties, against pure-Python oracles of the documented rules (hrw's
weighted score, pymemcache's murmur3 of "node-key", Caddy's FNV-1a of key
and dial, Squid's CARP with its multipliers and carried key hash)."""
from __future__ import annotations

import math
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from chash import RendezvousRouter
from chash._chash import _hash

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
LAYOUTS = ("hrw", "pymemcache", "caddy", "squid")


def mix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def key_bytes(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


def hrw_rank(nodes: dict[str, float], key: str | bytes) -> list[str]:
    h = _hash("xxh64", key_bytes(key))

    def score(node: str) -> tuple[float, int, tuple[int, ...]]:
        m = mix64(h ^ _hash("xxh64", node.encode()))
        u = ((m >> 12) + 0.5) * 2.0**-52
        # Smaller name first among equals: negate the bytes for a max-sort.
        return (nodes[node] / -math.log(u), m, tuple(-b for b in node.encode()))

    return sorted(nodes, key=score, reverse=True)


def pymemcache_score(node: str, key: str) -> int:
    data = bytes(ord(c) & 0xFF for c in f"{node}-{key}")
    return _hash("murmur3", data)


def fnv1a(data: bytes) -> int:
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & M32
    return h


def caddy_pick(dials: list[str], key: bytes) -> str | None:
    best, winner = 0, None
    for dial in dials:
        h = fnv1a(key + dial.encode())
        if h > best:
            best, winner = h, dial
    return winner


def rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & M32


def signed(b: int) -> int:
    return (b - 256 if b > 127 else b) & M32


def carp_hash(data: bytes) -> int:
    h = 0
    for b in data:
        h = (h + rotl(h, 19) + signed(b)) & M32
    h = (h + h * 0x62531965) & M32
    return rotl(h, 21)


def squid_pick(peers: list[tuple[str, int]], key: bytes) -> str | None:
    """Squid 5.7's carpInit and carpSelectParent, step for step."""
    total = sum(w for _, w in peers)
    order = sorted(range(len(peers)), key=lambda k: peers[k][1])  # stable
    k_count = len(peers)
    p_last, x_last, xn = 0.0, 0.0, 1.0
    multipliers: dict[int, float] = {}
    for k in range(1, k_count + 1):
        at = order[k - 1]
        kk1 = float(k_count - k + 1)
        factor = peers[at][1] / total
        if math.floor(factor * 1000.0) == 0.0:
            factor = 0.0
        m = (kk1 * (factor - p_last)) / xn
        m += math.pow(x_last, kk1)
        m = math.pow(m, 1.0 / kk1)
        xn *= m
        x_last, p_last = m, factor
        multipliers[at] = m
    user, high, winner = 0, 0.0, None
    for at in order:
        for b in key:
            user = (user + rotl(user, 19) + signed(b)) & M32
        combined = user ^ carp_hash(peers[at][0].encode())
        combined = rotl((combined + combined * 0x62531965) & M32, 21)
        score = combined * multipliers[at]
        if score > high:
            high, winner = score, peers[at][0]
    return winner


KEYS = [f"key-{i}" for i in range(300)] + ["", "é", "節點", "ключ", "😀x", "a" * 77]


def make(layout: str, nodes: list[str], weights: list[float] | None = None) -> RendezvousRouter:
    router = RendezvousRouter(layout=layout)  # type: ignore[arg-type]
    for k, node in enumerate(nodes):
        router.add_service_node(node, weights[k] if weights else 1.0)
    router._check()
    return router


# ------------------------------------------------------------------
# The layouts against their oracles


def test_hrw_matches_its_oracle_and_ranks_every_node() -> None:
    weights = {"a": 1.0, "b": 2.5, "c": 0.25, "節點": 4.0}
    router = make("hrw", list(weights), list(weights.values()))
    for key in [*KEYS, b"\xff\x00bytes"]:
        rank = hrw_rank(weights, key)
        assert router.get_target_node(key) == rank[0]
        assert router.get_preference_list(key, 10) == rank
        assert router.get_preference_list(key, 2) == rank[:2]


def test_hrw_by_hash_is_the_lookup_of_the_keys_xxh64() -> None:
    router = make("hrw", ["a", "b", "c"], [1.0, 2.0, 3.0])
    for key in KEYS:
        assert router.get_target_node_by_hash(_hash("xxh64", key.encode())) == \
            router.get_target_node(key)
    assert RendezvousRouter().get_target_node_by_hash(5) is None
    with pytest.raises(ValueError, match="2\\*\\*64 - 1"):
        router.get_target_node_by_hash(2**64)
    with pytest.raises(TypeError):
        router.get_target_node_by_hash("5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scores the key's bytes"):
        make("caddy", ["a"]).get_target_node_by_hash(5)


def test_hrw_uniform_weights_take_the_mix_alone() -> None:
    nodes = [f"n{i}" for i in range(9)]
    router = make("hrw", nodes)
    weights = dict.fromkeys(nodes, 1.0)
    assert [router.get_target_node(k) for k in KEYS] == [hrw_rank(weights, k)[0] for k in KEYS]


def test_pymemcache_matches_its_score_and_tie_rule() -> None:
    nodes = [f"10.0.0.{i}:11211" for i in range(6)] + ["ü:1"]
    router = make("pymemcache", nodes)
    for key in KEYS:
        best = max(nodes, key=lambda n: (pymemcache_score(n, key), n))
        assert router.get_target_node(key) == best
        assert router.get_preference_list(key, 1) == [best]
    # A bytes key is formatted as pymemcache formats it: str(b"...").
    assert router.get_target_node(b"abc") == router.get_target_node("b'abc'")


def test_caddy_and_squid_match_their_oracles() -> None:
    dials = [f"127.0.0.1:{8000 + i}" for i in range(7)]
    caddy = make("caddy", dials)
    peers = [("p0", 1), ("p1", 3), ("p2", 1), ("p3", 2), ("peer-é", 1)]
    squid = make("squid", [p for p, _ in peers], [float(w) for _, w in peers])
    for key in KEYS:
        data = key.encode()
        assert caddy.get_target_node(key) == caddy_pick(dials, data)
        assert squid.get_target_node(key) == squid_pick(peers, data)
        assert squid.get_preference_list(key, 1) == [squid_pick(peers, data)]


def test_squid_hash_is_carried_along_the_scan() -> None:
    # Squid never resets the key's hash between peers: the same peers
    # listed in another order (equal weights) route differently.
    a = make("squid", ["x", "y", "z"])
    b = make("squid", ["z", "y", "x"])
    assert a != b
    assert [a.get_target_node(k) for k in KEYS] != [b.get_target_node(k) for k in KEYS]


# ------------------------------------------------------------------
# hrw's properties


names = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8),
                 min_size=2, max_size=12, unique=True)
weights_st = st.floats(min_value=0.01, max_value=100.0, allow_nan=False)


@given(names, st.data())
def test_hrw_removing_a_node_moves_only_its_keys(nodes: list[str], data: st.DataObject) -> None:
    ws = [data.draw(weights_st) for _ in nodes]
    router = make("hrw", nodes, ws)
    before = router.get_target_nodes(KEYS)
    gone = data.draw(st.sampled_from(nodes))
    router.remove_service_node(gone)
    router._check()
    after = router.get_target_nodes(KEYS)
    for old, new in zip(before, after, strict=True):
        assert old in (new, gone)


@given(names, st.data())
def test_hrw_a_weight_change_moves_keys_only_to_or_from_that_node(
        nodes: list[str], data: st.DataObject) -> None:
    router = make("hrw", nodes, [data.draw(weights_st) for _ in nodes])
    before = router.get_target_nodes(KEYS)
    changed = data.draw(st.sampled_from(nodes))
    router.add_service_node(changed, data.draw(weights_st))
    after = router.get_target_nodes(KEYS)
    for old, new in zip(before, after, strict=True):
        assert old == new or changed in (old, new)


@given(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=5, unique=True))
def test_hrw_answers_do_not_depend_on_add_order(nodes: list[str]) -> None:
    ws = {n: float(ord(n) - 96) for n in nodes}
    a = make("hrw", nodes, [ws[n] for n in nodes])
    b = make("hrw", nodes[::-1], [ws[n] for n in nodes[::-1]])
    assert a == b and a.fingerprint() == b.fingerprint()
    assert a.get_target_nodes(KEYS) == b.get_target_nodes(KEYS)


def test_hrw_shares_follow_the_weights() -> None:
    router = make("hrw", ["a", "b", "c"], [1.0, 2.0, 5.0])
    assert router.ownership() == pytest.approx({"a": 1 / 8, "b": 2 / 8, "c": 5 / 8})
    keys = [f"k{i}" for i in range(40000)]
    counts = router.key_distribution(keys)
    for node, share in router.ownership().items():
        # Binomial: 40000 keys, 6 standard deviations at most.
        sd = math.sqrt(len(keys) * share * (1 - share))
        assert abs(counts[node] - len(keys) * share) < 6 * sd


# ------------------------------------------------------------------
# The interface


@pytest.mark.parametrize("layout", LAYOUTS)
def test_interface(layout: str) -> None:
    router = RendezvousRouter(layout=layout)  # type: ignore[arg-type]
    assert len(router) == 0 and router.get_target_node("k") is None
    assert router.get_preference_list("k", 3) == [] and router.ownership() == {}
    router.add_service_nodes(["a", "b", "c"])
    router.add_service_node("d")
    assert router.nodes == ["a", "b", "c", "d"] and list(router) == router.nodes
    assert "a" in router and "z" not in router and 1 not in router
    assert router.weights == dict.fromkeys("abcd", 1.0)
    assert router.layout == layout
    assert router.hash == {"hrw": "xxh64", "pymemcache": "murmur3", "caddy": "fnv1a",
                           "squid": "carp"}[layout]
    assert repr(router) == f"RendezvousRouter(layout='{layout}', hash='{router.hash}', nodes=4)"
    assert sum(router.ownership().values()) == pytest.approx(1.0)
    assert sum(router.key_distribution(KEYS).values()) == len(KEYS)
    for key in KEYS[:50]:
        prefs = router.get_preference_list(key, 4)
        assert sorted(prefs) == ["a", "b", "c", "d"]
        assert prefs[0] == router.get_target_node(key)
    assert router.get_target_nodes(KEYS[:9]) == [router.get_target_node(k) for k in KEYS[:9]]
    copy = pickle.loads(pickle.dumps(router))
    assert type(copy) is RendezvousRouter and copy == router
    assert copy.fingerprint() == router.fingerprint()
    assert copy.get_target_nodes(KEYS) == router.get_target_nodes(KEYS)
    router.remove_service_node("b")
    with pytest.raises(KeyError):
        router.remove_service_node("b")
    router.discard_service_node("b")
    router.discard_service_node("zz")
    assert router.nodes == ["a", "c", "d"] and copy != router
    router._replace_nodes([("x", 1.0), ("y", 1.0)])
    assert router.nodes == ["x", "y"]
    router._check()


def test_layouts_differ_and_fingerprints_follow_routing() -> None:
    routers = [make(layout, ["a", "b", "c"]) for layout in LAYOUTS]
    assert len({r.fingerprint() for r in routers}) == 4
    assert all(a != b for i, a in enumerate(routers) for b in routers[i + 1:])
    hrw = make("hrw", ["a", "b"], [1.0, 2.0])
    other = make("hrw", ["a", "b"], [1.0, 3.0])
    assert hrw != other and hrw.fingerprint() != other.fingerprint()


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="layout"):
        RendezvousRouter(layout="ketama")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RendezvousRouter("hrw")  # type: ignore[misc]
    with pytest.raises(ValueError, match="hashes with 'fnv1a'"):
        RendezvousRouter(layout="caddy", hash="xxh64")  # type: ignore[arg-type]
    assert RendezvousRouter(layout="caddy", hash="fnv1a").hash == "fnv1a"
    router = RendezvousRouter()
    with pytest.raises(TypeError, match="node id must be str"):
        router.add_service_node(3)  # type: ignore[arg-type]
    with pytest.raises(UnicodeEncodeError):
        router.add_service_node("\ud800")
    for bad in (0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="finite number > 0"):
            router.add_service_node("a", bad)
    with pytest.raises(TypeError, match="weight must be int or float"):
        router.add_service_node("a", "2")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        router.add_service_node("a", True)
    with pytest.raises(TypeError, match="single str"):
        router.add_service_nodes("abc")
    with pytest.raises(TypeError):
        router.add_service_nodes(["a", 2])  # type: ignore[list-item]
    assert len(router) == 0  # all or nothing
    router.add_service_node("a")
    with pytest.raises(TypeError, match="key must be str or bytes"):
        router.get_target_node(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        router.get_target_nodes([b"x", 5])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="n must be >= 0"):
        router.get_preference_list("k", -1)
    with pytest.raises(TypeError):
        router.get_preference_list("k")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="given twice"):
        router._replace_nodes([("a", 1.0), ("a", 1.0)])
    for layout in ("caddy", "pymemcache"):
        with pytest.raises(ValueError, match="has no weights"):
            RendezvousRouter(layout=layout).add_service_node("a", 2)  # type: ignore[arg-type]
    squid = RendezvousRouter(layout="squid")
    for bad in (1.5, 0, 2.0**31):
        with pytest.raises(ValueError, match="integer weights"):
            squid.add_service_node("a", bad)
    squid.add_service_node("a", 2**30)
    with pytest.raises(ValueError, match="exceeds 2\\*\\*31 - 1"):
        squid.add_service_nodes(["b", "c"], 2**30)
    assert squid.nodes == ["a"]
    with pytest.raises(TypeError):
        hash(router)


def test_str_subclass_nodes_are_stored_as_str() -> None:
    class Name(str):
        pass

    router = RendezvousRouter()
    router.add_service_node(Name("a"))
    assert type(router.nodes[0]) is str and Name("a") in router
    router.remove_service_node(Name("a"))
    assert len(router) == 0



def test_failed_changes_leave_the_router_as_it_was() -> None:
    router = make("squid", ["a", "b"], [2.0, 3.0])
    before = (router.nodes, router.weights, router.fingerprint())
    for change in (lambda: router.add_service_node("c", 0.5),
                   lambda: router.add_service_nodes(["c", 7], 1),  # type: ignore[list-item]
                   lambda: router.add_service_node("c", 2**31 - 5),
                   lambda: router._replace_nodes([("x", 1.0), ("x", 2.0)])):
        with pytest.raises((TypeError, ValueError)):
            change()
        assert (router.nodes, router.weights, router.fingerprint()) == before
        router._check()


def test_lookups_while_another_thread_changes_the_nodes() -> None:
    import threading

    router = make("hrw", [f"n{i}" for i in range(5)])
    allowed = {f"n{i}" for i in range(7)}
    stop = threading.Event()
    errors: list[str] = []

    def read() -> None:
        while not stop.is_set():
            for node in router.get_target_nodes(KEYS[:100]):
                if node not in allowed:
                    errors.append(repr(node))
            if not set(router.get_preference_list("k", 3)) <= allowed:
                errors.append("preference list")

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for i in range(200):
            router.add_service_node(f"n{5 + i % 2}", weight=1 + i % 3)
            router.discard_service_node(f"n{5 + (i + 1) % 2}")
    finally:
        stop.set()
        for t in readers:
            t.join(timeout=30)
    assert errors == []
    router._check()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_leak(layout: str) -> None:
    import gc
    import sys
    import tracemalloc

    names = [f"node-{i}-ключ" for i in range(6)]
    refcounts = [sys.getrefcount(n) for n in names]
    keys = ["k1", "ключ", "😀", b"raw", "é" * 9]

    def cycle() -> None:
        router = RendezvousRouter(layout=layout)  # type: ignore[arg-type]
        router.add_service_nodes(names)
        router.get_target_nodes(keys)
        router.get_preference_list("ключ", 4)
        router.key_distribution(keys)
        router.ownership()
        router.fingerprint()
        pickle.loads(pickle.dumps(router))
        router.remove_service_node(names[0])
        for bad in (lambda: router.add_service_node(3),  # type: ignore[arg-type]
                    lambda: router.get_target_node(4),  # type: ignore[arg-type]
                    lambda: router.add_service_node("x", -1)):
            try:
                bad()
            except (TypeError, ValueError):
                pass

    # A leak grows every window alike; the interpreter's free lists (pickle
    # fills the tuples') and caches fill in the first and stop.
    tracemalloc.start()
    try:
        windows = []
        for _ in range(3):
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(700):
                cycle()
            gc.collect()
            windows.append(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
    growth = min(windows[1:])
    assert growth < 20_000, growth
    assert [sys.getrefcount(n) for n in names] == refcounts


class RendezvousMachine(RuleBasedStateMachine):
    """Every change applied to a RendezvousRouter and to a dict of weights;
    after each, every layout's router routes as its oracle says."""

    def __init__(self) -> None:
        super().__init__()
        self.hrw = RendezvousRouter()
        self.squid = RendezvousRouter(layout="squid")
        self.model: dict[str, float] = {}

    @rule(node=st.sampled_from([f"n{i}" for i in range(8)] + ["節點", "é"]),
          weight=st.integers(min_value=1, max_value=9))
    def add(self, node: str, weight: int) -> None:
        self.hrw.add_service_node(node, weight)
        self.squid.add_service_node(node, weight)
        self.model[node] = float(weight)

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        if not self.model:
            return
        node = data.draw(st.sampled_from(sorted(self.model)))
        self.hrw.remove_service_node(node)
        self.squid.discard_service_node(node)
        del self.model[node]

    @invariant()
    def routes_as_the_oracles_say(self) -> None:
        self.hrw._check()
        self.squid._check()
        assert self.hrw.weights == self.model == self.squid.weights
        peers = list(self.model.items())
        keys = KEYS[::25]
        want = [hrw_rank(self.model, k)[0] if self.model else None for k in keys]
        assert self.hrw.get_target_nodes(keys) == want
        squid_want = [squid_pick([(p, int(w)) for p, w in peers], k.encode()) if peers else None
                      for k in keys]
        assert self.squid.get_target_nodes(keys) == squid_want


TestRendezvousMachine = RendezvousMachine.TestCase
