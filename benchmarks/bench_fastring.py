#!/usr/bin/env python3
"""chash against fastring (Rust, XXH3), side by side in one process, on CPython >= 3.13.

    python benchmarks/bench_fastring.py [--nodes 3,10,100,1000] [--repeat N]
                                        [--keys N] [--json FILE]

fastring (https://pypi.org/project/fastring/) is built for CPython 3.13 and
later only, so this runs there: ``pip install fastring`` beside chash.
Both rings have 160 virtual nodes a node and hash with XXH3: chash as
``ConsistentHashRouter(160, hash="xxh3")``, fastring as
``HashRing(virtual_nodes=160)``.  Rows, at every node count:

* build the ring: chash ``add_service_nodes(nodes)``; fastring has no bulk
  call, so ``add_node`` in a loop (its way to build a ring);
* build, one node at a time: ``add_service_node`` / ``add_node`` in a loop;
* single lookup: a Python loop of ``get_target_node`` / ``get_node``;
* batch lookup: ``get_target_nodes`` / ``get_node_batch``;
* add one node, remove one node: on a ring of N nodes (put back untimed).

Ratios are fastring / chash (above 1: chash is faster); the targets ask
chash to be at least as fast on every row.  Same method as bench_router.py
(benchmarks/_bench.py): interleaved rounds, rotating order, wall-clock
medians, preempted short samples retaken.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from _bench import (
    BATCH,
    SINGLE,
    Group,
    Key,
    Measure,
    Obs,
    Row,
    add_target,
    lookup_measures,
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

if sys.version_info < (3, 13):
    raise SystemExit("fastring needs CPython 3.13 or later: run this with python3.13")
try:
    import fastring  # type: ignore[import-not-found]
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit("the benchmark needs fastring: pip install fastring") from exc

VNODES = 160
CHASH, FASTRING = "chash", "fastring"
BUILD, BUILD_ONE = "build the ring", "build, one node at a time"
ADD, REMOVE = "add one node", "remove one node"
SECTION = (f"chash (hash='xxh3') against fastring (XXH3), {VNODES} virtual nodes a node;"
           " ratios are fastring / chash")
VS = [("fastring/chash", FASTRING, CHASH)]


def chash_ring(nodes: Sequence[str]) -> Any:
    router = chash.ConsistentHashRouter(VNODES, hash="xxh3")
    router.add_service_nodes(nodes)
    return router


def chash_one_by_one(nodes: Sequence[str]) -> Any:
    router = chash.ConsistentHashRouter(VNODES, hash="xxh3")
    add = router.add_service_node
    for node in nodes:
        add(node)
    return router


def fastring_ring(nodes: Sequence[str]) -> Any:
    ring = fastring.HashRing(virtual_nodes=VNODES)
    add = ring.add_node
    for node in nodes:
        add(node)
    return ring


def build_group(n: int, nodes: Sequence[str]) -> Group:
    def build(name: str, how: str, make: Callable[[Sequence[str]], object],
              rows: Sequence[str]) -> Measure:
        def sample(_seq: int) -> dict[Key, Obs]:
            obs, _ = timed(lambda: make(nodes))
            return {(row, n, name): obs for row in rows}

        return Measure(f"{n} {name} {how}", sample, lambda: make(nodes[:3]))

    return Group(f"build {n}", [
        build(CHASH, "add_service_nodes", chash_ring, [BUILD]),
        build(CHASH, "add_service_node", chash_one_by_one, [BUILD_ONE]),
        build(FASTRING, "add_node", fastring_ring, [BUILD, BUILD_ONE]),
    ])


def mutation_group(n: int, rings: dict[str, Any]) -> Group:
    def mutation(name: str, op: str, add: Callable[[str], object],
                 remove: Callable[[str], object]) -> Measure:
        def sample(seq: int) -> dict[Key, Obs]:
            spare = f"backend-spare-{seq}.svc:8080"
            if op == ADD:
                obs, _ = timed(lambda: add(spare))
                remove(spare)
            else:
                add(spare)
                obs, _ = timed(lambda: remove(spare))
            return {(op, n, name): obs}

        def warmup() -> None:
            add("backend-warmup.svc:8080")
            remove("backend-warmup.svc:8080")

        return Measure(f"{n} {op} {name}", sample, warmup)

    c, f = rings[CHASH], rings[FASTRING]
    return Group(f"add/remove {n}", [
        mutation(name, op, add, remove)
        for op in (ADD, REMOVE)
        for name, add, remove in ((CHASH, c.add_service_node, c.remove_service_node),
                                  (FASTRING, f.add_node, f.remove_node))])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=node_counts, default="3,10,100,1000",
                        help="node counts (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--keys", type=int, default=20000, help="lookup keys (default 20000)")
    parser.add_argument("--json", metavar="FILE", help="write every sample, median and ratio")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repeat < 1 or args.keys < 1:
        raise SystemExit("--repeat and --keys must be at least 1")
    info = machine_info(["fastring"])
    started, load_start = time.perf_counter(), os.getloadavg()
    keys = request_keys(args.keys)
    all_nodes = node_names(max(args.nodes))
    groups: list[Group] = []
    progress("building the rings")
    for n in args.nodes:
        rings = {CHASH: chash_ring(all_nodes[:n]), FASTRING: fastring_ring(all_nodes[:n])}
        # Both route every key to one of the ring's nodes.
        assert set(rings[CHASH].get_target_nodes(keys)) <= set(all_nodes[:n])
        assert set(rings[FASTRING].get_node_batch(keys)) <= set(all_nodes[:n])
        groups.append(build_group(n, all_nodes[:n]))
        groups.append(Group(f"lookups {n}", [
            *lookup_measures(n, CHASH, rings[CHASH].get_target_node,
                             rings[CHASH].get_target_nodes, keys, 1_000_000),
            *lookup_measures(n, FASTRING, rings[FASTRING].get_node,
                             rings[FASTRING].get_node_batch, keys, 1_000_000),
        ]))
        groups.append(mutation_group(n, rings))
    obs = run_schedule(groups, args.repeat, slow_rounds=3, budget_s=30.0)
    rows: list[Row] = []
    for n in args.nodes:
        for row, unit, scale in ((BUILD, "ms", 1e6), (BUILD_ONE, "ms", 1e6), (SINGLE, "ns/key", 1),
                                 (BATCH, "ns/key", 1), (ADD, "µs", 1e3), (REMOVE, "µs", 1e3)):
            r = make_row(SECTION, row, n, n, unit, scale, obs, [CHASH, FASTRING], VS)
            add_target(r, "fastring/chash", ">=", 1, ratio="fastring/chash")
            rows.append(r)
    runtime, load_end = time.perf_counter() - started, os.getloadavg()
    header = [
        f"chash {info['chash']} ({info['commit']}) · fastring {info['fastring']}",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {args.repeat} interleaved rounds; {args.keys:,} keys",
        "ratios: fastring / chash, higher means chash is faster",
    ]
    text, met, total = report(rows, header)
    if args.json:
        write_json(args.json, {
            "command": " ".join(["python", *sys.argv]), "machine": info,
            "load_average": {"start": load_start, "end": load_end}, "runtime_s": runtime,
            "config": {"virtual_nodes": VNODES, "nodes": args.nodes, "rounds": args.repeat,
                       "keys": args.keys},
            "rows": [r.to_json() for r in rows], "targets_met": met, "targets_total": total,
        })
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
