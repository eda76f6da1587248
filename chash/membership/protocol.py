"""The shared-ring protocol, once, for every store and both drivers: no I/O.

Each operation of a membership (read the ring, the periodic check, an
operator's write, send votes, sweep, start, one round of the worker) is a
generator.  It yields the store operations it needs performed
(``chash.membership.store``: ``ReadRing``, ``Write``, ``Vote``...), each
with typed arguments, and receives the store's reply, a record of
``chash.membership.state`` (``StoredRing``, ``Outcome``, ``NoRing``...),
or has the client's exception thrown in at the ``yield``; it returns its
result.  ``Steps`` steps one operation for a driver: ``SyncDriver`` in
threads, ``AsyncDriver`` in asyncio tasks, each over any store (Redis,
etcd).  So the drivers can never drift apart, the stores answer the same
operations, and the protocol is tested once with records alone.

What the protocol guarantees (docs/membership.md has the why):

* agreement is checked on content: every applied version is stamped with
  the ring's ``router.fingerprint()`` in the store (an anchor router's
  record, by an operator's write in the same step as its change where it
  can), and the periodic check compares it; the store seen going back, or
  holding another ring at the version applied, starts a new epoch, which
  every instance then reads;
* only an instance that synced (or one told to bootstrap) creates the
  ring; the others wait, and their writes raise ``RingMissingError``;
* a write that committed never reports failure: what fails after the
  commit is logged and left to the next check;
* outages and refusals are told apart from bugs (``MembershipCore``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Generator
from typing import Any, Generic, TypeVar, cast

from chash.membership.core import MembershipCore
from chash.membership.state import (
    Change,
    MembershipState,
    NoRing,
    NoSuchNode,
    OtherConfig,
    Position,
    Refused,
)
from chash.membership.store import History, Operation, ReadHead, ReadRing, Reepoch, Stamp

__all__ = ["Exchange", "Steps", "ask", "check", "history", "pull", "refresh", "start", "sweep",
           "send_votes", "tick", "withdraw", "write"]

logger = logging.getLogger("chash.membership")

T = TypeVar("T")

#: An operation: yields store operations, receives their replies, returns a T.
Exchange = Generator[Operation[Any], Any, T]


def ask(operation: Operation[T]) -> Exchange[T]:
    """Have the store perform ``operation``; its reply (typed by the
    operation: ``yield from ask(ReadRing())`` is a ``StoredRing | NoRing``)."""
    reply: T = yield operation
    return reply


class Steps(Generic[T]):
    """One protocol operation, stepped call by call: what a driver's loop asks.

    ``next_call()`` is the next store operation to perform (an
    ``Operation`` of ``chash.membership.store``), or None once the protocol
    operation returned (its value is then ``result``); the driver has the
    store perform the call
    and reports ``replied(reply)`` or ``failed(error)`` (the error is thrown
    into the operation at its ``yield``), or ``abandon()`` when it stops
    (cancelled, interrupted) mid-call.  ``core`` hears of every call while
    it is under way (``exchange_started``/``exchange_ended``), so that
    status can tell a store that stopped answering.  Drivers are then
    the same few lines, with or without ``await``.
    """

    def __init__(self, exchange: Exchange[T], core: MembershipCore | None = None) -> None:
        self._exchange = exchange
        self._core = core
        self._reply: Any = None
        self._error: BaseException | None = None
        self._ticket: int | None = None
        self._done = False
        self._result: Any = None

    def next_call(self) -> Operation[Any] | None:
        """The next store operation to perform, or None when the operation
        is done."""
        reply, error = self._reply, self._error
        self._reply = self._error = None
        try:
            call = self._exchange.send(reply) if error is None else self._exchange.throw(error)
        except StopIteration as stop:
            self._done, self._result = True, stop.value
            return None
        if self._core is not None:
            self._ticket = self._core.exchange_started()
        return call

    def replied(self, reply: Any) -> None:
        """The store answered the call."""
        self._end_call()
        if self._core is not None:
            self._core.answered()
        self._reply = reply

    def failed(self, error: BaseException) -> None:
        """The call raised ``error``: the operation gets it at its ``yield``."""
        self._end_call()
        self._error = error

    def abandon(self) -> None:
        """The driver stops mid-call: close the operation, nothing more runs."""
        self._end_call()
        self._exchange.close()

    @property
    def result(self) -> T:
        """What the operation returned (only once ``next_call()`` gave None)."""
        if not self._done:
            raise RuntimeError("the operation has not returned yet")
        return cast("T", self._result)

    def _end_call(self) -> None:
        if self._ticket is not None and self._core is not None:
            self._core.exchange_ended(self._ticket)
        self._ticket = None


def pull(core: MembershipCore, *, rollback: bool = False,
         force: bool = False) -> Exchange[MembershipState | None]:
    """Read the ring and apply it.  If the store has none (or a damaged one),
    restore it from the last state applied, or create it from the router
    when told to bootstrap; otherwise note that we wait, and return None."""
    for _ in range(2):
        stored = yield from ask(ReadRing())
        if not isinstance(stored, NoRing):
            state = core.read_state(stored)
            core.sharded = stored.sharded
            if core.apply(state, rollback=rollback, force=force, stamp=stored.digest) or force:
                yield from _stamp(core, state, stored.digest, eager=not force)
            return state
        if not core.may_seed(stored.damage is not None):
            core.note_missing(stored.damage)
            return None
        seeded = yield from ask(core.seed_call(restore=stored.damage is not None))
        if isinstance(seeded, NoRing):  # a bootstrap instance never replaces a damaged ring
            core.note_missing(seeded.damage)
            return None
        core.seeded(seeded.changed, stored.damage)
    return None


def _stamp(core: MembershipCore, state: MembershipState, digest: str | None,
           eager: bool = True) -> Exchange[None]:
    """Record our fingerprint for the version just read and applied, if
    the store has none; if it has one we cannot reproduce, say so once.
    An anchor router's record that lost the race to another instance's is
    replaced by the winner's (read again and adopted).  An anchor router
    that reached the version over several changes at once (it missed some)
    stamps nothing right after applying it (``eager``): an instance that
    made the one change from the previous version stamps it, so that a
    removal moves only the removed node's keys; the periodic check stamps
    a version nobody stamped within an interval.  A version an operator's
    write made from the stamped record is stamped by that write itself
    (``write``), so this rule only covers the versions of health verdicts
    (``Vote``, ``Sweep``) and of writes made from elsewhere."""
    if (state.epoch, state.version) != core.position:
        return  # another thread applied a newer state meanwhile
    if digest is None and eager and core.records and not core.stepped:
        return
    ours = core.fingerprint()
    if digest is None:
        stamped = yield from ask(Stamp(str(state.epoch), state.version, ours))
        if stamped:
            core.holds_stamp((state.epoch, state.version))
        elif core.records:
            yield from pull(core, force=True)
    elif digest != ours:
        core.foreign_digest(digest)
    else:
        core.holds_stamp((state.epoch, state.version))


def _reepoch(core: MembershipCore, seen: tuple[str, int], version: int) -> Exchange[None]:
    """Start a new epoch where the store is at ``seen``, then read it."""
    yield from ask(Reepoch(seen[0], seen[1], secrets.token_hex(8), version))
    yield from pull(core)


def check(core: MembershipCore) -> Exchange[None]:
    """The periodic check: read the ring's position and digest, and pull
    the ring if it moved, went back or holds another ring than ours; else
    repair the router if it was changed behind our back."""
    head = yield from ask(ReadHead())
    if isinstance(head, NoRing):
        yield from pull(core)
        return
    seen = (head.epoch, head.version)
    digest = head.digest
    ours: Position = core.position
    if seen == ours:
        core.repair()
        if digest is None:
            yield from pull(core, force=True)  # stamps it, after a fresh read
        elif digest != core.fingerprint():
            state = yield from pull(core, force=True)
            if core.records and core.fingerprint() == digest:
                return  # an anchor router adopted the record stamped first
            if state is not None and core.fingerprint() != digest \
                    and (state.epoch, state.version) == seen:
                return  # we cannot reproduce it; logged by _stamp
            logger.warning("ring %s: %s holds another ring at version %d than this "
                           "instance applied (it went back, then moved on); following "
                           "it under a new epoch", core.name, core.store_name, seen[1],
                           extra={"ring": core.name})
            yield from _reepoch(core, seen, seen[1] + 1)
        return
    if seen[0] == ours[0] and seen[1] < ours[1]:
        yield from pull(core, rollback=True)
        yield from _reepoch(core, seen, ours[1] + 1)
        return
    yield from pull(core)


def refresh(core: MembershipCore) -> Exchange[MembershipState | None]:
    """``refresh()``: the periodic check, now, so that the router ends equal
    to the stored ring even where the store went back and moved on to the
    version applied with other content (a plain read would keep the ring
    applied at that version); the state applied, or None if the store
    holds no ring this instance may create."""
    yield from check(core)
    return core.state


def write(core: MembershipCore, op: str, node: str, value: str = "",
          force: bool = False, zone: str | None = None) -> Exchange[int]:
    """An operator's change (``zone``: an add's zone, None to keep the
    node's); the local router has it on return.  Returns
    the version it was committed at (the ring's version, if it changed
    nothing).  Raises before writing (KeyError, ValueError,
    RingMissingError, store errors), never after the write committed.

    An anchor router holding the record stamped for the ring's position
    sends the record of the version its change makes with the ``Write``
    (``MembershipCore.stamp_after``); the store stamps it in the same
    step if the ring was still at that position, so no instance ever
    reads that version unstamped (one that missed versions adopts it
    instead of stamping its own mapping).  Otherwise the version is
    stamped as any other (``_stamp``)."""
    if not isinstance(node, str) or not isinstance(value, str):
        raise TypeError("node and reason must be str")
    if zone is not None and not isinstance(zone, str):
        raise TypeError(f"zone must be a str or None, not {type(zone).__name__}")
    for _ in range(2):
        reply = yield from ask(core.write_call(op, node, value, force, zone))
        if isinstance(reply, NoRing):
            if not core.may_seed(reply.damage is not None):
                raise core.missing_error(reply.damage)
            if (yield from pull(core)) is None:
                raise core.missing_error(reply.damage)
            continue
        if isinstance(reply, NoSuchNode):
            raise KeyError(node)
        if isinstance(reply, Refused):
            raise core.refused(reply.in_service, reply.removed, op, node)
        if isinstance(reply, OtherConfig):
            raise core.other_config(reply.config)
        core.committed(reply, op, node)
        if reply.position != core.position:
            try:
                yield from pull(core)
            except Exception as exc:  # committed: the background check catches up
                logger.warning("ring %s: %s %r committed at version %s, but reading it back "
                               "failed (%s: %s); the next check applies it", core.name, op,
                               node, reply.position[1], type(exc).__name__, exc,
                               extra={"ring": core.name})
        return reply.position[1]
    raise RuntimeError(f"ring {core.name!r} vanished from {core.store_name} twice in a row")


def history(core: MembershipCore) -> Exchange[tuple[Change, ...]]:
    """The ring's last changes, oldest first; RingMissingError if the store
    holds no ring (or a damaged one)."""
    changes = yield from ask(History())
    if isinstance(changes, NoRing):
        raise core.missing_error(changes.damage)
    return changes


def send_votes(core: MembershipCore) -> Exchange[None]:
    """Send the health votes waiting in one ``Vote``; they are put back if
    the call fails or is abandoned."""
    votes = core.take_votes()
    if not votes:
        return
    sent = False
    try:
        reply = yield from ask(core.vote_call(votes))
        sent = True
    finally:
        if not sent:
            core.requeue_votes(votes)
    if isinstance(reply, NoRing):
        core.requeue_votes(votes)
        yield from pull(core)
        return
    core.skipped(reply.skipped)
    if reply.position != core.position:
        yield from pull(core)


def sweep(core: MembershipCore, withdraw: bool = False) -> Exchange[None]:
    """Expire old votes (and withdraw ours if asked) in one ``Sweep``."""
    reply = yield from ask(core.sweep_call(withdraw))
    if isinstance(reply, NoRing):
        yield from pull(core)
        return
    core.skipped(reply.skipped)
    if reply.position != core.position:
        yield from pull(core)


def start(core: MembershipCore) -> Exchange[None]:
    """The first sync of ``start()``: an outage is noted (the drivers sync
    once the store answers), a refusal (authentication, permissions) and
    mismatched settings raise."""
    try:
        yield from pull(core)
        core.reconnected()
    except Exception as exc:
        if core.is_refusal(exc) or not core.is_outage(exc):
            raise
        core.outage(exc)


def tick(core: MembershipCore, *, check_due: bool, requested: bool,
         sweep_due: bool) -> Exchange[None]:
    """One round of a driver's worker: check the ring when due or asked,
    send the votes waiting, sweep when due.  Never raises: outages are
    noted, a settings mismatch logged once, anything else logged."""
    try:
        if check_due or requested or not core.connected:
            yield from check(core)
        if core.has_votes():
            yield from send_votes(core)
        if sweep_due:
            yield from sweep(core)
        core.reconnected()
    except ValueError as exc:
        core.reconnected()
        core.mismatch(exc)
    except Exception as exc:
        if core.is_outage(exc) or core.is_refusal(exc):
            core.outage(exc)
        else:
            logger.exception("ring %s: background sync failed", core.name)


def withdraw(core: MembershipCore) -> Exchange[None]:
    """``stop()``'s last call: withdraw our votes; never raises."""
    try:
        yield from sweep(core, withdraw=True)
    except Exception as exc:
        logger.info("could not withdraw the votes of %s from ring %s: %s", core.reporter,
                    core.name, exc, extra={"ring": core.name})
