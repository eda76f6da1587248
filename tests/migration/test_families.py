"""Migration between two routers of one family beyond the ring: Maglev
(arcs: table entries), Jump and Rendezvous (no arcs: the given keys routed
in both and compared key by key), against routing both by hand; two
families refused."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from chash import ConsistentHashRouter, JumpRouter, MaglevRouter, RendezvousRouter
from chash.migration import Migration, Progress

KEYS = [f"item:{i}" for i in range(4000)]
Router = ConsistentHashRouter | MaglevRouter | JumpRouter | RendezvousRouter


def with_nodes(make: Callable[[], Router], names: list[str],
               weights: dict[str, float] | None = None) -> Router:
    router = make()
    for name in names:
        router.add_service_node(name, (weights or {}).get(name, 1.0))
    return router


def by_hand(old: Router, new: Router, keys: list[str]) -> dict[str, tuple[str, str]]:
    return {k: (s, t) for k in keys
            if (s := old.get_target_node(k)) != (t := new.get_target_node(k))
            and s is not None and t is not None}


# (old, new): a node added, a node removed (the last for jump), a weight changed.
SHAPES: dict[str, tuple[Router, Router]] = {
    "maglev-add": (with_nodes(MaglevRouter, ["a", "b", "c"]),
                   with_nodes(MaglevRouter, ["a", "b", "c", "d"])),
    "maglev-weight": (with_nodes(MaglevRouter, ["a", "b", "c"]),
                      with_nodes(MaglevRouter, ["a", "b", "c"], {"b": 3})),
    "jump-add": (with_nodes(JumpRouter, ["a", "b", "c"]),
                 with_nodes(JumpRouter, ["a", "b", "c", "d", "e"])),
    "jump-remove-last": (with_nodes(JumpRouter, ["a", "b", "c", "d"]),
                         with_nodes(JumpRouter, ["a", "b", "c"])),
    "jump-to-guava": (with_nodes(JumpRouter, ["a", "b", "c"]),
                      with_nodes(lambda: JumpRouter(layout="guava", hash="murmur3_128"),
                                 ["a", "b", "c"])),
    "rendezvous-remove": (with_nodes(RendezvousRouter, ["a", "b", "c", "d"]),
                          with_nodes(RendezvousRouter, ["a", "c", "d"])),
    "rendezvous-weight": (with_nodes(RendezvousRouter, ["a", "b", "c"]),
                          with_nodes(RendezvousRouter, ["a", "b", "c"], {"a": 2.5})),
    "rendezvous-to-pymemcache": (
        with_nodes(RendezvousRouter, ["a", "b", "c"]),
        with_nodes(lambda: RendezvousRouter(layout="pymemcache"), ["a", "b", "c"])),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_batches_hold_exactly_the_moving_keys(shape: str) -> None:
    old, new = SHAPES[shape]
    m = Migration(old, new, KEYS, batch_size=250)
    expected = by_hand(old, new, KEYS)
    assert 0 < len(expected) < len(KEYS)
    assert m.progress == Progress(0, len(expected))
    seen: dict[str, tuple[str, str]] = {}
    for batch in m.batches():
        assert 0 < len(batch) <= 250
        for key, source, target in batch:
            assert key not in seen
            seen[key] = (source, target)
        # Reads stay on the source until the batch is done, then move.
        assert all(m.route(key) == source for key, source, _ in batch)
        m.mark_done(batch)
        assert all(m.route(key) == target for key, _, target in batch)
    assert seen == expected
    m.commit()
    assert all(m.route(k) == new.get_target_node(k) for k in KEYS[:500])


def test_jump_and_rendezvous_have_no_arcs_and_need_the_keys() -> None:
    for make in (JumpRouter, RendezvousRouter):
        old, new = with_nodes(make, ["a", "b"]), with_nodes(make, ["a", "b", "c"])
        assert Migration(old, new, KEYS).moves == []
        with pytest.raises(ValueError, match="needs the keys: they have no arcs"):
            Migration(old, new, keys_in=lambda move: [])


def test_maglev_lists_its_arcs() -> None:
    old, new = SHAPES["maglev-add"]
    m = Migration(old, new, keys_in=lambda move: [])
    assert m.moves == old.diff(new) and m.moves
    # The new host takes entries from every old one.
    assert {move.target for move in m.moves} >= {"d"}
    assert {move.source for move in m.moves if move.target == "d"} == {"a", "b", "c"}


MIXED = [
    (lambda: with_nodes(ConsistentHashRouter, ["a"]), lambda: with_nodes(MaglevRouter, ["a"])),
    (lambda: with_nodes(MaglevRouter, ["a"]), lambda: with_nodes(JumpRouter, ["a"])),
    (lambda: with_nodes(JumpRouter, ["a"]), lambda: with_nodes(RendezvousRouter, ["a"])),
    (lambda: with_nodes(RendezvousRouter, ["a"]),
     lambda: with_nodes(lambda: ConsistentHashRouter(layout="envoy"), ["a"])),
]


@pytest.mark.parametrize("pair", range(len(MIXED)))
def test_two_families_are_refused(pair: int) -> None:
    make_old, make_new = MIXED[pair]
    old, new = make_old(), make_new()
    with pytest.raises(TypeError, match="two routers of one family, not"):
        Migration(old, new, KEYS)  # type: ignore[type-var]


def test_a_router_changed_under_the_migration_is_refused() -> None:
    old, new = with_nodes(JumpRouter, ["a", "b"]), with_nodes(JumpRouter, ["a", "b", "c"])
    m = Migration(old, new, KEYS)
    new.add_service_node("d")
    with pytest.raises(RuntimeError, match="changed while it ran"):
        list(m.batches())


def test_moving_keys_compares_in_one_batch_each() -> None:
    from chash._chash import _moving_keys

    old, new = SHAPES["rendezvous-remove"]
    assert _moving_keys(old, new, KEYS) == [
        (k, s, t) for k, (s, t) in by_hand(old, new, KEYS).items()]
    assert _moving_keys(old, new, []) == []
    empty = RendezvousRouter()
    assert _moving_keys(old, empty, KEYS[:10]) == []  # no owner: not moving
    with pytest.raises(TypeError, match="keys must be a list"):
        _moving_keys(old, new, tuple(KEYS))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be str or bytes"):
        _moving_keys(old, new, [1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="takes 3 arguments"):
        _moving_keys(old, new)  # type: ignore[call-arg]
