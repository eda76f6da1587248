"""The health state machine shared by every health-check runner.

Pure bookkeeping: no I/O, no clock, no threads.  Runners feed it the set of
watched nodes and the outcome of each probe or passive report, with the
current time, and read back which nodes belong in the ring.  The checks of
its three parameters (``positive_int``, ``fraction``) are also the checks
``chash.health.settings`` applies to them.

Invariants (checked by ``_check()``):

* every node is either UP or DOWN, and its consecutive success and failure
  counters are never both non-zero; an UP node has fewer than ``fall``
  failures and a DOWN node fewer than ``rise`` successes;
* a node goes DOWN only after ``fall`` consecutive failures and UP only after
  ``rise`` consecutive successes (hysteresis);
* the machine is in panic exactly when the watched set is not empty and fewer
  than ``panic_threshold`` of its nodes are UP; then every watched node is in
  service, otherwise exactly the UP nodes are.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

from chash._text import plural

__all__ = ["HealthState", "NodeState", "NodeStatus", "Transition", "fraction", "positive_int"]


def positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is an integer >= 1 (not a bool), else raise
    ``ValueError`` naming the setting ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
    return value


def fraction(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a number from 0 to 1, else raise
    ``ValueError`` naming the setting ``name``."""
    if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be between 0 and 1, not {value!r}")
    return float(value)


class NodeState(str, enum.Enum):  # noqa: UP042 (StrEnum would change str() of a state)
    """The health verdict on a node: ``UP`` (serving) or ``DOWN`` (failed)."""

    UP = "up"
    DOWN = "down"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class NodeStatus:
    """A snapshot of one watched node, as returned by ``status()``.

    Times are wall-clock seconds since the epoch (``time.time()``);
    latencies are seconds.
    """

    node: str
    """The node name, as in the router."""
    state: NodeState
    """The health verdict."""
    in_service: bool
    """Whether the node belongs in the ring: it is UP, or the checker panics."""
    weight: float
    """The weight the operator gave the node."""
    consecutive_successes: int
    """Successes since the last failure."""
    consecutive_failures: int
    """Failures since the last success."""
    last_error: str | None
    """What the most recent failure was, or None if it never failed."""
    last_latency: float | None
    """How long the most recent active probe took, or None before the first."""
    last_check: float | None
    """When the most recent probe or report was recorded, or None."""
    last_change: float
    """When the state last changed (or when the node was first seen)."""


@dataclass(frozen=True)
class Transition:
    """A node changed state: ``node`` went from ``old`` to ``new``."""

    node: str
    old: NodeState
    new: NodeState
    reason: str


class _Node:
    """One watched node's verdict, counters and last observations."""

    __slots__ = ("weight", "state", "successes", "failures", "last_error",
                 "last_latency", "last_check", "last_change")

    def __init__(self, weight: float, now: float) -> None:
        self.weight = weight
        # A node starts UP: the operator put it in the ring and it stays there
        # until it has failed `fall` times, like any other UP node.
        self.state = NodeState.UP
        self.successes = 0
        self.failures = 0
        self.last_error: str | None = None
        self.last_latency: float | None = None
        self.last_check: float | None = None
        self.last_change = now


