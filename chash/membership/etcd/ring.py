"""The shared ring's operations on etcd, without I/O.

The protocol asks a store for the ten operations of the store contract
(``chash.membership.store``: ``ReadRing``, ``ReadConfig``, ``ReadHead``, ``Stamp``,
``Reepoch``, ``Seed``, ``Write``, ``Vote``, ``Sweep``, ``History``), each replying with
a record of ``chash.membership.state``.  Each is written here as a
generator that yields the etcd requests it needs
(``chash.membership.etcd.wire``), receives their replies and returns the
operation's record, deciding by the rules the Redis store's Lua scripts
follow (``chash.membership.redis.scripts``).  Every change is
one transaction that compares the revisions it read: the ring key's
``mod_revision`` and, for health votes, that no vote changed since, so two
writers never interleave; a transaction that lost the race reads again.

Keys under ``{prefix}/{name}/``:

``history``  JSON list of the ring's last changes, oldest first, each ``{e:
          epoch, v: version, a: action, n: node, w: value, t: ms}``
          (``chash.membership.state.Change``), put in the transaction that
          makes the change and kept to ``HISTORY_LENGTH`` entries (added
          after the other keys: an instance of a version without it writes
          none, and its changes are simply not in the list);
``ring``  JSON ``{epoch, version, config, seq, digest?, nodes: {node:
          weight}, order: {node: add sequence}, disabled: {node: reason},
          down: {node: {r, n, l, t, s?}}, zones?: {node: zone}}``:
          everything the ring holds, so a change is a put of one key and
          the watch announces it.  ``digest`` is put by ``Stamp``, or by
          a ``Write`` that carries one, in the transaction of its change.
          ``zones`` (the nodes given one) came
          later: a ring without it reads as nodes in no zone, and an
          instance of a version without it keeps it as it is (it rewrites
          the document it read), though a node it removes may leave its
          zone behind, which readers ignore and the next add replaces;
``votes/{hex of reporter}/{node}``  JSON ``[1 if down else 0, ms, reason]``,
          put with a lease of ``vote_ttl`` (whole seconds, at least etcd's
          minimum): a vote lapses with its lease unless renewed, so a killed
          instance's votes go without anyone sweeping them.

Times (``t`` of a verdict, ``ms`` of a vote) are this instance's wall
clock: they only order votes and date verdicts.  Liveness is the lease's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Generator
from typing import Any, TypeVar, cast

from chash.membership.etcd.wire import (
    EtcdUnavailable,
    Request,
    compare_absent,
    compare_mod,
    delete,
    delete_prefix,
    kvs,
    prefix_end,
    put,
    range_,
    revision,
    txn,
)
from chash.membership.state import (
    Change,
    NoRing,
    NoSuchNode,
    OtherConfig,
    Outcome,
    Refused,
    RingHead,
    StoredRing,
    change_entry,
    read_change,
)
from chash.membership.store import (
    HISTORY_LENGTH,
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

__all__ = ["RingKeys", "perform"]

T = TypeVar("T")

#: An etcd operation: yields requests, receives replies, returns a T.
Ops = Generator[Request, Any, T]

#: How often a transaction that lost a race is tried again.
ATTEMPTS = 20


class RingKeys:
    """The keys of one ring."""

    def __init__(self, prefix: str, name: str) -> None:
        self.base = f"{prefix}/{name}/"
        self.ring = self.base + "ring"
        self.votes = self.base + "votes/"
        self.history = self.base + "history"

    def vote(self, reporter: str, node: str) -> str:
        """The key of ``reporter``'s vote on ``node``."""
        return f"{self.votes}{reporter.encode('utf-8', 'surrogateescape').hex()}/{node}"


