"""LLM serving replayed: a trace through N inference workers, each with a
prefix cache and a prefill queue, routed by one policy (``chash simulate
--trace``).

The model, exactly (docs/llm.md restates it):

- workers ``w0`` .. ``w{N-1}``; each keeps an LRU of at most C blocks.
  Requests are taken in file order, arriving at ``timestamp / 1000`` s.
- A request's hit blocks on worker j: the longest prefix of its ``hash_ids``
  in j's cache; cached tokens = min(input_length, 512 x hits).  After
  routing, its ``hash_ids`` go into the cache in order, each made most
  recent, the least recent evicted beyond C.
- Prefill: one FIFO per worker at P tokens/s: start = max(arrival, the
  worker's previous prefill end), end = start + (input - cached) / P;
  TTFT = end - arrival.  The request is in flight until
  end + output_length x D.
- Seen by the policy at arrival t: load_j = requests on j whose in-flight
  end is > t; queued_j = max(0, j's prefill end - t).
- Replicas: each request goes to a replica drawn uniformly by
  ``random.Random(seed)``; a replica knows what it sent to each worker (its
  record: an LRU of C blocks per worker, updated as the cache is) and,
  unless loads are shared, load_j counted over its own requests and
  queued_j = the prefill still ahead of its own requests on j (the sum,
  over its requests on j whose prefill ends after t, of the part after t).
  Shared, every replica sees the cluster's true load and queued work.
- Figures: hit rate (cached / input tokens), TTFT mean and p50/p90/p99 (the
  sorted value at index floor(p x n), capped at n - 1), and max / mean of
  the requests each worker received.
"""
from __future__ import annotations

import heapq
import math
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from chash.simulate.trace import BLOCK_TOKENS, TraceRequest

__all__ = [
    "BlockLRU",
    "Policy",
    "ServingConfig",
    "View",
    "average",
    "percentile",
    "replay",
]


