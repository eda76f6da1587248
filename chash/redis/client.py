"""``ShardedRedis``: one redis-py client per shard, commands routed by key.

The thin sync face of :class:`chash.redis.core.Shards`: it plans each
command under one lock, runs the parts on the shards' clients (several
shards at once in a small thread pool) and merges the answers.
"""
from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from chash._optional import require
from chash.redis.core import Ejection, Part, Plan, Shard, Shards, encode_key, merge
from chash.redis.errors import ShardError, shard_error

if TYPE_CHECKING:
    import redis
    from redis.commands.core import DataAccessCommands, ScriptCommands

    from chash._chash import ConsistentHashRouter, LayoutName
    from chash.compat import TwemproxyServer
else:
    redis = require("redis", user="chash.redis", extra="redis", package="redis-py")
    _core = require("redis.commands.core", user="chash.redis", extra="redis", package="redis-py")
    DataAccessCommands, ScriptCommands = _core.DataAccessCommands, _core.ScriptCommands

__all__ = ["ShardedPipeline", "ShardedRedis", "encoder_of"]

#: What a shard failing looks like: the faces count these for the ejection.
FAILURES: tuple[type[BaseException], ...] = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def encoder_of(redis_kwargs: dict[str, Any]) -> Callable[[Any], bytes]:
    """How redis-py encodes a key with these client options."""
    return functools.partial(encode_key, encoding=redis_kwargs.get("encoding", "utf-8"),
                             errors=redis_kwargs.get("encoding_errors", "strict"))


