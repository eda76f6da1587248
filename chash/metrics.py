"""Prometheus metrics for a consistent-hash ring and the traffic it routes.

Two pieces:

* ``RouteCounters``: plain, thread-safe counters of routing events (keys
  looked up per node, requests forwarded per node and their outcome,
  retries, health transitions).  No dependency; the gateway keeps one for
  its status page whether or not Prometheus is installed.
* ``RouterCollector``: a Prometheus collector (``pip install
  'chash-router[metrics]'``) that reads, at every scrape, the ring itself (points,
  ownership, weights, memory), the health checker's verdicts, the
  in-flight load of anything with a ``loads`` mapping (the gateway, a
  bounded-load router), and a ``RouteCounters``.

Reading state at scrape time keeps the hot path free of metric updates:
only the counters are touched per request.  The metric names are listed in
docs/gateway.md; the ring-level ones cover the design's monitoring list
(distribution evenness as a standard deviation, virtual-node count and
memory, lookups per node).

Typical use without the gateway::

    counters = RouteCounters()
    checker = HealthChecker(router, on_change=counters.health_change)
    REGISTRY.register(RouterCollector(router, health=checker, counters=counters))
    ...
    node = router.get_target_node(key)
    counters.lookup(node)
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from chash._optional import require
from chash.routers import Router

if TYPE_CHECKING:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.metrics_core import Metric

__all__ = [
    "OUTCOMES",
    "CountersSnapshot",
    "RouteCounters",
    "RouterCollector",
]

#: Outcomes a request can have, as counted by ``RouteCounters.request()``:
#: a backend answered it, no backend could (the gateway answered 5xx), or it
#: was refused before routing (no key).
OUTCOMES = ("ok", "failed", "rejected")


def _prometheus_core() -> Any:
    """``prometheus_client.core``; ImportError naming the extra without it:
    "chash.metrics.RouterCollector needs prometheus_client: pip install
    'chash-router[metrics]'"."""
    return require("prometheus_client.core", user="chash.metrics.RouterCollector",
                   extra="metrics", package="prometheus_client")


@dataclass(frozen=True)
class CountersSnapshot:
    """The values of a ``RouteCounters`` at one moment (plain dicts)."""

    lookups: dict[str, int] = field(default_factory=dict)
    """Keys routed to each node as owner: ``{node: count}``."""
    upstream_ok: dict[str, int] = field(default_factory=dict)
    """Forwarded requests a node answered: ``{node: count}``."""
    upstream_errors: dict[str, int] = field(default_factory=dict)
    """Forwarded requests a node failed (no answer, or a retryable status)."""
    requests: dict[str, int] = field(default_factory=dict)
    """Requests by outcome (see ``OUTCOMES``): ``{outcome: count}``."""
    retries: int = 0
    """Attempts beyond the first, on the next node of a preference list."""
    transitions: dict[tuple[str, str], int] = field(default_factory=dict)
    """Health transitions: ``{(node, new_state): count}``."""


class RouteCounters:
    """Thread-safe counters of routing events, fed by whoever routes.

    Every method is cheap (one lock, one dict update) and safe to call from
    request handlers and health-check threads alike.
    """

    def __init__(self) -> None:
        """Start every counter at zero."""
        self._lock = threading.Lock()
        self._lookups: Counter[str] = Counter()
        self._upstream_ok: Counter[str] = Counter()
        self._upstream_errors: Counter[str] = Counter()
        self._requests: Counter[str] = Counter()
        self._retries = 0
        self._transitions: Counter[tuple[str, str]] = Counter()

    def lookup(self, node: str, count: int = 1) -> None:
        """Count ``count`` keys routed to ``node`` (their owner)."""
        with self._lock:
            self._lookups[node] += count

    def attempt(self, node: str, ok: bool) -> None:
        """Count one request forwarded to ``node``: answered (``ok``) or not."""
        with self._lock:
            (self._upstream_ok if ok else self._upstream_errors)[node] += 1

    def request(self, outcome: str) -> None:
        """Count one request with ``outcome``, one of ``OUTCOMES``."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
        with self._lock:
            self._requests[outcome] += 1

    def routed(self, owner: str, outcome: str, answered_by: str | None = None) -> None:
        """Count one request routed by the ring, under one lock: its key's
        lookup on ``owner``, its ``outcome`` (one of ``OUTCOMES``), and,
        if ``answered_by`` is given, one answered attempt on that node.
        The same counts as ``lookup``, ``request`` and ``attempt``."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
        with self._lock:
            self._lookups[owner] += 1
            self._requests[outcome] += 1
            if answered_by is not None:
                self._upstream_ok[answered_by] += 1

    def retry(self) -> None:
        """Count one retry on the next node of a key's preference list."""
        with self._lock:
            self._retries += 1

    def health_change(self, node: str, old: object, new: object, reason: str) -> None:
        """Count a health transition of ``node`` to ``new``.

        Has the signature of a health checker's ``on_change`` callback, so it
        can be passed as one.
        """
        state = str(getattr(new, "value", new))
        with self._lock:
            self._transitions[(node, state)] += 1

    def snapshot(self) -> CountersSnapshot:
        """Every counter's current value."""
        with self._lock:
            return CountersSnapshot(
                lookups=dict(self._lookups),
                upstream_ok=dict(self._upstream_ok),
                upstream_errors=dict(self._upstream_errors),
                requests={outcome: self._requests[outcome] for outcome in OUTCOMES},
                retries=self._retries,
                transitions=dict(self._transitions),
            )


