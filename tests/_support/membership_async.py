"""An ``AsyncRedisMembership`` driven from synchronous test code.

``BlockingMembership`` runs the asyncio driver on an event loop of its own,
in a thread, and awaits its coroutine methods there, so that a test written
against ``RedisMembership`` runs unchanged against either driver.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["BlockingMembership"]


class BlockingMembership:
    """Wraps the membership ``make()`` builds on the wrapper's loop; every
    attribute is the membership's, coroutine methods run to completion."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-loop",
                                       daemon=True)
        self.thread.start()

        async def build() -> Any:
            return make()

        self.membership = self.wait(build())

    def wait(self, awaitable: Awaitable[Any], timeout: float = 60.0) -> Any:
        """Run ``awaitable`` on the loop and return its result."""
        async def run() -> Any:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.membership, name)
        if inspect.iscoroutinefunction(value):
            @functools.wraps(value)
            def blocking(*args: Any, **kwargs: Any) -> Any:
                return self.wait(value(*args, **kwargs))
            return blocking
        return value

    def close(self) -> None:
        """Stop the membership, close its client, end the loop."""
        try:
            self.wait(self.membership.stop())
            self.wait(self.membership.client.aclose())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()
