"""``reshard``: moving a ShardedRedis pool's keys to a new set of shards
while both clients keep serving.

The keys whose shard differs between the two rings (``Migration`` over
``old.router`` and ``new.router``, whose arcs are ``old.router.diff``) are
copied in batches with their values and TTLs (``DUMP``, ``PTTL``,
``RESTORE ... REPLACE``, pipelined per shard).  While they move, both
clients route every key through the migration: to its old shard until its
batch is copied, to its new one after.

* **In-flight markers.**  Before a batch is copied its keys are marked in
  flight: a write to one of them waits until the batch is done (then goes
  to the new shard), and the copy starts only once the writes already
  under way on them have finished.  So no write lands on the old copy after
  it was read, and none is lost; reads of a key in flight go to the old
  shard, which still holds its latest value.
* **Warm-up.**  A shard that only the new ring has serves nothing until every
  key moving to it is copied (``Migration(warming=...)``): its keys are read
  from their old shards meanwhile, and a write to a key already copied goes
  to both copies, one writer at a time, so that the new shard starts
  serving with every write.
* **New keys.**  Keys written while the keys are being listed are listed
  too; a moving key first written after that goes straight to its new
  shard, and is read there.
* **Progress, stop, resume.**  ``progress`` counts the moving keys (hash
  tags: the moving tags) done; ``stop()`` ends ``run()`` after the batch
  under way, the clients still routing through the migration; ``run()``
  again, or a new ``Resharding(..., saved=state())``, goes on.
* **Commit.**  When every batch is done, both clients route by the new ring
  (the old client to the new shards), and once the commands that began
  before are done, the old copies are deleted.

The markers live in this process: both clients must be the ones given
here (other processes writing the same keys meanwhile are not seen).
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from chash.migration.core import Migration, Progress
from chash.migration.state import load as load_state
from chash.redis.client import ShardedRedis
from chash.redis.commands import READS, SPLIT, command_keys, command_name, sub_command
from chash.redis.core import Part
from chash.redis.face import client_kwargs
from chash.redis.markers import Markers, Ticket

if TYPE_CHECKING:
    import redis

    from chash._chash import ConsistentHashRouter

__all__ = ["Resharding", "reshard"]

#: Keys per pipelined SCAN, DUMP and RESTORE round.
SCAN_COUNT = 1000


class Resharding:
    """One move of keys from ``old``'s shards to ``new``'s (both
    :class:`chash.redis.ShardedRedis`, the same ``hash_tag``); made, it
    routes both clients through it.  ``run()`` moves the keys; see the
    module's docs for what holds meanwhile."""

    def __init__(self, old: ShardedRedis, new: ShardedRedis, *, batch_size: int = 200, warm: bool = True,
                 saved: dict[str, Any] | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, not {batch_size!r}")
        for side, client in (("old", old), ("new", new)):
            if not isinstance(client, ShardedRedis):
                raise TypeError(f"reshard moves keys between two chash.redis.ShardedRedis; {side} is "
                                f"{type(client).__name__}")
            if client._hook is not None:
                raise RuntimeError(f"the {side} client is already in a resharding")
            if client.ejected:
                raise RuntimeError(f"the {side} client has ejected shards ({client.ejected}): "
                                   "reshard a pool whose shards are all in the ring")
        if old is new:
            raise ValueError("old and new are the same client")
        if old.core.hash_tag != new.core.hash_tag:
            raise ValueError(f"old and new hash keys differently (hash_tag {old.core.hash_tag!r} "
                             f"and {new.core.hash_tag!r})")
        for name in set(old.shards) & set(new.shards):
            if old.core.shards[name].address != new.core.shards[name].address:
                raise ValueError(f"shard {name!r} is {old.core.shards[name].address} in old and "
                                 f"{new.core.shards[name].address} in new")
        self._old, self._new = old, new
        self._old_ring: ConsistentHashRouter = old.core.router
        self._new_ring: ConsistentHashRouter = new.core.router
        self._batch_size = batch_size
        self._warming = [n for n in new.shards if n not in old.shards] if warm else []
        self._saved = saved
        tag = old.core.hash_tag
        self._tag = None if tag is None else tag.encode("utf-8")
        self._cond = threading.Condition()
        self._marks = Markers(self._old_ring, self._new_ring, self._tag)
        self._stop = threading.Event()
        self._movers: dict[str, redis.Redis] = {}
        #: Keys copied (restored on their new shard) so far.
        self.copied = 0
        #: Old copies deleted after the commit.
        self.deleted = 0
        old._others = {n: c for n, c in new.clients.items() if n not in old.shards}
        new._others = {n: c for n, c in old.clients.items() if n not in new.shards}
        for client in (old, new):
            client.core.locate = self._marks.locate
            client._hook = self

    # -- what it is ----------------------------------------------------------------

    @property
    def progress(self) -> Progress:
        """Moving keys (hash parts) done, of those known (None while listing)."""
        migration = self._marks.migration
        if migration is None:
            return Progress(0, None)
        return migration.progress

    @property
    def committed(self) -> bool:
        """True once the new ring serves every key."""
        return self._marks.committed

    @property
    def warming(self) -> list[str]:
        """The new shards that serve nothing until their keys are copied."""
        return list(self._warming)

    def state(self) -> dict[str, Any]:
        """The migration's JSON state, for ``Resharding(..., saved=...)``."""
        migration = self._marks.migration
        if migration is None:
            raise RuntimeError("nothing to save: the keys are not listed yet")
        return migration.state()

    def stop(self) -> None:
        """Makes ``run()`` return after the batch under way."""
        self._stop.set()

    # -- routing the clients' commands -----------------------------------------------

    def _enter(self, keys: Sequence[bytes], write: bool) -> Ticket:
        """Waits until the markers let a command of ``keys`` go."""
        marks = self._marks
        parts = marks.parts_of(keys)
        with self._cond:
            early = marks.arrive()
            if write:
                self._cond.wait_for(functools.partial(marks.may_enter, parts))
            return marks.enter(keys, parts, write, early)

    def _leave(self, ticket: Ticket) -> None:
        with self._cond:
            self._marks.leave(ticket)
            self._cond.notify_all()

    def _guarded(self, face: ShardedRedis, keys: Sequence[Any], write: bool,
                 body: Callable[[Ticket], Any]) -> Any:
        ticket = self._enter([face.core.encode(k) for k in keys], write)
        try:
            return body(ticket)
        finally:
            self._leave(ticket)

    def command(self, face: ShardedRedis, args: Sequence[Any], options: dict[str, Any]) -> Any:
        """One command of either client, while the resharding runs (the
        clients call this; it is not for users)."""
        name = command_name(args)
        positions = command_keys(args)

        def body(ticket: Ticket) -> Any:
            answer = face._direct(args, options)
            if ticket.dual:
                self._copy_write(face, name, args, ticket, options)
            return answer
        return self._guarded(face, [args[i] for i in positions], name not in READS, body)

    def transaction(self, face: ShardedRedis, commands: Sequence[Sequence[Any]],
                    send: Callable[[str | None], list[Any]]) -> list[Any]:
        """A transaction of either client (its keys share one part), while
        the resharding runs: ``send(None)`` to where its data is,
        ``send(shard)`` to a shard."""
        keys = [args[i] for args in commands for i in command_keys(args)]

        def body(ticket: Ticket) -> list[Any]:
            answers = send(None)
            if ticket.dual:
                send(self._new_ring.get_target_node(ticket.parts[0]))
            return answers
        answers: list[Any] = self._guarded(face, keys, True, body)
        return answers

    def _copy_write(self, face: ShardedRedis, name: str, args: Sequence[Any], ticket: Ticket,
                    options: dict[str, Any]) -> None:
        """The same write on the new shards of its keys that are copied but warming."""
        targets: dict[str, list[int]] = {}
        for index in ticket.dual:
            target = self._new_ring.get_target_node(ticket.parts[index])
            assert target is not None
            targets.setdefault(target, []).append(index)
        split = name in SPLIT and len(ticket.parts) > 1
        for target, indexes in targets.items():
            sub = sub_command(args, indexes) if split else tuple(args)
            face._run(Part(target, sub, tuple(indexes)), options)

    # -- moving ---------------------------------------------------------------------

    def _mover(self, shard: str) -> redis.Redis:
        """A raw client of a shard (no decoding: DUMP's bytes stay bytes)."""
        client = self._movers.get(shard)
        if client is None:
            import redis

            face = self._old if shard in self._old.core.shards else self._new
            kwargs = {k: v for k, v in face.redis_kwargs.items() if k != "decode_responses"}
            client = redis.Redis(**client_kwargs(face.core.shards[shard], kwargs))
            self._movers[shard] = client
        return client

    def _list(self) -> None:
        """The moving keys of every old shard, and those written meanwhile."""
        marks = self._marks
        found: dict[bytes, list[bytes]] = {}
        for shard in self._old.shards:
            batch: list[bytes] = []
            for key in self._mover(shard).scan_iter(count=SCAN_COUNT):
                batch.append(key)
                if len(batch) >= SCAN_COUNT:
                    marks.keep_moving(batch, found)
                    batch = []
            marks.keep_moving(batch, found)
        with self._cond:
            parts = marks.listed(found)
            if self._saved is not None:
                marks.migration = Migration.resume(self._old_ring, self._new_ring, self._saved, parts,
                                                   batch_size=self._batch_size, warming=self._warming)
                done, _ = load_state(self._saved, self._old_ring.fingerprint(), self._new_ring.fingerprint())
                marks.copied_batch([p for p in done if isinstance(p, bytes) and p in found])
            else:
                marks.migration = Migration(self._old_ring, self._new_ring, parts,
                                            batch_size=self._batch_size, warming=self._warming)

    def _copy(self, batch: list[tuple[Any, str, str]]) -> None:
        """DUMP and PTTL on each source, RESTORE (or DEL, for a key gone)
        on each target, one pipeline per shard and step."""
        by_source: dict[str, list[tuple[bytes, str]]] = {}
        for part, source, target in batch:
            for key in self._marks.parts.get(part, ()):
                by_source.setdefault(source, []).append((key, target))
        for source, items in by_source.items():
            pipe = self._mover(source).pipeline(transaction=False)
            for key, _ in items:
                pipe.dump(key)
                pipe.pttl(key)
            answers = pipe.execute()
            by_target: dict[str, Any] = {}
            for (key, target), value, ttl in zip(items, answers[0::2], answers[1::2], strict=True):
                tpipe = by_target.get(target)
                if tpipe is None:
                    tpipe = by_target[target] = self._mover(target).pipeline(transaction=False)
                if value is None or ttl == -2:
                    tpipe.delete(key)
                else:
                    tpipe.restore(key, max(int(ttl), 0), value, replace=True)
                    self.copied += 1
            for tpipe in by_target.values():
                tpipe.execute()

    def _batches(self, on_progress: Callable[[Resharding], None] | None) -> bool:
        """Moves batches until every key is done (True) or ``stop()`` (False)."""
        marks = self._marks
        migration = marks.migration
        assert migration is not None
        for batch in migration.batches():
            parts = [item[0] if isinstance(item[0], bytes) else item[0].encode() for item in batch]
            with self._cond:
                marks.start_batch(parts)
                self._cond.wait_for(functools.partial(marks.idle, parts))
            try:
                self._copy(batch)
                with self._cond:
                    self._cond.wait_for(marks.may_mark_done)
                    migration.mark_done(batch)
                    marks.copied_batch(parts)
            finally:
                with self._cond:
                    marks.end_batch(parts)
                    self._cond.notify_all()
            if on_progress is not None:
                on_progress(self)
            if self._stop.is_set():
                return False
        return True

    def _commit(self) -> None:
        """The new ring serves every key; the old copies go once the
        commands begun before are done; the clients leave the resharding."""
        marks = self._marks
        migration = marks.migration
        assert migration is not None
        with self._cond:
            self._cond.wait_for(marks.no_dual_writers)
            migration.commit()
            marks.committed = True
            self._cond.wait_for(marks.quiet)
        by_source: dict[str, list[bytes]] = {}
        moved = sorted(marks.parts)
        for part, source in zip(moved, self._old_ring.get_target_nodes(moved), strict=True):
            if source is not None:
                by_source.setdefault(source, []).extend(marks.parts[part])
        for source, keys in by_source.items():
            pipe = self._mover(source).pipeline(transaction=False)
            for start in range(0, len(keys), SCAN_COUNT):
                pipe.delete(*keys[start:start + SCAN_COUNT])
            self.deleted += sum(pipe.execute())
        old, new = self._old, self._new
        old.core.locate = self._new_ring.get_target_node
        old._hook = None
        new.core.locate = None
        new._hook = None
        new._others = {}
        for client in self._movers.values():
            client.close()
        self._movers = {}

    def run(self, on_progress: Callable[[Resharding], None] | None = None) -> bool:
        """Lists the moving keys (the first time), moves them batch by batch,
        calling ``on_progress(self)`` after each, and commits: True when
        done, False when ``stop()`` ended it first (``run()`` again goes on)."""
        if self._marks.committed:
            return True
        self._stop.clear()
        if self._marks.migration is None:
            self._list()
        if not self._batches(on_progress):
            return False
        self._commit()
        return True


def reshard(old: ShardedRedis, new: ShardedRedis, *, batch_size: int = 200, warm: bool = True,
            on_progress: Callable[[Resharding], None] | None = None,
            saved: dict[str, Any] | None = None) -> Resharding:
    """Moves the keys whose shard differs between ``old`` and ``new`` while
    both keep serving (see :class:`Resharding`), and returns the
    resharding: ``committed`` when done; stopped by ``on_progress`` calling
    its ``stop()``, ``run()`` goes on and ``state()`` saves it for
    ``reshard(..., saved=state)`` in another process."""
    resharding = Resharding(old, new, batch_size=batch_size, warm=warm, saved=saved)
    resharding.run(on_progress)
    return resharding
