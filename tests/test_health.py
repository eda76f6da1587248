"""Tests of chash.health: the state machine, LocalMembership, and both
runners against real HTTP backends on 127.0.0.1.

Rounds are driven with check_now() so that every test is deterministic;
the background runners are exercised in the lifecycle tests, which only
poll for conditions with generous deadlines.
"""

from __future__ import annotations

import asyncio
import http.server
import logging
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from _support.http_backends import Backend, ring_of
from _support.ports import refused_node
from _support.waiting import wait_until
from chash import ConsistentHashRouter
from chash._health_state import HealthState
from chash.health import HealthChecker, LocalMembership, NodeState, NodeStatus

try:
    import aiohttp  # noqa: F401  (only whether it imports matters)
except ImportError:  # pragma: no cover - the async runner's extra
    HAVE_AIOHTTP = False
else:
    HAVE_AIOHTTP = True
    from chash.health import AsyncHealthChecker

KEYS = [f"user:{i}" for i in range(3000)]
UP, DOWN = NodeState.UP, NodeState.DOWN


# -- fixtures and drivers ---------------------------------------------------


class SyncDriver:
    """Runs rounds of a HealthChecker in the test's thread."""

    name = "thread"

    def __init__(self, router: Any, **kwargs: Any) -> None:
        self.checker = HealthChecker(router, **kwargs)

    def round(self, count: int = 1) -> None:
        for _ in range(count):
            self.checker.check_now()

    def close(self) -> None:
        self.checker.stop()


