"""chash.MaglevRouter: Envoy's Maglev table against a plain-Python oracle
(tests/_support/envoy_reference.py), the retry walk behind the preference
list, the router API, errors that leave the router as it was, threads;
diff() against comparing the tables entry by entry, and Migration over it."""
from __future__ import annotations

import itertools
import pickle
import random
import threading

import pytest
import xxhash

from _support import envoy_reference as ref
from chash import ConsistentHashRouter, MaglevRouter, Move

HOSTS = [f"10.2.{i // 250}.{i % 250}:9000" for i in range(120)]


def build(pairs: list[tuple[str, int]], size: int = 65537) -> MaglevRouter:
    router = MaglevRouter(size)
    router._replace_nodes([(n, float(w)) for n, w in pairs])
    router._check()
    return router


@pytest.mark.parametrize("size, seed", [(7, 0), (17, 1), (251, 2), (1009, 3), (65537, 4)])
def test_tables_match_the_oracle(size: int, seed: int) -> None:
    rng = random.Random(seed)
    hosts = rng.sample(HOSTS, rng.randint(1, 9))
    weights = [rng.choice([1, 1, 2, 5, 13]) for _ in hosts]
    router = build(list(zip(hosts, weights, strict=False)), size)
    expected = ref.maglev(hosts, weights, size)
    assert router.table == [hosts[k] for k in expected]
    assert router.points == {h: expected.count(k) for k, h in enumerate(hosts)}
    keys = [f"m{seed}-{i}" for i in range(200)]
    want = [hosts[expected[xxhash.xxh64_intdigest(k.encode()) % size]] for k in keys]
    assert router.get_target_nodes(keys) == want
    assert [router.get_target_node(k) for k in keys] == want
    hashes = [router._calculate_hash(k) for k in keys]
    assert router.get_target_nodes_by_hash(hashes) == want
    assert [router.get_target_node_by_hash(h) for h in hashes] == want


def test_the_table_depends_on_the_hosts_not_their_order() -> None:
    pairs = [(h, 1 + i % 4) for i, h in enumerate(HOSTS[:30])]
    shuffled = pairs[:]
    random.Random(3).shuffle(shuffled)
    a, b = build(pairs, 1009), build(shuffled, 1009)
    assert a.table == b.table and a == b and a.fingerprint() == b.fingerprint()
    assert a.nodes != b.nodes


def test_100_hosts_fill_65537_entries_evenly() -> None:
    router = MaglevRouter()
    router.add_service_nodes(HOSTS[:100])
    counts = router.points.values()
    assert router.table_size == 65537 and len(router.table) == 65537
    assert min(counts) >= 655 and max(counts) <= 656
    assert abs(sum(router.ownership().values()) - 1.0) < 1e-9


def test_preference_list_follows_envoys_retry_walk() -> None:
    router = build([(h, 1) for h in HOSTS[:12]], 251)
    for key in [f"p{i}" for i in range(50)]:
        h = router._calculate_hash(key)
        walk: list[str] = []
        for attempt in range(251):
            node = router.get_target_node_by_hash(h ^ (2**64 - attempt) if attempt else h)
            assert node is not None
            if node not in walk:
                walk.append(node)
        rest = [n for n in router.nodes if n not in walk]
        assert router.get_preference_list(key, 100) == walk + rest
        assert router.get_preference_list(key, 3) == (walk + rest)[:3]
        assert router.get_preference_list(key, 1) == [router.get_target_node(key)]


def test_membership_pickle_and_protocols() -> None:
    router = MaglevRouter(17)
    router.add_service_node("127.0.0.1:90")
    router.add_service_node("127.0.0.1:91", weight=2)
    assert router.table == [["127.0.0.1:90", "127.0.0.1:91"][k] for k in
                            [1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1]]
    copy = pickle.loads(pickle.dumps(router))
    assert copy == router and copy.table == router.table and type(copy) is MaglevRouter
    router.remove_service_node("127.0.0.1:91")
    assert set(router.table) == {"127.0.0.1:90"} and router != copy
    router.discard_service_node("nope")
    with pytest.raises(KeyError):
        router.remove_service_node("nope")
    router.remove_service_node("127.0.0.1:90")
    assert router.table == [] and router.get_target_node("k") is None
    assert router.get_target_nodes_by_hash([1, 2]) == [None, None]
    assert router.get_preference_list("k", 3) == [] and len(router) == 0
    router._check()
    assert repr(router) == "MaglevRouter(table_size=17, hash='xxh64', layout='envoy', nodes=0)"
    assert router.hash == "xxh64" and router.layout == "envoy" and router.memory_bytes >= 0


