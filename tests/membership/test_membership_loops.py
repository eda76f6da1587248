"""The decisions of the drivers' worker and listener loops, without Redis.

``chash.membership.loops`` is fed events and the time by hand, as a driver
would feed them, and what it says to do is checked step by step; both
drivers carry out these same decisions (test_membership*.py runs them).
"""

from __future__ import annotations

import logging

import pytest

from chash import ConsistentHashRouter
from chash.membership.core import MembershipCore
from chash.membership.loops import Listener, Reaction, Receive, Round, Subscribe, Worker
from chash.membership.settings import MembershipSettings
from chash.membership.state import MembershipState
from chash.membership.store import Announcement, SubscriptionLost


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def core(resync_interval: float = 1.0, vote_ttl: float = 30.0,
         clock: Clock | None = None) -> MembershipCore:
    settings = MembershipSettings(name="orders", resync_interval=resync_interval,
                                  vote_ttl=vote_ttl, reporter="me")
    return MembershipCore(ConsistentHashRouter(), settings, outage_errors=(ConnectionError,), store_name="Redis",
                          clock=clock or Clock())


def synced(c: MembershipCore, epoch: str = "e1", version: int = 2) -> MembershipCore:
    """``c`` with a state applied, as after a first sync."""
    assert c.apply(MembershipState(epoch, version, c.config, {"a": 1.0}))
    c.sharded = True
    return c


# -- the worker ----------------------------------------------------------------


def test_the_worker_sleeps_until_the_first_thing_due() -> None:
    worker = Worker(core(resync_interval=1.0, vote_ttl=30.0), now=100.0)
    assert worker.wait_for(100.0) == pytest.approx(1.0)  # the check; the sweep at 115
    assert worker.wait_for(100.75) == pytest.approx(0.25)
    assert worker.wait_for(105.0) == 0.0  # overdue: no negative sleep


def test_due_work_is_rescheduled_from_when_it_ran() -> None:
    worker = Worker(core(resync_interval=1.0, vote_ttl=4.0), now=0.0)  # sweep every 2 s
    assert worker.round(0.5) == Round(check_due=False, requested=False, sweep_due=False)
    assert worker.round(1.2) == Round(check_due=True, requested=False, sweep_due=False)
    assert worker.wait_for(1.2) == pytest.approx(0.8)  # the sweep at 2.0, the check at 2.2
    assert worker.round(2.0) == Round(check_due=False, requested=False, sweep_due=True)
    assert worker.round(2.3) == Round(check_due=True, requested=False, sweep_due=False)
    assert worker.wait_for(2.3) == pytest.approx(1.0)  # the check at 3.3, the sweep at 4.0
    assert worker.round(4.0) == Round(check_due=True, requested=False, sweep_due=True)


def test_a_sync_asked_for_runs_at_once_and_once() -> None:
    worker = Worker(core(), now=0.0)
    worker.request_sync()
    assert worker.wait_for(0.1) is None
    assert worker.round(0.1) == Round(check_due=False, requested=True, sweep_due=False)
    assert worker.wait_for(0.1) == pytest.approx(0.9)
    assert worker.round(0.2) == Round(check_due=False, requested=False, sweep_due=False)


def test_votes_waiting_go_at_once_unless_the_store_is_away() -> None:
    c = core()
    worker = Worker(c, now=0.0)
    c.queue_vote("a", True, "failing")
    assert worker.wait_for(0.0) is None
    c.outage(ConnectionError("refused"))
    # In an outage the votes wait for the next check: no spinning.
    assert worker.wait_for(0.0) == pytest.approx(1.0)
    assert worker.round(0.5) is None
    assert worker.round(1.0) == Round(check_due=True, requested=False, sweep_due=False)
    worker.request_sync()
    assert worker.round(1.1) == Round(check_due=False, requested=True, sweep_due=False)
    c.reconnected()
    assert worker.wait_for(1.1) is None


# -- the listener ---------------------------------------------------------------


def test_the_listener_waits_for_the_first_sync_then_subscribes() -> None:
    c = core(resync_interval=0.2)
    listener = Listener(c)
    assert listener.next_step() == Reaction(wait=0.2)  # min(0.5, resync_interval)
    assert listener.next_step() == Reaction(wait=0.2)
    c.sharded = False
    assert listener.next_step() == Subscribe(sharded=False)
    assert listener.subscribed() == Reaction(sync=True)  # what was announced before
    assert listener.subscribed_sharded is False
    assert listener.next_step() == Receive(timeout=0.2)
    assert Listener(core(resync_interval=5.0)).poll == 0.5


