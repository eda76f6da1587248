#!/usr/bin/env python3
"""chash against the documented pure-Python router and uhashring, in one run.

    python benchmarks/bench_router.py [--quick] [--json FILE]
                                      [--nodes 3,10,100,1000] [--repeat N]

Contenders, all with 160 virtual nodes a node and MD5 unless a row says
otherwise:

* chash: ``chash.ConsistentHashRouter(160)``;
* documented: ``DocumentedRouter(160)`` from ``tests/reference_router.py``,
  the pure-Python router chash replaces;
* uhashring: ``uhashring.HashRing(nodes=..., vnodes=160)`` in its default
  (non-ketama) mode, MD5 over the full 128 bits.

Method: every row is measured in rounds; in each round every contender is
timed once, the order rotating from round to round, so a burst of load on
this shared machine hits all of them alike.  The table shows the median of
the rounds and the ratios rival / chash, which are the result; absolute
times are context.  Timed sections run with the garbage collector off,
after a ``gc.collect()`` and an untimed warm-up; lookups repeat the key
list enough times that one sample lasts at least a few milliseconds.  A
contender whose sample takes over a second (the documented router building
1000 nodes) gets fewer rounds and a time budget.  Targets come from the
project's issues; a missed one is printed with a cross, never hidden.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import chash  # noqa: E402
from reference_router import DocumentedRouter, md5_point  # noqa: E402

try:
    import uhashring  # type: ignore[import-untyped]  # noqa: E402
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit("the benchmark needs uhashring: pip install -e '.[bench]'") from exc

VNODES = 160
FAST_HASHES = ("murmur3", "xxh3", "fnv1a")
CHASH, DOC, UH, UH_ONE = "chash", "documented", "uhashring", "uhashring add_node"
FLAT_SMALL = (5, 100)  # nodes x virtual nodes: 500 points
FLAT_BIG = (1000, 1000)  # 1,000,000 points
FLAT_BIG_QUICK = (100, 1000)  # 100,000 points, to keep --quick quick

Key = tuple[str, str]  # (row, contender)
Sample = Callable[[int], dict[Key, float]]  # round index -> values


# --------------------------------------------------------------------------
# Timing


def timed(fn: Callable[[], object]) -> tuple[int, object]:
    """Runs fn once with the collector off; (elapsed ns, fn's result)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        result = fn()
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    return elapsed, result


@dataclass
class Measure:
    """One contender of a round: sample(r) times it once and returns values."""

    name: str
    sample: Sample
    warmup: Callable[[], object] | None = None


@dataclass
class Rounds:
    """Samples of one interleaved series, keyed by (row, contender)."""

    samples: dict[Key, list[float]] = field(default_factory=dict)


def run_rounds(
    measures: Sequence[Measure],
    rounds: int,
    *,
    slow_s: float,
    slow_rounds: int,
    budget_s: float,
) -> Rounds:
    """Interleaves the measures: A, B, C, then B, C, A, then C, A, B, ...

    A measure whose first sample takes longer than slow_s seconds stops after
    slow_rounds samples or once its samples have used budget_s seconds
    (whichever comes first); it always gets at least one.
    """
    out = Rounds()
    for m in measures:
        if m.warmup is not None:
            m.warmup()
    spent = {m.name: 0.0 for m in measures}
    first = {m.name: 0.0 for m in measures}
    done = {m.name: 0 for m in measures}
    for r in range(rounds):
        shift = r % len(measures)
        for m in list(measures[shift:]) + list(measures[:shift]):
            if done[m.name] and first[m.name] > slow_s:
                if done[m.name] >= slow_rounds or spent[m.name] + first[m.name] > budget_s:
                    continue
            wall = time.perf_counter()
            values = m.sample(r)
            wall = time.perf_counter() - wall
            if not done[m.name]:
                first[m.name] = wall
            spent[m.name] += wall
            done[m.name] += 1
            for key, value in values.items():
                out.samples.setdefault(key, []).append(value)
    return out


def passes_for(run_once: Callable[[], object], min_ns: int) -> int:
    """How many passes over the keys make one sample last at least min_ns."""
    elapsed, _ = timed(run_once)
    return max(1, math.ceil(min_ns / max(elapsed, 1)))


# --------------------------------------------------------------------------
# Contenders


def chash_router(nodes: Iterable[str], vnodes: int = VNODES, hash: str = "md5") -> Any:
    router = chash.ConsistentHashRouter(vnodes, hash=hash)
    add = router.add_service_node
    for node in nodes:
        add(node)
    return router


def documented_router(nodes: Iterable[str]) -> DocumentedRouter:
    router = DocumentedRouter(VNODES)
    add = router.add_service_node
    for node in nodes:
        add(node)
    return router


def uhashring_ring(nodes: Sequence[str]) -> Any:
    return uhashring.HashRing(nodes=list(nodes), vnodes=VNODES)


def uhashring_one_by_one(nodes: Iterable[str]) -> Any:
    ring = uhashring.HashRing(nodes=[], vnodes=VNODES)
    add = ring.add_node
    for node in nodes:
        add(node)
    return ring


def node_names(count: int) -> list[str]:
    return [f"backend-{i:04d}.svc:8080" for i in range(count)]


def request_keys(count: int) -> list[str]:
    """ASCII keys such as a gateway routes by (user or session ids)."""
    rng = random.Random(20240601)
    return [f"user:{rng.getrandbits(48):012x}" for _ in range(count)]


def documented_points(node: str) -> list[int]:
    return [md5_point(f"{node}_virtual_{i}") for i in range(VNODES)]


def spare_nodes(count: int, taken_by: Sequence[str]) -> list[str]:
    """Names to add and remove again whose points collide with no point of
    taken_by (nor with each other): the documented router cannot remove a
    node that shares a point with another one."""
    taken = {p for node in taken_by for p in documented_points(node)}
    spares: list[str] = []
    i = 0
    while len(spares) < count:
        name = f"backend-spare-{i}.svc:8080"
        i += 1
        points = documented_points(name)
        if len(set(points)) == len(points) and taken.isdisjoint(points):
            spares.append(name)
            taken.update(points)
    return spares


def deep_size(*roots: object) -> int:
    """Bytes of every object reachable from roots through lists, tuples,
    sets and dicts, each distinct object counted once."""
    seen: set[int] = set()
    stack = list(roots)
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
    return total


# --------------------------------------------------------------------------
# Lookup measures


def lookup_measures(
    label: str, router_get: Callable[[str], object], keys: list[str], min_ns: int,
    batch: Callable[[list[str]], object] | None,
    single_row: str = "single lookup", batch_row: str = "batch lookup",
) -> list[Measure]:
    """A single-lookup and a batch measure, in ns per key.  Without a batch
    call of its own the contender's batch is a list comprehension."""
    passes = {"single": 1, "batch": 1}

    def single_once() -> None:
        for key in keys:
            router_get(key)

    if batch is None:
        def batch_once() -> object:
            return [router_get(key) for key in keys]
    else:
        def batch_once() -> object:
            return batch(keys)

    def make(kind: str, once: Callable[[], object], row: str) -> Measure:
        def run() -> None:
            for _ in range(passes[kind]):
                once()

        def sample(_r: int) -> dict[Key, float]:
            elapsed, _ = timed(run)
            return {(row, label): elapsed / (passes[kind] * len(keys))}

        def warmup() -> None:
            once()
            passes[kind] = passes_for(once, min_ns)

        return Measure(f"{label} {row}", sample, warmup)

    return [make("single", single_once, single_row), make("batch", batch_once, batch_row)]


# --------------------------------------------------------------------------
# Report


@dataclass
class Row:
    section: str
    row: str
    nodes: int | str
    unit: str
    median: dict[str, float]
    samples: dict[str, list[float]]
    ratios: dict[str, float]
    targets: list[dict[str, Any]] = field(default_factory=list)

    def spread(self) -> float:
        """Largest (max - min) / median over the contenders, a noise gauge."""
        worst = 0.0
        for name, values in self.samples.items():
            if len(values) > 1 and self.median[name] > 0:
                worst = max(worst, (max(values) - min(values)) / self.median[name])
        return worst


def add_target(row: Row, what: str, value: float, op: str, threshold: float,
               unit: str = "×") -> None:
    ok = value >= threshold if op == ">=" else value <= threshold
    row.targets.append({"target": what, "value": value, "op": op, "threshold": threshold,
                        "unit": unit.strip(), "ok": ok})


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def target_text(t: dict[str, Any]) -> str:
    mark = "✓" if t["ok"] else "✗"
    sign = "≥" if t["op"] == ">=" else "≤"
    unit = "×" if t["unit"] == "×" else f" {t['unit']}"
    return f"{t['target']} {fmt(t['value'])}{unit} {sign} {t['threshold']:g}{unit} {mark}"


def render(rows: list[Row], header: list[str]) -> str:
    lines = list(header)
    sections: dict[str, list[Row]] = {}
    for row in rows:
        sections.setdefault(row.section, []).append(row)
    for section, members in sections.items():
        columns = list(dict.fromkeys(name for r in members for name in r.median))
        ratio_cols = list(dict.fromkeys(name for r in members for name in r.ratios))
        head = ["row", "nodes", "unit", *columns, *ratio_cols, "spread", "target"]
        table: list[list[str]] = []
        for r in members:
            cells = [r.row, str(r.nodes), r.unit]
            cells += [fmt(r.median[c]) if c in r.median else "" for c in columns]
            cells += [f"{fmt(r.ratios[c])}×" if c in r.ratios else "" for c in ratio_cols]
            cells.append(f"{100 * r.spread():.0f}%")
            cells.append("; ".join(target_text(t) for t in r.targets))
            table.append(cells)
        widths = [max(len(x) for x in col) for col in zip(head, *table)]
        right = set(range(1, len(head) - 1))
        def line(cells: list[str]) -> str:
            return "  ".join(
                c.rjust(w) if i in right else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths))
            ).rstrip()
        lines += ["", section, line(head), line(["-" * w for w in widths])]
        lines += [line(cells) for cells in table]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# The benchmark


