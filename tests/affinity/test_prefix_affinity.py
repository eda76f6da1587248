"""chash.affinity.PrefixAffinity: the choice against a plain-Python model of
the documented rule (LRU records, costs along the preference list), the
anchor replicas agree on, its own in-flight counts, forget, errors that
leave the state as it was, threads, and the documented example."""
from __future__ import annotations

import gc
import math
import random
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import pytest

from chash import ConsistentHashRouter
from chash.affinity import PrefixAffinity, prefix_blocks


class Model:
    """The documented rule, plainly."""

    def __init__(self, router: ConsistentHashRouter, capacity: int, block_tokens: int,
                 key_blocks: int, miss_cost: float, rank_cost: float, load_cost: float) -> None:
        self.router, self.capacity, self.block_tokens = router, capacity, block_tokens
        self.miss_cost = miss_cost
        self.key_blocks, self.rank_cost, self.load_cost = key_blocks, rank_cost, load_cost
        self.records: dict[str, OrderedDict[int, None]] = {}

    def match(self, node: str, blocks: Sequence[int]) -> int:
        record = self.records.get(node, OrderedDict())
        k = 0
        while k < len(blocks) and blocks[k] in record:
            k += 1
        return k

    def route(self, blocks: Sequence[int], loads: Mapping[str, float],
              queued: Mapping[str, float], tokens: int | None) -> str:
        key = ",".join(map(str, blocks[:self.key_blocks]))
        nodes = self.router.get_preference_list(key, len(self.router))
        total = tokens if tokens else len(blocks) * self.block_tokens
        costs = [queued.get(node, 0)
                 + self.miss_cost * max(0, total - self.match(node, blocks) * self.block_tokens)
                 + rank * self.rank_cost + loads.get(node, 0) * self.load_cost
                 for rank, node in enumerate(nodes)]
        node = nodes[costs.index(min(costs))]
        record = self.records.setdefault(node, OrderedDict())
        for b in blocks:
            record[b] = None
            record.move_to_end(b)
        while len(record) > self.capacity:
            record.popitem(last=False)
        return node


@pytest.mark.parametrize("seed", range(6))
def test_route_matches_the_model(ring: ConsistentHashRouter, seed: int) -> None:
    rng = random.Random(seed)
    kwargs = {"capacity": rng.choice([3, 8, 50]), "block_tokens": rng.choice([1, 16, 512]),
              "key_blocks": rng.choice([1, 2, 3]), "rank_cost": rng.choice([0.0, 16.0, 700.0]),
              "miss_cost": rng.choice([0.0, 1.0, 3.0]),
              "load_cost": rng.choice([0.0, 40.0])}
    policy = PrefixAffinity(ring, **kwargs)  # type: ignore[arg-type]
    model = Model(ring, **kwargs)  # type: ignore[arg-type]
    nodes = [f"w{j}" for j in range(8)]
    for _ in range(400):
        family = rng.randrange(5)
        blocks = [family * 1000 + k for k in range(rng.randrange(0, 5))] + \
                 [rng.randrange(10**6) for _ in range(rng.randrange(0, 3))]
        loads = {n: rng.randrange(4) for n in nodes if rng.random() < 0.8}
        queued = {n: float(rng.randrange(0, 3000)) for n in nodes if rng.random() < 0.5}
        tokens = rng.choice([None, 1, 700, 5000])
        want = model.route(blocks, loads, queued, tokens)
        assert policy.route(blocks, loads=loads, queued=queued, tokens=tokens) == want
        probe = blocks[:2]
        assert [policy.match(n, probe) for n in nodes] == [model.match(n, probe) for n in nodes]
    assert [policy.held(n) for n in nodes] == [len(model.records.get(n, ())) for n in nodes]
    policy._table._check()


def test_an_idle_cluster_gets_the_anchor_and_replicas_agree(ring: ConsistentHashRouter) -> None:
    blocks = prefix_blocks("You are a helpful assistant. " * 20 + "Question 1", block=16)
    first = ring.get_preference_list(",".join(map(str, blocks[:2])), 8)[0]
    replicas = [PrefixAffinity(ring, block_tokens=16) for _ in range(3)]
    assert {replica.route(blocks, loads={}, queued={}) for replica in replicas} == {first}


def test_queued_work_moves_a_prompt_off_its_cached_node(ring: ConsistentHashRouter) -> None:
    policy = PrefixAffinity(ring, block_tokens=100, miss_cost=1.0)
    blocks = [1, 2, 3, 4]
    home = policy.route(blocks, loads={}, queued={})
    again = policy.route(blocks, loads={}, queued={home: 399.0})
    assert again == home  # 399 queued < 400 to prefill elsewhere (+ one step down)
    away = policy.route(blocks, loads={}, queued={home: 1000.0})
    assert away != home
    assert policy.match(away, blocks) == 4


def test_own_in_flight_counts_and_done(ring: ConsistentHashRouter) -> None:
    policy = PrefixAffinity(ring, load_cost=10_000.0)
    a = policy.route([1, 2])
    b = policy.route([1, 2])  # a's one in-flight request costs more than a full prefill
    assert a != b
    assert policy.in_flight() == {a: 1, b: 1}
    policy.done(a)
    assert policy.in_flight() == {b: 1}
    assert policy.route([1, 2]) == a
    with pytest.raises(ValueError, match="no request in flight"):
        policy.done("w-none")


