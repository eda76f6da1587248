"""From SRV records to a ring's nodes and weights: no I/O.

RFC 2782: a client uses the records of the lowest priority it can reach,
and picks among them in proportion to their weights; a target of ``.``
means the service is not offered there.  A ring does the picking, so the
records of the lowest priority become the nodes (``"target:port"``, the
target without its trailing dot) with their SRV weight as ring weight.
DNS names are
case-insensitive, so targets are lower-cased.  The records of higher priorities are backups: they are used only when no
record of a lower priority is left.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ZERO_WEIGHT", "SrvRecord", "nodes_of"]

#: The ring weight of a record of weight 0 beside records of positive
#: weight (RFC 2782: "a very small chance of being selected").  Where
#: every record of the priority has weight 0, each gets 1.0.
ZERO_WEIGHT = 0.01


@dataclass(frozen=True)
class SrvRecord:
    """One SRV record's data."""

    priority: int
    weight: int
    port: int
    target: str


def nodes_of(records: Iterable[SrvRecord]) -> dict[str, float]:
    """The nodes of the lowest priority with a usable target, with their
    ring weights (a node listed twice gets the sum); empty if none."""
    usable = [r for r in records if r.target.rstrip(".")]
    if not usable:
        return {}
    lowest = min(r.priority for r in usable)
    chosen = [r for r in usable if r.priority == lowest]
    weights: dict[str, float] = {}
    any_positive = any(r.weight > 0 for r in chosen)
    for record in sorted(chosen, key=lambda r: (r.target.lower(), r.port)):
        node = f"{record.target.rstrip('.').lower()}:{record.port}"
        share = float(record.weight) if record.weight > 0 else (
            ZERO_WEIGHT if any_positive else 1.0)
        weights[node] = weights.get(node, 0.0) + share
    return weights
