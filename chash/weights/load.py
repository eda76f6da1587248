"""Weights from measured load: a node carrying more than its share gets a
smaller weight, one carrying less a larger one, step by step.

The update is damped and bounded so that noisy load figures do not make
weights swing: each step moves the weight by the ratio mean / load raised
to ``damping`` (0 < damping <= 1; 0.5 moves half-way, in log terms), at
most by ``max_step`` either way, never outside [min_weight, max_weight],
and not at all when the node's load is within ``tolerance`` of the mean.
A controller changes one node at a time (the one furthest from the mean),
so each update moves only that node's points.
"""
from __future__ import annotations

import math
from collections.abc import Mapping


def _positive(name: str, value: float) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a number > 0, not {value!r}")
    return float(value)


class LoadController:
    """Proposes one node's new weight from the nodes' loads."""

    def __init__(self, *, min_weight: float = 0.25, max_weight: float = 4.0,
                 damping: float = 0.5, max_step: float = 1.5, tolerance: float = 0.1) -> None:
        self.min_weight = _positive("min_weight", min_weight)
        self.max_weight = _positive("max_weight", max_weight)
        if self.min_weight > self.max_weight:
            raise ValueError("min_weight must not exceed max_weight")
        self.damping = _positive("damping", damping)
        if self.damping > 1:
            raise ValueError(f"damping must lie in (0, 1], not {damping!r}")
        self.max_step = _positive("max_step", max_step)
        if self.max_step < 1:
            raise ValueError(f"max_step must be >= 1, not {max_step!r}")
        if not (isinstance(tolerance, int | float) and 0 <= tolerance < 1):
            raise ValueError(f"tolerance must lie in [0, 1), not {tolerance!r}")
        self.tolerance = float(tolerance)

    def propose(self, weights: Mapping[str, float],
                loads: Mapping[str, float]) -> tuple[str, float] | None:
        """``(node, new weight)`` for the node whose load per unit of weight
        is furthest from the mean, or None when every node is within
        tolerance (or no load is known).  Loads are any non-negative
        figures (requests per second, CPU); nodes without one are left out."""
        known = {n: float(loads[n]) for n in weights if n in loads and loads[n] >= 0}
        if not known:
            return None
        total_w = sum(weights[n] for n in known)
        total_l = sum(known.values())
        if total_l <= 0 or total_w <= 0:
            return None

        def ratio(node: str) -> float:
            # load carried over load deserved by weight share
            return max(known[node], 1e-12) / (total_l * weights[node] / total_w)

        node = max(known, key=lambda n: abs(math.log(ratio(n))))
        r = ratio(node)
        if abs(r - 1) <= self.tolerance:
            return None
        factor = min(self.max_step, max(1 / self.max_step, r ** -self.damping))
        weight = min(self.max_weight, max(self.min_weight, weights[node] * factor))
        if weight == weights[node]:
            return None
        return node, weight
