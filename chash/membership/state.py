"""What a shared ring is, as the stores report it: plain data, no I/O.

``MembershipState`` is one consistent view of the ring, and
``HealthVerdict`` says why the health checks took a node out.  Beside them
are the replies every store gives to the protocol's operations
(``chash.membership.store``), as records the core reads: ``StoredRing``
(the whole ring, each entry as the text stored), ``RingHead`` (its
position and digest), ``Outcome`` (what a change did), ``Change`` (one
entry of the ring's history of changes), and the answers
that refuse one: ``NoRing``, ``NoSuchNode``, ``Refused``, ``OtherConfig``.
How a store encodes them is its own (the Redis store's Lua replies are
read in ``chash.membership.redis.codec``).
"""

from __future__ import annotations

import json
import math
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

__all__ = ["Change", "HealthVerdict", "MembershipState", "NoRing", "NoSuchNode",
           "NotReplicatedError", "OtherConfig", "Outcome", "Position", "Refused", "RingHead",
           "RingMissingError", "StoredRing", "change_entry", "read_change", "text"]

Position = tuple[str | None, int]


class RingMissingError(RuntimeError):
    """The ring is missing (or damaged) in the store, and this instance may
    not create it: it never synced and was not told to bootstrap.  An
    instance that holds the ring restores it."""


class NotReplicatedError(RuntimeError):
    """The store's primary applied a change, but fewer of its replicas
    than required acknowledged it in time (``acknowledged`` of
    ``required``): a failover could lose it, so it is not reported
    committed.  It may still be in the ring if the primary stays; the
    ring's history tells."""

    def __init__(self, message: str, acknowledged: int, required: int) -> None:
        super().__init__(message)
        self.acknowledged = acknowledged
        self.required = required


def text(value: object) -> str:
    """A stored item as str, whether the client decodes responses or not."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


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
    """When it was taken out, in seconds since the epoch: the Redis
    server's clock, or the etcd voter's."""

    def __str__(self) -> str:
        return f"{self.votes} of {self.reporters} reporters: {self.reason}"


@dataclass(frozen=True)
class MembershipState:
    """One consistent view of a shared ring, as read from the store."""

    epoch: str | None
    """Random id of the store's lifetime: new whenever the ring is seeded
    (first use, or the store lost its data) or the store was seen going
    back."""
    version: int
    """Bumped by every change of the ring within an epoch."""
    config: str
    """The settings every instance must share (router and quorum)."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """Every readable node the store holds, in service or not, with its
    weight, in the order they were added to the shared ring (see
    ``add_order``)."""
    disabled: Mapping[str, str] = field(default_factory=dict)
    """Nodes an operator took out, with the reason given."""
    down: Mapping[str, HealthVerdict] = field(default_factory=dict)
    """Nodes the health verdicts took out."""
    zones: Mapping[str, str] = field(default_factory=dict)
    """The zone of every node that has one (``chash ring add --zone``),
    of the nodes in ``weights`` alone; empty on a ring stored before
    zones were."""

    def ring(self) -> dict[str, float]:
        """The nodes that belong in the router, with their weights."""
        return {node: weight for node, weight in self.weights.items()
                if node not in self.disabled and node not in self.down}

    def watched(self) -> dict[str, float]:
        """The nodes to health-check: all but those an operator disabled."""
        return {node: weight for node, weight in self.weights.items()
                if node not in self.disabled}

    def after_write(self, action: str, node: str, value: str = "") -> MembershipState | None:
        """The ring as an operator's change (``chash.membership.store.Write``:
        ``action`` with ``node`` and ``value``) leaves it, as the stores make
        it: an ``add`` gives ``node`` the weight ``value`` (a new node goes
        last in the add order, a reweighed one keeps its place, either
        keeps its verdicts), ``remove`` drops it with its reason and
        verdict, ``disable`` gives it the reason ``value``, ``enable`` drops
        that.  The position is this one's (the store bumps the version).
        None for a change that is never written: an unknown action, a node
        the ring does not hold (other than for ``add``), a weight that is
        not a positive finite number."""
        weights, disabled, down = dict(self.weights), dict(self.disabled), dict(self.down)
        if action == "add":
            try:
                weight = float(value)
            except ValueError:
                return None
            if not math.isfinite(weight) or weight <= 0:
                return None
            weights[node] = weight
        elif action not in ("remove", "disable", "enable") or node not in weights:
            return None
        elif action == "remove":
            for part in (weights, disabled, down):
                part.pop(node, None)
        elif action == "disable":
            disabled[node] = value
        else:
            disabled.pop(node, None)
        return replace(self, weights=types.MappingProxyType(weights),
                       disabled=types.MappingProxyType(disabled),
                       down=types.MappingProxyType(down),
                       zones=types.MappingProxyType({n: z for n, z in self.zones.items()
                                                     if n in weights}))


# -- the stores' replies --------------------------------------------------------


@dataclass(frozen=True)
class StoredRing:
    """The whole ring as a store holds it: ``ReadRing``'s reply.

    Entries are the text stored, unparsed: the core reads them
    (``MembershipCore.read_state``), and skips and logs an unreadable one
    alike on every instance.  Mappings keep the store's order."""

    epoch: str
    version: int
    config: str
    """The shared settings the ring was made with."""
    nodes: Mapping[str, str] = field(default_factory=dict)
    """node -> weight (Python's ``repr(float)`` when written by chash)."""
    disabled: Mapping[str, str] = field(default_factory=dict)
    """node -> the reason an operator gave."""
    down: Mapping[str, str] = field(default_factory=dict)
    """node -> the health verdict, JSON ``{r: reason, n: down votes, l:
    live reporters, t: ms, s: 1 if carried over by a re-seed}``."""
    order: Mapping[str, str] = field(default_factory=dict)
    """node -> its add sequence (a positive integer)."""
    zones: Mapping[str, str] = field(default_factory=dict)
    """node -> its zone, for the nodes given one; empty on a ring stored
    before zones were (it reads as a ring of nodes in no zone).  May name
    a node the ring no longer holds (removed by an instance of a version
    that kept no zones): the core ignores it."""
    digest: str | None = None
    """The ring's ``router.fingerprint()`` stamped for this version, if any."""
    sharded: bool = False
    """Whether the store announces changes with sharded pub/sub."""


