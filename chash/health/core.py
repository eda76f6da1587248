"""What both health-check runners share: everything but the probing.

``CheckerCore`` holds the settings, the state machine and the membership.
It reads the watched nodes at the start of a round, names each node's URL,
records the round's outcomes and passive reports, applies the verdicts to
the membership, logs transitions and calls ``on_change``.  A runner adds
only the I/O: how probes run, and when rounds start and stop.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Container

from chash.health.membership import LocalMembership, Membership
from chash.health.probes import ProbeOutcome, describe
from chash.health.settings import HealthSettings, OnChange, UrlSpec
from chash.health.state import HealthState, NodeState, NodeStatus, Transition
from chash.routers import MutableRouter

__all__ = ["CheckerCore", "logger"]

#: Every part of chash.health logs here.
logger = logging.getLogger("chash.health")


def _membership_for(router: MutableRouter | None, membership: Membership | None) -> Membership:
    """The given membership, else a LocalMembership of ``router``."""
    if membership is not None:
        return membership
    if router is None:
        raise TypeError("a router or a membership is required")
    return LocalMembership(router)


class CheckerCore:
    """Settings, passive reports, status and verdict application shared by
    both runners.  Subclasses add the probing and ``_init_runner()``."""

    def __init__(
        self,
        router: MutableRouter | None,
        *,
        url: UrlSpec = "http://{node}/health",
        interval: float = 5.0,
        timeout: float = 2.0,
        fall: int = 3,
        rise: int = 2,
        on_change: OnChange | None = None,
        membership: Membership | None = None,
        healthy_statuses: Container[int] = range(200, 300),
        panic_threshold: float = 0.5,
        max_concurrency: int = 64,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """Watch the nodes of ``membership`` (default: ``LocalMembership(router)``);
        the arguments are described on ``HealthChecker``.  Raises TypeError
        or ValueError for a bad setting, as ``HealthSettings`` does."""
        # The runner's own machinery first: a missing optional dependency is
        # reported before anything else.
        self._init_runner()
        self._membership = _membership_for(router, membership)
        self._settings = HealthSettings(
            url=url, interval=interval, timeout=timeout, fall=fall, rise=rise,
            on_change=on_change, healthy_statuses=healthy_statuses,
            panic_threshold=panic_threshold, max_concurrency=max_concurrency)
        settings = self._settings
        self._state = HealthState(fall=settings.fall, rise=settings.rise,
                                  panic_threshold=settings.panic_threshold)
        # _lock guards _state; _apply_lock serializes membership updates so
        # that the last update applied reflects the latest verdicts.
        self._lock = threading.Lock()
        self._apply_lock = threading.Lock()
        self._panicking = False
        self.ssl_context = ssl_context

    def _init_runner(self) -> None:
        """Set up the runner's own attributes; called first by ``__init__``."""
        raise NotImplementedError

    # -- configuration ------------------------------------------------------

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The context https health URLs are probed with (None: the
        library's default, verified against the system's CAs).  May be
        replaced while running: the next probe uses the new one."""
        return self._ssl_context

    @ssl_context.setter
    def ssl_context(self, context: ssl.SSLContext | None) -> None:
        if context is not None and not isinstance(context, ssl.SSLContext):
            raise TypeError(f"ssl_context must be an ssl.SSLContext or None, not "
                            f"{type(context).__name__}")
        self._ssl_context = context

    @property
    def membership(self) -> Membership:
        """Where nodes come from and verdicts go."""
        return self._membership

    @property
    def interval(self) -> float:
        """Seconds from the start of one round to the start of the next."""
        return self._settings.interval

    @property
    def timeout(self) -> float:
        """Seconds a single probe may take before it counts as failed."""
        return self._settings.timeout

    @property
    def fall(self) -> int:
        """Consecutive failures that take a node out."""
        return self._settings.fall

    @property
    def rise(self) -> int:
        """Consecutive successes that put a node back."""
        return self._settings.rise

    @property
    def panic_threshold(self) -> float:
        """Healthy fraction below which every watched node stays in service."""
        return self._settings.panic_threshold

    def url_for(self, node: str) -> str:
        """The health URL probed for ``node``."""
        return self._settings.url_for(node)

    # -- state --------------------------------------------------------------

    def status(self) -> dict[str, NodeStatus]:
        """A snapshot of every watched node, by node name."""
        with self._lock:
            return self._state.status()

    @property
    def panicking(self) -> bool:
        """Whether too few nodes are healthy, so all are kept in service."""
        with self._lock:
            return self._state.panicking

    def report_success(self, node: str) -> None:
        """Count a request the gateway sent to ``node`` that succeeded.

        Feeds the same counters as the probes; ignored for unwatched nodes.
        """
        with self._lock:
            transition = self._state.record_success(node, time.time())
        if transition is not None:
            self._settle([transition])

    def report_failure(self, node: str, reason: str = "reported failure") -> None:
        """Count a request the gateway sent to ``node`` that failed.

        ``fall`` consecutive failures, probes and reports alike, take the
        node out.  Ignored for unwatched nodes.
        """
        with self._lock:
            transition = self._state.record_failure(node, reason, time.time())
        if transition is not None:
            self._settle([transition])

    # -- rounds -------------------------------------------------------------

    def _sync(self) -> list[str]:
        """Refresh the watched set from the membership; return the nodes to
        probe.  If the membership fails, the last known set is kept."""
        try:
            watched = self._membership.watched_nodes()
        except Exception:
            logger.exception("could not read the watched nodes; keeping the last known set")
            with self._lock:
                return self._state.nodes
        with self._lock:
            added, removed = self._state.sync(watched, time.time())
            nodes = self._state.nodes
        for node in added:
            logger.info("watching node %s", node, extra={"node": node})
        for node in removed:
            logger.info("no longer watching node %s", node, extra={"node": node})
        return nodes

    def _target(self, node: str) -> str | ProbeOutcome:
        """The URL to probe for ``node``, or the failure of not having one."""
        try:
            return self.url_for(node)
        except Exception as exc:
            return ProbeOutcome(node, False, f"no URL: {describe(exc, 0)}", None)

    def _record(self, outcomes: list[ProbeOutcome]) -> None:
        """Feed one round's outcomes to the state machine, then settle."""
        now = time.time()
        transitions = []
        with self._lock:
            for outcome in outcomes:
                if outcome.ok:
                    transition = self._state.record_success(
                        outcome.node, now, latency=outcome.latency)
                else:
                    transition = self._state.record_failure(
                        outcome.node, outcome.error or "failed", now, latency=outcome.latency)
                if transition is not None:
                    transitions.append(transition)
        self._settle(transitions)

    def _settle(self, transitions: list[Transition]) -> None:
        """Apply every verdict to the membership, then log and notify."""
        with self._apply_lock:
            panicking, healthy, total = self._apply()
            panic_changed = panicking != self._panicking
            self._panicking = panicking
        self._log(transitions, panicking)
        if panic_changed:
            if panicking:
                logger.error("panic: only %d of %d nodes are healthy (threshold %g); "
                             "keeping every node in service", healthy, total,
                             self._settings.panic_threshold)
            else:
                logger.warning("panic over: %d of %d nodes are healthy", healthy, total)
        self._notify(transitions)

    def _apply(self) -> tuple[bool, int, int]:
        """Mark every watched node up or down as the state machine says;
        return (panicking, healthy nodes, watched nodes) as applied.  A
        membership error is logged, and repaired by the next round."""
        with self._lock:
            wanted = self._state.in_service()
            reasons = {node: self._state.last_error(node) or "unhealthy"
                       for node, serve in wanted.items() if not serve}
            applied = (self._state.panicking, self._state.healthy_count, len(self._state))
        for node, serve in wanted.items():
            try:
                if serve:
                    self._membership.mark_up(node)
                else:
                    self._membership.mark_down(node, reasons[node])
            except Exception:
                logger.exception("could not mark node %s %s; retrying next round",
                                 node, "up" if serve else "down", extra={"node": node})
        return applied

    @staticmethod
    def _log(transitions: list[Transition], panicking: bool) -> None:
        """Log each transition: WARNING going down, INFO coming back."""
        for t in transitions:
            level = logging.WARNING if t.new is NodeState.DOWN else logging.INFO
            kept = " (kept in service: panic)" if t.new is NodeState.DOWN and panicking else ""
            logger.log(level, "node %s is %s: %s%s", t.node, t.new.value, t.reason, kept,
                       extra={"node": t.node, "old_state": t.old.value,
                              "new_state": t.new.value, "reason": t.reason})

    def _notify(self, transitions: list[Transition]) -> None:
        """Call ``on_change`` for each transition; its errors are logged."""
        on_change = self._settings.on_change
        if on_change is None:
            return
        for t in transitions:
            try:
                on_change(t.node, t.old, t.new, t.reason)
            except Exception:
                logger.exception("on_change callback failed for node %s", t.node,
                                 extra={"node": t.node})
