"""The shared ring's operations on etcd, without I/O.

The protocol (``chash.membership.protocol``) asks a store for eight
operations (``SNAPSHOT``, ``HEAD``, ``STAMP``, ``REEPOCH``, ``SEED``,
``WRITE``, ``VOTE``, ``SWEEP``) and parses their replies, whose shapes
``chash.membership.redis.scripts`` documents.  Redis runs each as a Lua
script; etcd has no scripts, so each is written here as a generator that
yields the etcd requests it needs (``chash.membership.etcd.wire``),
receives their replies and returns the operation's reply.  Every change is
one transaction that compares the revisions it read: the ring key's
``mod_revision`` and, for health votes, that no vote changed since, so two
writers never interleave; a transaction that lost the race reads again.

Keys under ``{prefix}/{name}/``:

``ring``  JSON ``{epoch, version, config, seq, digest?, nodes: {node:
          weight}, order: {node: add sequence}, disabled: {node: reason},
          down: {node: {r, n, l, t, s?}}}``: everything the ring holds, so a
          change is a put of one key and the watch announces it;
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
from typing import Any

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
from chash.membership.protocol import Call
from chash.membership.state import CHANGED, DAMAGED, MISSING, NO_SUCH_NODE, OTHER_CONFIG, REFUSED, UNCHANGED

__all__ = ["RingKeys", "perform"]

#: An etcd operation: yields requests, receives replies, returns a T.
Ops = Generator[Request, Any, Any]

#: How often a transaction that lost a race is tried again.
ATTEMPTS = 20


class RingKeys:
    """The keys of one ring."""

    def __init__(self, prefix: str, name: str) -> None:
        self.base = f"{prefix}/{name}/"
        self.ring = self.base + "ring"
        self.votes = self.base + "votes/"

    def vote(self, reporter: str, node: str) -> str:
        """The key of ``reporter``'s vote on ``node``."""
        return f"{self.votes}{reporter.encode('utf-8', 'surrogateescape').hex()}/{node}"


