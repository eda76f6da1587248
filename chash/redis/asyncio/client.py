"""The asyncio face of chash.redis: ``ShardedRedis`` over ``redis.asyncio``.

As thin as the sync face: the plans, ejection and answers come from
:class:`chash.redis.face.Face` and the core; this module only awaits the
shards' clients (several at once with ``asyncio.gather``).
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from chash._optional import require
from chash.redis.core import Item, Part, merge
from chash.redis.face import Face, Queue, Queued

if TYPE_CHECKING:
    import redis
    import redis.asyncio
    from redis.commands.core import AsyncDataAccessCommands, AsyncScriptCommands

    from chash._chash import LayoutName
    from chash.compat import TwemproxyServer
else:
    redis = require("redis", user="chash.redis", extra="redis", package="redis-py")
    require("redis.asyncio", user="chash.redis", extra="redis", package="redis-py")
    _commands = require("redis.commands.core", user="chash.redis", extra="redis", package="redis-py")
    AsyncDataAccessCommands = _commands.AsyncDataAccessCommands
    AsyncScriptCommands = _commands.AsyncScriptCommands

__all__ = ["ShardedPipeline", "ShardedRedis"]

FAILURES: tuple[type[BaseException], ...] = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                                             OSError)


class ShardedRedis(Face["redis.asyncio.Redis"], AsyncDataAccessCommands, AsyncScriptCommands):
    """``chash.redis.ShardedRedis`` for asyncio: the same arguments, the
    same routing, every command a coroutine (``await sharded.get(key)``),
    ``pipeline()`` an asyncio pipeline, ``scan_iter()`` an async iterator,
    ``aclose()`` to close.  One event loop at a time, as redis.asyncio."""

    _is_async_client: Literal[True] = True
    _event_dispatcher: Any = None

    def __init__(self, nodes: Iterable[str | TwemproxyServer], *, layout: LayoutName = "ketama",
                 hash_tag: str | None = None, auto_eject_hosts: bool = False,
                 server_failure_limit: int = 2, server_retry_timeout: int = 30_000,
                 **redis_kwargs: Any) -> None:
        super().__init__(nodes, redis.asyncio.Redis, layout=layout, hash_tag=hash_tag,
                         auto_eject_hosts=auto_eject_hosts, server_failure_limit=server_failure_limit,
                         server_retry_timeout=server_retry_timeout, redis_kwargs=redis_kwargs)

    async def _run(self, part: Part, options: dict[str, Any]) -> Any:
        return await self._run_on(part.shard, part.args, options)

    async def _run_on(self, shard: str, args: Sequence[Any], options: dict[str, Any]) -> Any:
        client: Any = self._client(shard)
        try:
            answer = await client.execute_command(*args, **options)
        except FAILURES as exc:
            raise self._failure(shard, exc) from exc
        self._success(shard)
        return answer

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Runs a command on its key's shard (or, split, on each of its keys'
        shards) and returns its answer."""
        options.pop("keys", None)
        shard = self._core.single_owner(args)
        if shard is not None:
            return await self._run_on(shard, args, options)
        plan = self._plan(args)
        if len(plan.parts) == 1:
            return await self._run(plan.parts[0], options)
        answers = await asyncio.gather(*(self._run(part, options) for part in plan.parts),
                                       return_exceptions=True)
        answer = merge(plan, answers)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def script_load(self, script: Any) -> str:
        """Loads a Lua script on every live shard; its SHA1."""
        shas = set(await asyncio.gather(*(self._run_on(name, ("SCRIPT LOAD", script), {})
                                          for name in self._live())))
        sha: str = shas.pop()
        return sha

    def pipeline(self, transaction: bool = False, shard_hint: None = None) -> ShardedPipeline:
        """An asyncio pipeline: one redis.asyncio pipeline per shard, awaited
        together, the answers in the order of the commands."""
        if shard_hint is not None:
            raise TypeError("shard_hint has no meaning here: the keys pick the shards")
        return ShardedPipeline(self, transaction)

    async def scan_iter(self, match: Any = None, count: int | None = None,  # type: ignore[override]
                        _type: str | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        """Every key of every live shard (SCAN on each in turn)."""
        for name in self._live():
            async for key in self._clients[name].scan_iter(match=match, count=count, _type=_type,
                                                           **kwargs):
                yield key

    async def aclose(self) -> None:
        """Closes every shard's client."""
        for client in self._clients.values():
            await client.aclose()

    async def __aenter__(self) -> ShardedRedis:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


class ShardedPipeline(Queue["redis.asyncio.Redis"], AsyncDataAccessCommands, AsyncScriptCommands):
    """Commands queued for :meth:`ShardedRedis.pipeline`; ``await
    execute()`` sends each shard its share, all shards at once."""

    _is_async_client: Literal[True] = True
    _event_dispatcher: Any = None
    _owner: ShardedRedis

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Sends the queued commands; their answers in order."""
        stack, planned = self._take()
        if not stack:
            return []
        owner = self._owner
        plans, groups = owner._pipeline_plans(stack, self._transaction, planned)
        outcomes = await asyncio.gather(*(self._send(name, items, stack)
                                          for name, items in groups.items()), return_exceptions=True)
        return owner._pipeline_answers(plans, groups, outcomes, raise_on_error)

    async def _send(self, shard: str, items: list[Item], stack: list[Queued]) -> list[Any]:
        owner = self._owner
        pipe: Any = owner._client(shard).pipeline(transaction=self._transaction)
        for index, _, args in items:
            pipe.execute_command(*args, **stack[index][1])
        try:
            answers: list[Any] = await pipe.execute(raise_on_error=False)
        except FAILURES as exc:
            raise owner._failure(shard, exc) from exc
        finally:
            await pipe.reset()
        owner._success(shard)
        return answers

    async def __aenter__(self) -> ShardedPipeline:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.reset()
