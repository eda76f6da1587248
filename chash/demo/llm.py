"""``chash demo --llm``: completions replayed through the gateway, a policy
at a time, against stand-in engines (``chash.demo.engine``).

The requests are the first ``requests`` of a Mooncake-format trace
(``chash simulate --trace``'s format), or of a small generated workload
(groups of requests sharing a system prompt) without one.  Each block id
of a request becomes 256 characters of prompt (64 tokens to the engines),
so that a shared prefix of ids is a shared prefix of text, the whole cut
to the request's ``input_length`` (512 tokens of the trace a block: the
last block is often partial); arrivals are
scaled so that the replay lasts about ``seconds``.  Each policy gets new
engines (empty caches) behind a new gateway:

- ``ring``: the gateway routing by a key, the request's first two block
  ids (``--key header:X-Prefix``): affinity alone;
- ``chwbl``: the same key as the session (``x-session-id``) under
  ``--affinity prefix``: the ring with bounded loads;
- ``prefix``: ``--affinity prefix`` on the prompt itself.

Each completion is streamed; its time to first token is measured by the
client (to its first event), the hit rate from the engines' own counters.
The engines' prefill rate is set so that, without any cache hit, the
offered prefill would be 1.25 times what they can do: caching decides how
much queue there is.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from chash.demo.backends import aiohttp_module
from chash.demo.engine import StandInEngine
from chash.gateway import Gateway, GatewayConfig
from chash.simulate import BLOCK_TOKENS, TraceRequest

__all__ = ["LLM_POLICIES", "LlmDemoResult", "PolicyRun", "ReplaySettings", "generated_requests",
           "render_llm", "replay", "run_llm_demo"]

#: The gateway policies replayed, in order.
LLM_POLICIES = ("ring", "chwbl", "prefix")
_BLOCK_CHARS = 256
_ENGINES = 4


@dataclass(frozen=True)
class PolicyRun:
    """One policy's replay: completions sent and failed, the engines' hit
    rate (cached / prompt tokens), TTFT in seconds (mean, p50, p90, p99,
    measured by the client) and completions a engine."""

    policy: str
    requests: int
    failed: int
    hit_rate: float
    ttft_mean: float
    ttft_p50: float
    ttft_p90: float
    ttft_p99: float
    per_engine: dict[str, int]


@dataclass(frozen=True)
class LlmDemoResult:
    """Every policy's replay, in ``LLM_POLICIES`` order."""

    runs: list[PolicyRun]
    #: The source of the requests: a trace's path, or "generated".
    source: str

    @property
    def ok(self) -> bool:
        """Whether every completion of every policy was answered."""
        return all(run.failed == 0 for run in self.runs)

    def as_dict(self) -> dict[str, Any]:
        """The result, JSON-ready."""
        return {"source": self.source, "runs": [asdict(run) for run in self.runs]}


@dataclass(frozen=True)
class ReplaySettings:
    """How a replay runs: ``engines`` stand-in engines named ``w0`` ...
    (as the simulator names its workers), each with ``prefill_rate``
    tokens a second and ``cache_blocks`` blocks of cache; arrivals times
    ``scale``; a request's ``output_length // tokens_per_event`` tokens (1
    to ``max_events``) streamed at ``token_rate`` a second."""

    prefill_rate: float
    cache_blocks: int
    scale: float
    engines: int = _ENGINES
    token_rate: float = 400.0
    tokens_per_event: int = 8
    max_events: int = 32


def generated_requests(count: int, seed: int = 7) -> list[TraceRequest]:
    """``count`` requests in 24 groups, each sharing a system prompt of 3 to
    8 blocks (popular groups more often), then 1 to 4 blocks of their own;
    about 20 arrivals a second.  Deterministic for a ``seed``."""
    rng = random.Random(seed)
    prefixes = [tuple(range(group * 100, group * 100 + rng.randint(3, 8)))
                for group in range(24)]
    weights = [1.0 / (rank + 1) for rank in range(len(prefixes))]
    requests, clock, fresh = [], 0.0, 10_000
    for _ in range(count):
        clock += rng.expovariate(20.0)
        own = tuple(range(fresh, fresh + rng.randint(1, 4)))
        fresh += len(own)
        ids = rng.choices(prefixes, weights)[0] + own
        requests.append(TraceRequest(clock, len(ids) * BLOCK_TOKENS, rng.randint(8, 64), ids))
    return requests


