"""What a shared ring is, as the stores report it: plain data, no I/O.

``MembershipState`` is one consistent view of the ring; ``HealthVerdict``
says why the health checks took a node out; ``Reply`` and ``Snapshot`` are
the parsed replies of a store's calls, whose status codes are below (the
Redis scripts, ``chash.membership.redis.scripts``, document each reply).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CHANGED", "DAMAGED", "MISSING", "NO_SUCH_NODE", "OTHER_CONFIG", "REFUSED",
           "UNCHANGED", "HealthVerdict", "MembershipState", "Position", "Reply",
           "RingMissingError", "Snapshot", "optional_text", "pairs", "parse_reply", "text"]

#: Status codes of the scripts (see ``chash.membership.redis.scripts``).
CHANGED, UNCHANGED, MISSING, NO_SUCH_NODE, DAMAGED, REFUSED, OTHER_CONFIG = 1, 0, -1, -2, -3, -4, -5

Position = tuple[str | None, int]


class RingMissingError(RuntimeError):
    """The ring is missing (or damaged) in Redis, and this instance may not
    create it: it never synced and was not told to bootstrap.  An instance
    that holds the ring restores it."""


def text(value: object) -> str:
    """A reply item as str, whether the client decodes responses or not."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def pairs(flat: Sequence[object]) -> list[tuple[str, str]]:
    """A flattened hash (``[field, value, ...]``) as (field, value) pairs of str."""
    return [(text(flat[i]), text(flat[i + 1])) for i in range(0, len(flat) - 1, 2)]


def optional_text(value: object) -> str | None:
    """A reply item that Lua gives as false (or Redis as nil) when absent."""
    return None if value is None or value is False or value == 0 else text(value)


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
    (first use, or Redis lost its data) or Redis was seen going back."""
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

    def ring(self) -> dict[str, float]:
        """The nodes that belong in the router, with their weights."""
        return {node: weight for node, weight in self.weights.items()
                if node not in self.disabled and node not in self.down}

    def watched(self) -> dict[str, float]:
        """The nodes to health-check: all but those an operator disabled."""
        return {node: weight for node, weight in self.weights.items()
                if node not in self.disabled}


@dataclass(frozen=True)
class Reply:
    """A script's reply: status, the ring's position after it, the
    unreadable entries it skipped (key, node, value), and any other items."""

    status: int
    position: Position | None = None
    skipped: tuple[tuple[str, str, str], ...] = ()
    detail: tuple[Any, ...] = ()


def parse_reply(reply: Sequence[Any]) -> Reply:
    """The reply of any script but ``SNAPSHOT`` and ``STAMP``."""
    status = int(reply[0])
    if status < 0:
        return Reply(status, detail=tuple(reply[1:]))
    flat = [text(item) for item in (reply[3] if len(reply) > 3 else [])]
    skipped = tuple((flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat) - 2, 3))
    return Reply(status, (text(reply[1]), int(reply[2])), skipped, tuple(reply[4:]))


@dataclass(frozen=True)
class Snapshot:
    """A parsed ``SNAPSHOT``: the state (None if the ring is missing or
    damaged), the digest stamped for it, and whether announcements are
    sharded."""

    state: MembershipState | None
    digest: str | None = None
    sharded: bool = False
    damage: str | None = None
