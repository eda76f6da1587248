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
* agreement is checked on content: each version carries the ring's
  ``router.fingerprint()``, compared at every check;
* when Redis is unreachable, routing goes on with the last known ring (the
  router is local, lookups never touch Redis), the outage is logged when it
  begins and ends, and the instance catches up when Redis returns,
  restoring the ring from the last known one if Redis lost it.  Only an
  instance that synced (or one told ``bootstrap=True``) creates a ring.

The protocol is written once, without I/O (``chash._membership_protocol``
yields the scripts it needs run and receives their replies):
``RedisMembership`` drives it with a worker and a listener thread for
synchronous gateways, ``AsyncRedisMembership`` with two asyncio tasks over
``redis.asyncio``.  Both need redis-py: ``pip install
'chash-router[redis]'``.  See docs/membership.md for the design.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import types
from typing import TYPE_CHECKING, Any, TypeVar

from . import _membership_lua as lua
from . import _membership_protocol as protocol
from ._chash import ConsistentHashRouter
from ._membership_protocol import Exchange
from ._membership_state import (
    HealthVerdict,
    MembershipCore,
    MembershipState,
    RingMissingError,
)

if TYPE_CHECKING:
    import redis
    import redis.asyncio

__all__ = ["AsyncRedisMembership", "HealthVerdict", "MembershipState", "RedisMembership",
           "RingMissingError"]

logger = logging.getLogger("chash.membership")

T = TypeVar("T")

#: How long stop() waits for a thread stuck in a Redis call.
_JOIN_TIMEOUT = 10.0


def _import_redis() -> Any:
    try:
        import redis
        import redis.asyncio
    except ImportError as exc:
        raise ImportError("RedisMembership needs redis-py: pip install 'chash-router[redis]'") from exc
    return redis


def _make_core(redis_module: Any, router: ConsistentHashRouter, name: str, *,
               quorum: str | int, vote_ttl: float, resync_interval: float,
               reporter: str | None, prefix: str, bootstrap: bool) -> MembershipCore:
    exceptions = redis_module.exceptions
    # AuthenticationError is a ConnectionError in redis-py: listed apart so
    # that start() raises it instead of waiting for an outage to end.
    auth = tuple(getattr(exceptions, name) for name in
                 ("AuthenticationError", "AuthorizationError", "NoPermissionError",
                  "AuthenticationWrongNumberOfArgsError") if hasattr(exceptions, name))
    outage = (exceptions.ConnectionError, exceptions.TimeoutError, OSError,
              *(getattr(exceptions, name) for name in
                ("ClusterDownError", "TryAgainError", "ReadOnlyError", "MasterDownError",
                 "SlotNotCoveredError", "RedisClusterException")
                if hasattr(exceptions, name)))
    return MembershipCore(router, name, prefix=prefix, quorum=quorum, vote_ttl=vote_ttl,
                          resync_interval=resync_interval, reporter=reporter,
                          bootstrap=bootstrap, outage_errors=outage, auth_errors=auth)


#: What a listener does with a pub/sub message.
_SYNC, _RESUBSCRIBE = "sync", "resubscribe"


def _on_message(core: MembershipCore, message: Any) -> str | None:
    """An announcement asks for a sync; losing the subscription (a cluster
    slot moved away, the server dropped us) for a new one."""
    if not isinstance(message, dict):
        return None
    kind = message.get("type")
    kind = kind.decode() if isinstance(kind, bytes) else kind
    if kind in ("message", "smessage"):
        return _SYNC if core.is_news(message.get("data")) else None
    if kind in ("unsubscribe", "sunsubscribe"):
        return _RESUBSCRIBE
    return None


class _Schedule:
    """When a driver's worker checks the ring and sweeps the votes."""

    def __init__(self, core: MembershipCore, now: float) -> None:
        self.check_every = core.resync_interval
        self.sweep_every = core.vote_ttl / 2
        self.next_check = now + self.check_every
        self.next_sweep = now + self.sweep_every

    def timeout(self, now: float) -> float:
        """Seconds until something is due."""
        return max(0.0, min(self.next_check, self.next_sweep) - now)

    def due(self, now: float) -> tuple[bool, bool]:
        """Whether the check and the sweep are due; reschedules them."""
        check, sweep = now >= self.next_check, now >= self.next_sweep
        if check:
            self.next_check = now + self.check_every
        if sweep:
            self.next_sweep = now + self.sweep_every
        return check, sweep


