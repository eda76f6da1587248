"""BoundedLoads, the prefix-affinity table and uhashring's HashRing shared
between threads: each serialises its own calls (a per-object lock), so
loads taken and given back by many threads add up exactly, the bound holds
at every acquire, the tables keep their invariants, and HashRing's
get_bounded answers with one of the rings it passes through, while the
router or ring under them changes."""
from __future__ import annotations

import math
import threading
from collections.abc import Callable

import chash
from chash._chash import BoundedLoads, _AffinityTable
from chash.compat.uhashring import HashRing

THREADS = 4


def _run_all(work: Callable[[int], None]) -> None:
    """work(k) in THREADS threads at once, each to its end."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)


def _run_with(work: Callable[[int], None], add: Callable[[str], object],
              remove: Callable[[str], object], start: threading.Barrier) -> None:
    """work(k) in THREADS threads and, in one more, a node "extra" added
    and removed 50 times, all from start on, each to its end."""

    def change() -> None:
        start.wait()
        for _ in range(50):
            add("extra")
            remove("extra")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    threads.append(threading.Thread(target=change))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)


def test_bounded_loads_shared_by_threads() -> None:
    router = chash.ConsistentHashRouter(virtual_node_count=40)
    router.add_service_nodes([f"n{i}" for i in range(6)])
    loads = BoundedLoads(router, 1.25)
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS + 1)

    def work(seed: int) -> None:
        start.wait()
        held: list[str] = []
        for i in range(3000):
            node = loads.acquire(f"key-{seed}-{i}")
            if node not in ("n0", "n1", "n2", "n3", "n4", "n5", "extra"):
                with lock:
                    failures.append(f"acquire gave {node!r}")
            held.append(node)
            if len(held) > 5:
                loads.release(held.pop(0))
        for node in held:
            loads.release(node)

    _run_with(work, router.add_service_node, router.remove_service_node, start)
    assert failures == []
    loads._check()
    assert loads.in_flight == 0
    assert sum(loads.loads.values()) == 0


def test_bounded_loads_hold_the_bound_with_every_thread_holding() -> None:
    """Every thread keeps what it acquires: the total is exact and no node
    exceeds the bound the last acquire allowed."""
    router = chash.MaglevRouter()
    router.add_service_nodes([f"n{i}" for i in range(4)])
    loads = BoundedLoads(router, 1.5)
    start = threading.Barrier(THREADS)
    per_thread = 500

    def work(seed: int) -> None:
        start.wait()
        for i in range(per_thread):
            loads.acquire(f"k{seed}-{i}")

    _run_all(work)
    loads._check()
    total = THREADS * per_thread
    assert loads.in_flight == total
    assert sum(loads.loads.values()) == total
    assert max(loads.loads.values()) <= math.ceil(1.5 * total / 4)


def test_affinity_table_shared_by_threads() -> None:
    table = _AffinityTable(64)
    nodes = [f"n{i}" for i in range(4)]
    start = threading.Barrier(THREADS)

    def work(seed: int) -> None:
        start.wait()
        for i in range(2000):
            blocks = [seed * 10_000 + i % 50, i % 7]
            table.route(blocks, nodes, None, None, 128.0, 128.0, 1.0, 0.1, 0.0)
            if i % 500 == 0:
                table.forget(nodes[seed % 4])

    _run_all(work)
    table._check()
    assert set(table.nodes()) <= set(nodes)
    assert all(table.held(node) <= 64 for node in table.nodes())


def test_hash_ring_get_bounded_while_the_ring_changes() -> None:
    # Every answer is the one of a ring with the extra node or of a ring
    # without it: the view get_bounded reads (names, weights, index) is
    # remade after each change, under the ring's own lock.
    base = [f"n{i}" for i in range(6)]
    ring = HashRing(base, vnodes=40)
    with_extra = HashRing(base, vnodes=40)
    with_extra.add_node("extra")
    loads = {name: 1 + i % 4 for i, name in enumerate(base)} | {"extra": 2}
    keys = [f"key-{i}" for i in range(200)]
    answers = {key: {ring.get_bounded(key, loads), with_extra.get_bounded(key, loads)}
               for key in keys}
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS + 1)

    def work(seed: int) -> None:
        start.wait()
        for i in range(3000):
            key = keys[(seed * 7 + i) % len(keys)]
            node = ring.get_bounded(key, loads)
            if node not in answers[key]:
                with lock:
                    failures.append(f"{key!r} -> {node!r}")

    _run_with(work, ring.add_node, ring.remove_node, start)
    assert failures == []
    ring._check()
