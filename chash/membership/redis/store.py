"""A shared ring in Redis: the store the Redis drivers hand their operations to.

Each operation of the protocol runs as the Lua script written for it
(``chash.membership.redis.scripts``) on the ring's eight keys, its ``ARGV``
and reply translated by ``chash.membership.redis.codec``; changes are
announced on the ring's channel and arrive by pub/sub (sharded,
``SSUBSCRIBE``, where the server has it).

With replicas, an operator's change (``Write``) can be made to wait for
them: the script and a ``WAIT`` go down one connection in one round
trip, and a change fewer replicas than ``min_replicas`` acknowledged
within ``replica_timeout`` raises ``NotReplicatedError`` instead of being
reported committed (an isolated primary may accept a write that the
failover on the other side then discards).

``RedisStore`` works with a ``redis.Redis`` (also a Sentinel's
``master_for``) or a ``redis.cluster.RedisCluster``; ``AsyncRedisStore``
with their ``redis.asyncio`` twins.  redis-py is imported through
``chash._optional.require``, only when a store is made.
"""

from __future__ import annotations

import asyncio
import types
from typing import Any, TypeVar

from chash._optional import require
from chash.membership.redis.codec import read_reply, script_call
from chash.membership.redis.scripts import SCRIPTS
from chash.membership.settings import MembershipSettings
from chash.membership.state import NotReplicatedError, Outcome
from chash.membership.store import (
    Announcement,
    NoPubSub,
    Notice,
    Operation,
    ReadHead,
    SubscriptionLost,
    Write,
)

__all__ = ["KEY_PARTS", "AsyncRedisStore", "RedisStore", "async_client", "check_replicas",
           "import_redis", "replicas_seen", "ring_channel", "ring_keys", "sentinel_pool",
           "sync_client"]

T = TypeVar("T")

#: The keys of a ring, ``{prefix}:{{name}}:{part}``, in the order the
#: scripts take them.
KEY_PARTS = ("meta", "nodes", "disabled", "down", "votes", "order", "history", "zones")


def import_redis() -> types.ModuleType:
    """redis-py (with ``redis.asyncio`` loaded); ImportError naming the extra."""
    redis = require("redis", user="RedisMembership", extra="redis", package="redis-py")
    require("redis.asyncio", user="RedisMembership", extra="redis", package="redis-py")
    return redis


def sync_client(client: Any) -> Any:
    """``client``, refused (TypeError) if it is a ``redis.asyncio`` one;
    ImportError without redis-py."""
    if isinstance(client, import_redis().asyncio.Redis):
        raise TypeError("RedisMembership needs a redis.Redis; use AsyncRedisMembership "
                        "with a redis.asyncio.Redis")
    return client


def async_client(client: Any) -> Any:
    """``client``, refused (TypeError) if it is a blocking redis-py one;
    ImportError without redis-py."""
    if isinstance(client, import_redis().Redis):
        raise TypeError("AsyncRedisMembership needs a redis.asyncio.Redis; use "
                        "RedisMembership with a redis.Redis")
    return client


def ring_keys(settings: MembershipSettings) -> list[str]:
    """The ring's keys, in the order every script takes them; all share the
    hash tag ``{name}``, so a cluster keeps them in one slot."""
    return [f"{settings.prefix}:{{{settings.name}}}:{part}" for part in KEY_PARTS]


def ring_channel(settings: MembershipSettings) -> str:
    """Where the scripts announce every change of the ring, ``epoch:version``
    (in the keys' slot, for sharded pub/sub)."""
    return f"{settings.prefix}:{{{settings.name}}}:events"


def _errors(redis: types.ModuleType) -> tuple[tuple[type[BaseException], ...],
                                               tuple[type[BaseException], ...]]:
    """The exceptions of redis-py meaning Redis is unreachable, and those
    meaning it refused us."""
    exceptions = redis.exceptions
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
    return outage, auth


def _notice(message: object) -> Notice:
    """A pub/sub message as the listener sees it: an announcement, or the
    subscription lost (a cluster slot moved away, the server dropped us)."""
    if not isinstance(message, dict):
        return None
    kind = message.get("type")
    kind = kind.decode() if isinstance(kind, bytes) else kind
    if kind in ("message", "smessage"):
        return Announcement(message.get("data"))
    if kind in ("unsubscribe", "sunsubscribe"):
        return SubscriptionLost()
    return None


