"""get_bounded(key, loads, balance_factor=1.25) on every router family and
every ring layout, against a plain-Python model built from the router's
own get_preference_list and weights: T = ceil(c * (s + 1)) for s the sum
of the loads of the nodes the router holds, a node of weight w out of W
bounded by max(ceil(T * w / W), 1), the first node of the preference list
below its bound; and the errors, the empty router, subclasses, mappings
other than dicts, and a router left exactly as it was."""
from __future__ import annotations

import math
import sys
import sysconfig
import types
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _support.leaks import RefsGained
from chash import LAYOUTS, AnchorRouter, ConsistentHashRouter, JumpRouter, MaglevRouter, RendezvousRouter

Router = ConsistentHashRouter | MaglevRouter | JumpRouter | RendezvousRouter | AnchorRouter


def anchor_with_holes() -> AnchorRouter:
    """An AnchorRouter whose bucket ids have ten removed in the middle
    (the nodes added next reuse them, last removed first)."""
    router = AnchorRouter()
    router.add_service_nodes([f"spare-{i}" for i in range(12)])
    for i in range(1, 11):
        router.remove_service_node(f"spare-{i}")
    return router

#: Every family, every layout of the ring: a router with no node.
MAKERS: dict[str, Callable[[], Router]] = {
    **{f"ring-{layout}": (lambda layout=layout: ConsistentHashRouter(layout=layout))
       for layout in LAYOUTS},
    "ring-envoy": lambda: ConsistentHashRouter(layout="envoy"),
    "ring-grpc": lambda: ConsistentHashRouter(layout="grpc"),
    "maglev": MaglevRouter,
    "jump": JumpRouter,
    "jump-guava": lambda: JumpRouter(layout="guava"),
    "rendezvous-hrw": RendezvousRouter,
    "rendezvous-squid": lambda: RendezvousRouter(layout="squid"),
    "rendezvous-pymemcache": lambda: RendezvousRouter(layout="pymemcache"),
    "rendezvous-caddy": lambda: RendezvousRouter(layout="caddy"),
    "jump-jumpback": lambda: JumpRouter(layout="jumpback"),
    "anchor": AnchorRouter,
    "anchor-holes": anchor_with_holes,
}
KINDS = sorted(MAKERS)


def weight_for(router: Router, draw: int) -> float | None:
    """A weight the router's layout takes, from a small whole number
    (None: the layout takes no weight)."""
    rule = router.weight_rule
    if rule == "none":
        return None
    if rule == "whole":
        return float(1 + draw % 4)
    if rule == "at_least_one":
        return 1.0 + (draw % 7) / 4
    return 0.25 + (draw % 9) / 3  # real


def build(kind: str, nodes: list[str], draws: list[int]) -> Router:
    router = MAKERS[kind]()
    for node, draw in zip(nodes, draws, strict=True):
        weight = weight_for(router, draw)
        if weight is None:
            router.add_service_node(node)
        else:
            router.add_service_node(node, weight)
    return router


def model(router: Router, key: str | bytes, loads: Mapping[Any, float],
          balance_factor: float = 1.25) -> str | None:
    """The documented rule, from the router's preference list and weights."""
    order = router.get_preference_list(key, len(router))
    if not order:
        return None
    weights = router.weights
    held = 0.0
    for node, load in loads.items():
        if node in weights:
            held += float(load)
    slots = math.ceil(balance_factor * (held + 1))
    total = sum(weights.values())
    for node in order:
        w = weights[node]
        bound = slots if w >= total else math.ceil(slots * w / total)
        if loads.get(node, 0) < max(bound, 1):
            return node
    raise AssertionError("no node below its bound: the bounds sum to at least T > s")


NAMES = [f"node-{i}" for i in range(12)] + ["é-x", "节点", "\U0001F600"]
FOREIGN = ["gone-1", "gone-2", "node-99"]
#: nghttpx names a backend by its address.
ADDRESSES = [f"10.0.{i}.1:8080" for i in range(len(NAMES))]


def names(kind: str) -> list[str]:
    """Node names the kind's layout takes."""
    return ADDRESSES if kind == "ring-nghttpx" else NAMES
# Fractions of 1/8: their sums are exact whatever the order they are
# added in (get_bounded sums in the router's order or in loads', whichever
# it reads).
LOAD = st.one_of(st.integers(0, 12), st.integers(0, 96).map(lambda n: n / 8),
                 st.sampled_from([0, 0.5, 1, 0.0]))
KEYS = st.one_of(st.text(max_size=12), st.binary(max_size=12))


