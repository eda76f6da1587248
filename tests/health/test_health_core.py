"""Tests of chash.health.core, what both runners share, through both runners
against real HTTP backends on 127.0.0.1: probe outcomes, hysteresis, passive
reports, panic, operator changes, notification and other memberships.

Rounds are driven with check_now() (the ``make_driver`` fixture) so that
every test is deterministic.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

from _support.health_checks import KEYS, AsyncDriver, Driver, Recorder, SyncDriver, owners
from _support.http_backends import Backend, ring_of
from _support.ports import refused_node
from chash.health import HealthChecker, LocalMembership, NodeState

UP, DOWN = NodeState.UP, NodeState.DOWN


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


# -- a backend stops and starts again, for both runners ---------------------


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


def test_a_router_or_a_membership_is_required() -> None:
    with pytest.raises(TypeError):
        HealthChecker(None)
