#!/usr/bin/env python3
"""chash against the documented pure-Python router and uhashring, in one run.

    python benchmarks/bench_router.py [--quick] [--json FILE]
                                      [--nodes 3,10,100,1000] [--repeat N]

Contenders, all with 160 virtual nodes a node and MD5 unless a row says
otherwise:

* chash: ``chash.ConsistentHashRouter(160)``;
* documented: ``DocumentedRouter(160)`` from ``tests/_support/reference_router.py``,
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
1000 nodes) gets fewer rounds within a time budget.  Targets are the
project's speed goals; a missed one is printed with a cross.
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
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import chash  # noqa: E402
from _support.reference_router import DocumentedRouter, md5_point  # noqa: E402

try:
    import uhashring  # type: ignore[import-untyped]
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


Key = tuple[str, Hashable, str]  # (row, tag naming the setting, contender)
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
    """One contender of a group.  sample(seq) times it once; seq counts the
    calls, so each sample (and each retake) can use fresh keys or nodes."""

    name: str
    sample: Sample
    warmup: Callable[[], object] | None = None


@dataclass
class Group:
    """Measures compared with each other, timed one after the other."""

    label: str
    measures: list[Measure]


def run_schedule(
    groups: Sequence[Group],
    rounds: int,
    *,
    slow_s: float = 1.0,
    slow_rounds: int = 1,
    budget_s: float = 0.0,
) -> dict[Key, list[Obs]]:
    """Each round visits every group, and within a group times every
    measure once, rotating the order: A, B, C, then B, C, A, then C, A, B.
    So the rounds of a row are spread over the whole run, and the samples
    of one round of a group are taken close together.

    A preempted sample whose timed sections are shorter than RETAKE_BELOW_S
    is retaken up to RETAKES times.  A measure whose first sample takes
    longer than slow_s seconds stops after slow_rounds samples or once its
    samples have used budget_s seconds, whichever comes first; it always
    gets at least one.
    """
    out: dict[Key, list[Obs]] = {}
    measures = [m for g in groups for m in g.measures]
    spent = {m.name: 0.0 for m in measures}
    first = {m.name: 0.0 for m in measures}
    done = {m.name: 0 for m in measures}
    seq = {m.name: 0 for m in measures}
    assert len(done) == len(measures), "measure names must be unique"
    gc.collect()
    gc.disable()
    try:
        progress("warming up")
        for m in measures:
            if m.warmup is not None:
                m.warmup()
        for r in range(rounds):
            progress(f"round {r + 1} of {rounds}")
            for g in groups:
                gc.collect()
                shift = r % len(g.measures)
                for m in g.measures[shift:] + g.measures[:shift]:
                    if done[m.name] and first[m.name] > slow_s and (
                            done[m.name] >= slow_rounds or spent[m.name] + first[m.name] > budget_s):
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


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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
    tag: Hashable,
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
            return {(row + (COLD if cold else ""), tag, label): obs}

        def warmup() -> None:
            obs, _ = timed(lambda: run(keys), len(keys))
            want = math.ceil(min_ns / obs.wall)  # keys a sample should route
            if cold:
                size[row] = max(min(200, len(keys) // 2), min(len(keys) // 2, want))
            else:
                passes[row] = max(1, math.ceil(want / block))

        return Measure(f"{tag} {label} {row}{COLD if cold else ''}", sample, warmup)

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
    def fastest_ratios(self) -> dict[str, float]:
        return self._ratios({c: min(v) for c, v in self.samples.items()})

    @property
    def paired_ratios(self) -> dict[str, float]:
        """Median over the rounds of the ratio within each round."""
        out = {}
        for label, a, b in self.ratio_defs:
            if a in self.samples and b in self.samples:
                # A slow contender may have fewer rounds: pair what both have.
                pairs = zip(self.samples[a], self.samples[b], strict=False)
                out[label] = statistics.median(x / y for x, y in pairs)
        return out

    def spread(self) -> float:
        """Largest (max - min) / median over the contenders, a noise gauge."""
        worst = 0.0
        for values in self.samples.values():
            mid = statistics.median(values)
            if len(values) > 1 and mid > 0:
                worst = max(worst, (max(values) - min(values)) / mid)
        return worst

    def to_json(self) -> dict[str, Any]:
        return {
            "section": self.section, "row": self.row, "nodes": self.nodes, "unit": self.unit,
            "median": self.median, "ratios": self.ratios, "targets": self.targets,
            "paired_ratios": self.paired_ratios, "fastest_ratios": self.fastest_ratios,
            "cpu_median": self.cpu_median, "cpu_ratios": self.cpu_ratios,
            "preempted_samples": self.switched, "samples": self.samples,
            "cpu_samples": self.cpu_samples,
        }


def make_row(section: str, row: str, tag: Hashable, nodes: int | str, unit: str, scale: float,
             obs: dict[Key, list[Obs]], contenders: Sequence[str],
             ratio_defs: Sequence[tuple[str, str, str]]) -> Row:
    """A row from the samples of (row, tag, contender); values divided by scale."""
    found = {c: obs[(row, tag, c)] for c in contenders if (row, tag, c) in obs}
    return Row(
        section, row, nodes, unit,
        {c: [o.wall / scale for o in v] for c, v in found.items()},
        {c: [o.cpu / scale for o in v] for c, v in found.items()},
        {c: sum(1 for o in v if o.switched) for c, v in found.items()},
        list(ratio_defs),
    )


def add_target(row: Row, what: str, op: str, threshold: float, *, ratio: str | None = None,
               value: float | None = None, cpu_value: float | None = None,
               fastest_value: float | None = None, unit: str = "×") -> None:
    """A target on the row's ratio named ratio, or on value.  Judged on the
    wall-clock medians; the verdicts by CPU time and by the fastest samples
    are kept beside it."""
    if ratio is not None:
        value, cpu_value = row.ratios[ratio], row.cpu_ratios[ratio]
        fastest_value = row.fastest_ratios[ratio]
    assert value is not None

    def meets(v: float | None) -> bool | None:
        if v is None:
            return None
        return v >= threshold if op == ">=" else v <= threshold

    row.targets.append({
        "target": what, "value": value, "op": op, "threshold": threshold,
        "unit": unit.strip(), "ok": meets(value),
        "cpu_value": cpu_value, "cpu_ok": meets(cpu_value),
        "fastest_value": fastest_value, "fastest_ok": meets(fastest_value),
        "preempted": sum(row.switched.values()) > 0,
    })


def doubts(t: dict[str, Any]) -> list[str]:
    """Other verdicts that contradict the median's: by CPU time when samples
    were preempted, and by the fastest samples (the quietest moments)."""
    unit = "×" if t["unit"] == "×" else f" {t['unit']}"
    out = []
    if t["preempted"] and t["cpu_ok"] is not None and t["cpu_ok"] != t["ok"]:
        out.append(f"CPU time {fmt(t['cpu_value'])}{unit} {'✓' if t['cpu_ok'] else '✗'}")
    if t["fastest_ok"] is not None and t["fastest_ok"] != t["ok"]:
        out.append(f"fastest {fmt(t['fastest_value'])}{unit} {'✓' if t['fastest_ok'] else '✗'}")
    return out


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
    other = doubts(t)
    return text + (f" ({'; '.join(other)})" if other else "")


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
        widths = [max(len(x) for x in col) for col in zip(head, *table, strict=True)]
        right = set(range(1, len(head) - 1))

        def line(cells: list[str], right: set[int] = right, widths: list[int] = widths) -> str:
            return "  ".join(
                c.rjust(w) if i in right else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
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


VS = [("doc/chash", DOC, CHASH), ("uh/chash", UH, CHASH)]
MD5_SECTION = f"MD5, {VNODES} virtual nodes a node; ratios are rival / chash"
FAST_SECTION = (f"chash with fast hashes against uhashring (MD5), {VNODES} virtual nodes a node;"
                " ratios are uhashring / chash")
FLAT_SECTION = "Flatness: chash murmur3 lookups as the ring grows"
COLD = ", cold"


@dataclass
class Fixtures:
    """Rings built once, untimed, for the lookup, add and remove rows."""

    md5: dict[int, dict[str, Any]]  # nodes -> contender -> ring
    fast: dict[int, dict[str, Any]]  # nodes -> hash name or UH -> ring
    flat: dict[str, Any]  # points label -> router
    spares: list[str]
    flat_build_s: float


def make_fixtures(cfg: Config) -> Fixtures:
    progress("building the rings")
    all_nodes = node_names(max(cfg.nodes + cfg.fast_nodes))
    md5 = {n: {CHASH: chash_router(all_nodes[:n]), DOC: documented_router(all_nodes[:n]),
               UH: uhashring_ring(all_nodes[:n])} for n in cfg.nodes}
    fast: dict[int, dict[str, Any]] = {}
    for n in cfg.fast_nodes:
        fast[n] = {h: chash_router(all_nodes[:n], hash=h) for h in FAST_HASHES}
        fast[n][UH] = md5[n][UH] if n in md5 else uhashring_ring(all_nodes[:n])
    (small_n, small_v), (big_n, big_v) = FLAT_SMALL, cfg.flat_big
    flat = {f"{small_n * small_v:,} points": chash_router(node_names(small_n), small_v, "murmur3")}
    build_s = time.perf_counter()
    flat[f"{big_n * big_v:,} points"] = chash_router(node_names(big_n), big_v, "murmur3")
    build_s = time.perf_counter() - build_s
    spares = spare_nodes(cfg.repeat * (RETAKES + 1) + 1, all_nodes[:max(cfg.nodes)])
    return Fixtures(md5, fast, flat, spares, build_s)


def build_group(n: int, nodes: Sequence[str], quick: bool) -> Group:
    small = nodes[:3]

    def build(contender: str, how: str, make: Callable[[Sequence[str]], object],
              rows: Sequence[str]) -> Measure:
        def sample(_seq: int) -> dict[Key, Obs]:
            obs, _ = timed(lambda: make(nodes))  # the ring is freed after the timing
            return {(row, n, contender): obs for row in rows}

        return Measure(f"{n} {contender} {how}", sample, lambda: make(small))

    measures = [
        build(CHASH, "add_service_nodes", chash_router, [BUILD]),
        build(CHASH, "add_service_node", chash_one_by_one, [BUILD_ONE]),
        build(DOC, "add_service_node", documented_router, [BUILD, BUILD_ONE]),
        build(UH, "HashRing(nodes)", uhashring_ring, [BUILD]),
    ]
    if not (quick and n >= 1000):  # a thousand re-sorts of the whole ring
        measures.append(build(UH, "add_node", uhashring_one_by_one, [BUILD_ONE]))
    return Group(f"build {n}", measures)


def mutation_group(n: int, rings: dict[str, Any], spares: list[str]) -> Group:
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
            return {(op, n, name): obs}

        def warmup() -> None:
            add(spares[-1])
            remove(spares[-1])

        return Measure(f"{n} {op} {name}", sample, warmup)

    c, d, u = rings[CHASH], rings[DOC], rings[UH]
    return Group(f"add/remove {n}", [
        mutation(name, op, add, remove)
        for op in (ADD, REMOVE)
        for name, add, remove in ((CHASH, c.add_service_node, c.remove_service_node),
                                  (DOC, d.add_service_node, d.remove_service_node),
                                  (UH, u.add_node, u.remove_node))])


def groups_for(cfg: Config, fx: Fixtures, keys: list[str]) -> list[Group]:
    min_ns = int(cfg.min_sample_ms * 1e6)
    all_nodes = node_names(max(cfg.nodes))
    groups: list[Group] = []

    def lookups(tag: Hashable, label: str, router: Any, cold: bool = False) -> list[Measure]:
        if label == UH:
            get, batch = router.get_node, None
        elif label == DOC:
            get, batch = router.get_target_node, None
        else:
            get, batch = router.get_target_node, router.get_target_nodes
        return lookup_measures(tag, label, get, batch, keys, min_ns, cold=cold)

    for n in cfg.nodes:
        rings = fx.md5[n]
        groups.append(build_group(n, all_nodes[:n], cfg.quick))
        groups.append(Group(f"lookups {n}", [m for c in (CHASH, DOC, UH)
                                             for m in lookups(n, c, rings[c])]))
        groups.append(mutation_group(n, rings, fx.spares))
    for n in cfg.fast_nodes:
        groups.append(Group(f"fast lookups {n}", [m for name, ring in fx.fast[n].items()
                                                  for m in lookups(("fast", n), name, ring)]))
    groups.append(Group("flatness", [m for cold in (False, True)
                                     for label, router in fx.flat.items()
                                     for m in lookups("flat", label, router, cold)]))
    return groups


def memory_row(n: int, rings: dict[str, Any]) -> Row:
    """Bytes a ring point, on the freshly built rings."""
    c, d, u = rings[CHASH], rings[DOC], rings[UH].runtime
    mem = {
        CHASH: c.memory_bytes / len(c.hash_ring),
        DOC: deep_size(d.hash_ring, d.node_map) / len(d.hash_ring),
        UH: deep_size(u._keys, u._ring, u._node_points, u._nodes, u._distribution)
        / len(u._keys),
    }
    row = Row(MD5_SECTION, "memory", n, "bytes/point", {k: [v] for k, v in mem.items()},
              {k: [v] for k, v in mem.items()}, {k: 0 for k in mem}, VS)
    add_target(row, "chash", "<=", 10, value=mem[CHASH], unit=" B")
    return row


def collect_rows(cfg: Config, obs: dict[Key, list[Obs]], memory: dict[int, Row]) -> list[Row]:
    rows: list[Row] = []
    for n in cfg.nodes:
        def md5_row(row: str, unit: str, scale: float, n: int = n) -> Row:
            return make_row(MD5_SECTION, row, n, n, unit, scale, obs, [CHASH, DOC, UH], VS)

        build, build_one = md5_row(BUILD, "ms", 1e6), md5_row(BUILD_ONE, "ms", 1e6)
        single, batch = md5_row(SINGLE, "ns/key", 1), md5_row(BATCH, "ns/key", 1)
        add, remove = md5_row(ADD, "µs", 1e3), md5_row(REMOVE, "µs", 1e3)
        if n == 1000:
            add_target(build, "doc/chash", ">=", 30, ratio="doc/chash")
            add_target(build, "uh/chash", ">=", 5, ratio="uh/chash")
            add_target(add, "doc/chash", ">=", 10, ratio="doc/chash")
            add_target(remove, "doc/chash", ">=", 500, ratio="doc/chash")
        add_target(single, "doc/chash", ">=", 10 if n >= 1000 else 8, ratio="doc/chash")
        add_target(batch, "single/batch", ">=", 1.2,
                   value=single.median[CHASH] / batch.median[CHASH],
                   cpu_value=single.cpu_median[CHASH] / batch.cpu_median[CHASH],
                   fastest_value=min(single.samples[CHASH]) / min(batch.samples[CHASH]))
        rows += [build, build_one, single, batch, add, remove, memory[n]]
    for n in cfg.fast_nodes:
        ratio_defs = [(f"uh/{h}", UH, h) for h in FAST_HASHES]
        for kind, goal in ((SINGLE, 20), (BATCH, 30)):
            row = make_row(FAST_SECTION, kind, ("fast", n), n, "ns/key", 1, obs,
                           [*FAST_HASHES, UH], ratio_defs)
            for label, _, _ in ratio_defs:
                add_target(row, label.removeprefix("uh/"), ">=", goal, ratio=label)
            rows.append(row)
    (small_n, _), (big_n, _) = FLAT_SMALL, cfg.flat_big
    small_label, big_label = f"{FLAT_SMALL[0] * FLAT_SMALL[1]:,} points", \
        f"{cfg.flat_big[0] * cfg.flat_big[1]:,} points"
    # The target is on warm lookups (the loop over a fixed key list); the
    # cold rows show what cache misses add on a ring bigger than the caches.
    for kind in (SINGLE, BATCH, SINGLE + COLD, BATCH + COLD):
        row = make_row(FLAT_SECTION, kind, "flat", f"{small_n}, {big_n}", "ns/key", 1, obs,
                       [small_label, big_label], [("big/small", big_label, small_label)])
        if not kind.endswith(COLD):
            add_target(row, "big/small", "<=", 2, ratio="big/small")
        rows.append(row)
    return rows


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
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        if git("status", "--porcelain", "--", "csrc", "chash", "setup.py"):
            commit += " with uncommitted changes to csrc/ or chash/"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "chash": getattr(chash, "__version__", "unknown"),
        "chash_module": chash._chash.__file__,
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
    info = machine_info()  # before the run: the commit of the code being measured
    started = time.perf_counter()
    load_start = os.getloadavg()
    keys = request_keys(cfg.keys)
    fx = make_fixtures(cfg)
    memory = {n: memory_row(n, fx.md5[n]) for n in cfg.nodes}  # before any add or remove
    obs = run_schedule(groups_for(cfg, fx, keys), repeat, slow_rounds=cfg.slow_rounds,
                       budget_s=cfg.slow_budget_s)
    flat_build_s = fx.flat_build_s
    del fx
    rows = collect_rows(cfg, obs, memory)
    runtime = time.perf_counter() - started
    load_end = os.getloadavg()

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
        "targets are judged on the medians; in brackets, a verdict by CPU time (if samples"
        " were preempted) or by the fastest samples that differs",
    ]
    text = render(rows, header)
    failed = [(r, t) for r in rows for t in r.targets if not t["ok"]]
    total = sum(len(r.targets) for r in rows)
    text += f"\n\ntargets met: {total - len(failed)} of {total} (wall-clock medians)"
    for r, t in failed:
        text += f"\n  missed: {r.row} at {r.nodes} nodes: {target_text(t)}"
    for row, target in ((r, t) for r in rows for t in r.targets if doubts(t)):
        text += f"\n  uncertain: {row.row} at {row.nodes} nodes: {target_text(target)}"
    check = cpu_check(rows)
    if check:
        text += "\n\n" + "\n".join(check)

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
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