def _prompt(request: TraceRequest) -> str:
    """256 characters a block id, cut to the request's length (a trace's
    last block is a partial one): 2 characters a token of the trace."""
    text = "".join((f"<{block}>" * _BLOCK_CHARS)[:_BLOCK_CHARS] for block in request.hash_ids)
    return text[:max(1, -(-request.input_length * _BLOCK_CHARS // BLOCK_TOKENS))]


def _percentile(ordered: Sequence[float], p: float) -> float:
    return ordered[min(int(p * len(ordered)), len(ordered) - 1)] if ordered else 0.0


async def replay(policy: str, requests: Sequence[TraceRequest],
                 settings: ReplaySettings) -> PolicyRun:
    """Replay ``requests`` (arrivals from 0) through a new gateway with
    ``policy`` (one of ``LLM_POLICIES``) to new stand-in engines."""
    aiohttp = aiohttp_module()
    scale = settings.scale
    engines = [await StandInEngine(f"w{i}", token_rate=settings.token_rate,
                                   prefill_rate=settings.prefill_rate,
                                   cache_blocks=settings.cache_blocks,
                                   block_chars=_BLOCK_CHARS).start()
               for i in range(settings.engines)]
    if policy == "ring":
        config = GatewayConfig(key="header:X-Prefix", health=False)
    else:
        config = GatewayConfig(affinity="prefix", health=False)
    gateway = Gateway({e.name: e.address for e in engines}, config)
    ttfts: list[float] = []
    failed = 0
    try:
        url = await gateway.start() + "/v1/completions"
        loop = asyncio.get_running_loop()
        start = loop.time()
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector,
                                         timeout=aiohttp.ClientTimeout(total=120)) as session:
            async def one(request: TraceRequest) -> None:
                nonlocal failed
                await asyncio.sleep(max(0.0, start + request.arrival * scale - loop.time()))
                key = ",".join(map(str, request.hash_ids[:2]))
                headers = {"X-Prefix": key} if policy == "ring" else \
                    {"x-session-id": key} if policy == "chwbl" else {}
                body = {"model": "stand-in", "prompt": _prompt(request),
                        "max_tokens": max(1, min(request.output_length
                                                 // settings.tokens_per_event,
                                                 settings.max_events)),
                        "stream": True}
                sent = loop.time()
                try:
                    async with session.post(url, json=body, headers=headers) as answer:
                        first = None
                        async for line in answer.content:
                            if first is None and line.startswith(b"data: "):
                                first = loop.time() - sent
                        if answer.status != 200 or first is None:
                            failed += 1
                        else:
                            ttfts.append(first)
                except (TimeoutError, aiohttp.ClientError):
                    failed += 1

            await asyncio.gather(*(one(request) for request in requests))
    finally:
        await gateway.stop()
        for engine in engines:
            await engine.stop()
    prompt = sum(e.prompt_tokens for e in engines)
    ttfts.sort()
    return PolicyRun(policy, len(requests), failed,
                     sum(e.cached_tokens for e in engines) / prompt if prompt else 0.0,
                     sum(ttfts) / len(ttfts) if ttfts else 0.0, _percentile(ttfts, 0.5),
                     _percentile(ttfts, 0.9), _percentile(ttfts, 0.99),
                     {e.name: e.requests for e in engines})


async def run_llm_demo(requests: Sequence[TraceRequest], *, seconds: float = 8.0,
                       source: str = "generated",
                       out: Callable[[str], None] | None = None) -> LlmDemoResult:
    """Replay ``requests`` through the gateway for each of ``LLM_POLICIES``
    (about ``seconds`` each; see the module docs); ``out`` is told each
    policy as it starts.  ValueError without requests."""
    if not requests:
        raise ValueError("no requests to replay")
    first = requests[0].arrival
    requests = [TraceRequest(r.arrival - first, r.input_length, r.output_length, r.hash_ids)
                for r in requests]
    span = max(requests[-1].arrival, 1e-3)
    scale = seconds / span
    tokens = sum(len(r.hash_ids) for r in requests) * _BLOCK_CHARS / 4
    prefill_rate = tokens / (_ENGINES * seconds) / 1.25
    distinct = len({block for r in requests for block in r.hash_ids})
    cache_blocks = max(16, distinct // 2)
    runs = []
    for policy in LLM_POLICIES:
        if out is not None:
            out(f"replaying {len(requests)} completions through the gateway: {policy} ...")
        runs.append(await replay(policy, requests,
                                 ReplaySettings(prefill_rate, cache_blocks, scale)))
    return LlmDemoResult(runs, source)


def render_llm(result: LlmDemoResult) -> str:
    """The policies side by side: hit rate, TTFT and the spread."""
    lines = [f"{'policy':<8} {'hit rate':>8} {'TTFT mean':>10} {'p50':>8} {'p90':>8} "
             f"{'p99':>8} {'failed':>6}  completions by engine"]
    for run in result.runs:
        spread = " ".join(f"{name}={count}" for name, count in run.per_engine.items())
        lines.append(f"{run.policy:<8} {run.hit_rate:>8.3f} {run.ttft_mean * 1000:>8.1f}ms "
                     f"{run.ttft_p50 * 1000:>6.1f}ms {run.ttft_p90 * 1000:>6.1f}ms "
                     f"{run.ttft_p99 * 1000:>6.1f}ms {run.failed:>6}  {spread}")
    lines.append(f"(requests: {result.source}; hit rate from the engines' own counters, TTFT "
                 "measured by the client to its first event; stand-in engines, not GPUs)")
    return "\n".join(lines)
