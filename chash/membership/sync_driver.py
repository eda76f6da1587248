"""The threaded driver: the protocol over a blocking store, in two threads.

``SyncDriver`` performs the store operations the protocol asks for
(``chash.membership.protocol``) on a ``Store`` and runs the worker and
listener decisions of ``chash.membership.loops`` in two daemon threads.
``RedisMembership`` (``chash.membership.redis.membership``) is this driver
over redis-py, ``EtcdMembership`` (``chash.membership.etcd.membership``)
over etcd.
"""

from __future__ import annotations

import logging
import threading
import time
import types
from typing import Self, TypeVar

import chash.membership.protocol as protocol
from chash.membership.core import MembershipCore, SharedRouter
from chash.membership.driver import JOIN_TIMEOUT, MembershipDriver
from chash.membership.loops import Listener, Reaction, Receive, Subscribe, Worker
from chash.membership.protocol import Exchange
from chash.membership.settings import MembershipSettings, SharedConfig
from chash.membership.state import Change, MembershipState, NoRing, RingMissingError
from chash.membership.store import NoPubSub, ReadConfig, Store, Subscription

__all__ = ["SyncDriver", "read_shared_config"]

logger = logging.getLogger("chash.membership")

T = TypeVar("T")


def read_shared_config(store: Store, name: str) -> SharedConfig:
    """The settings the ring ``name`` in ``store`` was made with, for an
    instance that joins it as it is (``RedisMembership.from_store``).

    RingMissingError if the store holds no such ring (or a damaged one);
    ValueError if what it holds there is not a chash ring (keys of another
    kind, settings that name no router); the client's own errors (the
    store's ``outage_errors``) when it cannot be reached; PermissionError
    when it refuses this user."""
    try:
        reply = store.run(ReadConfig())
    except store.auth_errors as exc:
        raise PermissionError(f"{store.name} refused this instance: {exc}") from exc
    except store.outage_errors:
        raise
    except Exception as exc:  # the keys hold something else (WRONGTYPE...)
        raise ValueError(f"{store.name} holds no chash ring {name!r}: {exc}") from exc
    if isinstance(reply, NoRing):
        if reply.damage is None:
            raise RingMissingError(f"{store.name} holds no chash ring {name!r}")
        raise RingMissingError(f"{store.name} holds no sound chash ring {name!r}: "
                               f"{reply.damage}")
    return SharedConfig.parse(reply)