@dataclass(frozen=True)
class ServingConfig:
    """The cluster and the routing of one replay (the ``--trace`` options)."""

    workers: int = 8
    cache_blocks: int = 20_000
    prefill_rate: float = 8_000.0
    decode_time: float = 0.02
    key_blocks: int = 2
    replicas: int = 1
    seed: int = 1
    shared_loads: bool = False
    balance_factor: float = 1.25

    def __post_init__(self) -> None:
        for name in ("workers", "cache_blocks", "key_blocks", "replicas"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
        if not (self.prefill_rate > 0 and math.isfinite(self.prefill_rate)):
            raise ValueError(f"prefill_rate must be a finite number > 0, not {self.prefill_rate!r}")
        if not (self.decode_time >= 0 and math.isfinite(self.decode_time)):
            raise ValueError(f"decode_time must be a finite number >= 0, not {self.decode_time!r}")
        if not (self.balance_factor >= 1 and math.isfinite(self.balance_factor)):
            raise ValueError(f"balance_factor must be a finite number >= 1, not {self.balance_factor!r}")

    @property
    def names(self) -> list[str]:
        """The workers' names, in the order they are added."""
        return [f"w{j}" for j in range(self.workers)]


class BlockLRU:
    """At most ``capacity`` block ids, least recently inserted evicted first."""

    __slots__ = ("blocks", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def match(self, ids: Sequence[int]) -> int:
        """How many of ``ids``, from the first, are held."""
        blocks = self.blocks
        n = 0
        for h in ids:
            if h not in blocks:
                break
            n += 1
        return n

    def insert(self, ids: Sequence[int]) -> None:
        """Each of ``ids`` in order made most recent; the oldest beyond the
        capacity evicted."""
        blocks = self.blocks
        for h in ids:
            if h in blocks:
                blocks.move_to_end(h)
            else:
                blocks[h] = None
        while len(blocks) > self.capacity:
            blocks.popitem(last=False)

    def __len__(self) -> int:
        return len(self.blocks)


@dataclass
class View:
    """What a replica's policy sees at a request's arrival: ``loads`` and
    ``queued`` (seconds of prefill ahead) a worker, its ``records`` of what
    it sent to each worker, and ``index``, how many requests it routed
    before this one."""

    loads: list[int]
    queued: list[float]
    records: list[BlockLRU]
    index: int = 0


class Policy(Protocol):
    """One replica's routing: the worker (0 .. N-1) for a request."""

    def choose(self, request: TraceRequest, view: View) -> int: ...


#: A policy's constructor: one policy a replica, from the replay's setup.
PolicyFactory = Callable[[ServingConfig], Policy]


@dataclass
class _Tracker:
    """In-flight ends (a heap a worker) and the pending prefills (start,
    end) of the requests one viewer counts."""

    inflight: list[list[float]]
    pending: list[list[tuple[float, float]]]

    @classmethod
    def new(cls, workers: int) -> _Tracker:
        return cls([[] for _ in range(workers)], [[] for _ in range(workers)])

    def loads(self, t: float) -> list[int]:
        for heap in self.inflight:
            while heap and heap[0] <= t:
                heapq.heappop(heap)
        return [len(heap) for heap in self.inflight]

    def queued(self, t: float) -> list[float]:
        out = []
        for j, spans in enumerate(self.pending):
            live = [s for s in spans if s[1] > t]
            self.pending[j] = live
            out.append(sum(end - max(start, t) for start, end in live))
        return out

    def add(self, j: int, start: float, end: float, done: float) -> None:
        heapq.heappush(self.inflight[j], done)
        self.pending[j].append((start, end))


@dataclass
class _Totals:
    ttfts: list[float] = field(default_factory=list)
    cached: int = 0
    tokens: int = 0


def percentile(ordered: Sequence[float], p: float) -> float:
    """The value at index floor(p x n) of ``ordered`` (sorted), capped at
    n - 1."""
    return ordered[min(math.floor(p * len(ordered)), len(ordered) - 1)]


def replay(requests: Sequence[TraceRequest], policy: PolicyFactory,
           config: ServingConfig) -> dict[str, Any]:
    """``requests`` through the model with one ``policy`` a replica; the
    figures as a JSON-ready dict."""
    n = config.workers
    caches = [BlockLRU(config.cache_blocks) for _ in range(n)]
    prefill_end = [0.0] * n
    routed = [0] * n
    true_view = _Tracker.new(n)
    own = config.replicas > 1 and not config.shared_loads
    trackers = [_Tracker.new(n) for _ in range(config.replicas)] if own else []
    replicas = [policy(config) for _ in range(config.replicas)]
    records = [[BlockLRU(config.cache_blocks) for _ in range(n)] for _ in range(config.replicas)]
    counts = [0] * config.replicas
    rng = random.Random(config.seed)
    rate, decode = config.prefill_rate, config.decode_time
    totals = _Totals()
    for request in requests:
        t = request.arrival
        r = rng.randrange(config.replicas)
        if own:
            loads, queued = trackers[r].loads(t), trackers[r].queued(t)
        else:
            loads = true_view.loads(t)
            queued = [max(0.0, end - t) for end in prefill_end]
        j = replicas[r].choose(request, View(loads, queued, records[r], counts[r]))
        if not (isinstance(j, int) and 0 <= j < n):
            raise ValueError(f"policy chose {j!r}, not a worker index below {n}")
        counts[r] += 1
        ids = request.hash_ids
        cached = min(request.input_length, BLOCK_TOKENS * caches[j].match(ids))
        caches[j].insert(ids)
        records[r][j].insert(ids)
        start = max(t, prefill_end[j])
        end = start + (request.input_length - cached) / rate
        prefill_end[j] = end
        done = end + request.output_length * decode
        true_view.add(j, start, end, done)
        if own:
            trackers[r].add(j, start, end, done)
        routed[j] += 1
        totals.ttfts.append(end - t)
        totals.cached += cached
        totals.tokens += request.input_length
    return _figures(totals, routed, config)


def _figures(totals: _Totals, routed: list[int], config: ServingConfig) -> dict[str, Any]:
    ordered = sorted(totals.ttfts)
    count = len(ordered)
    mean_load = sum(routed) / len(routed)
    return {
        "config": asdict(config),
        "requests": count,
        "hit_rate": totals.cached / totals.tokens if totals.tokens else 0.0,
        "ttft": {
            "mean": sum(ordered) / count if count else 0.0,
            "p50": percentile(ordered, 0.5) if count else 0.0,
            "p90": percentile(ordered, 0.9) if count else 0.0,
            "p99": percentile(ordered, 0.99) if count else 0.0,
        },
        "max_mean_load": max(routed) / mean_load if mean_load else 0.0,
        "routed": routed,
    }


def average(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The figures of ``runs`` (one a seed) averaged; ``seeds`` lists them."""
    first = runs[0]
    k = len(runs)
    return {
        "config": {**first["config"], "seed": None},
        "seeds": [run["config"]["seed"] for run in runs],
        "requests": first["requests"],
        "hit_rate": sum(run["hit_rate"] for run in runs) / k,
        "ttft": {name: sum(run["ttft"][name] for run in runs) / k for name in first["ttft"]},
        "max_mean_load": sum(run["max_mean_load"] for run in runs) / k,
        "routed": [sum(run["routed"][j] for run in runs) / k for j in range(len(first["routed"]))],
    }
