"""What ``chash simulate`` measures: its setup (``SimulationConfig``), the
simulated keys and nodes, and the constants the measures share."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chash._chash import HASHES

if TYPE_CHECKING:
    from chash._chash import HashName

__all__ = ["DEFAULT_BALANCE_VNODES", "DEFAULT_RING_VNODES", "MAX_MAGLEV_SIZE", "TIMING_REPEATS",
           "SimulationConfig", "is_prime", "key_names", "node_names"]

#: Virtual-node counts of the ring columns in the remap and comparison tables.
DEFAULT_RING_VNODES = (10, 150, 1000)
#: Virtual-node counts of the load-balance and cost tables.
DEFAULT_BALANCE_VNODES = (50, 100, 150, 200, 500, 1000)
#: Largest Maglev table the C core builds.
MAX_MAGLEV_SIZE = 1 << 30
#: Timings are the best of this many runs.
TIMING_REPEATS = 3


@dataclass(frozen=True)
class SimulationConfig:
    """What ``simulate()`` measures; the defaults are the documented setup."""

    keys: int = 1_000_000
    """Keys routed: ``user_0`` .. ``user_{keys-1}``."""
    first_nodes: int = 3
    """Cluster size the growth starts from."""
    last_nodes: int = 20
    """Cluster size it grows to, one node at a time."""
    ring_vnodes: tuple[int, ...] = DEFAULT_RING_VNODES
    """Virtual nodes a node for the ring columns of the remap table."""
    balance_vnodes: tuple[int, ...] = DEFAULT_BALANCE_VNODES
    """Virtual nodes a node for the load-balance and ring-cost tables."""
    bounded_vnodes: tuple[int, ...] = (10, 150)
    """Rings the bounded-loads strategy runs over."""
    balance_factor: float = 1.25
    """The bounded-loads factor c: no node above ceil(c * keys / nodes)."""
    maglev_size: int = 65537
    """Maglev lookup table size (a prime, at least the node count)."""
    hash: HashName = "md5"
    """Hash of keys and nodes, one of ``chash.HASHES``."""

    def __post_init__(self) -> None:
        if self.keys < 1:
            raise ValueError(f"keys must be >= 1, not {self.keys}")
        if not 2 <= self.first_nodes < self.last_nodes:
            raise ValueError(
                f"need 2 <= first_nodes < last_nodes, not {self.first_nodes} and {self.last_nodes}")
        if self.last_nodes > 10_000:
            raise ValueError(f"last_nodes must be <= 10000, not {self.last_nodes}")
        if not self.balance_vnodes:
            raise ValueError("balance_vnodes must not be empty")
        for name in ("ring_vnodes", "balance_vnodes", "bounded_vnodes"):
            values = getattr(self, name)
            if not all(1 <= v <= 100_000 for v in values):
                raise ValueError(f"{name} must lie between 1 and 100000, not {values}")
        if not _distinct(self.ring_vnodes) or not _distinct(self.bounded_vnodes):
            raise ValueError("ring_vnodes and bounded_vnodes must not repeat a value")
        if not math.isfinite(self.balance_factor) or self.balance_factor < 1.0:
            raise ValueError(f"balance_factor must be a finite number >= 1, not {self.balance_factor}")
        if not is_prime(self.maglev_size) or self.maglev_size < self.last_nodes:
            raise ValueError(
                f"maglev_size must be a prime >= last_nodes ({self.last_nodes}), not {self.maglev_size}")
        if self.maglev_size > MAX_MAGLEV_SIZE:
            raise ValueError(f"maglev_size must be <= 2**30, not {self.maglev_size}")
        if self.hash not in HASHES:
            raise ValueError(f"unknown hash {self.hash!r}: expected one of {', '.join(HASHES)}")


def _distinct(values: Sequence[int]) -> bool:
    return len(set(values)) == len(values)


def is_prime(n: int) -> bool:
    """True when n is prime (trial division: instant for table sizes)."""
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    d = 3
    while d * d <= n:
        if n % d == 0:
            return False
        d += 2
    return True


def key_names(count: int) -> list[str]:
    """The simulated keys, ``user_0`` .. ``user_{count-1}``."""
    return [f"user_{i}" for i in range(count)]


def node_names(count: int) -> list[str]:
    """The simulated nodes in the order they join: ``node-01``, ``node-02``, ..."""
    return [f"node-{i:02d}" for i in range(1, count + 1)]