@pytest.mark.parametrize("kind", KINDS)
@given(data=st.data())
def test_get_bounded_is_the_model(kind: str, data: st.DataObject) -> None:
    nodes = data.draw(st.lists(st.sampled_from(names(kind)), min_size=1, max_size=10, unique=True))
    draws = data.draw(st.lists(st.integers(0, 100), min_size=len(nodes), max_size=len(nodes)))
    router = build(kind, nodes, draws)
    loads = data.draw(st.dictionaries(st.sampled_from(nodes + FOREIGN), LOAD, max_size=14))
    factor = data.draw(st.sampled_from([1, 1.0, 1.1, 1.25, 1.5, 2, 3.75]))
    # The same loads made in the router's node order (read in step), then
    # foreign entries after them, or the order broken part way.
    ordered = {node: loads.get(node, 0) for node in router.nodes}
    ordered.update((node, load) for node, load in loads.items() if node not in ordered)
    cut = data.draw(st.integers(0, len(router)))
    broken = dict(list(ordered.items())[cut:] + list(ordered.items())[:cut])
    fingerprint = router.fingerprint()
    for key in data.draw(st.lists(KEYS, min_size=1, max_size=8)):
        expected = model(router, key, loads, factor)
        assert router.get_bounded(key, ordered, factor) == expected
        assert router.get_bounded(key, broken, factor) == expected
        assert router.get_bounded(key, loads, factor) == expected
        assert router.get_bounded(key, loads, balance_factor=factor) == expected
        if factor == 1.25:
            assert router.get_bounded(key, loads) == expected
    assert router.fingerprint() == fingerprint


@pytest.mark.parametrize("kind", KINDS)
def test_every_load_zero_is_get_target_node(kind: str) -> None:
    router = build(kind, names(kind)[:9], list(range(9)))
    zero = dict.fromkeys(names(kind)[:9], 0)
    # An entry for a node the router does not hold counts nowhere.
    foreign = {"gone-1": 1000, "gone-2": 7.5}
    for i in range(300):
        key = f"user:{i}"
        owner = router.get_target_node(key)
        assert router.get_bounded(key, {}) == owner
        assert router.get_bounded(key, zero) == owner
        assert router.get_bounded(key, foreign, 1.0) == owner


@pytest.mark.parametrize("kind", KINDS)
def test_a_full_owner_sends_the_key_on_along_its_preference_list(kind: str) -> None:
    # 40 nodes of one weight, the first 30 of a key's preference list at 50
    # (s = 1500, T = 1877, a bound of 47): the walk passes the windows of 4
    # and 16 nodes.
    router = build(kind, [f"10.1.{i}.1:80" if kind == "ring-nghttpx" else f"n{i}"
                          for i in range(40)], [0] * 40)
    for i in range(40):
        key = f"k{i}"
        order = router.get_preference_list(key, 40)
        loads = dict.fromkeys(order[:30], 50)
        got = router.get_bounded(key, loads)
        assert got == model(router, key, loads) == order[30]
        # Only the owner full: the second node of its list.
        loads = {order[0]: 10}
        assert router.get_bounded(key, loads) == model(router, key, loads) == order[1]
        # Every node loaded alike: the owner fits (3 < ceil(1.25 * 121 / 40)).
        loads = dict.fromkeys(order, 3)
        assert router.get_bounded(key, loads) == model(router, key, loads) == order[0]


def test_a_python_hash_runs_once_a_call_even_past_the_owner() -> None:
    # The ring hashes the key once for its owner and for the walk past it.
    calls: list[bytes] = []

    def fnv(data: bytes) -> int:
        calls.append(data)
        h = 0x811C9DC5
        for byte in data:
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
        return h

    router = ConsistentHashRouter(hash=fnv)
    router.add_service_nodes([f"n{i}" for i in range(40)])
    for i in range(40):
        key = f"k{i}"
        order = router.get_preference_list(key, 40)
        loads = dict.fromkeys(order[:30], 50)
        calls.clear()
        assert router.get_bounded(key, loads) == order[30]
        assert calls == [key.encode()]
        assert router.get_bounded(key, loads) == model(router, key, loads)


