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

Method, for a shared and noisy machine: each row is measured in rounds; in
each round every contender is timed once, the order rotating from round to
round, so a burst of load hits all of them alike.  Samples are short (about
a millisecond of lookups, one add or remove) and a sample during which the
thread was preempted (its involuntary context switches grew) is retaken with
fresh keys, up to a few times.  The table shows wall-clock medians
(``time.perf_counter_ns``) and the ratios rival / chash, which are the
result; absolute times are context.  Samples too long to escape the
scheduler (building big rings) also record the thread's CPU time, and rows
with preempted samples get a CPU-time cross-check under the table.  The
collector is off in timed sections and every contender is warmed up first.
A contender whose sample takes over a second (the documented router building
1000 nodes) gets fewer rounds within a time budget.  Targets come from the
project's issues; a missed one is printed with a cross.
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

try:
    import resource

    def _switches() -> int:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
except (ImportError, AttributeError):  # not Linux: no preemption detection

    def _switches() -> int:
        return 0


VNODES = 160
FAST_HASHES = ("murmur3", "xxh3", "fnv1a")
CHASH, DOC, UH = "chash", "documented", "uhashring"
BUILD, BUILD_ONE = "build the ring", "build, one node at a time"
SINGLE, BATCH = "single lookup", "batch lookup"
ADD, REMOVE = "add one node", "remove one node"
FLAT_SMALL = (5, 100)  # nodes x virtual nodes: 500 points
FLAT_BIG = (1000, 1000)  # 1,000,000 points
FLAT_BIG_QUICK = (100, 1000)  # 100,000 points, to keep --quick quick
BLOCK = 1000  # keys a warm lookup sample loops over
RETAKES = 4  # extra attempts at a preempted sample
RETAKE_BELOW_S = 0.05  # longer samples cannot dodge the scheduler: no retakes


# --------------------------------------------------------------------------
# Timing


@dataclass(frozen=True)
class Obs:
    """One sample: wall-clock and thread CPU ns per operation, preemptions."""

    wall: float
    cpu: float
    switched: int
    span: int  # wall-clock ns of the whole timed section


Key = tuple[str, str]  # (row, contender)
Sample = Callable[[int], dict[Key, Obs]]  # sequence number -> observations


def timed(fn: Callable[[], object], ops: int = 1) -> tuple[Obs, object]:
    """Runs fn once; its Obs per operation and its result.  The caller keeps
    the collector off (run_rounds does)."""
    switches = _switches()
    cpu = time.thread_time_ns()
    start = time.perf_counter_ns()
    result = fn()
    wall = time.perf_counter_ns() - start
    cpu = time.thread_time_ns() - cpu
    return Obs(wall / ops, cpu / ops, _switches() - switches, wall), result


@dataclass
class Measure:
    """One contender of a round.  sample(seq) times it once; seq counts the
    calls, so each sample (and each retake) can use fresh keys or nodes."""

    name: str
    sample: Sample
    warmup: Callable[[], object] | None = None


def run_rounds(
    measures: Sequence[Measure],
    rounds: int,
    *,
    slow_s: float = 1.0,
    slow_rounds: int = 1,
    budget_s: float = 0.0,
) -> dict[Key, list[Obs]]:
    """Interleaves the measures: A, B, C, then B, C, A, then C, A, B, ...

    A preempted sample whose timed sections are shorter than RETAKE_BELOW_S
    is retaken up to RETAKES times.  A measure whose first sample takes longer than slow_s seconds
    stops after slow_rounds samples or once its samples have used budget_s
    seconds, whichever comes first; it always gets at least one.
    """
    out: dict[Key, list[Obs]] = {}
    gc.collect()
    gc.disable()
    try:
        for m in measures:
            if m.warmup is not None:
                m.warmup()
        spent = {m.name: 0.0 for m in measures}
        first = {m.name: 0.0 for m in measures}
        done = {m.name: 0 for m in measures}
        seq = {m.name: 0 for m in measures}
        for r in range(rounds):
            gc.collect()
            shift = r % len(measures)
            for m in list(measures[shift:]) + list(measures[:shift]):
                if done[m.name] and first[m.name] > slow_s:
                    if done[m.name] >= slow_rounds or spent[m.name] + first[m.name] > budget_s:
                        continue
                for _attempt in range(RETAKES + 1):
                    wall = time.perf_counter()
                    values = m.sample(seq[m.name])
                    wall = time.perf_counter() - wall
                    seq[m.name] += 1
                    preempted = any(obs.switched for obs in values.values())
                    longest = max(obs.span for obs in values.values()) / 1e9
                    if not preempted or longest > RETAKE_BELOW_S:
                        break
                if not done[m.name]:
                    first[m.name] = wall
                spent[m.name] += wall
                done[m.name] += 1
                for key, obs in values.items():
                    out.setdefault(key, []).append(obs)
    finally:
        gc.enable()
    return out


