"""The migration between two rings: the moving keys, their batches, and
the route that stays right while they move.

Reads stay right because the data of a key is copied, never moved: until
its batch is marked done, ``route`` answers the old owner, which still
holds the data; after, the new owner, which now holds it too.  The old
copies are deleted only once the migration is committed (and no read that
started before is still in flight), so a read never meets a missing key.

Any two routers of one family migrate: two ``ConsistentHashRouter`` of
one layout and hash, two ``MaglevRouter`` of one table size (both list the
arcs that change owner, ``diff``), two ``JumpRouter`` or two
``RendezvousRouter`` (any layouts: they have no arcs, so the moving keys
are found by routing the given keys in both, in C batches).

A node that joins as *warming* owns its arcs in the target ring but serves
nothing until every key moving to it is done: until then ``route`` keeps
answering the keys' old owners, so the node starts serving with its data
complete rather than key by key.

One lock guards the state; ``route`` takes it only to read a set, so
readers in many threads and one mover proceed together.
"""
from __future__ import annotations

import collections
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from chash._chash import (
    ConsistentHashRouter,
    JumpRouter,
    MaglevRouter,
    Move,
    RendezvousRouter,
    _moving_keys,
)
from chash.migration import state as _state
from chash.routers import Router

Key = str | bytes
#: One key to move: (key, source node, target node).
Triple = tuple[Key, str, str]


#: What a migration asks of its two routers (``chash.routers.Router``; the
#: old name, kept): a ``ConsistentHashRouter`` (any layout), a
#: ``MaglevRouter``, a ``JumpRouter`` or a ``RendezvousRouter``, both of
#: one family.  Those with arcs also have ``diff(other)``.
Ring = Router


#: The router families a migration knows, and which of them have arcs.
_FAMILIES: tuple[type, ...] = (ConsistentHashRouter, MaglevRouter, JumpRouter, RendezvousRouter)
_WITHOUT_ARCS: tuple[type, ...] = (JumpRouter, RendezvousRouter)


def _family(router: object) -> type:
    """The family of a router: the chash type it is an instance of, else its own type."""
    for family in _FAMILIES:
        if isinstance(router, family):
            return family
    return type(router)


def _arcs(old: Router, new: Router) -> list[Move] | None:
    """``old.diff(new)``, or None for routers that have no arcs."""
    family = _family(old)
    if family is not _family(new):
        raise TypeError(f"Migration needs two routers of one family, not {type(old).__name__} "
                        f"and {type(new).__name__}: the keys of one cannot be compared arc by arc "
                        "with the other's; route them with both (get_target_nodes) instead")
    diff = getattr(old, "diff", None)
    if family in _WITHOUT_ARCS or diff is None:
        return None
    moves: list[Move] = diff(new)
    return moves


R = TypeVar("R", bound=Router)


class Progress(NamedTuple):
    """How far a migration is: keys done of the moving keys known (total
    is None while keys are still being listed arc by arc)."""

    done: int
    total: int | None


