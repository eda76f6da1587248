"""``ShardedRedis``: one redis-py client per shard, commands routed by key.

The thin sync face over :class:`chash.redis.core.Shards` (through
:class:`chash.redis.face.Face`): it runs each command's parts on the
shards' clients (a split command's shards at once, in a small thread pool;
a pipeline's written on every shard's connection before any answer is
read).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from chash._optional import require
from chash.redis.core import Groups, Item, Part, merge
from chash.redis.face import Face, Queue, Queued

if TYPE_CHECKING:
    import redis
    from redis.commands.core import DataAccessCommands, ScriptCommands

    from chash._chash import LayoutName
    from chash.compat import TwemproxyServer
else:
    redis = require("redis", user="chash.redis", extra="redis", package="redis-py")
    _commands = require("redis.commands.core", user="chash.redis", extra="redis", package="redis-py")
    DataAccessCommands, ScriptCommands = _commands.DataAccessCommands, _commands.ScriptCommands

__all__ = ["ShardedPipeline", "ShardedRedis"]

#: A shard failing: what the ejection counts.
FAILURES: tuple[type[BaseException], ...] = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                                             OSError)


class ShardedRedis(Face["redis.Redis"], DataAccessCommands, ScriptCommands):
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
        super().__init__(nodes, redis.Redis, layout=layout, hash_tag=hash_tag,
                         auto_eject_hosts=auto_eject_hosts, server_failure_limit=server_failure_limit,
                         server_retry_timeout=server_retry_timeout, redis_kwargs=redis_kwargs)
        self._pool: ThreadPoolExecutor | None = None

    def _run(self, part: Part, options: dict[str, Any]) -> Any:
        return self._run_on(part.shard, part.args, options)

    def _run_on(self, shard: str, args: Sequence[Any], options: dict[str, Any]) -> Any:
        client: Any = self._client(shard)
        try:
            answer = client.execute_command(*args, **options)
        except FAILURES as exc:
            raise self._failure(shard, exc) from exc
        self._success(shard)
        return answer

    def _each(self, calls: Sequence[Callable[[], Any]]) -> list[Any]:
        """Every call's answer or exception, several at once."""
        def outcome(call: Callable[[], Any]) -> Any:
            try:
                return call()
            except Exception as exc:
                return exc
        if len(calls) == 1:
            return [outcome(calls[0])]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=min(16, len(self._clients) + 4),
                                                thread_name_prefix="chash-redis")
            pool = self._pool
        # The others in the pool, the first one here meanwhile.
        futures = [pool.submit(outcome, call) for call in calls[1:]]
        first = outcome(calls[0])
        return [first, *(future.result() for future in futures)]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        """Runs a command on its key's shard (or, split, on each of its keys'
        shards) and returns its answer; while a resharding runs, where the
        resharding says the key's data is."""
        options.pop("keys", None)
        hook = self._hook
        if hook is not None:
            return hook.command(self, args, options)
        return self._direct(args, options)

    def _direct(self, args: Sequence[Any], options: dict[str, Any]) -> Any:
        shard = self._core.single_owner(args)
        if shard is not None:
            return self._run_on(shard, args, options)
        plan = self._plan(args)
        if len(plan.parts) == 1:
            return self._run(plan.parts[0], options)
        answer = merge(plan, self._each([functools.partial(self._run, part, options) for part in plan.parts]))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def script_load(self, script: Any) -> str:
        """Loads a Lua script on every live shard (what ``register_script``'s
        scripts do when a shard does not know theirs); its SHA1."""
        shas = {self._run_on(name, ("SCRIPT LOAD", script), {}) for name in self._live()}
        sha: str = shas.pop()
        return sha

    def pipeline(self, transaction: bool = False, shard_hint: None = None) -> ShardedPipeline:
        """A pipeline: each shard's share sent on one of its connections, all at once, the
        answers back in the order of the commands.  ``transaction=True``
        runs them as one MULTI/EXEC, so every key must share a hash tag."""
        if shard_hint is not None:
            raise TypeError("shard_hint has no meaning here: the keys pick the shards")
        return ShardedPipeline(self, transaction)

    def scan_iter(self, match: Any = None, count: int | None = None, _type: str | None = None,
                  **kwargs: Any) -> Iterator[Any]:
        """Every key of every live shard (SCAN on each in turn)."""
        for name in self._live():
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


