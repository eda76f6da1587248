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
(``time.perf_counter_ns``) and the ratios rival / chash twice, the ratio of
the medians and the median of the per-round ratios (``_ratios.py``), which
are the result; absolute times are context.  A target holds only when both
ratios meet it.  Samples too long to escape the
scheduler (building big rings) also record the thread's CPU time, and rows
with preempted samples get a CPU-time cross-check under the table.  The
collector is off in timed sections and every contender is warmed up first.
A contender whose sample takes over a second (the documented router building
1000 nodes) gets fewer rounds within a time budget.  Targets are the
project's speed goals; a missed one is printed with a cross.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import _ratios  # noqa: E402
from _bench import (  # noqa: E402
    BATCH,
    COLD,
    RETAKE_BELOW_S,
    RETAKES,
    SINGLE,
    Group,
    Key,
    Measure,
    Obs,
    Row,
    add_target,
    lookup_measures,
    machine_info,
    make_row,
    node_counts,
    node_names,
    progress,
    report,
    request_keys,
    rss_per_point,
    run_schedule,
    timed,
    write_json,
)
from _ratios import of_rounds  # noqa: E402

import chash  # noqa: E402
from _support.reference_router import DocumentedRouter, md5_point  # noqa: E402

try:
    import uhashring  # type: ignore[import-untyped]
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit("the benchmark needs uhashring: pip install -e '.[bench]'") from exc


VNODES = 160
FAST_HASHES = ("murmur3", "xxh3", "fnv1a")
CHASH, DOC, UH = "chash", "documented", "uhashring"
RSS = "chash rss"  # the memory row's column: resident bytes a fresh process gains
BUILD, BUILD_ONE = "build the ring", "build, one node at a time"
ADD, REMOVE = "add one node", "remove one node"
FLAT_SMALL = (5, 100)  # nodes x virtual nodes: 500 points
FLAT_BIG = (1000, 1000)  # 1,000,000 points
FLAT_BIG_QUICK = (100, 1000)  # 100,000 points, to keep --quick quick


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
# Report


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
    """Bytes a ring point, on the freshly built rings; chash also by the
    resident memory a fresh process gains building the ring (rss)."""
    c, d, u = rings[CHASH], rings[DOC], rings[UH].runtime
    mem = {
        CHASH: c.memory_bytes / len(c.hash_ring),
        DOC: deep_size(d.hash_ring, d.node_map) / len(d.hash_ring),
        UH: deep_size(u._keys, u._ring, u._node_points, u._nodes, u._distribution)
        / len(u._keys),
    }
    rss = rss_per_point(n, VNODES)
    if rss is not None:
        mem[RSS] = rss
    row = Row(MD5_SECTION, "memory", n, "bytes/point", {k: [v] for k, v in mem.items()},
              {k: [v] for k, v in mem.items()}, {k: 0 for k in mem}, VS)
    add_target(row, "chash", "<=", 10, value=mem[CHASH], unit=" B")
    if rss is not None:
        add_target(row, "chash rss", "<=", 10, value=rss, unit=" B")
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
                   rounds_value=of_rounds(single.samples[CHASH], batch.samples[CHASH]),
                   cpu_rounds_value=of_rounds(single.cpu_samples[CHASH],
                                              batch.cpu_samples[CHASH]),
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


# -- the layouts that follow nginx, libketama and libmemcached -----------------

#: (row, compat layout, its hash, python layout's hash, virtual nodes, weighted)
COMPAT_PAIRS = [
    ("nginx (crc32)", "nginx", "crc32", "crc32", 160, False),
    ("ketama (md5)", "ketama", "md5", "md5", 160, False),
    ("ketama, weights 1-3", "ketama", "md5", "md5", 160, True),
    ("libmemcached (one_at_a_time)", "libmemcached", "one_at_a_time", "one_at_a_time", 100, False),
    ("libmemcached (md5)", "libmemcached", "md5", "md5", 100, False),
    # HAProxy's ring: the nearest-point lookup against the successor, the
    # same hash and 16 points a node (weight 1) on both sides.
    ("haproxy (sdbm_avalanche)", "haproxy", "sdbm_avalanche", "sdbm_avalanche", 16, False),
    ("haproxy (crc32)", "haproxy", "crc32", "crc32", 16, False),
]