class Migration(Generic[R]):
    """Moves the keys whose owner differs between ``old`` and ``new``.

    ``old`` and ``new`` are two routers of one family (TypeError for two
    families).  ``keys``: every key the store holds (any iterable of str or
    bytes), of which the moving ones are found by routing them in both
    rings.  Without it, :meth:`keys_in` lists the keys of each arc of
    ``old.diff(new)`` (the ``keys_in`` argument, or an override in a
    subclass), for stores that can scan by hash range; ``JumpRouter`` and
    ``RendezvousRouter`` have no arcs, so they need the keys.  ``batch_size`` bounds each batch;
    ``warming`` names nodes of ``new`` that serve nothing until every key
    moving to them is done.  The two routers are used as they are, not
    copied (a copy of a big ring costs seconds): they must not change while
    the migration runs, and ``batches()`` and ``commit()`` raise
    RuntimeError if either did.
    """

    def __init__(self, old: R, new: R,
                 keys: Iterable[Key] | None = None, *, batch_size: int = 200,
                 keys_in: Callable[[Move], Iterable[Key]] | None = None,
                 warming: Iterable[str] = ()) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, not {batch_size!r}")
        arcs = _arcs(old, new)
        if keys is None and arcs is None:
            raise ValueError(f"Migration of two {type(old).__name__}s needs the keys: they have "
                             "no arcs for keys_in(move) to list")
        if keys is None and keys_in is None and type(self).keys_in is Migration.keys_in:
            raise ValueError("Migration needs the keys, or a keys_in(move) hook listing each arc's")
        self._old = old
        self._new = new
        self._moves = arcs or []
        self._prints = (old.fingerprint(), new.fingerprint())
        self._batch_size = batch_size
        self._keys_in = keys_in
        self._warming = frozenset(warming)
        absent = sorted(n for n in self._warming if n not in self._new)
        if absent:
            raise ValueError(f"warming nodes are not in the new ring: {absent}")
        self._lock = threading.Lock()
        self._done: set[Key] = set()
        self._known: dict[Key, str] = {}        # moving key -> its target
        self._remaining: collections.Counter[str] = collections.Counter()
        self._committed = False
        self._given = keys is not None        # the keys were given, not listed per arc
        self._listed = self._given            # every moving key is known
        self._moving: list[Triple] = []
        if keys is not None:
            self._moving = self._route_both(list(dict.fromkeys(keys)))
            for key, _source, target in self._moving:
                self._known[key] = target
                self._remaining[target] += 1

    # ------------------------------------------------------------------
    # What moves

    @property
    def old(self) -> R:
        """The ring the data is moving from."""
        return self._old

    @property
    def new(self) -> R:
        """The ring the data is moving to."""
        return self._new

    @property
    def moves(self) -> list[Move]:
        """The arcs that change owner, ``old.diff(new)`` ([] for routers
        without arcs: ``JumpRouter``, ``RendezvousRouter``)."""
        return list(self._moves)

    @property
    def warming(self) -> frozenset[str]:
        """The nodes that serve nothing until the keys moving to them are done."""
        return self._warming

    def keys_in(self, move: Move) -> Iterable[Key]:
        """The store's keys whose hash lies in the arc ``move`` (the
        ``keys_in`` argument's answer; override it in a subclass instead).
        Keys that turn out not to move are skipped."""
        if self._keys_in is None:
            raise NotImplementedError("Migration was given no keys and no keys_in hook")
        return self._keys_in(move)

    def _route_both(self, keys: list[Key]) -> list[Triple]:
        """The moving ones of keys: each routed in both, one batch a router,
        and compared in C."""
        if not keys:
            return []
        return _moving_keys(self._old, self._new, keys)

    def _unchanged(self) -> None:
        """RuntimeError when either ring changed since the migration began."""
        if (self._old.fingerprint(), self._new.fingerprint()) != self._prints:
            raise RuntimeError("a ring of this migration changed while it ran: start a new one")

    def _candidates(self) -> Iterator[Triple]:
        """Every moving key, in ring order of its arc for keys_in."""
        self._unchanged()
        if self._given:
            yield from self._moving
            return
        for move in self._moves:
            chunk: list[Key] = []
            for key in self.keys_in(move):
                chunk.append(key)
                if len(chunk) >= self._batch_size:
                    yield from self._route_both(chunk)
                    chunk = []
            yield from self._route_both(chunk)
        with self._lock:
            self._listed = True

    def batches(self) -> Iterator[list[Triple]]:
        """Lists of at most ``batch_size`` ``(key, source, target)`` not yet
        done: copy each key from source to target, then :meth:`mark_done`
        the batch.  Calling it again hands out what is still not done."""
        batch: list[Triple] = []
        for key, source, target in self._candidates():
            with self._lock:
                if key in self._done:
                    continue
                if key not in self._known:
                    self._known[key] = target
                    self._remaining[target] += 1
            batch.append((key, source, target))
            if len(batch) >= self._batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def mark_done(self, batch: Iterable[Triple]) -> None:
        """Records the keys of ``batch`` as copied to their targets: from now
        on :meth:`route` answers their new owner.  ValueError (and nothing
        recorded) for a key that is not a moving key handed out."""
        keys = [item[0] for item in batch]
        with self._lock:
            unknown = [k for k in keys if k not in self._known]
            if unknown:
                raise ValueError(f"not moving keys of this migration: {unknown[:5]!r}")
            for key in keys:
                if key not in self._done:
                    self._done.add(key)
                    self._remaining[self._known[key]] -= 1

    # ------------------------------------------------------------------
    # Reads

    def _warm(self, node: str) -> bool:
        return node not in self._warming or (self._listed and self._remaining[node] == 0)

    def route(self, key: Key) -> str | None:
        """The node holding ``key``'s data now: its old owner until its
        batch is done (or, for a warming target, until every key moving to
        that node is), its new owner after; an unchanged key's owner; plain
        ``new`` once committed.  None when the rings are empty."""
        target = self._new.get_target_node(key)
        with self._lock:
            if self._committed:
                return target
            source = self._old.get_target_node(key)
            if source == target or source is None:
                return target
            if key in self._done and target is not None and self._warm(target):
                return target
            return source

    @property
    def progress(self) -> Progress:
        """``Progress(done, total)`` of the moving keys."""
        with self._lock:
            return Progress(len(self._done), len(self._known) if self._listed else None)

    @property
    def committed(self) -> bool:
        """True once :meth:`commit` has run."""
        return self._committed

    def commit(self, *, force: bool = False) -> None:
        """Ends the migration: :meth:`route` is plain ``new.get_target_node``
        from now on.  RuntimeError while moving keys are not done (or not
        yet all listed), unless ``force``."""
        self._unchanged()
        with self._lock:
            if not force:
                left = sum(self._remaining.values())
                if not self._listed or left:
                    what = f"{left} moving keys are" if self._listed else "the keys are"
                    raise RuntimeError(f"cannot commit: {what} not all moved yet")
            self._committed = True

    # ------------------------------------------------------------------
    # Saving and resuming

    def state(self) -> dict[str, Any]:
        """The migration's state as a JSON-ready dict (:meth:`resume`)."""
        with self._lock:
            return _state.dump(*self._prints, list(self._done), self._committed)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes :meth:`state` to ``path`` as JSON, replacing it whole."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(self.state()), encoding="utf-8")
        os.replace(tmp, target)

    @classmethod
    def resume(cls, old: R, new: R,
               saved: dict[str, Any] | str | os.PathLike[str],
               keys: Iterable[Key] | None = None, *, batch_size: int = 200,
               keys_in: Callable[[Move], Iterable[Key]] | None = None,
               warming: Iterable[str] = ()) -> Migration[R]:
        """A migration picking up a saved state (a dict or a JSON file) of
        the same two rings; ValueError when it was saved for others."""
        migration = cls(old, new, keys, batch_size=batch_size, keys_in=keys_in,
                        warming=warming)
        data = saved if isinstance(saved, dict) else json.loads(
            Path(saved).read_text(encoding="utf-8"))
        done, committed = _state.load(data, *migration._prints)
        with migration._lock:
            for key in done:
                migration._done.add(key)
                target = migration._known.get(key)
                if target is not None:
                    migration._remaining[target] -= 1
            if migration._listed:
                migration._done.intersection_update(migration._known)
            migration._committed = committed
        return migration
