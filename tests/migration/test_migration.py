"""chash.migration.Migration against routing both rings: exactly the moving
keys in batches, reads that switch owner only when a batch is done, JSON
state that resumes, warming nodes, errors, and threads."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from chash import ConsistentHashRouter, Move
from chash.migration import Migration, Progress

KEYS = [f"item:{i}" for i in range(3000)]


def ring(*names: str, **kwargs: object) -> ConsistentHashRouter:
    router = ConsistentHashRouter(**kwargs)  # type: ignore[arg-type]
    for name in names:
        router.add_service_node(name)
    return router


@pytest.fixture
def rings() -> tuple[ConsistentHashRouter, ConsistentHashRouter]:
    return ring("a", "b", "c"), ring("b", "c", "d")


def moving(old: ConsistentHashRouter, new: ConsistentHashRouter,
           keys: list[str]) -> dict[str, tuple[str, str]]:
    return {k: (s, t) for k in keys
            if (s := old.get_target_node(k)) != (t := new.get_target_node(k))}


def test_batches_hold_exactly_the_moving_keys(rings: tuple[ConsistentHashRouter, ...]) -> None:
    old, new = rings
    m = Migration(old, new, KEYS, batch_size=150)
    expected = moving(old, new, KEYS)
    assert m.progress == Progress(0, len(expected))
    seen: dict[str, tuple[str, str]] = {}
    for batch in m.batches():
        assert 0 < len(batch) <= 150
        for key, source, target in batch:
            assert key not in seen
            seen[key] = (source, target)
    assert seen == expected
    assert 0 < len(expected) < len(KEYS)


def test_route_switches_when_the_batch_is_done(rings: tuple[ConsistentHashRouter, ...]) -> None:
    old, new = rings
    m = Migration(old, new, KEYS, batch_size=100)
    batches = list(m.batches())
    first = batches[0]
    for key, source, _ in first:
        assert m.route(key) == source
    m.mark_done(first)
    for key, _, target in first:
        assert m.route(key) == target
    for key, source, _ in batches[1]:
        assert m.route(key) == source  # not done yet
    stay = next(k for k in KEYS if old.get_target_node(k) == new.get_target_node(k))
    assert m.route(stay) == new.get_target_node(stay)
    assert m.progress.done == len(first)
    with pytest.raises(RuntimeError, match="not all moved"):
        m.commit()
    for batch in batches[1:]:
        m.mark_done(batch)
    assert list(m.batches()) == []
    assert m.progress.done == m.progress.total
    m.commit()
    assert m.committed
    assert all(m.route(k) == new.get_target_node(k) for k in KEYS[:200])


def test_keys_in_lists_each_arc(rings: tuple[ConsistentHashRouter, ...]) -> None:
    old, new = rings
    asked: list[Move] = []

    def keys_in(move: Move) -> Iterator[str]:
        asked.append(move)
        for key in KEYS:
            h = old._calculate_hash(key)
            inside = (move.start < h <= move.end if move.start < move.end
                      else h > move.start or h <= move.end)
            if inside:
                yield key

    m = Migration(old, new, keys_in=keys_in, batch_size=64)
    assert m.progress.total is None
    got = {k: (s, t) for batch in m.batches() for k, s, t in batch}
    assert asked == old.diff(new) == m.moves
    assert got == moving(old, new, KEYS)
    assert m.progress.total == len(got)
    for batch in m.batches():
        m.mark_done(batch)
    m.commit()


def test_state_saves_and_resumes(rings: tuple[ConsistentHashRouter, ...], tmp_path: Path) -> None:
    old, new = rings
    keys: list[str | bytes] = [*KEYS[:1500], *(k.encode() for k in KEYS[1500:])]
    m = Migration(old, new, keys, batch_size=100)
    it = m.batches()
    done = [next(it), next(it)]
    for batch in done:
        m.mark_done(batch)
    path = tmp_path / "migration.json"
    m.save(path)
    state = json.loads(path.read_text())
    assert state["format"] == "chash-migration/1"
    back = Migration.resume(old, new, path, keys, batch_size=100)
    assert back.progress == m.progress
    left = {k for batch in back.batches() for k, _, _ in batch}
    assert left.isdisjoint(k for batch in done for k, _, _ in batch)
    assert len(left) + m.progress.done == m.progress.total
    for key, _, target in done[0]:
        assert back.route(key) == target
    with pytest.raises(ValueError, match="other rings"):
        Migration.resume(old, ring("a", "b"), state, keys)
    with pytest.raises(ValueError, match="not a chash-migration"):
        Migration.resume(old, new, {"format": "x"}, keys)
    with pytest.raises(ValueError, match="key"):
        Migration.resume(old, new, {**state, "done": [3]}, keys)


def test_warming_node_serves_only_when_complete(rings: tuple[ConsistentHashRouter, ...]) -> None:
    old, new = rings
    m = Migration(old, new, KEYS, batch_size=50, warming=["d"])
    batches = list(m.batches())
    to_d = [t for b in batches for t in b if t[2] == "d"]
    assert to_d
    for batch in batches[:-1]:
        m.mark_done(batch)
    last_to_d = any(t[2] == "d" for t in batches[-1])
    for key, source, target in to_d[:20]:
        if target == "d" and last_to_d:
            assert m.route(key) == source  # d is still warming
    m.mark_done(batches[-1])
    for key, _, target in to_d:
        assert m.route(key) == target == "d"
    with pytest.raises(ValueError, match="not in the new ring"):
        Migration(old, new, KEYS, warming=["zz"])


def test_errors(rings: tuple[ConsistentHashRouter, ...]) -> None:
    old, new = rings
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            Migration(old, new, KEYS, batch_size=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keys_in"):
        Migration(old, new)
    with pytest.raises(ValueError, match="same layout"):
        Migration(old, ring("a", layout="node"), KEYS)
    m = Migration(old, new, KEYS)
    stay = next(k for k in KEYS if old.get_target_node(k) == new.get_target_node(k))
    with pytest.raises(ValueError, match="not moving keys"):
        m.mark_done([(stay, "a", "b")])
    assert m.progress.done == 0


def test_a_ring_changed_under_the_migration_is_refused(
        rings: tuple[ConsistentHashRouter, ...]) -> None:
    old, new = rings
    m = Migration(old, new, KEYS)
    assert m.old is old and m.new is new
    new.add_service_node("e")
    with pytest.raises(RuntimeError, match="changed"):
        next(m.batches())
    with pytest.raises(RuntimeError, match="changed"):
        m.commit(force=True)


def test_readers_never_go_back_to_the_source(rings: tuple[ConsistentHashRouter, ...]) -> None:
    # Once a reader has seen a key's target it never sees its source again,
    # while a mover marks batches done in another thread.
    old, new = rings
    m = Migration(old, new, KEYS, batch_size=20)
    triples = [t for b in m.batches() for t in b]
    stop = threading.Event()
    errors: list[str] = []

    def reader(offset: int) -> None:
        switched: set[str] = set()
        while not stop.is_set():
            for key, source, target in triples[offset::4]:
                node = m.route(key)
                if node == target:
                    switched.add(key)
                elif node != source or key in switched:
                    errors.append(f"{key}: {node}")
                    return

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for batch in m.batches():
        m.mark_done(batch)
    stop.set()
    for t in threads:
        t.join(10)
    assert errors == []
    assert m.progress.done == m.progress.total
