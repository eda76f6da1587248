#!/usr/bin/env python3
"""What resharding costs: ``router.diff`` and Migration's batching, 10 to
10,000 nodes.

    python benchmarks/bench_migration.py [--nodes 10,100,1000,10000]
                                         [--keys 100000] [--repeat 7] [--json FILE]

Rings of 160 points a node (MD5), one node added.  Rows:

* diff: ``old.diff(new)``, the arcs that move, against finding the moving
  keys by routing ``--keys`` keys in both rings (``get_target_nodes``
  twice, the batch lookup), the way a user without diff finds them;
* batching: ``Migration(old, new, keys)`` and every batch of 200 handed
  out and marked done, for ``--keys`` keys.

Interleaved rounds and medians, as the other benchmarks (``_bench.py``);
the ratio route-twice / diff is the result.  A target: diff of two
1000-node rings under a millisecond.
"""
from __future__ import annotations

import argparse
import os
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
    request_keys,
    run_schedule,
    timed,
    write_json,
)

import chash
from chash.migration import Migration

DIFF, BATCH = "diff, one node added", "Migration: every batch of 200"
POINTS = 160


def build(names: Sequence[str]) -> Any:
    router = chash.ConsistentHashRouter(POINTS)
    router.add_service_nodes(list(names))
    return router


def measures_for(n: int, old: Any, new: Any, keys: list[str]) -> list[Measure]:
    col = f"{n:,} nodes"

    def diff_sample(_seq: int) -> dict[Key, Obs]:
        obs, _ = timed(lambda: old.diff(new))
        return {(DIFF, col, "diff"): obs}

    def twice_sample(_seq: int) -> dict[Key, Obs]:
        obs, _ = timed(lambda: (old.get_target_nodes(keys), new.get_target_nodes(keys)))
        return {(DIFF, col, "route keys twice"): obs}

    def batch_run() -> int:
        migration = Migration(old, new, keys)
        done = 0
        for batch in migration.batches():
            migration.mark_done(batch)
            done += len(batch)
        return done

    def batch_sample(_seq: int) -> dict[Key, Obs]:
        obs, _ = timed(batch_run)
        return {(BATCH, col, "Migration"): obs}

    return [
        Measure(f"{n} diff", diff_sample, lambda: old.diff(new)),
        Measure(f"{n} twice", twice_sample),
        Measure(f"{n} batches", batch_sample),
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=node_counts, default=node_counts("10,100,1000,10000"))
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", metavar="FILE")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    info = machine_info()
    started, load_start = time.perf_counter(), os.getloadavg()
    keys = request_keys(args.keys)
    groups = []
    progress("building the rings")
    for n in args.nodes:
        names = node_names(n + 1)
        old, new = build(names[:n]), build(names)
        groups.append(Group(f"{n} nodes", measures_for(n, old, new, keys)))
    obs = run_schedule(groups, args.repeat)
    rows: list[Row] = []
    for n in args.nodes:
        col = f"{n:,} nodes"
        row = make_row("resharding", DIFF, col, n, "ms", 1e6, obs,
                       ["diff", "route keys twice"],
                       [("route twice / diff", "route keys twice", "diff")])
        if n == 1000:
            add_target(row, "diff of two 1000 x 160 rings", "<=", 1.0,
                       value=row.median["diff"], cpu_value=row.cpu_median["diff"],
                       fastest_value=min(row.samples["diff"]), unit="ms")
        rows.append(row)
        rows.append(make_row("resharding", BATCH, col, n, "ms", 1e6, obs, ["Migration"], []))
    runtime, load_end = time.perf_counter() - started, os.getloadavg()
    header = [
        f"chash {info['chash']} ({info['commit']})",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {args.repeat} interleaved rounds; {args.keys:,} keys,"
        f" {POINTS} points a node",
    ]
    text, met, total = report(rows, header)
    if args.json:
        write_json(args.json, {
            "command": " ".join(["python", *sys.argv]), "machine": info,
            "load_average": {"start": load_start, "end": load_end}, "runtime_s": runtime,
            "config": {"nodes": args.nodes, "keys": args.keys, "rounds": args.repeat},
            "rows": [r.to_json() for r in rows], "targets_met": met, "targets_total": total,
        })
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
