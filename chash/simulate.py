"""Measured answers to the questions a reader of consistent hashing asks.

``simulate()`` routes a fixed set of keys (``user_0`` .. ``user_{K-1}``)
through a cluster growing one node at a time (``node-01``, ``node-02``, ...)
and reports, as a JSON-ready dict:

- ``remap``: the fraction of keys that change node at each growth step and
  when one node fails, for ``hash % N``, the ring at several virtual-node
  counts, jump consistent hash, rendezvous hashing, Maglev and consistent
  hashing with bounded loads, beside the ideal ``1/N``;
- ``balance_by_vnodes`` and ``balance_by_strategy``: how evenly the keys
  spread (max/mean, min/mean, standard deviation) over the final cluster;
- ``ring_cost``: the ring's memory and build time by virtual-node count;
- ``comparison``: one row a strategy (and round robin, which has no key
  affinity at all) with the figures above side by side.

Every strategy is computed from scratch for each node set, so a number
depends only on the keys and the nodes.  Shrinking a cluster by its newest
node moves exactly the keys that growing it moved, so the growth steps read
backwards are the shrink steps; a failure removes a node from the middle.

``render()`` formats a result as text tables and ``plot()`` draws it with
matplotlib (the ``plot`` extra).  All the heavy loops run in C.
"""
from __future__ import annotations

import math
import os
import random
import sys
import time
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from chash import _chash
from chash._chash import HASHES, ConsistentHashRouter
from chash._optional import require
from chash._text import plural

if TYPE_CHECKING:
    from chash._chash import HashName

__all__ = [
    "DEFAULT_BALANCE_VNODES",
    "DEFAULT_RING_VNODES",
    "MAX_MAGLEV_SIZE",
    "SimulationConfig",
    "Strategy",
    "Workload",
    "build_strategies",
    "is_prime",
    "key_names",
    "load_stats",
    "node_names",
    "plot",
    "render",
    "simulate",
]

#: Virtual-node counts of the ring columns in the remap and comparison tables.
DEFAULT_RING_VNODES = (10, 150, 1000)
#: Virtual-node counts of the load-balance and cost tables.
DEFAULT_BALANCE_VNODES = (50, 100, 150, 200, 500, 1000)
#: Largest Maglev table the C core builds.
MAX_MAGLEV_SIZE = 1 << 30
#: Timings are the best of this many runs.
TIMING_REPEATS = 3
#: Seed of the request order of round robin's second pass.
ROUND_ROBIN_SEED = 6

# The private C helpers (strategy functions of chash._chash, typed by its
# stub): results are array('I') of node indices or array('Q') of 64-bit hashes.
_key_hashes = _chash._key_hashes
_moved = _chash._moved
_counts = _chash._counts
_relabel = _chash._relabel


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


# ----------------------------------------------------------------------
# Strategies


class Workload:
    """The keys, their 64-bit hashes, and how long hashing them took (best of three)."""

    def __init__(self, keys: list[str], hash_name: HashName) -> None:
        self.keys = keys
        self.hash_name = hash_name
        self.hash_seconds = math.inf
        for _ in range(TIMING_REPEATS):
            started = time.perf_counter()
            self.hashes = _key_hashes(keys, hash_name)
            self.hash_seconds = min(self.hash_seconds, time.perf_counter() - started)


class Strategy:
    """One way of assigning keys to nodes, measured by ``simulate()``.

    ``assign(nodes)`` returns, for every key of the workload, the index of
    its node in ``nodes``; ``route_seconds`` is how long the routing itself
    took in the last call (no setup, no bookkeeping).
    """

    id = ""
    """Short stable name, the key in JSON results."""
    label = ""
    """Readable name for tables and legends."""
    hashes_keys = False
    """True when ``route_seconds`` includes hashing the keys."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.route_seconds = 0.0

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index (into ``nodes``) of every key."""
        raise NotImplementedError

    def after_failure(self, nodes: Sequence[str], failed: int) -> list[str]:
        """The node list once ``nodes[failed]`` is gone (order kept)."""
        return [node for i, node in enumerate(nodes) if i != failed]

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """Bytes of routing state the strategy keeps for ``nodes`` (besides the node list)."""
        return 0

    def ns_per_key(self) -> float:
        """Routing cost a key in the last ``assign``, key hashing included."""
        seconds = self.route_seconds + (0.0 if self.hashes_keys else self.workload.hash_seconds)
        return 1e9 * seconds / max(1, len(self.workload.keys))