def compat_layout_rows(node_counts: Sequence[int], keys: list[str], repeat: int,
                       only: str | None = None) -> str:
    """Build and lookup of each compat layout against layout="python" with
    the same hash and points a node (hence the same hash cost), timed in
    interleaved rounds; medians and the ratio compat / python (target <= 1.5)."""
    import gc
    import math
    import statistics

    from chash import ConsistentHashRouter

    def build(layout: str, hash_name: str, vnodes: int, nodes: list[str],
              weights: list[int] | None) -> Any:
        router = ConsistentHashRouter(vnodes, hash=hash_name, layout=layout)
        if weights is None:
            router.add_service_nodes(nodes)
            return router
        # python gets the same points a node as libketama's shares give:
        # weight / mean weight (its points are round(vnodes * weight)).
        mean = sum(weights) / len(weights)
        for weight in sorted(set(weights)):
            group = [n for n, w in zip(nodes, weights, strict=True) if w == weight]
            router.add_service_nodes(group, weight if layout != "python" else weight / mean)
        return router

    lines = ["compat layouts vs layout='python' with the same hash and points a node "
             f"(medians of {repeat} interleaved rounds, each sample the best of 3 takes; "
             "ratio = compat / python, target <= 1.5; the weighted ketama ring is built "
             "one add_service_nodes call a weight, a rebuild each)",
             _ratios.LEGEND.replace(" / ", "/"),
             f"{'row':30} {'nodes':>6} {'build ms':>17} {'ratio':>11} {'batch ns/key':>17} "
             f"{'ratio':>11} {'single ns':>15} {'ratio':>11}"]
    missed = 0
    for row, layout, hash_name, py_hash, vnodes, weighted in COMPAT_PAIRS:
        if only is not None and layout != only:
            continue
        for n in node_counts:
            nodes = [f"10.{i >> 8 & 255}.{i & 255}.1:{11211 + i % 7}" for i in range(n)]
            weights = [1 + i % 3 for i in range(n)] if weighted else None
            samples: dict[str, list[float]] = {k: [] for k in
                                               ("cb", "pb", "cl", "pl", "cs", "ps")}
            single = keys[:2000]
            for r in range(repeat):
                order = [(layout, hash_name, "c"), ("python", py_hash, "p")]
                if r % 2:
                    order.reverse()
                for lay, h, tag in order:
                    # A sample is the best of 3 back-to-back takes: a take
                    # the scheduler interrupted does not count.
                    best = [math.inf, math.inf, math.inf]
                    for _ in range(3):
                        gc.disable()
                        t0 = time.perf_counter_ns()
                        router = build(lay, h, vnodes, nodes, weights)
                        t1 = time.perf_counter_ns()
                        router.get_target_nodes(keys)
                        t2 = time.perf_counter_ns()
                        get = router.get_target_node
                        for key in single:
                            get(key)
                        t3 = time.perf_counter_ns()
                        gc.enable()
                        best = [min(best[0], (t1 - t0) / 1e6), min(best[1], (t2 - t1) / len(keys)),
                                min(best[2], (t3 - t2) / len(single))]
                    samples[tag + "b"].append(best[0])
                    samples[tag + "l"].append(best[1])
                    samples[tag + "s"].append(best[2])
            med = {k: statistics.median(v) for k, v in samples.items()}
            ratios = [_ratios.both(samples["c" + k], samples["p" + k]) for k in "bls"]
            missed += sum(not _ratios.holds(pair, "<=", 1.5) for pair in ratios)
            cells = [f"{a:.2f}/{b:.2f}" for a, b in ratios]
            lines.append(
                f"{row:30} {n:>6} {med['cb']:>8.2f} /{med['pb']:>7.2f} {cells[0]:>11} "
                f"{med['cl']:>8.1f} /{med['pl']:>7.1f} {cells[1]:>11} "
                f"{med['cs']:>7.0f} /{med['ps']:>6.0f} {cells[2]:>11}")
    lines.append(f"compat targets missed: {missed}")
    return "\n".join(lines)


# -- 64-bit rings (envoy layout) and Maglev ---------------------------------


