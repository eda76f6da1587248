"""An ``AnchorRouter``'s mapping in a shared ring, without I/O.

An anchor router's mapping depends on the order in which nodes left and
came back, not only on which nodes the ring holds, so instances that
apply the same ring from different histories (one started later, one
missed changes while cut off) could route differently.  The ring's
version therefore carries the mapping itself: the digest every instance
stamps for a version (``Stamp``, first one wins, see
``chash.membership.protocol``) is, for an anchor ring, a *record*: the
router's fingerprint, its ``state()`` (hash4j's ``getState()``) and the
node of every bucket id.  An instance applying a version whose record is
stamped adopts it whole (``AnchorRouter.__setstate__``); one applying a
version nobody stamped yet moves its own router there (``converge``:
removals, then adds in the ring's add order, so a removal moves only the
removed node's keys and a re-add of the last removed node moves them
back) and stamps the result; one whose stamp lost the race adopts the
winner's.  So at every version every instance routes every key alike.
An operator's write computes the record of the version it makes
(``advance``: the stamped record moved by its one change) and the store
stamps it with the change, so such a version is never read unstamped.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from chash._chash import AnchorRouter

if TYPE_CHECKING:
    from chash._chash import HashName

__all__ = ["RECORD_PREFIX", "advance", "converge", "read_record", "record"]

#: What starts an anchor record (a plain fingerprint is 16 hex digits).
RECORD_PREFIX = "anchor1 "


def nodes_by_bucket(router: AnchorRouter) -> list[str | None]:
    """The node of every bucket id below the state's first integer (None at
    the removed ones): what ``AnchorRouter.from_state`` takes."""
    high = int.from_bytes(router.state()[:4], "little")
    nodes: list[str | None] = [None] * high
    for node in router.nodes:
        nodes[router.bucket_of(node)] = node
    return nodes


def record(router: AnchorRouter) -> str:
    """The router's record: ``anchor1 <fingerprint> <state, base64>
    <nodes by bucket id, JSON>``; equal for two routers exactly when they
    route alike."""
    state = base64.b64encode(router.state()).decode("ascii")
    nodes = json.dumps(nodes_by_bucket(router), separators=(",", ":"), ensure_ascii=False)
    return f"{RECORD_PREFIX}{router.fingerprint()} {state} {nodes}"


def read_record(text: str | None,
                wanted: Mapping[str, float]) -> tuple[bytes, list[str | None]] | None:
    """A record's state and nodes by bucket id, if ``text`` is a record
    whose live nodes are exactly ``wanted``'s (less the entries the router
    refuses, which no record holds); else None (no record, one of another
    router, or a damaged one)."""
    if not text or not text.startswith(RECORD_PREFIX):
        return None
    parts = text[len(RECORD_PREFIX):].split(" ", 2)
    if len(parts) != 3:
        return None
    try:
        state = base64.b64decode(parts[1], validate=True)
        nodes = json.loads(parts[2])
    except ValueError:
        return None
    if not isinstance(nodes, list) or not all(n is None or isinstance(n, str) for n in nodes):
        return None
    live = [n for n in nodes if n is not None]
    if len(live) != len(wanted) or set(live) != set(wanted):
        return None
    return state, nodes


def converge(router: AnchorRouter, wanted: Mapping[str, float],
             ) -> tuple[list[str], list[str], list[tuple[str, float, Exception]]]:
    """Move ``router`` to hold the nodes of ``wanted`` (in the ring's add
    order): first every node it holds that is not wanted is removed, the
    highest bucket id first, then the wanted nodes it lacks are added in
    order.  The same on every instance from the same router.  Returns
    (added, removed, rejected): the entries the router refused (a weight
    other than 1), each with its error, refused alike everywhere."""
    removed = sorted((n for n in router.nodes if n not in wanted), key=router.bucket_of,
                     reverse=True)
    for node in removed:
        router.remove_service_node(node)
    added: list[str] = []
    rejected: list[tuple[str, float, Exception]] = []
    for node, weight in wanted.items():
        if node in router:
            continue
        try:
            router.add_service_node(node, weight)
        except (TypeError, ValueError, OverflowError, MemoryError) as exc:
            rejected.append((node, weight, exc))
            continue
        added.append(node)
    return added, removed, rejected


def advance(text: str, hash: HashName, held: Mapping[str, float],
            wanted: Mapping[str, float]) -> str | None:
    """The record a router holding the record ``text`` (whose nodes are
    ``held``'s) has once moved to ``wanted`` (``converge``): what an
    instance applying the next version from ``text`` computes, so what a
    writer stamps with its change.  The router is rebuilt from ``text``
    (with ``hash``), never taken from an instance.  None if ``text`` is no
    such record."""
    found = read_record(text, held)
    if found is None:
        return None
    try:
        router = AnchorRouter.from_state(found[0], found[1], hash=hash)
    except ValueError:
        return None
    converge(router, wanted)
    return record(router)
