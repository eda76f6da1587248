"""bench_router.py --reference GIT_REV: this checkout's engine against the
engine of another revision, in one process and interleaved rounds.

The other revision's extension is built from ``git archive`` in a scratch
folder and loaded beside this one under its own module object
(multi-phase init allows two copies of chash._chash in one interpreter),
so both are timed on the same keys, with the same Python, one right after
the other.  Each sample is the best of 3 back-to-back takes (wall clock,
with the CPU time of that take beside it); the table shows medians over
the rounds, the ratio of the medians, the median of the per-round ratios,
the CPU-time ratio of the medians, and the reference's own spread (its
slowest round against its median).  The verdicts: no median more than 3 %
slower, and every median within the reference's spread (no slower than its
slowest round) or faster.  Every family is measured: the 32-bit ring
(python, ketama, haproxy), the 64-bit ring (envoy), Maglev, jump and
rendezvous (hrw).
"""
from __future__ import annotations

import gc
import importlib.util
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAYOUTS = ("python", "ketama", "haproxy", "envoy", "maglev", "jump", "hrw")
WITHIN = 0.03


def this_checkout() -> ModuleType:
    """chash._chash of this checkout; SystemExit when ``import chash``
    finds another one (an editable install of another tree comes before
    this folder unless PYTHONPATH names it)."""
    import chash

    if not Path(chash.__file__).resolve().is_relative_to(ROOT):
        raise SystemExit(f"chash is imported from {chash.__file__}, not from this checkout: "
                         f"run with PYTHONPATH={ROOT}")
    return chash._chash


def load_revision(rev: str, scratch: Path) -> ModuleType:
    """chash._chash as it was at rev, built in scratch and loaded as a module
    of its own (not in sys.modules)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "-j2"], cwd=scratch,
                   check=True, stdout=subprocess.DEVNULL)
    (path,) = (scratch / "chash").glob("_chash*.so")
    spec = importlib.util.spec_from_file_location("chash._chash", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_router(engine: Any, layout: str) -> Any:
    if layout == "maglev":
        return engine.MaglevRouter()
    if layout == "jump":
        return engine.JumpRouter()
    if layout == "hrw":
        return engine.RendezvousRouter(layout="hrw")
    return engine.ConsistentHashRouter(layout=layout)


def best_of_3(fn: Callable[[], object], ops: int) -> tuple[float, float]:
    """(wall, CPU) ns per op: the fastest of three back-to-back takes by
    wall clock, and that take's CPU time; collector off."""
    best = (math.inf, math.inf)
    gc.disable()
    try:
        for _ in range(3):
            start, cpu = time.perf_counter_ns(), time.process_time_ns()
            fn()
            wall = (time.perf_counter_ns() - start) / ops
            if wall < best[0]:
                best = (wall, (time.process_time_ns() - cpu) / ops)
    finally:
        gc.enable()
    return best


def samplers(engine: Any, layout: str, nodes: list[str], keys: list[str],
             spares: list[str]) -> dict[str, Callable[[int], tuple[float, float]]]:
    """The timed operations on one engine's router of layout, by row name."""
    router = make_router(engine, layout)
    router.add_service_nodes(nodes)
    single = keys[:2000]
    get, many = router.get_target_node, router.get_target_nodes

    def lookups(_seq: int) -> tuple[float, float]:
        def run() -> None:
            for key in single:
                get(key)
        return best_of_3(run, len(single))

    def batch(_seq: int) -> tuple[float, float]:
        return best_of_3(lambda: many(keys), len(keys))

    def add_remove(seq: int) -> tuple[float, float]:
        node = spares[seq % len(spares)]

        def run() -> None:
            router.add_service_node(node)
            router.remove_service_node(node)
        wall, cpu = best_of_3(run, 1)
        return wall / 1000, cpu / 1000

    def add_many(_seq: int) -> tuple[float, float]:
        def run() -> None:
            fresh = make_router(engine, layout)
            fresh.add_service_nodes(nodes)
        wall, cpu = best_of_3(run, 1)
        return wall / 1000, cpu / 1000

    return {"single lookup ns": lookups, "batch lookup ns/key": batch,
            "add + remove one µs": add_remove, f"add {len(nodes)} at once µs": add_many}


