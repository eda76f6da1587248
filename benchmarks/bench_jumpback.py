"""JumpBackHash and JumpBackAnchor against jump, side by side: lookups,
changes and the state's size.

    PYTHONPATH=. python benchmarks/bench_jumpback.py --repeat 15 --json benchmarks/results/jumpback.json

Rows, each timed in interleaved rounds (``_bench.run_schedule``: every
round times every contender of a row moments apart, rotating which goes
first), wall clock and thread CPU time, ns a key or an operation:

* lookups by hash, ``get_target_nodes_by_hash`` over 1,000 hashes, of
  ``JumpRouter(layout="jumpback")`` against ``JumpRouter()`` at 10 and
  100,000 buckets: targets jumpback >= 2x jump's speed at 100,000, and not
  slower at 10 (jump / jumpback >= 1.0);
* ``AnchorRouter`` with 1,000 of 10,000 buckets removed (random ones)
  against jumpback at 10,000: target anchor / jumpback <= 2;
* lookups by key (``get_target_nodes``, XXH64 of the keys included) at the
  same sizes, for what a caller sees (no target);
* adds and removes of an ``AnchorRouter``, one call each (O(1)
  amortized): n single adds against n single adds of a ``JumpRouter`` (an
  append to the same kind of node index) at 1,000,000 buckets, target
  anchor / jump <= 2; 20,000 random removes from 100,000 buckets, the
  last 2,000 against the first 2,000, target <= 2 (a removal costs no more
  as removed ids pile up); and the cost an add and a remove at 10,000,
  100,000 and 1,000,000 buckets (n adds, n/10 random removes, the same
  re-added), without a target: it grows as the working set leaves the
  caches (a random node's dict entry, id and slot each a memory access),
  not with the algorithm;
* the state (``state()``, hash4j's ``getState()``) of 10,000 buckets with
  1,000 removed: target <= 8 KB (deterministic, counted not timed).

Every ratio is given both ways (``_ratios``): the ratio of the medians and
the median of the per-round ratios; a target holds only when both do, by
the wall clock, and the CPU-time ratios are printed beside them.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _ratios
from _bench import Group, Measure, Obs, machine_info, node_names, progress, run_schedule, timed, write_json

from chash import AnchorRouter, JumpRouter

BATCH = 1000  # hashes or keys a lookup sample routes per pass
MIN_NS = 2_000_000  # a lookup sample loops over its batch for about this long


def hashes(count: int, seed: int) -> array[int]:
    rng = random.Random(seed)
    return array("Q", (rng.getrandbits(64) for _ in range(count)))


def keys(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"user:{rng.getrandbits(48):012x}" for _ in range(count)]


def jump(n: int, layout: str) -> JumpRouter:
    router = JumpRouter(layout=layout)  # type: ignore[arg-type]
    router.add_service_nodes(node_names(n))
    return router


def anchor_with_removed(n: int, removed: int, seed: int = 7) -> AnchorRouter:
    router = AnchorRouter()
    names = node_names(n)
    router.add_service_nodes(names)
    for node in random.Random(seed).sample(names, removed):
        router.remove_service_node(node)
    return router


def lookup_measure(row: str, name: str, route: Callable[[Any], object],
                   batches: list[Any]) -> Measure:
    """Times passes of route over the next batch (routed once untimed
    first) for about MIN_NS; ns a key."""
    passes = [1]

    def sample(seq: int) -> dict[tuple[str, str, str], Obs]:
        batch = batches[seq % len(batches)]
        route(batch)
        count = passes[0]

        def run() -> None:
            for _ in range(count):
                route(batch)

        obs, _ = timed(run, count * len(batch))
        if obs.span < MIN_NS // 2:  # too short: more passes from now on
            passes[0] = max(count + 1, int(count * MIN_NS / max(obs.span, 1)))
        return {(row, "", name): obs}

    return Measure(f"{row} | {name}", sample, warmup=lambda: route(batches[0]))


def churn_measure(row: str, name: str, n: int) -> Measure:
    """n single adds, n/10 random single removes, the same re-added, on a
    new AnchorRouter: ns an add and ns a remove, each over its calls."""
    names = node_names(n)

    def sample(seq: int) -> dict[tuple[str, str, str], Obs]:
        router = AnchorRouter()
        add, remove = router.add_service_node, router.remove_service_node
        gone = random.Random(seq).sample(names, n // 10)

        def adds() -> None:
            for node in names:
                add(node)

        def removes() -> None:
            for node in gone:
                remove(node)

        def readds() -> None:
            for node in gone:
                add(node)

        first, _ = timed(adds, n)
        out, _ = timed(removes, len(gone))
        back, _ = timed(readds, len(gone))
        assert len(router) == n
        router._check()
        # adds: the first n and the re-adds together, per call
        calls = n + len(gone)
        add_obs = Obs((first.wall * n + back.wall * len(gone)) / calls,
                      (first.cpu * n + back.cpu * len(gone)) / calls,
                      first.switched + back.switched, first.span + back.span)
        return {(row, "add", name): add_obs, (row, "remove", name): out}

    return Measure(f"{row} | {name}", sample)


def jump_adds_measure(row: str, name: str, n: int, kind: str) -> Measure:
    """n single adds to a new AnchorRouter or JumpRouter: ns an add."""
    names = node_names(n)

    def sample(seq: int) -> dict[tuple[str, str, str], Obs]:
        router = AnchorRouter() if kind == "anchor" else JumpRouter()
        add = router.add_service_node

        def adds() -> None:
            for node in names:
                add(node)

        obs, _ = timed(adds, n)
        assert len(router) == n
        return {(row, "", name): obs}

    return Measure(f"{row} | {name}", sample)


def removal_order_measure(row: str, n: int, removes: int, part: int) -> Measure:
    """removes random removes from n buckets: ns a remove among the first
    part and among the last part."""
    names = node_names(n)

    def sample(seq: int) -> dict[tuple[str, str, str], Obs]:
        router = AnchorRouter()
        router.add_service_nodes(names)
        gone = random.Random(seq).sample(names, removes)
        remove = router.remove_service_node
        first, last = gone[:part], gone[-part:]

        def run(nodes: list[str]) -> None:
            for node in nodes:
                remove(node)

        early, _ = timed(lambda: run(first), part)
        run(gone[part:-part])
        late, _ = timed(lambda: run(last), part)
        assert len(router) == n - removes
        return {(row, "", "first"): early, (row, "", "last"): late}

    return Measure(f"{row} | removes", sample)


Target = tuple[str, float]  # (op, threshold)


def ratio_row(label: str, samples: dict[tuple[str, str, str], list[Obs]], key_a: tuple[str, str, str],
              key_b: tuple[str, str, str], what: str, target: Target | None) -> dict[str, Any]:
    """One row of the table: both contenders' medians (wall and CPU) and
    a / b both ways, the target judged on the wall-clock ratios."""
    a, b = samples[key_a], samples[key_b]
    wall = _ratios.both([o.wall for o in a], [o.wall for o in b])
    cpu = _ratios.both([o.cpu for o in a], [o.cpu for o in b])
    row: dict[str, Any] = {
        "row": label, "ratio": what,
        "a": {"name": key_a[2], "tag": key_a[1], "wall_ns": statistics.median(o.wall for o in a),
              "cpu_ns": statistics.median(o.cpu for o in a), "samples": len(a)},
        "b": {"name": key_b[2], "tag": key_b[1], "wall_ns": statistics.median(o.wall for o in b),
              "cpu_ns": statistics.median(o.cpu for o in b), "samples": len(b)},
        "wall": {"of_medians": wall[0], "of_rounds": wall[1]},
        "cpu": {"of_medians": cpu[0], "of_rounds": cpu[1]},
    }
    if target is not None:
        op, threshold = target
        row["target"] = {"op": op, "threshold": threshold, "met": _ratios.holds(wall, op, threshold),
                         "met_by_cpu": _ratios.holds(cpu, op, threshold)}
    return row


def render(rows: Sequence[dict[str, Any]], state: dict[str, Any], rounds: int) -> str:
    out = [f"JumpBackHash and JumpBackAnchor against jump (medians of {rounds} interleaved rounds; "
           f"lookups over batches of {BATCH:,}, ns a key; changes ns a call)",
           _ratios.LEGEND,
           f"{'row':<44} {'a':>22} {'b':>22} {'ratio':>9} {'wall a/b':>13} {'cpu a/b':>13}  target"]
    for r in rows:
        a, b = r["a"], r["b"]
        wall = f"{_ratios.fmt(r['wall']['of_medians'])}/{_ratios.fmt(r['wall']['of_rounds'])}"
        cpu = f"{_ratios.fmt(r['cpu']['of_medians'])}/{_ratios.fmt(r['cpu']['of_rounds'])}"
        target = ""
        if "target" in r:
            t = r["target"]
            target = (f"{r['ratio']} {t['op']} {t['threshold']:g}: "
                      f"{'met' if t['met'] else 'MISSED'} (by CPU time: "
                      f"{'met' if t['met_by_cpu'] else 'missed'})")
        name_a = f"{a['name']}{' ' + a['tag'] if a['tag'] else ''}"
        name_b = f"{b['name']}{' ' + b['tag'] if b['tag'] else ''}"
        out.append(f"{r['row']:<44} {name_a[:12]:>12} {a['wall_ns']:>9.1f} {name_b[:12]:>12} "
                   f"{b['wall_ns']:>9.1f} {r['ratio']:>9} {wall:>13} {cpu:>13}  {target}")
        out.append(f"{'  (CPU time, ns)':<44} {'':>12} {a['cpu_ns']:>9.1f} {'':>12} "
                   f"{b['cpu_ns']:>9.1f}")
    verdict = "met" if state["met"] else "MISSED"
    out.append(f"state() of {state['buckets']:,} buckets with {state['removed']:,} removed: "
               f"{state['bytes']:,} bytes (target <= {state['limit']:,}: {verdict})")
    held = sum(1 for r in rows if r.get("target", {}).get("met")) + int(state["met"])
    total = sum(1 for r in rows if "target" in r) + 1
    out.append(f"{held} of {total} targets met by both ratios of the wall clock")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds (default %(default)s)")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    args = parser.parse_args(argv)

    load_start = os.getloadavg()[0]
    progress("building the routers")
    batches = [hashes(BATCH, seed) for seed in range(8)]
    key_batches = [keys(BATCH, 100 + seed) for seed in range(8)]
    routers = {
        ("jump", 10): jump(10, "jump"), ("jumpback", 10): jump(10, "jumpback"),
        ("jump", 100_000): jump(100_000, "jump"), ("jumpback", 100_000): jump(100_000, "jumpback"),
        ("jumpback", 10_000): jump(10_000, "jumpback"),
        ("anchor", 10_000): anchor_with_removed(10_000, 1_000),
    }
    groups = []
    for n in (10, 100_000):
        row = f"by hash, {n:,} buckets"
        groups.append(Group(row, [
            lookup_measure(row, name, routers[(name, n)].get_target_nodes_by_hash, batches)
            for name in ("jump", "jumpback")]))
        row = f"by key, {n:,} buckets"
        groups.append(Group(row, [
            lookup_measure(row, name, routers[(name, n)].get_target_nodes, key_batches)
            for name in ("jump", "jumpback")]))
    for how, batch_list in (("by hash", batches), ("by key", key_batches)):
        row = f"{how}, 10,000 buckets, anchor 1,000 removed"
        groups.append(Group(row, [
            lookup_measure(row, name, getattr(routers[(name, 10_000)],
                                              "get_target_nodes_by_hash" if how == "by hash"
                                              else "get_target_nodes"), batch_list)
            for name in ("jumpback", "anchor")]))
    groups.append(Group("changes", [churn_measure("changes", f"{n:,}", n)
                                    for n in (10_000, 100_000, 1_000_000)]))
    groups.append(Group("adds", [jump_adds_measure("adds", kind, 1_000_000, kind)
                                 for kind in ("anchor", "jump")]))
    groups.append(Group("removal order", [removal_order_measure("removal order", 100_000,
                                                                20_000, 2_000)]))
    samples = run_schedule(groups, args.repeat)

    def key(row: str, name: str, tag: str = "") -> tuple[str, str, str]:
        return (row, tag, name)

    rows = []
    for n, target in ((10, (">=", 1.0)), (100_000, (">=", 2.0))):
        row = f"by hash, {n:,} buckets"
        rows.append(ratio_row(row, samples, key(row, "jump"), key(row, "jumpback"),
                              "jump/jb", target))
        row = f"by key, {n:,} buckets"
        rows.append(ratio_row(row, samples, key(row, "jump"), key(row, "jumpback"),
                              "jump/jb", None))
    for how, target in (("by hash", ("<=", 2.0)), ("by key", None)):
        row = f"{how}, 10,000 buckets, anchor 1,000 removed"
        rows.append(ratio_row(row, samples, key(row, "anchor"), key(row, "jumpback"),
                              "anchor/jb", target))
    rows.append(ratio_row("single adds, 1,000,000 buckets", samples, key("adds", "anchor"),
                          key("adds", "jump"), "anchor/jump", ("<=", 2.0)))
    rows.append(ratio_row("removes 18,001-20,000 vs 1-2,000 of 100,000", samples,
                          key("removal order", "last"), key("removal order", "first"),
                          "last/first", ("<=", 2.0)))
    for op in ("add", "remove"):
        for big, small, what in (("100,000", "10,000", "1e5/1e4"),
                                 ("1,000,000", "100,000", "1e6/1e5")):
            rows.append(ratio_row(f"anchor {op}, {big} vs {small} buckets", samples,
                                  key("changes", big, op), key("changes", small, op), what,
                                  None))
    state_router = anchor_with_removed(10_000, 1_000)
    state_bytes = len(state_router.state())
    state = {"buckets": 10_000, "removed": 1_000, "bytes": state_bytes, "limit": 8192,
             "met": state_bytes <= 8192}
    machine = machine_info()
    text = render(rows, state, args.repeat)
    print(f"# commit {machine['commit']}, {machine['python']}, {machine['cpu_count']} CPUs, "
          f"load {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print(text)
    if args.json:
        write_json(args.json, {"benchmark": "jumpback", "machine": machine,
                               "load": [load_start, os.getloadavg()[0]],
                               "rounds": args.repeat, "rows": rows, "state": state,
                               "samples": {" | ".join(k): [[o.wall, o.cpu, o.switched] for o in v]
                                           for k, v in samples.items()}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