@dataclass(frozen=True)
class RingHead:
    """The ring's position and digest: ``ReadHead``'s reply."""

    epoch: str
    version: int
    digest: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What a change did: whether it changed the ring, the ring's position
    after it, the unreadable entries it skipped (key, node, value), and for
    ``Write`` the nodes in service before it and how many it took out."""

    changed: bool
    position: Position
    skipped: tuple[tuple[str, str, str], ...] = ()
    in_service: int = 0
    removed: int = 0


@dataclass(frozen=True)
class Change:
    """One change of a shared ring, as its history keeps it: the position
    it was committed at and what it did.  ``ReadHistory`` replies with the
    last ones, oldest first.

    ``action`` is an operator's ``add`` (a new node, or a new weight:
    ``value`` is the weight as stored), ``zone`` (a node's zone set:
    ``value`` the zone, empty if cleared), ``remove``, ``disable`` (``value``
    the reason) or ``enable``; the health verdicts' ``down`` (``value`` the
    reason) and ``up``; ``seed`` (the ring created or restored, ``value``
    the count of nodes, ``node`` empty) or ``reepoch`` (a new epoch, the
    store seen going back).  Entries a store cannot read are skipped."""

    epoch: str
    version: int
    action: str
    node: str = ""
    value: str = ""
    at: float = 0.0
    """When it was committed, in seconds since the epoch: the Redis
    server's clock, or the etcd writer's."""


def change_entry(epoch: str, version: int, action: str, node: str, value: str,
                 ms: int) -> str:
    """A history entry as the etcd store writes it (the Redis scripts write
    the same JSON): ``{e, v, a, n, w, t}``, ``t`` in milliseconds."""
    return json.dumps({"e": epoch, "v": version, "a": action, "n": node, "w": value, "t": ms},
                      separators=(",", ":"), ensure_ascii=False)


def read_change(raw: str) -> Change | None:
    """A history entry ``{e, v, a, n, w, t}`` (as both stores write it,
    ``change_entry``),
    or None if it is not one."""
    try:
        entry = json.loads(raw)
        if not isinstance(entry, dict) or not isinstance(entry.get("a"), str):
            return None
        version = entry.get("v")
        if not isinstance(version, int) or isinstance(version, bool):
            return None
        return Change(epoch=str(entry.get("e", "")), version=version, action=entry["a"],
                      node=str(entry.get("n", "")), value=str(entry.get("w", "")),
                      at=float(entry.get("t", 0)) / 1000.0)
    except (ValueError, TypeError):
        return None


@dataclass(frozen=True)
class NoRing:
    """The store holds no sound ring: it has none (``damage`` None), or
    part of it is lost or unreadable (``damage`` says what)."""

    damage: str | None = None


@dataclass(frozen=True)
class NoSuchNode:
    """``Write`` named a node the ring does not hold."""


@dataclass(frozen=True)
class Refused:
    """``Write`` refused: it would take ``removed`` of the ``in_service``
    nodes in service out, more than half, and was not forced."""

    in_service: int
    removed: int


@dataclass(frozen=True)
class OtherConfig:
    """``Write`` refused: the ring was made with other shared settings
    (``config``)."""

    config: str
