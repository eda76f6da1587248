"""Many threads on one router: readers route (one key, a batch of keys, a
batch of hashes, one key under bounded loads), iterate, measure, compare and pickle while one or two
writers add, remove and reweigh nodes, for every family and every layout
of the ring.

Every state the router passes through is known beforehand: the writers
walk a fixed sequence of changes, and a reference router made for each step
gives that step's answers. A writer publishes how many changes it has
started and how many it has finished; a reader reads the finished count
before its call and the started count after it, so the router's state
during the call was one of the steps between the two, and its answer must
be that step's answer: the owner before or after the change in flight,
never a third node, and a batch routed wholly against one step. Nothing
here depends on timing: how the threads interleave changes what is
checked, never whether a correct router passes.

On a GIL build the batches (at least chash's 1,000 keys) are routed with
the GIL let go, so writers change the router while batches run; on a
free-threaded build every call runs in parallel.
"""
from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import chash

BATCH = 1200  # above the 1,000 keys from which a batch lets the GIL go
KEYS = [f"key-{i}" for i in range(BATCH)]
SINGLE_KEYS = KEYS[:48]
READERS = 4
ROUNDS = 2

Router = Any
Step = tuple[str, str, float]  # ("add" | "remove" | "weight", node, weight)


@dataclass(frozen=True)
class Config:
    name: str
    make: Callable[[], Router]
    removes_last_only: bool = False  # jump drops only its last bucket
    hash_bits: int | None = None  # width of get_target_nodes_by_hash's hashes


def _ring(layout: str, **kwargs: Any) -> Callable[[], Router]:
    return lambda: chash.ConsistentHashRouter(layout=layout, **kwargs)


CONFIGS = [
    *(Config(f"ring-{layout}", _ring(layout, virtual_node_count=40)
             if layout in ("python", "node", "nginx", "varnish") else _ring(layout), hash_bits=32)
      for layout in chash.LAYOUTS),
    Config("ring-envoy", _ring("envoy", minimum_ring_size=512, maximum_ring_size=4096), hash_bits=64),
    Config("ring-grpc", _ring("grpc", minimum_ring_size=512, maximum_ring_size=4096), hash_bits=64),
    Config("maglev", lambda: chash.MaglevRouter(table_size=251), hash_bits=64),
    Config("jump", chash.JumpRouter, removes_last_only=True, hash_bits=64),
    Config("jump-guava", lambda: chash.JumpRouter(layout="guava"), removes_last_only=True,
           hash_bits=64),
    Config("jump-jumpback", lambda: chash.JumpRouter(layout="jumpback"), removes_last_only=True,
           hash_bits=64),
    Config("anchor", chash.AnchorRouter, hash_bits=64),
    Config("rendezvous-hrw", chash.RendezvousRouter),
    *(Config(f"rendezvous-{layout}", (lambda layout=layout: chash.RendezvousRouter(layout=layout)))
      for layout in ("pymemcache", "caddy", "squid")),
]

HASHES = [(i * 0x9E3779B97F4A7C15) & (2**64 - 1) for i in range(BATCH)]
#: get_bounded's loads: every node any step holds, half keyed by equal
#: copies of the names the writers add (the router's node index answers
#: both), and one node no step holds.
LOADS = {("".join(f"10.0.{i}.1:80") if i % 2 else f"10.0.{i}.1:80"): (i * 7) % 5
         for i in range(11)} | {"10.9.9.9:80": 50}


def _weight(router: Router, k: int) -> float:
    rule = router.weight_rule
    if rule == "none":
        return 1.0
    if rule == "real":
        return 1.0 + k % 3 * 0.5
    return float(1 + k % 3)


def _steps(config: Config) -> list[Step]:
    """A fixed walk: grow, reweigh, shrink, grow again."""
    probe = config.make()
    steps: list[Step] = []
    present: list[str] = []
    for i in range(8):
        node = f"10.0.{i}.1:80"
        steps.append(("add", node, _weight(probe, i)))
        present.append(node)
    if probe.weight_rule != "none":
        for i, node in enumerate(present[:4]):
            steps.append(("weight", node, _weight(probe, i + 1)))
    for _ in range(3):
        node = present.pop() if config.removes_last_only else present.pop(1)
        steps.append(("remove", node, 1.0))
    for i in range(8, 11):
        node = f"10.0.{i}.1:80"
        steps.append(("add", node, _weight(probe, i)))
        present.append(node)
    return steps


def _apply(router: Router, step: Step) -> None:
    kind, node, weight = step
    if kind == "remove":
        router.remove_service_node(node)
    elif router.weight_rule == "none":
        router.add_service_node(node)
    else:
        router.add_service_node(node, weight=weight)