def router_points(router: object) -> dict[str, int] | None:
    """``router.points`` ({node: points or table entries}), or None for a
    router that has no points (rendezvous scores every node)."""
    points = getattr(router, "points", None)
    return dict(points) if isinstance(points, dict) else None


class _Health(Protocol):
    """The part of a health checker the collector reads."""

    def status(self) -> Mapping[str, Any]: ...


def _evenness(ownership: Mapping[str, float], weights: Mapping[str, float],
              ) -> tuple[float, float] | None:
    """(max, standard deviation) over nodes of ownership / weight share.

    1.0 and 0.0 mean every node owns exactly its weight's share of the ring;
    None for an empty ring.
    """
    total_weight = sum(weights.get(node, 0.0) for node in ownership)
    if not ownership or total_weight <= 0:
        return None
    ratios = [share / (weights[node] / total_weight)
              for node, share in ownership.items() if weights.get(node, 0.0) > 0]
    if not ratios:
        return None
    mean = sum(ratios) / len(ratios)
    stddev = math.sqrt(sum((r - mean) ** 2 for r in ratios) / len(ratios))
    return max(ratios), stddev


class RouterCollector:
    """A Prometheus collector reading a ring, its health and its traffic.

    Arguments:
        router: the ``chash.ConsistentHashRouter`` (or alike) to describe.
        health: a health checker (anything with ``status()`` returning
            ``{node: status}`` whose items have ``state`` and optionally
            ``in_service``, and optionally a ``panicking`` attribute).
        load: anything with a ``loads`` mapping ``{node: requests in
            flight}``: the gateway, a ``BoundedLoadRouter``.
        counters: a ``RouteCounters`` fed by the code that routes.
        namespace: the prefix of every metric name.

    Register it with ``registry.register(collector)``.  Families whose
    source is not given are left out.  Raises ImportError without
    prometheus_client.
    """

    def __init__(
        self,
        router: Router,
        *,
        health: _Health | None = None,
        load: object | None = None,
        counters: RouteCounters | None = None,
        namespace: str = "chash",
    ) -> None:
        """See the class docstring."""
        _prometheus_core()
        if not namespace or not namespace.replace("_", "a").isalnum() or namespace[0].isdigit():
            raise ValueError(f"namespace must be a metric-name prefix, not {namespace!r}")
        self._router = router
        self._health = health
        self._load = load
        self._counters = counters
        self._namespace = namespace

    @property
    def counters(self) -> RouteCounters | None:
        """The ``RouteCounters`` this collector reports, if any."""
        return self._counters

    def collect(self) -> Iterable[Metric]:
        """The current metric families (called by the registry per scrape)."""
        return list(self._collect())

    def _collect(self) -> Iterator[Metric]:
        core = _prometheus_core()
        health = dict(self._health.status()) if self._health is not None else {}
        families = _Families(self._namespace, core.GaugeMetricFamily, core.CounterMetricFamily,
                             nodes=list(dict.fromkeys([*self._router.nodes, *health])))
        yield from self._ring_families(families, health)
        if self._load is not None:
            loads = getattr(self._load, "loads", None)
            if isinstance(loads, Mapping):
                yield families.per_node("node_in_flight", "Requests in flight to the node.", loads)
        if self._health is not None:
            yield from self._health_families(families, health)
        if self._counters is not None:
            yield from _counter_families(families, self._counters.snapshot())

    def _ring_families(self, families: _Families, health: Mapping[str, Any]) -> Iterator[Metric]:
        """The ring's size, memory and evenness, and each node's share of it."""
        gauge, per_node = families.gauge, families.per_node
        router = self._router
        weights = router.weights
        points = router_points(router)
        ownership = router.ownership()
        yield gauge("ring_nodes", "Nodes in the ring.", value=len(router.nodes))
        if points is not None:
            yield gauge("ring_points", "Virtual nodes (points) on the ring.",
                        value=sum(points.values()))
        memory = getattr(router, "memory_bytes", None)
        if isinstance(memory, int):
            yield gauge("ring_memory_bytes", "Heap bytes the ring engine holds.", value=memory)
        evenness = _evenness(ownership, weights)
        if evenness is not None:
            yield gauge("ring_imbalance",
                        "Largest ownership of a node divided by its weight's share "
                        "(1 is perfectly even).", value=evenness[0])
            yield gauge("ring_ownership_stddev",
                        "Standard deviation over nodes of ownership divided by weight "
                        "share (0 is perfectly even).", value=evenness[1])
        yield per_node("node_ownership_ratio", "Fraction of the ring's positions the node owns.",
                       ownership)
        if points is not None:
            yield per_node("node_points", "Virtual nodes (points) the node owns.", points)
        yield per_node("node_weight", "The node's weight in the ring.",
                       {**{n: getattr(s, "weight", 0.0) for n, s in health.items()}, **weights})
        yield per_node("node_in_ring", "1 if the node is in the ring, else 0.",
                       {node: 1.0 for node in router.nodes})

    def _health_families(self, families: _Families,
                         health: Mapping[str, Any]) -> Iterator[Metric]:
        """Each node's verdict, and whether the checker is in panic mode."""
        yield families.per_node("node_up", "1 if health checks find the node up, else 0.",
                                {n: 1.0 if str(getattr(s.state, "value", s.state)) == "up"
                                 else 0.0 for n, s in health.items()})
        panicking = getattr(self._health, "panicking", None)
        if isinstance(panicking, bool):
            yield families.gauge("health_panic",
                                 "1 while too few nodes are healthy and all are kept in service.",
                                 value=1.0 if panicking else 0.0)