def client_kwargs(shard: Shard, redis_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options of a shard's own client."""
    for taken in ("host", "port", "unix_socket_path", "url"):
        if taken in redis_kwargs:
            raise TypeError(f"{taken}= comes from the nodes, one client per shard")
    if shard.path is not None:
        return {**redis_kwargs, "unix_socket_path": shard.path}
    return {**redis_kwargs, "host": shard.host, "port": shard.port}


def ejection_of(auto_eject_hosts: bool, server_failure_limit: int, server_retry_timeout: int) -> Ejection:
    return Ejection(auto_eject_hosts, server_failure_limit, server_retry_timeout)


class ShardedRedis(DataAccessCommands, ScriptCommands):
    """Redis sharded as twemproxy shards it: one ``redis.Redis`` per shard,
    each command sent to the shard of its key.

    ``nodes``: twemproxy's ``servers:`` lines (``"HOST:PORT:WEIGHT
    [NAME]"``) or what :func:`chash.compat.twemproxy_servers` returns;
    ``layout``: the ring (``"ketama"``, twemproxy's ``distribution:
    ketama`` with ``hash: md5``, places every key where nutcracker does);
    ``hash_tag``: two characters such as ``"{}"``: only the part of a key
    between them is hashed; ``auto_eject_hosts``, ``server_failure_limit``,
    ``server_retry_timeout`` (milliseconds): twemproxy's ejection; every
    other keyword goes to each shard's ``redis.Redis``.

    redis-py's data commands (``get``, ``set``, ``hset``, ``mget``, ``eval``,
    ...) are methods.  ``MGET``, ``MSET``, ``DEL``, ``EXISTS``, ``UNLINK``
    and ``TOUCH`` are split per shard and their answers merged; any other
    command over several keys needs them to share a hash tag, and a command
    without a key raises :class:`chash.redis.RoutingError` (send it to
    :attr:`clients`).  A shard that does not answer raises
    :class:`chash.redis.ShardError` naming it.  Thread-safe.
    """

    _is_async_client: Literal[False] = False
    _event_dispatcher: Any = None

    def __init__(self, nodes: Iterable[str | TwemproxyServer], *, layout: LayoutName = "ketama",
                 hash_tag: str | None = None, auto_eject_hosts: bool = False,
                 server_failure_limit: int = 2, server_retry_timeout: int = 30_000,
                 **redis_kwargs: Any) -> None:
        self._core = Shards(nodes, layout=layout, hash_tag=hash_tag,
                            ejection=ejection_of(auto_eject_hosts, server_failure_limit,
                                                 server_retry_timeout),
                            encode=encoder_of(redis_kwargs))
        self._clients: dict[str, redis.Redis] = {
            name: redis.Redis(**client_kwargs(shard, redis_kwargs))
            for name, shard in self._core.shards.items()}
        self._redis_kwargs = dict(redis_kwargs)
        self._lock = threading.Lock()
        self._others: dict[str, redis.Redis] = {}    # another client's shards, while resharding
        self._addresses: dict[str, str] = {n: s.address for n, s in self._core.shards.items()}
        self._pool: ThreadPoolExecutor | None = None
        self.clock: Callable[[], float] = time.monotonic

    # -- what it is ----------------------------------------------------------------

    @property
    def core(self) -> Shards:
        """The routing core (no I/O)."""
        return self._core

    @property
    def shards(self) -> list[str]:
        """The shards' names, in twemproxy's order."""
        return list(self._core.shards)

    @property
    def clients(self) -> dict[str, redis.Redis]:
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

    def client_for(self, key: Any) -> redis.Redis:
        """The client of the shard serving ``key`` now."""
        return self._client(self.shard_for(key))

    # -- running commands ----------------------------------------------------------

    def _client(self, shard: str) -> redis.Redis:
        client = self._clients.get(shard) or self._others.get(shard)
        if client is None:
            raise KeyError(f"no client for shard {shard!r}")
        return client

    def _address(self, shard: str) -> str:
        return self._addresses.get(shard, shard)

    def _plan(self, args: Sequence[Any]) -> Plan:
        with self._lock:
            self._core.refresh(self.clock())
            return self._core.plan(args)

    def _outcome(self, shard: str, exc: BaseException | None) -> None:
        with self._lock:
            if exc is None:
                self._core.succeeded(shard)
            else:
                self._core.failed(shard, self.clock())

    def _run(self, part: Part, options: dict[str, Any]) -> Any:
        try:
            client: Any = self._client(part.shard)
            answer = client.execute_command(*part.args, **options)
        except FAILURES as exc:
            self._outcome(part.shard, exc)
            raise shard_error(part.shard, self._address(part.shard), exc) from exc
        self._outcome(part.shard, None)
        return answer

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=min(16, len(self._clients) + 4),
                                                thread_name_prefix="chash-redis")
            return self._pool

    def _each(self, calls: Sequence[Callable[[], Any]]) -> list[Any]:
        """Every call's answer or exception, several at once."""
        def outcome(call: Callable[[], Any]) -> Any:
            try:
                return call()
            except Exception as exc:
                return exc
        if len(calls) == 1:
            return [outcome(calls[0])]
        return list(self._executor().map(outcome, calls))

    def execute_command(self, *args: Any, **options: Any) -> Any:
        """Runs a command on its key's shard (or, split, on each of its keys'
        shards) and returns its answer."""
        options.pop("keys", None)
        plan = self._plan(args)
        if len(plan.parts) == 1:
            return self._run(plan.parts[0], options)
        answers = self._each([functools.partial(self._run, part, options) for part in plan.parts])
        answer = merge(plan, answers)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def pipeline(self, transaction: bool = False, shard_hint: None = None) -> ShardedPipeline:
        """A pipeline: one redis-py pipeline per shard, sent at once, the
        answers back in the order of the commands.  ``transaction=True``
        runs them as one MULTI/EXEC, so every key must share a hash tag."""
        if shard_hint is not None:
            raise TypeError("shard_hint has no meaning here: the keys pick the shards")
        return ShardedPipeline(self, transaction)

    def scan_iter(self, match: Any = None, count: int | None = None, _type: str | None = None,
                  **kwargs: Any) -> Iterator[Any]:
        """Every key of every live shard (SCAN on each in turn)."""
        with self._lock:
            self._core.refresh(self.clock())
            live = [n for n in self._core.shards if n not in self._core.ejected]
        for name in live:
            yield from self._clients[name].scan_iter(match=match, count=count, _type=_type, **kwargs)

    def close(self) -> None:
        """Closes every shard's client and the thread pool."""
        for client in self._clients.values():
            client.close()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __enter__(self) -> ShardedRedis:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ShardedRedis {self.shards} layout={self._core.layout!r}>"