class _Read:
    """The ring (and its votes) as read at one revision."""

    def __init__(self, keys: RingKeys, reply: dict[str, Any]) -> None:
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
        if len(responses) > 1:
            for key, raw, _mod in kvs(responses[1].get("response_range", {})):
                reporter, _, node = key[len(keys.votes):].partition("/")
                self.votes.setdefault(node, {})[reporter] = (_vote(raw), raw, key)

    @property
    def missing(self) -> bool:
        return self.mod == 0

    def problem(self) -> list[Any] | None:
        """The reply for a missing or damaged ring, or None if it is sound."""
        if self.missing:
            return [MISSING]
        if self.damage is not None:
            return [DAMAGED, self.damage]
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
    return doc, None


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


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _flat(mapping: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in mapping.items():
        out += [key, _text(value)]
    return out


def _reply(status: int, doc: dict[str, Any], skipped: list[str] | None = None) -> list[Any]:
    return [status, doc["epoch"], doc["version"], skipped or []]


def _bump(doc: dict[str, Any]) -> None:
    doc.pop("digest", None)
    doc["version"] += 1


def _encode(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _read(keys: RingKeys, votes: bool = False) -> Generator[Request, Any, _Read]:
    """Read the ring (and every vote) at one revision."""
    ops: list[dict[str, Any]] = [{"request_range": range_(keys.ring).body}]
    if votes:
        ops.append({"request_range": range_(keys.votes, prefix=True).body})
    return _Read(keys, (yield txn([], ops)))


def _commit(compare: list[dict[str, Any]], success: list[dict[str, Any]]) -> Ops:
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
            quorum: str) -> bool:
    """Decide from the live votes whether ``node`` is down (as the Redis
    scripts' ``settle``); whether it went down or came back."""
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
        return True
    if current is not None and not out:
        del doc["down"][node]
        return True
    return False


def _in_service(doc: dict[str, Any], node: str) -> bool:
    return node not in doc["disabled"] and node not in doc["down"]


# -- the operations -----------------------------------------------------------

def snapshot(keys: RingKeys, args: tuple[str | int, ...], now: int) -> Ops:
    read = yield from _read(keys)
    problem = read.problem()
    if problem is not None:
        return problem
    doc = read.doc
    assert doc is not None
    return [1, doc["epoch"], doc["version"], doc["config"], _flat(doc["nodes"]),
            _flat(doc["disabled"]), _flat(doc["down"]), doc.get("digest"), 0,
            _flat(doc["order"])]


def head(keys: RingKeys, args: tuple[str | int, ...], now: int) -> Ops:
    read = yield from _read(keys)
    problem = read.problem()
    if problem is not None:
        return problem
    doc = read.doc
    assert doc is not None
    return [1, doc["epoch"], doc["version"], doc.get("digest")]


def stamp(keys: RingKeys, args: tuple[str | int, ...], now: int) -> Ops:
    epoch, version, digest = str(args[0]), int(args[1]), str(args[2])
    for _ in range(ATTEMPTS):
        read = yield from _read(keys)
        doc = read.doc
        if read.problem() is not None or doc is None or doc["epoch"] != epoch \
                or doc["version"] != version or doc.get("digest"):
            return 0
        doc["digest"] = digest
        if (yield from _commit([compare_mod(keys.ring, read.mod)],
                               [put(keys.ring, _encode(doc))])):
            return 1
    return 0  # others kept changing it: they stamp their own


def reepoch(keys: RingKeys, args: tuple[str | int, ...], now: int) -> Ops:
    seen_epoch, seen_version = str(args[1]), int(args[2])
    for _ in range(ATTEMPTS):
        read = yield from _read(keys)
        problem = read.problem()
        if problem is not None:
            return problem
        doc = read.doc
        assert doc is not None
        if doc["epoch"] != seen_epoch or doc["version"] != seen_version:
            return _reply(UNCHANGED, doc)
        doc["epoch"], doc["version"] = str(args[3]), int(args[4])
        doc.pop("digest", None)
        if (yield from _commit([compare_mod(keys.ring, read.mod)],
                               [put(keys.ring, _encode(doc))])):
            return _reply(CHANGED, doc)
    raise _contended(keys)


def seed(keys: RingKeys, args: tuple[str | int, ...], now: int) -> Ops:
    restore = str(args[4]) == "1"
    count = int(args[5])
    i = 6
    nodes = {str(args[i + 2 * k]): str(args[i + 2 * k + 1]) for k in range(count)}
    order = {node: k + 1 for k, node in enumerate(nodes)}
    i += 2 * count
    n_disabled = int(args[i])
    disabled = {str(args[i + 1 + 2 * k]): str(args[i + 2 + 2 * k]) for k in range(n_disabled)}
    i += 1 + 2 * n_disabled
    down: dict[str, Any] = {}
    for j in range(i, len(args) - 1, 2):
        try:
            verdict = json.loads(str(args[j + 1]))
        except ValueError:
            continue
        if isinstance(verdict, dict):
            down[str(args[j])] = {**verdict, "t": now, "s": 1}
    for _ in range(ATTEMPTS):
        read = yield from _read(keys)
        if read.problem() is None:
            assert read.doc is not None
            return _reply(UNCHANGED, read.doc)
        if read.damage is not None and not restore:
            return [DAMAGED, read.damage]
        doc = {"epoch": str(args[1]), "version": int(args[2]), "config": str(args[3]),
               "seq": count, "nodes": nodes, "order": order, "disabled": disabled,
               "down": down}
        guard = compare_absent(keys.ring) if read.missing else compare_mod(keys.ring, read.mod)
        if (yield from _commit([guard], [put(keys.ring, _encode(doc)),
                                         delete_prefix(keys.votes)])):
            return _reply(CHANGED, doc)
    raise _contended(keys)


def write(keys: RingKeys, args: tuple[str | int, ...], now: int) -> Ops:
    op, node, value, force, config = (str(args[1]), str(args[2]), str(args[3]),
                                      str(args[4]) == "1", str(args[5]))
    if op not in ("add", "remove", "disable", "enable"):
        raise ValueError(f"unknown operation {op}")
    for _ in range(ATTEMPTS):
        read = yield from _read(keys)
        problem = read.problem()
        if problem is not None:
            return problem
        doc = read.doc
        assert doc is not None
        if doc["config"] != config:
            return [OTHER_CONFIG, doc["config"]]
        exists = node in doc["nodes"]
        if op != "add" and not exists:
            return [NO_SUCH_NODE]
        in_service = removed = 0
        if op in ("remove", "disable"):
            in_service = sum(1 for other in doc["nodes"] if _in_service(doc, other))
            removed = 1 if _in_service(doc, node) else 0
            if op == "disable" and node in doc["disabled"]:
                return _reply(UNCHANGED, doc)
            if removed * 2 > in_service and not force:
                return [REFUSED, in_service, removed]
        extra: list[dict[str, Any]] = []
        if op == "add":
            if doc["nodes"].get(node) == value:
                return _reply(UNCHANGED, doc)
            if not exists:  # a new node goes to the end of the add order
                doc["seq"] = doc.get("seq", 0) + 1
                doc["order"][node] = doc["seq"]
            doc["nodes"][node] = value
        elif op == "remove":
            for part in ("nodes", "order", "disabled", "down"):
                doc[part].pop(node, None)
            extra = [delete(key) for _, _, key in read_votes(read, node)]
        elif op == "disable":
            doc["disabled"][node] = value
        elif doc["disabled"].pop(node, None) is None:
            return _reply(UNCHANGED, doc)
        _bump(doc)
        if (yield from _commit([compare_mod(keys.ring, read.mod)],
                               [put(keys.ring, _encode(doc)), *extra])):
            return [*_reply(CHANGED, doc), in_service, removed]
    raise _contended(keys)


def read_votes(read: _Read, node: str) -> list[tuple[list[Any] | None, str, str]]:
    """The votes read on ``node``: (vote or None, raw, key)."""
    return list(read.votes.get(node, {}).values())


def vote(keys: RingKeys, args: tuple[str | int, ...], now: int) -> Ops:
    reporter, ttl, quorum = str(args[1]), int(args[2]), str(args[3])
    triples = [(str(args[i]), int(args[i + 1]), str(args[i + 2]))
               for i in range(4, len(args) - 2, 3)]
    me = reporter.encode("utf-8", "surrogateescape").hex()
    lease: str | None = None
    for _ in range(ATTEMPTS):
        read = yield from _read(keys, votes=True)
        problem = read.problem()
        if problem is not None:
            return problem
        doc = read.doc
        assert doc is not None
        skipped: list[str] = []
        puts: list[dict[str, Any]] = []
        changed = False
        wanted = [triple for triple in triples if triple[0] in doc["nodes"]]
        if wanted and lease is None:
            grant = yield Request("/v3/lease/grant", {"TTL": str(max(1, math.ceil(ttl / 1000)))})
            lease = str(grant["ID"])
        for node, down, reason in wanted:
            record: dict[str, list[Any]] = {}
            for who, (held, raw, _key) in read.votes.get(node, {}).items():
                if held is None:
                    if who != me:
                        skipped += ["votes", node, raw]
                    continue
                record[who] = held
            record[me] = [down, now, reason]
            puts.append(put(keys.vote(reporter, node), json.dumps(record[me]), lease))
            changed = _settle(doc, node, record, now, ttl, quorum) or changed
        if changed:
            _bump(doc)
            puts.append(put(keys.ring, _encode(doc)))
        if not puts:
            return _reply(UNCHANGED, doc, skipped)
        if (yield from _commit(_unchanged_since(keys, read), puts)):
            return _reply(CHANGED if changed else UNCHANGED, doc, skipped)
    raise _contended(keys)


def sweep(keys: RingKeys, args: tuple[str | int, ...], now: int) -> Ops:
    ttl, quorum, gone = int(args[1]), str(args[2]), str(args[3])
    gone_hex = gone.encode("utf-8", "surrogateescape").hex() if gone else None
    for _ in range(ATTEMPTS):
        read = yield from _read(keys, votes=True)
        problem = read.problem()
        if problem is not None:
            return problem
        doc = read.doc
        assert doc is not None
        skipped: list[str] = []
        ops: list[dict[str, Any]] = []
        changed = False
        for node, held in read.votes.items():
            if node not in doc["nodes"]:
                ops += [delete(key) for _, _, key in held.values()]
        for node in [node for node in doc["down"] if node not in doc["nodes"]]:
            del doc["down"][node]
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
                    skipped += ["votes", node, raw]
                else:
                    record[who] = vote_
            changed = _settle(doc, node, record, now, ttl, quorum) or changed
        if changed:
            _bump(doc)
            ops.append(put(keys.ring, _encode(doc)))
        if not ops:
            return _reply(UNCHANGED, doc, skipped)
        if (yield from _commit(_unchanged_since(keys, read), ops)):
            return _reply(CHANGED if changed else UNCHANGED, doc, skipped)
    raise _contended(keys)


def _unchanged_since(keys: RingKeys, read: _Read) -> list[dict[str, Any]]:
    """Compares: the ring and every vote are as read (no vote put since)."""
    return [compare_mod(keys.ring, read.mod),
            {"key": compare_mod(keys.votes, 0)["key"], "range_end": prefix_end(keys.votes),
             "target": "MOD", "result": "LESS", "mod_revision": str(read.revision + 1)}]


def _contended(keys: RingKeys) -> EtcdUnavailable:
    return EtcdUnavailable(f"{keys.ring}: {ATTEMPTS} transactions in a row lost the race to "
                           "other writers")


_OPERATIONS: dict[str, Callable[[RingKeys, tuple[str | int, ...], int], Ops]] = {
    "SNAPSHOT": snapshot, "HEAD": head, "STAMP": stamp, "REEPOCH": reepoch, "SEED": seed,
    "WRITE": write, "VOTE": vote, "SWEEP": sweep,
}


def perform(keys: RingKeys, call: Call, now: int) -> Ops:
    """The etcd requests of ``call``; returns its reply (as the Redis
    script of that name would give it).  ``now`` is the wall clock in ms."""
    return _OPERATIONS[call.script](keys, call.args, now)
