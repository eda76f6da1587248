"""A Mooncake trace replayed through the gateway to stand-in engines, beside
the simulator on the same requests: the hit rates of ring, chwbl and prefix.

    python3 benchmarks/bench_llm_replay.py --trace synthetic_trace.jsonl \\
        [--requests 2000] [--seconds 120]

The first ``--requests`` of the trace (kvcache-ai/Mooncake,
``FAST25-release/traces/``; not kept here) go through ``chash demo
--llm``'s replay (``chash.demo.llm.replay``): 8 stand-in engines ``w0`` ...
``w7`` with C = 20,000 blocks of cache each, behind a new gateway per
policy; each block id is 256 characters of prompt, 64 tokens to the
engines, so every token count is the trace's divided by 8, and the engines'
prefill rate is P / 8 = 1,000 of their tokens a second, times the time
scale (the trace's span compressed to ``--seconds``); a request streams
``output_length / 32`` events, each worth 32 tokens of D = 0.02 s.  The
simulator (``chash simulate --trace``'s model) runs the same requests at 8
workers, C = 20,000, P = 8,000, D = 0.02, K = 2, one replica.

The hit rate of a replay is the engines' own (cached / prompt tokens, from
their counters); target (issue 41): within ±5 % of the simulator's, for
each policy.  The simulator counts a request's last block by its tokens and
the stand-ins count whole blocks; ring routes exactly as the simulator's,
chwbl and prefix on loads measured live, so they move a little from run to
run.  Writes ``results/llm-replay.txt`` and ``results/llm-replay.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from chash.demo.llm import LLM_POLICIES, ReplaySettings, replay
from chash.simulate import ServingConfig, TraceRequest, compare, read_trace

RESULTS = Path(__file__).resolve().parent / "results"
SCALE_TOKENS = 8  # 512 trace tokens a block, 64 stand-in tokens a block
TARGET = 0.05


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=120.0,
                        help="wall-clock length of each policy's replay (default 120)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    requests = read_trace(args.trace)[:args.requests]
    first = requests[0].arrival
    requests = [TraceRequest(r.arrival - first, r.input_length, r.output_length, r.hash_ids)
                for r in requests]
    config = ServingConfig()
    simulated = {row["policy"]: row for row in
                 compare(requests, config, list(LLM_POLICIES))["policies"]}
    span = requests[-1].arrival
    speed = span / args.seconds
    settings = ReplaySettings(
        prefill_rate=config.prefill_rate / SCALE_TOKENS * speed,
        cache_blocks=config.cache_blocks, scale=1 / speed, engines=config.workers,
        token_rate=speed / (config.decode_time * 32), tokens_per_event=32, max_events=10**6)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for policy in LLM_POLICIES:
        run = asyncio.run(replay(policy, requests, settings))
        sim = simulated[policy]["hit_rate"]
        rows.append({"policy": policy, "replayed": run.hit_rate, "simulated": sim,
                     "ratio": run.hit_rate / sim if sim else None, "failed": run.failed,
                     "ttft_mean_s": run.ttft_mean / settings.scale,
                     "simulated_ttft_mean_s": simulated[policy]["ttft"]["mean"],
                     "per_engine": run.per_engine})
        print(f"bench_llm_replay: {policy} done", file=sys.stderr)
    seconds = time.perf_counter() - started
    held = all(row["ratio"] is not None and abs(row["ratio"] - 1) <= TARGET
               and row["failed"] == 0 for row in rows)
    lines = [f"# {len(requests)} requests of {Path(args.trace).name} ({span:.0f} s of trace) "
             f"replayed through the gateway in {args.seconds:g} s a policy ({speed:.1f}x), "
             f"8 stand-in engines, C = 20,000, P = 8,000, D = 0.02, K = 2; {seconds:.0f} s "
             f"in all",
             "",
             f"{'policy':<8} {'hit rate replayed':>18} {'simulated':>10} {'ratio':>7} "
             f"{'failed':>7} {'TTFT mean replayed (trace s)':>29} {'simulated':>10}"]
    for row in rows:
        lines.append(f"{row['policy']:<8} {row['replayed']:>18.4f} {row['simulated']:>10.4f} "
                     f"{row['ratio']:>7.3f} {row['failed']:>7} {row['ttft_mean_s']:>29.3f} "
                     f"{row['simulated_ttft_mean_s']:>10.3f}")
    lines += ["", f"target: every replayed hit rate within ±{TARGET:.0%} of the simulator's, "
                  f"nothing failed: {'held' if held else 'MISSED'}"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if not args.no_write:
        (RESULTS / "llm-replay.txt").write_text(text)
        (RESULTS / "llm-replay.json").write_text(json.dumps({
            "trace": Path(args.trace).name, "requests": len(requests), "seconds": args.seconds,
            "speed": speed, "target": TARGET, "held": held, "rows": rows}, indent=1) + "\n")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