def test_only_news_asks_for_a_sync() -> None:
    c = synced(core(), "e1", 2)
    listener = Listener(c)
    assert listener.next_step() == Subscribe(sharded=True)
    listener.subscribed()
    assert listener.received(Announcement("e1:2")) == Reaction()  # applied already
    assert listener.received(Announcement(b"e1:3")) == Reaction(sync=True)
    assert listener.received(Announcement("e2:2")) == Reaction(sync=True)
    assert listener.received(None) == Reaction()
    assert listener.next_step() == Receive(listener.poll)


def test_a_lost_subscription_is_made_anew() -> None:
    c = synced(core())
    listener = Listener(c)
    listener.next_step()
    listener.subscribed()
    assert listener.received(SubscriptionLost()) == Reaction(close=True, sync=True)
    assert listener.subscribed_sharded is None
    assert listener.next_step() == Subscribe(sharded=True)


def test_a_store_that_changed_its_pub_sub_is_subscribed_anew() -> None:
    c = synced(core())
    listener = Listener(c)
    listener.next_step()
    listener.subscribed()
    assert listener.next_step() == Receive(listener.poll)
    c.sharded = False  # a failover to a server without sharded pub/sub
    assert listener.next_step() == Reaction(close=True)
    assert listener.next_step() == Subscribe(sharded=False)
    listener.subscribed()
    assert listener.subscribed_sharded is False


def test_errors_back_off_and_only_bugs_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    c = synced(core(resync_interval=3.0))
    listener = Listener(c)
    listener.next_step()
    listener.subscribed()
    with caplog.at_level(logging.INFO, logger="chash.membership"):
        outage = listener.failed(ConnectionError("reset"))
        assert outage == Reaction(close=True, sync=True, wait=3.0)
        assert not caplog.records  # the worker logs outages
        assert listener.next_step() == Subscribe(sharded=True)
        assert listener.failed(RuntimeError("bug")) == Reaction(close=True, sync=True, wait=3.0)
    assert [r.getMessage() for r in caplog.records] == [
        "ring orders: listener failed; re-subscribing"]
    assert caplog.records[0].exc_info is not None


def test_a_client_without_pub_sub_falls_back_on_the_checks(
        caplog: pytest.LogCaptureFixture) -> None:
    c = synced(core(resync_interval=2.0))
    listener = Listener(c)
    with caplog.at_level(logging.WARNING, logger="chash.membership"):
        for _ in range(3):
            assert isinstance(listener.next_step(), Subscribe)
            assert listener.unavailable("this client offers no sharded pub/sub") \
                == Reaction(wait=2.0)
    assert [r.getMessage() for r in caplog.records] == [
        "ring orders: this client offers no sharded pub/sub; changes arrive by the check "
        "every 2s instead of at once (upgrade redis-py)"]


def test_every_step_watches_for_a_stalled_exchange(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    c = synced(core(resync_interval=1.0, clock=clock))
    listener = Listener(c)
    ticket = c.exchange_started()
    clock.now = 1.9
    listener.next_step()
    assert c.connected
    clock.now = 2.1  # past stall_after = max(2, 2 * resync_interval)
    with caplog.at_level(logging.WARNING, logger="chash.membership"):
        listener.next_step()
    assert not c.connected
    assert "Redis unreachable for ring orders (TimeoutError: no answer for 2s)" \
        in caplog.records[0].getMessage()
    c.exchange_ended(ticket)


def test_listeners_hear_of_each_change_to_the_router() -> None:
    c = core()
    heard: list[list[str]] = []
    c.listeners.append(lambda: heard.append(sorted(c.router.weights)))

    def broken() -> None:
        raise RuntimeError("a listener that fails")

    c.listeners.append(broken)  # logged; the others still hear
    assert c.apply(MembershipState("e1", 1, c.config, {"a": 1.0}))
    assert heard == [["a"]]
    assert c.apply(MembershipState("e1", 2, c.config, {"a": 1.0}))  # nothing moved: not told
    assert heard == [["a"]]
    assert c.apply(MembershipState("e1", 3, c.config, {"a": 1.0, "b": 1.0}))
    assert heard == [["a"], ["a", "b"]]
    c.router.remove_service_node("b")  # behind the membership's back: repaired, told
    c.repair()
    assert heard == [["a"], ["a", "b"], ["a", "b"]]
