"""chash.compat.uhashring.HashRing against the real uhashring 2.5, key for key.

Every test builds the same ring with both and compares what they answer:
the node of each key (str, bytes, int and UUID keys), its position and
point, the continuum (its dict, in its order), the points, the
distribution and the node configurations, through sequences of adds,
removes, configuration changes and regenerations, in the default (md5)
mode and in ketama's.  The exceptions compared are the type and the
message.
"""
from __future__ import annotations

import io
import types
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import redirect_stdout
from functools import partial
from typing import Any

import pytest
import uhashring
from hypothesis import given
from hypothesis import strategies as st

from chash.compat.uhashring import HashRing

assert uhashring.__version__ == "2.5", "these tests compare with uhashring 2.5 (the test extra pins it)"


def keys_of_every_type(n: int, seed: int) -> list[Any]:
    """n keys, a quarter each str, bytes, int and UUID."""
    out: list[Any] = []
    for i in range(n):
        v = seed * 1_000_003 + i
        out.append([f"session-{v}", f"user:{v}".encode(), v * 7919 - 10**6,
                    uuid.UUID(int=(v * 0x9E3779B97F4A7C15) % (1 << 128))][i % 4])
    return out


def same_state(ours: HashRing, theirs: uhashring.HashRing) -> None:
    ours._check()
    assert ours._nodes == theirs._nodes
    assert list(ours.get_nodes()) == list(theirs.get_nodes())
    assert ours.distribution == theirs.distribution
    assert ours.size == theirs.size
    assert ours.get_points() == theirs.get_points()
    assert list(ours.ring.items()) == list(theirs.ring.items())


def same_lookups(ours: HashRing, theirs: uhashring.HashRing, keys: list[Any]) -> int:
    for key in keys:
        assert ours.get_node(key) == theirs.get_node(key), key
    for key in keys[:200]:
        assert ours.get_server(key) == theirs.get_server(key)
        assert ours.get_node_pos(key) == theirs.get_node_pos(key)
        assert ours.get(key) == theirs.get(key)
        assert ours[key] == theirs[key]
    return len(keys)


MODES = [{}, {"hash_fn": "ketama"}]


@pytest.mark.parametrize("mode", MODES, ids=["md5", "ketama"])
@pytest.mark.parametrize("size", [1, 2, 7, 50])
def test_every_key_goes_where_uhashring_puts_it(mode: dict[str, Any], size: int) -> None:
    nodes = {f"10.0.{i // 250}.{i % 250}:8000": 1 + (i * 7) % 5 for i in range(size)}
    ours, theirs = HashRing(nodes, **mode), uhashring.HashRing(nodes, **mode)
    same_state(ours, theirs)
    assert same_lookups(ours, theirs, keys_of_every_type(15_000, size)) == 15_000


@pytest.mark.parametrize("mode", MODES, ids=["md5", "ketama"])
def test_adds_removes_and_changed_confs(mode: dict[str, Any]) -> None:
    # One sequence of changes on 1-50 nodes; 40,000 keys checked along it.
    ours, theirs = HashRing(**mode), uhashring.HashRing(**mode)
    keys = keys_of_every_type(2_000, 1)
    steps: list[Callable[[Any], None]] = []
    for i in range(50):
        steps.append(lambda r, i=i: r.add_node(f"node-{i}", {"weight": 1 + i % 5, "instance": i}))
    steps += [
        lambda r: r.remove_node("node-3"),
        lambda r: r.add_node("node-7", {"weight": 4}),            # changed weight
        lambda r: r.add_node("node-8", {"vnodes": 17}),           # changed vnodes
        lambda r: r.add_node("node-9", {"nodename": "nine"}),     # changed nodename
        lambda r: r.add_node("node-10", {"port": 11211}),         # no change to the points
        lambda r: r.__setitem__("node-11", 3),
        lambda r: r.__delitem__("node-0"),
        lambda r: r.add_node("node-0"),
        lambda r: r.regenerate(),
    ]
    steps += [lambda r, i=i: r.remove_node(f"node-{i}") for i in range(12, 49)]
    checked = 0
    for n, step in enumerate(steps):
        step(ours)
        step(theirs)
        if n % 5 == 0 or n >= len(steps) - 3:
            same_state(ours, theirs)
            checked += same_lookups(ours, theirs, keys)
    assert checked >= 40_000


