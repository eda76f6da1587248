"""Slow start in the gateway: a backend that comes back up ramps its
weight from a small share to its full weight over ``slow_start`` seconds
(``GatewayConfig.slow_start``, ``chash gateway --slow-start SECONDS``), as
HAProxy's ``slowstart`` and Envoy's slow start mode do.

``WeightRamp`` carries ``chash.weights.SlowStart``'s answers to the
gateway's own router: ``node_up`` when the health checker brings a node
back, ``step`` every ``interval`` from the gateway's loop.  Each change is
``set_weight``, so only that node's points move on the layouts whose
points depend on the node alone.  The full weights are those the nodes
had when the ramp was made (a node that fails mid-ramp comes back to its
full weight, not to the share it had reached).

``apply`` says how a weight reaches the ring: by default ``set_weight`` on
the router; worker 0 of ``chash gateway --workers N`` gives one that sets
it on its own ring and sends it to every other worker
(``chash.gateway.workers.Leader.set_weight``), so that one ramp drives them
all.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from chash.weights import SlowStart, set_weight

if TYPE_CHECKING:
    from chash.routers import MutableRouter

__all__ = ["WeightRamp"]


class WeightRamp:
    """Ramps nodes of ``router`` back to their full weights."""

    def __init__(self, router: MutableRouter, duration: float, *,
                 clock: Callable[[], float] = time.monotonic, floor: float = 0.05,
                 apply: Callable[[str, float], None] | None = None) -> None:
        """Ramp over ``duration`` seconds from ``floor`` of the full weight;
        ``apply(node, weight)`` changes a weight (default: ``set_weight``
        on ``router``)."""
        self._router = router
        self._apply = apply if apply is not None else \
            (lambda node, weight: set_weight(router, node, weight))
        self._ramp = SlowStart(duration, floor=floor)
        self._clock = clock
        self._full = dict(router.weights)
        self._task: asyncio.Task[None] | None = None

    def node_up(self, node: str) -> None:
        """``node`` is (back) in service: start its ramp (nothing when it is
        not in the router)."""
        if node not in self._router:
            return
        full = self._full.setdefault(node, self._router.weights[node])
        self._apply(node, self._ramp.begin(node, full, self._clock()))

    def node_down(self, node: str) -> None:
        """``node`` left service: its ramp stops."""
        self._ramp.forget(node)

    def reset(self, node: str, weight: float | None) -> None:
        """A reload changed ``node``'s weight to ``weight`` (None: removed
        it): its ramp stops, and a later one ramps up to ``weight``."""
        self._ramp.forget(node)
        if weight is None:
            self._full.pop(node, None)
        else:
            self._full[node] = weight

    def ramping(self) -> list[str]:
        """The nodes still ramping."""
        return self._ramp.ramping()

    def step(self) -> bool:
        """Gives every ramping node its weight for now; whether a weight
        changed."""
        changed = False
        for node, weight in self._ramp.step(self._clock()).items():
            if node in self._router:
                self._apply(node, weight)
                changed = True
        return changed

    async def _run(self, interval: float, on_change: Callable[[], object] | None) -> None:
        while True:
            await asyncio.sleep(interval)
            if self.step() and on_change is not None:
                on_change()

    def start(self, interval: float = 0.5, *,
              on_change: Callable[[], object] | None = None) -> None:
        """Steps the ramps every ``interval`` seconds on the running loop,
        calling ``on_change()`` after each step that changed a weight."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(interval, on_change))

    async def stop(self) -> None:
        """Stops stepping (the weights stay as they are)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
