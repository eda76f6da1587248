"""The families side by side: ``bench_router.py --families-only``.

Lookups (single ``get_target_node`` in a Python loop, and the batch
``get_target_nodes``) of every router family at each node count: the ring
in every layout (those of ``chash.LAYOUTS``, then envoy and grpc; and
``layout="python"`` with
``hash="xxh3"``, fastring's hash), ``MaglevRouter``, ``JumpRouter`` (the
paper's and Guava's) and ``RendezvousRouter`` in its four layouts; beside
them the Python libraries they stand in for where one applies: uhashring's
``HashRing`` (MD5, 160 virtual nodes) for the rings, pymemcache 4.0's
``RendezvousHash`` (its ``HashClient`` hasher) for rendezvous, and
fastring's ``HashRing`` (Rust, XXH3; CPython 3.13 only) for the rings.
The rivals have no batch call: their batch is a list comprehension.

Then bounded loads: ``BoundedLoadRouter.acquire`` + ``release`` of every
key in turn (so the loads stay light and every key goes to its owner)
against the same router's plain ``get_target_node``, over the ring, Maglev,
jump and rendezvous.

Method: in each of ``repeat`` rounds every contender of a node count is
timed once, the order rotating from round to round, so a burst of load
hits all of them alike; a sample is the best of three back-to-back passes
over its keys with the collector off (its thread CPU time and whether it
was preempted kept with it).  The tables show the medians of the rounds
and both ratios (``_ratios``): of the medians / the median of the
per-round ratios; a target holds only when both do.  Under the tables,
each ratio whose samples were preempted is repeated by CPU time.  chash passes over 2,000 keys;
pymemcache's hasher, which scores every node in Python, over
``max(20, 20000 / nodes)``.

Targets: ``RendezvousRouter(layout="pymemcache")`` single lookup >= 200x
``RendezvousHash.get_node`` at 10 nodes; acquire + release <= 2x a plain
lookup on the ring at 1,000 nodes (the other families' pairs are shown
with their ratios, no target).
"""
from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import _ratios
from _bench import machine_info, switches

import chash

CHASH_KEYS = 2000
VNODES = 160


@dataclass
class Contender:
    """One timed thing: a family's lookups, a rival's, or a bounded pair:
    its passes over its keys by kind ("single", "batch"; a bounded pair's
    acquire + release loop is its "single")."""

    name: str
    section: str  # "ring", "maglev", "jump", "rendezvous", "rival", "bounded"
    passes: dict[str, Callable[[], object]]
    count: int


def lookups(name: str, section: str, get: Callable[[Any], object],
            many: Callable[[list[Any]], object], keys: list[str]) -> Contender:
    return Contender(name, section, {"single": single_pass(get, keys),
                                     "batch": batch_pass(many, keys)}, len(keys))


def listed(get: Callable[[Any], object]) -> Callable[[list[Any]], object]:
    """A rival's batch: it has no batch call."""
    return lambda keys: [get(k) for k in keys]


def best_of_three(call: Callable[[], object], count: int) -> tuple[float, float, int]:
    """(wall-clock ns a key, thread CPU ns a key, preemptions) of the
    fastest of three back-to-back passes, collector off."""
    best = (math.inf, math.inf, 0)
    for _ in range(3):
        gc.disable()
        switched, cpu = switches(), time.thread_time_ns()
        start = time.perf_counter_ns()
        call()
        wall = time.perf_counter_ns() - start
        cpu, switched = time.thread_time_ns() - cpu, switches() - switched
        gc.enable()
        if wall / count < best[0]:
            best = (wall / count, cpu / count, switched)
    return best


def single_pass(get: Callable[[Any], object], keys: list[str]) -> Callable[[], object]:
    def run() -> None:
        for key in keys:
            get(key)
    return run


def batch_pass(many: Callable[[list[Any]], object], keys: list[str]) -> Callable[[], object]:
    return lambda: many(keys)


