"""Shared membership in Redis: every gateway instance routes the same way.

With several gateway instances, each one must hold the same ring, or the
same user lands on different backends depending on which gateway took the
request.  ``RedisMembership`` keeps the authoritative ring in Redis (node ->
weight, nodes an operator disabled, nodes the health checks took out) and
keeps the local router in step with it:

* every change runs as one Lua script, so it is atomic, and bumps the
  ring's version, announced on a pub/sub channel;
* each instance applies announcements at once and, because pub/sub drops
  messages while a subscriber is disconnected, also compares versions every
  ``resync_interval`` seconds;
* health checkers on every instance vote through ``mark_down`` /
  ``mark_up`` (the ``chash.health.Membership`` protocol); a node is taken
  out when a quorum of the live reporters votes it down (by default a strict
  majority) and a vote lapses unless renewed within ``vote_ttl``;
* when Redis is unreachable, routing goes on with the last known ring (the
  router is local, lookups never touch Redis), the outage is logged once,
  and the instance catches up when Redis returns, re-creating the ring from
  the last known one if Redis lost it.

``RedisMembership`` runs a worker and a listener thread for synchronous
gateways; ``AsyncRedisMembership`` runs the same protocol as two asyncio
tasks over ``redis.asyncio``.  Both need redis-py: ``pip install
'chash-router[redis]'``.  See docs/membership.md for the design.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import types
from typing import TYPE_CHECKING, Any

from . import _membership_lua as lua
from ._chash import ConsistentHashRouter
from ._membership_state import (
    CHANGED,
    MISSING,
    NO_SUCH_NODE,
    HealthVerdict,
    MembershipCore,
    MembershipState,
    Position,
    parse_snapshot,
    parse_status,
    text,
)

if TYPE_CHECKING:
    import redis
    import redis.asyncio

__all__ = ["AsyncRedisMembership", "HealthVerdict", "MembershipState", "RedisMembership"]

logger = logging.getLogger("chash.membership")

#: How long stop() waits for a thread stuck in a Redis call.
_JOIN_TIMEOUT = 10.0


def _import_redis() -> Any:
    try:
        import redis
        import redis.asyncio
    except ImportError as exc:
        raise ImportError("RedisMembership needs redis-py: pip install 'chash-router[redis]'") from exc
    return redis


def _went_back(seen: Position | None, ours: Position) -> bool:
    """Whether Redis holds an older version of our epoch than we applied."""
    return seen is not None and seen[0] == ours[0] and seen[1] < ours[1]


def _outage_errors(redis_module: Any) -> tuple[type[BaseException], ...]:
    """Errors that mean "Redis is unreachable", as opposed to a bug."""
    exceptions = redis_module.exceptions
    return (exceptions.ConnectionError, exceptions.TimeoutError, OSError)


class _Schedule:
    """When a runner's worker checks the version and sweeps the votes."""

    def __init__(self, core: MembershipCore, now: float) -> None:
        self.check_every = core.resync_interval
        self.sweep_every = core.vote_ttl / 2
        self.next_check = now + self.check_every
        self.next_sweep = now + self.sweep_every

    def timeout(self, now: float) -> float:
        """Seconds until something is due."""
        return max(0.0, min(self.next_check, self.next_sweep) - now)

    def due(self, now: float) -> tuple[bool, bool]:
        """Whether the version check and the sweep are due; reschedules them."""
        check, sweep = now >= self.next_check, now >= self.next_sweep
        if check:
            self.next_check = now + self.check_every
        if sweep:
            self.next_sweep = now + self.sweep_every
        return check, sweep