def wide_layout_rows(node_counts: Sequence[int], keys: list[str], repeat: int) -> str:
    """Lookups of the envoy layout's 64-bit ring against the 32-bit ring
    (layout="python", hash="xxh64": the same key hash, as many points a
    node), and of MaglevRouter(65537) against that 64-bit ring, timed in
    interleaved rounds: single get_target_node, batch get_target_nodes and
    batch get_target_nodes_by_hash (the engine alone, no key hashing).
    Ring sizes: Envoy's default minimum (1024) and 160 points a node.
    Targets: 64-bit / 32-bit <= 1.2, Maglev / 64-bit ring < 1."""
    import gc
    import math
    import statistics

    from chash import ConsistentHashRouter, MaglevRouter

    hashes32 = [chash.ConsistentHashRouter(1, hash="xxh64")._calculate_hash(k) for k in keys]
    hashes64 = [MaglevRouter(7)._calculate_hash(k) for k in keys]
    single = keys[:2000]
    kinds = ("single ns", "batch ns/key", "by-hash ns/key")

    def sample(router: Any, hashes: list[int]) -> list[float]:
        """The best of 3 back-to-back takes of each lookup kind."""
        best = [math.inf] * 3
        get, many, by_hash = (router.get_target_node, router.get_target_nodes,
                              router.get_target_nodes_by_hash)
        for _ in range(3):
            gc.disable()
            t0 = time.perf_counter_ns()
            for key in single:
                get(key)
            t1 = time.perf_counter_ns()
            many(keys)
            t2 = time.perf_counter_ns()
            by_hash(hashes)
            t3 = time.perf_counter_ns()
            gc.enable()
            best = [min(best[0], (t1 - t0) / len(single)), min(best[1], (t2 - t1) / len(keys)),
                    min(best[2], (t3 - t2) / len(keys))]
        return best

    lines = ["64-bit rings and Maglev (medians of "
             f"{repeat} interleaved rounds, each sample the best of 3 takes; the envoy layout "
             "with minimum_ring_size 1024 (Envoy's default) and 160 a node, against "
             "layout='python', hash='xxh64' with as many points a node; MaglevRouter(65537) "
             "against the envoy ring)",
             _ratios.LEGEND.replace(" / ", "/"),
             f"{'nodes':>6} {'points':>7} {'lookup':>15} {'64-bit':>8} {'32-bit':>8} "
             f"{'64/32':>11} {'maglev':>8} {'mg/64':>11}"]
    missed = 0
    shapes = [(n, size) for n in node_counts for size in sorted({1024, 160 * n})]
    for n, size in shapes:
        nodes = [f"10.{i >> 8 & 255}.{i & 255}.7:8080" for i in range(n)]
        wide = ConsistentHashRouter(layout="envoy", minimum_ring_size=size)
        wide.add_service_nodes(nodes)
        per_node = wide.points[nodes[0]]
        narrow = ConsistentHashRouter(per_node, hash="xxh64")
        narrow.add_service_nodes(nodes)
        maglev = MaglevRouter()
        maglev.add_service_nodes(nodes)
        contenders = [("64", wide, hashes64), ("32", narrow, hashes32), ("mg", maglev, hashes64)]
        samples: dict[str, list[list[float]]] = {tag: [] for tag, _, _ in contenders}
        for r in range(repeat):
            order = contenders[r % 3:] + contenders[:r % 3]
            for tag, router, hashes in order:
                samples[tag].append(sample(router, hashes))
        med = {tag: [statistics.median(s[i] for s in rows) for i in range(3)]
               for tag, rows in samples.items()}
        for i, kind in enumerate(kinds):
            column = {tag: [s[i] for s in rows] for tag, rows in samples.items()}
            r64 = _ratios.both(column["64"], column["32"])
            rmg = _ratios.both(column["mg"], column["64"])
            ok64, okmg = _ratios.holds(r64, "<=", 1.2), max(rmg) < 1
            marks = ("" if ok64 else " x") + ("" if okmg else " x")
            missed += (not ok64) + (not okmg)
            cells = [f"{r[0]:.2f}/{r[1]:.2f}" for r in (r64, rmg)]
            lines.append(f"{n:>6} {sum(wide.points.values()):>7} {kind:>15} {med['64'][i]:>8.1f} "
                         f"{med['32'][i]:>8.1f} {cells[0]:>11} {med['mg'][i]:>8.1f} "
                         f"{cells[1]:>11}{marks}")
    builds = []
    for n in (100, 1000):
        nodes = [f"10.{i >> 8 & 255}.{i & 255}.7:8080" for i in range(n)]
        times = []
        for _ in range(repeat):
            router = MaglevRouter()
            t0 = time.perf_counter_ns()
            router.add_service_nodes(nodes)
            times.append((time.perf_counter_ns() - t0) / 1e6)
        builds.append(f"{n} hosts {statistics.median(times):.2f} ms")
    lines.append("MaglevRouter(65537) build (median): " + ", ".join(builds))
    lines.append(f"64-bit targets missed: {missed}")
    return "\n".join(lines)


