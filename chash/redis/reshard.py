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

import collections
import functools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from chash.migration.core import Migration, Progress
from chash.migration.state import load as load_state
from chash.redis.client import ShardedRedis
from chash.redis.commands import READS, SPLIT, command_keys, command_name, sub_command
from chash.redis.core import Part, hash_part
from chash.redis.face import client_kwargs

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
        self._migration: Migration[ConsistentHashRouter] | None = None
        self._parts: dict[bytes, list[bytes]] = {}     # moving part -> its keys
        self._listed: set[bytes] = set()               # the keys of _parts
        self._touched: set[bytes] = set()              # moving keys written while listing
        self._in_flight: set[bytes] = set()
        self._active: collections.Counter[bytes] = collections.Counter()
        self._copied: set[bytes] = set()
        self._fresh: set[bytes] = set()                # moving parts first written after listing
        self._dual_writers = 0
        self._draining = False
        self._committed = False
        self._before_commit = 0                        # commands begun before commit, not done
        self._stop = threading.Event()
        self._movers: dict[str, redis.Redis] = {}
        #: Keys copied (restored on their new shard) so far.
        self.copied = 0
        #: Old copies deleted after the commit.
        self.deleted = 0
        old._others = {n: c for n, c in new.clients.items() if n not in old.shards}
        new._others = {n: c for n, c in old.clients.items() if n not in new.shards}
        for client in (old, new):
            client.core.locate = self._locate
            client._hook = self

    # -- what it is ----------------------------------------------------------------

    @property
    def progress(self) -> Progress:
        """Moving keys (hash parts) done, of those known (None while listing)."""
        if self._migration is None:
            return Progress(0, None)
        return self._migration.progress

    @property
    def committed(self) -> bool:
        """True once the new ring serves every key."""
        return self._committed

    @property
    def warming(self) -> list[str]:
        """The new shards that serve nothing until their keys are copied."""
        return list(self._warming)

    def state(self) -> dict[str, Any]:
        """The migration's JSON state, for ``Resharding(..., saved=...)``."""
        if self._migration is None:
            raise RuntimeError("nothing to save: the keys are not listed yet")
        return self._migration.state()

    def stop(self) -> None:
        """Makes ``run()`` return after the batch under way."""
        self._stop.set()

    # -- routing the clients' commands -----------------------------------------------

    def _moving(self, part: bytes) -> bool:
        return self._old_ring.get_target_node(part) != self._new_ring.get_target_node(part)

    def _locate(self, part: bytes) -> str | None:
        if self._committed or part in self._fresh:
            return self._new_ring.get_target_node(part)
        if self._migration is None:
            return self._old_ring.get_target_node(part)
        return self._migration.route(part)

    def _dual(self, part: bytes) -> bool:
        """Copied, but its new shard is still warming: writes go to both."""
        return (part in self._copied and self._migration is not None
                and self._migration.route(part) != self._new_ring.get_target_node(part))

    def _enter(self, keys: Sequence[bytes], write: bool) -> _Ticket:
        """Waits until ``keys`` may be used (none in flight; for a key also
        written to its warming new shard, no other writer on it)."""
        parts = [hash_part(k, self._tag) for k in keys]
        with self._cond:
            early = not self._committed
            if early:
                self._before_commit += 1
            if not write or self._committed:
                return _Ticket(parts, early, False, [])

            def free() -> bool:
                for part in parts:
                    if part in self._in_flight:
                        return False
                    if self._dual(part) and (self._active[part] or self._draining):
                        return False
                return True
            self._cond.wait_for(free)
            dual = [i for i, part in enumerate(parts) if self._dual(part)]
            for key, part in zip(keys, parts, strict=True):
                self._active[part] += 1
                if self._migration is None:
                    if self._moving(part):
                        self._touched.add(key)
                elif part in self._parts:
                    if key not in self._listed:   # a new key of a moving tag: it moves with it
                        self._listed.add(key)
                        self._parts[part].append(key)
                elif self._moving(part):
                    self._fresh.add(part)
            if dual:
                self._dual_writers += 1
            return _Ticket(parts, early, True, dual)

    def _leave(self, ticket: _Ticket) -> None:
        with self._cond:
            if ticket.active:
                for part in ticket.parts:
                    self._active[part] -= 1
                    if self._active[part] <= 0:
                        del self._active[part]
            if ticket.dual:
                self._dual_writers -= 1
            if ticket.early:
                self._before_commit -= 1
            self._cond.notify_all()

    def _guarded(self, face: ShardedRedis, keys: Sequence[Any], write: bool,
                 body: Callable[[_Ticket], Any]) -> Any:
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

        def body(ticket: _Ticket) -> Any:
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

        def body(ticket: _Ticket) -> list[Any]:
            answers = send(None)
            if ticket.dual:
                send(self._new_ring.get_target_node(ticket.parts[0]))
            return answers
        answers: list[Any] = self._guarded(face, keys, True, body)
        return answers

    def _copy_write(self, face: ShardedRedis, name: str, args: Sequence[Any], ticket: _Ticket,
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
        found: dict[bytes, list[bytes]] = {}
        for shard in self._old.shards:
            batch: list[bytes] = []
            for key in self._mover(shard).scan_iter(count=SCAN_COUNT):
                batch.append(key)
                if len(batch) >= SCAN_COUNT:
                    self._keep_moving(batch, found)
                    batch = []
            self._keep_moving(batch, found)
        with self._cond:
            self._keep_moving(sorted(self._touched), found)
            for keys in found.values():
                keys[:] = list(dict.fromkeys(keys))
            self._parts = found
            self._listed = {key for keys in found.values() for key in keys}
            parts = sorted(found)
            warming = self._warming
            if self._saved is not None:
                self._migration = Migration.resume(self._old_ring, self._new_ring, self._saved, parts,
                                                   batch_size=self._batch_size, warming=warming)
                done, _ = load_state(self._saved, self._old_ring.fingerprint(), self._new_ring.fingerprint())
                self._copied.update(p for p in done if isinstance(p, bytes) and p in found)
            else:
                self._migration = Migration(self._old_ring, self._new_ring, parts,
                                            batch_size=self._batch_size, warming=warming)
            self._touched.clear()

    def _keep_moving(self, keys: list[bytes], found: dict[bytes, list[bytes]]) -> None:
        if not keys:
            return
        parts = [hash_part(k, self._tag) for k in keys]
        olds = self._old_ring.get_target_nodes(parts)
        news = self._new_ring.get_target_nodes(parts)
        for key, part, a, b in zip(keys, parts, olds, news, strict=True):
            if a != b:
                found.setdefault(part, []).append(key)

    def _copy(self, batch: list[tuple[Any, str, str]]) -> None:
        """DUMP and PTTL on each source, RESTORE (or DEL, for a key gone)
        on each target, one pipeline per shard and step."""
        by_source: dict[str, list[tuple[bytes, str]]] = {}
        for part, source, target in batch:
            for key in self._parts.get(part, ()):
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
        migration = self._migration
        assert migration is not None
        for batch in migration.batches():
            parts = [bytes(item[0]) if isinstance(item[0], bytes) else item[0].encode() for item in batch]
            with self._cond:
                self._in_flight.update(parts)
                self._cond.wait_for(functools.partial(self._idle, parts))
            try:
                self._copy(batch)
                with self._cond:
                    self._draining = True
                    self._cond.wait_for(lambda: self._dual_writers == 0)
                    migration.mark_done(batch)
                    self._copied.update(parts)
            finally:
                with self._cond:
                    self._draining = False
                    self._in_flight.difference_update(parts)
                    self._cond.notify_all()
            if on_progress is not None:
                on_progress(self)
            if self._stop.is_set():
                return False
        return True

    def _idle(self, parts: Sequence[bytes]) -> bool:
        return not any(self._active[p] for p in parts)

    def _commit(self) -> None:
        """The new ring serves every key; the old copies go once the
        commands begun before are done; the clients leave the resharding."""
        migration = self._migration
        assert migration is not None
        with self._cond:
            self._cond.wait_for(lambda: self._dual_writers == 0)
            migration.commit()
            self._committed = True
            self._cond.wait_for(lambda: self._before_commit == 0)
        by_source: dict[str, list[bytes]] = {}
        sources = self._old_ring.get_target_nodes(sorted(self._parts))
        for part, source in zip(sorted(self._parts), sources, strict=True):
            if source is not None:
                by_source.setdefault(source, []).extend(self._parts[part])
        for source, keys in by_source.items():
            pipe = self._mover(source).pipeline(transaction=False)
            for start in range(0, len(keys), SCAN_COUNT):
                pipe.delete(*keys[start:start + SCAN_COUNT])
            self.deleted += sum(pipe.execute())
        new_ring = self._new_ring
        old, new = self._old, self._new
        old.core.locate = new_ring.get_target_node
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
        if self._committed:
            return True
        self._stop.clear()
        if self._migration is None:
            self._list()
        if not self._batches(on_progress):
            return False
        self._commit()
        return True


class _Ticket:
    """One command's pass through the markers."""

    __slots__ = ("active", "dual", "early", "parts")

    def __init__(self, parts: list[bytes], early: bool, active: bool, dual: list[int]) -> None:
        self.parts = parts
        self.early = early
        self.active = active
        self.dual = dual


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
