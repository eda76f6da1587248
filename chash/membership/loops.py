"""The decisions of a driver's two loops, without any I/O.

Each driver runs a worker (periodic checks, votes, sweeps, syncs asked for)
and a listener (announcements).  What they decide is written here once, as
h11 does for HTTP: ``Worker`` and ``Listener`` take the events a loop sees
(the time, a sync asked for, a notice received, an error) and return what
to do next; the threaded and the asyncio drivers only carry that out, each
in a few lines, so they cannot drift apart.  Time is always passed in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from chash.membership.core import MembershipCore
from chash.membership.store import Announcement, Notice, SubscriptionLost

__all__ = ["Listener", "Reaction", "Receive", "Round", "Subscribe", "Worker"]

logger = logging.getLogger("chash.membership")

#: The longest a listener waits for a notice before it looks around again
#: (for a stalled exchange, a store that changed its kind of pub/sub).
POLL = 0.5


@dataclass(frozen=True)
class Round:
    """One round of the worker: ``protocol.tick`` with these arguments."""

    check_due: bool
    requested: bool
    sweep_due: bool


class Worker:
    """When the worker checks the ring, sweeps the votes and syncs.

    ``wait_for(now)`` says how long to sleep (unless woken); ``round(now)``,
    called on waking, what to run.  ``request_sync`` may be called from
    any thread (a listener asking for a sync); it sets one flag.
    """

    def __init__(self, core: MembershipCore, now: float) -> None:
        self._core = core
        self.check_every = core.resync_interval
        self.sweep_every = core.vote_ttl / 2
        self.next_check = now + self.check_every
        self.next_sweep = now + self.sweep_every
        self.requested = False

    def request_sync(self) -> None:
        """Ask for a check of the ring at the next round."""
        self.requested = True

    def wait_for(self, now: float) -> float | None:
        """Seconds to sleep until something is due, or None to go on at once
        (a sync was asked for, or votes wait and the store answers)."""
        core = self._core
        if self.requested or (core.has_votes() and core.connected):
            return None
        return max(0.0, min(self.next_check, self.next_sweep) - now)

    def round(self, now: float) -> Round | None:
        """What to run now (rescheduling what is due), or None: in an
        outage, the store is tried again only when a check is due or asked
        for, so a pending vote does not spin the loop."""
        requested, self.requested = self.requested, False
        check, sweep = now >= self.next_check, now >= self.next_sweep
        if check:
            self.next_check = now + self.check_every
        if sweep:
            self.next_sweep = now + self.sweep_every
        if not (self._core.connected or check or requested):
            return None
        return Round(check_due=check, requested=requested, sweep_due=sweep)


@dataclass(frozen=True)
class Subscribe:
    """Subscribe to the ring's announcements, sharded or not; then tell
    ``subscribed()``, ``unavailable(why)`` (the store raised NoPubSub) or
    ``failed(exc)``."""

    sharded: bool


@dataclass(frozen=True)
class Receive:
    """Wait up to ``timeout`` seconds for a notice on the subscription; then
    tell ``received(notice)`` or ``failed(exc)``."""

    timeout: float


@dataclass(frozen=True)
class Reaction:
    """What the listener does, in this order: close the subscription, ask
    the worker for a sync, wait (unless stopping) ``wait`` seconds."""

    close: bool = False
    sync: bool = False
    wait: float = 0.0


class Listener:
    """What the listener does next.

    The listener subscribes once the first sync told which pub/sub the store
    uses, asks for a sync after every (re)subscription (announcements made
    before it listened are lost) and after each announcement of a state this
    instance has not applied, subscribes anew when the store dropped the
    subscription or changed its kind, and after an error backs off for
    ``resync_interval`` (the worker notices and logs an outage).
    """

    def __init__(self, core: MembershipCore) -> None:
        self._core = core
        self.poll = min(POLL, core.resync_interval)
        #: Whether the subscription held is sharded; None without one.
        self.subscribed_sharded: bool | None = None
        self._subscribing: bool | None = None

    def next_step(self) -> Subscribe | Receive | Reaction:
        """What to do now."""
        core = self._core
        core.watch()
        held, sharded = self.subscribed_sharded, core.sharded
        if held is not None and sharded is not None and sharded != held:
            self.subscribed_sharded = None  # the server changed: subscribe anew
            return Reaction(close=True)
        if held is not None:
            return Receive(self.poll)
        if sharded is None:  # not synced yet: the worker finds out
            return Reaction(wait=self.poll)
        self._subscribing = sharded
        return Subscribe(sharded)

    def subscribed(self) -> Reaction:
        """The subscription is made: sync, for what was announced before."""
        self.subscribed_sharded = self._subscribing
        return Reaction(sync=True)

    def unavailable(self, why: str) -> Reaction:
        """This client cannot subscribe (logged once): the checks carry on."""
        self._core.cannot_listen(why)
        return Reaction(wait=self._core.resync_interval)

    def received(self, notice: Notice) -> Reaction:
        """A notice came (or the wait timed out with None)."""
        if isinstance(notice, Announcement):
            return Reaction(sync=self._core.is_news(notice.data))
        if isinstance(notice, SubscriptionLost):
            self.subscribed_sharded = None
            return Reaction(close=True, sync=True)
        return Reaction()

    def failed(self, exc: Exception) -> Reaction:
        """A store call failed: drop the subscription, let the worker sync
        (it notices and logs an outage), back off."""
        core = self._core
        if not core.is_outage(exc):
            logger.error("ring %s: listener failed; re-subscribing", core.name, exc_info=exc)
        self.subscribed_sharded = None
        return Reaction(close=True, sync=True, wait=core.resync_interval)