class HealthState:
    """Hysteresis and panic bookkeeping for a set of watched nodes.

    Not thread-safe: runners serialize calls with their own lock.
    """

    def __init__(self, *, fall: int, rise: int, panic_threshold: float) -> None:
        """Count ``fall`` failures to take a node down and ``rise`` successes
        to bring it up; panic below ``panic_threshold`` healthy (0 to 1)."""
        self.fall = positive_int("fall", fall)
        self.rise = positive_int("rise", rise)
        self.panic_threshold = fraction("panic_threshold", panic_threshold)
        self._nodes: dict[str, _Node] = {}

    # -- membership ---------------------------------------------------------

    def sync(self, watched: Mapping[str, float], now: float) -> tuple[list[str], list[str]]:
        """Make the watched set exactly ``watched`` (node -> weight).

        New nodes start UP with zeroed counters; nodes no longer watched are
        forgotten with their history.  Returns ``(added, removed)``.
        """
        removed = [node for node in self._nodes if node not in watched]
        for node in removed:
            del self._nodes[node]
        added = []
        for node, weight in watched.items():
            entry = self._nodes.get(node)
            if entry is None:
                self._nodes[node] = _Node(float(weight), now)
                added.append(node)
            else:
                entry.weight = float(weight)
        return added, removed

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def nodes(self) -> list[str]:
        """The watched nodes, in the order they were first seen."""
        return list(self._nodes)

    # -- verdicts -----------------------------------------------------------

    def record_success(self, node: str, now: float, *,
                       latency: float | None = None) -> Transition | None:
        """Count a success for ``node``; return the transition it caused.

        A node that is not watched is ignored (returns None).
        """
        entry = self._nodes.get(node)
        if entry is None:
            return None
        entry.successes += 1
        entry.failures = 0
        entry.last_check = now
        if latency is not None:
            entry.last_latency = latency
        if entry.state is NodeState.DOWN and entry.successes >= self.rise:
            return self._change(node, entry, NodeState.UP, now,
                                plural(entry.successes, "consecutive success", "consecutive successes"))
        return None

    def record_failure(self, node: str, error: str, now: float, *,
                       latency: float | None = None) -> Transition | None:
        """Count a failure for ``node`` described by ``error``; return the
        transition it caused.  A node that is not watched is ignored."""
        entry = self._nodes.get(node)
        if entry is None:
            return None
        entry.failures += 1
        entry.successes = 0
        entry.last_error = error
        entry.last_check = now
        if latency is not None:
            entry.last_latency = latency
        if entry.state is NodeState.UP and entry.failures >= self.fall:
            return self._change(node, entry, NodeState.DOWN, now,
                                f"{plural(entry.failures, 'consecutive failure')}, last: {error}")
        return None

    @staticmethod
    def _change(node: str, entry: _Node, new: NodeState, now: float,
                reason: str) -> Transition:
        old = entry.state
        entry.state = new
        entry.last_change = now
        return Transition(node, old, new, reason)

    # -- what the ring should hold ------------------------------------------

    @property
    def healthy_count(self) -> int:
        """How many watched nodes are UP."""
        return sum(1 for entry in self._nodes.values() if entry.state is NodeState.UP)

    @property
    def panicking(self) -> bool:
        """True when fewer than ``panic_threshold`` of the watched nodes are UP.

        In panic every watched node stays in service: routing some requests
        to failing nodes beats sending everything to the few healthy ones
        (or to none).  An empty watched set never panics.
        """
        total = len(self._nodes)
        return total > 0 and self.healthy_count < self.panic_threshold * total

    def in_service(self) -> dict[str, bool]:
        """For every watched node, whether it belongs in the ring now."""
        everyone = self.panicking
        return {node: everyone or entry.state is NodeState.UP
                for node, entry in self._nodes.items()}

    def status(self) -> dict[str, NodeStatus]:
        """A snapshot of every watched node."""
        everyone = self.panicking
        return {
            node: NodeStatus(
                node=node,
                state=entry.state,
                in_service=everyone or entry.state is NodeState.UP,
                weight=entry.weight,
                consecutive_successes=entry.successes,
                consecutive_failures=entry.failures,
                last_error=entry.last_error,
                last_latency=entry.last_latency,
                last_check=entry.last_check,
                last_change=entry.last_change,
            )
            for node, entry in self._nodes.items()
        }

    def last_error(self, node: str) -> str | None:
        """The most recent failure recorded for ``node`` (None if none)."""
        entry = self._nodes.get(node)
        return None if entry is None else entry.last_error

    def _check(self) -> None:
        """Assert every invariant; for tests."""
        for node, entry in self._nodes.items():
            assert isinstance(node, str)
            assert entry.state in (NodeState.UP, NodeState.DOWN)
            assert entry.successes >= 0 and entry.failures >= 0
            assert entry.successes == 0 or entry.failures == 0, node
            if entry.state is NodeState.UP:
                assert entry.failures < self.fall, node
            else:
                assert entry.successes < self.rise, node
            assert math.isfinite(entry.weight)
