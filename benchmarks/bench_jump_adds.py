"""JumpRouter built by single adds: N calls of add_service_node, this
checkout's engine against another revision's, in one process.

The other revision's extension is built from ``git archive`` and loaded
beside this one (benchmarks/_against_revision.py's load_revision).  Each
count is timed once per engine, alternating which goes first, wall clock
and CPU time: a count at which one engine takes minutes is timed once, not
in rounds.  A count above --reference-max runs on this checkout only (the
reference's cost grows with the square of the count).

    PYTHONPATH=. python benchmarks/bench_jump_adds.py --reference ea11c0d --counts 1000,4000,16000,100000
"""
from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _against_revision import load_revision, this_checkout


def single_adds(engine: Any, n: int) -> tuple[float, float]:
    """(wall, CPU) seconds of n single add_service_node calls on a new
    JumpRouter, collector off; the router is checked after."""
    nodes = [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}:8080" for i in range(n)]
    router = engine.JumpRouter()
    add = router.add_service_node
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        for node in nodes:
            add(node)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.enable()
    assert len(router) == n
    router._check()
    return wall, cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reference", metavar="GIT_REV", required=True)
    parser.add_argument("--counts", default="1000,4000,16000,100000")
    parser.add_argument("--reference-max", type=int, default=100000,
                        help="the largest count the reference runs (default %(default)s)")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        reference = load_revision(args.reference, Path(scratch))
    engines = {"this": this_checkout(), "reference": reference}
    print(f"JumpRouter: n single add_service_node calls, this checkout against {args.reference}")
    print("milliseconds, wall clock and CPU time; ratio: this / reference, by wall clock")
    print(f"{'n':>7} {'this ms':>10} {'this cpu':>10} {'ref ms':>10} {'ref cpu':>10} {'ratio':>8}")
    for k, n in enumerate(counts):
        order = ["this", "reference"] if k % 2 == 0 else ["reference", "this"]
        got: dict[str, tuple[float, float]] = {}
        for name in order:
            if name == "reference" and n > args.reference_max:
                continue
            got[name] = single_adds(engines[name], n)
        this = got["this"]
        if "reference" in got:
            ref = got["reference"]
            print(f"{n:>7} {this[0] * 1e3:>10.2f} {this[1] * 1e3:>10.2f} {ref[0] * 1e3:>10.2f} "
                  f"{ref[1] * 1e3:>10.2f} {this[0] / ref[0]:>8.5f}", flush=True)
        else:
            print(f"{n:>7} {this[0] * 1e3:>10.2f} {this[1] * 1e3:>10.2f} {'-':>10} {'-':>10} "
                  f"{'-':>8}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
