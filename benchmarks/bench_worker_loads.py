"""The cost a completion pays for loads kept across ``--workers N``
(``chash.gateway.worker_loads``): the gateway's routing of one completion
by its prompt in one process beside the same in a worker of 2 and of 8,
whose counts go through the shared table.

    PYTHONPATH=. python3 benchmarks/bench_worker_loads.py [--rounds 15] [--per-round 2000]

What is timed per completion is what the gateway does for it outside the
network: ``PromptRoutes.choose`` (the JSON body read, its blocks, the
view of the loads, ``PrefixAffinity``'s choice, the estimate written),
the proxy's in-flight count up and down, and ``done``.  16 engines,
prompts of 64 blocks (16 KiB of text), 50 prefixes in turn.  The three
sides run in interleaved rounds (their order turns each round); the
ratios to the one process are both the ratio of the medians and the
median of the per-round ratios, by the wall clock and by CPU time.  No
target (the issue's is the gateway's added time to first byte, in
``bench_llm_gateway.py``); the added microseconds are to be set beside
what the gateway adds to a completion there.  Writes
``results/worker-loads.txt`` and ``results/worker-loads.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import _ratios

from chash import ConsistentHashRouter
from chash.gateway.llm import PromptRoutes
from chash.gateway.worker_loads import WorkerLoads

RESULTS = Path(__file__).resolve().parent / "results"
NODES = [f"engine-{i}" for i in range(16)]
BODIES = [json.dumps({"model": "m", "prompt": (f"system prompt {i:02d} " * 1024)[:16384]}).encode()
          for i in range(50)]


def ring() -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for node in NODES:
        router.add_service_node(node)
    return router


def side(workers: int) -> Callable[[], None]:
    """A completion's routing, for every body in turn: in one process
    (``workers`` 0) or in worker 0 of a table of ``workers``."""
    router = ring()
    if workers:
        table = WorkerLoads(workers)
        for other in range(1, workers):
            table.row(other).know(NODES)
        row = table.row(0)
        counts: dict[str, int] = row.in_flight
        routes = PromptRoutes(router, router, counts, workers=row)
    else:
        counts = {}
        routes = PromptRoutes(router, router, counts)

    def completions() -> None:
        for body in BODIES:
            choice = routes.choose(body, None, 3)
            node = choice.nodes[0]
            counts[node] = counts.get(node, 0) + 1  # as the proxy counts an attempt
            counts[node] -= 1
            routes.done(choice)
    return completions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=2000,
                        help="completions a side a round (a multiple of 50)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    names = {"one process": 0, "worker of 2": 2, "worker of 8": 8}
    runs = {name: side(workers) for name, workers in names.items()}
    repeat = max(1, args.per_round // len(BODIES))
    per = repeat * len(BODIES)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for run in runs.values():  # warm: records filled, slots taken
        run()
    order = list(names)
    for round_ in range(args.rounds):
        for name in order[round_ % 3:] + order[:round_ % 3]:
            run = runs[name]
            began, began_cpu = time.perf_counter(), time.process_time()
            for _ in range(repeat):
                run()
            wall[name].append((time.perf_counter() - began) / per * 1e6)
            cpu[name].append((time.process_time() - began_cpu) / per * 1e6)
    base = "one process"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent, check=False).stdout.strip()
    lines = [
        "# A completion's routing by prompt (choose, in-flight count up and down, done): "
        "one process beside a worker of --workers N (counts through the shared table)",
        f"# {args.rounds} interleaved rounds of {per} completions a side, 16 engines, "
        f"prompts of 64 blocks; commit {commit or 'unknown'}; {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f} at the end",
        f"# {_ratios.LEGEND}",
        "",
        f"{'side':<12} {'median':>9} {'added':>9} {'ratio (wall)':>16} "
        f"{'CPU median':>11} {'ratio (CPU)':>16}",
    ]
    data: dict[str, dict[str, object]] = {}
    for name in names:
        med, cmed = statistics.median(wall[name]), statistics.median(cpu[name])
        ratio = _ratios.both(wall[name], wall[base])
        cratio = _ratios.both(cpu[name], cpu[base])
        added = med - statistics.median(wall[base])
        lines.append(f"{name:<12} {med:>7.2f}us {added:>+7.2f}us "
                     f"{_ratios.pair_text(*ratio):>16} {cmed:>9.2f}us "
                     f"{_ratios.pair_text(*cratio):>16}")
        data[name] = {"median_us": med, "cpu_median_us": cmed, "added_us": added,
                      "ratio_of_medians": ratio[0], "median_of_round_ratios": ratio[1],
                      "cpu_ratio_of_medians": cratio[0], "cpu_median_of_round_ratios": cratio[1],
                      "rounds_us": wall[name], "cpu_rounds_us": cpu[name]}
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if not args.no_write:
        (RESULTS / "worker-loads.txt").write_text(text)
        (RESULTS / "worker-loads.json").write_text(json.dumps({
            "rounds": args.rounds, "per_round": per, "commit": commit,
            "python": platform.python_version(),
            "load": os.getloadavg()[0], "sides": data}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