@dataclass
class Config:
    nodes: list[int]
    fast_nodes: list[int]
    repeat: int
    keys: int
    min_sample_ms: float
    slow_rounds: int
    slow_budget_s: float
    flat_big: tuple[int, int]
    quick: bool


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_row(section: str, row: str, nodes: int | str, unit: str, scale: float,
             rounds: Rounds, contenders: Sequence[str],
             ratios: Sequence[tuple[str, str, str]]) -> Row:
    samples = {c: [v / scale for v in rounds.samples[(row, c)]]
               for c in contenders if (row, c) in rounds.samples}
    median = {c: statistics.median(v) for c, v in samples.items()}
    return Row(section, row, nodes, unit, median, samples,
               {label: median[num] / median[den] for label, num, den in ratios
                if num in median and den in median})


def bench_md5(cfg: Config, keys: list[str], rows: list[Row]) -> dict[int, dict[str, Any]]:
    """Build, lookups, add, remove and memory at each node count."""
    section = f"MD5, {VNODES} virtual nodes a node; ratios are rival / chash"
    min_ns = int(cfg.min_sample_ms * 1e6)
    all_nodes = node_names(max(cfg.nodes))
    spares = spare_nodes(cfg.repeat + 1, all_nodes)
    rings: dict[int, dict[str, Any]] = {}
    vs = [("doc/chash", DOC, CHASH), ("uh/chash", UH, CHASH)]
    for n in cfg.nodes:
        nodes = all_nodes[:n]
        built: dict[str, Any] = {}

        def build(name: str, make: Callable[[], object]) -> Measure:
            def sample(_r: int, name: str = name, make: Callable[[], object] = make) -> dict[Key, float]:
                built.pop(name, None)  # free the previous ring outside the timing
                elapsed, ring = timed(make)
                built[name] = ring
                return {("build the ring", name): float(elapsed)}

            return Measure(f"build {name}", sample)

        builders = [
            build(CHASH, lambda: chash_router(nodes)),
            build(DOC, lambda: documented_router(nodes)),
            build(UH, lambda: uhashring_ring(nodes)),
            build(UH_ONE, lambda: uhashring_one_by_one(nodes)),
        ]
        small = all_nodes[:3]
        builders[0].warmup = lambda: chash_router(small)
        builders[1].warmup = lambda: documented_router(small)
        builders[2].warmup = lambda: uhashring_ring(small)
        builders[3].warmup = lambda: uhashring_one_by_one(small)
        if cfg.quick and n >= 1000:
            builders.pop()  # a thousand full re-sorts: too slow for a smoke run
        progress(f"{n} nodes: build")
        res = run_rounds(builders, cfg.repeat, slow_s=1.0, slow_rounds=cfg.slow_rounds,
                         budget_s=cfg.slow_budget_s)
        row = make_row(section, "build the ring", n, "ms", 1e6, res,
                       [CHASH, DOC, UH, UH_ONE],
                       [*vs, ("uh add_node/chash", UH_ONE, CHASH)])
        if n == 1000:
            add_target(row, "doc/chash", row.ratios["doc/chash"], ">=", 30)
            add_target(row, "uh/chash", row.ratios["uh/chash"], ">=", 5)
        rows.append(row)
        ring_c, ring_d, ring_u = built[CHASH], built[DOC], built[UH]
        built.pop(UH_ONE, None)
        rings[n] = {CHASH: ring_c, UH: ring_u}

        progress(f"{n} nodes: lookups")
        measures = (
            lookup_measures(CHASH, ring_c.get_target_node, keys, min_ns, ring_c.get_target_nodes)
            + lookup_measures(DOC, ring_d.get_target_node, keys, min_ns, None)
            + lookup_measures(UH, ring_u.get_node, keys, min_ns, None)
        )
        res = run_rounds(measures, cfg.repeat, slow_s=1e9, slow_rounds=1, budget_s=0)
        single = make_row(section, "single lookup", n, "ns/key", 1, res, [CHASH, DOC, UH], vs)
        add_target(single, "doc/chash", single.ratios["doc/chash"], ">=",
               10 if n >= 1000 else 8)
        batch = make_row(section, "batch lookup", n, "ns/key", 1, res, [CHASH, DOC, UH], vs)
        add_target(batch, "single/batch",
               single.median[CHASH] / batch.median[CHASH], ">=", 1.2)
        rows += [single, batch]

        progress(f"{n} nodes: add and remove one node")

        def add_remove(name: str, add: Callable[[str], object],
                       remove: Callable[[str], object]) -> Measure:
            def sample(r: int) -> dict[Key, float]:
                spare = spares[r]
                t_add, _ = timed(lambda: add(spare))
                t_remove, _ = timed(lambda: remove(spare))
                return {("add one node", name): float(t_add),
                        ("remove one node", name): float(t_remove)}

            def warmup() -> None:
                add(spares[-1])
                remove(spares[-1])

            return Measure(f"add/remove {name}", sample, warmup)

        res = run_rounds(
            [add_remove(CHASH, ring_c.add_service_node, ring_c.remove_service_node),
             add_remove(DOC, ring_d.add_service_node, ring_d.remove_service_node),
             add_remove(UH, ring_u.add_node, ring_u.remove_node)],
            cfg.repeat, slow_s=1e9, slow_rounds=1, budget_s=0)
        add_row = make_row(section, "add one node", n, "µs", 1e3, res, [CHASH, DOC, UH], vs)
        rm_row = make_row(section, "remove one node", n, "µs", 1e3, res, [CHASH, DOC, UH], vs)
        if n == 1000:
            add_target(add_row, "doc/chash", add_row.ratios["doc/chash"], ">=", 10)
            add_target(rm_row, "doc/chash", rm_row.ratios["doc/chash"], ">=", 500)
        rows += [add_row, rm_row]

        points_c = len(ring_c.hash_ring)
        mem = {
            CHASH: ring_c.memory_bytes / points_c,
            DOC: deep_size(ring_d.hash_ring, ring_d.node_map) / len(ring_d.hash_ring),
            UH: deep_size(*(getattr(ring_u.runtime, a) for a in
                            ("_keys", "_ring", "_node_points", "_nodes", "_distribution")))
            / len(ring_u.runtime._keys),
        }
        mem_row = Row(section, "memory", n, "bytes/point", mem, {k: [v] for k, v in mem.items()},
                      {label: mem[a] / mem[b] for label, a, b in vs})
        add_target(mem_row, "chash", mem[CHASH], "<=", 10, unit=" B")
        rows.append(mem_row)
    return rings