class ModuloStrategy(Strategy):
    """``hash % N``: the node list indexed by the key hash modulo its length."""

    id = "modulo"
    label = "hash % N"

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        started = time.perf_counter()
        result = _chash._modulo_assign(self.workload.hashes, len(nodes))
        self.route_seconds = time.perf_counter() - started
        return result


class JumpStrategy(Strategy):
    """Jump consistent hash: node i is bucket i; only the last bucket can go.

    A failed node in the middle hands its bucket number to the last node
    (swap and shrink by one), the usual way to use jump with named nodes.
    """

    id = "jump"
    label = "jump"

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        started = time.perf_counter()
        result = _chash._jump_assign(self.workload.hashes, len(nodes))
        self.route_seconds = time.perf_counter() - started
        return result

    def after_failure(self, nodes: Sequence[str], failed: int) -> list[str]:
        """The last node takes over the failed node's bucket number."""
        rest = list(nodes[:-1])
        if failed < len(rest):
            rest[failed] = nodes[-1]
        return rest


class RendezvousStrategy(Strategy):
    """Highest random weight: the node scoring highest for the key wins."""

    id = "rendezvous"
    label = "rendezvous"

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        node_hashes = _key_hashes(nodes, self.workload.hash_name)
        started = time.perf_counter()
        result = _chash._rendezvous_assign(self.workload.hashes, node_hashes)
        self.route_seconds = time.perf_counter() - started
        return result

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """One 64-bit hash a node."""
        return 8 * len(nodes)


class MaglevStrategy(Strategy):
    """Maglev: a prime-sized lookup table filled from per-node permutations."""

    id = "maglev"
    label = "maglev"

    def __init__(self, workload: Workload, size: int) -> None:
        super().__init__(workload)
        self.size = size

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key."""
        table = _chash._maglev_table(_key_hashes(nodes, self.workload.hash_name), self.size)
        started = time.perf_counter()
        result = _chash._table_assign(self.workload.hashes, table)
        self.route_seconds = time.perf_counter() - started
        return result

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """The table: one 32-bit node index an entry."""
        return 4 * self.size


class RingStrategy(Strategy):
    """The consistent-hash ring (``ConsistentHashRouter``) with v virtual nodes."""

    hashes_keys = True

    def __init__(self, workload: Workload, vnodes: int) -> None:
        super().__init__(workload)
        self.vnodes = vnodes
        self.id = f"ring-{vnodes}"
        self.label = f"ring/{vnodes}"

    def router(self, nodes: Sequence[str]) -> ConsistentHashRouter:
        """A router holding ``nodes``."""
        router = ConsistentHashRouter(self.vnodes, hash=self.workload.hash_name)
        router.add_service_nodes(nodes)
        return router

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key, through the router's batch lookup."""
        router = self.router(nodes)
        started = time.perf_counter()
        owners = router.get_target_nodes(self.workload.keys)
        self.route_seconds = time.perf_counter() - started
        result = _chash._node_indices(owners, nodes)
        return result

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """Heap bytes of the ring engine."""
        return self.router(nodes).memory_bytes


class BoundedStrategy(RingStrategy):
    """Consistent hashing with bounded loads over the ring with v virtual nodes.

    Keys are placed in order; each goes to the first node clockwise from its
    ring position whose load is below ceil(c * (placed + 1) / N).  Points
    several nodes share count once, for the node that owns them on the ring.
    """

    hashes_keys = False

    def __init__(self, workload: Workload, vnodes: int, balance_factor: float) -> None:
        super().__init__(workload, vnodes)
        self.balance_factor = balance_factor
        self.id = f"bounded-{vnodes}"
        self.label = f"bounded/{vnodes}"

    def assign(self, nodes: Sequence[str]) -> array[int]:
        """Node index of every key, placed one by one under the load bound
        over the router's own ring (its node order is that of nodes)."""
        router = self.router(nodes)
        started = time.perf_counter()
        result = _chash._bounded_assign(router, self.workload.hashes, self.balance_factor)
        self.route_seconds = time.perf_counter() - started
        return result

    def state_bytes(self, nodes: Sequence[str]) -> int:
        """The ring plus one load counter a node."""
        return super().state_bytes(nodes) + 8 * len(nodes)