def _connection(pool: Any) -> Any:
    """A connection of a redis-py pool (redis-py 5.3 and later take no
    argument, earlier ones a command name)."""
    try:
        return pool.get_connection()
    except TypeError:
        return pool.get_connection("PIPELINE")


class ShardedPipeline(Queue["redis.Redis"], DataAccessCommands, ScriptCommands):
    """Commands queued for :meth:`ShardedRedis.pipeline`; ``execute()``
    sends each shard its share on one of its connections, all shards at once,
    and returns the answers in the order the commands were queued.  A shard
    that does not answer raises :class:`chash.redis.ShardError` naming it,
    whose ``results`` hold every other shard's answers."""

    _is_async_client: Literal[False] = False
    _event_dispatcher: Any = None
    _owner: ShardedRedis

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Sends the queued commands; their answers in order."""
        stack, planned = self._take()
        if not stack:
            return []
        owner = self._owner
        if owner._hook is not None:
            return self._one_by_one(stack, raise_on_error)
        plans, groups = owner._pipeline_plans(stack, self._transaction, planned)
        if self._transaction:
            outcomes = [self._outcome(functools.partial(self._send, name, items, stack))
                        for name, items in groups.items()]
        else:
            outcomes = self._exchange(groups, stack)
        return owner._pipeline_answers(plans, groups, outcomes, raise_on_error)

    @staticmethod
    def _outcome(call: Callable[[], list[Any]]) -> list[Any] | BaseException:
        try:
            return call()
        except Exception as exc:
            return exc

    def _exchange(self, groups: Groups, stack: list[Queued]) -> list[list[Any] | BaseException]:
        """Every shard's share written on one of its connections first, then
        every answer read: the shards work at once, no thread needed.  A
        shard that fails has its whole share fail; the others' answers are
        read all the same, so no connection is left out of step."""
        owner = self._owner
        sent: list[tuple[str, Any, Any, list[Item]] | BaseException] = []
        for name, items in groups.items():
            client: Any = owner._client(name)
            connection = None
            try:
                connection = _connection(client.connection_pool)
                connection.send_packed_command(connection.pack_commands([args for _, _, args in items]))
                sent.append((name, client, connection, items))
            except FAILURES as exc:
                if connection is not None:
                    connection.disconnect()
                    client.connection_pool.release(connection)
                sent.append(owner._failure(name, exc))
        outcomes: list[list[Any] | BaseException] = []
        for entry in sent:
            if isinstance(entry, BaseException):
                outcomes.append(entry)
                continue
            name, client, connection, items = entry
            answers: list[Any] = []
            try:
                for i, _, args in items:
                    try:
                        answers.append(client.parse_response(connection, args[0], **stack[i][1]))
                    except redis.exceptions.ResponseError as error:
                        answers.append(error)
            except FAILURES as exc:
                connection.disconnect()
                outcomes.append(owner._failure(name, exc))
            else:
                owner._success(name)
                outcomes.append(answers)
            finally:
                client.connection_pool.release(connection)
        return outcomes

    def _one_by_one(self, stack: list[Queued], raise_on_error: bool) -> list[Any]:
        """While a resharding runs, each command through it, in order (a
        transaction's keys share a tag, so it stays on one shard: it is
        sent whole)."""
        owner = self._owner
        if self._transaction:
            def send(target: str | None) -> list[Any]:
                plans, groups = owner._pipeline_plans(stack, True)
                name, items = next(iter(groups.items()))
                return owner._pipeline_answers(plans, groups, [self._send(target or name, items, stack)],
                                               raise_on_error)
            answers: list[Any] = owner._hook.transaction(owner, [args for args, _ in stack], send)
            return answers
        results: list[Any] = []
        for args, options in stack:
            try:
                results.append(owner.execute_command(*args, **options))
            except Exception as exc:
                if raise_on_error:
                    raise
                results.append(exc)
        return results

    def _send(self, shard: str, items: list[Item], stack: list[Queued]) -> list[Any]:
        owner = self._owner
        pipe: Any = owner._client(shard).pipeline(transaction=self._transaction)
        for index, _, args in items:
            pipe.execute_command(*args, **stack[index][1])
        try:
            answers: list[Any] = pipe.execute(raise_on_error=False)
        except FAILURES as exc:
            raise owner._failure(shard, exc) from exc
        finally:
            pipe.reset()
        owner._success(shard)
        return answers

    def __enter__(self) -> ShardedPipeline:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.reset()
