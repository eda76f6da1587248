"""Tests of chash.health.state: the time-injected, I/O-free state machine,
by example and against a replay of each node's history."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from chash.health.state import HealthState, NodeState, NodeStatus

UP, DOWN = NodeState.UP, NodeState.DOWN




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
