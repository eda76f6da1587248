"""get_bounded(key, loads) against get_target_node(key) on every router
family at 100 nodes, loads a dict of all 100 nodes (in-flight counts drawn
from 0..20, keyed by the node names the router was given, as a gateway's
counts are), the default balance factor 1.25.

Interleaved: each round times, for each family in turn, a pass of KEYS
lookups of each call, the two calls one after the other (which goes first
alternating by round), wall clock and CPU time.  The ratio is get_bounded
over get_target_node: the ratio of the medians and the median of the
per-round ratios (benchmarks/_ratios.py); the target is <= 6 for the
ring (ConsistentHashRouter's default layout).

    PYTHONPATH=. python benchmarks/bench_get_bounded.py --repeat 15
"""
from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ratios import LEGEND, both, holds

import chash

NODES = 100
KEYS = 2000
TARGET = 6.0

FAMILIES: dict[str, Callable[[], Any]] = {
    "ring (python layout)": chash.ConsistentHashRouter,
    "ring (ketama layout)": lambda: chash.ConsistentHashRouter(layout="ketama"),
    "ring (envoy layout)": lambda: chash.ConsistentHashRouter(layout="envoy"),
    "maglev": chash.MaglevRouter,
    "jump": chash.JumpRouter,
    "rendezvous": chash.RendezvousRouter,
}


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds per lookup of one pass of fn over the keys."""
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.enable()
    return wall / KEYS, cpu / KEYS


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds (default %(default)s)")
    args = parser.parse_args(argv)
    rng = random.Random(43)
    names = [f"10.0.{i // 250}.{i % 250}:8000" for i in range(NODES)]
    loads = {name: rng.randrange(21) for name in names}
    keys = [f"session-{rng.getrandbits(48):x}" for _ in range(KEYS)]
    routers = {}
    for label, make in FAMILIES.items():
        router = make()
        for name in names:
            router.add_service_node(name)
        # The answers are the rule's: a full owner sends some keys on.
        moved = sum(router.get_bounded(k, loads) != router.get_target_node(k) for k in keys)
        routers[label] = (router, moved)

    samples: dict[str, dict[str, list[float]]] = {
        label: {"get": [], "bounded": [], "get_cpu": [], "bounded_cpu": []} for label in FAMILIES}
    for _ in range(2):  # warm-up
        for router, _moved in routers.values():
            [router.get_target_node(k) for k in keys]
            [router.get_bounded(k, loads) for k in keys]
    for r in range(args.repeat):
        for label, (router, _moved) in routers.items():
            get, bounded = router.get_target_node, router.get_bounded
            passes = {"get": lambda: [get(k) for k in keys],
                      "bounded": lambda: [bounded(k, loads) for k in keys]}
            order = ["get", "bounded"] if r % 2 == 0 else ["bounded", "get"]
            for which in order:
                wall, cpu = timed(passes[which])
                samples[label][which].append(wall)
                samples[label][which + "_cpu"].append(cpu)

    print(f"get_bounded(key, loads) against get_target_node(key): {NODES} nodes, loads a dict "
          f"of {NODES}, balance factor 1.25, {KEYS} keys a pass, {args.repeat} interleaved "
          f"rounds; CPython {sys.version.split()[0]}, chash {chash.__version__}")
    print(LEGEND)
    print(f"{'family':<22} {'get ns':>8} {'cpu':>6} {'bounded ns':>11} {'cpu':>6} "
          f"{'ratio (wall)':>15} {'ratio (CPU)':>15} {'moved':>6}")
    verdict = None
    for label, (_router, moved) in routers.items():
        s = samples[label]
        wall = both(s["bounded"], s["get"])
        cpu = both(s["bounded_cpu"], s["get_cpu"])
        print(f"{label:<22} {statistics.median(s['get']) * 1e9:>8.0f} "
              f"{statistics.median(s['get_cpu']) * 1e9:>6.0f} "
              f"{statistics.median(s['bounded']) * 1e9:>11.0f} "
              f"{statistics.median(s['bounded_cpu']) * 1e9:>6.0f} "
              f"{wall[0]:>7.2f} / {wall[1]:<5.2f} {cpu[0]:>7.2f} / {cpu[1]:<5.2f} "
              f"{moved / KEYS:>6.1%}")
        if label == "ring (python layout)":
            verdict = holds([*wall, *cpu], "<=", TARGET)
    print(f"moved: keys get_bounded sends past their owner.  Target: get_bounded <= {TARGET:g}x "
          f"get_target_node on the ring: {'met' if verdict else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