class AsyncDriver:
    """Runs rounds of an AsyncHealthChecker on a private event loop."""

    name = "asyncio"

    def __init__(self, router: Any, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.checker = AsyncHealthChecker(router, **kwargs)

    def round(self, count: int = 1) -> None:
        for _ in range(count):
            self.loop.run_until_complete(self.checker.check_now())

    def close(self) -> None:
        self.loop.run_until_complete(self.checker.aclose())
        self.loop.close()


Driver = Any


@pytest.fixture(params=[
    SyncDriver,
    pytest.param(AsyncDriver, marks=pytest.mark.skipif(
        not HAVE_AIOHTTP, reason="the async runner needs aiohttp (chash-router[async])")),
], ids=["thread", "asyncio"])
def make_driver(request: pytest.FixtureRequest) -> Iterator[Callable[..., Driver]]:
    """Build a checker of either runner; closed at teardown."""
    made: list[Driver] = []

    def make(router: Any, **kwargs: Any) -> Driver:
        driver = request.param(router, **kwargs)
        made.append(driver)
        return driver

    yield make
    for driver in made:
        driver.close()


def owners(router: Any) -> dict[str, str | None]:
    return {key: router.get_target_node(key) for key in KEYS}


class Recorder:
    """An on_change callback that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, NodeState, NodeState, str]] = []

    def __call__(self, node: str, old: NodeState, new: NodeState, reason: str) -> None:
        self.calls.append((node, old, new, reason))

    def changes(self) -> list[tuple[str, NodeState, NodeState]]:
        return [(node, old, new) for node, old, new, _ in self.calls]


# -- the pure state machine -------------------------------------------------


def test_state_fall_and_rise_are_hysteresis() -> None:
    state = HealthState(fall=3, rise=2, panic_threshold=0.0)
    state.sync({"a": 1.0, "b": 2.0}, now=1.0)
    assert state.record_failure("a", "boom", 2.0) is None
    assert state.record_failure("a", "boom", 3.0) is None
    assert state.record_success("a", 4.0) is None  # the run is broken
    assert state.record_failure("a", "boom", 5.0) is None
    assert state.record_failure("a", "boom", 6.0) is None
    down = state.record_failure("a", "HTTP 500", 7.0)
    assert down is not None and (down.node, down.old, down.new) == ("a", UP, DOWN)
    assert down.reason == "3 consecutive failures, last: HTTP 500"
    assert state.in_service() == {"a": False, "b": True}
    assert state.record_failure("a", "again", 8.0) is None  # already down
    assert state.record_success("a", 9.0) is None
    up = state.record_success("a", 10.0, latency=0.25)
    assert up is not None and (up.old, up.new, up.reason) == (DOWN, UP, "2 consecutive successes")
    status = state.status()["a"]
    assert status == NodeStatus(node="a", state=UP, in_service=True, weight=1.0,
                                consecutive_successes=2, consecutive_failures=0,
                                last_error="again", last_latency=0.25, last_check=10.0,
                                last_change=10.0)
    state._check()


def test_state_ignores_unwatched_nodes_and_forgets_removed_ones() -> None:
    state = HealthState(fall=1, rise=1, panic_threshold=0.0)
    assert state.record_failure("ghost", "x", 1.0) is None
    assert state.record_success("ghost", 1.0) is None
    assert state.sync({"a": 1.0}, 1.0) == (["a"], [])
    state.record_failure("a", "x", 2.0)
    assert state.status()["a"].state is DOWN
    assert state.sync({}, 3.0) == ([], ["a"])
    assert state.sync({"a": 2.0}, 4.0) == (["a"], [])
    fresh = state.status()["a"]
    assert (fresh.state, fresh.weight, fresh.consecutive_failures, fresh.last_change) == \
        (UP, 2.0, 0, 4.0)


@pytest.mark.parametrize("threshold, healthy, total, panic", [
    (0.5, 2, 4, False), (0.5, 1, 4, True), (0.5, 0, 1, True), (0.5, 1, 2, False),
    (0.0, 0, 3, False), (1.0, 2, 3, True), (1.0, 3, 3, False), (0.33, 1, 3, False), (0.34, 1, 3, True),
])
def test_state_panic_threshold(threshold: float, healthy: int, total: int, panic: bool) -> None:
    state = HealthState(fall=1, rise=1, panic_threshold=threshold)
    nodes = [f"n{i}" for i in range(total)]
    state.sync(dict.fromkeys(nodes, 1.0), 0.0)
    for node in nodes[healthy:]:
        state.record_failure(node, "x", 1.0)
    assert state.panicking is panic
    assert state.in_service() == {node: panic or i < healthy for i, node in enumerate(nodes)}
    assert all(s.in_service is (panic or s.state is UP) for s in state.status().values())


def test_state_empty_never_panics() -> None:
    assert not HealthState(fall=1, rise=1, panic_threshold=1.0).panicking


@pytest.mark.parametrize("kwargs", [
    {"fall": 0}, {"rise": 0}, {"fall": 1.5}, {"rise": True},
    {"panic_threshold": -0.1}, {"panic_threshold": 1.5}, {"panic_threshold": float("nan")},
])
def test_state_rejects_bad_parameters(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"fall": 3, "rise": 2, "panic_threshold": 0.5, **kwargs}
    with pytest.raises(ValueError):
        HealthState(**args)


class HealthStateModel(RuleBasedStateMachine):
    """Random syncs and verdicts, checked against a replay of each node's
    history: DOWN after `fall` failures in a row, UP after `rise` successes
    in a row."""

    def __init__(self) -> None:
        super().__init__()
        self.state: HealthState | None = None
        self.history: dict[str, list[bool]] = {}
        self.weights: dict[str, float] = {}
        self.now = 0.0

    @precondition(lambda self: self.state is None)
    @rule(fall=st.integers(1, 4), rise=st.integers(1, 4),
          threshold=st.sampled_from([0.0, 0.3, 0.5, 1.0]))
    def create(self, fall: int, rise: int, threshold: float) -> None:
        self.state = HealthState(fall=fall, rise=rise, panic_threshold=threshold)

    @precondition(lambda self: self.state is not None)
    @rule(watched=st.dictionaries(st.sampled_from("abcdef"), st.sampled_from([0.5, 1.0, 2.0]),
                                  max_size=6))
    def sync(self, watched: dict[str, float]) -> None:
        assert self.state is not None
        self.now += 1
        added, removed = self.state.sync(watched, self.now)
        assert set(added) == set(watched) - set(self.history)
        assert set(removed) == set(self.history) - set(watched)
        self.history = {node: self.history.get(node, []) for node in watched}
        self.weights = dict(watched)

    @precondition(lambda self: self.state is not None)
    @rule(node=st.sampled_from("abcdefg"), ok=st.booleans())
    def verdict(self, node: str, ok: bool) -> None:
        assert self.state is not None
        self.now += 1
        before = self.expected_state(node)
        if ok:
            transition = self.state.record_success(node, self.now)
        else:
            transition = self.state.record_failure(node, "err", self.now)
        if node not in self.history:
            assert transition is None
            return
        self.history[node].append(ok)
        after = self.expected_state(node)
        if before == after:
            assert transition is None
        else:
            assert transition is not None and (transition.old, transition.new) == (before, after)

    def expected_state(self, node: str) -> NodeState:
        assert self.state is not None
        state, run, last = UP, 0, None
        for ok in self.history.get(node, []):
            run = run + 1 if ok == last else 1
            last = ok
            if state is UP and not ok and run >= self.state.fall:
                state = DOWN
            elif state is DOWN and ok and run >= self.state.rise:
                state = UP
        return state

    @invariant()
    def agrees_with_the_model(self) -> None:
        if self.state is None:
            return
        self.state._check()
        status = self.state.status()
        assert set(status) == set(self.history)
        expected = {node: self.expected_state(node) for node in self.history}
        healthy = sum(1 for s in expected.values() if s is UP)
        panic = bool(expected) and healthy < self.state.panic_threshold * len(expected)
        assert self.state.panicking is panic
        for node, s in status.items():
            assert s.state is expected[node]
            assert s.weight == self.weights[node]
            assert s.in_service is (panic or s.state is UP)


HealthStateModel.TestCase.settings = settings(deadline=None, max_examples=150,
                                              stateful_step_count=40)
TestHealthStateModel = HealthStateModel.TestCase


# -- LocalMembership --------------------------------------------------------


def test_local_membership_takes_out_and_restores_the_weight() -> None:
    router = ConsistentHashRouter(100)
    router.add_service_node("a", 1.0)
    router.add_service_node("b", 2.5)
    membership = LocalMembership(router)
    before = owners(router)
    membership.mark_down("b", "HTTP 500")
    membership.mark_down("b", "HTTP 500")  # idempotent
    assert router.nodes == ["a"]
    assert membership.taken_out() == {"b": 2.5}
    assert membership.watched_nodes() == {"a": 1.0, "b": 2.5}
    membership.mark_up("b")
    membership.mark_up("b")
    assert router.weights == {"a": 1.0, "b": 2.5}
    assert membership.taken_out() == {}
    assert owners(router) == before


def test_local_membership_ignores_what_it_does_not_own() -> None:
    router = ConsistentHashRouter(100)
    router.add_service_node("a", 1.0)
    membership = LocalMembership(router)
    membership.mark_down("ghost", "x")
    membership.mark_up("ghost")
    membership.mark_up("a")  # in service already: weight untouched
    assert router.weights == {"a": 1.0}
    assert membership.watched_nodes() == {"a": 1.0}


def test_local_membership_forget_works_in_every_state() -> None:
    router = ConsistentHashRouter(100)
    for node in "abc":
        router.add_service_node(node, 1.0)
    membership = LocalMembership(router)
    membership.mark_down("b", "x")
    with pytest.raises(KeyError):  # taken out: the router no longer has it
        router.remove_service_node("b")
    assert membership.forget("b") is True
    assert membership.forget("c") is True
    assert membership.forget("zzz") is False
    membership.mark_up("b")
    assert router.nodes == ["a"]
    assert membership.watched_nodes() == {"a": 1.0}


def test_local_membership_operator_weight_wins_over_the_remembered_one() -> None:
    router = ConsistentHashRouter(100)
    router.add_service_node("a", 1.0)
    membership = LocalMembership(router)
    membership.mark_down("a", "x")
    router.add_service_node("a", 3.0)  # the operator puts it back
    assert membership.watched_nodes() == {"a": 3.0}
    membership.mark_down("a", "x")  # still failing: out again, with 3.0
    assert membership.taken_out() == {"a": 3.0}
    membership.mark_up("a")
    assert router.weights == {"a": 3.0}


# -- probing: one round against each kind of backend ------------------------


def test_probe_outcomes(backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    ok, error, slow = backends(200), backends(500), backends(200).slow(0.2)
    nodes = [ok.node, error.node, slow.node, refused_node()]
    router = ring_of([])
    for node in nodes:
        router.add_service_node(node, 1.0)
    driver = make_driver(router, timeout=5.0, fall=1, rise=1, panic_threshold=0.0)
    driver.round()
    status = driver.checker.status()
    assert [status[n].state for n in nodes] == [UP, DOWN, UP, DOWN]
    assert [status[n].last_error for n in nodes] == [None, "HTTP 500", None, "connection refused"]
    assert status[slow.node].last_latency is not None and status[slow.node].last_latency >= 0.2
    assert all(status[n].last_check is not None for n in nodes)
    assert sorted(router.nodes) == sorted([ok.node, slow.node])


def test_hanging_backend_times_out_without_holding_up_the_others(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    hung = [backends().hang(), backends().hang()]
    fine = backends()
    router = ring_of([*hung, fine])
    # Two probes at a time: the healthy node is probed once the hung ones
    # have timed out, and still gets its full timeout.
    driver = make_driver(router, timeout=1.0, fall=1, rise=1, panic_threshold=0.0,
                         max_concurrency=2)
    driver.round()
    status = driver.checker.status()
    assert [status[b.node].last_error for b in hung] == ["timed out after 1s"] * 2
    assert status[fine.node].state is UP
    assert router.nodes == [fine.node]


def test_probes_run_concurrently(backends: Callable[..., Backend],
                                 make_driver: Callable[..., Driver]) -> None:
    # Each backend answers 200 only once all five requests are in flight
    # together, so sequential probing would fail them all.
    barrier = threading.Barrier(5, timeout=8.0)
    group = [backends().meet(barrier) for _ in range(5)]
    driver = make_driver(ring_of(group), timeout=10.0, fall=1, rise=1)
    driver.round()
    assert all(s.consecutive_successes == 1 for s in driver.checker.status().values())


def test_healthy_statuses_and_url_callable(backends: Callable[..., Backend],
                                           make_driver: Callable[..., Driver]) -> None:
    teapot, plain = backends(418), backends(200)
    urls: dict[str, str] = {teapot.node: teapot.url + "?deep=1", plain.node: plain.url}
    router = ring_of([teapot, plain])
    driver = make_driver(router, url=urls.__getitem__, healthy_statuses={418},
                         fall=1, rise=1, panic_threshold=0.0)
    driver.round()
    status = driver.checker.status()
    assert status[teapot.node].state is UP
    assert status[plain.node].last_error == "HTTP 200"
    assert driver.checker.url_for(teapot.node).endswith("/health?deep=1")


def test_a_url_that_cannot_be_built_is_a_failure(backends: Callable[..., Backend],
                                                 make_driver: Callable[..., Driver]) -> None:
    good = backends()
    router = ring_of([good])
    router.add_service_node("bad", 1.0)

    def url(node: str) -> str:
        if node == "bad":
            raise LookupError("no address for bad")
        return good.url

    driver = make_driver(router, url=url, fall=1, rise=1, panic_threshold=0.0)
    driver.round()
    assert driver.checker.status()["bad"].last_error == "no URL: LookupError: no address for bad"
    assert router.nodes == [good.node]


def test_flapping_backend_stays_in(backends: Callable[..., Backend],
                                   make_driver: Callable[..., Driver]) -> None:
    flapping, steady = backends().answer_cycle([500, 200]), backends()
    router = ring_of([flapping, steady])
    changes = Recorder()
    driver = make_driver(router, fall=2, rise=2, on_change=changes)
    driver.round(6)
    assert changes.calls == []
    assert router.nodes == [flapping.node, steady.node]
    assert driver.checker.status()[flapping.node].consecutive_failures <= 1


# -- the issue's scenario, for both runners -----------------------------------


def test_stopped_backend_leaves_and_returns_with_its_keys(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    group = [backends() for _ in range(4)]
    weights = [1.0, 2.0, 0.5, 1.5]
    router = ring_of(group, weights)
    victim = group[1].node
    before = owners(router)
    successors = {key: router.get_preference_list(key, 2) for key in KEYS}
    changes = Recorder()
    driver = make_driver(router, interval=0.05, timeout=2.0, fall=3, rise=2, on_change=changes)
    driver.round(2)
    assert owners(router) == before

    group[1].stop()
    driver.round(2)  # fall - 1 failures: still in
    assert victim in router and owners(router) == before
    assert driver.checker.status()[victim].consecutive_failures == 2
    driver.round()
    assert victim not in router
    after = owners(router)
    moved = {key for key in KEYS if before[key] == victim}
    assert moved, "the victim should own some keys"
    for key in KEYS:
        if key in moved:
            assert after[key] == successors[key][1], key  # the next node clockwise
        else:
            assert after[key] == before[key], key  # other nodes' keys never move
    status = driver.checker.status()[victim]
    assert (status.state, status.in_service, status.last_error) == (DOWN, False, "connection refused")

    group[1].start()
    driver.round()  # rise - 1 successes: still out
    assert victim not in router
    driver.round()
    assert router.weights == {b.node: w for b, w in zip(group, weights, strict=True)}
    assert owners(router) == before  # exactly its old keys came back
    assert changes.changes() == [(victim, UP, DOWN), (victim, DOWN, UP)]
    assert changes.calls[0][3] == "3 consecutive failures, last: connection refused"
    assert changes.calls[1][3] == "2 consecutive successes"


def test_both_runners_agree(backends: Callable[..., Backend]) -> None:
    pytest.importorskip("aiohttp", reason="the async runner needs aiohttp (chash-router[async])")
    group = [backends() for _ in range(3)]
    group.append(backends(500))
    group[0].answer_cycle([200, 500, 500, 200, 200, 200])
    results = []
    for driver_type in (SyncDriver, AsyncDriver):
        router = ring_of(group)
        changes = Recorder()
        driver = driver_type(router, fall=2, rise=2, on_change=changes)
        trace = []
        try:
            for _ in range(6):
                driver.round()
                trace.append((sorted(router.nodes),
                              {n: (s.state, s.consecutive_successes, s.consecutive_failures,
                                   s.last_error) for n, s in driver.checker.status().items()}))
        finally:
            driver.close()
        results.append((trace, changes.changes()))
        group[0].answer_cycle([200, 500, 500, 200, 200, 200])  # rewind the flap
    assert results[0] == results[1]
    assert results[0][1] == [(group[3].node, UP, DOWN), (group[0].node, UP, DOWN),
                             (group[0].node, DOWN, UP)]


# -- passive reports --------------------------------------------------------


def test_passive_reports_feed_the_same_counters(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    group = [backends() for _ in range(3)]
    router = ring_of(group, [1.0, 2.0, 1.0])
    node = group[1].node
    changes = Recorder()
    driver = make_driver(router, fall=3, rise=2, on_change=changes)
    checker = driver.checker
    driver.round()  # learns the nodes
    checker.report_failure(node, reason="HTTP 502 from upstream")
    checker.report_failure(node)
    checker.report_success(node)  # breaks the run
    checker.report_failure(node)
    checker.report_failure(node)
    assert node in router
    checker.report_failure(node, reason="read timeout")
    assert node not in router
    assert changes.calls[-1] == (node, UP, DOWN, "3 consecutive failures, last: read timeout")
    checker.report_success(node)
    checker.report_success(node)
    assert router.weights[node] == 2.0
    checker.report_failure("not-a-node")  # unwatched: ignored
    checker.report_success("not-a-node")
    assert "not-a-node" not in checker.status()


def test_probe_success_resets_passive_failures(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    group = [backends() for _ in range(2)]
    router = ring_of(group)
    driver = make_driver(router, fall=2, rise=1)
    driver.round()
    driver.checker.report_failure(group[0].node)
    driver.round()
    driver.checker.report_failure(group[0].node)
    assert group[0].node in router


# -- panic ------------------------------------------------------------------


def test_panic_keeps_every_node_in_service(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="chash.health")
    group = [backends() for _ in range(4)]
    router = ring_of(group, [1.0, 2.0, 1.0, 0.5])
    before = owners(router)
    changes = Recorder()
    driver = make_driver(router, fall=1, rise=1, on_change=changes)  # threshold 0.5
    checker = driver.checker
    group[0].answer(503)
    group[1].answer(503)
    driver.round()  # 2 of 4 healthy: not below half
    assert sorted(router.nodes) == sorted([group[2].node, group[3].node])
    assert not checker.panicking

    group[2].answer(503)
    driver.round()  # 1 of 4: panic, every node serves
    assert checker.panicking
    assert owners(router) == before
    status = checker.status()
    assert [status[b.node].state for b in group] == [DOWN, DOWN, DOWN, UP]
    assert all(s.in_service for s in status.values())
    assert any(r.levelno == logging.ERROR and r.getMessage().startswith("panic:")
               for r in caplog.records)

    group[3].answer(503)
    driver.round()  # every node failing: still all in service
    assert owners(router) == before
    assert router.weights == {b.node: w for b, w in zip(group, [1.0, 2.0, 1.0, 0.5], strict=True)}

    group[0].answer(200)
    group[3].answer(200)
    driver.round()  # 2 of 4 again: failing nodes leave
    assert not checker.panicking
    assert sorted(router.nodes) == sorted([group[0].node, group[3].node])
    assert any(r.getMessage().startswith("panic over") for r in caplog.records)
    assert sorted(changes.changes()[-2:]) == sorted([(group[0].node, DOWN, UP),
                                                     (group[3].node, DOWN, UP)])


def test_a_lone_node_is_never_taken_out_by_default(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    lone = backends(500)
    router = ring_of([lone])
    driver = make_driver(router, fall=1, rise=1)
    driver.round(3)
    assert driver.checker.status()[lone.node].state is DOWN
    assert router.get_target_node("user:1") == lone.node


def test_panic_threshold_zero_lets_the_ring_empty(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    group = [backends(500) for _ in range(2)]
    router = ring_of(group)
    driver = make_driver(router, fall=1, rise=1, panic_threshold=0.0)
    driver.round()
    assert len(router) == 0
    assert router.get_target_node("user:1") is None
    group[1].answer(200)
    driver.round()
    assert router.nodes == [group[1].node]


# -- the operator changes nodes while checks run ------------------------------


def test_operator_additions_are_picked_up(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    first, late, dead = backends(), backends(), refused_node()
    router = ring_of([first])
    driver = make_driver(router, fall=2, rise=1, panic_threshold=0.0)
    driver.round()
    router.add_service_node(late.node, 2.0)
    router.add_service_node(dead, 1.0)
    driver.round()
    status = driver.checker.status()
    assert status[late.node].consecutive_successes == 1 and status[late.node].weight == 2.0
    assert status[dead].consecutive_failures == 1
    driver.round()
    assert sorted(router.nodes) == sorted([first.node, late.node])


def test_a_node_removed_while_up_is_never_readded(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    driver = make_driver(router, fall=1, rise=1)
    driver.round()
    router.remove_service_node(group[0].node)
    driver.round(2)
    driver.checker.report_success(group[0].node)
    assert group[0].node not in router
    assert group[0].node not in driver.checker.status()


def test_a_node_removed_while_down_is_never_readded(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    membership = LocalMembership(router)
    driver = make_driver(router, membership=membership, fall=1, rise=1)
    group[0].stop()
    driver.round()
    assert group[0].node not in router
    assert membership.forget(group[0].node)
    group[0].start()
    driver.round(3)
    assert group[0].node not in router
    assert group[0].node not in driver.checker.status()


def test_removal_racing_a_failing_probe(backends: Callable[..., Backend],
                                        make_driver: Callable[..., Driver]) -> None:
    # The operator removes the node while its (failing) probe is in flight.
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    victim = group[0].node
    dead = refused_node()

    def url(node: str) -> str:
        if node == victim and victim in router:
            router.remove_service_node(victim)
            return f"http://{dead}/health"
        return f"http://{node}/health"

    driver = make_driver(router, url=url, fall=1, rise=1)
    driver.round(3)
    assert victim not in router and victim not in driver.checker.status()


def test_forget_racing_a_succeeding_probe(backends: Callable[..., Backend],
                                          make_driver: Callable[..., Driver]) -> None:
    # The operator forgets a down node while its (succeeding) probe is in flight.
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    membership = LocalMembership(router)
    victim = group[0].node
    group[0].answer(500)
    forgot = []

    def url(node: str) -> str:
        if node == victim and membership.taken_out():
            forgot.append(membership.forget(victim))
        return f"http://{node}/health"

    driver = make_driver(router, url=url, membership=membership, fall=1, rise=1)
    driver.round()
    assert victim not in router
    group[0].answer(200)
    driver.round(3)
    assert forgot == [True]
    assert victim not in router and victim not in driver.checker.status()


def test_readding_a_down_node_does_not_bypass_the_checks(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver]) -> None:
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    victim = group[0].node
    group[0].answer(500)
    driver = make_driver(router, fall=1, rise=1)
    driver.round()
    router.add_service_node(victim, 3.0)
    driver.round()  # still failing: out again, remembering the new weight
    assert victim not in router
    group[0].answer(200)
    driver.round()
    assert router.weights[victim] == 3.0


# -- notification -----------------------------------------------------------


def test_transitions_are_logged(backends: Callable[..., Backend],
                                make_driver: Callable[..., Driver],
                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="chash.health")
    group = [backends() for _ in range(3)]
    driver = make_driver(ring_of(group), fall=1, rise=1)
    group[2].answer(500)
    driver.round()
    group[2].answer(200)
    driver.round()
    records = [r for r in caplog.records if getattr(r, "new_state", None)]
    assert [(r.levelno, r.node, r.old_state, r.new_state)
            for r in records] == [(logging.WARNING, group[2].node, "up", "down"),
                                  (logging.INFO, group[2].node, "down", "up")]
    assert records[0].getMessage() == \
        f"node {group[2].node} is down: 1 consecutive failure, last: HTTP 500"


def test_callback_errors_are_logged_and_checks_go_on(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver],
        caplog: pytest.LogCaptureFixture) -> None:
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    seen = []

    def on_change(node: str, old: NodeState, new: NodeState, reason: str) -> None:
        seen.append((node, new))
        raise RuntimeError("callback bug")

    driver = make_driver(router, fall=1, rise=1, on_change=on_change)
    group[0].answer(500)
    group[1].answer(500)
    driver.round()
    group[0].answer(200)
    driver.round()
    assert sorted(seen) == sorted([(group[0].node, DOWN), (group[1].node, DOWN),
                                   (group[0].node, UP)])
    assert sorted(router.nodes) == sorted([group[0].node, group[2].node])
    failures = [r for r in caplog.records if r.getMessage().startswith("on_change callback failed")]
    assert len(failures) == 3 and all(r.exc_info for r in failures)


# -- other memberships ------------------------------------------------------


class FlakyMembership:
    """A Membership kept in a dict, as a shared store would be, whose first
    mark_down fails."""

    def __init__(self, nodes: dict[str, float]) -> None:
        self.nodes = dict(nodes)
        self.down: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.fail_next_mark_down = True

    def watched_nodes(self) -> dict[str, float]:
        return dict(self.nodes)

    def mark_down(self, node: str, reason: str) -> None:
        self.calls.append(("down", node))
        if self.fail_next_mark_down:
            self.fail_next_mark_down = False
            raise ConnectionError("store unavailable")
        self.down.add(node)

    def mark_up(self, node: str) -> None:
        self.calls.append(("up", node))
        self.down.discard(node)


def test_a_custom_membership_is_retried_after_errors(
        backends: Callable[..., Backend], make_driver: Callable[..., Driver],
        caplog: pytest.LogCaptureFixture) -> None:
    group = [backends() for _ in range(3)]
    membership = FlakyMembership({b.node: 1.0 for b in group})
    driver = make_driver(None, membership=membership, fall=1, rise=1)
    group[0].answer(500)
    driver.round()
    assert membership.down == set()
    assert any(r.getMessage().startswith(f"could not mark node {group[0].node} down")
               for r in caplog.records)
    driver.round()
    assert membership.down == {group[0].node}
    group[0].answer(200)
    driver.round()
    assert membership.down == set()


# -- configuration errors ---------------------------------------------------


@pytest.mark.parametrize("kwargs, error", [
    ({"interval": 0}, ValueError), ({"timeout": -1}, ValueError),
    ({"timeout": float("inf")}, ValueError), ({"fall": 0}, ValueError),
    ({"rise": 0}, ValueError), ({"panic_threshold": 2}, ValueError),
    ({"max_concurrency": 0}, ValueError), ({"url": "http://{host}/health"}, ValueError),
    ({"url": 42}, TypeError), ({"on_change": "print"}, TypeError),
])
def test_bad_configuration_is_rejected(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        HealthChecker(ConsistentHashRouter(), **kwargs)


def test_a_router_or_a_membership_is_required() -> None:
    with pytest.raises(TypeError):
        HealthChecker(None)


# -- the thread runner ------------------------------------------------------


def chash_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("chash-health")]


def test_background_thread_takes_out_and_brings_back(backends: Callable[..., Backend]) -> None:
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    before = owners(router)
    with HealthChecker(router, interval=0.05, timeout=2.0, fall=2, rise=2) as checker:
        assert checker.running
        group[2].stop()
        wait_until(lambda: group[2].node not in router)
        group[2].start()
        wait_until(lambda: group[2].node in router)
    assert not checker.running
    assert owners(router) == before
    assert chash_threads() == []


def test_stop_is_prompt_and_leaves_no_thread(backends: Callable[..., Backend]) -> None:
    backend = backends()
    checker = HealthChecker(ring_of([backend]), interval=30.0)
    checker.start()
    with pytest.raises(RuntimeError):
        checker.start()
    backend.wait_for_hits(1)
    wait_until(lambda: checker.status()[backend.node].consecutive_successes == 1)
    started = time.monotonic()
    checker.stop()
    assert time.monotonic() - started < 2.0
    assert chash_threads() == []
    checker.stop()  # idempotent
    checker.start()  # and restartable
    backend.wait_for_hits(2)
    checker.stop()
    assert chash_threads() == []


def test_stop_aborts_a_hanging_probe_without_counting_it(
        backends: Callable[..., Backend]) -> None:
    backend = backends().hang()
    checker = HealthChecker(ring_of([backend]), interval=30.0, timeout=30.0)
    checker.start()
    backend.wait_for_hits(1)
    started = time.monotonic()
    checker.stop()
    assert time.monotonic() - started < 2.0
    assert chash_threads() == []
    assert checker.status()[backend.node].consecutive_failures == 0


def test_check_now_threads_are_released_by_stop(backends: Callable[..., Backend]) -> None:
    checker = HealthChecker(ring_of([backends()]))
    checker.check_now()
    checker.stop()
    assert chash_threads() == []


# -- the documentation ------------------------------------------------------


def docs_examples() -> list[str]:
    text = (Path(__file__).parent.parent / "docs" / "health.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_documentation_examples_compile() -> None:
    blocks = docs_examples()
    assert len(blocks) == 4
    for i, block in enumerate(blocks):
        compile(block, f"docs/health.md block {i}", "exec")


def test_documentation_sync_gateway(backends: Callable[..., Backend]) -> None:
    (block,) = [b for b in docs_examples() if "class Gateway" in b]
    example: dict[str, Any] = {"__name__": "gateway_example"}
    exec(compile(block, "docs/health.md", "exec"), example)
    router, checker = example["router"], example["checker"]
    for node in router.nodes:
        router.remove_service_node(node)
    group = [backends() for _ in range(3)]
    for backend in group:
        router.add_service_node(backend.node, 1.0)
    base: type[http.server.BaseHTTPRequestHandler] = example["Gateway"]

    class QuietGateway(base):  # type: ignore[valid-type,misc]
        def log_message(self, format: str, *args: Any) -> None:
            pass

    gateway = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietGateway)
    thread = threading.Thread(target=gateway.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()

    def get(user: str) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{gateway.server_port}/profile",
                                         headers={"X-User-Id": user})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, ""

    try:
        checker.check_now()
        users = [str(i) for i in range(40)]
        for user in users:
            assert get(user) == (200, f"200 from {router.get_target_node(f'user:{user}')}\n")
        victim = group[0]
        user = next(u for u in users if router.get_target_node(f"user:{u}") == victim.node)
        successor = router.get_preference_list(f"user:{user}", 2)[1]
        victim.stop()
        assert [get(user)[0] for _ in range(3)] == [502, 502, 502]  # reported: out
        assert victim.node not in router
        assert get(user) == (200, f"200 from {successor}\n")
    finally:
        gateway.shutdown()
        gateway.server_close()
        thread.join()
        checker.stop()
