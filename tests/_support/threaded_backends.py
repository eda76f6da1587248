"""Echo backends (``_support.echo_backends``) served by an event loop of
their own in a thread, so that sync tests can use them as well as asyncio
ones: ``EchoFarm(3)``, then ``farm.stop(i)``, ``farm.start(i)``,
``farm.reset()`` (everyone up, answering 200 at once) and ``farm.close()``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from _support.echo_backends import EchoBackend

T = TypeVar("T")


class EchoFarm:
    """``count`` EchoBackends named ``b0``, ``b1``... on a loop in a thread."""

    def __init__(self, count: int) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="echo-farm",
                                        daemon=True)
        self._thread.start()
        self.backends = [EchoBackend(f"b{i}") for i in range(count)]
        for backend in self.backends:
            self.call(backend.start())

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
        """Run ``coro`` on the farm's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def addresses(self) -> list[str]:
        return [backend.address for backend in self.backends]

    def by_address(self, address: str) -> EchoBackend:
        return next(b for b in self.backends if b.address == address)

    def stop(self, address: str) -> EchoBackend:
        """Stop the backend at ``address`` (its port refuses connections)."""
        backend = self.by_address(address)
        self.call(backend.stop())
        return backend

    def reset(self) -> None:
        """Every backend listening, answering 200 at once, counters at zero."""
        for backend in self.backends:
            if not backend.running:
                self.call(backend.start())
            backend.status, backend.delay, backend.gate = 200, 0.0, None
            backend.hits, backend.sunk = 0, 0
            backend.peers.clear()

    def close(self) -> None:
        for backend in self.backends:
            self.call(backend.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10.0)
        self.loop.close()
