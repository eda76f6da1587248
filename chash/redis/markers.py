"""The bookkeeping of a resharding, no I/O and no threads: where each key's
data is while it moves, which keys are in flight, who writes what.

:class:`chash.redis.reshard.Resharding` holds one :class:`Markers` under its
condition variable and waits on its predicates; every decision is here:

* a key (its hash part) *in flight* admits no writer; a batch is copied
  only once no writer is active on its keys (:meth:`Markers.idle`);
* a key copied to a shard still warming is written to both copies, one
  writer at a time (:meth:`Markers.dual`), and no batch is marked done
  while such a write is under way (:meth:`Markers.may_mark_done`);
* keys written while the keys are listed are listed too (``touched``); a
  new key of a moving tag moves with the tag; a moving key first written
  after the listing goes to its new shard (``fresh``);
* commands begun before the commit are counted, so the old copies are
  deleted only once they are done (:meth:`Markers.quiet`).
"""
from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chash.redis.core import hash_part

if TYPE_CHECKING:
    from chash._chash import ConsistentHashRouter
    from chash.migration.core import Migration

__all__ = ["Markers", "Ticket"]


class Ticket:
    """One command's pass through the markers."""

    __slots__ = ("active", "dual", "early", "parts")

    def __init__(self, parts: list[bytes], early: bool, active: bool, dual: list[int]) -> None:
        self.parts = parts
        self.early = early      # begun before the commit
        self.active = active    # counted as a writer of its parts
        self.dual = dual        # indexes of its keys also written to their warming new shard


class Markers:
    """The state of one resharding between two rings (hash tag ``tag``)."""

    def __init__(self, old_ring: ConsistentHashRouter, new_ring: ConsistentHashRouter,
                 tag: bytes | None) -> None:
        self.old_ring, self.new_ring, self.tag = old_ring, new_ring, tag
        self.migration: Migration[ConsistentHashRouter] | None = None   # once listed
        self.parts: dict[bytes, list[bytes]] = {}      # moving part -> its keys
        self._listed: set[bytes] = set()               # the keys of parts
        self._touched: set[bytes] = set()              # moving keys written while listing
        self._in_flight: set[bytes] = set()
        self._active: collections.Counter[bytes] = collections.Counter()
        self.copied: set[bytes] = set()
        self._fresh: set[bytes] = set()                # moving parts first written after listing
        self._dual_writers = 0
        self._draining = False
        self.committed = False
        self._before_commit = 0

    # -- where the data is ---------------------------------------------------------

    def parts_of(self, keys: Sequence[bytes]) -> list[bytes]:
        return [hash_part(k, self.tag) for k in keys]

    def moving(self, part: bytes) -> bool:
        return self.old_ring.get_target_node(part) != self.new_ring.get_target_node(part)

    def locate(self, part: bytes) -> str | None:
        """The shard holding ``part``'s data now."""
        if self.committed or part in self._fresh:
            return self.new_ring.get_target_node(part)
        if self.migration is None:
            return self.old_ring.get_target_node(part)
        return self.migration.route(part)

    def dual(self, part: bytes) -> bool:
        """Copied, but its new shard is still warming: writes go to both."""
        return (part in self.copied and self.migration is not None
                and self.migration.route(part) != self.new_ring.get_target_node(part))

    # -- the clients' commands -----------------------------------------------------

    def arrive(self) -> bool:
        """A command begins; True when before the commit (then counted)."""
        early = not self.committed
        if early:
            self._before_commit += 1
        return early

    def may_enter(self, parts: Sequence[bytes]) -> bool:
        """Whether a write of ``parts`` may go now."""
        if self.committed:
            return True
        for part in parts:
            if part in self._in_flight:
                return False
            if self.dual(part) and (self._active[part] or self._draining):
                return False
        return True

    def enter(self, keys: Sequence[bytes], parts: list[bytes], write: bool, early: bool) -> Ticket:
        """Registers a command that :meth:`may_enter` let go."""
        if not write or self.committed:
            return Ticket(parts, early, False, [])
        dual = [i for i, part in enumerate(parts) if self.dual(part)]
        for key, part in zip(keys, parts, strict=True):
            self._active[part] += 1
            if self.migration is None:
                if self.moving(part):
                    self._touched.add(key)
            elif part in self.parts:
                if key not in self._listed:    # a new key of a moving tag: it moves with it
                    self._listed.add(key)
                    self.parts[part].append(key)
            elif self.moving(part):
                self._fresh.add(part)
        if dual:
            self._dual_writers += 1
        return Ticket(parts, early, True, dual)

    def leave(self, ticket: Ticket) -> None:
        """The command of ``ticket`` is done."""
        if ticket.active:
            for part in ticket.parts:
                self._active[part] -= 1
                if self._active[part] <= 0:
                    del self._active[part]
        if ticket.dual:
            self._dual_writers -= 1
        if ticket.early:
            self._before_commit -= 1

    # -- the mover -----------------------------------------------------------------

    def keep_moving(self, keys: Sequence[bytes], found: dict[bytes, list[bytes]]) -> None:
        """Adds the moving ones of ``keys`` to ``found`` (part -> keys)."""
        if not keys:
            return
        parts = self.parts_of(keys)
        olds = self.old_ring.get_target_nodes(parts)
        news = self.new_ring.get_target_nodes(parts)
        for key, part, a, b in zip(keys, parts, olds, news, strict=True):
            if a != b:
                found.setdefault(part, []).append(key)

    def listed(self, found: dict[bytes, list[bytes]]) -> list[bytes]:
        """The listing is over: ``found`` and the keys touched meanwhile are
        the moving keys; their parts, sorted, for the migration."""
        self.keep_moving(sorted(self._touched), found)
        for keys in found.values():
            keys[:] = list(dict.fromkeys(keys))
        self.parts = found
        self._listed = {key for keys in found.values() for key in keys}
        self._touched.clear()
        return sorted(found)

    def start_batch(self, parts: Sequence[bytes]) -> None:
        """Marks a batch's parts in flight: no writer is let in."""
        self._in_flight.update(parts)

    def idle(self, parts: Sequence[bytes]) -> bool:
        """No write of ``parts`` under way (the copy may start)."""
        return not any(self._active[p] for p in parts)

    def may_mark_done(self) -> bool:
        """No write to two copies under way; meanwhile none is let in."""
        self._draining = True
        return self._dual_writers == 0

    def copied_batch(self, parts: Sequence[bytes]) -> None:
        """A batch's parts are copied (and marked done in the migration)."""
        self.copied.update(parts)

    def end_batch(self, parts: Sequence[bytes]) -> None:
        """A batch's parts are no longer in flight, copied or not."""
        self._draining = False
        self._in_flight.difference_update(parts)

    def no_dual_writers(self) -> bool:
        return self._dual_writers == 0

    def quiet(self) -> bool:
        """Every command begun before the commit is done."""
        return self._before_commit == 0