def _pubsub(client: Any, sharded: bool) -> tuple[Any, Any]:
    """A new pub/sub object and its (s)subscribe method, or NoPubSub if this
    client has none: redis.asyncio has SSUBSCRIBE only from redis-py 8, and
    its cluster client pub/sub only lately.  The periodic check then
    carries every change, one ``resync_interval`` later."""
    pubsub = client.pubsub() if hasattr(client, "pubsub") else None
    method = getattr(pubsub, "ssubscribe" if sharded else "subscribe", None)
    if method is None:
        close = getattr(pubsub, "close", None)
        if close is not None and not asyncio.iscoroutinefunction(close):
            _close_quietly(pubsub)
        raise NoPubSub(f"{type(client).__module__}.{type(client).__name__} offers no "
                       f"{'sharded ' if sharded else ''}pub/sub")
    return pubsub, method


def _close_quietly(pubsub: Any) -> None:
    try:
        pubsub.close()
    except Exception:  # closing a broken connection
        pass


class _Subscription:
    """A redis-py pub/sub, as a ``chash.membership.store.Subscription``."""

    def __init__(self, pubsub: Any, sharded: bool) -> None:
        self._pubsub = pubsub
        self._sharded = sharded and hasattr(pubsub, "get_sharded_message")

    def receive(self, timeout: float) -> Notice:
        """The next message within ``timeout`` seconds, as a notice."""
        if self._sharded:
            return _notice(self._pubsub.get_sharded_message(timeout=timeout))
        return _notice(self._pubsub.get_message(timeout=timeout))

    def close(self) -> None:
        """Close the pub/sub connection; never raises."""
        _close_quietly(self._pubsub)


class _AsyncSubscription:
    """A redis.asyncio pub/sub, as a ``chash.membership.store.AsyncSubscription``."""

    def __init__(self, pubsub: Any, sharded: bool) -> None:
        self._pubsub = pubsub
        self._sharded = sharded and hasattr(pubsub, "get_sharded_message")

    async def receive(self, timeout: float) -> Notice:
        """The next message within ``timeout`` seconds, as a notice."""
        if self._sharded:
            return _notice(await self._pubsub.get_sharded_message(timeout=timeout))
        return _notice(await self._pubsub.get_message(timeout=timeout))

    async def close(self) -> None:
        """Close the pub/sub connection; never raises."""
        try:
            await self._pubsub.aclose()
        except Exception:  # closing a broken connection
            pass


def check_replicas(min_replicas: int | None, replica_timeout: float) -> None:
    """ValueError unless ``min_replicas`` is None or a count >= 0 and
    ``replica_timeout`` a positive number of seconds."""
    if min_replicas is not None and (not isinstance(min_replicas, int)
                                     or isinstance(min_replicas, bool) or min_replicas < 0):
        raise ValueError(f"min_replicas must be None or a count >= 0, not {min_replicas!r}")
    if not isinstance(replica_timeout, (int, float)) or not 0 < replica_timeout < float("inf"):
        raise ValueError(f"replica_timeout must be a positive number of seconds, not "
                         f"{replica_timeout!r}")


def replicas_seen(info: Any) -> int:
    """How many replicas ``INFO replication`` shows connected to a primary."""
    try:
        return int(info.get("connected_slaves", 0))
    except (AttributeError, TypeError, ValueError):
        return 0


class _ReplicaMemory:
    """Which primaries (by replication id) showed this store a replica."""

    def __init__(self) -> None:
        self._had: set[str] = set()

    def required(self, info: Any) -> int:
        """1 if the primary ``INFO replication`` describes has a replica
        connected, or had one when asked before; else 0."""
        replid = str(info.get("master_replid", "")) if isinstance(info, dict) else ""
        if replicas_seen(info) > 0:
            self._had.add(replid)
            return 1
        return 1 if replid and replid in self._had else 0


