"""The cost of one PrefixAffinity decision at 16 nodes and 64 blocks, beside
the preference-list lookup it is anchored on (docs/llm.md).

    python3 benchmarks/bench_affinity.py [--rounds 9]

Contenders, interleaved in every round (order rotated), each timed over
the same 2,000 prompts of 64 blocks (40 families sharing their first 48
blocks, so records hold partial matches) on a ring of 16 nodes whose
records are warm:

- ``route, loads and queued given``: ``PrefixAffinity.route(blocks,
  loads=..., queued=..., tokens=...)``, the gateway's call;
- ``route, own counts``: ``route(blocks)`` then ``done(node)``;
- ``get_preference_list``: the ring's 16-node preference list for the same
  key, the part of a decision that is the router's.

Reported: wall-clock and thread CPU ns a decision (medians over rounds),
the ratio of medians against ``get_preference_list`` and the median of
per-round ratios.  Target: a decision (loads and queued given) <= 20 us.
Writes results/affinity.txt and .json.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from _bench import machine_info, timed

from chash import ConsistentHashRouter
from chash.affinity import PrefixAffinity

RESULTS = Path(__file__).resolve().parent / "results"
NODES, BLOCKS, PROMPTS = 16, 64, 2_000
TARGET_NS = 20_000


def workload() -> tuple[ConsistentHashRouter, list[list[int]], list[dict[str, float]],
                        list[dict[str, float]]]:
    rng = random.Random(7)
    ring = ConsistentHashRouter()
    names = [f"engine-{j:02d}" for j in range(NODES)]
    for name in names:
        ring.add_service_node(name)
    prompts = []
    for _ in range(PROMPTS):
        family = rng.randrange(40)
        prompts.append([family * 10**6 + k for k in range(48)] +
                       [rng.randrange(2**63) for _ in range(BLOCKS - 48)])
    loads = [{n: float(rng.randrange(8)) for n in names} for _ in range(PROMPTS)]
    queued = [{n: float(rng.randrange(20_000)) for n in names} for _ in range(PROMPTS)]
    return ring, prompts, loads, queued


def contenders() -> dict[str, Callable[[], object]]:
    ring, prompts, loads, queued = workload()
    given = PrefixAffinity(ring, capacity=20_000, block_tokens=512)
    own = PrefixAffinity(ring, capacity=20_000, block_tokens=512)
    for blocks in prompts:  # warm records
        given.route(blocks, loads={}, queued={})
        own.done(own.route(blocks))

    def route_given() -> None:
        for blocks, load, queue in zip(prompts, loads, queued, strict=True):
            given.route(blocks, loads=load, queued=queue, tokens=BLOCKS * 512)

    def route_own() -> None:
        for blocks in prompts:
            own.done(own.route(blocks))

    def preference() -> None:
        for blocks in prompts:
            ring.get_preference_list(",".join(map(str, blocks[:2])), NODES)

    return {"route, loads and queued given": route_given, "route, own counts": route_own,
            "get_preference_list": preference}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", default=str(RESULTS), metavar="DIR")
    args = parser.parse_args(argv)
    runs = contenders()
    names = list(runs)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            obs, _ = timed(runs[name], PROMPTS)
            wall[name].append(obs.wall)
            cpu[name].append(obs.cpu)
    base = "get_preference_list"
    rows = []
    for name in names:
        per_round = [w / b for w, b in zip(wall[name], wall[base], strict=True)]
        rows.append({"contender": name, "wall_ns": statistics.median(wall[name]),
                     "cpu_ns": statistics.median(cpu[name]),
                     "ratio_of_medians": statistics.median(wall[name]) / statistics.median(wall[base]),
                     "median_of_ratios": statistics.median(per_round)})
    decision = rows[0]["wall_ns"]
    info = machine_info()
    lines = [f"PrefixAffinity decisions: {NODES} nodes, {BLOCKS} blocks a prompt, {PROMPTS:,} prompts "
             f"a sample, {args.rounds} interleaved rounds",
             f"{info['platform']} · {info['python']} · {info['cpu']} · {info['cpu_count']} CPUs · "
             f"chash {info['commit']}",
             "command: python3 benchmarks/bench_affinity.py", "",
             f"{'contender':32s} {'wall ns':>9s} {'CPU ns':>9s} {'/ pref list':>12s} {'median ratio':>13s}"]
    for row in rows:
        lines.append(f"{row['contender']:32s} {row['wall_ns']:9,.0f} {row['cpu_ns']:9,.0f} "
                     f"{row['ratio_of_medians']:11.2f}x {row['median_of_ratios']:12.2f}x")
    met = decision <= TARGET_NS
    lines += ["", f"target: a decision (loads and queued given) {decision / 1000:.2f} us <= "
                  f"{TARGET_NS / 1000:.0f} us: {'met' if met else 'NOT MET'}"]
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    (out / "affinity.txt").write_text(text, encoding="utf-8")
    (out / "affinity.json").write_text(json.dumps(
        {"nodes": NODES, "blocks": BLOCKS, "prompts": PROMPTS, "rounds": args.rounds, "rows": rows,
         "target_ns": TARGET_NS, "met": met, "machine": info}, indent=1) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