class SyncDriver(MembershipDriver):
    """A shared ring kept in step through ``store``, for synchronous code.

    ``start()`` syncs and starts the threads; ``stop()`` stops them and
    withdraws this instance's votes.  Operator calls (``add_node``...) work
    with or without ``start()``: they change the store, then the local
    router, and raise on store errors, but never after their write
    committed.
    """

    def __init__(self, router: SharedRouter, settings: MembershipSettings,
                 store: Store) -> None:
        """TypeError if ``router`` is not a ``ConsistentHashRouter`` or an
        ``AnchorRouter``."""
        self._core = MembershipCore(router, settings, outage_errors=store.outage_errors,
                                    auth_errors=store.auth_errors, store_name=store.name)
        self._store = store
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._worker = Worker(self._core, time.monotonic())  # made again by start()
        self._vote_lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    @property
    def running(self) -> bool:
        """Whether the background threads run."""
        return any(thread.is_alive() for thread in self._threads)

    def _run(self, exchange: Exchange[T]) -> T:
        """Perform the store operations of one protocol operation; return
        its result."""
        steps = protocol.Steps(exchange, self._core)
        while (call := steps.next_call()) is not None:
            try:
                steps.replied(self._store.run(call))
            except Exception as exc:
                steps.failed(exc)
            except BaseException:
                steps.abandon()
                raise
        return steps.result

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> None:
        """Sync with the store, then follow it in two daemon threads.

        If the store is unreachable the router keeps its nodes, the outage
        is logged, and the threads sync once it answers; if it holds no
        ring and this instance may not create one, it waits for one.
        Raises the store's error if it refuses this instance
        (authentication, permissions), and ValueError if the ring in the
        store was made with other shared settings.
        """
        if self.running:
            raise RuntimeError("the membership is already running")
        self._run(protocol.start(self._core))
        self._stopping = stopping = threading.Event()
        self._worker = Worker(self._core, time.monotonic())
        self._threads = [
            threading.Thread(target=self._work, args=(stopping,),
                             name="chash-membership", daemon=True),
            threading.Thread(target=self._listen, args=(stopping,),
                             name="chash-membership-listener", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop the threads and withdraw this instance's health votes.

        Safe to call twice, or without ``start()``; raises nothing.  A
        thread blocked in a store call is waited for up to 10 seconds, then
        left to end on its own (it is a daemon and will do nothing more).
        """
        self._stopping.set()
        self._wake.set()
        threads, self._threads = self._threads, []
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(JOIN_TIMEOUT)
                if thread.is_alive():
                    logger.warning("%s still waits for the store; leaving it", thread.name)
        if threads and self._core.connected:
            self._run(protocol.withdraw(self._core))

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: types.TracebackType | None) -> None:
        self.stop()

    # -- operator API -------------------------------------------------------

    def refresh(self) -> MembershipState:
        """Read the ring from the store now and apply it: on return the
        router holds the stored ring (also where the store went back and
        then moved on to the version applied with other content).  Raises
        on store errors, and RingMissingError if the store has none this
        instance may create."""
        state = self._run(protocol.refresh(self._core))
        if state is None:
            raise self._core.missing_error(None)
        return state

    def history(self) -> list[Change]:
        """The ring's last changes (at most 100), oldest first, each with
        the version it was committed at.  Raises on store errors, and
        RingMissingError if the store holds no ring."""
        return list(self._run(protocol.history(self._core)))

    def flush(self) -> None:
        """Send the health votes waiting, now; raises on store errors."""
        with self._vote_lock:
            self._run(protocol.send_votes(self._core))

    def add_node(self, node: str, weight: float = 1.0, *, zone: str | None = None) -> int:
        """Add ``node`` to the shared ring, or give it a new weight; returns
        the version the change was committed at (as every operator call
        does; the ring's version if it changed nothing).

        ``zone`` sets the node's zone in the shared ring (``state.zones``,
        which gateways with a zone of their own prefer; an empty str
        clears it); None keeps the zone an existing node has, and adds a
        new node in no zone.  The weight and the zone change in one step.

        The local router has it when this returns, every other instance a
        moment later.  TypeError / ValueError as the router would raise
        (and for a zone that is not a str); RingMissingError if the store
        holds no ring and this instance may not create one (see
        ``bootstrap``).
        """
        weight_arg = self._core.weight_arg(node, weight)
        return self._run(protocol.write(self._core, "add", node, weight_arg,
                                        zone=self._core.zone_arg(zone)))

    def remove_node(self, node: str, *, force: bool = False) -> int:
        """Remove ``node`` from the shared ring, in whatever state it is;
        KeyError if the store does not hold it.  ValueError (logged) if that
        would take more than half of the nodes in service out, unless
        ``force``."""
        return self._run(protocol.write(self._core, "remove", node, force=force))

    def disable_node(self, node: str, reason: str = "disabled by an operator", *,
                     force: bool = False) -> int:
        """Take ``node`` out of service, keeping its weight, until
        ``enable_node``; health checks stop watching it.  KeyError if the
        store does not hold it; ValueError as ``remove_node``."""
        return self._run(protocol.write(self._core, "disable", node, reason, force=force))

    def enable_node(self, node: str) -> int:
        """Undo ``disable_node``; KeyError if the store does not hold the node."""
        return self._run(protocol.write(self._core, "enable", node))

    # -- threads ------------------------------------------------------------

    def _poke(self) -> None:
        self._wake.set()

    def _work(self, stopping: threading.Event) -> None:
        worker = self._worker
        while True:
            timeout = worker.wait_for(time.monotonic())
            if timeout is not None:
                self._wake.wait(timeout)
            self._wake.clear()
            if stopping.is_set():
                return
            todo = worker.round(time.monotonic())
            if todo is not None:
                with self._vote_lock:
                    self._run(protocol.tick(self._core, check_due=todo.check_due,
                                            requested=todo.requested, sweep_due=todo.sweep_due))

    def _listen(self, stopping: threading.Event) -> None:
        listener = Listener(self._core)
        subscription: Subscription | None = None
        try:
            while not stopping.is_set():
                step = listener.next_step()
                try:
                    if isinstance(step, Subscribe):
                        subscription = self._store.subscribe(step.sharded)
                        reaction = listener.subscribed()
                    elif isinstance(step, Receive):
                        assert subscription is not None
                        reaction = listener.received(subscription.receive(step.timeout))
                    else:
                        reaction = step
                except NoPubSub as exc:
                    reaction = listener.unavailable(str(exc))
                except Exception as exc:
                    reaction = listener.failed(exc)
                subscription = self._react(reaction, subscription, stopping)
        finally:
            if subscription is not None:
                subscription.close()

    def _react(self, reaction: Reaction, subscription: Subscription | None,
               stopping: threading.Event) -> Subscription | None:
        """Carry out a listener's reaction; the subscription left."""
        if reaction.close and subscription is not None:
            subscription.close()
            subscription = None
        if reaction.sync:
            self._worker.request_sync()
            self._wake.set()
        if reaction.wait:
            stopping.wait(reaction.wait)
        return subscription
