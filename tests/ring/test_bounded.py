"""BoundedLoadRouter: the load bound holds, light load keeps plain owners."""
from __future__ import annotations

import math
import random
import sys
import threading
import time

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


# ---------------------------------------------------------------------------
# Every router, weighted: the C table against a plain-Python model of the
# documented rule (Envoy's weighted slots, the router's own preference order).

from chash import JumpRouter, MaglevRouter, RendezvousRouter  # noqa: E402


def model_slots(weights: dict[str, float], node: str, in_flight: int, factor: float) -> int:
    total = math.ceil(factor * (in_flight + 1))
    whole = sum(weights.values())
    weight = weights[node]
    return total if weight >= whole else max(math.ceil(total * weight / whole), 1)


def model_pick(router: Router, loads: dict[str, int], key: str, factor: float) -> str:
    weights = {node: float(w) for node, w in router.weights.items()}
    in_flight = sum(loads.values())
    owner = router.get_target_node(key)
    assert owner is not None
    if loads.get(owner, 0) < model_slots(weights, owner, in_flight, factor):
        return owner
    for node in router.get_preference_list(key, len(router)):
        if loads.get(node, 0) < model_slots(weights, node, in_flight, factor):
            return node
    raise AssertionError("the bound leaves no node free")


Router = ConsistentHashRouter | MaglevRouter | JumpRouter | RendezvousRouter

RING_LAYOUTS = ["python", "node", "ketama", "nginx", "libmemcached", "haproxy", "envoy", "grpc"]
WHOLE_WEIGHTS = {"nginx", "ketama", "libmemcached", "haproxy", "envoy", "grpc", "maglev", "jump",
                 "rendezvous-squid"}


def make_router(kind: str) -> Router:
    if kind == "maglev":
        return MaglevRouter()
    if kind == "jump":
        return JumpRouter()
    if kind.startswith("rendezvous-"):
        return RendezvousRouter(layout=kind.removeprefix("rendezvous-"))  # type: ignore[arg-type]
    return ConsistentHashRouter(layout=kind)  # type: ignore[arg-type]


KINDS = [*RING_LAYOUTS, "maglev", "jump", "rendezvous-hrw", "rendezvous-pymemcache",
         "rendezvous-caddy", "rendezvous-squid"]


def filled(kind: str, weights: list[float]) -> Router:
    router = make_router(kind)
    for i, weight in enumerate(weights):
        if kind in ("jump", "rendezvous-caddy", "rendezvous-pymemcache"):
            router.add_service_node(f"10.0.0.{i}:80")
        elif kind in WHOLE_WEIGHTS:
            router.add_service_node(f"10.0.0.{i}:80", float(max(1, round(weight))))
        else:
            router.add_service_node(f"10.0.0.{i}:80", weight)
    return router


@pytest.mark.parametrize("kind", KINDS)
@given(
    weights=st.lists(st.sampled_from([1.0, 2.0, 3.0, 0.5]), min_size=1, max_size=6),
    factor=st.sampled_from([1.0, 1.25, 2.0]),
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 20)), max_size=60),
)
def test_every_router_follows_the_weighted_model(kind: str, weights: list[float], factor: float,
                                                 ops: list[tuple[bool, int]]) -> None:
    router = filled(kind, weights)
    bounded = BoundedLoadRouter(router, balance_factor=factor)
    loads: dict[str, int] = {}
    held: list[str] = []
    for is_acquire, key in ops:
        if is_acquire or not held:
            expected = model_pick(router, loads, f"key-{key}", factor)
            node = bounded.acquire(f"key-{key}")
            assert node == expected
            held.append(node)
            loads[node] = loads.get(node, 0) + 1
            assert loads[node] <= model_slots(
                {n: float(w) for n, w in router.weights.items()}, node, len(held) - 1, factor)
        else:
            node = held.pop(key % len(held))
            bounded.release(node)
            loads[node] -= 1
            if not loads[node]:
                del loads[node]
        assert bounded.loads == loads
        assert bounded.in_flight == len(held)
        bounded._check()


@pytest.mark.parametrize("kind", KINDS)
def test_every_router_spills_along_its_own_preference_list(kind: str) -> None:
    router = filled(kind, [1.0] * 5)
    bounded = BoundedLoadRouter(router, balance_factor=1.0)
    got = [bounded.acquire("hot") for _ in range(5)]
    # One request a node: each goes to the next of the hot key's own list.
    assert got == router.get_preference_list("hot", 5)


