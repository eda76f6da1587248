"""get_bounded(key, loads) against get_target_node(key) on every router
family at 100 nodes, loads a dict of all 100 nodes (in-flight counts drawn
from 0..20), the default balance factor 1.25.  Three dicts of the same
counts: keyed by the node names the router was given (as a gateway's
counts are), made in the router's node order, and in another order;
keyed by equal names that are other objects (counts keyed by names parsed
once, as from an engine's stats), in another order; and, in turn, by 16
such dicts, each keyed by equal names of its own (names made anew for
every call).  get_bounded finds each entry among the router's nodes with
one probe of the state's node index: by address for the router's own
objects and for the equal names it learned (the first it met of each
node), by str hash and value for the others.

Interleaved: each round times, for each family in turn, a pass of KEYS
lookups of each call, the five one after the other (the order rotating
by round), wall clock and CPU time.  The ratio is get_bounded over
get_target_node: the ratio of the medians and the median of the
per-round ratios (benchmarks/_ratios.py); the target is <= 6 for the
ring (ConsistentHashRouter's default layout), judged on each dict in
another order, names made anew included.  chash.compat.uhashring's HashRing is timed the same way,
get_bounded against its get_node.

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
from chash.compat.uhashring import HashRing

NODES = 100
KEYS = 2000
TARGET = 6.0
#: The passes of a round: get_target_node, then get_bounded over loads in
#: the router's order, in another order, keyed by equal names, and by
#: equal names new to the router at every call.
PASSES = ("get", "bounded", "other", "copies", "fresh")
#: Dicts of names made anew, taken in turn.
FRESH_DICTS = 16

FAMILIES: dict[str, Callable[[], Any]] = {
    "ring (python layout)": chash.ConsistentHashRouter,
    "ring (ketama layout)": lambda: chash.ConsistentHashRouter(layout="ketama"),
    "ring (envoy layout)": lambda: chash.ConsistentHashRouter(layout="envoy"),
    "maglev": chash.MaglevRouter,
    "jump": chash.JumpRouter,
    "rendezvous": chash.RendezvousRouter,
    "HashRing (uhashring)": HashRing,
}


def add_node(router: Any, name: str) -> None:
    """A router's add_service_node, HashRing's add_node."""
    if isinstance(router, HashRing):
        router.add_node(name)
    else:
        router.add_service_node(name)


def owner_of(router: Any) -> Callable[[str], Any]:
    """The lookup get_bounded is weighed against: get_target_node, or
    HashRing's get_node."""
    return router.get_node if isinstance(router, HashRing) else router.get_target_node


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
    shuffled = list(names)
    rng.shuffle(shuffled)
    other = {name: loads[name] for name in shuffled}
    copies = {"".join(list(name)): loads[name] for name in shuffled}
    fresh = [{"".join(list(name)): loads[name] for name in shuffled} for _ in range(FRESH_DICTS)]
    keys = [f"session-{rng.getrandbits(48):x}" for _ in range(KEYS)]
    calls = [(k, fresh[i % FRESH_DICTS]) for i, k in enumerate(keys)]
    routers = {}
    for label, make in FAMILIES.items():
        router = make()
        for name in names:
            add_node(router, name)
        # The answers are the rule's: a full owner sends some keys on.
        moved = sum(router.get_bounded(k, loads) != owner_of(router)(k) for k in keys)
        routers[label] = (router, moved)

    samples: dict[str, dict[str, list[float]]] = {
        label: {which + cpu: [] for which in PASSES for cpu in ("", "_cpu")} for label in FAMILIES}
    for _ in range(2):  # warm-up
        for router, _moved in routers.values():
            [owner_of(router)(k) for k in keys]
            [router.get_bounded(k, loads) for k in keys]
            [router.get_bounded(k, other) for k in keys]
            [router.get_bounded(k, copies) for k in keys]  # learned: the first met
            [router.get_bounded(k, d) for k, d in calls]
    for r in range(args.repeat):
        for label, (router, _moved) in routers.items():
            get, bounded = owner_of(router), router.get_bounded
            passes = {"get": lambda get=get: [get(k) for k in keys],
                      "bounded": lambda bounded=bounded: [bounded(k, loads) for k in keys],
                      "other": lambda bounded=bounded: [bounded(k, other) for k in keys],
                      "copies": lambda bounded=bounded: [bounded(k, copies) for k in keys],
                      "fresh": lambda bounded=bounded: [bounded(k, d) for k, d in calls]}
            order = list(PASSES)
            order = order[r % len(order):] + order[:r % len(order)]
            for which in order:
                wall, cpu = timed(passes[which])
                samples[label][which].append(wall)
                samples[label][which + "_cpu"].append(cpu)

    print(f"get_bounded(key, loads) against get_target_node(key): {NODES} nodes, loads a dict "
          f"of {NODES}, balance factor 1.25, {KEYS} keys a pass, {args.repeat} interleaved "
          f"rounds; CPython {sys.version.split()[0]}, chash {chash.__version__}")
    print(LEGEND)
    print(f"{'family':<22} {'get ns':>7} {'cpu':>5} | {'in order':>8} {'cpu':>5} "
          f"{'ratio wall':>13} {'ratio CPU':>13} | {'other order':>11} {'cpu':>5} "
          f"{'ratio wall':>13} {'ratio CPU':>13} | {'equal names':>11} {'cpu':>5} "
          f"{'ratio wall':>13} {'ratio CPU':>13} | {'names anew':>11} {'cpu':>5} "
          f"{'ratio wall':>13} {'ratio CPU':>13} | {'moved':>5}")
    verdicts: dict[str, bool] = {}
    for label, (_router, moved) in routers.items():
        s = samples[label]
        cells = [f"{label:<22} {statistics.median(s['get']) * 1e9:>7.0f} "
                 f"{statistics.median(s['get_cpu']) * 1e9:>5.0f}"]
        for which, width in (("bounded", 8), ("other", 11), ("copies", 11), ("fresh", 11)):
            wall = both(s[which], s["get"])
            cpu = both(s[which + "_cpu"], s["get_cpu"])
            cells.append(f"{statistics.median(s[which]) * 1e9:>{width}.0f} "
                         f"{statistics.median(s[which + '_cpu']) * 1e9:>5.0f} "
                         f"{wall[0]:>6.2f} / {wall[1]:<4.2f} {cpu[0]:>6.2f} / {cpu[1]:<4.2f}")
            if label == "ring (python layout)" and which in ("other", "copies", "fresh"):
                verdicts[which] = holds([*wall, *cpu], "<=", TARGET)
        print(" | ".join(cells) + f" | {moved / KEYS:>5.1%}")
    def verdict(which: str) -> str:
        return "met" if verdicts.get(which) else "NOT met"

    print(f"moved: keys get_bounded sends past their owner.  Target: get_bounded <= {TARGET:g}x "
          f"get_target_node on the ring, loads in another order: keyed by the names given "
          f"{verdict('other')}; by equal names {verdict('copies')}; by equal names made anew "
          f"for each call {verdict('fresh')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
