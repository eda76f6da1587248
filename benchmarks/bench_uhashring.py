#!/usr/bin/env python3
"""chash.compat.uhashring against uhashring 2.5, side by side in one process.

    python benchmarks/bench_uhashring.py [--nodes 10,100] [--repeat N]
                                         [--keys N] [--json FILE]

Both are ``HashRing(nodes)`` with uhashring's defaults (160 points a node,
128-bit MD5 points) and place every key on the same node (checked before
timing).  Rows, at every node count:

* ``get_node``: a Python loop of ``ring.get_node(key)`` over str keys;
* build the ring: ``HashRing(nodes)``;
* add one node, remove one node: ``add_node`` / ``remove_node`` on a ring
  of N nodes (put back untimed);
* and the same lookups, build and changes with ``hash_fn="ketama"`` (40
  points a node, 4 a hash; uhashring rebuilds the whole continuum on
  every change, as does chash here), without targets.

Ratios are uhashring / chash (above 1: chash is faster).  Targets:
``get_node`` >= 15x, building 100 nodes >= 15x, ``add_node`` and
``remove_node`` >= 20x (the default mode).  Same method as bench_router.py
(benchmarks/_bench.py): interleaved rounds, rotating order, wall-clock
medians beside CPU time, preempted short samples retaken.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from _bench import (
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

from chash.compat.uhashring import HashRing

try:
    import uhashring
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit("the benchmark needs uhashring 2.5: pip install uhashring==2.5") from exc

CHASH, UHASHRING = "chash", "uhashring"
BUILD, ADD, REMOVE = "build the ring", "add one node", "remove one node"
MODES = {"md5": {}, "ketama": {"hash_fn": "ketama"}}
SECTIONS = {
    "md5": "HashRing(nodes), md5: chash.compat.uhashring against uhashring 2.5; ratios are uhashring / chash",
    "ketama": ('HashRing(nodes, hash_fn="ketama"): chash.compat.uhashring against uhashring 2.5;'
               " ratios are uhashring / chash"),
}
VS = [("uhashring/chash", UHASHRING, CHASH)]
CLASSES = {CHASH: HashRing, UHASHRING: uhashring.HashRing}
#: The targets of the default mode: row -> (node counts, at least).
TARGETS = {SINGLE: ((10, 100), 15.0), BUILD: ((100,), 15.0), ADD: ((10, 100), 20.0),
           REMOVE: ((10, 100), 20.0)}


def build_group(mode: str, n: int, nodes: Sequence[str]) -> Group:
    def build(name: str) -> Measure:
        make = CLASSES[name]
        kwargs = MODES[mode]

        def sample(_seq: int) -> dict[Key, Obs]:
            obs, _ = timed(lambda: make(list(nodes), **kwargs))
            return {(BUILD, (mode, n), name): obs}

        return Measure(f"{mode} {n} {name} build", sample, lambda: make(list(nodes[:3]), **kwargs))

    return Group(f"build {mode} {n}", [build(CHASH), build(UHASHRING)])


def mutation_group(mode: str, n: int, rings: dict[str, Any]) -> Group:
    def mutation(name: str, op: str) -> Measure:
        add: Callable[[str], object] = rings[name].add_node
        remove: Callable[[str], object] = rings[name].remove_node

        def sample(seq: int) -> dict[Key, Obs]:
            spare = f"backend-spare-{seq}.svc:8080"
            if op == ADD:
                obs, _ = timed(lambda: add(spare))
                remove(spare)
            else:
                add(spare)
                obs, _ = timed(lambda: remove(spare))
            return {(op, (mode, n), name): obs}

        def warmup() -> None:
            add("backend-warmup.svc:8080")
            remove("backend-warmup.svc:8080")

        return Measure(f"{mode} {n} {op} {name}", sample, warmup)

    return Group(f"add/remove {mode} {n}", [mutation(name, op) for op in (ADD, REMOVE)
                                             for name in (CHASH, UHASHRING)])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--nodes", type=node_counts, default="10,100", help="node counts (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=9, help="rounds (default 9)")
    parser.add_argument("--keys", type=int, default=20000, help="lookup keys (default 20000)")
    parser.add_argument("--json", metavar="FILE", help="write every sample, median and ratio")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repeat < 1 or args.keys < 1:
        raise SystemExit("--repeat and --keys must be at least 1")
    info = machine_info(["uhashring"])
    started, load_start = time.perf_counter(), os.getloadavg()
    keys = request_keys(args.keys)
    all_nodes = node_names(max(args.nodes))
    groups: list[Group] = []
    progress("building the rings")
    for mode, kwargs in MODES.items():
        for n in args.nodes:
            rings = {name: cls(all_nodes[:n], **kwargs) for name, cls in CLASSES.items()}
            # Same placement, key for key, before anything is timed.
            assert [rings[CHASH].get_node(k) for k in keys] == [rings[UHASHRING].get_node(k) for k in keys]
            groups.append(build_group(mode, n, all_nodes[:n]))
            # lookup_measures gives [single, batch]; uhashring has no batch call.
            groups.append(Group(f"lookups {mode} {n}", [
                lookup_measures((mode, n), name, rings[name].get_node, None, keys, 1_000_000)[0]
                for name in (CHASH, UHASHRING)]))
            groups.append(mutation_group(mode, n, rings))
    obs = run_schedule(groups, args.repeat, slow_rounds=3, budget_s=60.0)
    rows: list[Row] = []
    for mode in MODES:
        for n in args.nodes:
            for row, unit, scale in ((SINGLE, "ns/key", 1), (BUILD, "ms", 1e6), (ADD, "µs", 1e3),
                                     (REMOVE, "µs", 1e3)):
                r = make_row(SECTIONS[mode], row, (mode, n), n, unit, scale, obs, [CHASH, UHASHRING], VS)
                counts, at_least = TARGETS[row]
                if mode == "md5" and n in counts:
                    add_target(r, "uhashring/chash", ">=", at_least, ratio="uhashring/chash")
                rows.append(r)
    runtime, load_end = time.perf_counter() - started, os.getloadavg()
    header = [
        f"chash {info['chash']} ({info['commit']}) · uhashring {info['uhashring']}",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {args.repeat} interleaved rounds; {args.keys:,} keys",
        "ratios: uhashring / chash, higher means chash is faster",
    ]
    text, met, total = report(rows, header)
    if args.json:
        write_json(args.json, {
            "command": " ".join(["python", *sys.argv]), "machine": info,
            "load_average": {"start": load_start, "end": load_end}, "runtime_s": runtime,
            "config": {"nodes": args.nodes, "rounds": args.repeat, "keys": args.keys},
            "rows": [r.to_json() for r in rows], "targets_met": met, "targets_total": total,
        })
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
