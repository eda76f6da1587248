"""The asyncio driver: the protocol over an asyncio store, in two tasks.

``AsyncDriver`` performs the store operations the protocol asks for
(``chash.membership.protocol``) on an ``AsyncStore`` and runs the worker
and listener decisions of ``chash.membership.loops`` in two tasks.
``AsyncRedisMembership`` (``chash.membership.redis.membership``) is this
driver over ``redis.asyncio``, ``AsyncEtcdMembership``
(``chash.membership.etcd.membership``) over etcd.
"""

from __future__ import annotations

import asyncio
import logging
import types
from typing import Self, TypeVar

import chash.membership.protocol as protocol
from chash.membership.core import MembershipCore, SharedRouter
from chash.membership.driver import JOIN_TIMEOUT, MembershipDriver
from chash.membership.loops import Listener, Reaction, Receive, Subscribe, Worker
from chash.membership.protocol import Exchange
from chash.membership.settings import MembershipSettings
from chash.membership.state import Change, MembershipState
from chash.membership.store import AsyncStore, AsyncSubscription, NoPubSub

__all__ = ["AsyncDriver"]

logger = logging.getLogger("chash.membership")

T = TypeVar("T")


class AsyncDriver(MembershipDriver):
    """A shared ring kept in step through ``store``, for asyncio code.

    ``async with`` (or ``await start()``) syncs and starts the tasks;
    ``await stop()`` (or ``aclose()``) cancels them and withdraws this
    instance's votes.  Operator calls are coroutines:
    ``await add_node(...)``.  ``watched_nodes``, ``mark_down`` and
    ``mark_up`` are plain, non-blocking methods, safe to call from the
    event loop (as ``AsyncHealthChecker`` does) or from other threads.
    """

    def __init__(self, router: SharedRouter, settings: MembershipSettings,
                 store: AsyncStore) -> None:
        """TypeError if ``router`` is not a ``ConsistentHashRouter`` or an
        ``AnchorRouter``."""
        self._core = MembershipCore(router, settings, outage_errors=store.outage_errors,
                                    auth_errors=store.auth_errors, store_name=store.name)
        self._store = store
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._worker = Worker(self._core, 0.0)  # made again by start(), on the loop's clock
        self._closing = False
        self._vote_lock: asyncio.Lock | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def running(self) -> bool:
        """Whether the background tasks run."""
        return any(not task.done() for task in self._tasks)

    async def _run(self, exchange: Exchange[T]) -> T:
        """Perform the store operations of one protocol operation; return
        its result."""
        steps = protocol.Steps(exchange, self._core)
        while (call := steps.next_call()) is not None:
            try:
                steps.replied(await self._store.run(call))
            except Exception as exc:
                steps.failed(exc)
            except BaseException:  # cancelled: the operation is abandoned
                steps.abandon()
                raise
        return steps.result

    def _lock(self) -> asyncio.Lock:
        if self._vote_lock is None:
            self._vote_lock = asyncio.Lock()
        return self._vote_lock

    # -- lifecycle ----------------------------------------------------------

    async def start(self) -> None:
        """Sync with the store, then follow it in two tasks; as
        ``RedisMembership.start``."""
        if self.running:
            raise RuntimeError("the membership is already running")
        self._loop = loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._closing = False
        await self._run(protocol.start(self._core))
        self._worker = Worker(self._core, loop.time())
        self._tasks = [
            loop.create_task(self._work(), name="chash-membership"),
            loop.create_task(self._listen(), name="chash-membership-listener"),
        ]

    async def stop(self) -> None:
        """Cancel the tasks (waiting up to 10 seconds for them) and withdraw
        this instance's health votes.  Safe to call twice, or without
        ``start()``; raises nothing."""
        tasks, self._tasks = self._tasks, []
        self._closing = True
        if self._wake is not None:
            self._wake.set()
        # Cancel until done: a redis.asyncio command can absorb a
        # cancellation (seen with redis-py 8.1), and the worker then only
        # notices _closing at its next wake-up.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + JOIN_TIMEOUT
        pending = set(tasks)
        while pending and loop.time() < deadline:
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.1)
        for task in tasks:
            if not task.done():
                logger.warning("%s did not stop; leaving it", task.get_name())
            elif not task.cancelled() and task.exception() is not None:
                logger.error("%s failed", task.get_name(), exc_info=task.exception())
        if tasks and self._core.connected:
            await self._run(protocol.withdraw(self._core))

    async def aclose(self) -> None:
        """Same as ``stop()``."""
        await self.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: types.TracebackType | None) -> None:
        await self.stop()

    # -- operator API -------------------------------------------------------

    async def refresh(self) -> MembershipState:
        """As ``RedisMembership.refresh``."""
        state = await self._run(protocol.refresh(self._core))
        if state is None:
            raise self._core.missing_error(None)
        return state

    async def flush(self) -> None:
        """Send the health votes waiting, now; raises on store errors."""
        async with self._lock():
            await self._run(protocol.send_votes(self._core))

    async def history(self) -> list[Change]:
        """As ``RedisMembership.history``."""
        return list(await self._run(protocol.history(self._core)))

    async def add_node(self, node: str, weight: float = 1.0, *, zone: str | None = None) -> int:
        """As ``RedisMembership.add_node``."""
        weight_arg = self._core.weight_arg(node, weight)
        return await self._run(protocol.write(self._core, "add", node, weight_arg,
                                              zone=self._core.zone_arg(zone)))

    async def remove_node(self, node: str, *, force: bool = False) -> int:
        """As ``RedisMembership.remove_node``."""
        return await self._run(protocol.write(self._core, "remove", node, force=force))

    async def disable_node(self, node: str, reason: str = "disabled by an operator", *,
                           force: bool = False) -> int:
        """As ``RedisMembership.disable_node``."""
        return await self._run(protocol.write(self._core, "disable", node, reason, force=force))

    async def enable_node(self, node: str) -> int:
        """As ``RedisMembership.enable_node``."""
        return await self._run(protocol.write(self._core, "enable", node))

    # -- tasks --------------------------------------------------------------

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            wake.set()
        else:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop is closed
                pass

    async def _work(self) -> None:
        worker, wake = self._worker, self._wake
        assert wake is not None
        loop = asyncio.get_running_loop()
        while True:
            timeout = worker.wait_for(loop.time())
            if timeout is not None:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow
                # a cancellation that races with the event being set.
                try:
                    async with asyncio.timeout(timeout):
                        await wake.wait()
                except TimeoutError:
                    pass
            wake.clear()
            if self._closing:
                return
            todo = worker.round(loop.time())
            if todo is not None:
                async with self._lock():
                    await self._run(protocol.tick(self._core, check_due=todo.check_due,
                                                  requested=todo.requested,
                                                  sweep_due=todo.sweep_due))

    async def _listen(self) -> None:
        listener = Listener(self._core)
        subscription: AsyncSubscription | None = None
        try:
            while not self._closing:
                step = listener.next_step()
                try:
                    if isinstance(step, Subscribe):
                        subscription = await self._store.subscribe(step.sharded)
                        reaction = listener.subscribed()
                    elif isinstance(step, Receive):
                        assert subscription is not None
                        reaction = listener.received(await subscription.receive(step.timeout))
                    else:
                        reaction = step
                except NoPubSub as exc:
                    reaction = listener.unavailable(str(exc))
                except Exception as exc:
                    reaction = listener.failed(exc)
                subscription = await self._react(reaction, subscription)
        finally:
            if subscription is not None:
                await subscription.close()

    async def _react(self, reaction: Reaction,
                     subscription: AsyncSubscription | None) -> AsyncSubscription | None:
        """Carry out a listener's reaction; the subscription left."""
        if reaction.close and subscription is not None:
            await subscription.close()
            subscription = None
        if reaction.sync:
            self._worker.request_sync()
            if self._wake is not None:
                self._wake.set()
        if reaction.wait:
            await asyncio.sleep(reaction.wait)
        return subscription
