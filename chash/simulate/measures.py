"""The measures of ``simulate()``: keys remapped on growth and on a
failure, load balance, the ring's memory and build time, round robin for
comparison; ``simulate()`` runs them all into one JSON-ready dict."""
from __future__ import annotations

import math
import random
import sys
import time
from array import array
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from chash import _chash
from chash._chash import ConsistentHashRouter
from chash.simulate.config import TIMING_REPEATS, SimulationConfig, key_names, node_names
from chash.simulate.strategies import Strategy, Workload, build_strategies

__all__ = ["ROUND_ROBIN_SEED", "load_stats", "simulate"]

#: Seed of the request order of round robin's second pass.
ROUND_ROBIN_SEED = 6

# The private C helpers (strategy functions of chash._chash, typed by its
# stub): results are array('I') of node indices.
_moved = _chash._moved
_counts = _chash._counts
_relabel = _chash._relabel


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