def test_the_bound_is_weighted() -> None:
    router = ConsistentHashRouter()
    router.add_service_node("big", 3.0)
    router.add_service_node("small", 1.0)
    key = next(k for k in (f"k{i}" for i in range(1000))
               if router.get_target_node(k) == "big")
    # s = 5: T = ceil(1.25 * 6) = 8; big may hold ceil(8 * 3 / 4) = 6.
    assert router.get_bounded(key, {"big": 5}) == "big"
    # s = 6: T = ceil(8.75) = 9; big may hold ceil(6.75) = 7.
    assert router.get_bounded(key, {"big": 6}) == "big"
    # s = 7: T = 10; big ceil(7.5) = 8; at 7, still below.
    assert router.get_bounded(key, {"big": 7}) == "big"
    # s = 8.5: T = ceil(11.875) = 12; big 9, small 3: 8.5 < 9.
    assert router.get_bounded(key, {"big": 8.5}) == "big"
    # With c = 1: s = 6, T = 7, big may hold ceil(5.25) = 6: full.
    assert router.get_bounded(key, {"big": 6}, 1) == "small"
    assert router.get_bounded(key, {"big": 6, "gone": 100}, 1) == "small"


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_router_gives_none(kind: str) -> None:
    router = MAKERS[kind]()
    for node in list(router.nodes):  # anchor-holes' spares
        router.remove_service_node(node)
    assert router.get_bounded("k", {}) is None
    assert router.get_bounded(b"k", {"a": 3}, 2.0) is None
    # Nothing is held: no entry is read.
    assert router.get_bounded("k", {"a": -1, "b": "x"}) is None
    with pytest.raises(ValueError, match="balance_factor"):
        router.get_bounded("k", {}, 0.5)