def bench_fast(cfg: Config, keys: list[str], rows: list[Row],
               rings: dict[int, dict[str, Any]]) -> None:
    section = (f"chash with fast hashes against uhashring (MD5), {VNODES} virtual nodes a node;"
               " ratios are uhashring / chash")
    min_ns = int(cfg.min_sample_ms * 1e6)
    for n in cfg.fast_nodes:
        progress(f"{n} nodes: fast hashes")
        nodes = node_names(n)
        ring_u = rings[n][UH] if n in rings else uhashring_ring(nodes)
        measures: list[Measure] = []
        for h in FAST_HASHES:
            router = chash_router(nodes, hash=h)
            measures += lookup_measures(h, router.get_target_node, keys, min_ns,
                                        router.get_target_nodes)
        measures += lookup_measures(UH, ring_u.get_node, keys, min_ns, None)
        res = run_rounds(measures, cfg.repeat, slow_s=1e9, slow_rounds=1, budget_s=0)
        for kind, goal in (("single lookup", 20), ("batch lookup", 30)):
            ratios = [(f"uh/{h}", UH, h) for h in FAST_HASHES]
            row = make_row(section, kind, n, "ns/key", 1, res, [*FAST_HASHES, UH], ratios)
            for label, _, _ in ratios:
                add_target(row, label.removeprefix("uh/"), row.ratios[label], ">=", goal)
            rows.append(row)


