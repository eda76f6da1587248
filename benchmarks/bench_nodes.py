#!/usr/bin/env python3
"""chash as the node count grows: build, add, remove and `in` at 10**3 to 10**6 nodes.

    python benchmarks/bench_nodes.py [--nodes 1000,10000,100000,1000000]
                                     [--points 10] [--repeat N] [--json FILE]

Every ring has --points virtual nodes a node (default 10) and MD5, the
defaults of chash.ConsistentHashRouter otherwise.  Rows:

* build: ``add_service_nodes(names)`` on a new router, in ms;
* add one node: ``add_service_node`` of a new node on the ring of N nodes
  (removed again untimed), in µs;
* remove one node: ``remove_service_node`` of a node drawn at random from
  the N (put back untimed, at the end of the insertion order), in µs;
* in: ``name in router`` for names drawn at random from the N, in ns a test:
  warm, the steady state of looping over a block of 1000 names (as the
  lookup rows of bench_router.py), and cold, one pass over 1000 fresh names
  (at 10**6 nodes neither the names nor the ring's entries are in the
  cache); beside it, for scale, the same cold pass over a Python set of the
  names (no target on the cold rows).

The columns are the node counts; the ratios divide each by the smallest
count's value (the growth).  Targets: ``in`` at the largest count within 3x
of the smallest; building 100,000 nodes under 2 s; adding and removing
growing no faster than the ring's points (the points are what an add or a
remove moves: one block move of the points after each new point, and one
pass over all points to drop a node's own).

Same method as bench_router.py (benchmarks/_bench.py): rounds interleaved
over the node counts, wall-clock medians, preempted short samples retaken.
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

from _bench import (
    Group,
    Key,
    Measure,
    Obs,
    Row,
    add_target,
    machine_info,
    make_row,
    node_counts,
    node_names,
    progress,
    report,
    run_schedule,
    timed,
    write_json,
)

import chash

BUILD, ADD, REMOVE, IN = "build", "add one node", "remove one node", "in"
IN_COLD, SET_COLD = "in, cold", "in, cold: a Python set of the names"
UNITS = {BUILD: ("ms", 1e6), ADD: ("µs", 1e3), REMOVE: ("µs", 1e3), IN: ("ns", 1.0),
         IN_COLD: ("ns", 1.0), SET_COLD: ("ns", 1.0)}
IN_BLOCK = 1000  # names an `in` sample tests, each pass


def label(n: int) -> str:
    return f"{n:,} nodes"


def build(names: Sequence[str], points: int) -> Any:
    router = chash.ConsistentHashRouter(points)
    router.add_service_nodes(names)
    return router


def measures_for(n: int, router: Any, names: list[str], points: int,
                 min_ns: int) -> list[Measure]:
    """The four measures of one node count, on router (n nodes of names)."""
    col = label(n)
    rng = random.Random(n)
    passes = {IN: 1}

    def build_sample(_seq: int) -> dict[Key, Obs]:
        obs, _ = timed(lambda: build(names, points))  # freed after the timing
        return {(BUILD, "nodes", col): obs}

    def add_sample(seq: int) -> dict[Key, Obs]:
        spare = f"spare-{seq}.svc:8080"
        obs, _ = timed(lambda: router.add_service_node(spare))
        router.remove_service_node(spare)
        return {(ADD, "nodes", col): obs}

    def remove_sample(_seq: int) -> dict[Key, Obs]:
        victim = names[rng.randrange(n)]
        obs, _ = timed(lambda: router.remove_service_node(victim))
        router.add_service_node(victim)
        return {(REMOVE, "nodes", col): obs}

    def test_all(container: object, block: list[str], times: int) -> None:
        for _ in range(times):
            for name in block:
                name in container  # noqa: B015 - the membership test is the work

    def in_sample(_seq: int) -> dict[Key, Obs]:
        block = [names[rng.randrange(n)] for _ in range(IN_BLOCK)]
        test_all(router, block, 1)  # warm: the block has been tested once
        obs, _ = timed(lambda: test_all(router, block, passes[IN]), passes[IN] * len(block))
        return {(IN, "nodes", col): obs}

    def in_warmup() -> None:
        obs = in_sample(0)[(IN, "nodes", col)]
        passes[IN] = max(1, math.ceil(min_ns / (obs.wall * IN_BLOCK)))

    name_set = set(names)

    def cold_sample(_seq: int) -> dict[Key, Obs]:
        """One pass over fresh names, in the router and in the set."""
        block = [names[rng.randrange(n)] for _ in range(IN_BLOCK)]
        other = [names[rng.randrange(n)] for _ in range(IN_BLOCK)]
        obs, _ = timed(lambda: test_all(router, block, 1), len(block))
        ref, _ = timed(lambda: test_all(name_set, other, 1), len(other))
        return {(IN_COLD, "nodes", col): obs, (SET_COLD, "nodes", col): ref}

    def mutation_warmup() -> None:
        add_sample(10**9)
        remove_sample(0)

    return [
        Measure(f"{n} {BUILD}", build_sample, lambda: build(names[:3], points)),
        Measure(f"{n} {ADD}", add_sample, mutation_warmup),
        Measure(f"{n} {REMOVE}", remove_sample),
        Measure(f"{n} {IN}", in_sample, in_warmup),
        Measure(f"{n} {IN_COLD}", cold_sample),
    ]


def collect_rows(counts: list[int], obs: dict[Key, list[Obs]], points: int) -> list[Row]:
    section = (f"chash by node count, {points} points a node (MD5); ratios are the value at N"
               f" / the value at {counts[0]:,} nodes")
    cols = [label(n) for n in counts]
    small = cols[0]
    ratio_defs = [(f"{n // counts[0]:,}× nodes", label(n), small) for n in counts[1:]]
    rows = []
    for what in (BUILD, ADD, REMOVE, IN, IN_COLD, SET_COLD):
        unit, scale = UNITS[what]
        row = make_row(section, what, "nodes", "", unit, scale, obs, cols, ratio_defs)
        big = counts[-1]
        growth_name = f"{big // counts[0]:,}× nodes"
        if what == IN and len(counts) > 1:
            add_target(row, f"{growth_name} in", "<=", 3, ratio=growth_name)
        if what in (ADD, REMOVE) and len(counts) > 1:
            # The points grow as the nodes do (a fixed count a node).
            add_target(row, f"{growth_name} {what}", "<=", big / counts[0], ratio=growth_name)
        if what == BUILD and 100_000 in counts:
            at = row.median[label(100_000)]
            add_target(row, "build 100,000 nodes", "<=", 2000, value=at,
                       cpu_value=row.cpu_median[label(100_000)],
                       fastest_value=min(row.samples[label(100_000)]), unit=" ms")
        rows.append(row)
    return rows


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=node_counts, default="1000,10000,100000,1000000",
                        help="node counts, smallest first (default %(default)s)")
    parser.add_argument("--points", type=int, default=10, help="points a node (default 10)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--json", metavar="FILE", help="write every sample, median and ratio")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    counts = args.nodes
    if args.repeat < 1 or args.points < 1:
        raise SystemExit("--repeat, --points and every node count must be at least 1")
    info = machine_info()
    started, load_start = time.perf_counter(), os.getloadavg()
    progress("building the rings")
    all_names = node_names(counts[-1])
    routers: dict[int, Any] = {}
    groups: list[Group] = []
    for n in counts:
        names = all_names[:n]
        routers[n] = build(names, args.points)
        groups.append(Group(f"{n} nodes", measures_for(n, routers[n], names, args.points,
                                                        min_ns=1_000_000)))
    # Build samples of the biggest rings take seconds: three of those, or
    # 60 s of them, are enough.
    obs = run_schedule(groups, args.repeat, slow_s=1.0, slow_rounds=3, budget_s=60.0)
    for router in routers.values():
        router._check()
    routers.clear()
    rows = collect_rows(counts, obs, args.points)
    runtime, load_end = time.perf_counter() - started, os.getloadavg()
    header = [
        f"chash {info['chash']} ({info['commit']})",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {args.repeat} interleaved rounds (builds over 1 s: 3 rounds"
        " within 60 s)",
    ]
    text, met, total = report(rows, header)
    if args.json:
        payload = {
            "command": " ".join(["python", *sys.argv]), "machine": info,
            "load_average": {"start": load_start, "end": load_end}, "runtime_s": runtime,
            "config": {"nodes": counts, "points": args.points, "rounds": args.repeat},
            "rows": [r.to_json() for r in rows],
            "targets_met": met, "targets_total": total,
        }
        write_json(args.json, payload)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
