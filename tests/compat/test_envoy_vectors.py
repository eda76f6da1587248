"""Envoy's own expectations (tests/vectors/envoy.json, transcribed from
ring_hash_lb_test.cc and maglev_lb_test.cc with the commit cited there)
held by ConsistentHashRouter(layout="envoy") and MaglevRouter: the
published rings, lookups, retry walks, weighted histograms, fractional
scales and Maglev tables.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from chash import ConsistentHashRouter, MaglevRouter

VECTORS = json.loads((Path(__file__).resolve().parent.parent / "vectors" / "envoy.json").read_text())
RING = VECTORS["ring_hash"]["vectors"]
MAGLEV = VECTORS["maglev"]["vectors"]


def envoy_ring(v: dict[str, Any]) -> ConsistentHashRouter:
    router = ConsistentHashRouter(layout="envoy", hash=v.get("hash", "xxh64"),
                                  minimum_ring_size=v["minimum_ring_size"],
                                  maximum_ring_size=v.get("maximum_ring_size"))
    router._replace_nodes(list(zip(v["hosts"], v.get("weights", [1] * len(v["hosts"])), strict=False)))
    router._check()
    return router


def samples(n: int) -> list[int]:
    return [i * ((2**64 - 1) // n) for i in range(n)]


def test_sources_are_cited() -> None:
    for part in ("ring_hash", "maglev"):
        source = VECTORS[part]["source"]
        assert source["repository"] == "envoyproxy/envoy"
        assert len(source["commit"]) == 40 and source["file"].endswith("_lb_test.cc")


@pytest.mark.parametrize("v", RING, ids=[v["test"] for v in RING])
def test_ring_hash(v: dict[str, Any]) -> None:
    router = envoy_ring(v)
    hosts = v["hosts"]
    counts = router.points
    assert sum(counts.values()) == v["ring_size"]
    if "points" in v:
        assert [counts[h] for h in hosts] == v["points"]
    if "points_min" in v:
        assert (min(counts.values()), max(counts.values())) == (v["points_min"], v["points_max"])
    if "ring" in v:
        node_map = router.node_map
        assert router.hash_ring == [point for point, _ in v["ring"]]
        assert [node_map[point] for point, _ in v["ring"]] == [hosts[k] for _, k in v["ring"]]
    for h, k in v.get("lookups", []):
        assert router.get_target_node_by_hash(h) == hosts[k]
    if v.get("lookups"):
        expected = [hosts[k] for _, k in v["lookups"]]
        assert router.get_target_nodes_by_hash([h for h, _ in v["lookups"]]) == expected
    ring = router.hash_ring
    for h, attempt, k in v.get("retries", []):
        # Envoy's retry walk on the ring: the point `attempt` places on.
        first = ring.index(next((p for p in ring if p >= h), ring[0]))
        assert router.node_map[ring[(first + attempt) % len(ring)]] == hosts[k]
    histogram = v.get("histogram")
    if histogram:
        owners = router.get_target_nodes_by_hash(samples(histogram["samples"]))
        seen = [owners.count(h) for h in hosts]
        if "counts" in histogram:
            assert seen == histogram["counts"]
        else:
            assert seen.count(0) == histogram["zero_hosts"]
            assert sum(seen) == histogram["sum"]


@pytest.mark.parametrize("v", MAGLEV, ids=[v["test"] for v in MAGLEV])
def test_maglev(v: dict[str, Any]) -> None:
    hosts = v["hosts"]
    pairs = list(zip(hosts, v.get("weights", [1] * len(hosts)), strict=False))
    if v.get("shuffled"):
        random.Random(7).shuffle(pairs)
    router = MaglevRouter(v["table_size"])
    router._replace_nodes(pairs)
    router._check()
    assert router.table == [hosts[k] for k in v["table"]]
    size = v["table_size"]
    for i in range(3 * size):
        assert router.get_target_node_by_hash(i) == hosts[v["table"][i % size]]
    if "entries_min" in v:
        counts = router.points.values()
        assert (min(counts), max(counts)) == (v["entries_min"], v["entries_max"])
    for h, attempt, k in v.get("retries", []):
        probe = h ^ (2**64 - attempt) if attempt else h
        assert router.get_target_node_by_hash(probe) == hosts[k]