def bench_flat(cfg: Config, keys: list[str], rows: list[Row]) -> float:
    """Lookup cost at 500 points against a big ring; returns its build time."""
    section = "Flatness: chash murmur3 lookups as the ring grows"
    min_ns = int(cfg.min_sample_ms * 1e6)
    small_n, small_v = FLAT_SMALL
    big_n, big_v = cfg.flat_big
    small_label = f"{small_n * small_v:,} points"
    big_label = f"{big_n * big_v:,} points"
    progress(f"flatness: building {big_label}")
    small = chash_router(node_names(small_n), small_v, "murmur3")
    build_s = time.perf_counter()
    big = chash_router(node_names(big_n), big_v, "murmur3")
    build_s = time.perf_counter() - build_s
    progress(f"flatness: lookups ({build_s:.1f} s to build)")
    measures = (
        lookup_measures(small_label, small.get_target_node, keys, min_ns, small.get_target_nodes)
        + lookup_measures(big_label, big.get_target_node, keys, min_ns, big.get_target_nodes)
    )
    res = run_rounds(measures, cfg.repeat, slow_s=1e9, slow_rounds=1, budget_s=0)
    label = "big/small"
    for kind in ("single lookup", "batch lookup"):
        row = make_row(section, kind, f"{small_n}, {big_n}", "ns/key", 1, res,
                       [small_label, big_label], [(label, big_label, small_label)])
        add_target(row, label, row.ratios[label], "<=", 2)
        rows.append(row)
    return build_s