def build_strategies(config: SimulationConfig, workload: Workload) -> list[Strategy]:
    """The strategies of the remap and comparison tables, in column order."""
    strategies: list[Strategy] = [ModuloStrategy(workload)]
    strategies += [RingStrategy(workload, v) for v in config.ring_vnodes]
    strategies += [JumpStrategy(workload), RendezvousStrategy(workload),
                   MaglevStrategy(workload, config.maglev_size)]
    strategies += [BoundedStrategy(workload, v, config.balance_factor) for v in config.bounded_vnodes]
    return strategies


# ----------------------------------------------------------------------
# Measurements


def load_stats(counts: Sequence[float]) -> dict[str, float]:
    """max/mean, min/mean and the (population) standard deviation of loads."""
    mean = sum(counts) / len(counts)
    stddev = math.sqrt(sum((c - mean) ** 2 for c in counts) / len(counts))
    return {
        "max_over_mean": max(counts) / mean if mean else 0.0,
        "min_over_mean": min(counts) / mean if mean else 0.0,
        "stddev": stddev,
        "relative_stddev": stddev / mean if mean else 0.0,
    }


def _random_floor(keys: int, nodes: int) -> float:
    """Relative standard deviation of loads when every key picks a node at random."""
    p = 1.0 / nodes
    return math.sqrt(keys * p * (1 - p)) / (keys * p)


def _labels(nodes: Sequence[str], reference: Sequence[str]) -> array[int]:
    position = {node: i for i, node in enumerate(reference)}
    return array("I", [position[node] for node in nodes])


def _failure_sizes(config: SimulationConfig) -> list[int]:
    return sorted({config.first_nodes, config.last_nodes})


def _measure_remap(config: SimulationConfig, workload: Workload,
                   strategies: Sequence[Strategy]) -> dict[str, Any]:
    """Growth steps and failures for every strategy; also the final loads."""
    keys = len(workload.keys)
    all_nodes = node_names(config.last_nodes)
    growth: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    final: dict[str, dict[str, Any]] = {}
    previous: dict[str, array[int]] = {}
    for n in range(config.first_nodes, config.last_nodes + 1):
        nodes = all_nodes[:n]
        current = {s.id: s.assign(nodes) for s in strategies}
        if previous:
            growth.append({
                "from": n - 1,
                "to": n,
                "ideal": 1.0 / n,
                "moved": {s.id: _moved(previous[s.id], current[s.id]) / keys for s in strategies},
            })
        if n == config.last_nodes:
            # Timed twice more, keeping the best, before the failure below
            # reassigns: these are the full cluster's timings.
            for strategy in strategies:
                best = strategy.route_seconds
                for _ in range(TIMING_REPEATS - 1):
                    strategy.assign(nodes)
                    best = min(best, strategy.route_seconds)
                strategy.route_seconds = best
            final = {
                s.id: {
                    "loads": _counts(current[s.id], n),
                    "ns_per_key": s.ns_per_key(),
                    "state_bytes": s.state_bytes(nodes),
                }
                for s in strategies
            }
        if n in _failure_sizes(config):
            failures.append(_measure_failure(nodes, current, strategies, keys))
        previous = current
    return {"growth": growth, "failure": failures, "final": final}


def _measure_failure(nodes: list[str], current: dict[str, array[int]],
                     strategies: Sequence[Strategy], keys: int) -> dict[str, Any]:
    n = len(nodes)
    failed = (n - 1) // 2
    moved: dict[str, float] = {}
    owned: dict[str, float] = {}
    for s in strategies:
        survivors = s.after_failure(nodes, failed)
        after = _relabel(s.assign(survivors), _labels(survivors, nodes))
        moved[s.id] = _moved(current[s.id], after) / keys
        owned[s.id] = _counts(current[s.id], n)[failed] / keys
    return {"from": n, "to": n - 1, "failed": nodes[failed], "ideal": 1.0 / n,
            "moved": moved, "owned": owned}


