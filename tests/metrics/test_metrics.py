"""Tests of chash.metrics: the plain counters and the Prometheus collector,
read back through a real registry."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from _support.http_backends import Backend
from _support.ports import refused_node
from chash import ConsistentHashRouter
from chash.metrics import OUTCOMES, RouteCounters

NODES = ("a", "b", "c")


def make_router(*nodes: str, **weights: float) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for node in nodes:
        router.add_service_node(node, weights.get(node, 1.0))
    return router


# -- RouteCounters (no dependency) ------------------------------------------


def test_counters_count_every_event() -> None:
    counters = RouteCounters()
    counters.lookup("a")
    counters.lookup("a", 4)
    counters.lookup("b")
    counters.attempt("a", ok=True)
    counters.attempt("b", ok=False)
    counters.attempt("b", ok=False)
    counters.request("ok")
    counters.request("failed")
    counters.retry()
    counters.health_change("b", "up", "down", "3 consecutive failures")
    snap = counters.snapshot()
    assert snap.lookups == {"a": 5, "b": 1}
    assert snap.upstream_ok == {"a": 1}
    assert snap.upstream_errors == {"b": 2}
    assert snap.requests == {"ok": 1, "failed": 1, "rejected": 0}
    assert snap.retries == 1
    assert snap.transitions == {("b", "down"): 1}


def test_counters_snapshot_is_a_copy() -> None:
    counters = RouteCounters()
    snap = counters.snapshot()
    counters.lookup("a")
    assert snap.lookups == {}
    assert counters.snapshot().lookups == {"a": 1}


def test_counters_reject_unknown_outcome() -> None:
    with pytest.raises(ValueError, match="outcome must be one of"):
        RouteCounters().request("maybe")
    assert set(OUTCOMES) == {"ok", "failed", "rejected"}


def test_counters_take_health_states_as_enums() -> None:
    from chash.health import NodeState

    counters = RouteCounters()
    counters.health_change("a", NodeState.UP, NodeState.DOWN, "x")
    counters.health_change("a", NodeState.DOWN, NodeState.UP, "y")
    assert counters.snapshot().transitions == {("a", "down"): 1, ("a", "up"): 1}


def test_counters_are_exact_under_threads() -> None:
    counters = RouteCounters()
    threads, per_thread = 8, 2000
    start = threading.Barrier(threads)

    def work() -> None:
        start.wait(10)
        for i in range(per_thread):
            counters.lookup(NODES[i % 3])
            counters.retry()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(60)
    snap = counters.snapshot()
    assert sum(snap.lookups.values()) == threads * per_thread
    assert snap.retries == threads * per_thread


# -- RouterCollector ----------------------------------------------------------


def registry_with(prom: Any, router: ConsistentHashRouter, **kwargs: Any) -> Any:
    from chash.metrics import RouterCollector

    registry = prom.CollectorRegistry(auto_describe=True)
    registry.register(RouterCollector(router, **kwargs))
    return registry


def test_ring_metrics(prom: Any) -> None:
    router = make_router(*NODES)
    registry = registry_with(prom, router)
    value = registry.get_sample_value
    assert value("chash_ring_nodes") == 3
    assert value("chash_ring_points") == 300
    assert value("chash_ring_memory_bytes") == router.memory_bytes
    ownership = router.ownership()
    total = 0.0
    for node in NODES:
        assert value("chash_node_points", {"node": node}) == 100
        assert value("chash_node_weight", {"node": node}) == 1.0
        assert value("chash_node_in_ring", {"node": node}) == 1.0
        share = value("chash_node_ownership_ratio", {"node": node})
        assert share == pytest.approx(ownership[node])
        total += share
    assert total == pytest.approx(1.0)
    shares = [ownership[n] * 3 for n in NODES]
    assert value("chash_ring_imbalance") == pytest.approx(max(shares))
    mean = sum(shares) / 3
    stddev = (sum((s - mean) ** 2 for s in shares) / 3) ** 0.5
    assert value("chash_ring_ownership_stddev") == pytest.approx(stddev)
    # No health, load or counters given: those families are left out.
    assert value("chash_node_up", {"node": "a"}) is None
    assert value("chash_node_in_flight", {"node": "a"}) is None
    assert value("chash_lookups_total", {"node": "a"}) is None


def test_imbalance_is_relative_to_weight(prom: Any) -> None:
    router = make_router("a", "b", a=3.0)
    value = registry_with(prom, router).get_sample_value
    assert value("chash_node_weight", {"node": "a"}) == 3.0
    assert value("chash_node_points", {"node": "a"}) == 300
    own = router.ownership()
    ratios = [own["a"] / 0.75, own["b"] / 0.25]
    assert value("chash_ring_imbalance") == pytest.approx(max(ratios))
    # A heavier node owning more is not imbalance: the ratio stays near 1.
    assert value("chash_ring_imbalance") < 1.5


def test_empty_ring(prom: Any) -> None:
    value = registry_with(prom, ConsistentHashRouter()).get_sample_value
    assert value("chash_ring_nodes") == 0
    assert value("chash_ring_points") == 0
    assert value("chash_ring_imbalance") is None


def test_metrics_follow_the_ring(prom: Any) -> None:
    router = make_router(*NODES)
    value = registry_with(prom, router).get_sample_value
    router.remove_service_node("b")
    assert value("chash_ring_nodes") == 2
    assert value("chash_node_points", {"node": "b"}) is None
    assert value("chash_node_ownership_ratio", {"node": "a"}) + \
        value("chash_node_ownership_ratio", {"node": "c"}) == pytest.approx(1.0)


def test_in_flight_load_is_read_from_any_loads_mapping(prom: Any) -> None:
    class Load:
        loads: ClassVar[dict[str, int]] = {"a": 2, "b": 0, "c": 7}

    value = registry_with(prom, make_router(*NODES), load=Load()).get_sample_value
    assert value("chash_node_in_flight", {"node": "a"}) == 2
    assert value("chash_node_in_flight", {"node": "c"}) == 7


def test_in_flight_load_of_a_bounded_load_router(prom: Any) -> None:
    from chash import BoundedLoadRouter

    router = make_router(*NODES)
    bounded = BoundedLoadRouter(router)
    value = registry_with(prom, router, load=bounded).get_sample_value
    held = [bounded.acquire(f"key-{i}") for i in range(6)]
    for node in NODES:
        assert value("chash_node_in_flight", {"node": node}) == held.count(node)
    for node in held:
        bounded.release(node)
    assert all(value("chash_node_in_flight", {"node": n}) == 0 for n in NODES)


def test_counters_are_exported(prom: Any) -> None:
    counters = RouteCounters()
    registry = registry_with(prom, make_router(*NODES), counters=counters)
    value = registry.get_sample_value
    counters.lookup("a", 3)
    counters.attempt("a", ok=True)
    counters.attempt("b", ok=False)
    counters.request("ok")
    counters.request("rejected")
    counters.retry()
    counters.health_change("b", "up", "down", "refused")
    assert value("chash_lookups_total", {"node": "a"}) == 3
    assert value("chash_upstream_requests_total", {"node": "a", "outcome": "ok"}) == 1
    assert value("chash_upstream_requests_total", {"node": "b", "outcome": "error"}) == 1
    assert value("chash_requests_total", {"outcome": "ok"}) == 1
    assert value("chash_requests_total", {"outcome": "failed"}) == 0
    assert value("chash_requests_total", {"outcome": "rejected"}) == 1
    assert value("chash_retries_total") == 1
    assert value("chash_health_transitions_total", {"node": "b", "state": "down"}) == 1
    text = prom.generate_latest(registry).decode()
    assert "# TYPE chash_lookups_total counter" in text


def test_health_state_and_transitions(prom: Any, backends: Callable[..., Backend]) -> None:
    """A real health checker: one node answers, one refuses connections."""
    from chash.health import HealthChecker

    good, bad = backends().node, refused_node()
    router = make_router(good, bad)
    counters = RouteCounters()
    checker = HealthChecker(router, fall=1, rise=1, timeout=5.0,
                            on_change=counters.health_change)
    registry = registry_with(prom, router, health=checker, counters=counters)
    value = registry.get_sample_value
    checker.check_now()
    assert value("chash_node_up", {"node": good}) == 1
    assert value("chash_node_up", {"node": bad}) == 0
    # Out of the ring, yet still reported: health keeps watching it.
    assert value("chash_node_in_ring", {"node": bad}) == 0
    assert value("chash_node_points", {"node": bad}) == 0
    assert value("chash_node_weight", {"node": bad}) == 1.0
    assert value("chash_health_panic") == 0
    assert value("chash_health_transitions_total", {"node": bad, "state": "down"}) == 1
    assert value("chash_health_transitions_total", {"node": good, "state": "down"}) is None


def test_namespace(prom: Any) -> None:
    from chash.metrics import RouterCollector

    value = registry_with(prom, make_router(*NODES), namespace="router_x").get_sample_value
    assert value("router_x_ring_nodes") == 3
    for bad in ("", "9x", "a-b", "a b"):
        with pytest.raises(ValueError, match="namespace"):
            RouterCollector(make_router(), namespace=bad)


def test_missing_prometheus_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from chash.metrics import RouterCollector

    for name in list(sys.modules):
        if name == "prometheus_client" or name.startswith("prometheus_client."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ImportError, match=r"pip install 'chash-router\[metrics\]'"):
        RouterCollector(make_router(*NODES))


def test_routed_counts_a_request_at_once() -> None:
    counters = RouteCounters()
    counters.routed("a", "ok", "b")
    counters.routed("a", "failed")
    counters.routed("c", "rejected")
    snap = counters.snapshot()
    assert snap.lookups == {"a": 2, "c": 1}
    assert snap.requests == {"ok": 1, "failed": 1, "rejected": 1}
    assert snap.upstream_ok == {"b": 1} and snap.upstream_errors == {}
    with pytest.raises(ValueError, match="outcome must be one of"):
        counters.routed("a", "maybe")
    assert counters.snapshot() == snap