@pytest.mark.parametrize("args, kwargs, error, text", [
    ((8,), {}, ValueError, "prime"),
    ((1,), {}, ValueError, "prime"),
    ((2**31 - 1,), {}, ValueError, "prime from 2 to"),
    ((7.0,), {}, TypeError, "table_size must be int"),
    ((True,), {}, TypeError, "table_size must be int"),
    ((), {"hash": "murmur2_64"}, ValueError, "takes hash 'xxh64'"),
    ((), {"layout": "grpc"}, ValueError, "layout must be 'envoy'"),
])
def test_constructor_errors(args: tuple[object, ...], kwargs: dict[str, object],
                            error: type[Exception], text: str) -> None:
    with pytest.raises(error) as info:
        MaglevRouter(*args, **kwargs)  # type: ignore[arg-type]
    assert text in str(info.value)


def test_failed_changes_leave_the_router_as_it_was() -> None:
    router = build([("a", 1), ("b", 2)], 17)
    before = (router.table, router.nodes, router.weights)
    for weight in (0, 2.5, True, 2**32):
        with pytest.raises((TypeError, ValueError)):
            router.add_service_node("c", weight)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exceeds"):
        router.add_service_nodes(["c", "d"], weight=2**31)
    with pytest.raises(ValueError, match="2\\*\\*64 - 1 for the maglev layout"):
        router.get_target_node_by_hash(-1)
    assert (router.table, router.nodes, router.weights) == before


def test_lookups_while_another_thread_changes_the_table() -> None:
    router = build([(h, 1) for h in HOSTS[:5]], 1009)
    allowed = set(HOSTS[:7])
    stop = threading.Event()
    errors: list[str] = []

    def read() -> None:
        while not stop.is_set():
            for node in router.get_target_nodes_by_hash(list(range(0, 2**64, 2**58))):
                if node not in allowed:
                    errors.append(repr(node))

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for i in range(200):
            router.add_service_node(HOSTS[5 + i % 2], weight=1 + i % 2)
            router.discard_service_node(HOSTS[5 + (i + 1) % 2])
    finally:
        stop.set()
        for t in readers:
            t.join(timeout=30)
    assert errors == []
    router._check()