def _measure_round_robin(config: SimulationConfig, keys: int) -> dict[str, Any]:
    """Round robin over two passes of requests, one a key each pass.

    Pass one asks for every key in order, pass two for every key again in a
    shuffled order (a fixed seed); request r goes to node r % N.  Affinity
    is the share of keys whose second request reaches the node of their
    first; a growth or a failure happens between the passes.
    """
    n = config.last_nodes
    order = list(range(keys))
    random.Random(ROUND_ROBIN_SEED).shuffle(order)
    # Indexed by pass-two position j: the key asked for (whose pass-one
    # request number is the key's own number), and the pass-two request number.
    first_pass = array("Q", order)
    second_pass = array("Q", range(keys, 2 * keys))
    stable_before: array[int] = _chash._modulo_assign(first_pass, n)
    stable_after: array[int] = _chash._modulo_assign(second_pass, n)
    grown_before: array[int] = _chash._modulo_assign(first_pass, n - 1)
    failed = (n - 1) // 2
    all_nodes = node_names(n)
    survivors = [node for i, node in enumerate(all_nodes) if i != failed]
    failed_after = _relabel(_chash._modulo_assign(second_pass, n - 1), _labels(survivors, all_nodes))
    return {
        "same_node_on_repeat": 1.0 - _moved(stable_before, stable_after) / keys,
        "growth_moved": _moved(grown_before, stable_after) / keys,
        "failure_moved": _moved(stable_before, failed_after) / keys,
        "loads": _counts(stable_before, n),
    }


def _measure_ring(config: SimulationConfig, workload: Workload) -> list[dict[str, Any]]:
    """Balance, memory and timings of the ring for each virtual-node count."""
    nodes = node_names(config.last_nodes)
    rows = []
    for vnodes in config.balance_vnodes:
        build_seconds = batch_seconds = math.inf
        router = ConsistentHashRouter(vnodes, hash=workload.hash_name)
        for _ in range(TIMING_REPEATS):
            started = time.perf_counter()
            router = ConsistentHashRouter(vnodes, hash=workload.hash_name)
            for node in nodes:
                router.add_service_node(node)
            build_seconds = min(build_seconds, time.perf_counter() - started)
            started = time.perf_counter()
            ConsistentHashRouter(vnodes, hash=workload.hash_name).add_service_nodes(nodes)
            batch_seconds = min(batch_seconds, time.perf_counter() - started)
        started = time.perf_counter()
        distribution = router.key_distribution(workload.keys)
        lookup_seconds = time.perf_counter() - started
        loads = [distribution[node] for node in nodes]
        ownership = router.ownership()
        shares = [ownership[node] for node in nodes]
        arcs = load_stats(shares)
        points = sum(router.points.values())
        rows.append({
            "virtual_nodes": vnodes,
            "points": points,
            "loads": loads,
            **load_stats(loads),
            "arc_relative_stddev": arcs["relative_stddev"],
            "memory_bytes": router.memory_bytes,
            "bytes_per_point": router.memory_bytes / points,
            "python_bytes": _python_ring_bytes(router),
            "build_ms": 1e3 * build_seconds,
            "batch_build_ms": 1e3 * batch_seconds,
            "lookup_ns_per_key": 1e9 * lookup_seconds / max(1, len(workload.keys)),
        })
    return rows


def _python_ring_bytes(router: ConsistentHashRouter) -> int:
    """Bytes the same ring takes as a sorted list of ints plus an int -> node dict.

    The ints are counted once (the list and the dict share them); the node
    strings are not counted, as the C ring does not count its node table
    strings as points either.
    """
    ring = router.hash_ring
    node_map = router.node_map
    return sys.getsizeof(ring) + sum(sys.getsizeof(p) for p in ring) + sys.getsizeof(node_map)


