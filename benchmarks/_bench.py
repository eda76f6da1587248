"""What the benchmarks of chash share: the interleaved schedule, timing,
rows and their rendering, targets, workloads and the machine description.

Not a benchmark itself; bench_router.py, bench_nodes.py and
bench_fastring.py import it.  The method is described in bench_router.py's
docstring and in README.md.
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
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _ratios

import chash

ROOT = Path(__file__).resolve().parent.parent

try:
    import resource

    def switches() -> int:
        """The thread's involuntary context switches so far (0 off Linux)."""
        return resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
except (ImportError, AttributeError):  # not Linux: no preemption detection

    def switches() -> int:
        """The thread's involuntary context switches so far (0 off Linux)."""
        return 0


SINGLE, BATCH = "single lookup", "batch lookup"
COLD = ", cold"
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
    switched = switches()
    cpu = time.thread_time_ns()
    start = time.perf_counter_ns()
    result = fn()
    wall = time.perf_counter_ns() - start
    cpu = time.thread_time_ns() - cpu
    return Obs(wall / ops, cpu / ops, switches() - switched, wall), result


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
# Workloads


def node_names(count: int) -> list[str]:
    return [f"backend-{i:04d}.svc:8080" for i in range(count)]


def request_keys(count: int) -> list[str]:
    """ASCII keys such as a gateway routes by (user or session ids)."""
    rng = random.Random(20240601)
    return [f"user:{rng.getrandbits(48):012x}" for _ in range(count)]


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


_RSS_SCRIPT = """
import gc, sys
import chash
from _bench import node_names

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE

PAGE = int(sys.argv[5])
nodes, vnodes, rings, hash_name = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
names = node_names(nodes)
gc.collect()
before = rss()
keep = []
for _ in range(rings):
    router = chash.ConsistentHashRouter(vnodes, hash=hash_name)
    router.add_service_nodes(names)
    keep.append(router)
gc.collect()
print((rss() - before) / (rings * len(keep[0].hash_ring)))
"""

RSS_POINTS = 200_000  # points a measurement builds, in as many rings as it takes


def rss_per_point(nodes: int, vnodes: int, hash_name: str = "md5") -> float | None:
    """Resident memory the system gives a ring, in bytes a point: in a fresh
    process, the growth of its resident set while it builds rings of nodes
    x vnodes with add_service_nodes (one ring of 200,000 points or more,
    else as many as make 200,000 points, so pages are not the unit), node
    names made first.  None where /proc/self/statm does not exist."""
    if not os.path.exists("/proc/self/statm"):
        return None
    rings = max(1, math.ceil(RSS_POINTS / (nodes * vnodes)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "benchmarks"), str(Path(chash.__file__).parent.parent),
         os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(nodes), str(vnodes), str(rings), hash_name,
         str(os.sysconf("SC_PAGE_SIZE"))],
        capture_output=True, text=True, check=True, env=env)
    return float(done.stdout)


def node_counts(text: str) -> list[int]:
    """An argparse type: comma-separated node counts, each >= 1, sorted."""
    try:
        counts = sorted({int(x) for x in text.split(",") if x})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"node counts are comma-separated integers: {exc}") from exc
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError("every node count must be at least 1")
    return counts


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

    def _paired(self, samples: dict[str, list[float]]) -> dict[str, float]:
        # A slow contender may have fewer rounds: _ratios pairs what both have.
        return {label: _ratios.of_rounds(samples[a], samples[b])
                for label, a, b in self.ratio_defs if a in samples and b in samples}

    @property
    def paired_ratios(self) -> dict[str, float]:
        """Median over the rounds of the ratio within each round."""
        return self._paired(self.samples)

    @property
    def cpu_paired_ratios(self) -> dict[str, float]:
        """The same by thread CPU time."""
        return self._paired(self.cpu_samples)

    def preempted(self, label: str) -> bool:
        """Whether a sample of either side of ratio label was kept preempted."""
        return any(self.switched.get(c, 0) for lab, a, b in self.ratio_defs if lab == label
                   for c in (a, b))

    @property
    def conservative_ratios(self) -> dict[str, float]:
        """Per ratio, the least favourable of the ratio of medians and the
        median of per-round ratios, and of both by CPU time where samples
        were preempted: the one to quote.  Least favourable follows the
        ratio's target (">=" unless a "<=" target is on it: rival / chash
        ratios are better higher)."""
        ops = {t["ratio"]: t["op"] for t in self.targets if t.get("ratio")}
        out = {}
        for label, value in self.ratios.items():
            values = [value, self.paired_ratios.get(label)]
            if self.preempted(label):
                values += [self.cpu_ratios.get(label), self.cpu_paired_ratios.get(label)]
            out[label] = _ratios.conservative(values, ops.get(label, ">="))
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
            "cpu_paired_ratios": self.cpu_paired_ratios,
            "conservative_ratios": self.conservative_ratios,
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
               fastest_value: float | None = None, unit: str = "×",
               rounds_value: float | None = None, cpu_rounds_value: float | None = None) -> None:
    """A target on the row's ratio named ratio, or on value (with, for a
    ratio of two other rows, rounds_value: the median of its per-round
    ratios).  A ratio's target holds only when both the ratio of the
    medians and the median of the per-round ratios meet it (so does its
    verdict by CPU time); the verdict of the fastest samples is kept
    beside it."""
    if ratio is not None:
        value, cpu_value = row.ratios[ratio], row.cpu_ratios[ratio]
        rounds_value, cpu_rounds_value = row.paired_ratios[ratio], row.cpu_paired_ratios[ratio]
        fastest_value = row.fastest_ratios[ratio]
    assert value is not None
    preempted = row.preempted(ratio) if ratio is not None else sum(row.switched.values()) > 0
    cpu_ok = (_ratios.holds([cpu_value, cpu_rounds_value], op, threshold)
              if cpu_value is not None else None)
    quoted = [value, rounds_value] + ([cpu_value, cpu_rounds_value] if preempted else [])
    row.targets.append({
        "target": what, "ratio": ratio, "value": value, "rounds_value": rounds_value,
        "op": op, "threshold": threshold, "unit": unit.strip(),
        "ok": _ratios.holds([value, rounds_value], op, threshold),
        "cpu_value": cpu_value, "cpu_rounds_value": cpu_rounds_value, "cpu_ok": cpu_ok,
        "fastest_value": fastest_value, "fastest_ok": _ratios.meets(fastest_value, op, threshold),
        "conservative_value": _ratios.conservative(quoted, op),
        "preempted": preempted,
    })


