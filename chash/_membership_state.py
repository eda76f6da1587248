"""What both Redis membership runners share, without any I/O.

The runners (``chash.membership``) talk to Redis; this module knows what
to send and what a reply means: the key names, the settings every instance
must share, the arguments of each script, the parsed ring
(``MembershipState``), the verdicts waiting to be sent, the outage
bookkeeping, and how a state is applied to the local router.

Invariants:

* the router holds exactly ``state.ring()`` once a state has been applied,
  and a state is applied only if it is newer than the one applied before
  (another epoch, or a higher version in the same epoch), so a slow reader
  never rolls the router back;
* a node is in the ring iff the store holds it, no operator disabled it and
  the health verdicts did not take it out;
* at most one pending verdict per node: the latest.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import socket
import threading
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._chash import ConsistentHashRouter

__all__ = ["HealthVerdict", "MembershipState"]

logger = logging.getLogger("chash.membership")

#: Quorum names the scripts know, besides a positive integer.
QUORUMS = ("majority", "any", "all")

#: Status codes of the scripts (see ``chash._membership_lua``).
CHANGED, UNCHANGED, MISSING, NO_SUCH_NODE = 1, 0, -1, -2

Position = tuple[str | None, int]


def text(value: object) -> str:
    """A reply item as str, whether the client decodes responses or not."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _pairs(flat: Sequence[object]) -> list[tuple[str, str]]:
    return [(text(flat[i]), text(flat[i + 1])) for i in range(0, len(flat) - 1, 2)]


@dataclass(frozen=True)
class HealthVerdict:
    """Why the health checks took a node out of a shared ring."""

    reason: str
    """The last failure reported by a reporter voting it down."""
    votes: int
    """Reporters voting it down when it was taken out."""
    reporters: int
    """Reporters whose votes were live then."""
    since: float
    """When it was taken out (Redis server clock, seconds since the epoch)."""

    def __str__(self) -> str:
        return f"{self.votes} of {self.reporters} reporters: {self.reason}"


@dataclass(frozen=True)
class MembershipState:
    """One consistent view of a shared ring, as read from Redis."""

    epoch: str | None
    """Random id of the store's lifetime: new whenever the ring is seeded
    (first use, or Redis lost its data).  None before the first sync."""
    version: int
    """Bumped by every change of the ring within an epoch."""
    config: str
    """The settings every instance must share (router and quorum)."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """Every node the store holds, in service or not, with its weight."""
    disabled: Mapping[str, str] = field(default_factory=dict)
    """Nodes an operator took out, with the reason given."""
    down: Mapping[str, HealthVerdict] = field(default_factory=dict)
    """Nodes the health verdicts took out."""

    def ring(self) -> dict[str, float]:
        """The nodes that belong in the router, with their weights."""
        return {node: weight for node, weight in self.weights.items()
                if node not in self.disabled and node not in self.down}

    def watched(self) -> dict[str, float]:
        """The nodes to health-check: all but those an operator disabled."""
        return {node: weight for node, weight in self.weights.items()
                if node not in self.disabled}


def parse_verdict(raw: str) -> HealthVerdict:
    """A ``down`` hash value (JSON written by the scripts)."""
    data = json.loads(raw)
    return HealthVerdict(reason=str(data.get("r") or "unhealthy"),
                         votes=int(data.get("n", 0)), reporters=int(data.get("l", 0)),
                         since=float(data.get("t", 0)) / 1000.0)


def parse_snapshot(reply: Sequence[Any]) -> MembershipState | None:
    """The reply of ``SNAPSHOT``; None if the ring does not exist."""
    if int(reply[0]) == MISSING:
        return None
    weights = {node: float(weight) for node, weight in _pairs(reply[4])}
    down = {}
    for node, raw in _pairs(reply[6]):
        try:
            down[node] = parse_verdict(raw)
        except (ValueError, TypeError, AttributeError):
            down[node] = HealthVerdict("unreadable verdict", 0, 0, 0.0)
    return MembershipState(
        epoch=text(reply[1]), version=int(reply[2]), config=text(reply[3]),
        weights=types.MappingProxyType(weights),
        disabled=types.MappingProxyType(dict(_pairs(reply[5]))),
        down=types.MappingProxyType(down),
    )


def parse_status(reply: Sequence[Any]) -> tuple[int, Position | None]:
    """The reply of a write: its status and the ring's position after it."""
    status = int(reply[0])
    if status in (MISSING, NO_SUCH_NODE):
        return status, None
    return status, (text(reply[1]), int(reply[2]))


