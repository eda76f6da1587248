"""What the demos show as they go: a timeline of events, the gateway's
first failed request per backend and its health transitions as events
(``HealthLog`` also times the stopped backend's going and return), and a
poll with a timeout."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["FailureLog", "HealthLog", "Timeline", "until"]


class _Result(Protocol):
    timeline: list[tuple[float, str]]


class _Outage(Protocol):
    """A result that times one backend's outage."""

    down_at: float | None
    back_at: float | None
    restarted_at: float | None


class Timeline:
    """Timestamped events, printed as they happen."""

    def __init__(self, result: _Result, out: Callable[[str], None] | None) -> None:
        self._result = result
        self._out = out
        self._t0 = time.monotonic()

    def now(self) -> float:
        """Seconds since the timeline began."""
        return time.monotonic() - self._t0

    def __call__(self, text: str) -> float:
        """Record ``text`` now (and print it); when, in seconds."""
        t = self.now()
        self._result.timeline.append((t, text))
        if self._out is not None:
            self._out(f"{t:6.1f} s  {text}")
        return t


class FailureLog(logging.Handler):
    """Turns the gateway's first failed request to a backend into an event."""

    def __init__(self, timeline: Timeline) -> None:
        super().__init__(logging.WARNING)
        self._timeline = timeline
        self._seen: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        """Record the first failure of each node in the timeline."""
        node = getattr(record, "node", None)
        # The gateway package logs as "chash.gateway" or one of its children.
        from_gateway = record.name == "chash.gateway" or record.name.startswith("chash.gateway.")
        if not from_gateway or node is None or node in self._seen:
            return
        self._seen.add(node)
        reason = record.args[1] if isinstance(record.args, tuple) and len(record.args) > 1 \
            else record.getMessage()
        self._timeline(f"gateway: a request to {node} failed ({reason}); "
                       "retried on the user's next node")


class HealthLog:
    """The gateway's health callback (``on_change``): every transition into
    the timeline, and when the stopped backend ``node`` went out of the
    ring and, once restarted, came back, into ``result``."""

    def __init__(self, timeline: Timeline, result: _Outage, node: str) -> None:
        self._timeline = timeline
        self._result = result
        self._node = node

    def __call__(self, node: str, old: Any, new: Any, reason: str) -> None:
        """Record one transition of ``node``."""
        result = self._result
        if str(new) == "down":
            t = self._timeline(f"health: {node} is down ({reason}); out of the ring")
            if node == self._node and result.down_at is None:
                result.down_at = t
        else:
            t = self._timeline(f"health: {node} is up ({reason}); back in the ring")
            if node == self._node and result.back_at is None \
                    and result.restarted_at is not None:
                result.back_at = t


async def until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Poll ``predicate`` every 50 ms for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
