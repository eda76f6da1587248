"""The membership protocol without Redis: its generators are driven with
scripted replies, as a driver would, and what they ask for is checked call
by call.  The same protocol runs under both drivers, so these hold for
both; the Redis-backed tests (test_membership*.py, test_membership_scripts.py)
check the scripts."""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

import pytest

from chash import ConsistentHashRouter
from chash.membership.core import MembershipCore
from chash.membership.protocol import Call, Steps, check, pull, send_votes, write
from chash.membership.settings import MembershipSettings
from chash.membership.state import RingMissingError


def settings(bootstrap: bool = False) -> MembershipSettings:
    return MembershipSettings(name="orders", prefix="chash", quorum="majority", vote_ttl=30.0,
                              resync_interval=1.0, reporter="me", bootstrap=bootstrap)


def core(bootstrap: bool = False) -> MembershipCore:
    return MembershipCore(ConsistentHashRouter(), settings(bootstrap=bootstrap),
                          outage_errors=(ConnectionError,), store_name="Redis")


def snapshot(c: MembershipCore, epoch: str, version: int, nodes: dict[str, str],
             digest: str | None = None, order: dict[str, str] | None = None) -> list[Any]:
    """A SNAPSHOT reply; the nodes' add sequences are their places in
    ``nodes`` unless ``order`` gives them."""
    flat = [item for pair in nodes.items() for item in pair]
    if order is None:
        order = {node: str(seq) for seq, node in enumerate(nodes, 1)}
    sequences = [item for pair in order.items() for item in pair]
    return [1, epoch, version, c.config, flat, [], [], digest or False, 1, sequences]