BAD_LOADS: list[tuple[object, type[Exception], str]] = [
    (-1, ValueError, r"load of 'node-0' must be a finite number >= 0, not -1"),
    (-0.5, ValueError, r"finite number >= 0, not -0.5"),
    (float("nan"), ValueError, r"finite number >= 0, not nan"),
    (float("inf"), ValueError, r"finite number >= 0, not inf"),
    (10**400, ValueError, r"finite number >= 0"),
    ("3", TypeError, r"load of 'node-0' must be an int or float, not str"),
    (None, TypeError, r"must be an int or float, not NoneType"),
    (True, TypeError, r"must be an int or float, not bool"),
    (3 + 0j, TypeError, r"not complex"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("value", "error", "message"), BAD_LOADS)
def test_a_bad_load_is_named(kind: str, value: object, error: type[Exception],
                             message: str) -> None:
    router = build(kind, names(kind)[:4], [1, 2, 3, 4])
    held = router.nodes[0]
    message = message.replace("node-0", held)
    # However loads is read: in the router's order, in another, or entry by
    # entry (fewer entries than half the nodes).
    for loads in ({held: value, router.nodes[1]: 1}, {router.nodes[1]: 1, held: value},
                  {held: value}):
        with pytest.raises(error, match=message):
            router.get_bounded("k", loads)
    # An entry for a node the router does not hold is ignored, unread.
    owner = router.get_target_node("k")
    assert router.get_bounded("k", {"gone": value}) == owner
    assert router.get_bounded("k", dict.fromkeys(router.nodes, 0) | {"gone": value}) == owner


BAD_FACTORS: list[tuple[object, type[Exception], str]] = [
    (0.99, ValueError, r"balance_factor must be a finite number >= 1, not 0.99"),
    (0, ValueError, r"balance_factor must be a finite number >= 1, not 0"),
    (-2, ValueError, r">= 1, not -2"),
    (float("nan"), ValueError, r">= 1, not nan"),
    (float("inf"), ValueError, r">= 1, not inf"),
    (10**400, ValueError, r"balance_factor must be a finite number >= 1"),
    ("1.5", TypeError, r"balance_factor must be a number, not str"),
    (True, TypeError, r"balance_factor must be a number, not bool"),
    (None, TypeError, r"balance_factor must be a number, not NoneType"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("factor", "error", "message"), BAD_FACTORS)
def test_a_bad_balance_factor_is_named(kind: str, factor: object, error: type[Exception],
                                       message: str) -> None:
    router = build(kind, names(kind)[:4], [1, 2, 3, 4])
    with pytest.raises(error, match=message):
        router.get_bounded("k", {}, factor)
    with pytest.raises(error, match=message):
        router.get_bounded("k", {}, balance_factor=factor)


@pytest.mark.parametrize("kind", KINDS)
def test_arguments(kind: str) -> None:
    router = build(kind, names(kind)[:3], [1, 1, 1])
    with pytest.raises(TypeError, match="expected 2 or 3 arguments, got 1"):
        router.get_bounded("k")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="expected 2 or 3 arguments, got 4"):
        router.get_bounded("k", {}, 1.5, 2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'loads'"):
        router.get_bounded("k", loads={})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'balance_factor'"):
        router.get_bounded("k", {}, 1.5, balance_factor=2)  # type: ignore[misc]
    for loads in ([("node-0", 1)], "node-0", 3, None):
        with pytest.raises(TypeError, match="loads must be a mapping of node to load"):
            router.get_bounded("k", loads)  # type: ignore[arg-type]
    # The key's errors are get_target_node's.
    with pytest.raises(TypeError) as got:
        router.get_bounded(5, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError) as expected:
        router.get_target_node(5)  # type: ignore[arg-type]
    assert str(got.value) == str(expected.value)


class Loads(Mapping[str, float]):
    """A mapping that is not a dict."""

    def __init__(self, data: dict[str, float]) -> None:
        self._data = data

    def __getitem__(self, node: str) -> float:
        return self._data[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


@pytest.mark.parametrize("kind", ["ring-python", "maglev", "jump", "rendezvous-hrw"])
def test_any_mapping_of_loads(kind: str) -> None:
    router = build(kind, NAMES[:6], list(range(6)))
    plain = {"node-0": 4, "node-1": 2.5, "node-3": 7, "gone-1": 9}
    counter = Counter(plain)
    missing: defaultdict[str, float] = defaultdict(float, plain)
    for i in range(100):
        key = f"s{i}"
        expected = model(router, key, plain)
        assert router.get_bounded(key, plain) == expected
        assert router.get_bounded(key, counter) == expected
        assert router.get_bounded(key, types.MappingProxyType(plain)) == expected
        assert router.get_bounded(key, Loads(plain)) == expected
        assert router.get_bounded(key, missing) == expected
    # A defaultdict is read, never written: a missing node stays missing.
    assert set(missing) == set(plain)


class Ring(ConsistentHashRouter):
    pass


def test_a_subclass_has_it() -> None:
    router = Ring(layout="ketama")
    for i, node in enumerate(NAMES[:7]):
        router.add_service_node(node, 1 + i % 3)
    loads = {node: i % 4 for i, node in enumerate(NAMES[:7])}
    for i in range(200):
        assert router.get_bounded(f"u{i}", loads) == model(router, f"u{i}", loads)


def test_nothing_is_held_or_changed() -> None:
    router = build("ring-python", NAMES[:5], [1, 2, 3, 4, 5])
    loads = {"node-0": 3, "node-2": 1.5, "gone": 2}
    before = (router.fingerprint(), dict(loads), router.weights)
    node = router.get_target_node("k")
    counts = sys.getrefcount(node), [sys.getrefcount(v) for v in loads.values()]
    for i in range(2000):
        router.get_bounded(f"k{i % 7}", loads)
    assert (router.fingerprint(), dict(loads), router.weights) == before
    assert (sys.getrefcount(node), [sys.getrefcount(v) for v in loads.values()]) == counts


class Meddler(str):
    """A loads key equal to a node that empties the router when compared:
    the lookup must not crash, whatever it then answers."""

    router: Router | None = None

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        router, Meddler.router = Meddler.router, None
        if router is not None:
            for node in reversed(list(router.nodes)):  # jump drops only its last
                router.remove_service_node(node)
        return str.__eq__(self, other)


@pytest.mark.parametrize("kind", KINDS)
def test_a_router_changed_by_a_loads_key_does_not_crash(kind: str) -> None:
    for i in range(20):
        held = names(kind)[:6]
        router = build(kind, held, list(range(6)))
        holders = list(router.nodes)  # held, and anchor-holes' spares
        key = f"k{i}"
        owner = router.get_target_node(key)
        assert owner is not None
        loads: dict[str, float] = {Meddler(owner): 100, held[5]: 1}
        Meddler.router = router
        got = router.get_bounded(key, loads)
        assert got is None or got in holders
        Meddler.router = None


@pytest.mark.parametrize("kind", ["ring-python", "maglev", "rendezvous-hrw"])
def test_a_failed_call_holds_no_reference(kind: str) -> None:
    router = build(kind, NAMES[:6], list(range(6)))
    node, bad, fine = router.nodes[2], -1.5, 7.25
    loads = {router.nodes[0]: fine, node: bad}
    counts = [sys.getrefcount(x) for x in (node, bad, fine, loads)]
    for i in range(1000):
        try:
            router.get_bounded(f"k{i}", loads if i % 2 else {node: bad})
        except ValueError:
            pass
        else:
            raise AssertionError("a negative load went unnoticed")
    assert [sys.getrefcount(x) for x in (node, bad, fine, loads)] == counts


class Name(str):
    """A str subclass: a loads key the router's node index cannot answer,
    found through the family's own lookup."""


def copy_of(name: str) -> str:
    """An equal str that is another object than name."""
    copy = "".join(list(name))
    assert copy == name and copy is not name
    return copy


@pytest.mark.parametrize("kind", KINDS)
def test_loads_keyed_by_equal_names_that_are_other_objects(kind: str) -> None:
    held = names(kind)[:8]
    router = build(kind, held, list(range(8)))
    same = {node: (i * 5) % 9 for i, node in enumerate(router.nodes)} | {"gone-1": 40}
    copies = {copy_of(node): load for node, load in same.items()}
    subclassed = {Name(node): load for node, load in same.items()}
    mixed = {(copy_of(n) if i % 3 == 0 else Name(n) if i % 3 == 1 else n): v
             for i, (n, v) in enumerate(same.items())}
    for i in range(300):
        key = f"user:{i}"
        expected = model(router, key, same)
        for loads in (same, copies, subclassed, mixed):
            assert router.get_bounded(key, loads) == expected


#: Whether a state's node index learns the caller's equal names (it does
#: where the GIL serialises its readers; read by many threads at once, it
#: is never written once made).
LEARNS = not sysconfig.get_config_var("Py_GIL_DISABLED")


@pytest.mark.parametrize("kind", ["ring-python", "ring-ketama", "maglev", "jump", "rendezvous-hrw",
                                  "anchor"])
def test_equal_names_are_learned_once_a_state_and_let_go_with_it(kind: str) -> None:
    # The first dict of equal names a state meets is learned (each name
    # held, then found by its address); other copies are still found by
    # value; a change lets the learned names go, a removed node's included,
    # and its entry is then ignored.
    held = names(kind)[:8]
    router = build(kind, held, list(range(8)))
    same = {node: (i * 5) % 9 for i, node in enumerate(router.nodes)}
    first = {copy_of(node): load for node, load in same.items()}
    second = {copy_of(node): load for node, load in same.items()}
    refs = RefsGained(first, second).gained

    keys = [f"user:{i}" for i in range(200)]
    for key in keys:
        expected = model(router, key, same)
        assert router.get_bounded(key, first) == expected
        assert router.get_bounded(key, second) == expected
    assert refs(first) == [int(LEARNS)] * len(first)
    assert refs(second) == [0] * len(second)
    gone = router.nodes[-1]
    router.remove_service_node(gone)
    assert refs(first) == [0] * len(first)
    for key in keys:
        assert router.get_bounded(key, first) == model(router, key, same) != gone
    assert refs(first) == [int(LEARNS and name != gone) for name in first]
    del router
    assert refs(first) == [0] * len(first)


@pytest.mark.parametrize("kind", KINDS)
def test_every_change_is_seen_by_the_next_call(kind: str) -> None:
    # Each call on a state indexes its nodes once; a change made in place
    # (or published as a new state) must never leave a call reading the
    # nodes before it: a removed node's entry is ignored, an added one's
    # counted, a name added again as another object found.
    pool = names(kind)[:10]
    router = build(kind, pool[:6], list(range(6)))
    loads = {node: 1 + (i * 3) % 7 for i, node in enumerate(pool)}
    keys = [f"s{i}" for i in range(60)]

    def check() -> None:
        for key in keys:
            assert router.get_bounded(key, loads, 1.1) == model(router, key, loads, 1.1)

    check()
    removable = kind.startswith("jump")  # jump drops only its last bucket
    for step in range(8):
        nodes = list(router.nodes)
        if step % 2 == 0 and len(nodes) > 2:
            router.remove_service_node(nodes[-1] if removable else nodes[step % len(nodes)])
        else:
            absent = [n for n in pool if n not in nodes]
            router.add_service_node(copy_of(absent[0]))
        check()


@pytest.mark.parametrize("kind", ["ring-python", "maglev", "jump", "rendezvous-hrw", "anchor"])
def test_loads_much_larger_than_the_router(kind: str) -> None:
    # More than three entries a node: read node by node instead.
    router = build(kind, names(kind)[:3], [0, 1, 2])
    loads: dict[str, float] = {f"elsewhere-{i}": 5 for i in range(30)}
    loads.update({node: 4 - i for i, node in enumerate(router.nodes)})
    for i in range(200):
        key = f"k{i}"
        assert router.get_bounded(key, loads) == model(router, key, loads)