class _Families:
    """Builds metric families named ``<namespace>_<name>``; ``per_node``
    gives every node of ``nodes`` a sample (0 when the source has none)."""

    def __init__(self, namespace: str, gauge: type[GaugeMetricFamily],
                 counter: type[CounterMetricFamily], *, nodes: list[str]) -> None:
        self._namespace = namespace
        self._gauge = gauge
        self._counter = counter
        self.nodes = nodes

    def gauge(self, name: str, doc: str, **kwargs: Any) -> GaugeMetricFamily:
        return self._gauge(f"{self._namespace}_{name}", doc, **kwargs)

    def counter(self, name: str, doc: str, **kwargs: Any) -> CounterMetricFamily:
        return self._counter(f"{self._namespace}_{name}", doc, **kwargs)

    def per_node(self, name: str, doc: str, values: Mapping[str, float]) -> GaugeMetricFamily:
        family = self.gauge(name, doc, labels=["node"])
        for node in self.nodes:
            family.add_metric([node], float(values.get(node, 0.0)))
        return family


def _counter_families(families: _Families, snap: CountersSnapshot) -> Iterator[Metric]:
    """The routing counters: lookups, upstream outcomes, requests, retries,
    health transitions."""
    counter = families.counter
    lookups = counter("lookups", "Keys routed to the node as their owner.", labels=["node"])
    for node, count in snap.lookups.items():
        lookups.add_metric([node], count)
    yield lookups
    upstream = counter("upstream_requests", "Requests forwarded to the node, by outcome.",
                            labels=["node", "outcome"])
    for node, count in snap.upstream_ok.items():
        upstream.add_metric([node, "ok"], count)
    for node, count in snap.upstream_errors.items():
        upstream.add_metric([node, "error"], count)
    yield upstream
    requests = counter("requests", "Requests by outcome: ok (a backend "
                            "answered), failed (none could), rejected (no key).",
                            labels=["outcome"])
    for outcome, count in snap.requests.items():
        requests.add_metric([outcome], count)
    yield requests
    yield counter("retries", "Retries on the next node of a preference list.",
                  value=snap.retries)
    transitions = counter("health_transitions",
                               "Health transitions of the node, by the state entered.",
                               labels=["node", "state"])
    for (node, state), count in sorted(snap.transitions.items()):
        transitions.add_metric([node, state], count)
    yield transitions