def simulate(config: SimulationConfig | None = None) -> dict[str, Any]:
    """Run every measurement of ``config`` and return a JSON-ready dict."""
    config = config or SimulationConfig()
    started = time.perf_counter()
    workload = Workload(key_names(config.keys), config.hash)
    strategies = build_strategies(config, workload)
    remap = _measure_remap(config, workload, strategies)
    ring_rows = _measure_ring(config, workload)
    round_robin = _measure_round_robin(config, config.keys)

    final = remap["final"]
    by_strategy = [
        {"id": s.id, "label": s.label, "loads": final[s.id]["loads"], **load_stats(final[s.id]["loads"])}
        for s in strategies
    ]
    last_step = remap["growth"][-1]
    last_failure = remap["failure"][-1]
    comparison: list[dict[str, Any]] = []
    for s in strategies:
        ratios = [step["moved"][s.id] / step["ideal"] for step in remap["growth"]]
        comparison.append({
            "id": s.id,
            "label": s.label,
            "growth_moved": last_step["moved"][s.id],
            "growth_mean_over_ideal": sum(ratios) / len(ratios),
            "failure_moved": last_failure["moved"][s.id],
            "same_node_on_repeat": 1.0,
            "max_over_mean": load_stats(final[s.id]["loads"])["max_over_mean"],
            "state_bytes": final[s.id]["state_bytes"],
            "ns_per_key": final[s.id]["ns_per_key"],
        })
    comparison.append({
        "id": "round-robin",
        "label": "round robin",
        "growth_moved": round_robin["growth_moved"],
        "growth_mean_over_ideal": None,
        "failure_moved": round_robin["failure_moved"],
        "same_node_on_repeat": round_robin["same_node_on_repeat"],
        "max_over_mean": load_stats(round_robin["loads"])["max_over_mean"],
        "state_bytes": 8,
        "ns_per_key": None,
    })
    return {
        "config": asdict(config),
        "keys": config.keys,
        "nodes": node_names(config.last_nodes),
        "strategies": [{"id": s.id, "label": s.label} for s in strategies],
        "remap": {"growth": remap["growth"], "failure": remap["failure"]},
        "balance_by_vnodes": ring_rows,
        "balance_by_strategy": by_strategy,
        "random_relative_stddev": _random_floor(config.keys, config.last_nodes),
        "ring_cost": [
            {k: row[k] for k in ("virtual_nodes", "points", "memory_bytes", "bytes_per_point",
                                 "python_bytes", "build_ms", "batch_build_ms",
                                 "lookup_ns_per_key")}
            for row in ring_rows
        ],
        "comparison": comparison,
        "comparison_at": {"growth": [last_step["from"], last_step["to"]],
                          "failure": [last_failure["from"], last_failure["to"]],
                          "growth_ideal": last_step["ideal"], "failure_ideal": last_failure["ideal"]},
        "seconds": time.perf_counter() - started,
    }