@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
def test_ketama_custom_vnodes_and_replicas(replicas: int) -> None:
    nodes = {f"cache-{i}": {"weight": 1 + i % 5, "vnodes": 13 + i} for i in range(12)}
    ours = HashRing(nodes, hash_fn="ketama", replicas=replicas, vnodes=25)
    theirs = uhashring.HashRing(nodes, hash_fn="ketama", replicas=replicas, vnodes=25)
    same_state(ours, theirs)
    same_lookups(ours, theirs, keys_of_every_type(2_500, replicas))
    ours.add_node("cache-x", 2)
    theirs.add_node("cache-x", 2)
    ours.remove_node("cache-0")
    theirs.remove_node("cache-0")
    same_state(ours, theirs)
    same_lookups(ours, theirs, keys_of_every_type(2_500, replicas + 10))
    assert ours.runtime._replicas == replicas


def test_md5_custom_vnodes_and_weight_fn() -> None:
    def weight_fn(**conf: Any) -> int:
        return 1 + len(str(conf["nodename"])) % 5

    nodes = [f"host-{i}.example" for i in range(20)]
    ours = HashRing(nodes, vnodes=33, weight_fn=weight_fn)
    theirs = uhashring.HashRing(nodes, vnodes=33, weight_fn=weight_fn)
    same_state(ours, theirs)
    same_lookups(ours, theirs, keys_of_every_type(4_000, 5))


def test_values_two_nodes_share_are_owned_as_uhashring_owns_them() -> None:
    # 1 and "1" are two nodes whose points are the same strings ("1-0", ...):
    # every point is shared, owned by the node that wrote it last, and a
    # removal takes the points away from both.
    for mode in MODES:
        ours, theirs = HashRing([1, "1", 2], **mode), uhashring.HashRing([1, "1", 2], **mode)
        same_state(ours, theirs)
        for step in (lambda r: r.add_node(1, 2), lambda r: r.remove_node("1"), lambda r: r.add_node("1"),
                     lambda r: r.remove_node(1), lambda r: r.add_node(1, 3)):
            step(ours)
            step(theirs)
            same_state(ours, theirs)
            same_lookups(ours, theirs, keys_of_every_type(800, 3))


def test_a_hash_fn_callable_hashes_through_python_as_uhashring_does() -> None:
    def coarse(key: Any) -> int:
        return sum(str(key).encode()) % 97  # collides a lot

    ours = HashRing(["a", "b", "c", "d"], hash_fn=coarse)
    theirs = uhashring.HashRing(["a", "b", "c", "d"], hash_fn=coarse)
    for step in (None, lambda r: r.add_node("e", 2), lambda r: r.remove_node("b"),
                 lambda r: r.add_node("a", 3), lambda r: r.regenerate()):
        if step:
            step(ours)
            step(theirs)
        same_state(ours, theirs)
        same_lookups(ours, theirs, keys_of_every_type(400, 9))
        assert list(ours.range("k", unique=False)) == list(theirs.range("k", unique=False))
    assert ours.hashi("coconut") == coarse("coconut")


def test_range_and_iterate_nodes() -> None:
    for mode in MODES:
        nodes = {f"n{i}": {"weight": 1 + i % 3, "nodename": f"name-{i}"} for i in range(9)}
        ours, theirs = HashRing(nodes, **mode), uhashring.HashRing(nodes, **mode)
        for key in keys_of_every_type(40, 11):
            for size in (None, 0, 1, 3, 20):
                for unique in (True, False):
                    assert list(ours.range(key, size, unique)) == list(theirs.range(key, size, unique))
            assert list(ours.iterate_nodes(key)) == list(theirs.iterate_nodes(key))
            assert list(ours.iterate_nodes(key, False)) == list(theirs.iterate_nodes(key, False))
    assert list(HashRing().iterate_nodes("x")) == [None] == list(uhashring.HashRing().iterate_nodes("x"))
    assert list(HashRing().range("x")) == []


