"""The membership protocol without a store: its generators are driven with
scripted replies (the records of ``chash.membership.state``), as a driver
would, and what they ask for is checked operation by operation.  The same
protocol runs under both drivers and over both stores, so these hold for
all; the store-backed tests (test_membership*.py, test_membership_scripts.py,
test_etcd_*.py) check the stores."""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

import pytest

from chash import ConsistentHashRouter
from chash.membership.core import MembershipCore
from chash.membership.protocol import Steps, check, pull, send_votes, sweep, write
from chash.membership.settings import MembershipSettings
from chash.membership.state import NoRing, Outcome, Refused, RingHead, RingMissingError, StoredRing
from chash.membership.store import (
    Operation,
    ReadHead,
    ReadRing,
    Reepoch,
    Seed,
    Stamp,
    Sweep,
    Vote,
    Write,
)


def settings(bootstrap: bool = False) -> MembershipSettings:
    return MembershipSettings(name="orders", prefix="chash", quorum="majority", vote_ttl=30.0,
                              resync_interval=1.0, reporter="me", bootstrap=bootstrap)


def core(bootstrap: bool = False) -> MembershipCore:
    return MembershipCore(ConsistentHashRouter(), settings(bootstrap=bootstrap),
                          outage_errors=(ConnectionError,), store_name="Redis")


def snapshot(c: MembershipCore, epoch: str, version: int, nodes: dict[str, str],
             digest: str | None = None, order: dict[str, str] | None = None) -> StoredRing:
    """A ``ReadRing`` reply; the nodes' add sequences are their places in
    ``nodes`` unless ``order`` gives them."""
    if order is None:
        order = {node: str(seq) for seq, node in enumerate(nodes, 1)}
    return StoredRing(epoch, version, c.config, nodes=nodes, order=order, digest=digest,
                      sharded=True)


def changed(epoch: str, version: int, **more: Any) -> Outcome:
    """A change's reply: it changed the ring, now at (epoch, version)."""
    return Outcome(True, (epoch, version), **more)


