"""LLM routing policies over a Mooncake trace, and the targets of the prefix
policy (docs/llm.md).

    python3 benchmarks/bench_llm.py --trace synthetic_trace.jsonl [--trace ...]

For each trace (kvcache-ai/Mooncake, ``FAST25-release/traces/``; not kept
here), at 8 workers, C = 20,000 blocks, D = 0.02 s/token, K = 2 and
P = 8,000 and 12,000 tokens/s: every policy of ``chash simulate --trace``
with one replica, three replicas each with its own view of loads, and three
sharing them (seeds 1, 2, 3 averaged).  Writes
``results/llm-<trace>.txt`` (the tables, then each target with its measured
value), ``results/llm-<trace>.json`` and ``results/llm-<trace>.png``.  The
simulator is deterministic: a rerun gives the same numbers.

Targets, for each P:
- one replica: ``prefix``'s mean, p90 and p99 TTFT within 1.02x of the best
  baseline's, its hit rate at least 0.95x the best baseline's;
- three replicas, own loads: mean TTFT <= 0.85x ``cache-aware``'s, p99 <=
  ``cache-aware``'s;
- three replicas, shared loads: mean <= 0.7x, p99 <= 0.8x ``cache-aware``'s.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from chash.simulate import (
    POLICIES,
    ServingConfig,
    compare,
    plot_comparison,
    read_trace,
    render_comparison,
)

RESULTS = Path(__file__).resolve().parent / "results"
RATES = (8_000.0, 12_000.0)
SETUPS = ((1, False), (3, False), (3, True))
BASELINES = [name for name in POLICIES if name != "prefix"]


def _row(result: dict[str, Any], policy: str) -> dict[str, Any]:
    return next(row for row in result["policies"] if row["policy"] == policy)


def _check(what: str, value: float, op: str, bound: float) -> dict[str, Any]:
    met = value <= bound if op == "<=" else value >= bound
    return {"what": what, "value": value, "op": op, "bound": bound, "met": met}


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The prefix policy's targets for one comparison, each with its value."""
    config = result["config"]
    prefix = _row(result, "prefix")
    checks = []
    if config["replicas"] == 1:
        for stat in ("mean", "p90", "p99"):
            best = min(BASELINES, key=lambda name: _row(result, name)["ttft"][stat])
            bound = _row(result, best)["ttft"][stat]
            checks.append(_check(f"TTFT {stat} / best baseline's ({best})",
                                 prefix["ttft"][stat] / bound, "<=", 1.02))
        best = max(BASELINES, key=lambda name: _row(result, name)["hit_rate"])
        checks.append(_check(f"hit rate / best baseline's ({best})",
                             prefix["hit_rate"] / _row(result, best)["hit_rate"], ">=", 0.95))
    else:
        aware = _row(result, "cache-aware")["ttft"]
        mean_bound, p99_bound = (0.7, 0.8) if config["shared_loads"] else (0.85, 1.0)
        checks.append(_check("TTFT mean / cache-aware's", prefix["ttft"]["mean"] / aware["mean"],
                             "<=", mean_bound))
        checks.append(_check("TTFT p99 / cache-aware's", prefix["ttft"]["p99"] / aware["p99"],
                             "<=", p99_bound))
    return checks


def _label(config: dict[str, Any]) -> str:
    if config["replicas"] == 1:
        return f"P = {config['prefill_rate']:,.0f}, R = 1"
    loads = "shared loads" if config["shared_loads"] else "own loads"
    return f"P = {config['prefill_rate']:,.0f}, R = {config['replicas']}, {loads}"


def run_trace(path: str, command: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    requests = read_trace(path)
    name = Path(path).name.removesuffix(".jsonl").removesuffix("_trace")
    started = time.perf_counter()
    results = []
    for rate in RATES:
        for replicas, shared in SETUPS:
            config = ServingConfig(prefill_rate=rate, replicas=replicas, shared_loads=shared)
            result = compare(requests, config, list(POLICIES))
            result["trace"] = Path(path).name
            result["targets"] = targets(result)
            results.append(result)
            print(f"bench_llm: {name}: {_label(result['config'])} done", file=sys.stderr)
    seconds = time.perf_counter() - started
    lines = [f"chash LLM routing over {Path(path).name} ({len(requests):,} requests); "
             f"simulated in {seconds:.0f} s", f"command: {command}", ""]
    met = total = 0
    for result in results:
        lines += [render_comparison(result), ""]
    lines.append("Targets of prefix")
    for result in results:
        for check in result["targets"]:
            total += 1
            met += check["met"]
            mark = "met" if check["met"] else "NOT MET"
            lines.append(f"  {_label(result['config'])}: {check['what']} = {check['value']:.3f} "
                         f"{check['op']} {check['bound']:g}: {mark}")
    lines.append(f"targets met: {met} of {total}")
    payload = {"trace": Path(path).name, "requests": len(requests), "command": command,
               "seconds": seconds, "comparisons": results, "targets_met": met, "targets": total}
    return name, {"text": "\n".join(lines) + "\n", "json": payload}, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", required=True, metavar="FILE",
                        help="a Mooncake JSONL trace (repeatable)")
    parser.add_argument("--out", default=str(RESULTS), metavar="DIR",
                        help="where the results go (default benchmarks/results)")
    parser.add_argument("--no-plot", action="store_true", help="skip the plots")
    args = parser.parse_args(argv)
    for path in args.trace:
        command = f"python3 benchmarks/bench_llm.py --trace {Path(path).name}"
        name, out, results = run_trace(path, command)
        base = os.path.join(args.out, f"llm-{name}")
        Path(base + ".txt").write_text(out["text"], encoding="utf-8")
        Path(base + ".json").write_text(json.dumps(out["json"], indent=1) + "\n", encoding="utf-8")
        print(out["text"])
        if not args.no_plot:
            print(f"bench_llm: wrote {plot_comparison(results, base + '.png')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