def default_reporter() -> str:
    """A reporter id unique to this process and instance."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class MembershipCore:
    """State shared by a runner's threads or tasks; every method is quick
    and thread-safe."""

    def __init__(self, router: ConsistentHashRouter, name: str, *, prefix: str,
                 quorum: str | int, vote_ttl: float, resync_interval: float,
                 reporter: str | None) -> None:
        """Validate the settings; see ``RedisMembership``."""
        if not isinstance(router, ConsistentHashRouter):
            raise TypeError(f"router must be a chash.ConsistentHashRouter, not {router!r}")
        for label, value in (("name", name), ("prefix", prefix)):
            if not isinstance(value, str) or not value or "{" in value or "}" in value:
                raise ValueError(f"{label} must be a non-empty str without braces, not {value!r}")
        if isinstance(quorum, bool) or not (
                quorum in QUORUMS or (isinstance(quorum, int) and quorum >= 1)):
            raise ValueError(
                f"quorum must be 'majority', 'any', 'all' or an int >= 1, not {quorum!r}")
        for label, seconds in (("vote_ttl", vote_ttl), ("resync_interval", resync_interval)):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                    or not math.isfinite(seconds) or seconds <= 0:
                raise ValueError(f"{label} must be a positive number of seconds, not {seconds!r}")
        if vote_ttl < 0.01:
            raise ValueError(f"vote_ttl must be at least 0.01 seconds, not {vote_ttl!r}")
        if reporter is None:
            reporter = default_reporter()
        elif not isinstance(reporter, str) or not reporter:
            raise ValueError(f"reporter must be a non-empty str, not {reporter!r}")
        self.router = router
        self.name = name
        self.reporter = reporter
        self.quorum = str(quorum)
        self.vote_ttl = float(vote_ttl)
        self.resync_interval = float(resync_interval)
        base = f"{prefix}:{{{name}}}"
        self.keys = [f"{base}:{part}" for part in ("meta", "nodes", "disabled", "down", "votes")]
        self.channel = f"{base}:events"
        hash_ = router.hash
        hash_name = hash_ if isinstance(hash_, str) else \
            f"{getattr(hash_, '__module__', '?')}.{getattr(hash_, '__qualname__', repr(hash_))}"
        self.config = (f"layout={router.layout} hash={hash_name} "
                       f"virtual_node_count={router.virtual_node_count} "
                       f"quorum={self.quorum} vote_ttl={self.vote_ttl:g}")
        self._lock = threading.Lock()
        self._state: MembershipState | None = None
        self._votes: dict[str, tuple[bool, str]] = {}
        self._outage: str | None = None
        self._mismatch_logged: str | None = None

    # -- what we know -------------------------------------------------------

    @property
    def state(self) -> MembershipState | None:
        """The last state applied, or None before the first sync."""
        return self._state

    @property
    def position(self) -> Position:
        """(epoch, version) of the last state applied."""
        state = self._state
        return (None, 0) if state is None else (state.epoch, state.version)

    def is_news(self, message: object) -> bool:
        """Whether an announcement ``epoch:version`` differs from our state."""
        epoch, _, version = text(message).rpartition(":")
        return (epoch, version) != tuple(map(str, self.position))

    def watched_nodes(self) -> dict[str, float]:
        """The nodes to health-check; the router's before the first sync."""
        state = self._state
        return dict(self.router.weights) if state is None else state.watched()

    # -- operator changes ---------------------------------------------------

    def weight_arg(self, node: str, weight: float) -> str:
        """Validate an add exactly as the router would; the weight as sent."""
        if not isinstance(node, str):
            raise TypeError(f"node must be str, not {type(node).__name__}")
        try:
            node.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"node {node!r} cannot be encoded as UTF-8") from exc
        scratch = ConsistentHashRouter(self.router.virtual_node_count,
                                       hash=self.router.hash, layout=self.router.layout)
        scratch.add_service_node(node, weight)
        return repr(float(weight))

    def write_args(self, op: str, node: str, value: str = "") -> list[str]:
        """ARGV of ``WRITE``."""
        return [self.channel, op, node, value]

    # -- seeding ------------------------------------------------------------

    def seed_args(self) -> list[str | int]:
        """ARGV of ``SEED``: the last state applied, or the router's nodes
        if there is none, under a new epoch and the next version."""
        with self._lock:
            state = self._state
            if state is None:
                weights: Mapping[str, float] = self.router.weights
                disabled: Mapping[str, str] = {}
                down: Mapping[str, HealthVerdict] = {}
            else:
                weights, disabled, down = state.weights, state.disabled, state.down
            args: list[str | int] = [self.channel, secrets.token_hex(8),
                                     self.position[1] + 1, self.config, len(weights)]
            for node, weight in weights.items():
                args += [node, repr(float(weight))]
            args.append(len(disabled))
            for node, reason in disabled.items():
                args += [node, reason]
            for node, verdict in down.items():
                args += [node, json.dumps({"r": verdict.reason, "n": verdict.votes,
                                           "l": verdict.reporters})]
        return args

    def seeded(self, created: bool) -> None:
        """Log that this instance created (or re-created) the ring in Redis."""
        if not created:
            return
        if self._state is None:
            logger.info("ring %s created in Redis from the router's %d nodes",
                        self.name, len(self.router), extra={"ring": self.name})
        else:
            logger.warning("ring %s was missing from Redis (restarted without persistence?); "
                           "re-created it from the last known ring, version %d",
                           self.name, self._state.version, extra={"ring": self.name})

    # -- applying -----------------------------------------------------------

    def check_config(self, state: MembershipState) -> None:
        """ValueError if the store's shared settings differ from ours."""
        if state.config != self.config:
            raise ValueError(
                f"ring {self.name!r} in Redis was made with {state.config!r}, but this "
                f"instance has {self.config!r}; every instance must use the same router "
                "settings, quorum and vote_ttl (or another ring name)")

    def apply(self, state: MembershipState, *, rollback: bool = False) -> bool:
        """Make the router hold ``state.ring()`` if ``state`` is newer than
        the last one applied; return whether it was applied.  ValueError
        (nothing applied) if the shared settings differ.

        ``rollback`` applies an older version of the same epoch too: for
        when Redis itself went back (a failover lost acknowledged writes),
        since the store, not this instance, is the authority.
        """
        with self._lock:
            current = self._state
            if current is not None and state.epoch == current.epoch \
                    and (state.version == current.version
                         or (state.version < current.version and not rollback)):
                return False
            if rollback and current is not None and state.epoch == current.epoch \
                    and state.version < current.version:
                logger.warning("ring %s went back from version %d to %d in Redis (a failover "
                               "lost writes?); following it", self.name, current.version,
                               state.version, extra={"ring": self.name})
            self.check_config(state)
            self._state = state
            added, removed, reweighed = self._converge(state)
        if added or removed or reweighed:
            logger.info("ring %s at version %d: %s", self.name, state.version,
                        _describe(added, removed, reweighed),
                        extra={"ring": self.name, "version": state.version})
        return True

    def repair(self) -> None:
        """Undo any change made to the router behind the membership's back."""
        with self._lock:
            state = self._state
            if state is None:
                return
            added, removed, reweighed = self._converge(state)
        if added or removed or reweighed:
            logger.warning("router of ring %s differed from the shared ring; repaired: %s",
                           self.name, _describe(added, removed, reweighed),
                           extra={"ring": self.name})

    def _converge(self, state: MembershipState) -> tuple[list[str], list[str], list[str]]:
        # Adds and reweighs before removals, so that a non-empty ring never
        # passes through empty.  Each step is one C call under the GIL.
        wanted = state.ring()
        present = self.router.weights
        if self.router.layout in ORDERED_LAYOUTS and list(present.items()) != list(wanted.items()):
            # A shared point goes to the node added first: every instance
            # holds the nodes in the store's order (the order they were
            # added to it), swapped in whole.
            try:
                self.router._replace_nodes(list(wanted.items()))
            except (TypeError, ValueError, OverflowError, MemoryError) as exc:
                logger.error("ring %s: cannot rebuild the router in the shared order: %s; "
                             "applying node by node", self.name, exc, extra={"ring": self.name})
            else:
                return ([n for n in wanted if n not in present], [n for n in present if n not in wanted],
                        [n for n in wanted if n in present and present[n] != wanted[n]])
        added: list[str] = []
        removed: list[str] = []
        reweighed: list[str] = []
        for node, weight in wanted.items():
            old = present.get(node)
            if old == weight:
                continue
            try:
                self.router.add_service_node(node, weight)
            except (TypeError, ValueError, OverflowError, MemoryError) as exc:
                # Every instance fails the same way on the same entry, so
                # the rings stay identical.
                logger.error("ring %s: cannot add node %r with weight %r: %s",
                             self.name, node, weight, exc, extra={"ring": self.name})
                continue
            (added if old is None else reweighed).append(node)
        for node in present:
            if node not in wanted:
                self.router.discard_service_node(node)
                removed.append(node)
        return added, removed, reweighed

    # -- health verdicts ----------------------------------------------------

    def queue_vote(self, node: str, down: bool, reason: str = "") -> None:
        """Remember this instance's latest verdict on ``node`` for sending."""
        with self._lock:
            self._votes[node] = (down, reason)

    def has_votes(self) -> bool:
        """Whether verdicts wait to be sent."""
        return bool(self._votes)

    def take_votes(self) -> dict[str, tuple[bool, str]]:
        """The verdicts waiting, which are no longer waiting."""
        with self._lock:
            votes, self._votes = self._votes, {}
        return votes

    def requeue_votes(self, votes: Mapping[str, tuple[bool, str]]) -> None:
        """Put back verdicts that could not be sent, unless newer ones came."""
        with self._lock:
            for node, vote in votes.items():
                self._votes.setdefault(node, vote)

    def vote_args(self, votes: Mapping[str, tuple[bool, str]]) -> list[str | int]:
        """ARGV of ``VOTE``."""
        args: list[str | int] = [self.channel, self.reporter,
                                 max(1, round(self.vote_ttl * 1000)), self.quorum]
        for node, (down, reason) in votes.items():
            args += [node, 1 if down else 0, reason]
        return args

    def sweep_args(self, withdraw: bool = False) -> list[str | int]:
        """ARGV of ``SWEEP``; ``withdraw`` drops every vote of this instance."""
        return [self.channel, max(1, round(self.vote_ttl * 1000)), self.quorum,
                self.reporter if withdraw else ""]

    # -- outages ------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """False from a failed exchange with Redis to the next good one."""
        return self._outage is None

    def outage(self, exc: BaseException) -> None:
        """Note a failed exchange; log it if it starts an outage."""
        with self._lock:
            starting = self._outage is None
            self._outage = f"{type(exc).__name__}: {exc}"
        if starting:
            logger.warning("Redis unreachable for ring %s (%s); routing on the last known "
                           "ring, version %d, until it returns", self.name, self._outage,
                           self.position[1], extra={"ring": self.name})

    def reconnected(self) -> None:
        """Note a good exchange; log it if it ends an outage."""
        with self._lock:
            ending, self._outage = self._outage is not None, None
        if ending:
            logger.warning("Redis reachable again for ring %s; in step at version %d",
                           self.name, self.position[1], extra={"ring": self.name})

    def mismatch(self, exc: ValueError) -> None:
        """Log a settings mismatch found in the background, once."""
        message = str(exc)
        if message != self._mismatch_logged:
            self._mismatch_logged = message
            logger.error("%s; keeping the last known ring", message, extra={"ring": self.name})


#: Layouts whose ring gives a shared point to the node added first.
ORDERED_LAYOUTS = frozenset({"nginx", "ketama", "libmemcached"})


def _describe(added: list[str], removed: list[str], reweighed: list[str]) -> str:
    parts = []
    for label, nodes in (("added", added), ("removed", removed), ("reweighed", reweighed)):
        if nodes:
            parts.append(f"{label} {', '.join(map(repr, nodes))}")
    return "; ".join(parts)
