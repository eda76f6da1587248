"""BoundedLoadRouter: the load bound holds, light load keeps plain owners."""
from __future__ import annotations

import math
import random
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chash import BoundedLoadRouter, ConsistentHashRouter


def make_ring(count: int, vnodes: int = 40) -> ConsistentHashRouter:
    router = ConsistentHashRouter(vnodes)
    for i in range(count):
        router.add_service_node(f"node-{i}")
    return router


@given(
    nodes=st.integers(1, 8),
    factor=st.sampled_from([1.0, 1.1, 1.25, 2.0]),
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 30)), max_size=200),
)
def test_no_node_exceeds_the_bound(nodes: int, factor: float, ops: list[tuple[bool, int]]) -> None:
    bounded = BoundedLoadRouter(make_ring(nodes), balance_factor=factor)
    held: list[str] = []
    for is_acquire, key in ops:
        if is_acquire or not held:
            limit = math.ceil(factor * (len(held) + 1) / nodes)
            node = bounded.acquire(f"key-{key}")
            held.append(node)
            assert bounded.loads[node] <= limit
        else:
            bounded.release(held.pop(key % len(held)))
        assert sum(bounded.loads.values()) == len(held) == bounded.in_flight


def test_light_load_goes_to_the_plain_owner() -> None:
    router = make_ring(5)
    bounded = BoundedLoadRouter(router, balance_factor=1.25)
    for i in range(1000):
        key = f"user-{i}"
        with bounded.route(key) as node:
            assert node == router.get_target_node(key)
    assert bounded.loads == {} and bounded.in_flight == 0


def test_hot_key_spills_clockwise() -> None:
    router = make_ring(4)
    bounded = BoundedLoadRouter(router, balance_factor=1.0)
    got = [bounded.acquire("hot") for _ in range(8)]
    preference = router.get_preference_list("hot", 4)
    assert got[0] == preference[0]
    assert sorted(bounded.loads.values()) == [2, 2, 2, 2]
    assert set(got) == set(preference)


def test_removed_node_is_never_chosen_and_releases_cleanly() -> None:
    router = make_ring(3)
    bounded = BoundedLoadRouter(router)
    owner = bounded.acquire("k")
    router.remove_service_node(owner)
    for i in range(200):
        with bounded.route(f"k{i}") as node:
            assert node != owner and node in router
    bounded.release(owner)
    assert bounded.in_flight == 0


def test_errors() -> None:
    with pytest.raises(LookupError, match="no nodes"):
        BoundedLoadRouter(ConsistentHashRouter()).acquire("k")
    with pytest.raises(ValueError, match=">= 1"):
        BoundedLoadRouter(make_ring(1), balance_factor=0.5)
    with pytest.raises(ValueError, match=">= 1"):
        BoundedLoadRouter(make_ring(1), balance_factor=float("nan"))
    with pytest.raises(TypeError, match="balance_factor must be a number"):
        BoundedLoadRouter(make_ring(1), balance_factor="2")  # type: ignore[arg-type]
    bounded = BoundedLoadRouter(make_ring(1))
    with pytest.raises(ValueError, match="holds no acquired request"):
        bounded.release("node-0")
    with pytest.raises(TypeError, match="key must be str or bytes"):
        bounded.acquire(3)  # type: ignore[arg-type]
    assert bounded.in_flight == 0


def test_threads_keep_counts_exact() -> None:
    router = make_ring(6)
    bounded = BoundedLoadRouter(router, balance_factor=1.25)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(2000):
                with bounded.route(f"user-{rng.randrange(50)}") as node:
                    assert node in router
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert bounded.in_flight == 0 and bounded.loads == {}
