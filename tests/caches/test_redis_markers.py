"""chash.redis.markers without I/O: what the markers let through while
keys move, step by step, over two real rings."""
from __future__ import annotations

from chash import ConsistentHashRouter
from chash.migration import Migration
from chash.redis.markers import Markers


def rings() -> tuple[ConsistentHashRouter, ConsistentHashRouter]:
    old, new = ConsistentHashRouter(layout="ketama"), ConsistentHashRouter(layout="ketama")
    old.add_service_nodes(["a", "b", "c"])
    new.add_service_nodes(["a", "b", "c", "d"])
    return old, new


def test_a_batch_in_flight_holds_its_writers_and_waits_for_those_under_way() -> None:
    old, new = rings()
    marks = Markers(old, new, None)
    keys = [f"k{i}".encode() for i in range(400)]
    moving = [k for k in keys if marks.moving(k)]
    staying = next(k for k in keys if not marks.moving(k))
    key = moving[0]
    # While listing: a write of a moving key is remembered, and listed.
    early = marks.arrive()
    ticket = marks.enter([key, b"new-key"], marks.parts_of([key, b"new-key"]), True, early)
    assert early and ticket.active and not ticket.dual
    found: dict[bytes, list[bytes]] = {}
    marks.keep_moving([k for k in moving if k != key], found)
    parts = marks.listed(found)
    assert key in parts and (b"new-key" in parts) == marks.moving(b"new-key")
    marks.migration = Migration(old, new, parts, batch_size=10, warming=["d"])
    batch = next(marks.migration.batches())
    batch_parts = [p for p, _, _ in batch]
    marks.start_batch(batch_parts)
    assert not marks.may_enter(batch_parts[:1]) and marks.may_enter([staying])
    assert (key in batch_parts) != marks.idle(batch_parts)   # the write under way holds the copy
    marks.leave(ticket)
    assert marks.idle(batch_parts) and marks.quiet()
    assert marks.may_mark_done()
    marks.migration.mark_done(batch)
    marks.copied_batch(batch_parts)
    marks.end_batch(batch_parts)
    # Copied, but "d" is still warming: reads stay on the old shard, writes go to both, one at a time.
    done = batch_parts[0]
    assert marks.locate(done) == old.get_target_node(done) and marks.dual(done)
    first = marks.enter([done], [done], True, marks.arrive())
    assert first.dual == [0] and not marks.may_enter([done])
    assert not marks.may_mark_done()                         # no batch ends under a double write
    marks.leave(first)
    assert marks.may_enter([done]) is False                  # draining until the batch is marked
    marks.end_batch([])
    assert marks.may_enter([done])
    # A moving key first written now goes to its new shard.
    fresh = next(k for k in (f"f{i}".encode() for i in range(1000)) if marks.moving(k))
    marks.leave(marks.enter([fresh], [fresh], True, marks.arrive()))
    assert marks.locate(fresh) == new.get_target_node(fresh)
    marks.committed = True
    assert marks.locate(done) == new.get_target_node(done) and marks.quiet()


def test_a_new_key_of_a_moving_tag_moves_with_it() -> None:
    old, new = rings()
    marks = Markers(old, new, b"{}")
    tag = next(t for t in (f"{i}".encode() for i in range(1000)) if marks.moving(t))
    found: dict[bytes, list[bytes]] = {}
    marks.keep_moving([b"u:{" + tag + b"}:a"], found)
    marks.migration = Migration(old, new, marks.listed(found), batch_size=10)
    key = b"u:{" + tag + b"}:later"
    marks.leave(marks.enter([key], marks.parts_of([key]), True, marks.arrive()))
    assert marks.parts[tag] == [b"u:{" + tag + b"}:a", key]