class _Base:
    """Settings and the non-blocking half of the API, shared by both drivers."""

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
        """Seconds between two checks of the ring."""
        return self._core.resync_interval

    @property
    def bootstrap(self) -> bool:
        """Whether this instance may create the ring before it ever synced."""
        return self._core.bootstrap

    @property
    def state(self) -> MembershipState | None:
        """The shared ring as last applied; None before the first sync."""
        return self._core.state

    @property
    def version(self) -> int:
        """The version of the ring as last applied (0 before the first sync)."""
        return self._core.position[1]

    @property
    def connected(self) -> bool:
        """False while Redis is known to be unreachable or refuses this
        instance, and while an exchange has waited for an answer for longer
        than twice ``resync_interval`` (at least 2 s)."""
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
        client: a ``redis.Redis`` (also from a Sentinel's ``master_for``)
            or a ``redis.cluster.RedisCluster``.  Give it short
            ``socket_timeout`` and ``socket_connect_timeout`` (about a
            second) and few retries, so that an outage is noticed quickly
            (docs/membership.md shows settings with measured figures).
        name: the ring's name in Redis; rings of different names are
            independent.
        quorum: how health votes combine: ``"majority"`` (more than half of
            the live reporters vote down), ``"any"``, ``"all"`` or an int k
            (at least k, or all live reporters if fewer).  Shared setting.
        vote_ttl: seconds a vote counts unless renewed; at least three
            health-check intervals.  Shared setting.
        resync_interval: seconds between two checks of the ring (version
            and content digest), the safety net for lost announcements.
        reporter: this instance's id in the votes; default host:pid:random.
        prefix: first part of every key name.
        bootstrap: whether this instance may create the ring before it ever
            synced (from the router's nodes).  Leave it False on gateways
            that join an existing ring: if Redis lost the ring, the
            instances that hold it restore it, and a fresh one must not
            replace it with its own (maybe empty) router.

    ``start()`` syncs with Redis and starts the threads; ``stop()`` stops
    them and withdraws this instance's votes.  Operator calls
    (``add_node``...) work with or without ``start()``: they change Redis,
    then the local router, and raise on Redis errors, but never after their
    write committed.
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
        bootstrap: bool = False,
    ) -> None:
        """See the class docstring; ImportError without redis-py."""
        redis_module = _import_redis()
        if isinstance(client, redis_module.asyncio.Redis):
            raise TypeError("RedisMembership needs a redis.Redis; use AsyncRedisMembership "
                            "with a redis.asyncio.Redis")
        self._core = _make_core(redis_module, router, name, quorum=quorum, vote_ttl=vote_ttl,
                                resync_interval=resync_interval, reporter=reporter,
                                prefix=prefix, bootstrap=bootstrap)
        self._client = client
        self._scripts = {script: client.register_script(source)
                         for script, source in lua.SCRIPTS.items()}
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

    def _run(self, exchange: Exchange[T]) -> T:
        """Perform the calls of one protocol operation; return its result."""
        core = self._core
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                call = exchange.send(reply) if error is None else exchange.throw(error)
            except StopIteration as stop:
                result: T = stop.value
                return result
            reply, error = None, None
            ticket = core.exchange_started()
            try:
                reply = self._scripts[call.script](keys=core.keys, args=list(call.args))
            except Exception as exc:
                error = exc
            except BaseException:
                exchange.close()
                raise
            finally:
                core.exchange_ended(ticket)

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> None:
        """Sync with Redis, then follow it in two daemon threads.

        If Redis is unreachable the router keeps its nodes, the outage is
        logged, and the threads sync once Redis answers; if it holds no
        ring and this instance may not create one, it waits for one.
        Raises the Redis error if Redis refuses this instance
        (authentication, permissions), and ValueError if the ring in Redis
        was made with other shared settings.
        """
        if self.running:
            raise RuntimeError("the membership is already running")
        self._run(protocol.start(self._core))
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

        Safe to call twice, or without ``start()``; raises nothing.  A
        thread blocked in a Redis call is waited for up to 10 seconds, then
        left to end on its own (it is a daemon and will do nothing more).
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
            self._run(protocol.withdraw(self._core))

    def __enter__(self) -> RedisMembership:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: types.TracebackType | None) -> None:
        self.stop()

    # -- operator API -------------------------------------------------------

    def refresh(self) -> MembershipState:
        """Read the ring from Redis now and apply it; raises on Redis errors,
        and RingMissingError if Redis has none this instance may create."""
        state = self._run(protocol.pull(self._core))
        if state is None:
            raise self._core.missing_error(None)
        return state

    def flush(self) -> None:
        """Send the health votes waiting, now; raises on Redis errors."""
        with self._vote_lock:
            self._run(protocol.send_votes(self._core))

    def add_node(self, node: str, weight: float = 1.0) -> None:
        """Add ``node`` to the shared ring, or give it a new weight.

        The local router has it when this returns, every other instance a
        moment later.  TypeError / ValueError as the router would raise;
        RingMissingError if Redis holds no ring and this instance may not
        create one (see ``bootstrap``).
        """
        self._run(protocol.write(self._core, "add", node, self._core.weight_arg(node, weight)))

    def remove_node(self, node: str, *, force: bool = False) -> None:
        """Remove ``node`` from the shared ring, in whatever state it is;
        KeyError if Redis does not hold it.  ValueError (logged) if that
        would take more than half of the nodes in service out, unless
        ``force``."""
        self._run(protocol.write(self._core, "remove", node, force=force))

    def disable_node(self, node: str, reason: str = "disabled by an operator", *,
                     force: bool = False) -> None:
        """Take ``node`` out of service, keeping its weight, until
        ``enable_node``; health checks stop watching it.  KeyError if
        Redis does not hold it; ValueError as ``remove_node``."""
        self._run(protocol.write(self._core, "disable", node, reason, force=force))

    def enable_node(self, node: str) -> None:
        """Undo ``disable_node``; KeyError if Redis does not hold the node."""
        self._run(protocol.write(self._core, "enable", node))

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
            with self._vote_lock:
                self._run(protocol.tick(core, check_due=check, requested=requested,
                                        sweep_due=sweep))

    def _listen(self, stopping: threading.Event) -> None:
        core = self._core
        poll = min(0.5, core.resync_interval)
        pubsub: Any = None
        sharded = False
        try:
            while not stopping.is_set():
                core.watch()
                try:
                    if pubsub is not None and core.sharded is not None \
                            and core.sharded != sharded:
                        _close_quietly(pubsub)  # the server changed: subscribe anew
                        pubsub = None
                    if pubsub is None:
                        if core.sharded is None:  # not synced yet: the worker finds out
                            stopping.wait(poll)
                            continue
                        sharded = core.sharded
                        subscribe = _subscriber(core, self._client, sharded)
                        if subscribe is None:  # this redis-py cannot: the checks carry on
                            stopping.wait(core.resync_interval)
                            continue
                        pubsub, subscribe = subscribe
                        subscribe(core.channel)
                        self._request_sync()  # announcements made before we listened
                    if sharded and hasattr(pubsub, "get_sharded_message"):
                        message = pubsub.get_sharded_message(timeout=poll)
                    else:
                        message = pubsub.get_message(timeout=poll)
                    action = _on_message(core, message)
                    if action == _RESUBSCRIBE:
                        _close_quietly(pubsub)
                        pubsub = None
                    if action is not None:
                        self._request_sync()
                except Exception as exc:
                    if not core.is_outage(exc):
                        logger.exception("ring %s: listener failed; re-subscribing", core.name)
                    _close_quietly(pubsub)
                    pubsub = None
                    self._request_sync()  # the worker notices (and logs) an outage
                    stopping.wait(core.resync_interval)
        finally:
            _close_quietly(pubsub)


