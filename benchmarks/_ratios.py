"""Ratios of a side-by-side benchmark: the two statistics every script
reports and the rule that judges a target on them.

Two contenders timed in the same interleaved rounds give two honest
ratios, and they differ when the load swings during the run:

* the **ratio of the medians**: median(a) / median(b), each median taken
  over the rounds on its own;
* the **median of the per-round ratios**: median(a_i / b_i), each round's
  two samples taken moments apart, so a slow stretch of the machine hits
  both sides of a ratio alike.

Every result prints both, as ``of medians / of rounds``, and a target
holds only when both do.  A figure quoted from a result is the more
conservative of the two (and of the CPU-time ones, where samples were
preempted): ``conservative``.  Leaf module: no chash, no third party.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

#: What a result file says its ratio cells are.
LEGEND = ("ratio cells: the ratio of the medians / the median of the per-round ratios; "
          "a target holds only when both do")


def of_medians(a: Sequence[float], b: Sequence[float]) -> float:
    """median(a) / median(b); nan when b's median is 0."""
    below = statistics.median(b)
    return statistics.median(a) / below if below else math.nan


def of_rounds(a: Sequence[float], b: Sequence[float]) -> float:
    """The median over the rounds of a_i / b_i.  A contender with fewer
    samples (a slow one stops early) is paired with the other's first ones;
    rounds where b_i is 0 are left out (nan when none is left)."""
    pairs = [x / y for x, y in zip(a, b, strict=False) if y]
    return statistics.median(pairs) if pairs else math.nan


def both(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(ratio of the medians, median of the per-round ratios) of a over b."""
    return of_medians(a, b), of_rounds(a, b)


def meets(value: float | None, op: str, threshold: float) -> bool | None:
    """value op threshold, op ">=" or "<="; None for no value."""
    if value is None:
        return None
    if op not in (">=", "<="):
        raise ValueError(f"op must be '>=' or '<=', not {op!r}")
    return value >= threshold if op == ">=" else value <= threshold


def holds(values: Iterable[float | None], op: str, threshold: float) -> bool:
    """A target holds only when every statistic given (None: not measured)
    meets it."""
    verdicts = [meets(v, op, threshold) for v in values if v is not None]
    return bool(verdicts) and all(verdicts)


def conservative(values: Iterable[float | None], op: str) -> float:
    """The statistic least favourable to the target's side: the smallest
    for a ">=" target (higher is better), the largest for "<="."""
    present = [v for v in values if v is not None and not math.isnan(v)]
    if not present:
        return math.nan
    return min(present) if op == ">=" else max(present)


def fmt(value: float) -> str:
    """A ratio as the tables print it: 3 significant figures, thousands
    separated."""
    if math.isnan(value):
        return "nan"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def pair_text(medians: float, rounds: float, unit: str = "×") -> str:
    """``0.49× / 0.53×``: of medians, then of rounds."""
    return f"{fmt(medians)}{unit} / {fmt(rounds)}{unit}"