# -- JumpRouter -----------------------------------------------------------


def jump_rows(node_counts: Sequence[int], keys: list[str], repeat: int) -> str:
    """Lookups of JumpRouter (layout="jump", hash="xxh64"; and layout="guava",
    hash="murmur3_128", Guava's) against MaglevRouter(65537) and the envoy
    layout's 64-bit ring (the same XXH64 key hash), timed in interleaved
    rounds as wide_layout_rows times them: single get_target_node, batch
    get_target_nodes and batch get_target_nodes_by_hash.  Jump keeps no
    table and takes O(log n) steps a lookup."""
    import gc
    import math
    import statistics

    from chash import ConsistentHashRouter, JumpRouter, MaglevRouter

    hashes = [MaglevRouter(7)._calculate_hash(k) for k in keys]
    single = keys[:2000]
    kinds = ("single ns", "batch ns/key", "by-hash ns/key")

    def sample(router: Any) -> list[float]:
        best = [math.inf] * 3
        get, many, by_hash = (router.get_target_node, router.get_target_nodes,
                              router.get_target_nodes_by_hash)
        for _ in range(3):
            gc.disable()
            t0 = time.perf_counter_ns()
            for key in single:
                get(key)
            t1 = time.perf_counter_ns()
            many(keys)
            t2 = time.perf_counter_ns()
            by_hash(hashes)
            t3 = time.perf_counter_ns()
            gc.enable()
            best = [min(best[0], (t1 - t0) / len(single)), min(best[1], (t2 - t1) / len(keys)),
                    min(best[2], (t3 - t2) / len(keys))]
        return best

    lines = [f"JumpRouter (medians of {repeat} interleaved rounds, each sample the best of 3 "
             "takes, ns; jump: layout='jump', hash='xxh64'; guava: layout='guava', "
             "hash='murmur3_128'; maglev: MaglevRouter(65537); ring: layout='envoy', "
             "minimum_ring_size 1024)",
             _ratios.LEGEND.replace(" / ", "/"),
             f"{'nodes':>6} {'lookup':>15} {'jump':>8} {'guava':>8} {'maglev':>8} {'ring':>8} "
             f"{'mg/jump':>11} {'ring/jump':>11}"]
    for n in node_counts:
        nodes = [f"10.{i >> 8 & 255}.{i & 255}.7:8080" for i in range(n)]
        jump = JumpRouter()
        guava = JumpRouter(layout="guava", hash="murmur3_128")
        maglev = MaglevRouter()
        ring = ConsistentHashRouter(layout="envoy")
        contenders = [("jump", jump), ("guava", guava), ("mg", maglev), ("ring", ring)]
        for _, router in contenders:
            router.add_service_nodes(nodes)
        samples: dict[str, list[list[float]]] = {tag: [] for tag, _ in contenders}
        for r in range(repeat):
            order = contenders[r % 4:] + contenders[:r % 4]
            for tag, router in order:
                samples[tag].append(sample(router))
        med = {tag: [statistics.median(s[i] for s in rows) for i in range(3)]
               for tag, rows in samples.items()}
        for i, kind in enumerate(kinds):
            cells = ["{:.2f}/{:.2f}".format(*_ratios.both([s[i] for s in samples[tag]],
                                                          [s[i] for s in samples["jump"]]))
                     for tag in ("mg", "ring")]
            lines.append(f"{n:>6} {kind:>15} {med['jump'][i]:>8.1f} {med['guava'][i]:>8.1f} "
                         f"{med['mg'][i]:>8.1f} {med['ring'][i]:>8.1f} "
                         f"{cells[0]:>11} {cells[1]:>11}")
    return "\n".join(lines)