def rows(rev: str, node_counts: Sequence[int], keys: list[str],
         repeat: int) -> tuple[str, int, int]:
    """The table, how many medians are more than 3 % slower, and how many
    are slower than the reference's slowest round."""
    current = this_checkout()
    with tempfile.TemporaryDirectory() as scratch:
        reference = load_revision(rev, Path(scratch))
    engines = {"this": current, "ref": reference}
    plans = []
    for n in node_counts:
        nodes = [f"10.{i >> 8 & 255}.{i & 255}.7:8080" for i in range(n)]
        spares = [f"spare-{i}.svc:80" for i in range(64)]
        for layout in LAYOUTS:
            per_engine = {name: samplers(engine, layout, nodes, keys, spares)
                          for name, engine in engines.items()}
            for row in per_engine["this"]:
                plans.append((n, layout, row, per_engine))
    samples: dict[tuple[int, str, str, str], list[tuple[float, float]]] = {}
    for r in range(repeat):
        print(f"[{time.strftime('%H:%M:%S')}] round {r + 1} of {repeat}", file=sys.stderr, flush=True)
        for n, layout, row, per_engine in plans:
            order = ("this", "ref") if r % 2 == 0 else ("ref", "this")
            for name in order:
                samples.setdefault((n, layout, row, name), []).append(per_engine[name][row](r))
    lines = [f"{'nodes':>5} {'layout':>8} {'operation':>22} {'this':>10} {'reference':>10} "
             f"{'ratio':>6} {'r/round':>7} {'cpu':>6} {'spread':>6}"]
    missed = outside = 0
    for n, layout, row, _ in plans:
        mine, theirs = samples[(n, layout, row, "this")], samples[(n, layout, row, "ref")]
        this = statistics.median(w for w, _ in mine)
        ref = statistics.median(w for w, _ in theirs)
        ratio = this / ref
        per_round = statistics.median(a[0] / b[0] for a, b in zip(mine, theirs, strict=True))
        cpu = statistics.median(c for _, c in mine) / statistics.median(c for _, c in theirs)
        slowest = max(w for w, _ in theirs)
        spread = slowest / ref
        mark = "" if ratio <= 1 + WITHIN and per_round <= 1 + WITHIN else " x"
        beyond = "" if this <= slowest else " s"
        missed += bool(mark)
        outside += bool(beyond)
        lines.append(f"{n:>5} {layout:>8} {row:>22} {this:>10.2f} {ref:>10.2f} {ratio:>6.3f} "
                     f"{per_round:>7.3f} {cpu:>6.3f} {spread:>6.3f}{mark}{beyond}")
    return "\n".join(lines), missed, outside


WORKLOAD = """
import sys
sys.path.insert(0, sys.argv[1])
import chash
layout, n = sys.argv[2], int(sys.argv[3])
nodes = [f"10.{i >> 8 & 255}.{i & 255}.7:8080" for i in range(n)]
make = {"maglev": lambda: chash.MaglevRouter(), "jump": lambda: chash.JumpRouter(),
        "hrw": lambda: chash.RendezvousRouter()}.get(
    layout, lambda: chash.ConsistentHashRouter(layout=layout))
router = make()
router.add_service_nodes(nodes)
keys = [f"user:{i:012x}" for i in range(100000)]
get = router.get_target_node
for key in keys:
    get(key)
router.get_target_nodes(keys)
for i in range(20):
    router.add_service_node(f"spare-{i}")
    router.remove_service_node(f"spare-{i}")
"""


def instructions(tree: Path, layout: str, n: int) -> int:
    """Instructions the workload above executes with the chash of tree
    (callgrind counts them: the same for the same binary and inputs,
    whatever else the machine does)."""
    with tempfile.TemporaryDirectory() as out:
        run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg",
                              sys.executable, "-c", WORKLOAD, str(tree), layout, str(n)],
                             capture_output=True, text=True, check=True)
    (line,) = [x for x in run.stderr.splitlines() if "Collected" in x or "refs:" in x][-1:]
    return int(line.rsplit(":", 1)[1].replace(",", "").split()[0])


def instruction_rows(rev: str, node_counts: Sequence[int]) -> str:
    """The workload's instruction counts, this tree against rev's."""
    lines = [f"{'nodes':>5} {'layout':>8} {'this':>15} {'reference':>15} {'ratio':>6}",]
    with tempfile.TemporaryDirectory() as scratch:
        load_revision(rev, Path(scratch))
        for n in node_counts:
            for layout in LAYOUTS:
                this, ref = instructions(ROOT, layout, n), instructions(Path(scratch), layout, n)
                lines.append(f"{n:>5} {layout:>8} {this:>15,} {ref:>15,} {this / ref:>6.3f}")
    return "\n".join(lines)


def report(rev: str, node_counts: Sequence[int], keys: list[str], repeat: int,
           count_instructions: bool = False) -> str:
    import os

    import chash

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    ref = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev],
                         capture_output=True, text=True, check=True).stdout.strip()
    load = os.getloadavg()[0]
    table, missed, outside = rows(rev, node_counts, keys, repeat)
    load_end = os.getloadavg()[0]
    head = [f"chash {chash.__version__} at {commit} against its engine at {ref}, in one process",
            f"medians of {repeat} interleaved rounds, each sample the best of 3 takes; "
            f"{len(keys):,} keys; load average {load:.2f} at start, {load_end:.2f} at the end",
            "ratio: this / reference, of the wall-clock medians (above 1: this revision is slower);",
            "r/round: the median of the per-round ratios; cpu: the ratio of the CPU-time medians;",
            "spread: the reference's slowest round / its median; x: ratio or r/round more than 3 % "
            "slower;",
            "s: this median slower than the reference's slowest round (outside its spread)"]
    rows_count = table.count(chr(10))
    text = [*head, table, f"more than 3 % slower: {missed} of {rows_count}; outside the "
            f"reference's spread: {outside} of {rows_count}"]
    if count_instructions:
        text += ["", "instructions (valgrind --tool=callgrind) of one process that builds the "
                 "router, routes 100,000 keys one by one and in a batch, and adds and removes "
                 "a node 20 times; the interpreter's own start included",
                 instruction_rows(rev, node_counts)]
    return "\n".join(text)