def pair_pass(bounded: Any, keys: list[str]) -> Callable[[], object]:
    acquire, release = bounded.acquire, bounded.release

    def run() -> None:
        for key in keys:
            release(acquire(key))
    return run


def node_names(n: int) -> list[str]:
    """HOST:PORT names, as every layout takes them (Caddy's dial strings included)."""
    return [f"10.{i >> 8 & 255}.{i & 255}.7:8080" for i in range(n)]


def optional(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        return None


def contenders(n: int, keys: list[str]) -> list[Contender]:
    nodes = node_names(n)
    chosen = keys[:CHASH_KEYS]
    out: list[Contender] = []

    def add(name: str, section: str, router: Any) -> Any:
        router.add_service_nodes(nodes)
        out.append(lookups(name, section, router.get_target_node, router.get_target_nodes,
                           chosen))
        return router

    plain: dict[str, Any] = {}
    # The 32-bit layouts chash.LAYOUTS names, then the 64-bit ones.
    wide = [name for name in ("envoy", "grpc") if name not in chash.LAYOUTS]
    for layout in (*chash.LAYOUTS, *wide):
        router = add(f"ring {layout}", "ring", chash.ConsistentHashRouter(layout=layout))
        if layout == "python":
            plain["ring"] = router
    add("ring python xxh3", "ring", chash.ConsistentHashRouter(VNODES, hash="xxh3"))
    plain["maglev"] = add("maglev", "maglev", chash.MaglevRouter())
    plain["jump"] = add("jump", "jump", chash.JumpRouter())
    add("jump guava", "jump", chash.JumpRouter(layout="guava", hash="murmur3_128"))
    for layout in ("hrw", "pymemcache", "caddy", "squid"):
        router = add(f"rendezvous {layout}", "rendezvous", chash.RendezvousRouter(layout=layout))
        if layout == "hrw":
            plain["rendezvous"] = router

    uhashring = optional("uhashring")
    if uhashring is not None:
        ring = uhashring.HashRing(nodes=list(nodes), vnodes=VNODES)
        out.append(lookups("uhashring", "rival", ring.get_node, listed(ring.get_node), chosen))
    fastring = optional("fastring")
    if fastring is not None:
        fast = fastring.HashRing(virtual_nodes=VNODES)
        for node in nodes:
            fast.add_node(node)
        out.append(lookups("fastring", "rival", fast.get_node, listed(fast.get_node), chosen))
    rendezvous = optional("pymemcache.client.rendezvous")
    if rendezvous is not None:
        from pymemcache.client.rendezvous import RendezvousHash

        real = RendezvousHash()
        for node in nodes:
            real.add_node(node)
        few = keys[:max(20, 20000 // n)]
        exact = chash.RendezvousRouter(layout="pymemcache")
        exact.add_service_nodes(nodes)
        if exact.get_target_nodes(few) != [real.get_node(k) for k in few]:
            raise SystemExit(f"layout='pymemcache' differs from RendezvousHash at {n} nodes")
        out.append(lookups("pymemcache", "rival", real.get_node, listed(real.get_node), few))

    for family, router in plain.items():
        bounded = chash.BoundedLoadRouter(router, balance_factor=1.25)
        out.append(Contender(f"bounded {family}", "bounded",
                             {"single": pair_pass(bounded, chosen)}, len(chosen)))
    return out


def run(node_counts: Sequence[int], keys: list[str], repeat: int) -> tuple[str, dict[str, Any]]:
    """The tables as text, and every sample and median as a JSON-ready dict."""
    info = machine_info(["uhashring", "pymemcache", "fastring"])
    load_start = os.getloadavg()
    started = time.perf_counter()
    results: dict[int, dict[str, dict[str, Any]]] = {}
    for n in node_counts:
        timed = contenders(n, keys)
        samples: dict[str, dict[str, list[float]]] = {
            c.name: {kind: [] for kind in c.passes} for c in timed}
        cpu: dict[str, dict[str, list[float]]] = {
            c.name: {kind: [] for kind in c.passes} for c in timed}
        preempted: dict[str, dict[str, int]] = {
            c.name: dict.fromkeys(c.passes, 0) for c in timed}
        for r in range(repeat):
            shift = r % len(timed)
            for c in timed[shift:] + timed[:shift]:
                for kind, timed_pass in c.passes.items():
                    wall, used, switched = best_of_three(timed_pass, c.count)
                    samples[c.name][kind].append(wall)
                    cpu[c.name][kind].append(used)
                    preempted[c.name][kind] += bool(switched)
        results[n] = {
            c.name: {"section": c.section, "keys": c.count, "samples": samples[c.name],
                     "median": {kind: statistics.median(v) for kind, v in samples[c.name].items()},
                     "cpu_samples": cpu[c.name], "preempted_samples": preempted[c.name]}
            for c in timed}
    runtime = time.perf_counter() - started
    load_end = os.getloadavg()
    text, targets = render(results, info, repeat, load_start[0], load_end[0], runtime)
    payload = {"machine": info, "load_average": {"start": load_start, "end": load_end},
               "runtime_s": runtime, "rounds": repeat, "chash_keys": CHASH_KEYS,
               "nodes": list(node_counts),
               "results": {str(n): rows for n, rows in results.items()}, "targets": targets}
    return text, payload


def ratio_stats(over: dict[str, Any], under: dict[str, Any], kind: str,
                op: str = ">=") -> dict[str, Any]:
    """Both ratios of over / under for kind ("single", "batch"), both by
    CPU time, whether a sample of either was preempted, and the one to
    quote (the least favourable to op's side; CPU time counted only when
    preempted)."""
    a, b = over["samples"][kind], under["samples"][kind]
    ca, cb = over["cpu_samples"][kind], under["cpu_samples"][kind]
    medians, rounds = _ratios.both(a, b)
    cpu_medians, cpu_rounds = _ratios.both(ca, cb)
    preempted = over["preempted_samples"][kind] + under["preempted_samples"][kind]
    quoted = [medians, rounds] + ([cpu_medians, cpu_rounds] if preempted else [])
    return {"of_medians": medians, "of_rounds": rounds, "cpu_of_medians": cpu_medians,
            "cpu_of_rounds": cpu_rounds, "preempted_samples": preempted,
            "conservative": _ratios.conservative(quoted, op)}


def render(results: dict[int, dict[str, dict[str, Any]]], info: dict[str, Any], repeat: int,
           load_start: float, load_end: float, runtime: float) -> tuple[str, list[dict[str, Any]]]:
    """The tables; the targets.  Each row's ratios go into results[n][name]
    ["ratios"] (kind -> ratio_stats) beside its rival's name."""
    lines = [
        f"chash {info['chash']} ({info['commit']}) · uhashring {info['uhashring']} · "
        f"pymemcache {info['pymemcache']} · fastring {info['fastring']}",
        f"{info['python']} · {info['cpu']} · {info['cpu_count']} CPUs · load {load_start:.2f} at "
        f"start, {load_end:.2f} at end; {runtime:.0f} s",
        f"medians of {repeat} interleaved rounds, each sample the best of 3 passes, ns a key; "
        f"chash and uhashring/fastring on {CHASH_KEYS:,} keys, pymemcache on max(20, 20000 / nodes)",
        _ratios.LEGEND,
        "",
        "Lookups by family; ratios are rival / chash (higher: chash faster), single and batch",
        f"{'nodes':>5}  {'router':<22} {'single':>9} {'batch':>9}  {'vs':<10} {'single':>17} "
        f"{'batch':>17}",
    ]
    targets: list[dict[str, Any]] = []
    preempted: list[str] = []

    def note_cpu(what: str, stats: dict[str, Any]) -> None:
        if stats["preempted_samples"]:
            preempted.append(
                f"  {what}: wall {_ratios.pair_text(stats['of_medians'], stats['of_rounds'])};"
                f" CPU time {_ratios.pair_text(stats['cpu_of_medians'], stats['cpu_of_rounds'])}"
                f" ({stats['preempted_samples']} samples preempted)")

    for n, rows in results.items():
        med = {name: row["median"] for name, row in rows.items()}
        for name, row in rows.items():
            if row["section"] in ("bounded",):
                continue
            rival = rival_of(name, row["section"], med)
            ratio = ""
            if rival:
                row["ratios"] = {"vs": rival, **{
                    kind: ratio_stats(rows[rival], row, kind) for kind in ("single", "batch")}}
                single, batch = row["ratios"]["single"], row["ratios"]["batch"]
                ratio = (f"{rival:<10} {_ratios.pair_text(single['of_medians'], single['of_rounds']):>17}"
                         f" {_ratios.pair_text(batch['of_medians'], batch['of_rounds']):>17}")
                for kind in ("single", "batch"):
                    note_cpu(f"{name} against {rival} at {n} nodes, {kind}", row["ratios"][kind])
                if rival == "pymemcache" and n == 10:
                    ok = _ratios.holds([single["of_medians"], single["of_rounds"]], ">=", 200)
                    ratio += f"  ≥ 200× {'✓' if ok else '✗'}"
                    targets.append({"target": "rendezvous pymemcache single >= 200x "
                                    "RendezvousHash at 10 nodes", "nodes": n,
                                    "ratio": single["of_medians"],
                                    "rounds_ratio": single["of_rounds"],
                                    "conservative": single["conservative"], "met": ok})
            lines.append(f"{n:>5}  {name:<22} {med[name]['single']:>9.1f} "
                         f"{med[name]['batch']:>9.1f}  {ratio}".rstrip())
        lines.append("")
    lines += ["Bounded loads: acquire + release of every key in turn, against the same router's",
              "plain get_target_node (ns a key); balance_factor 1.25",
              f"{'nodes':>5}  {'router':<22} {'plain':>9} {'pair':>9} {'pair/plain':>17}"]
    for n, rows in results.items():
        for family, plain in (("ring", "ring python"), ("maglev", "maglev"), ("jump", "jump"),
                              ("rendezvous", "rendezvous hrw")):
            name = f"bounded {family}"
            if name not in rows:
                continue
            stats = ratio_stats(rows[name], rows[plain], "single", "<=")
            rows[name]["ratios"] = {"vs": plain, "single": stats}
            note_cpu(f"{name} against {plain} at {n} nodes", stats)
            pair, alone = rows[name]["median"]["single"], rows[plain]["median"]["single"]
            mark = ""
            if family == "ring" and n == 1000:
                ok = _ratios.holds([stats["of_medians"], stats["of_rounds"]], "<=", 2)
                mark = f"  ≤ 2× {'✓' if ok else '✗'}"
                targets.append({"target": "bounded acquire + release <= 2x a plain lookup, "
                                "ring at 1000 nodes", "nodes": n, "ratio": stats["of_medians"],
                                "rounds_ratio": stats["of_rounds"],
                                "conservative": stats["conservative"], "met": ok})
            lines.append(f"{n:>5}  {plain:<22} {alone:>9.1f} {pair:>9.1f} "
                         f"{_ratios.pair_text(stats['of_medians'], stats['of_rounds']):>17}{mark}")
    met = sum(t["met"] for t in targets)
    lines.append(f"targets met: {met} of {len(targets)} (each by both its ratio of medians and "
                 "its median of per-round ratios)")
    if preempted:
        lines += ["", "ratios with preempted samples, by wall clock and by thread CPU time "
                  "(of medians / of rounds):", *preempted]
    return "\n".join(lines), targets


def rival_of(name: str, section: str, med: dict[str, dict[str, float]]) -> str | None:
    """The rival a row is compared with: fastring for the XXH3 ring,
    uhashring for the other rings, pymemcache's hasher for its layout."""
    if section == "ring":
        rival = "fastring" if name == "ring python xxh3" else "uhashring"
    elif name == "rendezvous pymemcache":
        rival = "pymemcache"
    else:
        return None
    return rival if rival in med else None
