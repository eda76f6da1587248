"""What the sync and asyncio ``ShardedRedis`` share beside the core: the
shards' clients, the lock around the core, and the answers of pipelines.
No I/O: the faces pass in how a shard's client is made and do the calls."""
from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chash.redis.core import (
    Ejection,
    Entry,
    Groups,
    Plan,
    Shard,
    Shards,
    encode_key,
    pipeline_groups,
    pipeline_results,
)
from chash.redis.errors import ShardError, shard_error

if TYPE_CHECKING:
    from chash._chash import ConsistentHashRouter, LayoutName
    from chash.compat import TwemproxyServer

__all__ = ["Face", "Queue", "client_kwargs"]

#: A queued command: its arguments and redis-py's options.
Queued = tuple[tuple[Any, ...], dict[str, Any]]
#: A queued command's plan (or shard) when it was queued, and the core's generation then.
Planned = tuple[Entry, int]

C = TypeVar("C")


def client_kwargs(shard: Shard, redis_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options of a shard's own client."""
    for taken in ("host", "port", "unix_socket_path", "url"):
        if taken in redis_kwargs:
            raise TypeError(f"{taken}= comes from the nodes, one client per shard")
    if shard.path is not None:
        return {**redis_kwargs, "unix_socket_path": shard.path}
    return {**redis_kwargs, "host": shard.host, "port": shard.port}


class Face(Generic[C]):
    """The shared half of both ShardedRedis: ``C`` the shards' client type."""

    def __init__(self, nodes: Iterable[str | TwemproxyServer], make: Callable[..., C], *,
                 layout: LayoutName, hash_tag: str | None, auto_eject_hosts: bool,
                 server_failure_limit: int, server_retry_timeout: int,
                 redis_kwargs: dict[str, Any]) -> None:
        encoding = redis_kwargs.get("encoding", "utf-8")
        errors = redis_kwargs.get("encoding_errors", "strict")
        self._core = Shards(nodes, layout=layout, hash_tag=hash_tag,
                            ejection=Ejection(auto_eject_hosts, server_failure_limit, server_retry_timeout),
                            encode=encode_key if (encoding, errors) == ("utf-8", "strict")
                            else functools.partial(encode_key, encoding=encoding, errors=errors))
        self._clients: dict[str, C] = {name: make(**client_kwargs(shard, redis_kwargs))
                                       for name, shard in self._core.shards.items()}
        self._lock = threading.Lock()
        #: Another client's shards, while a resharding routes keys to them.
        self._others: dict[str, C] = {}
        self._addresses: dict[str, str] = {n: s.address for n, s in self._core.shards.items()}
        self._redis_kwargs = dict(redis_kwargs)
        #: The resharding this client serves through, while one runs.
        self._hook: Any = None
        self.clock: Callable[[], float] = time.monotonic

    @property
    def core(self) -> Shards:
        """The routing core (no I/O)."""
        return self._core

    @property
    def shards(self) -> list[str]:
        """The shards' names, in twemproxy's order."""
        return list(self._core.shards)

    @property
    def clients(self) -> dict[str, C]:
        """Each shard's own client, by name: for commands without a key."""
        return dict(self._clients)

    @property
    def router(self) -> ConsistentHashRouter:
        """The ring of the live shards."""
        with self._lock:
            self._core.refresh(self.clock())
            return self._core.router

    @property
    def ejected(self) -> list[str]:
        """The shards out of the ring now."""
        with self._lock:
            self._core.refresh(self.clock())
            return sorted(self._core.ejected)

    def shard_for(self, key: Any) -> str:
        """The shard serving ``key`` now."""
        with self._lock:
            self._core.refresh(self.clock())
            return self._core.shard_of(key)

    def client_for(self, key: Any) -> C:
        """The client of the shard serving ``key`` now."""
        return self._client(self.shard_for(key))

    @property
    def redis_kwargs(self) -> dict[str, Any]:
        """The options every shard's client was made with."""
        return dict(self._redis_kwargs)

    def get_encoder(self) -> Any:
        """redis-py's encoder of the shards' clients (their options are one)."""
        client: Any = next(iter(self._clients.values()))
        return client.get_encoder()

    def _client(self, shard: str) -> C:
        client = self._clients.get(shard)
        if client is None:
            client = self._others.get(shard)
        if client is None:
            raise KeyError(f"no client for shard {shard!r}")
        return client

    def _live(self) -> list[str]:
        with self._lock:
            self._core.refresh(self.clock())
            return [n for n in self._core.shards if n not in self._core.ejected]

    def _plan(self, args: Sequence[Any]) -> Plan:
        core = self._core
        with self._lock:
            if core.ejected_any:
                core.refresh(self.clock())
            return core.plan(args)

    def _failure(self, shard: str, exc: BaseException, results: list[Any] | None = None) -> ShardError:
        """Counts a shard's failure and returns the error naming it."""
        with self._lock:
            self._core.failed(shard, self.clock())
        return shard_error(shard, self._addresses.get(shard, shard), exc, results)

    def _success(self, shard: str) -> None:
        if self._core.failing(shard):
            with self._lock:
                self._core.succeeded(shard)

    def _entry(self, args: Sequence[Any]) -> Entry:
        shard = self._core.single_owner(args)
        return shard if shard is not None else self._plan(args)

    def _planned(self, args: Sequence[Any]) -> Planned:
        generation = self._core.generation
        return self._entry(args), generation

    def _pipeline_plans(self, stack: Sequence[Queued], transaction: bool,
                        planned: Sequence[Planned] = ()) -> tuple[list[Entry], Groups]:
        """The plans of a pipeline's commands (those made when they were
        queued, unless the placement changed since) and each shard's share."""
        with self._lock:
            if self._core.ejected_any:
                self._core.refresh(self.clock())
            generation = self._core.generation
        commands = [args for args, _ in stack]
        if transaction:
            plans: list[Plan] = [self._plan(args) for args in commands]
            with self._lock:
                shard = self._core.transaction_shard(plans)
            entries: list[Entry] = list(plans)
            return entries, pipeline_groups(entries, commands, shard)
        if len(planned) == len(stack) and all(g == generation for _, g in planned):
            entries = [entry for entry, _ in planned]
        else:
            entries = [self._entry(args) for args in commands]
        return entries, pipeline_groups(entries, commands)

    @staticmethod
    def _pipeline_answers(plans: Sequence[Entry], groups: Groups,
                          outcomes: Sequence[Sequence[Any] | BaseException], raise_on_error: bool) -> list[Any]:
        """The pipeline's answers; with ``raise_on_error``, a ShardError
        naming the shards that did not answer (its ``results`` every
        answer), else the first command error."""
        results = pipeline_results(plans, groups, outcomes)
        if not raise_on_error:
            return results
        failed = [o for o in outcomes if isinstance(o, ShardError)]
        if failed:
            first = failed[0]
            which = ", ".join(f"{e.shard} ({e.address})" for e in failed)
            cause = first.__cause__ or first
            error = type(first)(f"pipeline: shard {which} did not answer: {cause}; the other shards' "
                                "answers are in .results", shard=first.shard, address=first.address,
                                results=results)
            raise error from cause
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.shards} layout={self._core.layout!r}>"


class Queue(Generic[C]):
    """A pipeline's queue, shared by both faces' pipelines: commands are
    checked as they are queued and routed again when sent."""

    def __init__(self, owner: Face[C], transaction: bool) -> None:
        self._owner = owner
        self._transaction = transaction
        self._stack: list[Queued] = []
        self._planned: list[Planned] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        """Queues a command; returns the pipeline, for chained calls."""
        options.pop("keys", None)
        self._planned.append(self._owner._planned(args))
        self._stack.append((args, options))
        return self

    def __len__(self) -> int:
        return len(self._stack)

    def reset(self) -> None:
        """Forgets the queued commands."""
        self._stack = []
        self._planned = []

    def _take(self) -> tuple[list[Queued], list[Planned]]:
        stack, self._stack = self._stack, []
        planned, self._planned = self._planned, []
        return stack, planned