def test_getters_return_types_and_empty_ring() -> None:
    nodes = {"a": {"hostname": "10.0.0.1", "port": 11211, "instance": "A"}, "b": 2}
    ours, theirs = HashRing(nodes), uhashring.HashRing(nodes)
    for getter in ("get_node_hostname", "get_node_port", "get_node_weight", "get_node_instance", "get_key",
                   "hashi"):
        for key in keys_of_every_type(50, 2):
            assert getattr(ours, getter)(key) == getattr(theirs, getter)(key), getter
    assert ours.get_instances() == theirs.get_instances() == ["A"]
    assert isinstance(ours.get_nodes(), type({}.keys()))
    assert isinstance(ours.distribution, Counter)
    assert isinstance(ours.range("k"), types.GeneratorType)
    assert isinstance(ours.iterate_nodes("k"), types.GeneratorType)
    assert ours.conf is ours.nodes is ours._nodes
    assert ours.ring == ours.continuum == ours._ring == theirs.ring
    assert ours._keys == theirs._keys
    assert ours.add_node == ours.__setitem__ and ours.remove_node == ours.__delitem__
    assert ours.get_node_instance == ours.__getitem__
    empty = HashRing()
    for getter in ("get", "get_node", "get_node_instance", "get_node_pos", "get_server", "get_node_weight"):
        assert getattr(empty, getter)("k") is None
    assert empty["k"] is None and empty.size == 0 and empty.ring == {}
    assert HashRing(hash_fn="ketama").hashi("test") == 3446378249
    assert HashRing().hashi("test") == 12707736894140473154801792860916528374


def test_print_continuum_prints_what_uhashring_prints() -> None:
    for mode in MODES:
        for nodes in ([], ["a", "b"]):
            outs = []
            for ring in (HashRing(nodes, **mode), uhashring.HashRing(nodes, **mode)):
                buf = io.StringIO()
                with redirect_stdout(buf):
                    ring.print_continuum()
                outs.append(buf.getvalue())
            assert outs[0] == outs[1]


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        call()
    except Exception as exc:  # the type and message are what is compared
        return type(exc).__name__, str(exc)
    return "ok", ""


@pytest.mark.parametrize("call", [
    lambda m: m.HashRing(None),
    lambda m: m.HashRing(("a", "b")),
    lambda m: m.HashRing({"a": "fail"}),
    lambda m: m.HashRing(["a"], hash_fn=12),
    lambda m: m.HashRing(["a"], weight_fn="coconut"),
    lambda m: m.HashRing(["a"], hash_fn="ketama", weight_fn=12),
    lambda m: m.HashRing({"a": 1.5}),
    lambda m: m.HashRing({"a": 0}, hash_fn="ketama"),
    lambda m: m.HashRing(["a", "b"], hash_fn="ketama", replicas=5),
    lambda m: m.HashRing(["a", "b"]).remove_node("c"),
    lambda m: m.HashRing(["a", "b"], hash_fn="ketama").remove_node("c"),
    lambda m: m.HashRing({"a": 0}).remove_node("a"),
    lambda m: m.HashRing(["a"]).add_node("b", None),
    lambda m: m.HashRing(["a"]).add_node("b", {"weight": "x"}),
    lambda m: m.HashRing(["a"]).get_node("\udc80"),
], ids=["none", "tuple", "str-conf", "hash-fn", "weight-fn", "ketama-weight-fn", "float-weight",
        "zero-weights", "replicas-5", "remove-missing", "ketama-remove-missing", "remove-weightless",
        "conf-none", "str-weight", "surrogate-key"])