class _Base:
    """Settings and the non-blocking half of the API, shared by both runners."""

    _core: MembershipCore

    @property
    def router(self) -> ConsistentHashRouter:
        """The local router kept in step with the shared ring."""
        return self._core.router

    @property
    def name(self) -> str:
        """The ring's name in Redis."""
        return self._core.name

    @property
    def reporter(self) -> str:
        """This instance's id when it votes on health."""
        return self._core.reporter

    @property
    def quorum(self) -> str:
        """The quorum rule: 'majority', 'any', 'all' or a count, as a str."""
        return self._core.quorum

    @property
    def vote_ttl(self) -> float:
        """Seconds a health vote counts unless renewed."""
        return self._core.vote_ttl

    @property
    def resync_interval(self) -> float:
        """Seconds between two version checks."""
        return self._core.resync_interval

    @property
    def state(self) -> MembershipState | None:
        """The shared ring as last applied, or None before the first sync."""
        return self._core.state

    @property
    def version(self) -> int:
        """The version of the ring as last applied (0 before the first sync)."""
        return self._core.position[1]

    @property
    def connected(self) -> bool:
        """False while Redis is known to be unreachable."""
        return self._core.connected

    def watched_nodes(self) -> dict[str, float]:
        """Every node to health-check (all but the disabled ones), with its
        weight, from the last state applied; no I/O."""
        return self._core.watched_nodes()

    def mark_down(self, node: str, reason: str) -> None:
        """Vote ``node`` down on behalf of this instance; returns at once.

        The vote is sent in the background with any others waiting; the
        node leaves every ring when the quorum of live reporters votes it
        down.  Unknown nodes are ignored by Redis.
        """
        if not isinstance(node, str) or not isinstance(reason, str):
            raise TypeError("node and reason must be str")
        self._core.queue_vote(node, True, reason)
        self._poke()

    def mark_up(self, node: str) -> None:
        """Vote ``node`` up on behalf of this instance; returns at once."""
        if not isinstance(node, str):
            raise TypeError("node must be str")
        self._core.queue_vote(node, False)
        self._poke()

    def _poke(self) -> None:
        raise NotImplementedError