def doubts(t: dict[str, Any]) -> list[str]:
    """Other verdicts that contradict the median's: by CPU time when samples
    were preempted, and by the fastest samples (the quietest moments)."""
    unit = "×" if t["unit"] == "×" else f" {t['unit']}"
    out = []
    if t["preempted"] and t["cpu_ok"] is not None and t["cpu_ok"] != t["ok"]:
        cpu = fmt(t["cpu_value"]) + unit
        if t.get("cpu_rounds_value") is not None:
            cpu = _ratios.pair_text(t["cpu_value"], t["cpu_rounds_value"], unit)
        out.append(f"CPU time {cpu} {'✓' if t['cpu_ok'] else '✗'}")
    if t["fastest_ok"] is not None and t["fastest_ok"] != t["ok"]:
        out.append(f"fastest {fmt(t['fastest_value'])}{unit} {'✓' if t['fastest_ok'] else '✗'}")
    return out


fmt = _ratios.fmt


def target_text(t: dict[str, Any]) -> str:
    mark = "✓" if t["ok"] else "✗"
    sign = "≥" if t["op"] == ">=" else "≤"
    unit = "×" if t["unit"] == "×" else f" {t['unit']}"
    shown = fmt(t["value"]) + unit
    if t.get("rounds_value") is not None:
        shown = _ratios.pair_text(t["value"], t["rounds_value"], unit)
    text = f"{t['target']} {shown} {sign} {t['threshold']:g}{unit} {mark}"
    other = doubts(t)
    return text + (f" ({'; '.join(other)})" if other else "")


def render(rows: list[Row], header: list[str]) -> str:
    lines = [*header, _ratios.LEGEND]
    sections: dict[str, list[Row]] = {}
    for row in rows:
        sections.setdefault(row.section, []).append(row)
    for section, members in sections.items():
        columns = list(dict.fromkeys(name for r in members for name in r.samples))
        ratio_cols = list(dict.fromkeys(label for r in members for label, _, _ in r.ratio_defs))
        head = ["row", "nodes", "unit", *columns, *ratio_cols, "spread", "preempted", "target"]
        table: list[list[str]] = []
        for r in members:
            median, ratios, paired = r.median, r.ratios, r.paired_ratios
            cells = [r.row, str(r.nodes), r.unit]
            cells += [fmt(median[c]) if c in median else "" for c in columns]
            cells += [_ratios.pair_text(ratios[c], paired[c]) if c in ratios else ""
                      for c in ratio_cols]
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
        wall = ", ".join(f"{label} {_ratios.pair_text(v, r.paired_ratios[label])}"
                         for label, v in r.ratios.items())
        cpu = ", ".join(f"{label} {_ratios.pair_text(v, r.cpu_paired_ratios[label])}"
                        for label, v in r.cpu_ratios.items())
        lines.append(f"  {row_name(r)} ({who}): wall {wall}; CPU time {cpu}")
    if lines:
        lines.insert(0, "preempted samples kept (too long to retake, or preempted on every"
                        " retake), with ratios by thread CPU time (of medians / of rounds):")
    return lines


def row_name(row: Row) -> str:
    return f"{row.row} at {row.nodes} nodes" if row.nodes != "" else row.row


def report(rows: list[Row], header: list[str]) -> tuple[str, int, int]:
    """The tables, then the targets missed or uncertain and the CPU-time
    check: (text, targets met, targets)."""
    text = render(rows, header)
    failed = [(r, t) for r in rows for t in r.targets if not t["ok"]]
    total = sum(len(r.targets) for r in rows)
    text += (f"\n\ntargets met: {total - len(failed)} of {total} (wall clock; a ratio's target "
             "by both its ratio of medians and its median of per-round ratios)")
    for row, target in failed:
        text += f"\n  missed: {row_name(row)}: {target_text(target)}"
    for row, target in ((r, t) for r in rows for t in r.targets if doubts(t)):
        text += f"\n  uncertain: {row_name(row)}: {target_text(target)}"
    check = cpu_check(rows)
    if check:
        text += "\n\n" + "\n".join(check)
    return text, total - len(failed), total


def write_json(path: str, payload: dict[str, Any]) -> None:
    """payload as indented UTF-8 JSON at path, its folder made if need be."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------
# The machine


def machine_info(rivals: Sequence[str] = ()) -> dict[str, Any]:
    """The machine, the interpreter, the commit measured and the rivals' versions."""
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
        **{name: dist_version(name) for name in rivals},
    }


def dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


