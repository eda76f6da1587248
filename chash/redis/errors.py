"""The errors of a shard that failed, as redis-py's own errors.

``ShardError`` is a ``redis.exceptions.ConnectionError`` (and
``ShardTimeoutError`` also a ``redis.exceptions.TimeoutError``), so code
that catches redis-py's errors keeps working; it names the shard and its
address, and a pipeline's carries every command's answer (``results``),
the failed shard's commands holding the error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chash._optional import require
from chash.redis.commands import RoutingError

if TYPE_CHECKING:
    from redis.exceptions import ConnectionError as _Connection
    from redis.exceptions import TimeoutError as _Timeout
else:
    _exceptions = require("redis.exceptions", user="chash.redis", extra="redis", package="redis-py")
    _Connection = _exceptions.ConnectionError
    _Timeout = _exceptions.TimeoutError

__all__ = ["RoutingError", "ShardError", "ShardTimeoutError", "shard_error"]


class ShardError(_Connection):
    """A shard did not answer (refused, closed, timed out): ``shard`` its
    name, ``address`` its address, ``results`` a pipeline's answers in the
    caller's order (None for a single command)."""

    def __init__(self, message: str, *, shard: str, address: str,
                 results: list[Any] | None = None) -> None:
        super().__init__(message)
        self.shard = shard
        self.address = address
        self.results = results


class ShardTimeoutError(ShardError, _Timeout):
    """A shard took longer than the client's ``socket_timeout``."""


def shard_error(shard: str, address: str, exc: BaseException,
                results: list[Any] | None = None) -> ShardError:
    """The ShardError for ``exc`` met on ``shard`` (a timeout's subclass for a timeout)."""
    kind = ShardTimeoutError if isinstance(exc, _Timeout | TimeoutError) else ShardError
    return kind(f"shard {shard} ({address}): {exc}", shard=shard, address=address, results=results)
