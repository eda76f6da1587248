"""Slow start: a node that joins or comes back ramps its weight up from a
small share to its full weight over a duration, as HAProxy's ``slowstart``
and Envoy's slow start mode do, so it does not take its whole share of
traffic (and cold caches) at once.

``SlowStart`` keeps only times and weights; the caller gives it the time
and applies the weights it answers (``set_weight``), so it is tested
without clocks or threads.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class _Ramp:
    start: float
    full: float


class SlowStart:
    """Ramps nodes' weights linearly from ``floor`` x their full weight to
    it, over ``duration`` seconds."""

    def __init__(self, duration: float, *, floor: float = 0.05) -> None:
        if not (isinstance(duration, int | float) and math.isfinite(duration) and duration > 0):
            raise ValueError(f"duration must be a number of seconds > 0, not {duration!r}")
        if not (isinstance(floor, int | float) and 0 < floor <= 1):
            raise ValueError(f"floor must lie in (0, 1], not {floor!r}")
        self.duration = float(duration)
        self.floor = float(floor)
        self._ramps: dict[str, _Ramp] = {}

    def begin(self, node: str, full_weight: float, now: float) -> float:
        """Starts (or restarts) ``node``'s ramp to ``full_weight`` at time
        ``now``; returns the weight to give it now."""
        if not full_weight > 0:
            raise ValueError(f"full_weight must be > 0, not {full_weight!r}")
        self._ramps[node] = _Ramp(now, float(full_weight))
        return self.floor * full_weight

    def forget(self, node: str) -> None:
        """Stops ``node``'s ramp (it left); nothing when it has none."""
        self._ramps.pop(node, None)

    def ramping(self) -> list[str]:
        """The nodes still ramping."""
        return list(self._ramps)

    def weight(self, node: str, now: float) -> float | None:
        """``node``'s weight at ``now``, or None when it is not ramping."""
        ramp = self._ramps.get(node)
        if ramp is None:
            return None
        share = min(1.0, max(self.floor, (now - ramp.start) / self.duration))
        return share * ramp.full

    def step(self, now: float) -> dict[str, float]:
        """Every ramping node's weight at ``now``; nodes that reached their
        full weight are answered once more and then forgotten."""
        out = {}
        for node in list(self._ramps):
            weight = self.weight(node, now)
            assert weight is not None
            out[node] = weight
            if now - self._ramps[node].start >= self.duration:
                del self._ramps[node]
        return out
