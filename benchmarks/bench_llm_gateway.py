"""Time to first byte of a streamed completion through ``chash gateway
--affinity prefix`` beside the same engine spoken to directly, on loopback.

    python3 benchmarks/bench_llm_gateway.py [--rounds 15] [--per-round 40]

One stand-in engine (``chash.demo.engine``: prefill and tokens far faster
than any wait measured here), a gateway with ``affinity="prefix"`` in front
of it, and one aiohttp client with keep-alive connections to both.  In each
round, ``--per-round`` completions go straight to the engine and as many
through the gateway, alternately (which goes first alternates by round);
each is timed from the request's send to its first SSE event, and the
process's CPU time is taken over each side's completions.  Target (issue
41): the gateway's median time to first byte within 5 ms of the engine's
alone.  Writes ``results/llm-gateway.txt`` and ``results/llm-gateway.json``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import _ratios
import aiohttp

from chash.demo.engine import StandInEngine
from chash.gateway import Gateway, GatewayConfig

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_MS = 5.0
PROMPT = "You are a careful assistant. " * 40


async def first_byte(session: aiohttp.ClientSession, url: str, n: int) -> float:
    """Seconds from sending completion ``n`` to its first event."""
    body = {"model": "m", "prompt": PROMPT + str(n), "max_tokens": 2, "stream": True}
    start = time.perf_counter()
    async with session.post(url, json=body) as answer:
        first = None
        async for line in answer.content:
            if first is None and line.startswith(b"data: "):
                first = time.perf_counter() - start
        if answer.status != 200 or first is None:
            raise RuntimeError(f"completion {n} failed: HTTP {answer.status}")
    return first


async def measure(rounds: int, per_round: int) -> dict[str, Any]:
    engine = await StandInEngine("e0", token_rate=1e6, prefill_rate=1e9).start()
    gateway = Gateway({"e0": engine.address}, GatewayConfig(affinity="prefix", health=False))
    await gateway.start()
    urls = {"engine": f"{engine.url}/v1/completions",
            "gateway": f"{gateway.url}/v1/completions"}
    samples: dict[str, list[float]] = {"engine": [], "gateway": []}
    medians: dict[str, list[float]] = {"engine": [], "gateway": []}
    cpu: dict[str, list[float]] = {"engine": [], "gateway": []}
    try:
        async with aiohttp.ClientSession() as session:
            for side in urls:  # warm connections and pools
                for n in range(5):
                    await first_byte(session, urls[side], n)
            count = 0
            for round_ in range(rounds):
                order = ["engine", "gateway"] if round_ % 2 == 0 else ["gateway", "engine"]
                for side in order:
                    times = []
                    began = time.process_time()
                    for _ in range(per_round):
                        count += 1
                        times.append(await first_byte(session, urls[side], count))
                    cpu[side].append((time.process_time() - began) / per_round)
                    samples[side].extend(times)
                    medians[side].append(statistics.median(times))
    finally:
        await gateway.stop()
        await engine.stop()
    return {"samples": samples, "round_medians": medians, "cpu_per_completion": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=40)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    data = asyncio.run(measure(args.rounds, args.per_round))
    engine, gateway = data["round_medians"]["engine"], data["round_medians"]["gateway"]
    direct = statistics.median(data["samples"]["engine"]) * 1000
    through = statistics.median(data["samples"]["gateway"]) * 1000
    added = through - direct
    per_round_added = statistics.median(g - e for g, e in zip(gateway, engine, strict=True)) * 1000
    ratio_medians, ratio_rounds = _ratios.both(gateway, engine)
    cpu_engine = statistics.median(data["cpu_per_completion"]["engine"]) * 1000
    cpu_gateway = statistics.median(data["cpu_per_completion"]["gateway"]) * 1000
    held = added <= TARGET_MS and per_round_added <= TARGET_MS
    lines = [
        "# Time to first byte of a streamed completion: through the gateway "
        "(--affinity prefix) beside the engine alone",
        f"# {args.rounds} interleaved rounds of {args.per_round} completions a side, "
        f"one stand-in engine, loopback; {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs",
        "",
        f"{'side':<9} {'median TTFB':>12} {'CPU a completion (client, engine, gateway)':>44}",
        f"{'engine':<9} {direct:>10.3f}ms {cpu_engine:>42.3f}ms",
        f"{'gateway':<9} {through:>10.3f}ms {cpu_gateway:>42.3f}ms",
        "",
        f"added by the gateway: {added:.3f} ms (of the medians), {per_round_added:.3f} ms "
        f"(median of the rounds' differences); ratio {_ratios.pair_text(ratio_medians, ratio_rounds)}",
        f"target: added <= {TARGET_MS:g} ms on both: {'held' if held else 'MISSED'}",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if not args.no_write:
        (RESULTS / "llm-gateway.txt").write_text(text)
        (RESULTS / "llm-gateway.json").write_text(json.dumps({
            "rounds": args.rounds, "per_round": args.per_round, "target_ms": TARGET_MS,
            "added_ms_of_medians": added, "added_ms_median_of_rounds": per_round_added,
            "ratio_of_medians": ratio_medians, "median_of_round_ratios": ratio_rounds,
            "held": held, "python": platform.python_version(), **data}, indent=1) + "\n")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