@dataclass
class Expected:
    """Every step's answers: step i is the router after i changes."""

    singles: list[list[str | None]] = field(default_factory=list)
    batches: list[tuple[str | None, ...]] = field(default_factory=list)
    by_hash: list[tuple[str | None, ...]] = field(default_factory=list)
    bounded: list[list[str | None]] = field(default_factory=list)
    fingerprints: list[Any] = field(default_factory=list)
    nodes: list[tuple[str, ...]] = field(default_factory=list)
    routers: list[Router] = field(default_factory=list)


def _expected(config: Config, steps: list[Step]) -> Expected:
    out = Expected()
    router = config.make()
    for i in range(len(steps) + 1):
        if i:
            _apply(router, steps[i - 1])
        reference = pickle.loads(pickle.dumps(router))
        out.routers.append(reference)
        out.singles.append([router.get_target_node(k) for k in SINGLE_KEYS])
        out.batches.append(tuple(router.get_target_nodes(KEYS)))
        if config.hash_bits:
            mask = 2**config.hash_bits - 1
            out.by_hash.append(tuple(router.get_target_nodes_by_hash([h & mask for h in HASHES])))
        out.bounded.append([router.get_bounded(k, LOADS, 1.1) for k in SINGLE_KEYS])
        out.fingerprints.append(router.fingerprint())
        out.nodes.append(tuple(router))
    return out


class Progress:
    """How far the writers are: started counts changes begun, finished
    those done (finished <= started, each only grows)."""

    def __init__(self) -> None:
        self.started = 0
        self.finished = 0
        self.done = False


class Failures:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[str] = []

    def add(self, text: str) -> None:
        with self.lock:
            self.items.append(text)


def _steps_between(progress: Progress, call: Callable[[], Any]) -> tuple[Any, range]:
    low = progress.finished
    result = call()
    high = progress.started
    return result, range(low, high + 1)


def _reader(router: Router, config: Config, expected: Expected, progress: Progress,
            failures: Failures, index: int, counts: list[int]) -> None:
    mask = 2**config.hash_bits - 1 if config.hash_bits else 0
    hashes = [h & mask for h in HASHES]
    turn = 0
    while not progress.done or turn < 4:
        what = (turn + index) % 7
        turn += 1
        if what == 0:
            key_at = turn % len(SINGLE_KEYS)
            answer, steps = _steps_between(progress,
                                           lambda k=key_at: router.get_target_node(SINGLE_KEYS[k]))
            if all(expected.singles[s][key_at] != answer for s in steps):
                failures.add(f"{config.name}: single {SINGLE_KEYS[key_at]!r} -> {answer!r} "
                             f"at steps {list(steps)}")
        elif what == 1:
            batch, steps = _steps_between(progress, lambda: router.get_target_nodes(KEYS))
            if all(expected.batches[s] != tuple(batch) for s in steps):
                failures.add(f"{config.name}: a batch matching no one step of {list(steps)}")
        elif what == 2 and config.hash_bits:
            batch, steps = _steps_between(progress,
                                          lambda: router.get_target_nodes_by_hash(hashes))
            if all(expected.by_hash[s] != tuple(batch) for s in steps):
                failures.add(f"{config.name}: a batch by hash matching no one step of {list(steps)}")
        elif what == 3:
            fingerprint, steps = _steps_between(progress, router.fingerprint)
            if all(expected.fingerprints[s] != fingerprint for s in steps):
                failures.add(f"{config.name}: fingerprint of no step of {list(steps)}")
            nodes, steps = _steps_between(progress, lambda: tuple(router))
            if all(expected.nodes[s] != nodes for s in steps):
                failures.add(f"{config.name}: iteration {nodes} of no step of {list(steps)}")
            size, steps = _steps_between(progress, lambda: len(router))
            if all(len(expected.nodes[s]) != size for s in steps):
                failures.add(f"{config.name}: len {size} of no step of {list(steps)}")
        elif what == 4:
            copy, steps = _steps_between(progress, lambda: pickle.loads(pickle.dumps(router)))
            copy._check()
            if not any(copy == expected.routers[s] for s in steps):
                failures.add(f"{config.name}: a pickle equal to no step of {list(steps)}")
            every = range(len(expected.routers))
            equal, steps = _steps_between(progress,
                                          lambda e=every: [router == expected.routers[s] for s in e])
            if any(equal[s] and all(expected.routers[s] != expected.routers[t] for t in steps)
                   for s in every if s not in steps):
                failures.add(f"{config.name}: == a step outside {list(steps)}")
        elif what == 5:
            key_at = turn % len(SINGLE_KEYS)
            answer, steps = _steps_between(
                progress, lambda k=key_at: router.get_bounded(SINGLE_KEYS[k], LOADS, 1.1))
            if all(expected.bounded[s][key_at] != answer for s in steps):
                failures.add(f"{config.name}: bounded {SINGLE_KEYS[key_at]!r} -> {answer!r} "
                             f"at steps {list(steps)}")
        else:
            router._check()
        counts[index] += 1