def _subscriber(core: MembershipCore, client: Any, sharded: bool) -> tuple[Any, Any] | None:
    """A new pub/sub object and its (s)subscribe method, or None (logged
    once) if this client has none: redis.asyncio has SSUBSCRIBE only from
    redis-py 8, and its cluster client pub/sub only lately.  The periodic
    check then carries every change, one ``resync_interval`` later."""
    pubsub = client.pubsub() if hasattr(client, "pubsub") else None
    method = getattr(pubsub, "ssubscribe" if sharded else "subscribe", None)
    if method is None:
        core.cannot_listen(f"{type(client).__module__}.{type(client).__name__} offers no "
                           f"{'sharded ' if sharded else ''}pub/sub")
        _close_quietly_any(pubsub)
        return None
    return pubsub, method


def _close_quietly_any(pubsub: Any) -> None:
    close = getattr(pubsub, "close", None)
    if close is not None and not asyncio.iscoroutinefunction(close):
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
    ``redis.asyncio.Redis`` (or ``redis.asyncio.cluster.RedisCluster``)
    client, and drives the same protocol with two tasks.  ``async with``
    (or ``await start()``) syncs and starts them; ``await stop()`` (or
    ``aclose()``) cancels them and withdraws this instance's votes.
    Operator calls are coroutines: ``await add_node(...)``.
    ``watched_nodes``, ``mark_down`` and ``mark_up`` are plain, non-blocking
    methods, safe to call from the event loop (as ``AsyncHealthChecker``
    does) or from other threads.
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
        bootstrap: bool = False,
    ) -> None:
        """See ``RedisMembership``; ImportError without redis-py."""
        redis_module = _import_redis()
        if isinstance(client, redis_module.Redis):
            raise TypeError("AsyncRedisMembership needs a redis.asyncio.Redis; use "
                            "RedisMembership with a redis.Redis")
        self._core = _make_core(redis_module, router, name, quorum=quorum, vote_ttl=vote_ttl,
                                resync_interval=resync_interval, reporter=reporter,
                                prefix=prefix, bootstrap=bootstrap)
        self._client = client
        self._scripts = {script: client.register_script(source)
                         for script, source in lua.SCRIPTS.items()}
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

    async def _run(self, exchange: Exchange[T]) -> T:
        """Perform the calls of one protocol operation; return its result."""
        core = self._core
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                call = exchange.send(reply) if error is None else exchange.throw(error)
            except StopIteration as stop:
                result: T = stop.value
                return result
            reply, error = None, None
            ticket = core.exchange_started()
            try:
                reply = await self._scripts[call.script](keys=core.keys, args=list(call.args))
            except Exception as exc:
                error = exc
            except BaseException:  # cancelled: the operation is abandoned
                exchange.close()
                raise
            finally:
                core.exchange_ended(ticket)

    def _lock(self) -> asyncio.Lock:
        if self._vote_lock is None:
            self._vote_lock = asyncio.Lock()
        return self._vote_lock

    # -- lifecycle ----------------------------------------------------------

    async def start(self) -> None:
        """Sync with Redis, then follow it in two tasks; as
        ``RedisMembership.start``."""
        if self.running:
            raise RuntimeError("the membership is already running")
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._closing = False
        await self._run(protocol.start(self._core))
        self._tasks = [
            self._loop.create_task(self._work(), name="chash-membership"),
            self._loop.create_task(self._listen(), name="chash-membership-listener"),
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
            await self._run(protocol.withdraw(self._core))

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
        """As ``RedisMembership.refresh``."""
        state = await self._run(protocol.pull(self._core))
        if state is None:
            raise self._core.missing_error(None)
        return state

    async def flush(self) -> None:
        """Send the health votes waiting, now; raises on Redis errors."""
        async with self._lock():
            await self._run(protocol.send_votes(self._core))

    async def add_node(self, node: str, weight: float = 1.0) -> None:
        """As ``RedisMembership.add_node``."""
        await self._run(protocol.write(self._core, "add", node,
                                       self._core.weight_arg(node, weight)))

    async def remove_node(self, node: str, *, force: bool = False) -> None:
        """As ``RedisMembership.remove_node``."""
        await self._run(protocol.write(self._core, "remove", node, force=force))

    async def disable_node(self, node: str, reason: str = "disabled by an operator", *,
                           force: bool = False) -> None:
        """As ``RedisMembership.disable_node``."""
        await self._run(protocol.write(self._core, "disable", node, reason, force=force))

    async def enable_node(self, node: str) -> None:
        """As ``RedisMembership.enable_node``."""
        await self._run(protocol.write(self._core, "enable", node))

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
            async with self._lock():
                await self._run(protocol.tick(core, check_due=check, requested=requested,
                                              sweep_due=sweep))

    async def _listen(self) -> None:
        core = self._core
        poll = min(0.5, core.resync_interval)
        pubsub: Any = None
        sharded = False
        try:
            while not self._closing:
                core.watch()
                try:
                    if pubsub is not None and core.sharded is not None \
                            and core.sharded != sharded:
                        await _aclose_quietly(pubsub)
                        pubsub = None
                    if pubsub is None:
                        if core.sharded is None:
                            await asyncio.sleep(poll)
                            continue
                        sharded = core.sharded
                        subscribe = _subscriber(core, self._client, sharded)
                        if subscribe is None:
                            await asyncio.sleep(core.resync_interval)
                            continue
                        pubsub, subscribe = subscribe
                        await subscribe(core.channel)
                        self._request_sync()
                    if sharded and hasattr(pubsub, "get_sharded_message"):
                        message = await pubsub.get_sharded_message(timeout=poll)
                    else:
                        message = await pubsub.get_message(timeout=poll)
                    action = _on_message(core, message)
                    if action == _RESUBSCRIBE:
                        await _aclose_quietly(pubsub)
                        pubsub = None
                    if action is not None:
                        self._request_sync()
                except Exception as exc:
                    if not core.is_outage(exc):
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