class Driver:
    """Answers the calls of one operation from a script of replies (an
    exception is thrown in), recording every call."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.calls: list[Call] = []

    def run(self, exchange: Generator[Call, Any, Any]) -> Any:
        steps = Steps(exchange)
        while (call := steps.next_call()) is not None:
            self.calls.append(call)
            assert self.replies, f"unexpected call {call}"
            reply = self.replies.pop(0)
            if isinstance(reply, BaseException):
                steps.failed(reply)
            else:
                steps.replied(reply)
        return steps.result

    @property
    def scripts(self) -> list[str]:
        return [call.script for call in self.calls]


def synced(c: MembershipCore, nodes: dict[str, str], version: int = 2) -> str:
    """Apply a first state; return its fingerprint."""
    d = Driver([snapshot(c, "e1", version, nodes), 1])
    d.run(pull(c))
    assert d.scripts == ["SNAPSHOT", "STAMP"]
    return c.fingerprint()


def test_an_unsynced_instance_never_seeds() -> None:
    c = core()
    d = Driver([[-1]])
    assert d.run(pull(c)) is None
    assert d.scripts == ["SNAPSHOT"]
    d = Driver([[-1]])
    with pytest.raises(RingMissingError, match="ring 'orders' is missing in Redis; an "
                                               "instance that holds it will restore it"):
        d.run(write(c, "add", "a", "1.0"))
    assert d.scripts == ["WRITE"]
    d = Driver([[-3, "meta.count is 5 but 0 entries are stored"]])
    with pytest.raises(RingMissingError, match="damaged"):
        d.run(write(c, "add", "a", "1.0"))


def test_bootstrap_seeds_an_absent_ring_but_never_replaces_a_damaged_one() -> None:
    c = core(bootstrap=True)
    c.router.add_service_node("mine")
    d = Driver([[-1], [1, "new", 1, []], snapshot(c, "new", 1, {"mine": "1.0"}), 1])
    assert d.run(pull(c)) is not None
    seed = d.calls[1]
    assert seed.script == "SEED" and seed.args[4] == 0 and "mine" in seed.args
    d = Driver([[-3, "broken"]])
    fresh = core(bootstrap=True)
    assert d.run(pull(fresh)) is None and d.scripts == ["SNAPSHOT"]


def test_a_synced_instance_restores_a_damaged_ring() -> None:
    c = core()
    synced(c, {"a": "1.0", "b": "2.0"})
    d = Driver([[-3, "lost nodes"], [1, "e2", 3, []], snapshot(c, "e2", 3, {"a": "1.0",
                                                                           "b": "2.0"}), 1])
    d.run(pull(c))
    seed = d.calls[1]
    assert seed.args[2] == 3 and seed.args[4] == 1  # the next version, restore
    assert c.router.weights == {"a": 1.0, "b": 2.0}


def test_same_version_other_ring_is_read_and_starts_an_epoch(
        caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    synced(c, {"a": "1.0", "b": "1.0"})
    other = ConsistentHashRouter()
    other.add_service_node("a")
    other.add_service_node("d")
    d = Driver([[1, "e1", 2, other.fingerprint()],
                snapshot(c, "e1", 2, {"a": "1.0", "d": "1.0"}, other.fingerprint()),
                [1, "e9", 3, []], snapshot(c, "e9", 3, {"a": "1.0", "d": "1.0"}), 1])
    d.run(check(c))
    assert d.scripts == ["HEAD", "SNAPSHOT", "REEPOCH", "SNAPSHOT", "STAMP"]
    assert c.router.weights == {"a": 1.0, "d": 1.0} and c.position == ("e9", 3)
    assert any("another ring at version 2" in r.getMessage() for r in caplog.records)


def test_a_digest_nobody_can_reproduce_does_not_loop(caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    synced(c, {"a": "1.0"})
    for _ in range(3):
        d = Driver([[1, "e1", 2, "0123456789abcdef"],
                    snapshot(c, "e1", 2, {"a": "1.0"}, "0123456789abcdef")])
        d.run(check(c))
        assert d.scripts == ["HEAD", "SNAPSHOT"]  # no new epoch, no stamp
    errors = [r for r in caplog.records if "holds digest 0123456789abcdef" in r.getMessage()]
    assert len(errors) == 1


def test_going_back_follows_redis_and_starts_an_epoch() -> None:
    c = core()
    synced(c, {"a": "1.0", "b": "1.0"}, version=5)
    d = Driver([[1, "e1", 3, "x"], snapshot(c, "e1", 3, {"a": "1.0"}, "x"),
                [1, "e7", 6, []], snapshot(c, "e7", 6, {"a": "1.0"}), 1])
    d.run(check(c))
    assert d.scripts == ["HEAD", "SNAPSHOT", "REEPOCH", "SNAPSHOT", "STAMP"]
    assert d.calls[2].args[1:3] == ("e1", 3) and d.calls[2].args[4] == 6
    assert c.router.weights == {"a": 1.0} and c.position == ("e7", 6)


def test_a_committed_write_never_reports_failure(caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    synced(c, {"a": "1.0"})
    d = Driver([[1, "e1", 3, []], ConnectionError("gone after the commit")])
    d.run(write(c, "add", "b", "1.0"))  # no exception
    assert d.scripts == ["WRITE", "SNAPSHOT"]
    assert any("committed at version 3" in r.getMessage() for r in caplog.records)


def test_refused_mass_removal_and_forced_one(caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    synced(c, {"a": "1.0"})
    with pytest.raises(ValueError, match="would take 1 of the 1 nodes in service"):
        Driver([[-4, 1, 1]]).run(write(c, "remove", "a"))
    d = Driver([[1, "e1", 3, [], 1, 1], snapshot(c, "e1", 3, {}), 1])
    d.run(write(c, "remove", "a", force=True))
    assert d.calls[0].args[4] == "1"
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("refused to remove 'a'" in m for m in messages)
    assert any("took 1 of the 1 nodes in service out at once (forced)" in m for m in messages)


def test_votes_are_kept_when_the_exchange_fails_or_is_abandoned() -> None:
    c = core()
    synced(c, {"a": "1.0"})
    c.queue_vote("a", True, "refused")
    with pytest.raises(ConnectionError):
        Driver([ConnectionError("down")]).run(send_votes(c))
    assert c.take_votes() == {"a": (True, "refused")}
    c.queue_vote("a", False)
    exchange = send_votes(c)
    assert next(exchange).script == "VOTE"
    exchange.close()  # a cancelled task
    assert c.take_votes() == {"a": (False, "")}


def test_unreadable_entries_are_skipped_and_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    for version in (2, 3):
        Driver([snapshot(c, "e1", version, {"a": "1.0", "x": "heavy", "y": "inf"}), 1]) \
            .run(pull(c))
    assert c.router.weights == {"a": 1.0}
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert lines == ["ring orders: skipped unreadable entry nodes['x'] = 'heavy'",
                     "ring orders: skipped unreadable entry nodes['y'] = 'inf'"]
    for _ in range(2):
        c.queue_vote("a", True, "r")
        Driver([[0, "e1", 3, ["votes", "b", "[[["]]]).run(send_votes(c))
    assert sum("votes['b']" in r.getMessage() for r in caplog.records) == 1


def ordered_core() -> MembershipCore:
    return MembershipCore(ConsistentHashRouter(layout="nginx"), settings(),
                          outage_errors=(ConnectionError,), store_name="Redis")


def test_nodes_are_applied_in_their_add_sequence_whatever_the_field_order() -> None:
    c = ordered_core()
    # The hash's fields in one order, the sequences in another.
    Driver([snapshot(c, "e1", 2, {"c:1": "1.0", "a:1": "1.0", "b:1": "1.0"},
                     order={"a:1": "7", "c:1": "12", "b:1": "3"}), 1]).run(pull(c))
    assert c.router.nodes == ["b:1", "a:1", "c:1"]
    assert c.state is not None and list(c.state.weights) == ["b:1", "a:1", "c:1"]
    # A restore writes them back in that order (SEED numbers them 1, 2, 3).
    seed = Driver([[-1], [1, "e2", 3, []], snapshot(c, "e2", 3, {"b:1": "1.0"}), 1])
    seed.run(pull(c))
    args = seed.calls[1].args
    assert args[5] == 3 and args[6:12] == ("b:1", "1.0", "a:1", "1.0", "c:1", "1.0")


def test_nodes_without_a_sequence_come_first_in_id_order(
        caplog: pytest.LogCaptureFixture) -> None:
    c = ordered_core()
    # A ring written before sequences were stored, then one node added by
    # this version, and one sequence that does not parse.
    for version in (2, 3):
        Driver([snapshot(c, "e1", version,
                         {"z:1": "1.0", "new:1": "1.0", "é:1": "1.0", "b:1": "1.0", "m:1": "1.0"},
                         order={"new:1": "1", "m:1": "soon", "z:1": "9" * 5000,
                                "gone:1": "2"}), 1]).run(pull(c))
        assert c.router.nodes == ["b:1", "m:1", "z:1", "é:1", "new:1"]
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert lines[0] == "ring orders: skipped unreadable entry order['m:1'] = 'soon'"
    assert len(lines) == 2 and "order['z:1'] = '999" in lines[1]


# -- Steps: how a driver steps one operation ----------------------------------


class Exchanges:
    """A core's exchange bookkeeping, as Steps drives it."""

    def __init__(self) -> None:
        self.open: set[int] = set()
        self.started = 0

    def exchange_started(self) -> int:
        self.started += 1
        self.open.add(self.started)
        return self.started

    def exchange_ended(self, ticket: int) -> None:
        self.open.remove(ticket)