# ----------------------------------------------------------------------
# Text


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Right-aligned columns but the first, a rule under the headers."""
    body = [list(row) for row in rows]
    widths = [max([len(headers[i]), *(len(row[i]) for row in body)]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(row) for row in body)]


def _pct(value: float, digits: int = 2) -> str:
    return f"{100.0 * value:.{digits}f}%"


def _bytes(value: int) -> str:
    if value >= 10 * 1024 * 1024:
        return f"{value / (1024 * 1024):.1f} MiB"
    if value >= 10 * 1024:
        return f"{value / 1024:.1f} KiB"
    return f"{value} B"


def render(result: dict[str, Any]) -> str:
    """The result as readable text tables."""
    config = result["config"]
    keys = result["keys"]
    last = config["last_nodes"]
    strategies = result["strategies"]
    ids = [s["id"] for s in strategies]
    out: list[str] = [
        f"chash simulate: {plural(keys, 'key')}, {config['first_nodes']} -> {last} nodes, "
        f"hash {config['hash']}, measured in {result['seconds']:.1f} s",
        "",
        "Keys remapped as the cluster grows one node at a time (shrinking back, newest node",
        "first, moves the same keys back), and when a node in the middle fails",
    ]
    rows = []
    for step in result["remap"]["growth"]:
        rows.append([f"{step['from']} -> {step['to']}", _pct(step["ideal"]),
                     *(_pct(step["moved"][i]) for i in ids)])
    growth = result["remap"]["growth"]
    rows.append(["mean / ideal", "1.00",
                 *(f"{sum(s['moved'][i] / s['ideal'] for s in growth) / len(growth):.2f}" for i in ids)])
    for failure in result["remap"]["failure"]:
        rows.append([f"{failure['from']} -> {failure['to']}, {failure['failed']} fails",
                     _pct(failure["ideal"]), *(_pct(failure["moved"][i]) for i in ids)])
    out += _table(["nodes", "ideal 1/N", *(s["label"] for s in strategies)], rows)
    out += [
        f"ring/V: the ring with V virtual nodes a node; bounded/V: bounded loads, "
        f"c = {config['balance_factor']:g}, over ring/V;",
        f"maglev: table of {config['maglev_size']:,} entries; jump: a failed node's bucket "
        f"goes to the last node.",
        "",
        f"Load balance by virtual nodes ({last} nodes, {plural(keys, 'key')}; "
        f"arc = share of the ring each node owns)",
    ]
    out += _table(
        ["virtual nodes", "max/mean", "min/mean", "std dev", "std dev/mean", "arc std dev/mean"],
        ([str(r["virtual_nodes"]), f"{r['max_over_mean']:.3f}", f"{r['min_over_mean']:.3f}",
          f"{r['stddev']:,.0f}", _pct(r["relative_stddev"]), _pct(r["arc_relative_stddev"])]
         for r in result["balance_by_vnodes"]))
    out += ["", f"Load balance by strategy ({last} nodes; keys thrown at random: "
                f"std dev/mean {_pct(result['random_relative_stddev'])})"]
    out += _table(
        ["strategy", "max/mean", "min/mean", "std dev", "std dev/mean"],
        ([r["label"], f"{r['max_over_mean']:.3f}", f"{r['min_over_mean']:.3f}",
          f"{r['stddev']:,.0f}", _pct(r["relative_stddev"])] for r in result["balance_by_strategy"]))
    out += ["", f"Ring memory and build time by virtual nodes ({last} nodes; build: "
                f"add_service_node node by node,",
            "or add_service_nodes all at once; lookup: key_distribution, key hashing included)"]
    out += _table(
        ["virtual nodes", "points", "engine", "bytes/point", "as Python list+dict",
         "build, node by node", "build, all at once", "lookup"],
        ([str(r["virtual_nodes"]), f"{r['points']:,}", _bytes(r["memory_bytes"]),
          f"{r['bytes_per_point']:.1f}", _bytes(r["python_bytes"]), f"{r['build_ms']:.2f} ms",
          f"{r['batch_build_ms']:.2f} ms", f"{r['lookup_ns_per_key']:.0f} ns"]
         for r in result["ring_cost"]))
    at = result["comparison_at"]
    out += ["", "Strategies side by side (routing cost includes hashing the key; "
                "round robin: two passes over the keys)"]
    out += _table(
        ["strategy", f"moved {at['growth'][0]}->{at['growth'][1]}",
         f"moved {at['failure'][0]}->{at['failure'][1]} (fail)", "growth/ideal",
         "same node on repeat", "max/mean", "state", "route"],
        ([r["label"], _pct(r["growth_moved"]), _pct(r["failure_moved"]),
          "-" if r["growth_mean_over_ideal"] is None else f"{r['growth_mean_over_ideal']:.2f}",
          _pct(r["same_node_on_repeat"], 1), f"{r['max_over_mean']:.3f}", _bytes(r["state_bytes"]),
          "-" if r["ns_per_key"] is None else f"{r['ns_per_key']:.0f} ns/key"]
         for r in result["comparison"]))
    out.append(f"ideal: {_pct(at['growth_ideal'])} moved on growth, "
               f"{_pct(at['failure_ideal'])} on failure")
    return "\n".join(out)


# ----------------------------------------------------------------------
# Pictures


#: Who needs matplotlib, in the error raised without it: "chash simulate
#: --plot needs matplotlib: pip install 'chash-router[plot]'".
_PLOT_USER = "chash simulate --plot"


def _figure_class() -> Any:
    """``matplotlib.figure.Figure``; ImportError naming the extra without
    matplotlib."""
    # The package itself first: a test (or a user) may block matplotlib
    # while one of its submodules is already loaded.
    require("matplotlib", user=_PLOT_USER, extra="plot")
    return require("matplotlib.figure", user=_PLOT_USER, extra="plot",
                   package="matplotlib").Figure


def plot_path(path: str) -> str:
    """The file ``plot(result, path)`` writes: ``path``, with ``.png``
    appended when it has no extension.

    ImportError naming the extra without matplotlib; ValueError when the
    extension is not an image format matplotlib writes."""
    figure_class = _figure_class()
    ext = os.path.splitext(path)[1]
    if not ext:
        return path + ".png"
    formats = figure_class().canvas.get_supported_filetypes()
    if ext[1:].lower() not in formats:
        raise ValueError(f"cannot draw a {ext!r} file: use one of "
                         f"{', '.join('.' + name for name in sorted(formats))}")
    return path


def plot_figure(result: dict[str, Any]) -> Any:
    """The remap fractions and load spreads of ``result`` as a matplotlib
    ``Figure`` (ImportError naming the extra without matplotlib)."""
    figure = _figure_class()(figsize=(16, 6), layout="constrained")
    halves: Any = figure.subfigures(1, 2, width_ratios=[1.25, 2])
    remap_fig, load_fig = halves

    # One small panel a strategy, each over the ideal 1/N: the curves that
    # run together near 1/N cannot hide one another.
    growth = result["remap"]["growth"]
    sizes = [step["to"] for step in growth]
    ideal = [step["ideal"] for step in growth]
    strategies = result["strategies"]
    columns = 3
    rows = -(-len(strategies) // columns)
    panels = remap_fig.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)
    for k, ax in enumerate(panels.flat):
        if k >= len(strategies):
            ax.set_visible(False)
            continue
        strategy = strategies[k]
        ax.plot(sizes, [step["moved"][strategy["id"]] for step in growth], color=f"C{k}",
                marker=".", linewidth=2, label=strategy["label"])
        ax.plot(sizes, ideal, color="black", linestyle="--", linewidth=1, label="ideal 1/N")
        ax.set_title(strategy["label"], fontsize="medium")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    panels[0][0].set_ylim(min(ideal) / 2, 1.5)
    panels[0][0].legend(handles=panels[0][0].lines[1:], fontsize="small", loc="lower left")
    remap_fig.supxlabel("nodes after adding one")
    remap_fig.supylabel("fraction of keys remapped")
    remap_fig.suptitle(f"Keys remapped as the cluster grows ({plural(result['keys'], 'key')}, "
                       f"hash {result['config']['hash']})")
    vnodes_ax, strategy_ax = load_fig.subplots(1, 2, width_ratios=[1, 1.3])

    def strip(ax: Any, groups: list[tuple[str, list[int]]], title: str) -> None:
        for x, (_, loads) in enumerate(groups):
            mean = sum(loads) / len(loads)
            spread = [(i - (len(loads) - 1) / 2) * 0.25 / len(loads) for i in range(len(loads))]
            ax.scatter([x + d for d in spread], [load / mean for load in loads], s=12)
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_xticks(range(len(groups)), [label for label, _ in groups], rotation=45, ha="right")
        ax.set_ylabel("keys on a node / mean")
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)

    last = result["config"]["last_nodes"]
    strip(vnodes_ax, [(f"v={row['virtual_nodes']}", row["loads"]) for row in result["balance_by_vnodes"]],
          f"Ring load per node by virtual nodes ({last} nodes)")
    strip(strategy_ax, [(row["label"], row["loads"]) for row in result["balance_by_strategy"]],
          f"Load per node by strategy ({last} nodes)")
    return figure


def plot(result: dict[str, Any], path: str) -> str:
    """Draw ``plot_figure(result)`` into an image file; returns the path
    written, ``plot_path(path)`` (a PNG unless ``path`` names another
    format).  Needs matplotlib (``pip install 'chash-router[plot]'``); raises
    ImportError naming that extra when it is missing."""
    written = plot_path(path)
    plot_figure(result).savefig(written, dpi=110)
    return written