# --------------------------------------------------------------------------
# Contenders


def chash_router(nodes: Sequence[str], vnodes: int = VNODES, hash: str = "md5") -> Any:
    """Built the way chash builds a ring: add_service_nodes, all at once."""
    router = chash.ConsistentHashRouter(vnodes, hash=hash)
    router.add_service_nodes(nodes)
    return router


def chash_one_by_one(nodes: Iterable[str]) -> Any:
    router = chash.ConsistentHashRouter(VNODES)
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
    """Built the way uhashring builds a ring: the node list to the constructor."""
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


def lookup_measures(
    label: str,
    get: Callable[[str], object],
    batch: Callable[[list[str]], object] | None,
    keys: list[str],
    min_ns: int,
    *,
    cold: bool = False,
) -> list[Measure]:
    """A single-lookup and a batch measure, in ns per key.

    Single: a Python loop calling get.  Batch: the contender's batch call,
    or without one the same loop as a list comprehension.

    Warm (the default), the steady state of looping over a fixed list of
    keys: each sample takes the next block of BLOCK keys, routes it once
    untimed, then times enough passes over it to last about min_ns.  Cold:
    each sample times one pass over the next run of keys, which the ring
    has not routed since the previous round (other contenders and a
    collection ran in between), long enough to last about min_ns.
    """
    ring = keys + keys
    block = min(BLOCK, len(keys))
    size = {SINGLE: block, BATCH: block}
    passes = {SINGLE: 1, BATCH: 1}

    def single(part: list[str]) -> None:
        for key in part:
            get(key)

    def comprehension(part: list[str]) -> object:
        return [get(key) for key in part]

    many = comprehension if batch is None else batch

    def make(row: str, run: Callable[[list[str]], object]) -> Measure:
        def sample(seq: int) -> dict[Key, Obs]:
            start = seq * size[row] % len(keys)
            part = ring[start:start + size[row]]
            if not cold:
                run(part)

            def repeat() -> None:
                for _ in range(passes[row]):
                    run(part)

            obs, _ = timed(repeat, passes[row] * len(part))
            return {(row + (", cold" if cold else ""), label): obs}

        def warmup() -> None:
            obs, _ = timed(lambda: run(keys), len(keys))
            want = math.ceil(min_ns / obs.wall)  # keys a sample should route
            if cold:
                size[row] = max(min(200, len(keys) // 2), min(len(keys) // 2, want))
            else:
                passes[row] = max(1, math.ceil(want / block))

        return Measure(f"{label} {row}{' cold' if cold else ''}", sample, warmup)

    return [make(SINGLE, single), make(BATCH, many)]


# --------------------------------------------------------------------------
# Report


@dataclass
class Row:
    section: str
    row: str
    nodes: int | str
    unit: str
    samples: dict[str, list[float]]  # wall-clock, in unit
    cpu_samples: dict[str, list[float]]  # thread CPU time, in unit
    switched: dict[str, int]  # samples kept although preempted
    ratio_defs: list[tuple[str, str, str]]
    targets: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median(self) -> dict[str, float]:
        return {c: statistics.median(v) for c, v in self.samples.items()}

    @property
    def cpu_median(self) -> dict[str, float]:
        return {c: statistics.median(v) for c, v in self.cpu_samples.items()}

    def _ratios(self, median: dict[str, float]) -> dict[str, float]:
        return {label: median[a] / median[b] for label, a, b in self.ratio_defs
                if a in median and b in median}

    @property
    def ratios(self) -> dict[str, float]:
        return self._ratios(self.median)

    @property
    def cpu_ratios(self) -> dict[str, float]:
        return self._ratios(self.cpu_median)

    @property
    def paired_ratios(self) -> dict[str, float]:
        """Median over the rounds of the ratio within each round."""
        out = {}
        for label, a, b in self.ratio_defs:
            if a in self.samples and b in self.samples:
                pairs = zip(self.samples[a], self.samples[b])
                out[label] = statistics.median(x / y for x, y in pairs)
        return out

    def spread(self) -> float:
        """Largest (max - min) / median over the contenders, a noise gauge."""
        worst = 0.0
        for name, values in self.samples.items():
            mid = statistics.median(values)
            if len(values) > 1 and mid > 0:
                worst = max(worst, (max(values) - min(values)) / mid)
        return worst

    def to_json(self) -> dict[str, Any]:
        return {
            "section": self.section, "row": self.row, "nodes": self.nodes, "unit": self.unit,
            "median": self.median, "ratios": self.ratios, "targets": self.targets,
            "paired_ratios": self.paired_ratios,
            "cpu_median": self.cpu_median, "cpu_ratios": self.cpu_ratios,
            "preempted_samples": self.switched, "samples": self.samples,
            "cpu_samples": self.cpu_samples,
        }


def make_row(section: str, row: str, nodes: int | str, unit: str, scale: float,
             obs: dict[Key, list[Obs]], contenders: Sequence[str],
             ratio_defs: Sequence[tuple[str, str, str]]) -> Row:
    """A row from the samples of (row, contender); values divided by scale."""
    found = {c: obs[(row, c)] for c in contenders if (row, c) in obs}
    return Row(
        section, row, nodes, unit,
        {c: [o.wall / scale for o in v] for c, v in found.items()},
        {c: [o.cpu / scale for o in v] for c, v in found.items()},
        {c: sum(1 for o in v if o.switched) for c, v in found.items()},
        list(ratio_defs),
    )


def add_target(row: Row, what: str, op: str, threshold: float, *, ratio: str | None = None,
               value: float | None = None, cpu_value: float | None = None,
               unit: str = "×") -> None:
    """A target on the row's ratio named ratio, or on value.  Judged on the
    wall-clock medians; the CPU-time verdict is kept beside it."""
    if ratio is not None:
        value, cpu_value = row.ratios[ratio], row.cpu_ratios[ratio]
    assert value is not None

    def meets(v: float) -> bool:
        return v >= threshold if op == ">=" else v <= threshold

    row.targets.append({
        "target": what, "value": value, "op": op, "threshold": threshold,
        "unit": unit.strip(), "ok": meets(value),
        "cpu_value": cpu_value, "cpu_ok": None if cpu_value is None else meets(cpu_value),
        "preempted": sum(row.switched.values()) > 0,
    })


def disputed(t: dict[str, Any]) -> bool:
    """Preempted samples and a CPU-time verdict that differs from the wall's."""
    return bool(t["preempted"]) and t["cpu_ok"] is not None and t["cpu_ok"] != t["ok"]


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
    text = f"{t['target']} {fmt(t['value'])}{unit} {sign} {t['threshold']:g}{unit} {mark}"
    if disputed(t):
        text += f" (CPU time {fmt(t['cpu_value'])}{unit} {'✓' if t['cpu_ok'] else '✗'})"
    return text


def render(rows: list[Row], header: list[str]) -> str:
    lines = list(header)
    sections: dict[str, list[Row]] = {}
    for row in rows:
        sections.setdefault(row.section, []).append(row)
    for section, members in sections.items():
        columns = list(dict.fromkeys(name for r in members for name in r.samples))
        ratio_cols = list(dict.fromkeys(label for r in members for label, _, _ in r.ratio_defs))
        head = ["row", "nodes", "unit", *columns, *ratio_cols, "spread", "preempted", "target"]
        table: list[list[str]] = []
        for r in members:
            median, ratios = r.median, r.ratios
            cells = [r.row, str(r.nodes), r.unit]
            cells += [fmt(median[c]) if c in median else "" for c in columns]
            cells += [f"{fmt(ratios[c])}×" if c in ratios else "" for c in ratio_cols]
            cells.append(f"{100 * r.spread():.0f}%")
            total = sum(len(v) for v in r.samples.values())
            cells.append(f"{sum(r.switched.values())}/{total}")
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


def cpu_check(rows: list[Row]) -> list[str]:
    """Rows with samples kept although preempted, with CPU-time ratios."""
    lines = []
    for r in rows:
        if not sum(r.switched.values()) or not r.ratio_defs:
            continue
        who = ", ".join(f"{c} {k}/{len(r.samples[c])}" for c, k in r.switched.items() if k)
        wall = ", ".join(f"{label} {fmt(v)}×" for label, v in r.ratios.items())
        cpu = ", ".join(f"{label} {fmt(v)}×" for label, v in r.cpu_ratios.items())
        lines.append(f"  {r.row} at {r.nodes} nodes ({who}): wall {wall}; CPU time {cpu}")
    if lines:
        lines.insert(0, "preempted samples kept (too long to retake, or preempted on every"
                        " retake), with ratios by thread CPU time:")
    return lines


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


def bench_md5(cfg: Config, keys: list[str], rows: list[Row]) -> dict[int, Any]:
    """Build, lookups, add, remove and memory at each node count; returns
    the uhashring rings for the fast-hash rows."""
    section = f"MD5, {VNODES} virtual nodes a node; ratios are rival / chash"
    min_ns = int(cfg.min_sample_ms * 1e6)
    all_nodes = node_names(max(cfg.nodes))
    spares = spare_nodes(cfg.repeat * (RETAKES + 1) + 1, all_nodes)
    uh_rings: dict[int, Any] = {}
    vs = [("doc/chash", DOC, CHASH), ("uh/chash", UH, CHASH)]
    for n in cfg.nodes:
        nodes = all_nodes[:n]
        small = all_nodes[:3]
        built: dict[str, Any] = {}

        def build(contender: str, how: str, make: Callable[[Sequence[str]], object],
                  rows_: Sequence[str]) -> Measure:
            name = f"{contender} {how}"

            def sample(_seq: int) -> dict[Key, Obs]:
                built.pop(name, None)  # free the previous ring outside the timing
                obs, ring = timed(lambda: make(nodes))
                built[name] = ring
                return {(row, contender): obs for row in rows_}

            return Measure(name, sample, lambda: make(small))

        builders = [
            build(CHASH, "add_service_nodes", chash_router, [BUILD]),
            build(CHASH, "add_service_node", chash_one_by_one, [BUILD_ONE]),
            build(DOC, "add_service_node", documented_router, [BUILD, BUILD_ONE]),
            build(UH, "HashRing(nodes)", uhashring_ring, [BUILD]),
            build(UH, "add_node", uhashring_one_by_one, [BUILD_ONE]),
        ]
        if cfg.quick and n >= 1000:
            builders.pop()  # a thousand re-sorts of the whole ring: too slow for a smoke run
        progress(f"{n} nodes: build")
        obs = run_rounds(builders, cfg.repeat, slow_rounds=cfg.slow_rounds,
                         budget_s=cfg.slow_budget_s)
        row = make_row(section, BUILD, n, "ms", 1e6, obs, [CHASH, DOC, UH], vs)
        if n == 1000:
            add_target(row, "doc/chash", ">=", 30, ratio="doc/chash")
            add_target(row, "uh/chash", ">=", 5, ratio="uh/chash")
        rows += [row, make_row(section, BUILD_ONE, n, "ms", 1e6, obs, [CHASH, DOC, UH], vs)]
        ring_c = built["chash add_service_nodes"]
        ring_d = built["documented add_service_node"]
        ring_u = built["uhashring HashRing(nodes)"]
        built.clear()
        uh_rings[n] = ring_u

        progress(f"{n} nodes: lookups")
        obs = run_rounds(
            lookup_measures(CHASH, ring_c.get_target_node, ring_c.get_target_nodes, keys, min_ns)
            + lookup_measures(DOC, ring_d.get_target_node, None, keys, min_ns)
            + lookup_measures(UH, ring_u.get_node, None, keys, min_ns),
            cfg.repeat)
        single = make_row(section, SINGLE, n, "ns/key", 1, obs, [CHASH, DOC, UH], vs)
        add_target(single, "doc/chash", ">=", 10 if n >= 1000 else 8, ratio="doc/chash")
        batch = make_row(section, BATCH, n, "ns/key", 1, obs, [CHASH, DOC, UH], vs)
        add_target(batch, "single/batch", ">=", 1.2,
                   value=single.median[CHASH] / batch.median[CHASH],
                   cpu_value=single.cpu_median[CHASH] / batch.cpu_median[CHASH])
        rows += [single, batch]

        progress(f"{n} nodes: add and remove one node")

        def mutation(name: str, op: str, add: Callable[[str], object],
                     remove: Callable[[str], object]) -> Measure:
            """Times the add (then removes untimed) or the remove (after an
            untimed add), so the ring is back to n nodes after each sample."""
            def sample(seq: int) -> dict[Key, Obs]:
                spare = spares[seq]
                if op == ADD:
                    obs, _ = timed(lambda: add(spare))
                    remove(spare)
                else:
                    add(spare)
                    obs, _ = timed(lambda: remove(spare))
                return {(op, name): obs}

            def warmup() -> None:
                add(spares[-1])
                remove(spares[-1])

            return Measure(f"{op} {name}", sample, warmup)

        obs = run_rounds(
            [mutation(name, op, add, remove)
             for op in (ADD, REMOVE)
             for name, add, remove in (
                 (CHASH, ring_c.add_service_node, ring_c.remove_service_node),
                 (DOC, ring_d.add_service_node, ring_d.remove_service_node),
                 (UH, ring_u.add_node, ring_u.remove_node))],
            cfg.repeat)
        add_row = make_row(section, ADD, n, "µs", 1e3, obs, [CHASH, DOC, UH], vs)
        rm_row = make_row(section, REMOVE, n, "µs", 1e3, obs, [CHASH, DOC, UH], vs)
        if n == 1000:
            add_target(add_row, "doc/chash", ">=", 10, ratio="doc/chash")
            add_target(rm_row, "doc/chash", ">=", 500, ratio="doc/chash")
        rows += [add_row, rm_row]

        runtime = ring_u.runtime
        mem = {
            CHASH: ring_c.memory_bytes / len(ring_c.hash_ring),
            DOC: deep_size(ring_d.hash_ring, ring_d.node_map) / len(ring_d.hash_ring),
            UH: deep_size(runtime._keys, runtime._ring, runtime._node_points, runtime._nodes,
                          runtime._distribution) / len(runtime._keys),
        }
        mem_row = Row(section, "memory", n, "bytes/point", {k: [v] for k, v in mem.items()},
                      {k: [v] for k, v in mem.items()}, {k: 0 for k in mem}, vs)
        add_target(mem_row, "chash", "<=", 10, value=mem[CHASH], unit=" B")
        rows.append(mem_row)
    return uh_rings


def bench_fast(cfg: Config, keys: list[str], rows: list[Row], uh_rings: dict[int, Any]) -> None:
    section = (f"chash with fast hashes against uhashring (MD5), {VNODES} virtual nodes a node;"
               " ratios are uhashring / chash")
    min_ns = int(cfg.min_sample_ms * 1e6)
    for n in cfg.fast_nodes:
        progress(f"{n} nodes: fast hashes")
        nodes = node_names(n)
        ring_u = uh_rings[n] if n in uh_rings else uhashring_ring(nodes)
        measures: list[Measure] = []
        for h in FAST_HASHES:
            router = chash_router(nodes, hash=h)
            measures += lookup_measures(h, router.get_target_node, router.get_target_nodes,
                                        keys, min_ns)
        measures += lookup_measures(UH, ring_u.get_node, None, keys, min_ns)
        obs = run_rounds(measures, cfg.repeat)
        for kind, goal in ((SINGLE, 20), (BATCH, 30)):
            ratio_defs = [(f"uh/{h}", UH, h) for h in FAST_HASHES]
            row = make_row(section, kind, n, "ns/key", 1, obs, [*FAST_HASHES, UH], ratio_defs)
            for label, _, _ in ratio_defs:
                add_target(row, label.removeprefix("uh/"), ">=", goal, ratio=label)
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
    measures: list[Measure] = []
    for cold in (False, True):
        for label, router in ((small_label, small), (big_label, big)):
            measures += lookup_measures(label, router.get_target_node, router.get_target_nodes,
                                        keys, min_ns, cold=cold)
    obs = run_rounds(measures, cfg.repeat)
    # The target is on warm lookups (the loop over a fixed key list); the
    # cold rows show what cache misses add on a ring bigger than the caches.
    for kind in (SINGLE, BATCH, f"{SINGLE}, cold", f"{BATCH}, cold"):
        row = make_row(section, kind, f"{small_n}, {big_n}", "ns/key", 1, obs,
                       [small_label, big_label], [("big/small", big_label, small_label)])
        if not kind.endswith("cold"):
            add_target(row, "big/small", "<=", 2, ratio="big/small")
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
        "commit": commit,
        "uhashring": _dist_version("uhashring"),
    }


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
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
    try:
        nodes = sorted({int(x) for x in args.nodes.split(",") if x})
        fast_nodes = sorted({int(x) for x in args.fast_nodes.split(",") if x})
    except ValueError as exc:
        raise SystemExit(f"node counts are comma-separated integers: {exc}") from exc
    repeat = args.repeat or (3 if args.quick else 7)
    if repeat < 1 or not nodes or min(nodes + fast_nodes) < 1 or (args.keys or 1) < 1:
        raise SystemExit("--repeat, --keys and every node count must be at least 1")
    cfg = Config(
        nodes=nodes,
        fast_nodes=fast_nodes,
        repeat=repeat,
        keys=args.keys or (2000 if args.quick else 20000),
        min_sample_ms=0.5 if args.quick else 1.0,
        slow_rounds=min(repeat, 1 if args.quick else 3),
        slow_budget_s=10.0 if args.quick else 45.0,
        flat_big=FLAT_BIG_QUICK if args.quick else FLAT_BIG,
        quick=args.quick,
    )
    started = time.perf_counter()
    load_start = os.getloadavg()
    keys = request_keys(cfg.keys)
    rows: list[Row] = []
    uh_rings = bench_md5(cfg, keys, rows)
    bench_fast(cfg, keys, rows, uh_rings)
    del uh_rings
    flat_build_s = bench_flat(cfg, keys, rows)
    runtime = time.perf_counter() - started
    load_end = os.getloadavg()
    info = machine_info()

    slow = "" if cfg.slow_rounds >= repeat else (
        f" (over 1 s a sample: {cfg.slow_rounds} rounds within {cfg.slow_budget_s:g} s)")
    header = [
        f"chash {info['chash']} ({info['commit']}) · documented router · uhashring {info['uhashring']}",
        f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs",
        f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; {runtime:.0f} s",
        f"wall-clock medians of {repeat} interleaved rounds{slow}; {cfg.keys:,} keys",
        "ratios: rival / chash, higher means chash is faster (or smaller)",
        "spread: largest (max - min) / median among the row's contenders;"
        " preempted: samples kept although preempted",
    ]
    text = render(rows, header)
    failed = [(r, t) for r in rows for t in r.targets if not t["ok"]]
    total = sum(len(r.targets) for r in rows)
    text += f"\n\ntargets met: {total - len(failed)} of {total} (wall-clock medians)"
    for r, t in failed:
        text += f"\n  missed: {r.row} at {r.nodes} nodes: {target_text(t)}"
    for r, t in ((r, t) for r in rows for t in r.targets if disputed(t)):
        text += f"\n  uncertain, preempted samples: {r.row} at {r.nodes} nodes: {target_text(t)}"
    check = cpu_check(rows)
    if check:
        text += "\n\n" + "\n".join(check)
    print(text)

    if args.json:
        payload = {
            "command": " ".join(["python", *sys.argv]),
            "machine": info,
            "load_average": {"start": load_start, "end": load_end},
            "runtime_s": runtime,
            "flat_big_build_s": flat_build_s,
            "config": {
                "virtual_nodes": VNODES, "nodes": cfg.nodes, "fast_nodes": cfg.fast_nodes,
                "rounds": repeat, "slow_rounds": cfg.slow_rounds,
                "slow_budget_s": cfg.slow_budget_s, "keys": cfg.keys,
                "min_sample_ms": cfg.min_sample_ms, "retakes": RETAKES,
                "retake_below_s": RETAKE_BELOW_S,
                "flat_small": FLAT_SMALL, "flat_big": cfg.flat_big, "quick": cfg.quick,
            },
            "rows": [r.to_json() for r in rows],
            "targets_met": total - len(failed),
            "targets_total": total,
        }
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