def sentinel_pool(client: Any) -> Any | None:
    """The connection pool of a Sentinel's ``master_for`` client, or None
    for any other client."""
    pool = getattr(client, "connection_pool", None)
    if getattr(pool, "is_master", False) and callable(getattr(pool, "get_master_address", None)):
        return pool
    return None


#: The operation that starts every periodic check: before it, a Sentinel
#: client asks the sentinels which server is the primary now.
_CHECKED = (ReadHead,)

#: The operations whose loss in a failover would lose an operator's change
#: (a seed restores what the instances hold, and they restore it again).
_WAITED = (Write,)


def _not_replicated(operation: Operation[Any], acknowledged: int, required: int,
                    timeout: float) -> NotReplicatedError:
    what = f"{operation.action} {operation.node!r}" if isinstance(operation, Write) else "change"
    return NotReplicatedError(
        f"{what} reached {acknowledged} of the {required} Redis replicas required within "
        f"{timeout:g}s: not committed (a failover could lose it; the ring's history tells "
        "whether the primary kept it)", acknowledged, required)


class RedisStore:
    """The ring ``settings`` names in Redis, through a blocking redis-py
    client (a ``chash.membership.store.Store``).

    ``min_replicas``: how many replicas must acknowledge an operator's
    change within ``replica_timeout`` seconds (Redis ``WAIT``) for it to
    count as committed; None asks for 1 if the primary shows a replica
    connected when a change is made, or showed one to this store before
    (so that a primary cut off from its replicas, which drops them after
    ``repl-timeout``, keeps failing the changes it cannot replicate), else
    0.  Keep the
    client's ``socket_timeout`` above ``replica_timeout``."""

    name = "Redis"

    def __init__(self, client: Any, settings: MembershipSettings, *,
                 min_replicas: int | None = 0, replica_timeout: float = 0.5) -> None:
        """Registers the scripts (no I/O: they load on first use);
        ImportError without redis-py, TypeError for an asyncio client,
        ValueError for bad replica settings or ``min_replicas`` with a
        cluster client."""
        self.client = sync_client(client)
        self.outage_errors, self.auth_errors = _errors(import_redis())
        self.keys = ring_keys(settings)
        self.channel = ring_channel(settings)
        check_replicas(min_replicas, replica_timeout)
        if min_replicas and not hasattr(client, "connection_pool"):
            raise ValueError("min_replicas needs a redis.Redis (one server, or a Sentinel's "
                             "master_for), not a cluster client")
        self.min_replicas = min_replicas
        self.replica_timeout = float(replica_timeout)
        self._had_replicas = _ReplicaMemory()
        self._sentinels = sentinel_pool(client)
        self._scripts = {name: client.register_script(source) for name, source in SCRIPTS.items()}

    def follow_primary(self) -> None:
        """With a Sentinel client, move to the primary the sentinels name
        now (redis-py's ``get_master_address``: idle connections to another
        server are closed, the next call connects to the new one); nothing
        for other clients, or when no sentinel answers (the server held
        stays).  A primary cut off and healed after a failover stays a
        primary until the sentinels demote it, which they put off for
        seconds; its clients would keep reading its ring until then, with
        the writes the failover discarded.  Run before every periodic
        check, so that an instance follows the new primary within its
        resync interval of the heal."""
        if self._sentinels is None:
            return
        try:
            self._sentinels.get_master_address()
        except Exception:  # no sentinel answered: the primary held stays
            return

    def required_replicas(self) -> int:
        """``min_replicas``; if None, 1 when the primary shows a replica
        connected now or did before (asked before each change; a new
        primary after a failover starts without that memory), else 0."""
        if self.min_replicas is not None:
            return self.min_replicas
        if not hasattr(self.client, "connection_pool"):
            return 0  # a cluster client: WAIT would go to any node
        try:
            info = self.client.info("replication")
        except self.outage_errors:
            raise
        except Exception:  # INFO not allowed, or not a plain server: no wait
            return 0
        return self._had_replicas.required(info)

    def run(self, operation: Operation[T]) -> T:
        """Run the script of ``operation`` on the ring's keys; its reply.
        A change waiting for replicas that too few acknowledged raises
        NotReplicatedError."""
        if isinstance(operation, _CHECKED):
            self.follow_primary()
        name, args = script_call(operation, self.channel)
        required = self.required_replicas() if isinstance(operation, _WAITED) else 0
        if not required:
            return read_reply(operation, self._scripts[name](keys=self.keys, args=args))
        with self.client.pipeline(transaction=False) as pipe:
            self._scripts[name](keys=self.keys, args=args, client=pipe)
            pipe.execute_command("WAIT", required, max(1, round(self.replica_timeout * 1000)))
            raw, acknowledged = pipe.execute()
        reply = read_reply(operation, raw)
        if isinstance(reply, Outcome) and reply.changed and int(acknowledged) < required:
            raise _not_replicated(operation, int(acknowledged), required, self.replica_timeout)
        return reply

    def subscribe(self, sharded: bool) -> _Subscription:
        """Subscribe to the ring's channel; NoPubSub if this client cannot."""
        pubsub, method = _pubsub(self.client, sharded)
        try:
            method(self.channel)
        except BaseException:
            _close_quietly(pubsub)
            raise
        return _Subscription(pubsub, sharded)