def _writer(router: Router, steps: list[Step], progress: Progress, turn: int, writers: int,
            baton: threading.Condition, failures: Failures, name: str) -> None:
    """Applies steps[i] for every i with i % writers == turn, in order,
    each after the one before it (by whichever writer) finished."""
    try:
        for i in range(turn, len(steps), writers):
            with baton:
                baton.wait_for(lambda i=i: progress.finished == i, timeout=120)
                if progress.finished != i:
                    failures.add(f"{name}: writer {turn} never got step {i}")
                    return
            progress.started = i + 1
            _apply(router, steps[i])
            progress.finished = i + 1
            with baton:
                baton.notify_all()
    except BaseException as exc:  # a failure must not hang the other threads
        failures.add(f"{name}: writer {turn} raised {exc!r}")
        with baton:
            progress.finished = len(steps) + 1
            baton.notify_all()


def _hammer(config: Config, writers: int) -> None:
    steps = _steps(config)
    expected = _expected(config, steps)
    failures = Failures()
    counts = [0] * READERS
    for _ in range(ROUNDS):
        router = config.make()
        progress = Progress()
        baton = threading.Condition()
        readers = [threading.Thread(target=_reader, args=(router, config, expected, progress,
                                                          failures, k, counts))
                   for k in range(READERS)]
        writing = [threading.Thread(target=_writer, args=(router, steps, progress, w, writers,
                                                          baton, failures, config.name))
                   for w in range(writers)]
        for thread in readers + writing:
            thread.start()
        for thread in writing:
            thread.join(timeout=300)
        progress.done = True
        for thread in readers:
            thread.join(timeout=300)
        assert not any(thread.is_alive() for thread in readers + writing), "a thread hung"
        router._check()
        assert router == expected.routers[-1]
        assert router.fingerprint() == expected.fingerprints[-1]
    assert failures.items == []
    assert min(counts) >= 4 * ROUNDS  # every reader checked answers


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_one_writer(config: Config) -> None:
    _hammer(config, writers=1)


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_two_writers_taking_turns(config: Config) -> None:
    _hammer(config, writers=2)


@pytest.mark.parametrize("config", [c for c in CONFIGS if not c.removes_last_only
                                    and c.name in ("ring-python", "ring-node", "maglev",
                                                   "rendezvous-hrw")],
                         ids=lambda c: c.name)
def test_two_writers_racing(config: Config) -> None:
    """Two writers add disjoint nodes with no order between them (these
    routers' states do not depend on the order nodes came in, as the
    layouts that break ties by insertion order do): every change lands,
    and the router ends equal to a reference holding all."""
    router = config.make()
    reference = config.make()
    names = [[f"w{w}-{i}" for i in range(40)] for w in range(2)]
    for group in names:
        reference.add_service_nodes(group)
    start = threading.Barrier(3)
    failures = Failures()

    def add(group: list[str]) -> None:
        start.wait()
        try:
            for node in group:
                router.add_service_node(node)
        except BaseException as exc:
            failures.add(repr(exc))

    def read() -> None:
        start.wait()
        every = set(names[0]) | set(names[1])
        for _ in range(60):
            for node in router.get_target_nodes(KEYS):
                if node is not None and node not in every:
                    failures.add(f"unknown node {node!r}")
                    return

    threads = [threading.Thread(target=add, args=(group,)) for group in names]
    threads.append(threading.Thread(target=read))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures.items == []
    router._check()
    assert len(router) == 80
    assert router == reference
    assert router.get_target_nodes(KEYS) == reference.get_target_nodes(KEYS)


def test_a_change_from_inside_its_own_change_is_refused() -> None:
    """A hash callable that changes its own router while that router is
    being changed gets a RuntimeError (the router's lock is its thread's),
    and the outer change fails whole."""
    router: Router = None

    def hash_fn(data: bytes) -> int:
        if data.startswith(b"outer"):
            router.add_service_node("inner")
        return int.from_bytes(data[:4].ljust(4, b"\0"), "big")

    router = chash.ConsistentHashRouter(hash=hash_fn, virtual_node_count=2)
    with pytest.raises(RuntimeError, match="inside one of its own changes"):
        router.add_service_node("outer")
    assert list(router) == []
    router._check()
