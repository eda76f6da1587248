"""Drivers and recorders for the tests of chash.health.

A driver runs rounds of either runner from the test's own thread, so a
test written once against ``driver.round()`` checks ``HealthChecker`` and
``AsyncHealthChecker`` alike; ``Recorder`` is an ``on_change`` callback that
keeps what it was told.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chash.health import AsyncHealthChecker, HealthChecker, NodeState

try:
    import aiohttp  # noqa: F401  (only whether it imports matters)
except ImportError:  # pragma: no cover - the async runner's extra
    HAVE_AIOHTTP = False
else:
    HAVE_AIOHTTP = True

#: The keys whose owners tests compare before and after a change.
KEYS = [f"user:{i}" for i in range(3000)]

#: Either driver; both have ``checker``, ``round()`` and ``close()``.
Driver = Any


def owners(router: Any) -> dict[str, str | None]:
    """The owner of every key of ``KEYS`` in ``router``."""
    return {key: router.get_target_node(key) for key in KEYS}


class SyncDriver:
    """Runs rounds of a HealthChecker in the test's thread."""

    name = "thread"

    def __init__(self, router: Any, **kwargs: Any) -> None:
        self.checker = HealthChecker(router, **kwargs)

    def round(self, count: int = 1) -> None:
        for _ in range(count):
            self.checker.check_now()

    def close(self) -> None:
        self.checker.stop()


class AsyncDriver:
    """Runs rounds of an AsyncHealthChecker on a private event loop."""

    name = "asyncio"

    def __init__(self, router: Any, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.checker = AsyncHealthChecker(router, **kwargs)

    def round(self, count: int = 1) -> None:
        for _ in range(count):
            self.loop.run_until_complete(self.checker.check_now())

    def close(self) -> None:
        self.loop.run_until_complete(self.checker.aclose())
        self.loop.close()


class Recorder:
    """An on_change callback that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, NodeState, NodeState, str]] = []

    def __call__(self, node: str, old: NodeState, new: NodeState, reason: str) -> None:
        self.calls.append((node, old, new, reason))

    def changes(self) -> list[tuple[str, NodeState, NodeState]]:
        return [(node, old, new) for node, old, new, _ in self.calls]