class _Read:
    """The ring (and its votes) as read at one revision."""

    def __init__(self, keys: RingKeys, reply: dict[str, Any], votes: bool = False,
                 history: bool = False) -> None:
        responses = reply.get("responses", [])
        ring = kvs(responses[0].get("response_range", {}))
        self.revision = revision(reply)
        self.doc: dict[str, Any] | None = None
        self.damage: str | None = None
        self.mod = 0
        if ring:
            _, raw, self.mod = ring[0]
            self.doc, self.damage = _load(raw)
        #: node -> {reporter hex: (vote or None if unreadable, raw, key)}
        self.votes: dict[str, dict[str, tuple[list[Any] | None, str, str]]] = {}
        if votes and len(responses) > 1:
            for key, raw, _mod in kvs(responses[1].get("response_range", {})):
                reporter, _, node = key[len(keys.votes):].partition("/")
                self.votes.setdefault(node, {})[reporter] = (_vote(raw), raw, key)
        #: The history entries as stored (JSON texts), oldest first.
        self.history: list[str] = []
        at = 2 if votes else 1
        if history and len(responses) > at:
            held = kvs(responses[at].get("response_range", {}))
            if held:
                self.history = _entries(held[0][1])

    @property
    def missing(self) -> bool:
        return self.mod == 0

    def problem(self) -> NoRing | None:
        """The reply for a missing or damaged ring, or None if it is sound."""
        if self.missing:
            return NoRing()
        if self.damage is not None:
            return NoRing(self.damage)
        return None


