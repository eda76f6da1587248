#!/usr/bin/env python3
"""What a router built whole costs: ``pickle`` round trips and the shared
ring's swap (``_replace_nodes``), 100 to 10,000 weighted nodes.

    python benchmarks/bench_rebuild.py [--nodes 100,1000,10000]
                                       [--layouts python,nginx,ketama] [--repeat 5] [--json FILE]

A router of that many nodes (weights 1, 2, 3 in turn; 160 points a unit
of weight, the layout's hash) is rebuilt three ways, interleaved:

* ``_replace_nodes``: every node in one step, in the given order (what a
  shared ring of an ordered layout does on every change, so that all
  instances break ties alike);
* ``pickle``: ``pickle.loads(pickle.dumps(router))``;
* one by one: ``add_service_node`` for each, in order, into an empty router.

All three give the same ring; the ratio one-by-one / ``_replace_nodes`` is
the result.  A target: 10,000 nodes swapped in within a second.
"""
from __future__ import annotations

import argparse
import os
import pickle
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

SECTION = "rebuilt whole"
POINTS = 160


def pairs_for(n: int) -> list[tuple[str, float]]:
    return [(name, float(1 + i % 3)) for i, name in enumerate(node_names(n))]


def one_by_one(layout: str, pairs: list[tuple[str, float]]) -> Any:
    router = chash.ConsistentHashRouter(POINTS, layout=layout)
    for node, weight in pairs:
        router.add_service_node(node, weight)
    return router


def measures_for(layout: str, n: int) -> list[Measure]:
    pairs = pairs_for(n)
    built = one_by_one(layout, pairs)
    col = f"{n:,} nodes"
    row = f"{layout} layout"

    def replace() -> Any:
        router = chash.ConsistentHashRouter(POINTS, layout=layout)
        router._replace_nodes(pairs)
        return router

    def check() -> None:
        for router in (replace(), pickle.loads(pickle.dumps(built))):
            assert router.fingerprint() == built.fingerprint(), layout

    def replace_sample(_seq: int) -> dict[Key, Obs]:
        return {(row, col, "_replace_nodes"): timed(replace)[0]}

    def pickle_sample(_seq: int) -> dict[Key, Obs]:
        return {(row, col, "pickle"): timed(lambda: pickle.loads(pickle.dumps(built)))[0]}

    def add_sample(_seq: int) -> dict[Key, Obs]:
        return {(row, col, "one by one"): timed(lambda: one_by_one(layout, pairs))[0]}

    return [
        Measure(f"{layout} {n} replace", replace_sample, check),
        Measure(f"{layout} {n} pickle", pickle_sample),
        Measure(f"{layout} {n} one by one", add_sample),
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=node_counts, default=node_counts("100,1000,10000"))
    parser.add_argument("--layouts", default="python,nginx,ketama")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", metavar="FILE")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    layouts = args.layouts.split(",")
    info = machine_info()
    started, load_start = time.perf_counter(), os.getloadavg()
    progress("building the routers")
    groups = [Group(f"{layout} {n}", measures_for(layout, n)) for layout in layouts for n in args.nodes]
    obs = run_schedule(groups, args.repeat)
    rows: list[Row] = []
    for layout in layouts:
        for n in args.nodes:
            row = make_row(SECTION, f"{layout} layout", f"{n:,} nodes", n, "ms", 1e6, obs,
                           ["_replace_nodes", "pickle", "one by one"],
                           [("one by one / _replace_nodes", "one by one", "_replace_nodes")])
            if n == 10_000:
                add_target(row, f"{layout}: 10,000 nodes swapped in", "<=", 1000.0,
                           value=row.median["_replace_nodes"],
                           cpu_value=row.cpu_median["_replace_nodes"],
                           fastest_value=min(row.samples["_replace_nodes"]), unit="ms")
            rows.append(row)
    runtime, load_end = time.perf_counter() - started, os.getloadavg()
    header = [
        f"chash {info['chash']} ({info['commit']})",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {args.repeat} interleaved rounds; weights 1, 2, 3 in turn,"
        f" {POINTS} points a unit of weight",
    ]
    text, met, total = report(rows, header)
    if args.json:
        write_json(args.json, {
            "command": " ".join(["python", *sys.argv]), "machine": info,
            "load_average": {"start": load_start, "end": load_end}, "runtime_s": runtime,
            "config": {"nodes": args.nodes, "layouts": layouts, "rounds": args.repeat},
            "rows": [r.to_json() for r in rows], "targets_met": met, "targets_total": total,
        })
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