class Driver:
    """Answers the calls of one operation from a script of replies (an
    exception is thrown in), recording every call."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.calls: list[Operation[Any]] = []

    def run(self, exchange: Generator[Operation[Any], Any, Any]) -> Any:
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
    def kinds(self) -> list[type[Operation[Any]]]:
        return [type(call) for call in self.calls]


def synced(c: MembershipCore, nodes: dict[str, str], version: int = 2) -> str:
    """Apply a first state; return its fingerprint."""
    d = Driver([snapshot(c, "e1", version, nodes), True])
    d.run(pull(c))
    assert d.kinds == [ReadRing, Stamp]
    assert d.calls[1] == Stamp("e1", version, c.fingerprint())
    return c.fingerprint()


def test_an_unsynced_instance_never_seeds() -> None:
    c = core()
    d = Driver([NoRing()])
    assert d.run(pull(c)) is None
    assert d.kinds == [ReadRing]
    d = Driver([NoRing()])
    with pytest.raises(RingMissingError, match="ring 'orders' is missing in Redis; an "
                                               "instance that holds it will restore it"):
        d.run(write(c, "add", "a", "1.0"))
    assert d.calls == [Write("add", "a", c.config, "1.0", False)]
    d = Driver([NoRing("meta.count is 5 but 0 entries are stored")])
    with pytest.raises(RingMissingError, match="damaged"):
        d.run(write(c, "add", "a", "1.0"))


def test_bootstrap_seeds_an_absent_ring_but_never_replaces_a_damaged_one() -> None:
    c = core(bootstrap=True)
    c.router.add_service_node("mine")
    d = Driver([NoRing(), changed("new", 1), snapshot(c, "new", 1, {"mine": "1.0"}), True])
    assert d.run(pull(c)) is not None
    seed = d.calls[1]
    assert isinstance(seed, Seed) and not seed.restore and dict(seed.nodes) == {"mine": "1.0"}
    assert (seed.version, seed.config) == (1, c.config)
    d = Driver([NoRing("broken")])
    fresh = core(bootstrap=True)
    assert d.run(pull(fresh)) is None and d.kinds == [ReadRing]


def test_a_synced_instance_restores_a_damaged_ring() -> None:
    c = core()
    synced(c, {"a": "1.0", "b": "2.0"})
    d = Driver([NoRing("lost nodes"), changed("e2", 3),
                snapshot(c, "e2", 3, {"a": "1.0", "b": "2.0"}), True])
    d.run(pull(c))
    seed = d.calls[1]
    assert isinstance(seed, Seed) and seed.version == 3 and seed.restore  # the next version
    assert dict(seed.nodes) == {"a": "1.0", "b": "2.0"}
    assert c.router.weights == {"a": 1.0, "b": 2.0}


def test_same_version_other_ring_is_read_and_starts_an_epoch(
        caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    synced(c, {"a": "1.0", "b": "1.0"})
    other = ConsistentHashRouter()
    other.add_service_node("a")
    other.add_service_node("d")
    d = Driver([RingHead("e1", 2, other.fingerprint()),
                snapshot(c, "e1", 2, {"a": "1.0", "d": "1.0"}, other.fingerprint()),
                changed("e9", 3), snapshot(c, "e9", 3, {"a": "1.0", "d": "1.0"}), True])
    d.run(check(c))
    assert d.kinds == [ReadHead, ReadRing, Reepoch, ReadRing, Stamp]
    assert c.router.weights == {"a": 1.0, "d": 1.0} and c.position == ("e9", 3)
    assert any("another ring at version 2" in r.getMessage() for r in caplog.records)


def test_a_digest_nobody_can_reproduce_does_not_loop(caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    synced(c, {"a": "1.0"})
    for _ in range(3):
        d = Driver([RingHead("e1", 2, "0123456789abcdef"),
                    snapshot(c, "e1", 2, {"a": "1.0"}, "0123456789abcdef")])
        d.run(check(c))
        assert d.kinds == [ReadHead, ReadRing]  # no new epoch, no stamp
    errors = [r for r in caplog.records if "holds digest 0123456789abcdef" in r.getMessage()]
    assert len(errors) == 1


def test_going_back_follows_redis_and_starts_an_epoch() -> None:
    c = core()
    synced(c, {"a": "1.0", "b": "1.0"}, version=5)
    d = Driver([RingHead("e1", 3, "x"), snapshot(c, "e1", 3, {"a": "1.0"}, "x"),
                changed("e7", 6), snapshot(c, "e7", 6, {"a": "1.0"}), True])
    d.run(check(c))
    assert d.kinds == [ReadHead, ReadRing, Reepoch, ReadRing, Stamp]
    reepoch = d.calls[2]
    assert isinstance(reepoch, Reepoch)
    assert (reepoch.seen_epoch, reepoch.seen_version, reepoch.version) == ("e1", 3, 6)
    assert c.router.weights == {"a": 1.0} and c.position == ("e7", 6)


def test_a_committed_write_never_reports_failure(caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    synced(c, {"a": "1.0"})
    d = Driver([changed("e1", 3), ConnectionError("gone after the commit")])
    d.run(write(c, "add", "b", "1.0"))  # no exception
    assert d.kinds == [Write, ReadRing]
    assert any("committed at version 3" in r.getMessage() for r in caplog.records)


def test_refused_mass_removal_and_forced_one(caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    synced(c, {"a": "1.0"})
    with pytest.raises(ValueError, match="would take 1 of the 1 nodes in service"):
        Driver([Refused(1, 1)]).run(write(c, "remove", "a"))
    d = Driver([changed("e1", 3, in_service=1, removed=1), snapshot(c, "e1", 3, {}), True])
    d.run(write(c, "remove", "a", force=True))
    assert d.calls[0] == Write("remove", "a", c.config, "", True)
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
    assert next(exchange) == Vote("me", 30_000, "majority", {"a": (False, "")})
    exchange.close()  # a cancelled task
    assert c.take_votes() == {"a": (False, "")}


def test_votes_sent_to_a_lost_ring_are_kept_and_the_ring_restored() -> None:
    c = core()
    synced(c, {"a": "1.0"})
    c.queue_vote("a", True, "refused")
    d = Driver([NoRing(), NoRing(), changed("e2", 3), snapshot(c, "e2", 3, {"a": "1.0"}), True])
    d.run(send_votes(c))
    assert d.kinds == [Vote, ReadRing, Seed, ReadRing, Stamp]
    assert c.take_votes() == {"a": (True, "refused")}  # sent again at the next round


def test_a_sweep_names_this_reporter_only_to_withdraw_its_votes() -> None:
    c = core()
    synced(c, {"a": "1.0"})
    d = Driver([Outcome(False, ("e1", 2)), Outcome(True, ("e1", 3)),
                snapshot(c, "e1", 3, {"a": "1.0"}), True])
    d.run(sweep(c))
    d.run(sweep(c, withdraw=True))
    assert d.calls[:2] == [Sweep(30_000, "majority", None), Sweep(30_000, "majority", "me")]
    assert d.kinds[2:] == [ReadRing, Stamp]  # the ring moved on: read again


def test_unreadable_entries_are_skipped_and_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    c = core()
    for version in (2, 3):
        Driver([snapshot(c, "e1", version, {"a": "1.0", "x": "heavy", "y": "inf"}), True]) \
            .run(pull(c))
    assert c.router.weights == {"a": 1.0}
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert lines == ["ring orders: skipped unreadable entry nodes['x'] = 'heavy'",
                     "ring orders: skipped unreadable entry nodes['y'] = 'inf'"]
    for _ in range(2):
        c.queue_vote("a", True, "r")
        Driver([Outcome(False, ("e1", 3), (("votes", "b", "[[["),))]).run(send_votes(c))
    assert sum("votes['b']" in r.getMessage() for r in caplog.records) == 1


def ordered_core() -> MembershipCore:
    return MembershipCore(ConsistentHashRouter(layout="nginx"), settings(),
                          outage_errors=(ConnectionError,), store_name="Redis")


def test_nodes_are_applied_in_their_add_sequence_whatever_the_field_order() -> None:
    c = ordered_core()
    # The hash's fields in one order, the sequences in another.
    Driver([snapshot(c, "e1", 2, {"c:1": "1.0", "a:1": "1.0", "b:1": "1.0"},
                     order={"a:1": "7", "c:1": "12", "b:1": "3"}), True]).run(pull(c))
    assert c.router.nodes == ["b:1", "a:1", "c:1"]
    assert c.state is not None and list(c.state.weights) == ["b:1", "a:1", "c:1"]
    # A restore writes them back in that order (Seed numbers them 1, 2, 3).
    seed = Driver([NoRing(), changed("e2", 3), snapshot(c, "e2", 3, {"b:1": "1.0"}), True])
    seed.run(pull(c))
    call = seed.calls[1]
    assert isinstance(call, Seed)
    assert list(call.nodes.items()) == [("b:1", "1.0"), ("a:1", "1.0"), ("c:1", "1.0")]


def test_nodes_without_a_sequence_come_first_in_id_order(
        caplog: pytest.LogCaptureFixture) -> None:
    c = ordered_core()
    # A ring written before sequences were stored, then one node added by
    # this version, and one sequence that does not parse.
    for version in (2, 3):
        Driver([snapshot(c, "e1", version,
                         {"z:1": "1.0", "new:1": "1.0", "é:1": "1.0", "b:1": "1.0", "m:1": "1.0"},
                         order={"new:1": "1", "m:1": "soon", "z:1": "9" * 5000,
                                "gone:1": "2"}), True]).run(pull(c))
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

    answers = 0

    def answered(self) -> None:
        self.answers += 1


def two_calls() -> Generator[Operation[Any], Any, str]:
    first = yield ReadHead()
    try:
        second = yield Stamp(first, 1, "digest")
    except ConnectionError as exc:
        return f"failed: {exc}"
    return f"{first}+{second}"


def test_steps_hands_out_each_call_and_returns_the_result() -> None:
    core = Exchanges()
    steps = Steps(two_calls(), core)  # type: ignore[arg-type]  # the methods Steps uses
    assert steps.next_call() == ReadHead()
    assert core.open == {1}
    steps.replied("a")
    assert core.open == set()
    assert steps.next_call() == Stamp("a", 1, "digest")
    steps.replied("b")
    assert steps.next_call() is None
    assert steps.result == "a+b"
    assert (core.started, core.open, core.answers) == (2, set(), 2)


def test_steps_throws_a_failure_in_at_the_yield() -> None:
    core = Exchanges()
    steps = Steps(two_calls(), core)  # type: ignore[arg-type]
    steps.next_call()
    steps.replied("a")
    steps.next_call()
    steps.failed(ConnectionError("gone"))
    assert core.open == set() and core.answers == 1  # a failure is no answer
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

    def operation() -> Generator[Operation[Any], Any, None]:
        try:
            yield ReadHead()
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