def two_calls() -> Generator[Call, Any, str]:
    first = yield Call("HEAD")
    try:
        second = yield Call("SNAPSHOT", (first,))
    except ConnectionError as exc:
        return f"failed: {exc}"
    return f"{first}+{second}"


def test_steps_hands_out_each_call_and_returns_the_result() -> None:
    core = Exchanges()
    steps = Steps(two_calls(), core)  # type: ignore[arg-type]  # the two methods Steps uses
    assert steps.next_call() == Call("HEAD")
    assert core.open == {1}
    steps.replied("a")
    assert core.open == set()
    assert steps.next_call() == Call("SNAPSHOT", ("a",))
    steps.replied("b")
    assert steps.next_call() is None
    assert steps.result == "a+b"
    assert (core.started, core.open) == (2, set())


def test_steps_throws_a_failure_in_at_the_yield() -> None:
    core = Exchanges()
    steps = Steps(two_calls(), core)  # type: ignore[arg-type]
    steps.next_call()
    steps.replied("a")
    steps.next_call()
    steps.failed(ConnectionError("gone"))
    assert core.open == set()
    assert steps.next_call() is None
    assert steps.result == "failed: gone"


def test_an_uncaught_failure_comes_out_of_next_call() -> None:
    steps = Steps(two_calls())
    steps.next_call()
    steps.failed(TimeoutError("slow"))
    with pytest.raises(TimeoutError, match="slow"):
        steps.next_call()


def test_abandon_closes_the_operation_and_ends_its_call() -> None:
    closed: list[bool] = []

    def operation() -> Generator[Call, Any, None]:
        try:
            yield Call("HEAD")
        finally:
            closed.append(True)

    core = Exchanges()
    steps = Steps(operation(), core)  # type: ignore[arg-type]
    steps.next_call()
    steps.abandon()
    assert closed == [True]
    assert core.open == set()


def test_the_result_is_there_only_once_the_operation_returned() -> None:
    steps = Steps(two_calls())
    steps.next_call()
    with pytest.raises(RuntimeError, match="not returned yet"):
        _ = steps.result