def test_errors_match_uhashring(call: Callable[[Any], Any]) -> None:
    ours = outcome(lambda: call(__import__("chash.compat.uhashring", fromlist=["HashRing"])))
    assert ours == outcome(lambda: call(uhashring))
    assert ours[0] != "ok"


def test_a_failed_add_leaves_the_state_uhashring_leaves() -> None:
    # uhashring stores the configuration before range() refuses a str weight;
    # its md5 mode has dropped the node's points from its dict by then (but
    # not from its sorted key list, which goes stale: a lookup that lands
    # on a dropped point raises KeyError there).  Here the ring stays
    # whole: the node keeps its configuration and has no points.
    for mode in MODES:
        ours, theirs = HashRing(["a", "b"], **mode), uhashring.HashRing(["a", "b"], **mode)
        for ring in (ours, theirs):
            with pytest.raises(TypeError):
                ring.add_node("a", {"weight": "x"})
        assert ours._nodes == theirs._nodes
        assert list(ours.ring.items()) == list(theirs.ring.items())
        assert ours.distribution == theirs.distribution
        # ketama refuses before it rebuilds: the ring is as it was.
        expected = {"a", "b"} if mode else {"b"}
        assert {ours.get_node(key) for key in keys_of_every_type(200, 4)} == expected
        ours._check()


def test_pickle_and_copy_keep_the_ring() -> None:
    import copy
    import pickle
    for mode in MODES:
        ring = HashRing({"a": 2, "b": {"vnodes": 30, "instance": "B"}}, **mode)
        for clone in (pickle.loads(pickle.dumps(ring)), copy.deepcopy(ring), copy.copy(ring)):
            assert clone.get_points() == ring.get_points() and clone._nodes == ring._nodes
            assert clone.distribution == ring.distribution


node_names = st.sampled_from([f"node-{i}" for i in range(12)] + ["10.1.2.3:8000", "é"])
confs = st.one_of(st.integers(1, 5), st.fixed_dictionaries(
    {}, optional={"weight": st.integers(1, 5), "vnodes": st.integers(1, 60), "port": st.integers(1, 9)}))
operations = st.lists(st.tuples(st.sampled_from(["add", "remove", "regenerate", "set"]), node_names, confs),
                      max_size=12)


@given(mode=st.sampled_from(MODES), vnodes=st.sampled_from([None, 7, 40]), replicas=st.integers(1, 4),
       ops=operations)
def test_random_sequences_match_uhashring(mode: dict[str, Any], vnodes: int | None, replicas: int,
                                          ops: list[tuple[str, str, Any]]) -> None:
    kwargs = dict(mode, vnodes=vnodes, replicas=replicas)
    ours, theirs = HashRing(**kwargs), uhashring.HashRing(**kwargs)
    keys = keys_of_every_type(60, len(ops))
    for op, name, conf in ops:
        results = []
        for ring in (ours, theirs):
            if op == "add":
                results.append(outcome(partial(ring.add_node, name, conf)))
            elif op == "set":
                results.append(outcome(partial(ring.__setitem__, name, conf)))
            elif op == "remove":
                results.append(outcome(partial(ring.remove_node, name)))
            else:
                results.append(outcome(ring.regenerate))
        assert results[0] == results[1]
        same_state(ours, theirs)
        same_lookups(ours, theirs, keys)


def test_a_subclass_with_a_hash_fn_callable_places_as_uhashring_and_keeps_its_methods() -> None:
    import copy

    def coarse(key: Any) -> int:
        return sum(str(key).encode()) % 97

    class Mine(HashRing):
        def label(self) -> str:
            return "mine"

    ours, theirs = Mine(["a", "b", "c"], hash_fn=coarse), uhashring.HashRing(["a", "b", "c"], hash_fn=coarse)
    assert isinstance(ours, Mine) and ours.label() == "mine"
    same_state(ours, theirs)
    same_lookups(ours, theirs, keys_of_every_type(500, 13))
    plain = Mine(["a", "b"], vnodes=8)
    clone = copy.deepcopy(plain)
    assert type(clone) is Mine and clone.get_points() == plain.get_points()