class AsyncRedisStore:
    """The ring ``settings`` names in Redis, through a ``redis.asyncio``
    client (a ``chash.membership.store.AsyncStore``)."""

    name = "Redis"

    def __init__(self, client: Any, settings: MembershipSettings, *,
                 min_replicas: int | None = 0, replica_timeout: float = 0.5) -> None:
        """As ``RedisStore``, for a ``redis.asyncio`` client; TypeError for a
        blocking one."""
        self.client = async_client(client)
        self.outage_errors, self.auth_errors = _errors(import_redis())
        self.keys = ring_keys(settings)
        self.channel = ring_channel(settings)
        check_replicas(min_replicas, replica_timeout)
        if min_replicas and not hasattr(client, "connection_pool"):
            raise ValueError("min_replicas needs a redis.asyncio.Redis (one server, or a "
                             "Sentinel's master_for), not a cluster client")
        self.min_replicas = min_replicas
        self.replica_timeout = float(replica_timeout)
        self._had_replicas = _ReplicaMemory()
        self._sentinels = sentinel_pool(client)
        self._scripts = {name: client.register_script(source) for name, source in SCRIPTS.items()}

    async def follow_primary(self) -> None:
        """As ``RedisStore.follow_primary``."""
        if self._sentinels is None:
            return
        try:
            await self._sentinels.get_master_address()
        except Exception:  # no sentinel answered: the primary held stays
            return

    async def required_replicas(self) -> int:
        """As ``RedisStore.required_replicas``."""
        if self.min_replicas is not None:
            return self.min_replicas
        if not hasattr(self.client, "connection_pool"):
            return 0  # a cluster client: WAIT would go to any node
        try:
            info = await self.client.info("replication")
        except self.outage_errors:
            raise
        except Exception:  # INFO not allowed, or not a plain server: no wait
            return 0
        return self._had_replicas.required(info)

    async def run(self, operation: Operation[T]) -> T:
        """As ``RedisStore.run``."""
        if isinstance(operation, _CHECKED):
            await self.follow_primary()
        name, args = script_call(operation, self.channel)
        required = await self.required_replicas() if isinstance(operation, _WAITED) else 0
        if not required:
            return read_reply(operation, await self._scripts[name](keys=self.keys, args=args))
        async with self.client.pipeline(transaction=False) as pipe:
            await self._scripts[name](keys=self.keys, args=args, client=pipe)
            pipe.execute_command("WAIT", required, max(1, round(self.replica_timeout * 1000)))
            raw, acknowledged = await pipe.execute()
        reply = read_reply(operation, raw)
        if isinstance(reply, Outcome) and reply.changed and int(acknowledged) < required:
            raise _not_replicated(operation, int(acknowledged), required, self.replica_timeout)
        return reply

    async def subscribe(self, sharded: bool) -> _AsyncSubscription:
        """Subscribe to the ring's channel; NoPubSub if this client cannot."""
        pubsub, method = _pubsub(self.client, sharded)
        subscription = _AsyncSubscription(pubsub, sharded)
        try:
            await method(self.channel)
        except BaseException:
            await subscription.close()
            raise
        return subscription