@pytest.mark.parametrize("size", [2, 3, 7, 65537, 1000003])
def test_every_64_bit_hash_goes_to_its_entry(size: int) -> None:
    # The remainder is computed by multiplications: checked at the ends.
    router = MaglevRouter(size)
    router.add_service_nodes(HOSTS[:5])
    table = router.table
    rng = random.Random(size)
    hashes = [0, 1, size - 1, size, size + 1, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1,
              ((2**64 - 1) // size) * size, ((2**64 - 1) // size) * size - 1]
    hashes += [rng.getrandbits(64) for _ in range(3000)]
    assert router.get_target_nodes_by_hash(hashes) == [table[h % size] for h in hashes]


def entries_of(move: object, size: int) -> list[int]:
    """The table entries a Move holds: start < e <= end, wrapping; all when equal."""
    start, end = move.start, move.end  # type: ignore[attr-defined]
    if start == end:
        return list(range(size))
    if start < end:
        return list(range(start + 1, end + 1))
    return list(range(start + 1, size)) + list(range(end + 1))


def check_diff(old: MaglevRouter, new: MaglevRouter) -> int:
    """old.diff(new) against the two tables entry by entry; the move count."""
    size = old.table_size
    moves = old.diff(new)
    before, after = old.table, new.table
    covered: dict[int, tuple[str, str]] = {}
    for move in moves:
        for e in entries_of(move, size):
            assert e not in covered, (e, moves)  # no overlap
            covered[e] = (move.source, move.target)
    assert covered == {e: (before[e], after[e]) for e in range(size) if before[e] != after[e]}
    ends = [m.end for m in moves]
    assert ends == sorted(ends)  # table order
    for first, second in itertools.pairwise(moves):  # neighbours of a pair joined
        assert not (first.end == second.start and (first.source, first.target)
                    == (second.source, second.target))
    return len(moves)


@pytest.mark.parametrize("size, seed", [(7, 0), (13, 1), (251, 2), (65537, 3)])
def test_diff_lists_exactly_the_entries_that_change_owner(size: int, seed: int) -> None:
    rng = random.Random(seed)
    hosts = rng.sample(HOSTS, 8)
    old = build([(h, rng.choice([1, 2, 3])) for h in hosts[:5]], size)
    cases = [
        build([(h, old.weights[h]) for h in hosts[:5]] + [(hosts[5], 1)], size),  # one joins
        build([(h, old.weights[h]) for h in hosts[1:5]], size),                    # one leaves
        build([(h, old.weights[h] + (k == 2)) for k, h in enumerate(hosts[:5])], size),
        build([(h, 1) for h in hosts[5:8]], size),                                 # all new
    ]
    for new in cases:
        count = check_diff(old, new)
        assert count > 0 or size < 100  # a tiny table may hold a weight change alike
        check_diff(new, old)
    assert old.diff(build([(h, old.weights[h]) for h in reversed(hosts[:5])], size)) == []
    # Keys route as the moves say: a key moves iff its entry is in a move.
    new = cases[0]
    moves = old.diff(new)
    moving = {e for m in moves for e in entries_of(m, size)}
    for key in (f"k{i}" for i in range(500)):
        entry = xxhash.xxh64_intdigest(key.encode()) % size
        assert (old.get_target_node(key) != new.get_target_node(key)) == (entry in moving)


def test_diff_of_a_whole_table_and_errors() -> None:
    a, b = build([("a", 1)], 13), build([("b", 1)], 13)
    assert a.diff(b) == [Move(12, 12, "a", "b")]  # every entry
    assert MaglevRouter(13).diff(MaglevRouter(13)) == []
    with pytest.raises(ValueError, match="empty"):
        a.diff(MaglevRouter(13))
    with pytest.raises(ValueError, match="one table_size, not 13 and 17"):
        a.diff(build([("a", 1)], 17))
    with pytest.raises(TypeError, match="needs a MaglevRouter"):
        a.diff(ConsistentHashRouter())  # type: ignore[arg-type]


def test_migration_behind_maglev() -> None:
    """Resharding behind Maglev: chash.migration takes two MaglevRouters.
    (Maglev is not minimally disruptive: a new host also moves a few
    entries between the others, which the moves list as well.)"""
    from chash.migration import Migration

    old = build([(h, 1) for h in HOSTS[:4]], 251)
    new = build([(h, 1) for h in HOSTS[:5]], 251)
    keys = [f"user-{i}" for i in range(2000)]
    migration = Migration(old, new, keys)
    moved = [item for batch in migration.batches() for item in batch]
    assert moved and any(target == HOSTS[4] for _, _, target in moved)
    assert sorted(moved) == sorted((k, old.get_target_node(k), new.get_target_node(k))
                                   for k in keys if old.get_target_node(k) != new.get_target_node(k))


def test_diff_does_not_leak() -> None:
    import gc
    import sys
    import tracemalloc

    old = build([(h, 1) for h in HOSTS[:3]], 251)
    new = build([(h, 1) for h in HOSTS[1:5]], 251)
    refcounts = [sys.getrefcount(h) for h in HOSTS[:5]]

    def cycle() -> None:
        old.diff(new)
        for bad in (build([("a", 1)], 13), MaglevRouter(251), 3):
            try:
                old.diff(bad)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                pass

    for _ in range(200):
        cycle()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            cycle()
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert growth < 20_000, growth
    assert [sys.getrefcount(h) for h in HOSTS[:5]] == refcounts