class ShardedPipeline(DataAccessCommands, ScriptCommands):
    """Commands queued for :meth:`ShardedRedis.pipeline`; ``execute()``
    sends each shard its share in one redis-py pipeline, all shards at once,
    and returns the answers in the order the commands were queued.  A shard
    that does not answer raises :class:`chash.redis.ShardError` naming it,
    whose ``results`` hold every other shard's answers."""

    _is_async_client: Literal[False] = False
    _event_dispatcher: Any = None

    def __init__(self, owner: ShardedRedis, transaction: bool) -> None:
        self._owner = owner
        self._transaction = transaction
        self._stack: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def execute_command(self, *args: Any, **options: Any) -> ShardedPipeline:
        """Queues a command (its routing is checked now, and again when sent)."""
        options.pop("keys", None)
        self._owner._plan(args)
        self._stack.append((args, options))
        return self

    def __len__(self) -> int:
        return len(self._stack)

    def reset(self) -> None:
        """Forgets the queued commands."""
        self._stack = []

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Sends the queued commands; their answers in order."""
        stack, self._stack = self._stack, []
        if not stack:
            return []
        owner = self._owner
        plans = [owner._plan(args) for args, _ in stack]
        if self._transaction:
            with owner._lock:
                shard = owner._core.transaction_shard(plans)
            assert shard is not None
            groups = {shard: [(i, 0) for i in range(len(plans))]}
        else:
            groups = {}
            for index, plan in enumerate(plans):
                for number, part in enumerate(plan.parts):
                    groups.setdefault(part.shard, []).append((index, number))
        names = list(groups)
        outcomes = owner._each([functools.partial(self._send, name, groups[name], plans, stack)
                                for name in names])
        answers: list[list[Any]] = [[None] * len(plan.parts) for plan in plans]
        failed: list[ShardError] = []
        for name, outcome in zip(names, outcomes, strict=True):
            if isinstance(outcome, ShardError):
                failed.append(outcome)
                outcome = [outcome] * len(groups[name])
            elif isinstance(outcome, BaseException):
                outcome = [outcome] * len(groups[name])
            for (index, number), answer in zip(groups[name], outcome, strict=True):
                answers[index][number] = answer
        results = [merge(plan, parts) for plan, parts in zip(plans, answers, strict=True)]
        if raise_on_error:
            if failed:
                which = ", ".join(f"{e.shard} ({e.address})" for e in failed)
                error = shard_error(failed[0].shard, failed[0].address,
                                    failed[0].__cause__ or failed[0], results)
                error.args = (f"pipeline: shard {which} did not answer: {failed[0].__cause__}; "
                              "the other shards' answers are in .results",)
                raise error from failed[0].__cause__
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        return results

    def _send(self, shard: str, items: list[tuple[int, int]], plans: list[Plan],
              stack: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
        owner = self._owner
        pipe: Any = owner._client(shard).pipeline(transaction=self._transaction)
        for index, number in items:
            pipe.execute_command(*plans[index].parts[number].args, **stack[index][1])
        try:
            answers: list[Any] = pipe.execute(raise_on_error=False)
        except FAILURES as exc:
            owner._outcome(shard, exc)
            raise shard_error(shard, owner._address(shard), exc) from exc
        finally:
            pipe.reset()
        owner._outcome(shard, None)
        return answers

    def __enter__(self) -> ShardedPipeline:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.reset()