def test_forget_drops_a_record(ring: ConsistentHashRouter) -> None:
    policy = PrefixAffinity(ring)
    assert policy.nodes() == []
    node = policy.route([5, 6, 7], loads={}, queued={})
    assert policy.held(node) == 3
    # Every node the preference list named got a record, in its order.
    order = ring.get_preference_list("5,6", len(ring))
    assert policy.nodes() == order
    policy.forget(node)
    assert policy.held(node) == 0 and policy.in_flight() == {}
    assert policy.nodes() == [n for n in order if n != node]
    with pytest.raises(KeyError):
        policy.forget(node)
    ring.remove_service_node(node)
    assert policy.route([5, 6, 7], loads={}, queued={}) != node


@pytest.mark.parametrize("kwargs,error", [
    ({"loads": {"w0": -1}}, ValueError), ({"loads": {"w3": math.inf}}, ValueError),
    ({"queued": {"w1": math.nan}}, ValueError), ({"queued": {"w1": "x"}}, TypeError),
    ({"tokens": -5}, ValueError), ({"blocks": [1, -2]}, ValueError),
    ({"blocks": [1, "2"]}, TypeError), ({"blocks": 12}, TypeError),
])
def test_bad_input_leaves_the_state_as_it_was(ring: ConsistentHashRouter, kwargs: dict[str, object],
                                               error: type[Exception]) -> None:
    policy = PrefixAffinity(ring)
    node = policy.route([1, 2, 3])
    blocks = kwargs.pop("blocks", [1, 2, 3, 4])
    with pytest.raises(error):
        policy.route(blocks, **kwargs)  # type: ignore[arg-type]
    assert policy.in_flight() == {node: 1}
    assert sum(policy.held(f"w{j}") for j in range(8)) == 3
    policy._table._check()


@pytest.mark.parametrize("kwargs", [{"capacity": 0}, {"block_tokens": 0}, {"key_blocks": 0},
                                    {"capacity": True}, {"rank_cost": -1.0}, {"miss_cost": math.nan},
                                    {"load_cost": math.inf}, {"capacity": 2**31}])
def test_bad_settings_are_refused(ring: ConsistentHashRouter, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PrefixAffinity(ring, **kwargs)  # type: ignore[arg-type]


def test_an_empty_router_is_a_lookup_error() -> None:
    with pytest.raises(LookupError, match="no node"):
        PrefixAffinity(ConsistentHashRouter()).route([1])


def test_threads_share_one_policy(ring: ConsistentHashRouter) -> None:
    policy = PrefixAffinity(ring, capacity=64)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(2000):
                node = policy.route([rng.randrange(20) for _ in range(rng.randrange(1, 6))])
                policy.done(node)
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert policy.in_flight() == {}
    policy._table._check()


def test_the_documented_example_routes_by_prefix() -> None:
    # docs/llm.md, "Plugging it into a router": the same code.
    class EngineRouter:
        def __init__(self, engines: list[str]) -> None:
            self.ring = ConsistentHashRouter()
            for engine in engines:
                self.ring.add_service_node(engine)
            self.in_flight = dict.fromkeys(engines, 0)
            self.affinity = PrefixAffinity(self.ring, block_tokens=64)

        def pick(self, prompt: str) -> str:
            blocks = prefix_blocks(prompt, block=64 * 4)  # about 4 characters a token
            engine = self.affinity.route(blocks, loads=self.in_flight)
            self.in_flight[engine] += 1
            return engine

        def finished(self, engine: str) -> None:
            self.in_flight[engine] -= 1

    router = EngineRouter([f"http://engine-{i}:8000" for i in range(4)])
    system = "You are a careful assistant. " * 40
    first = router.pick(system + "What is 2 + 2?")
    assert router.pick(system + "Name a prime.") == first  # the shared prefix is cached there
    router.finished(first)
    router.finished(first)
    assert router.in_flight[first] == 0


def test_route_keeps_no_reference_it_should_not(ring: ConsistentHashRouter) -> None:
    policy = PrefixAffinity(ring, capacity=32)
    blocks = [10**18 + k for k in range(70)]  # beyond the binding's stack buffer
    loads = {f"w{j}": 1 for j in range(8)}
    queued = {f"w{j}": 5.0 for j in range(8)}
    for _ in range(50):
        policy.done(policy.route(blocks, loads=loads, queued=queued))
    before = [sys.getrefcount(x) for x in (blocks, loads, queued, blocks[0], *loads)]
    objects = len(gc.get_objects())
    for _ in range(2000):
        policy.route(blocks, loads=loads, queued=queued)
        policy.match("w0", blocks)
        with pytest.raises(ValueError):
            policy.route([1, -1], loads=loads)
    assert [sys.getrefcount(x) for x in (blocks, loads, queued, blocks[0], *loads)] == before
    assert len(gc.get_objects()) <= objects + 10