def rendezvous_rows(node_counts: Sequence[int], keys: list[str], repeat: int) -> str:
    """RendezvousRouter against pymemcache 4.0's HashClient hasher
    (pymemcache.client.rendezvous.RendezvousHash.get_node, pure Python),
    timed in interleaved rounds: single get_target_node and batch
    get_target_nodes of layout="pymemcache" (the same answers as
    RendezvousHash, checked) and of layout="hrw" (weighted, all weights 1),
    against get_node on fewer keys (it scores every node in Python); chash
    on 2,000 keys a sample, single and batch alike, so that samples are short
    enough to dodge the scheduler on a loaded machine.
    Target: RendezvousHash / chash pymemcache >= 200x at 10 nodes."""
    import gc
    import math
    import statistics

    from chash import RendezvousRouter

    try:
        from pymemcache.client.rendezvous import RendezvousHash
    except ImportError as exc:
        raise SystemExit("the rendezvous rows need pymemcache: pip install pymemcache==4.0.0") from exc

    def timed(call: Any, items: list[str], batch: bool) -> float:
        """ns a key, the best of 3 back-to-back takes."""
        best = math.inf
        for _ in range(3):
            gc.disable()
            t0 = time.perf_counter_ns()
            if batch:
                call(items)
            else:
                for key in items:
                    call(key)
            best = min(best, (time.perf_counter_ns() - t0) / len(items))
            gc.enable()
        return best

    info = machine_info(["pymemcache"])
    load = os.getloadavg()[0]
    lines = [f"chash {info['chash']} ({info['commit']}) · pymemcache {info['pymemcache']} · "
             f"{info['python']} · {info['cpu']} · {info['cpu_count']} CPUs · load {load:.2f}",
             f"RendezvousRouter against pymemcache's RendezvousHash.get_node (medians of {repeat} "
             "interleaved rounds, each sample the best of 3 takes; chash on 2,000 keys, "
             "pymemcache on max(20, 20000 / nodes))",
             _ratios.LEGEND.replace(" / ", "/"),
             f"{'nodes':>6} {'pymemcache':>11} {'single':>8} {'batch':>8} {'hrw 1':>8} "
             f"{'hrw batch':>9} {'pm/single':>11} {'pm/batch':>11}  (ns a key)"]
    missed = 0
    for n in node_counts:
        nodes = [f"10.{i >> 8 & 255}.{i & 255}.7:11211" for i in range(n)]
        real = RendezvousHash()
        for node in nodes:
            real.add_node(node)
        exact = RendezvousRouter(layout="pymemcache")
        exact.add_service_nodes(nodes)
        hrw = RendezvousRouter()
        hrw.add_service_nodes(nodes)
        few = keys[:max(20, 20000 // n)]
        if exact.get_target_nodes(few) != [real.get_node(k) for k in few]:
            raise SystemExit(f"layout='pymemcache' differs from RendezvousHash at {n} nodes")
        single = keys[:2000]
        contenders: list[tuple[str, Any, list[str], bool]] = [
            ("pm", real.get_node, few, False),
            ("single", exact.get_target_node, single, False),
            ("batch", exact.get_target_nodes, single, True),
            ("hrw", hrw.get_target_node, single, False),
            ("hrw_batch", hrw.get_target_nodes, single, True),
        ]
        samples: dict[str, list[float]] = {tag: [] for tag, _, _, _ in contenders}
        for r in range(repeat):
            for tag, call, items, batch in contenders[r % 5:] + contenders[:r % 5]:
                samples[tag].append(timed(call, items, batch))
        med = {tag: statistics.median(v) for tag, v in samples.items()}
        r_single = _ratios.both(samples["pm"], samples["single"])
        r_batch = _ratios.both(samples["pm"], samples["batch"])
        mark = ""
        if n == 10:
            ok = _ratios.holds(r_single, ">=", 200)
            mark = "  >= 200x ✓" if ok else "  >= 200x ✗"
            missed += not ok
        lines.append(f"{n:>6} {med['pm']:>11,.0f} {med['single']:>8.1f} {med['batch']:>8.1f} "
                     f"{med['hrw']:>8.1f} {med['hrw_batch']:>9.1f} "
                     f"{'{:.0f}/{:.0f}×'.format(*r_single):>11} "
                     f"{'{:.0f}/{:.0f}×'.format(*r_batch):>11}{mark}")
    lines.append(f"rendezvous targets missed: {missed}; load {os.getloadavg()[0]:.2f} at the end")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: fewer keys and rounds, a 100,000-point flatness ring")
    parser.add_argument("--json", metavar="FILE", help="write every median, sample and ratio")
    parser.add_argument("--nodes", type=node_counts, default="3,10,100,1000",
                        help="node counts (default %(default)s)")
    parser.add_argument("--fast-nodes", type=node_counts, default="10,1000",
                        help="node counts of the fast-hash rows (default %(default)s)")
    parser.add_argument("--repeat", type=int, help="rounds a row (default 7, --quick 3)")
    parser.add_argument("--keys", type=int, help="lookup keys (default 20000, --quick 2000)")
    parser.add_argument("--compat-only", action="store_true",
                        help="only the rows of the nginx, ketama, libmemcached and haproxy layouts")
    parser.add_argument("--layout", metavar="NAME",
                        help="with --compat-only: the rows of this layout only (e.g. haproxy)")
    parser.add_argument("--wide-only", action="store_true",
                        help="only the rows of the 64-bit envoy ring and MaglevRouter")
    parser.add_argument("--jump-only", action="store_true",
                        help="only the rows of JumpRouter (against Maglev and the 64-bit ring)")
    parser.add_argument("--rendezvous-only", action="store_true",
                        help="only the rows of RendezvousRouter against pymemcache's hasher "
                             "(--nodes default 10,100,1000)")
    parser.add_argument("--families-only", action="store_true",
                        help="only the families side by side (every ring layout, Maglev, jump, "
                             "rendezvous) against uhashring, pymemcache's hasher and fastring, "
                             "and bounded loads' acquire + release against a plain lookup")
    parser.add_argument("--reference", metavar="GIT_REV",
                        help="only this checkout's engine against the engine built at GIT_REV, "
                             "interleaved (benchmarks/_against_revision.py; --nodes default 100)")
    parser.add_argument("--instructions", action="store_true",
                        help="with --reference: also count each layout's instructions under "
                             "callgrind (needs valgrind)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    nodes, fast_nodes = args.nodes, args.fast_nodes
    repeat = args.repeat or (3 if args.quick else 7)
    if repeat < 1 or not nodes or min(nodes + fast_nodes) < 1 or (args.keys or 1) < 1:
        raise SystemExit("--repeat, --keys and every node count must be at least 1")
    if args.compat_only:
        print(compat_layout_rows(nodes, request_keys(args.keys or 20000), repeat, args.layout))
        return 0
    if args.wide_only:
        print(wide_layout_rows(nodes, request_keys(args.keys or 20000), repeat))
        return 0
    if args.jump_only:
        print(jump_rows(nodes if "--nodes" in (argv if argv is not None else sys.argv)
                        else [10, 100, 1000], request_keys(args.keys or 20000), repeat))
        return 0
    if args.families_only:
        from _families import run as families

        given = "--nodes" in (argv if argv is not None else sys.argv)
        text, payload = families(nodes if given else [10, 100, 1000],
                                 request_keys(args.keys or 20000), repeat)
        if args.json:
            payload["command"] = " ".join(["python", *sys.argv])
            write_json(args.json, payload)
        print(text)
        return 0
    if args.rendezvous_only:
        given = "--nodes" in (argv if argv is not None else sys.argv)
        print(rendezvous_rows(nodes if given else [10, 100, 1000],
                              request_keys(args.keys or 20000), repeat))
        return 0
    if args.reference:
        from _against_revision import report as against_revision

        chosen = nodes if "--nodes" in (argv if argv is not None else sys.argv) else [100]
        print(against_revision(args.reference, chosen, request_keys(args.keys or 20000), repeat,
                               args.instructions))
        return 0
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
    info = machine_info(["uhashring"])  # before the run: the commit of the code being measured
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
        "a target holds when both the ratio of medians and the median of per-round ratios"
        " meet it; in brackets, a verdict by CPU time (if samples were preempted) or by the"
        " fastest samples that differs",
    ]
    text, met, total = report(rows, header)

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
            "targets_met": met,
            "targets_total": total,
        }
        write_json(args.json, payload)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