class RedisMembership(_Base):
    """A ring shared through Redis, for synchronous gateways.

    Arguments:
        router: the local ``chash.ConsistentHashRouter``; every instance
            must build it with the same ``virtual_node_count``, ``hash`` and
            ``layout`` (checked).  Route with it directly: lookups never
            touch Redis.
        client: a ``redis.Redis``.  Give it short ``socket_timeout`` and
            ``socket_connect_timeout`` (about a second) so that an outage
            is noticed quickly.
        name: the ring's name in Redis; rings of different names are
            independent.
        quorum: how health votes combine: ``"majority"`` (more than half of
            the live reporters vote down), ``"any"``, ``"all"`` or an int k
            (at least k, or all live reporters if fewer).  Shared setting.
        vote_ttl: seconds a vote counts unless renewed; at least three
            health-check intervals.  Shared setting.
        resync_interval: seconds between two version checks, the safety
            net for lost announcements.
        reporter: this instance's id in the votes; default host:pid:random.
        prefix: first part of every key name.

    ``start()`` syncs with Redis (creating the ring from the router's nodes
    if Redis has none) and starts the threads; ``stop()`` stops them and
    withdraws this instance's votes.  Operator calls (``add_node``...) work
    with or without ``start()``: they change Redis, then the local router,
    and raise on Redis errors.
    """

    def __init__(
        self,
        router: ConsistentHashRouter,
        client: redis.Redis[Any],
        name: str = "default",
        *,
        quorum: str | int = "majority",
        vote_ttl: float = 30.0,
        resync_interval: float = 5.0,
        reporter: str | None = None,
        prefix: str = "chash",
    ) -> None:
        """See the class docstring; ImportError without redis-py."""
        redis_module = _import_redis()
        if isinstance(client, redis_module.asyncio.Redis):
            raise TypeError("RedisMembership needs a redis.Redis; use AsyncRedisMembership "
                            "with a redis.asyncio.Redis")
        self._core = MembershipCore(router, name, prefix=prefix, quorum=quorum,
                                    vote_ttl=vote_ttl, resync_interval=resync_interval,
                                    reporter=reporter)
        self._client = client
        self._errors = _outage_errors(redis_module)
        self._snapshot = client.register_script(lua.SNAPSHOT)
        self._seed = client.register_script(lua.SEED)
        self._write_script = client.register_script(lua.WRITE)
        self._vote = client.register_script(lua.VOTE)
        self._sweep_script = client.register_script(lua.SWEEP)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._sync_requested = False
        self._vote_lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    @property
    def client(self) -> redis.Redis[Any]:
        """The Redis client."""
        return self._client

    @property
    def running(self) -> bool:
        """Whether the background threads run."""
        return any(thread.is_alive() for thread in self._threads)

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> None:
        """Sync with Redis, then follow it in two daemon threads.

        If Redis is unreachable the router keeps its nodes, the outage is
        logged, and the threads sync once Redis answers.  ValueError if the
        ring in Redis was made with other shared settings.
        """
        if self.running:
            raise RuntimeError("the membership is already running")
        try:
            self._pull()
        except self._errors as exc:
            self._core.outage(exc)
        self._stopping = stopping = threading.Event()
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

        Safe to call twice, or without ``start()``.  A thread blocked in a
        Redis call is waited for up to 10 seconds, then left to end on its
        own (it is a daemon and will do nothing more).
        """
        self._stopping.set()
        self._wake.set()
        threads, self._threads = self._threads, []
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(_JOIN_TIMEOUT)
                if thread.is_alive():
                    logger.warning("%s still waits for Redis; leaving it", thread.name)
        if threads and self._core.connected:
            try:
                self._sweep(withdraw=True)
            except self._errors as exc:
                logger.info("could not withdraw the votes of %s: %s", self.reporter, exc)

    def __enter__(self) -> RedisMembership:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: types.TracebackType | None) -> None:
        self.stop()

    # -- operator API -------------------------------------------------------

    def refresh(self) -> MembershipState:
        """Read the ring from Redis now and apply it; raises on Redis errors."""
        self._pull()
        state = self._core.state
        assert state is not None
        return state

    def flush(self) -> None:
        """Send the health votes waiting, now; raises on Redis errors."""
        self._send_votes()

    def add_node(self, node: str, weight: float = 1.0) -> None:
        """Add ``node`` to the shared ring, or give it a new weight.

        The local router has it when this returns, every other instance a
        moment later.  TypeError / ValueError as the router would raise.
        """
        self._write("add", node, self._core.weight_arg(node, weight))

    def remove_node(self, node: str) -> None:
        """Remove ``node`` from the shared ring, in whatever state it is;
        KeyError if Redis does not hold it."""
        self._write("remove", node)

    def disable_node(self, node: str, reason: str = "disabled by an operator") -> None:
        """Take ``node`` out of service, keeping its weight, until
        ``enable_node``; health checks stop watching it.  KeyError if
        Redis does not hold it."""
        self._write("disable", node, reason)

    def enable_node(self, node: str) -> None:
        """Undo ``disable_node``; KeyError if Redis does not hold the node."""
        self._write("enable", node)

    # -- Redis exchanges ----------------------------------------------------

    def _write(self, op: str, node: str, value: str = "") -> None:
        if not isinstance(node, str) or not isinstance(value, str):
            raise TypeError("node and reason must be str")
        core = self._core
        for _ in range(2):
            status, position = parse_status(
                self._write_script(keys=core.keys, args=core.write_args(op, node, value)))
            if status == MISSING:
                self._pull()
                continue
            if status == NO_SUCH_NODE:
                raise KeyError(node)
            if position != core.position:
                self._pull()
            return
        raise RuntimeError(f"ring {self.name!r} vanished from Redis twice in a row")

    def _pull(self, rollback: bool = False) -> None:
        """Read the ring, creating it if Redis has none, and apply it."""
        core = self._core
        for _ in range(2):
            state = parse_snapshot(self._snapshot(keys=core.keys))
            if state is not None:
                core.apply(state, rollback=rollback)
                return
            status, _ = parse_status(self._seed(keys=core.keys, args=core.seed_args()))
            core.seeded(status == CHANGED)

    def _check(self) -> None:
        """Pull the ring if its version moved; else repair the router."""
        epoch, version = self._client.hmget(self._core.keys[0], ["epoch", "version"])
        position = None if epoch is None or version is None else (text(epoch), int(version))
        if position == self._core.position:
            self._core.repair()
        else:
            self._pull(rollback=_went_back(position, self._core.position))

    def _send_votes(self) -> None:
        core = self._core
        with self._vote_lock:
            votes = core.take_votes()
            if not votes:
                return
            try:
                reply = self._vote(keys=core.keys, args=core.vote_args(votes))
            except self._errors:
                core.requeue_votes(votes)
                raise
        status, position = parse_status(reply)
        if status == MISSING:
            core.requeue_votes(votes)
            self._pull()
        elif position != core.position:
            self._pull()

    def _sweep(self, withdraw: bool = False) -> None:
        core = self._core
        status, position = parse_status(
            self._sweep_script(keys=core.keys, args=core.sweep_args(withdraw)))
        if status == MISSING or position != core.position:
            self._pull()

    # -- threads ------------------------------------------------------------

    def _poke(self) -> None:
        self._wake.set()

    def _request_sync(self) -> None:
        self._sync_requested = True
        self._wake.set()

    def _work(self, stopping: threading.Event) -> None:
        core = self._core
        schedule = _Schedule(core, time.monotonic())
        while True:
            if not (self._sync_requested or (core.has_votes() and core.connected)):
                self._wake.wait(schedule.timeout(time.monotonic()))
            self._wake.clear()
            if stopping.is_set():
                return
            requested, self._sync_requested = self._sync_requested, False
            check, sweep = schedule.due(time.monotonic())
            if not (core.connected or check or requested):
                continue  # in an outage, try again only when a check is due
            try:
                if check or requested or not core.connected:
                    self._check()
                if core.has_votes():
                    self._send_votes()
                if sweep:
                    self._sweep()
                core.reconnected()
            except self._errors as exc:
                core.outage(exc)
            except ValueError as exc:
                core.reconnected()
                core.mismatch(exc)
            except Exception:
                logger.exception("ring %s: background sync failed", core.name)

    def _listen(self, stopping: threading.Event) -> None:
        core = self._core
        poll = min(0.5, core.resync_interval)
        pubsub: Any = None
        try:
            while not stopping.is_set():
                try:
                    if pubsub is None:
                        client: Any = self._client  # redis-py leaves pubsub() untyped
                        pubsub = client.pubsub(ignore_subscribe_messages=True)
                        pubsub.subscribe(core.channel)
                        self._request_sync()  # announcements made before we listened
                    message = pubsub.get_message(ignore_subscribe_messages=True, timeout=poll)
                    if message is not None and message.get("type") == "message" \
                            and core.is_news(message.get("data")):
                        self._request_sync()
                except Exception as exc:
                    if not isinstance(exc, self._errors):
                        logger.exception("ring %s: listener failed; re-subscribing", core.name)
                    _close_quietly(pubsub)
                    pubsub = None
                    self._request_sync()  # the worker notices (and logs) an outage
                    stopping.wait(core.resync_interval)
        finally:
            _close_quietly(pubsub)


def _close_quietly(pubsub: Any) -> None:
    if pubsub is not None:
        try:
            pubsub.close()
        except Exception:  # closing a broken connection
            pass


class AsyncRedisMembership(_Base):
    """A ring shared through Redis, for asyncio gateways.

    Takes the same arguments as ``RedisMembership`` with a
    ``redis.asyncio.Redis`` client, and runs the same protocol as two
    tasks.  ``async with`` (or ``await start()``) syncs and starts them;
    ``await stop()`` (or ``aclose()``) cancels them and withdraws this
    instance's votes.  Operator calls are coroutines: ``await
    add_node(...)``.  ``watched_nodes``, ``mark_down`` and ``mark_up`` are
    plain, non-blocking methods, safe to call from the event loop (as
    ``AsyncHealthChecker`` does) or from other threads.
    """

    def __init__(
        self,
        router: ConsistentHashRouter,
        client: redis.asyncio.Redis[Any],
        name: str = "default",
        *,
        quorum: str | int = "majority",
        vote_ttl: float = 30.0,
        resync_interval: float = 5.0,
        reporter: str | None = None,
        prefix: str = "chash",
    ) -> None:
        """See ``RedisMembership``; ImportError without redis-py."""
        redis_module = _import_redis()
        if isinstance(client, redis_module.Redis):
            raise TypeError("AsyncRedisMembership needs a redis.asyncio.Redis; use "
                            "RedisMembership with a redis.Redis")
        self._core = MembershipCore(router, name, prefix=prefix, quorum=quorum,
                                    vote_ttl=vote_ttl, resync_interval=resync_interval,
                                    reporter=reporter)
        self._client = client
        self._errors = _outage_errors(redis_module)
        self._snapshot = client.register_script(lua.SNAPSHOT)
        self._seed = client.register_script(lua.SEED)
        self._write_script = client.register_script(lua.WRITE)
        self._vote = client.register_script(lua.VOTE)
        self._sweep_script = client.register_script(lua.SWEEP)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._sync_requested = False
        self._closing = False
        self._vote_lock: asyncio.Lock | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def client(self) -> redis.asyncio.Redis[Any]:
        """The Redis client."""
        return self._client

    @property
    def running(self) -> bool:
        """Whether the background tasks run."""
        return any(not task.done() for task in self._tasks)

    # -- lifecycle ----------------------------------------------------------

    async def start(self) -> None:
        """Sync with Redis, then follow it in two tasks; as
        ``RedisMembership.start``."""
        if self.running:
            raise RuntimeError("the membership is already running")
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._closing = False
        try:
            await self._pull()
        except self._errors as exc:
            self._core.outage(exc)
        self._tasks = [
            self._loop.create_task(self._work(), name="chash-membership"),
            self._loop.create_task(self._listen(), name="chash-membership-listener"),
        ]

    async def stop(self) -> None:
        """Cancel the tasks (waiting up to 10 seconds for them) and withdraw
        this instance's health votes.  Safe to call twice, or without
        ``start()``."""
        tasks, self._tasks = self._tasks, []
        self._closing = True
        if self._wake is not None:
            self._wake.set()
        # Cancel until done: a redis.asyncio command can absorb a
        # cancellation (seen with redis-py 8.1), and the worker then only
        # notices _closing at its next wake-up.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _JOIN_TIMEOUT
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
            try:
                await self._sweep(withdraw=True)
            except self._errors as exc:
                logger.info("could not withdraw the votes of %s: %s", self.reporter, exc)

    async def aclose(self) -> None:
        """Same as ``stop()``."""
        await self.stop()

    async def __aenter__(self) -> AsyncRedisMembership:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: types.TracebackType | None) -> None:
        await self.stop()

    # -- operator API -------------------------------------------------------

    async def refresh(self) -> MembershipState:
        """Read the ring from Redis now and apply it; raises on Redis errors."""
        await self._pull()
        state = self._core.state
        assert state is not None
        return state

    async def flush(self) -> None:
        """Send the health votes waiting, now; raises on Redis errors."""
        await self._send_votes()

    async def add_node(self, node: str, weight: float = 1.0) -> None:
        """As ``RedisMembership.add_node``."""
        await self._write("add", node, self._core.weight_arg(node, weight))

    async def remove_node(self, node: str) -> None:
        """As ``RedisMembership.remove_node``."""
        await self._write("remove", node)

    async def disable_node(self, node: str, reason: str = "disabled by an operator") -> None:
        """As ``RedisMembership.disable_node``."""
        await self._write("disable", node, reason)

    async def enable_node(self, node: str) -> None:
        """As ``RedisMembership.enable_node``."""
        await self._write("enable", node)

    # -- Redis exchanges ----------------------------------------------------

    async def _write(self, op: str, node: str, value: str = "") -> None:
        if not isinstance(node, str) or not isinstance(value, str):
            raise TypeError("node and reason must be str")
        core = self._core
        for _ in range(2):
            status, position = parse_status(
                await self._write_script(keys=core.keys, args=core.write_args(op, node, value)))
            if status == MISSING:
                await self._pull()
                continue
            if status == NO_SUCH_NODE:
                raise KeyError(node)
            if position != core.position:
                await self._pull()
            return
        raise RuntimeError(f"ring {self.name!r} vanished from Redis twice in a row")

    async def _pull(self, rollback: bool = False) -> None:
        core = self._core
        for _ in range(2):
            state = parse_snapshot(await self._snapshot(keys=core.keys))
            if state is not None:
                core.apply(state, rollback=rollback)
                return
            status, _ = parse_status(await self._seed(keys=core.keys, args=core.seed_args()))
            core.seeded(status == CHANGED)

    async def _check(self) -> None:
        epoch, version = await self._client.hmget(self._core.keys[0], ["epoch", "version"])
        position = None if epoch is None or version is None else (text(epoch), int(version))
        if position == self._core.position:
            self._core.repair()
        else:
            await self._pull(rollback=_went_back(position, self._core.position))

    async def _send_votes(self) -> None:
        core = self._core
        if self._vote_lock is None:
            self._vote_lock = asyncio.Lock()
        async with self._vote_lock:
            votes = core.take_votes()
            if not votes:
                return
            try:
                reply = await self._vote(keys=core.keys, args=core.vote_args(votes))
            except BaseException as exc:  # cancelled or unreachable: keep them
                if isinstance(exc, (asyncio.CancelledError, *self._errors)):
                    core.requeue_votes(votes)
                raise
        status, position = parse_status(reply)
        if status == MISSING:
            core.requeue_votes(votes)
            await self._pull()
        elif position != core.position:
            await self._pull()

    async def _sweep(self, withdraw: bool = False) -> None:
        core = self._core
        status, position = parse_status(
            await self._sweep_script(keys=core.keys, args=core.sweep_args(withdraw)))
        if status == MISSING or position != core.position:
            await self._pull()

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

    def _request_sync(self) -> None:
        self._sync_requested = True
        if self._wake is not None:
            self._wake.set()

    async def _work(self) -> None:
        core, wake = self._core, self._wake
        assert wake is not None
        loop = asyncio.get_running_loop()
        schedule = _Schedule(core, loop.time())
        while True:
            if not (self._sync_requested or (core.has_votes() and core.connected)):
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow
                # a cancellation that races with the event being set.
                try:
                    async with asyncio.timeout(schedule.timeout(loop.time())):
                        await wake.wait()
                except TimeoutError:
                    pass
            wake.clear()
            if self._closing:
                return
            requested, self._sync_requested = self._sync_requested, False
            check, sweep = schedule.due(loop.time())
            if not (core.connected or check or requested):
                continue
            try:
                if check or requested or not core.connected:
                    await self._check()
                if core.has_votes():
                    await self._send_votes()
                if sweep:
                    await self._sweep()
                core.reconnected()
            except self._errors as exc:
                core.outage(exc)
            except ValueError as exc:
                core.reconnected()
                core.mismatch(exc)
            except Exception:
                logger.exception("ring %s: background sync failed", core.name)

    async def _listen(self) -> None:
        core = self._core
        pubsub: Any = None
        try:
            while not self._closing:
                try:
                    if pubsub is None:
                        client: Any = self._client  # redis-py leaves pubsub() untyped
                        pubsub = client.pubsub(ignore_subscribe_messages=True)
                        await pubsub.subscribe(core.channel)
                        self._request_sync()
                    message = await pubsub.get_message(ignore_subscribe_messages=True,
                                                       timeout=1.0)
                    if message is not None and message.get("type") == "message" \
                            and core.is_news(message.get("data")):
                        self._request_sync()
                except Exception as exc:
                    if not isinstance(exc, self._errors):
                        logger.exception("ring %s: listener failed; re-subscribing", core.name)
                    await _aclose_quietly(pubsub)
                    pubsub = None
                    self._request_sync()
                    await asyncio.sleep(core.resync_interval)
        finally:
            await _aclose_quietly(pubsub)


async def _aclose_quietly(pubsub: Any) -> None:
    if pubsub is not None:
        try:
            await pubsub.aclose()
        except Exception:  # closing a broken connection
            pass