def test_a_node_s_bound_follows_its_weight() -> None:
    router = ConsistentHashRouter()
    router.add_service_node("big", 3.0)
    router.add_service_node("small", 1.0)
    bounded = BoundedLoadRouter(router, balance_factor=1.0)
    for _ in range(8):
        bounded.acquire("hot")
    # T = 8 slots: 6 for the node of weight 3, 2 for the one of weight 1.
    assert bounded.loads == {"big": 6, "small": 2}
    # After one more: T = 9, ceil(27 / 4) = 7 and ceil(9 / 4) = 3.
    assert (bounded.bound("big"), bounded.bound("small"), bounded.bound()) == (7, 3, 7)
    with pytest.raises(KeyError):
        bounded.bound("absent")


def test_router_changes_are_seen_on_the_next_acquire() -> None:
    for router in (ConsistentHashRouter(), MaglevRouter(), RendezvousRouter()):
        router.add_service_node("a")
        router.add_service_node("b")
        bounded = BoundedLoadRouter(router, balance_factor=1.0)
        assert bounded.bound("a") == 1
        router.add_service_node("a", 3.0)  # a weight change
        assert bounded.bound("a") == 1  # T = 1 slot: at least 1 each
        for i in range(4):
            bounded.acquire(f"k{i}")
        # T = 5: a holds at most ceil(15 / 4) = 4, b at most ceil(5 / 4) = 2.
        assert bounded.bound("a") == 4 and bounded.bound("b") == 2
        router.add_service_node("c")
        # T = 5 over a total weight of 5: 3 for a, 1 each for b and c.
        assert (bounded.bound("a"), bounded.bound("b"), bounded.bound("c")) == (3, 1, 1)
        bounded._check()


def test_jump_router_and_its_last_bucket() -> None:
    router = JumpRouter()
    router.add_service_nodes(["a", "b", "c"])
    bounded = BoundedLoadRouter(router, balance_factor=1.0)
    held = [bounded.acquire("hot") for _ in range(3)]
    assert sorted(held) == ["a", "b", "c"]
    router.remove_service_node("c")
    for i in range(50):
        with bounded.route(f"k{i}") as node:
            assert node in ("a", "b")
    for node in held:
        bounded.release(node)
    assert bounded.loads == {} and bounded.in_flight == 0
    bounded._check()


def test_a_subclass_of_a_router_is_followed() -> None:
    class Named(ConsistentHashRouter):
        pass

    router = Named()
    router.add_service_node("a")
    bounded = BoundedLoadRouter(router, balance_factor=1.0)
    assert bounded.acquire("k") == "a"
    router.add_service_node("b")
    assert bounded.acquire("k") == "b"  # a is at its bound (T = 2, 1 each)
    assert bounded.router is router


