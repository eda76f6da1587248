"""The store contract in the Redis store's own terms, without I/O.

Each operation of the protocol (``chash.membership.store``) runs as the
Lua script of ``scripts`` written for it, on the ring's eight keys; here is
which script that is, the ``ARGV`` it takes (``script_call``), and how its
reply, an array whose first item is a status, becomes the record the
protocol reads (``read_reply``: ``chash.membership.state``).  The scripts
document every ``ARGV`` and reply; nothing outside this package sees them.

Replies may be bytes or str (whether the client decodes responses or
not); either reads alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from chash.membership.state import (
    Change,
    NoRing,
    NoSuchNode,
    OtherConfig,
    Outcome,
    Refused,
    RingHead,
    StoredRing,
    read_change,
    text,
)
from chash.membership.store import (
    History,
    Operation,
    ReadConfig,
    ReadHead,
    ReadRing,
    Reepoch,
    Seed,
    Stamp,
    Sweep,
    Vote,
    Write,
)

__all__ = ["CHANGED", "DAMAGED", "MISSING", "NO_SUCH_NODE", "OTHER_CONFIG", "REFUSED", "UNCHANGED",
           "read_reply", "script_call"]

T = TypeVar("T")

#: The statuses the scripts reply with (first item of the reply).
CHANGED, UNCHANGED, MISSING, NO_SUCH_NODE, DAMAGED, REFUSED, OTHER_CONFIG = 1, 0, -1, -2, -3, -4, -5

Argv = list[str | int]


def pairs(flat: Sequence[object]) -> list[tuple[str, str]]:
    """A flattened hash (``[field, value, ...]``, as ``HGETALL`` gives it) as
    (field, value) pairs of str."""
    return [(text(flat[i]), text(flat[i + 1])) for i in range(0, len(flat) - 1, 2)]


def optional_text(value: object) -> str | None:
    """A reply item that Lua gives as false (or Redis as nil) when absent."""
    return None if value is None or value is False or value == 0 else text(value)


# -- ARGV of each script ------------------------------------------------------

def _no_argv(operation: Any, channel: str) -> Argv:
    return []


def _stamp_argv(operation: Stamp, channel: str) -> Argv:
    return [operation.epoch, operation.version, operation.digest]


def _reepoch_argv(operation: Reepoch, channel: str) -> Argv:
    return [channel, operation.seen_epoch, operation.seen_version, operation.epoch,
            operation.version]


def _seed_argv(operation: Seed, channel: str) -> Argv:
    args: Argv = [channel, operation.epoch, operation.version, operation.config,
                  1 if operation.restore else 0, len(operation.nodes)]
    for node, weight in operation.nodes.items():
        args += [node, weight]
    args.append(len(operation.disabled))
    for node, reason in operation.disabled.items():
        args += [node, reason]
    args.append(len(operation.zones))
    for node, zone in operation.zones.items():
        args += [node, zone]
    for node, verdict in operation.down.items():
        args += [node, json.dumps({"r": verdict.reason, "n": verdict.votes,
                                   "l": verdict.reporters})]
    return args


def _write_argv(operation: Write, channel: str) -> Argv:
    args: Argv = [channel, operation.action, operation.node, operation.value,
                  "1" if operation.force else "0", operation.config]
    # Without a zone or a stamp, the ARGV earlier versions sent; a stamp
    # takes the three places after the zone's (``0`` and '' for no zone).
    if operation.zone is not None:
        args += ["1", operation.zone]
    elif operation.stamp is not None:
        args += ["0", ""]
    if operation.stamp is not None:
        stamp = operation.stamp
        args += [stamp.epoch, stamp.version, stamp.digest]
    return args


def _vote_argv(operation: Vote, channel: str) -> Argv:
    args: Argv = [channel, operation.reporter, operation.ttl_ms, operation.quorum]
    for node, (down, reason) in operation.votes.items():
        args += [node, 1 if down else 0, reason]
    return args


def _sweep_argv(operation: Sweep, channel: str) -> Argv:
    return [channel, operation.ttl_ms, operation.quorum, operation.withdraw or ""]


# -- replies as records ---------------------------------------------------------

def _no_ring(reply: Sequence[Any]) -> NoRing | None:
    """The record of a reply saying the ring is missing or damaged, else None."""
    status = int(reply[0])
    if status == MISSING:
        return NoRing()
    if status == DAMAGED:
        return NoRing(text(reply[1]))
    return None


def _stored_ring(reply: Sequence[Any]) -> StoredRing | NoRing:
    """``SNAPSHOT``: ``{1, epoch, version, config, nodes, disabled, down,
    digest or false, sharded, order, zones}``, each hash flattened (the
    items after ``down`` were added one by one: a shorter reply has none
    of the later ones)."""
    no_ring = _no_ring(reply)
    if no_ring is not None:
        return no_ring
    return StoredRing(
        epoch=text(reply[1]), version=int(reply[2]), config=text(reply[3]),
        nodes=dict(pairs(reply[4])), disabled=dict(pairs(reply[5])),
        down=dict(pairs(reply[6])), order=dict(pairs(reply[9])) if len(reply) > 9 else {},
        zones=dict(pairs(reply[10])) if len(reply) > 10 else {},
        digest=optional_text(reply[7]) if len(reply) > 7 else None,
        sharded=len(reply) > 8 and int(reply[8]) == 1)


def _config(reply: Sequence[Any]) -> str | NoRing:
    """``SNAPSHOT`` read for its config alone."""
    stored = _stored_ring(reply)
    return stored if isinstance(stored, NoRing) else stored.config


def _head(reply: Sequence[Any]) -> RingHead | NoRing:
    """``HEAD``: ``{1, epoch, version, digest or false}``."""
    no_ring = _no_ring(reply)
    if no_ring is not None:
        return no_ring
    return RingHead(text(reply[1]), int(reply[2]), optional_text(reply[3]))


def _stamped(reply: Any) -> bool:
    """``STAMP``: 1 if it stamped, else 0."""
    return int(reply) == 1


def _outcome(reply: Sequence[Any]) -> Outcome | NoRing | NoSuchNode | Refused | OtherConfig:
    """Any other script: ``{status, epoch, version, skipped}`` (and for
    ``WRITE`` the nodes in service before and how many it took out), or a
    refusal."""
    no_ring = _no_ring(reply)
    if no_ring is not None:
        return no_ring
    status = int(reply[0])
    if status == NO_SUCH_NODE:
        return NoSuchNode()
    if status == REFUSED:
        return Refused(int(reply[1]), int(reply[2]))
    if status == OTHER_CONFIG:
        return OtherConfig(text(reply[1]))
    if status not in (CHANGED, UNCHANGED):
        raise RuntimeError(f"a membership script replied with an unknown status: {reply!r}")
    flat = [text(item) for item in (reply[3] if len(reply) > 3 else [])]
    skipped = tuple((flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat) - 2, 3))
    in_service, removed = (int(reply[4]), int(reply[5])) if len(reply) > 5 else (0, 0)
    return Outcome(status == CHANGED, (text(reply[1]), int(reply[2])), skipped, in_service,
                   removed)


def _history(reply: Sequence[Any]) -> tuple[Change, ...] | NoRing:
    """``HISTORY``: ``{1, entries}``, newest first, each JSON ``{e, v, a, n,
    w, t}``; oldest first here, unreadable entries skipped."""
    no_ring = _no_ring(reply)
    if no_ring is not None:
        return no_ring
    changes = []
    for raw in reversed(list(reply[1])):
        change = read_change(text(raw))
        if change is not None:
            changes.append(change)
    return tuple(changes)


#: Each operation: its script's name, its ARGV, its reply read.
_CODECS: dict[type[Operation[Any]],
              tuple[str, Callable[[Any, str], Argv], Callable[[Any], Any]]] = {
    ReadRing: ("SNAPSHOT", _no_argv, _stored_ring),
    ReadConfig: ("SNAPSHOT", _no_argv, _config),
    ReadHead: ("HEAD", _no_argv, _head),
    Stamp: ("STAMP", _stamp_argv, _stamped),
    Reepoch: ("REEPOCH", _reepoch_argv, _outcome),
    Seed: ("SEED", _seed_argv, _outcome),
    Write: ("WRITE", _write_argv, _outcome),
    Vote: ("VOTE", _vote_argv, _outcome),
    Sweep: ("SWEEP", _sweep_argv, _outcome),
    History: ("HISTORY", _no_argv, _history),
}


def script_call(operation: Operation[Any], channel: str) -> tuple[str, Argv]:
    """The name of the script that performs ``operation``, and its ARGV;
    ``channel`` is where the ring's changes are announced."""
    name, argv, _ = _CODECS[type(operation)]
    return name, argv(operation, channel)


def read_reply(operation: Operation[T], reply: Any) -> T:
    """The reply of ``operation``'s script as the record the protocol reads."""
    return cast("T", _CODECS[type(operation)][2](reply))