def _load(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """The ring document, or why it is damaged."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return None, "the ring key is not JSON"
    if not isinstance(doc, dict):
        return None, "the ring key is not a JSON object"
    if not isinstance(doc.get("epoch"), str) or not doc["epoch"]:
        return None, "the ring has no epoch"
    for name in ("version", "seq"):
        value = doc.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return None, f"ring.{name} is not a count: {value!r}"
    if not isinstance(doc.get("config"), str):
        return None, "the ring has no config"
    for name in ("nodes", "order", "disabled", "down"):
        if not isinstance(doc.setdefault(name, {}), dict):
            return None, f"ring.{name} is not a JSON object"
    # Written only while a node has a zone, so a ring without zones keeps
    # the bytes earlier versions wrote.
    if not isinstance(doc.get("zones", {}), dict):
        return None, "ring.zones is not a JSON object"
    return doc, None


def _entries(raw: str) -> list[str]:
    """The history key's entries, each as its JSON text; an unreadable key
    holds none (the next change starts it again)."""
    try:
        entries = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(entries, list):
        return []
    return [json.dumps(entry, separators=(",", ":"), ensure_ascii=False) for entry in entries]


def _kept(keys: RingKeys, read: _Read, doc: dict[str, Any], now: int,
          *changes: tuple[str, str, str]) -> dict[str, Any]:
    """The put of the history with ``changes`` (action, node, value), made
    at the version ``doc`` is at, after those read; the last
    ``HISTORY_LENGTH`` kept."""
    entries = read.history + [change_entry(doc["epoch"], doc["version"], action, node, value,
                                           now) for action, node, value in changes]
    return put(keys.history, "[" + ",".join(entries[-HISTORY_LENGTH:]) + "]")


def _vote(raw: str) -> list[Any] | None:
    """A vote ``[0|1, ms, reason]``, or None if unreadable."""
    try:
        vote = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(vote, list) or len(vote) != 3 or vote[0] not in (0, 1) \
            or not isinstance(vote[1], (int, float)) or not isinstance(vote[2], str):
        return None
    return vote


def _texts(mapping: dict[str, Any]) -> dict[str, str]:
    """A part of the ring document as ``StoredRing`` holds it: every value
    as its text (a str as it is, anything else as JSON)."""
    return {key: value if isinstance(value, str) else json.dumps(value)
            for key, value in mapping.items()}


def _digest(value: object) -> str | None:
    """The digest stamped, or None (absent, null, false or 0)."""
    return None if value is None or value is False or value == 0 else str(value)


def _outcome(changed: bool, doc: dict[str, Any],
             skipped: tuple[tuple[str, str, str], ...] = (), in_service: int = 0,
             removed: int = 0) -> Outcome:
    return Outcome(changed, (doc["epoch"], doc["version"]), skipped, in_service, removed)


def _bump(doc: dict[str, Any]) -> None:
    doc.pop("digest", None)
    doc["version"] += 1


def _encode(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _read(keys: RingKeys, votes: bool = False,
          history: bool = False) -> Generator[Request, Any, _Read]:
    """Read the ring (and every vote, and the history) at one revision."""
    ops: list[dict[str, Any]] = [{"request_range": range_(keys.ring).body}]
    if votes:
        ops.append({"request_range": range_(keys.votes, prefix=True).body})
    if history:
        ops.append({"request_range": range_(keys.history).body})
    return _Read(keys, (yield txn([], ops)), votes, history)


def _commit(compare: list[dict[str, Any]], success: list[dict[str, Any]]) -> Ops[bool]:
    """Whether the transaction applied (it lost a race if not)."""
    reply = yield txn(compare, success)
    return bool(reply.get("succeeded", False))


def _quorum_met(downs: int, live: int, quorum: str) -> bool:
    if downs == 0:
        return False
    if quorum == "majority":
        return downs * 2 > live
    if quorum == "any":
        return True
    if quorum == "all":
        return downs == live
    return downs >= min(int(quorum), live)


def _settle(doc: dict[str, Any], node: str, record: dict[str, list[Any]], now: int, ttl: int,
            quorum: str, changes: list[tuple[str, str, str]]) -> bool:
    """Decide from the live votes whether ``node`` is down (as the Redis
    scripts' ``settle``); whether it went down or came back (noted in
    ``changes``)."""
    live = len(record)
    downs = [vote for vote in record.values() if vote[0] == 1]
    current = doc["down"].get(node)
    if live == 0:
        out = isinstance(current, dict) and current.get("s") == 1 \
            and isinstance(current.get("t"), (int, float)) and now - current["t"] <= ttl
    else:
        out = _quorum_met(len(downs), live, quorum)
    if out and current is None:
        reason = max(downs, key=lambda vote: vote[1])[2] if downs else ""
        doc["down"][node] = {"r": reason, "n": len(downs), "l": live, "t": now}
        changes.append(("down", node, reason))
        return True
    if current is not None and not out:
        del doc["down"][node]
        changes.append(("up", node, ""))
        return True
    return False


def _in_service(doc: dict[str, Any], node: str) -> bool:
    return node not in doc["disabled"] and node not in doc["down"]


# -- the operations -----------------------------------------------------------

def read_ring(keys: RingKeys, operation: ReadRing, now: int) -> Ops[StoredRing | NoRing]:
    read = yield from _read(keys)
    problem = read.problem()
    if problem is not None:
        return problem
    doc = read.doc
    assert doc is not None
    return StoredRing(epoch=doc["epoch"], version=doc["version"], config=doc["config"],
                      nodes=_texts(doc["nodes"]), disabled=_texts(doc["disabled"]),
                      down=_texts(doc["down"]), order=_texts(doc["order"]),
                      zones=_texts(doc.get("zones", {})), digest=_digest(doc.get("digest")), sharded=False)


def read_config(keys: RingKeys, operation: ReadConfig, now: int) -> Ops[str | NoRing]:
    read = yield from _read(keys)
    problem = read.problem()
    if problem is not None:
        return problem
    assert read.doc is not None
    return str(read.doc["config"])


def read_head(keys: RingKeys, operation: ReadHead, now: int) -> Ops[RingHead | NoRing]:
    read = yield from _read(keys)
    problem = read.problem()
    if problem is not None:
        return problem
    doc = read.doc
    assert doc is not None
    return RingHead(doc["epoch"], doc["version"], _digest(doc.get("digest")))


def stamp(keys: RingKeys, operation: Stamp, now: int) -> Ops[bool]:
    for _ in range(ATTEMPTS):
        read = yield from _read(keys)
        doc = read.doc
        if read.problem() is not None or doc is None or doc["epoch"] != operation.epoch \
                or doc["version"] != operation.version or doc.get("digest"):
            return False
        doc["digest"] = operation.digest
        if (yield from _commit([compare_mod(keys.ring, read.mod)],
                               [put(keys.ring, _encode(doc))])):
            return True
    return False  # others kept changing it: they stamp their own


def reepoch(keys: RingKeys, operation: Reepoch, now: int) -> Ops[Outcome | NoRing]:
    for _ in range(ATTEMPTS):
        read = yield from _read(keys, history=True)
        problem = read.problem()
        if problem is not None:
            return problem
        doc = read.doc
        assert doc is not None
        if doc["epoch"] != operation.seen_epoch or doc["version"] != operation.seen_version:
            return _outcome(False, doc)
        doc["epoch"], doc["version"] = operation.epoch, operation.version
        doc.pop("digest", None)
        if (yield from _commit([compare_mod(keys.ring, read.mod)],
                               [put(keys.ring, _encode(doc)),
                                _kept(keys, read, doc, now, ("reepoch", "", ""))])):
            return _outcome(True, doc)
    raise _contended(keys)


def seed(keys: RingKeys, operation: Seed, now: int) -> Ops[Outcome | NoRing]:
    nodes = dict(operation.nodes)
    order = {node: k + 1 for k, node in enumerate(nodes)}
    down: dict[str, Any] = {node: {"r": verdict.reason, "n": verdict.votes,
                                   "l": verdict.reporters, "t": now, "s": 1}
                            for node, verdict in operation.down.items()}
    for _ in range(ATTEMPTS):
        read = yield from _read(keys, history=True)
        if read.problem() is None:
            assert read.doc is not None
            return _outcome(False, read.doc)
        if read.damage is not None and not operation.restore:
            return NoRing(read.damage)
        doc = {"epoch": operation.epoch, "version": operation.version,
               "config": operation.config, "seq": len(nodes), "nodes": nodes, "order": order,
               "disabled": dict(operation.disabled), "down": down}
        if operation.zones:
            doc["zones"] = dict(operation.zones)
        guard = compare_absent(keys.ring) if read.missing else compare_mod(keys.ring, read.mod)
        if (yield from _commit([guard], [put(keys.ring, _encode(doc)),
                                         delete_prefix(keys.votes),
                                         _kept(keys, read, doc, now,
                                               ("seed", "", str(len(nodes))))])):
            return _outcome(True, doc)
    raise _contended(keys)


def write(keys: RingKeys, operation: Write,
          now: int) -> Ops[Outcome | NoRing | NoSuchNode | Refused | OtherConfig]:
    op, node, value, force = operation.action, operation.node, operation.value, operation.force
    if op not in ("add", "remove", "disable", "enable"):
        raise ValueError(f"unknown operation {op}")
    for _ in range(ATTEMPTS):
        read = yield from _read(keys, history=True)
        problem = read.problem()
        if problem is not None:
            return problem
        doc = read.doc
        assert doc is not None
        if doc["config"] != operation.config:
            return OtherConfig(doc["config"])
        exists = node in doc["nodes"]
        if op != "add" and not exists:
            return NoSuchNode()
        in_service = removed = 0
        if op in ("remove", "disable"):
            in_service = sum(1 for other in doc["nodes"] if _in_service(doc, other))
            removed = 1 if _in_service(doc, node) else 0
            if op == "disable" and node in doc["disabled"]:
                return _outcome(False, doc)
            if removed * 2 > in_service and not force:
                return Refused(in_service, removed)
        extra: list[dict[str, Any]] = []
        noted = [(op, node, value)]
        if op == "add":
            noted = _add(doc, node, value, exists, operation.zone)
            if not noted:
                return _outcome(False, doc)
        elif op == "remove":
            for part in ("nodes", "order", "disabled", "down"):
                doc[part].pop(node, None)
            _set_zone(doc, node, "")
            extra = [delete(key) for _, _, key in read_votes(read, node)]
        elif op == "disable":
            doc["disabled"][node] = value
        elif doc["disabled"].pop(node, None) is None:
            return _outcome(False, doc)
        at = (doc["epoch"], doc["version"])
        _bump(doc)
        stamp = operation.stamp
        if stamp is not None and at == (stamp.epoch, stamp.version):
            doc["digest"] = stamp.digest  # committed with the change, or not at all
        extra.append(_kept(keys, read, doc, now, *noted))
        if (yield from _commit([compare_mod(keys.ring, read.mod)],
                               [put(keys.ring, _encode(doc)), *extra])):
            return _outcome(True, doc, in_service=in_service, removed=removed)
    raise _contended(keys)


def _add(doc: dict[str, Any], node: str, value: str, exists: bool,
         zone: str | None) -> list[tuple[str, str, str]]:
    """Add or reweigh ``node`` in ``doc``, and set its zone (``zone``: ''
    clears it; None keeps an existing node's and gives a new node none);
    the changes made, for the history (none: nothing to change)."""
    noted: list[tuple[str, str, str]] = []
    if doc["nodes"].get(node) != value:
        if not exists:  # a new node goes to the end of the add order
            doc["seq"] = doc.get("seq", 0) + 1
            doc["order"][node] = doc["seq"]
        doc["nodes"][node] = value
        noted.append(("add", node, value))
    wanted = zone if zone is not None else (None if exists else "")
    if wanted is not None and doc.get("zones", {}).get(node, "") != wanted:
        _set_zone(doc, node, wanted)
        if exists or wanted:  # a zone a removed node left behind goes without a word
            noted.append(("zone", node, wanted))
    return noted


def _set_zone(doc: dict[str, Any], node: str, zone: str) -> None:
    """Give ``node`` its ``zone`` in ``doc`` ('' for none); ``zones`` is
    dropped from the document when no node has one."""
    zones = doc.setdefault("zones", {})
    if zone:
        zones[node] = zone
    else:
        zones.pop(node, None)
    if not zones:
        del doc["zones"]


def read_votes(read: _Read, node: str) -> list[tuple[list[Any] | None, str, str]]:
    """The votes read on ``node``: (vote or None, raw, key)."""
    return list(read.votes.get(node, {}).values())


def vote(keys: RingKeys, operation: Vote, now: int) -> Ops[Outcome | NoRing]:
    reporter, ttl, quorum = operation.reporter, operation.ttl_ms, operation.quorum
    me = reporter.encode("utf-8", "surrogateescape").hex()
    lease: str | None = None
    for _ in range(ATTEMPTS):
        read = yield from _read(keys, votes=True, history=True)
        problem = read.problem()
        if problem is not None:
            return problem
        doc = read.doc
        assert doc is not None
        skipped: list[tuple[str, str, str]] = []
        puts: list[dict[str, Any]] = []
        changes: list[tuple[str, str, str]] = []
        changed = False
        wanted = [(node, down, reason) for node, (down, reason) in operation.votes.items()
                  if node in doc["nodes"]]
        if wanted and lease is None:
            grant = yield Request("/v3/lease/grant", {"TTL": str(max(1, math.ceil(ttl / 1000)))})
            lease = str(grant["ID"])
        for node, down, reason in wanted:
            record: dict[str, list[Any]] = {}
            for who, (held, raw, _key) in read.votes.get(node, {}).items():
                if held is None:
                    if who != me:
                        skipped.append(("votes", node, raw))
                    continue
                record[who] = held
            record[me] = [1 if down else 0, now, reason]
            puts.append(put(keys.vote(reporter, node), json.dumps(record[me]), lease))
            changed = _settle(doc, node, record, now, ttl, quorum, changes) or changed
        if changed:
            _bump(doc)
            puts += [put(keys.ring, _encode(doc)), _kept(keys, read, doc, now, *changes)]
        if not puts:
            return _outcome(False, doc, tuple(skipped))
        if (yield from _commit(_unchanged_since(keys, read), puts)):
            return _outcome(changed, doc, tuple(skipped))
    raise _contended(keys)


def sweep(keys: RingKeys, operation: Sweep, now: int) -> Ops[Outcome | NoRing]:
    ttl, quorum, gone = operation.ttl_ms, operation.quorum, operation.withdraw
    gone_hex = gone.encode("utf-8", "surrogateescape").hex() if gone else None
    for _ in range(ATTEMPTS):
        read = yield from _read(keys, votes=True, history=True)
        problem = read.problem()
        if problem is not None:
            return problem
        doc = read.doc
        assert doc is not None
        skipped: list[tuple[str, str, str]] = []
        ops: list[dict[str, Any]] = []
        changes: list[tuple[str, str, str]] = []
        changed = False
        for node, held in read.votes.items():
            if node not in doc["nodes"]:
                ops += [delete(key) for _, _, key in held.values()]
        for node in [node for node in doc["down"] if node not in doc["nodes"]]:
            del doc["down"][node]
            changes.append(("up", node, ""))
            changed = True
        for node in doc["nodes"]:
            held = read.votes.get(node, {})
            if not held and node not in doc["down"]:
                continue
            record: dict[str, list[Any]] = {}
            for who, (vote_, raw, key) in held.items():
                if who == gone_hex:
                    ops.append(delete(key))
                elif vote_ is None:
                    skipped.append(("votes", node, raw))
                else:
                    record[who] = vote_
            changed = _settle(doc, node, record, now, ttl, quorum, changes) or changed
        if changed:
            _bump(doc)
            ops += [put(keys.ring, _encode(doc)), _kept(keys, read, doc, now, *changes)]
        if not ops:
            return _outcome(False, doc, tuple(skipped))
        if (yield from _commit(_unchanged_since(keys, read), ops)):
            return _outcome(changed, doc, tuple(skipped))
    raise _contended(keys)


def history(keys: RingKeys, operation: History, now: int) -> Ops[tuple[Change, ...] | NoRing]:
    read = yield from _read(keys, history=True)
    problem = read.problem()
    if problem is not None:
        return problem
    return tuple(change for change in map(read_change, read.history) if change is not None)


def _unchanged_since(keys: RingKeys, read: _Read) -> list[dict[str, Any]]:
    """Compares: the ring and every vote are as read (no vote put since)."""
    return [compare_mod(keys.ring, read.mod),
            {"key": compare_mod(keys.votes, 0)["key"], "range_end": prefix_end(keys.votes),
             "target": "MOD", "result": "LESS", "mod_revision": str(read.revision + 1)}]


def _contended(keys: RingKeys) -> EtcdUnavailable:
    return EtcdUnavailable(f"{keys.ring}: {ATTEMPTS} transactions in a row lost the race to "
                           "other writers")


_OPERATIONS: dict[type[Operation[Any]], Callable[[RingKeys, Any, int], Ops[Any]]] = {
    ReadRing: read_ring, ReadConfig: read_config, ReadHead: read_head, Stamp: stamp,
    Reepoch: reepoch, Seed: seed, Write: write, Vote: vote, Sweep: sweep, History: history,
}


def perform(keys: RingKeys, operation: Operation[T], now: int) -> Ops[T]:
    """The etcd requests of ``operation``; returns its reply, the record
    the contract names.  ``now`` is the wall clock in ms."""
    return cast("Ops[T]", _OPERATIONS[type(operation)](keys, operation, now))