def machine_info() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "chash": getattr(chash, "__version__", "unknown"),
        "chash_commit": commit,
        "uhashring": getattr(uhashring, "__version__", None) or _dist_version("uhashring"),
    }


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: fewer keys and rounds, a 100,000-point flatness ring")
    parser.add_argument("--json", metavar="FILE", help="write every median, sample and ratio")
    parser.add_argument("--nodes", default="3,10,100,1000", help="node counts (default %(default)s)")
    parser.add_argument("--fast-nodes", default="10,1000",
                        help="node counts of the fast-hash rows (default %(default)s)")
    parser.add_argument("--repeat", type=int, help="rounds a row (default 7, --quick 3)")
    parser.add_argument("--keys", type=int, help="lookup keys (default 20000, --quick 2000)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    nodes = sorted({int(x) for x in args.nodes.split(",") if x})
    fast_nodes = sorted({int(x) for x in args.fast_nodes.split(",") if x})
    repeat = args.repeat or (3 if args.quick else 7)
    if repeat < 1 or not nodes or min(nodes + fast_nodes) < 1:
        raise SystemExit("--repeat and every node count must be at least 1")
    cfg = Config(
        nodes=nodes,
        fast_nodes=fast_nodes,
        repeat=repeat,
        keys=args.keys or (2000 if args.quick else 20000),
        min_sample_ms=2.0 if args.quick else 10.0,
        slow_rounds=min(repeat, 1 if args.quick else 3),
        slow_budget_s=10.0 if args.quick else 45.0,
        flat_big=FLAT_BIG_QUICK if args.quick else FLAT_BIG,
        quick=args.quick,
    )
    started = time.perf_counter()
    load_start = os.getloadavg()
    keys = request_keys(cfg.keys)
    rows: list[Row] = []
    rings = bench_md5(cfg, keys, rows)
    bench_fast(cfg, keys, rows, rings)
    del rings
    flat_build_s = bench_flat(cfg, keys, rows)
    runtime = time.perf_counter() - started
    load_end = os.getloadavg()
    info = machine_info()

    slow = "" if cfg.slow_rounds >= repeat else (
        f" (a contender taking over 1 s a sample: {cfg.slow_rounds},"
        f" within {cfg.slow_budget_s:g} s)")
    header = [
        f"chash {info['chash']} ({info['chash_commit']}) · documented router · uhashring {info['uhashring']}",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end;"
        f" {runtime:.0f} s in all",
        f"medians of {repeat} interleaved rounds{slow}; {cfg.keys:,} keys;"
        " ratios: rival / chash, higher is better for chash;",
        "spread: largest (max - min) / median among the row's contenders",
    ]
    text = render(rows, header)
    failed = [(r, t) for r in rows for t in r.targets if not t["ok"]]
    total = sum(len(r.targets) for r in rows)
    text += f"\n\ntargets met: {total - len(failed)} of {total}"
    for r, t in failed:
        text += f"\n  missed: {r.row} at {r.nodes} nodes: {target_text(t)}"
    print(text)

    if args.json:
        payload = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": info,
            "load_average": {"start": load_start, "end": load_end},
            "runtime_s": runtime,
            "flat_big_build_s": flat_build_s,
            "config": {
                "virtual_nodes": VNODES, "nodes": cfg.nodes, "fast_nodes": cfg.fast_nodes,
                "rounds": repeat, "slow_rounds": cfg.slow_rounds,
                "slow_budget_s": cfg.slow_budget_s, "keys": cfg.keys,
                "min_sample_ms": cfg.min_sample_ms,
                "flat_small": FLAT_SMALL, "flat_big": cfg.flat_big, "quick": cfg.quick,
            },
            "rows": [
                {"section": r.section, "row": r.row, "nodes": r.nodes, "unit": r.unit,
                 "median": r.median, "ratios": r.ratios,
                 "targets": r.targets, "samples": r.samples}
                for r in rows
            ],
            "targets_met": total - len(failed),
            "targets_total": total,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n",
                                   encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
