"""Per-backend loads shared by gateway replicas through Redis (``--affinity
prefix`` with ``--redis``).

Each replica (a gateway: one process, or the N workers of ``--workers
N``) routes completions on its own view of each backend: its requests in
flight and its estimate of the prefill still ahead there
(``chash.gateway.llm``; across its workers, ``chash.gateway.worker_loads``).
``SharedLoads`` adds the others': every ``interval`` seconds, in one
pipelined round trip, a replica writes its own view under a key of its own
(expiring after three intervals, so that a replica that died stops
counting) and reads every other replica's; between two rounds it routes on
the last views read plus its own live counts.  Never a round trip per
request.

A gateway of N workers is one replica, under one name: worker 0 writes the
gateway's whole view (the sums of every worker's counts) and every worker
reads the other replicas' (``publish`` False for workers 1 to N-1), so
that no worker's counts are counted twice, once live and once through
Redis.

A replica cut off from Redis (a round that fails) falls back to its own
view until a round succeeds again, and says so: ``status()`` (shown under
``affinity`` on ``/-/status``) and ``chash_gateway_shared_loads_up`` on
``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from chash._optional import require

__all__ = ["SharedLoads"]

logger = logging.getLogger("chash.gateway")

#: A replica's own view: ``({node: in flight}, {node: queued tokens})``.
View = tuple[Mapping[str, int], Mapping[str, float]]


class SharedLoads:
    """The other replicas' loads, read from Redis at an interval; see the
    module docstring.  ``url``: the Redis server; ``prefix``: the keys'
    prefix (one per shared ring); ``own``: this replica's view, read at
    each round.  ``instance``: this replica's name in Redis (by default
    made up: host, process, a random part); ``publish``: whether this
    process writes the replica's view (False: it only reads the others').
    One event loop's."""

    def __init__(self, url: str, own: Callable[[], View], *, prefix: str = "chash:loads",
                 interval: float = 0.5, instance: str | None = None,
                 publish: bool = True) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0, not {interval!r}")
        self.url = url
        self.interval = interval
        self._own = own
        self._prefix = prefix
        #: This replica's name in Redis.
        self.instance = instance if instance is not None else \
            f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.publish = publish
        self._loads: dict[str, float] = {}
        self._queued: dict[str, float] = {}
        self._replicas = 0
        #: Whether the last round succeeded (the others' views are in use).
        self.up = False
        #: Why the last round failed, or None.
        self.error: str | None = "not started"
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None

    def others(self) -> tuple[dict[str, float], dict[str, float]]:
        """The other replicas' ``(loads, queued)`` summed by node, as last
        read; empty while cut off from Redis."""
        return self._loads, self._queued

    def status(self) -> dict[str, Any]:
        """What ``/-/status`` shows: shared or not (and why), the replicas
        seen (this one included), the interval."""
        return {"redis": self.url, "shared": self.up, "error": self.error,
                "replicas": self._replicas + 1 if self.up else 1, "interval": self.interval}

    async def start(self) -> None:
        """Begin the rounds (the first one now)."""
        redis = require("redis.asyncio", user="shared loads", extra="redis", package="redis")
        self._client = redis.Redis.from_url(self.url, socket_timeout=max(self.interval, 0.5),
                                            socket_connect_timeout=max(self.interval, 0.5))
        await self.round()
        self._task = asyncio.get_running_loop().create_task(self._rounds())

    async def stop(self) -> None:
        """End the rounds, take this replica's view out of Redis (if it
        can), close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        client, self._client = self._client, None
        if client is not None and self.publish:
            with contextlib.suppress(Exception):
                await client.delete(self._key(self.instance))
                await client.srem(self._prefix + ":replicas", self.instance)
        if client is not None:
            await client.aclose()

    def _key(self, instance: str) -> str:
        return f"{self._prefix}:replica:{instance}"

    async def round(self) -> None:
        """One round: write this replica's view (if this process
        publishes it), read the others'."""
        members = self._prefix + ":replicas"
        ttl = max(1, round(3 * self.interval + 0.5))
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                if self.publish:
                    loads, queued = self._own()
                    view = json.dumps({"loads": dict(loads), "queued": dict(queued)})
                    pipe.set(self._key(self.instance), view, ex=ttl)
                    pipe.sadd(members, self.instance)
                pipe.smembers(members)
                *_, names = await pipe.execute()
            others = sorted(name.decode() if isinstance(name, bytes) else str(name)
                            for name in names)
            others = [name for name in others if name != self.instance]
            values = await self._client.mget([self._key(name) for name in others]) \
                if others else []
        except Exception as exc:  # redis-py's errors, OSError, timeouts: all mean cut off
            if self.up or self.error == "not started":
                logger.warning("shared loads: Redis at %s unreachable (%s); routing on this "
                               "gateway's own view", self.url, exc)
            self.up, self.error = False, f"{type(exc).__name__}: {exc}"
            self._loads, self._queued, self._replicas = {}, {}, 0
            return
        gone = [name for name, value in zip(others, values, strict=True) if value is None]
        if gone:  # expired: their replicas stopped without saying so
            with contextlib.suppress(Exception):
                await self._client.srem(members, *gone)
        total_loads: dict[str, float] = {}
        total_queued: dict[str, float] = {}
        for value in values:
            if value is None:
                continue
            try:
                other = json.loads(value)
                for into, part in ((total_loads, other["loads"]), (total_queued, other["queued"])):
                    for node, amount in part.items():
                        into[node] = into.get(node, 0.0) + float(amount)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # not a view this program wrote: ignored
        if not self.up and self.error != "not started":
            logger.warning("shared loads: Redis at %s reachable again", self.url)
        self._loads, self._queued = total_loads, total_queued
        self._replicas = len(others) - len(gone)
        self.up, self.error = True, None

    async def _rounds(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.round()
