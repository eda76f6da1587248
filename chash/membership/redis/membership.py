"""The Redis drivers: ``RedisMembership`` and ``AsyncRedisMembership``.

Each is a driver of ``chash.membership`` (``SyncDriver``, ``AsyncDriver``)
over the Redis store (``chash.membership.redis.store``), built from the
keywords users pass: the settings become one ``MembershipSettings``.
Both need redis-py: ``pip install 'chash-router[redis]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from chash.membership.async_driver import AsyncDriver
from chash.membership.core import SharedRouter, check_router
from chash.membership.redis.store import AsyncRedisStore, RedisStore, async_client, sync_client
from chash.membership.settings import MembershipSettings
from chash.membership.sync_driver import SyncDriver, read_shared_config

if TYPE_CHECKING:
    import redis
    import redis.asyncio

__all__ = ["AsyncRedisMembership", "RedisMembership"]


class RedisMembership(SyncDriver):
    """A ring shared through Redis, for synchronous gateways.

    Arguments:
        router: the local ``chash.ConsistentHashRouter`` (or ``chash.AnchorRouter``); every instance
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
        min_replicas: how many replicas must acknowledge an operator's
            change within ``replica_timeout`` seconds (Redis ``WAIT``) for
            it to be reported committed; otherwise the call raises
            ``NotReplicatedError`` (an isolated primary can accept a write
            that a failover then discards).  None: 1 if the primary shows
            a replica connected when a change is made, or showed one to
            this instance before, else 0.  Not with a
            cluster client.  Keep the client's ``socket_timeout`` above
            ``replica_timeout``.

    ``start()`` syncs with Redis and starts the threads; ``stop()`` stops
    them and withdraws this instance's votes.  Operator calls
    (``add_node``...) work with or without ``start()``: they change Redis,
    then the local router, and raise on Redis errors, but never after their
    write committed (with ``min_replicas``, committed means acknowledged by
    that many replicas).
    """

    def __init__(
        self,
        router: SharedRouter,
        client: redis.Redis,
        name: str = "default",
        *,
        quorum: str | int = "majority",
        vote_ttl: float = 30.0,
        resync_interval: float = 5.0,
        reporter: str | None = None,
        prefix: str = "chash",
        bootstrap: bool = False,
        min_replicas: int | None = None,
        replica_timeout: float = 0.5,
    ) -> None:
        """See the class docstring; ImportError without redis-py."""
        sync_client(client)
        check_router(router)
        settings = MembershipSettings(name=name, quorum=quorum, vote_ttl=vote_ttl,
                                      resync_interval=resync_interval, reporter=reporter,
                                      prefix=prefix, bootstrap=bootstrap)
        self._client: redis.Redis = client
        store = RedisStore(client, settings, min_replicas=min_replicas,
                      replica_timeout=replica_timeout)
        super().__init__(router, settings, store)

    @classmethod
    def from_store(cls, client: redis.Redis, name: str = "default", *,
                   resync_interval: float = 5.0, reporter: str | None = None,
                   prefix: str = "chash", min_replicas: int | None = None,
                   replica_timeout: float = 0.5) -> Self:
        """A membership of the ring ``name`` as Redis holds it, for a tool
        that did not make it (``chash ring``): its router (new, empty) and
        its quorum and vote TTL are those the ring was made with, read
        from Redis.  Not started; ``refresh()`` syncs it.

        RingMissingError if Redis holds no such ring (or a damaged one);
        ValueError if the keys hold something else, or the ring's router
        cannot be made here (a hash function of the application's own);
        PermissionError if Redis refuses this user; redis-py's errors if
        it cannot be reached."""
        sync_client(client)
        settings = MembershipSettings(name=name, prefix=prefix)
        shared = read_shared_config(RedisStore(client, settings), name)
        return cls(shared.router(), client, name, quorum=shared.quorum_arg(),
                   vote_ttl=shared.vote_ttl, resync_interval=resync_interval,
                   reporter=reporter, prefix=prefix, min_replicas=min_replicas,
                   replica_timeout=replica_timeout)

    @property
    def client(self) -> redis.Redis:
        """The Redis client."""
        return self._client


class AsyncRedisMembership(AsyncDriver):
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
        router: SharedRouter,
        client: redis.asyncio.Redis,
        name: str = "default",
        *,
        quorum: str | int = "majority",
        vote_ttl: float = 30.0,
        resync_interval: float = 5.0,
        reporter: str | None = None,
        prefix: str = "chash",
        bootstrap: bool = False,
        min_replicas: int | None = None,
        replica_timeout: float = 0.5,
    ) -> None:
        """See ``RedisMembership``; ImportError without redis-py."""
        async_client(client)
        check_router(router)
        settings = MembershipSettings(name=name, quorum=quorum, vote_ttl=vote_ttl,
                                      resync_interval=resync_interval, reporter=reporter,
                                      prefix=prefix, bootstrap=bootstrap)
        self._client: redis.asyncio.Redis = client
        store = AsyncRedisStore(client, settings, min_replicas=min_replicas,
                      replica_timeout=replica_timeout)
        super().__init__(router, settings, store)

    @property
    def client(self) -> redis.asyncio.Redis:
        """The Redis client."""
        return self._client