class Listed:
    """A router of no chash type: lookups, preference lists, iterable nodes."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.nodes)

    def get_target_node(self, key: str | bytes) -> str | None:
        return self.nodes[len(key) % len(self.nodes)] if self.nodes else None

    def get_preference_list(self, key: str | bytes, n: int) -> list[str]:
        start = len(key) % len(self.nodes)
        return (self.nodes[start:] + self.nodes[:start])[:n]


def test_any_object_with_the_router_methods() -> None:
    router = Listed(["a", "b", "c"])
    bounded = BoundedLoadRouter(router, balance_factor=1.0)  # type: ignore[arg-type]
    assert [bounded.acquire("xy") for _ in range(3)] == ["c", "a", "b"]
    router.nodes.append("d")  # no change count: re-read when it matters
    assert bounded.acquire("xyz") == "d"
    bounded._check()


def test_failed_operations_leave_the_loads_as_they_were() -> None:
    router = make_ring(3)
    bounded = BoundedLoadRouter(router, balance_factor=1.0)
    node = bounded.acquire("k")
    before = bounded.loads
    with pytest.raises(TypeError, match="key must be str or bytes"):
        bounded.acquire(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="holds no acquired request"):
        bounded.release("node-nowhere")
    with pytest.raises(TypeError):
        bounded.release([node])  # type: ignore[arg-type]
    assert bounded.loads == before and bounded.in_flight == 1

    class Lying(Listed):
        def get_target_node(self, key: str | bytes) -> str | None:
            return "ghost"

    liar = BoundedLoadRouter(Lying(["a"]))  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="does not list"):
        liar.acquire("k")
    assert liar.loads == {} and liar.in_flight == 0
    liar._check()


def test_routers_it_cannot_use() -> None:
    with pytest.raises(TypeError, match="get_target_node and get_preference_list"):
        BoundedLoadRouter(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="balance_factor must be a number"):
        BoundedLoadRouter(make_ring(1), balance_factor=True)
    with pytest.raises(TypeError, match="at most 1 argument"):
        BoundedLoadRouter(make_ring(1)).bound("a", "b")  # type: ignore[call-arg]


def test_repr_and_attributes() -> None:
    router = make_ring(2)
    bounded = BoundedLoadRouter(router, 2)
    assert bounded.balance_factor == 2.0 and bounded.router is router
    assert repr(bounded) == "BoundedLoadRouter(balance_factor=2.0, in_flight=0, nodes=2)"


def test_methods_have_signatures_and_docs() -> None:
    import inspect

    assert str(inspect.signature(BoundedLoadRouter.acquire)) == "(self, key, /)"
    assert str(inspect.signature(BoundedLoadRouter.release)) == "(self, node, /)"
    assert str(inspect.signature(BoundedLoadRouter.bound)) == "(self, node=None, /)"
    for name in ("acquire", "release", "bound", "route", "loads", "in_flight"):
        doc = inspect.getdoc(getattr(BoundedLoadRouter, name))
        assert doc and len(doc) > 20, name


def test_acquire_release_cycles_do_not_leak() -> None:
    import gc
    import sys

    router = make_ring(20)
    bounded = BoundedLoadRouter(router, balance_factor=1.0)
    keys = [f"k{i}" for i in range(50)]

    def cycle() -> None:
        held = [bounded.acquire(key) for key in keys]  # beyond the bound: walks too
        router.add_service_node("extra", 2.0)
        for node in held:
            bounded.release(node)
        router.remove_service_node("extra")
        assert bounded.in_flight == 0

    for _ in range(20):
        cycle()
    gc.collect()
    before = sys.getallocatedblocks()
    for _ in range(200):
        cycle()
    gc.collect()
    assert sys.getallocatedblocks() - before < 200


@pytest.mark.parametrize("kind", ["maglev", "jump", "rendezvous-hrw", "envoy", "python"])
def test_threads_acquire_while_a_writer_changes_the_router(kind: str) -> None:
    router = filled(kind, [1.0] * 4)
    stable = set(router.nodes)
    churn = [f"10.0.1.{i}:80" for i in range(4)]
    every = stable | set(churn)
    bounded = BoundedLoadRouter(router, balance_factor=1.0)
    errors: list[BaseException] = []
    done = threading.Event()

    changes = [0]

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        # 3,000 rounds, and on until the writer has changed the router a few
        # times (a slow build, a sanitizer's, may start it late).
        deadline = time.monotonic() + 60
        try:
            rounds = 0
            while rounds < 3000 or (changes[0] <= 10 and time.monotonic() < deadline):
                rounds += 1
                held = [bounded.acquire(f"user-{rng.randrange(40)}") for _ in range(rng.randrange(1, 6))]
                assert set(held) <= every
                for node in held:
                    bounded.release(node)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def writer() -> None:
        rng = random.Random(7)
        try:
            while not done.is_set():
                changes[0] += 1
                if kind == "jump":  # only the last bucket can go
                    if len(router) > 4:
                        router.remove_service_node(router.nodes[-1])
                    else:
                        router.add_service_node(churn[rng.randrange(4)])
                elif rng.randrange(2):
                    router.add_service_node(rng.choice(churn), float(rng.choice([1, 2, 3])))
                else:
                    router.discard_service_node(rng.choice(churn))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(3)]
    change = threading.Thread(target=writer)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads switch between nearly every pair of calls
    try:
        change.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        done.set()
        change.join(timeout=60)
        sys.setswitchinterval(interval)
    assert not any(thread.is_alive() for thread in [*threads, change])
    assert changes[0] > 10  # the router did change under the readers
    assert not errors, errors[0]
    assert bounded.in_flight == 0 and bounded.loads == {}
    bounded._check()
