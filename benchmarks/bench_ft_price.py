"""One thread's lookups on free-threaded CPython 3.13 beside the same on
CPython 3.13 with the GIL: the price of routers that threads share.

Each round runs a child process on each interpreter, in alternating order;
a child times, for every family at 10 nodes, single get_target_node calls
over 1,000 keys and get_target_nodes batches of 10,000 keys by its own
thread's CPU time (the best of 7 passes), in ns a lookup.  The checkout's
extension must be built in place for both interpreters (setup.py
build_ext --inplace with each).  Target (issue 42): one thread on 3.13t at
least 0.8x its speed on 3.13 with the GIL, i.e. time(3.13t) / time(3.13)
at most 1.25.

Usage: python benchmarks/bench_ft_price.py --ft PYTHON3.13t --gil PYTHON3.13
       [--rounds N] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import _ratios

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, ".")
import chash
assert chash.__file__.startswith(sys.argv[1]), chash.__file__
out = {}
makers = {"ring python": chash.ConsistentHashRouter,
          "ring envoy": lambda: chash.ConsistentHashRouter(layout="envoy"),
          "maglev": chash.MaglevRouter, "jump": chash.JumpRouter,
          "rendezvous": chash.RendezvousRouter}
keys = [f"user-{i}" for i in range(1000)]
for name, make in makers.items():
    r = make()
    r.add_service_nodes([f"10.0.0.{i}:80" for i in range(10)])
    get = r.get_target_node
    single = batch = 1e9
    for _ in range(7):
        t = time.thread_time()
        for _ in range(100):
            for k in keys:
                get(k)
        single = min(single, (time.thread_time() - t) / 1e5 * 1e9)
        many = keys * 10
        t = time.thread_time()
        for _ in range(10):
            r.get_target_nodes(many)
        batch = min(batch, (time.thread_time() - t) / 1e5 * 1e9)
    out[name] = [single, batch]
print(json.dumps(out))
"""


def child(python: str) -> dict[str, list[float]]:
    done = subprocess.run([python, "-c", CHILD, str(ROOT)], cwd=ROOT, check=True,
                          capture_output=True, text=True)
    result: dict[str, list[float]] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ft", required=True, help="a free-threaded python3.13t")
    parser.add_argument("--gil", required=True, help="a python3.13 with the GIL")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    runs: dict[str, list[dict[str, list[float]]]] = {"ft": [], "gil": []}
    for r in range(args.rounds):
        order = ("ft", "gil") if r % 2 == 0 else ("gil", "ft")
        for which in order:
            runs[which].append(child(args.ft if which == "ft" else args.gil))
    lines = [f"commit {commit}, load {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end; "
             f"{args.rounds} rounds, interpreters alternating",
             "one thread: free-threaded 3.13 (GIL off) beside 3.13 with the GIL, CPU ns a lookup "
             "(each round's best of 7 passes)", _ratios.LEGEND, "",
             f"{'family':<12} {'lookup':<7} {'3.13t ns':>9} {'3.13 ns':>8} {'speed 3.13t / 3.13':>19}"
             f"  target  met"]
    missed = 0
    for name in runs["ft"][0]:
        for k, mode in enumerate(("single", "batch")):
            ft = [run[name][k] for run in runs["ft"]]
            gil = [run[name][k] for run in runs["gil"]]
            speed = _ratios.both(gil, ft)  # time on 3.13 over time on 3.13t
            met = _ratios.holds(speed, ">=", 0.8)
            missed += not met
            lines.append(f"{name:<12} {mode:<7} {sorted(ft)[len(ft) // 2]:>9.1f} "
                         f"{sorted(gil)[len(gil) // 2]:>8.1f} {speed[0]:>9.2f} / {speed[1]:<7.2f}"
                         f"  0.8x  {'yes' if met else 'no'}")
    lines += ["", f"targets missed by either ratio: {missed}"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    sys.exit(main())
