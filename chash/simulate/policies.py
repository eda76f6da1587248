"""The routing policies ``chash simulate --trace`` compares, restated from
their sources (docs/llm.md).

- ``round-robin``: the replica's request index mod N;
- ``least-loaded``: the lowest load, ties to the lowest index;
- ``ring``: ``ConsistentHashRouter()`` with its defaults, keyed by the first
  K block ids joined by ``","``;
- ``chwbl``: the same key and ring, bounded loads (consistent hashing with
  bounded loads, weighted): T = ceil(c x (sum of loads + 1)); a node of
  weight w of W may hold max(ceil(T x w / W), 1); the first node of the
  preference list under its bound (the ring's ``get_bounded``; the rule
  restated in Python as ``bounded_choice``);
- ``cache-aware``: SGLang model gateway's defaults (balance threshold 64,
  ratio 1.5, cache threshold 0.3) over the replica's records;
- ``prefix``: ``chash.affinity.PrefixAffinity`` over the ring, told each
  worker's load and queued work.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from chash._chash import ConsistentHashRouter
from chash.affinity import PrefixAffinity
from chash.simulate.serving import PolicyFactory, ServingConfig, View, average, replay
from chash.simulate.trace import BLOCK_TOKENS, TraceRequest

__all__ = ["POLICIES", "CacheAware", "Chwbl", "LeastLoaded", "PrefixPolicy", "RingPolicy",
           "RoundRobin", "bounded_choice", "compare", "ring_key"]

#: SGLang's cache-aware defaults: imbalance beyond both thresholds routes
#: least-loaded; a longest match above the ratio is taken.
BALANCE_ABS_THRESHOLD = 64
BALANCE_REL_THRESHOLD = 1.5
CACHE_THRESHOLD = 0.3


def _least_loaded(loads: Sequence[int]) -> int:
    return min(range(len(loads)), key=loads.__getitem__)


def ring_key(ids: Sequence[int], key_blocks: int) -> str:
    """The ring's key of a request: its first ``key_blocks`` ids joined by
    ``","``."""
    return ",".join(map(str, ids[:key_blocks]))


def _ring(config: ServingConfig) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for name in config.names:
        router.add_service_node(name)
    return router


def bounded_choice(preference: Sequence[int], loads: Sequence[int], weights: Sequence[float],
                   c: float) -> int:
    """The first of ``preference`` (worker indexes) whose load is under its
    bound: T = ceil(c x (sum loads + 1)), a worker of weight w of W holds
    at most max(ceil(T x w / W), 1).  The rule ``get_bounded`` computes in
    C, stated over indexes (``Chwbl`` routes with ``get_bounded``)."""
    total = math.ceil(c * (sum(loads) + 1))
    whole = sum(weights)
    for j in preference:
        if loads[j] < max(math.ceil(total * weights[j] / whole), 1):
            return j
    raise AssertionError("no worker under its bound")  # the bounds sum above the loads


class RoundRobin:
    """The replica's request index mod N."""

    def __init__(self, config: ServingConfig) -> None:
        self.workers = config.workers

    def choose(self, request: TraceRequest, view: View) -> int:
        return view.index % self.workers


class LeastLoaded:
    """The lowest load, ties to the lowest index."""

    def __init__(self, config: ServingConfig) -> None:
        pass

    def choose(self, request: TraceRequest, view: View) -> int:
        return _least_loaded(view.loads)


class RingPolicy:
    """The ring's owner of the request's key."""

    def __init__(self, config: ServingConfig) -> None:
        self.router = _ring(config)
        self.key_blocks = config.key_blocks
        self.index = {name: j for j, name in enumerate(config.names)}

    def choose(self, request: TraceRequest, view: View) -> int:
        node = self.router.get_target_node(ring_key(request.hash_ids, self.key_blocks))
        assert node is not None
        return self.index[node]


class Chwbl(RingPolicy):
    """The ring's preference list for the key, bounded by load: the ring's
    ``get_bounded`` over the workers' loads (every weight 1)."""

    def __init__(self, config: ServingConfig) -> None:
        super().__init__(config)
        self.names = config.names
        self.factor = config.balance_factor

    def choose(self, request: TraceRequest, view: View) -> int:
        loads = dict(zip(self.names, view.loads, strict=True))
        node = self.router.get_bounded(ring_key(request.hash_ids, self.key_blocks), loads,
                                       self.factor)
        assert node is not None
        return self.index[node]


class CacheAware:
    """SGLang model gateway's cache-aware policy at its defaults, over the
    replica's records of what it sent each worker."""

    def __init__(self, config: ServingConfig) -> None:
        pass

    def choose(self, request: TraceRequest, view: View) -> int:
        loads = view.loads
        high, low = max(loads), min(loads)
        if high - low > BALANCE_ABS_THRESHOLD and high > BALANCE_REL_THRESHOLD * low:
            return _least_loaded(loads)
        ids = request.hash_ids
        order = range(len(loads))
        matches = [record.match(ids) for record in view.records]
        best = min(order, key=lambda j: (-matches[j], loads[j], j))
        if ids and matches[best] / len(ids) > CACHE_THRESHOLD:
            return best
        return min(order, key=lambda j: (len(view.records[j]), loads[j], j))


class PrefixPolicy:
    """``chash.affinity.PrefixAffinity`` over the ring, its record a
    replica's own, told the view's loads and queued work (seconds, in
    tokens at the prefill rate)."""

    def __init__(self, config: ServingConfig) -> None:
        self.affinity = PrefixAffinity(_ring(config), capacity=config.cache_blocks,
                                       block_tokens=BLOCK_TOKENS, key_blocks=config.key_blocks)
        self.names = config.names
        self.index = {name: j for j, name in enumerate(self.names)}
        self.rate = config.prefill_rate

    def choose(self, request: TraceRequest, view: View) -> int:
        rate = self.rate
        node = self.affinity.route(
            request.hash_ids, loads=dict(zip(self.names, view.loads, strict=True)),
            queued={name: q * rate for name, q in zip(self.names, view.queued, strict=True)},
            tokens=request.input_length)
        return self.index[node]


POLICIES: dict[str, PolicyFactory] = {
    "round-robin": RoundRobin,
    "least-loaded": LeastLoaded,
    "ring": RingPolicy,
    "chwbl": Chwbl,
    "cache-aware": CacheAware,
    "prefix": PrefixPolicy,
}


def compare(requests: Sequence[TraceRequest], config: ServingConfig, policies: Sequence[str],
            seeds: Sequence[int] = (1, 2, 3)) -> dict[str, Any]:
    """Each named policy over ``requests``, its figures averaged over
    ``seeds`` when there are replicas (one replica draws nothing, so one
    run: the first seed's); JSON-ready."""
    used = list(seeds[:1]) if config.replicas == 1 else list(seeds)
    rows = []
    for name in policies:
        runs = [replay(requests, POLICIES[name], replace(config, seed=seed)) for seed in used]
        rows.append({"policy": name, **average(runs)})
    return {"config": {**asdict(config), "seed": None}, "seeds": used, "requests": len(requests),
            "policies": rows}
