"""Bounded waits: poll a condition until it holds, or fail naming it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

TIMEOUT = 20.0
INTERVAL = 0.01


def _timed_out(what: str, timeout: float) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g} s waiting until {what}")


def wait_until(predicate: Callable[[], object], what: str = "the condition holds",
               timeout: float = TIMEOUT, interval: float = INTERVAL) -> None:
    """Poll ``predicate()`` until it is true; AssertionError naming ``what``
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout)
        time.sleep(interval)


async def eventually(predicate: Callable[[], object], what: str = "the condition holds",
                     timeout: float = TIMEOUT, interval: float = INTERVAL) -> None:
    """``wait_until`` for a running event loop: sleeps without blocking it,
    and awaits ``predicate()`` when it returns an awaitable."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout)
        await asyncio.sleep(interval)


def run(coro: Awaitable[T], timeout: float = 60.0) -> T:
    """Run ``coro`` in a new event loop, bounded by ``timeout`` seconds.

    The bound is kept in the coroutine's own task, so the task set a test
    sees is exactly the one it made."""
    async def bounded() -> Any:
        async with asyncio.timeout(timeout):
            return await coro
    result: T = asyncio.run(bounded())
    return result
