"""Fuzzing the Python API of ConsistentHashRouter with Hypothesis.

The C engine has its own libFuzzer target (tests/fuzz/); this file drives
the same ring through the binding, where the inputs are Python objects:
str and bytes keys mixed, lone surrogates, empty and multi-megabyte
strings, node ids with NUL and non-BMP characters, every constructor
argument (virtual_node_count from 1 to a few thousand, each hash by name,
a Python callable, each layout), weights valid and not.

Every answer is compared with a model that shares no code with the router:
tests/_support/reference_router.py's ModelRouter: the documented formula
for MD5 and the documented layout, and for the other hashes and layouts the
same algorithm over the independent oracles of tests/_support/hashes.py
(hashlib, zlib, mmh3, murmurhash2, xxhash, and small Python references
for FNV-1a and the others).  Every failed call must leave the router exactly
as it was, and router._check() runs after every step.

Budget: CHASH_FUZZ_EXAMPLES examples per test when set (for long runs);
else a fixed, derandomized budget under CI (well under a minute on two
cores), and a smaller one otherwise.
"""
from __future__ import annotations

import hashlib
import math
import os
import pickle
import zlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import chash
from _support.ci import in_ci
from _support.hashes import signed_narrow_hash
from _support.reference_router import ModelRouter, as_bytes, assert_same_ring, snapshot
from chash import HASHES, LAYOUTS, MAX_NODE_POINTS, MAX_VIRTUAL_NODES, ConsistentHashRouter

_explicit = int(os.environ.get("CHASH_FUZZ_EXAMPLES", "0") or 0)
IN_CI = in_ci()


def budget(ci: int, dev: int) -> int:
    """Examples for one test: CHASH_FUZZ_EXAMPLES, else the CI or dev figure."""
    return _explicit or (ci if IN_CI else dev)


FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz(ci: int, dev: int) -> settings:
    return settings(FUZZ, max_examples=budget(ci, dev))


# -- user hash functions ---------------------------------------------------------

# Module-level, so routers using them pickle (signed_narrow_hash too).
def wide_hash(data: bytes) -> int:
    """An int far wider than 64 bits; only its value mod 2**32 counts."""
    return int.from_bytes(hashlib.sha256(data).digest(), "big") - (1 << 255)


def bool_hash(data: bytes) -> bool:
    """A bool is an int: positions 0 and 1 only."""
    return len(data) % 2 == 1


CALLABLES: dict[str, Callable[[bytes], int]] = {
    "narrow": signed_narrow_hash, "wide": wide_hash, "bool": bool_hash,
}


# -- strategies -------------------------------------------------------------------

SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\udc80"]
NODE_POOL = ["", "\x00", "a", "a\x00", "ab", "b", "é", "éa", "\U0001F600", "节点", "\x00\x00",
             "node-1", "node-10", "x" * 300, "\U0010FFFF"]

valid_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
node_ids = st.one_of(st.sampled_from(NODE_POOL), st.sampled_from(NODE_POOL), valid_text)
surrogate_text = st.builds(lambda a, s, b: a + s + b, st.text(max_size=4),
                           st.sampled_from(SURROGATES), st.text(max_size=4))
str_keys = st.one_of(valid_text, st.sampled_from(["", "\x00", "\U0001F600" * 3, "é" * 40]),
                     st.text(max_size=200))
byte_keys = st.one_of(st.binary(max_size=70), st.sampled_from([b"", b"\x00", b"\xff" * 64]))
good_keys = st.one_of(str_keys, byte_keys)
# Any key, surrogates included: those must raise UnicodeEncodeError.
any_keys = st.one_of(good_keys, surrogate_text)

good_weights = st.one_of(
    st.sampled_from([1, 2, 3, 1.0, 0.5, 1.5, 2.5, 0.25, 0.01, 1e-9, 5e-324]),
    st.floats(min_value=1e-6, max_value=4.0),
)
BAD_WEIGHTS = [0, -1, 0.0, -0.0, -2.5, math.nan, math.inf, -math.inf, 10**400, -10**400]
BAD_WEIGHT_TYPES = [True, False, "1", None, b"1", 1j]


def has_surrogate(key: object) -> bool:
    return isinstance(key, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in key)


# -- the state machine ------------------------------------------------------------

class BindingMachine(RuleBasedStateMachine):
    """Random programs on one router and on ModelRouter, compared after each step."""

    def __init__(self) -> None:
        super().__init__()
        self.router: ConsistentHashRouter
        self.model: ModelRouter

    # The layouts that take any positive weight; nginx, ketama and
    # libmemcached take their references' integer weights and are driven by
    # tests/ring/test_router_state_machine.py, test_compat.py and, against the
    # programs themselves, test_compat_programs.py.
    @initialize(
        vnodes=st.one_of(st.integers(1, 8), st.integers(1, 8), st.integers(9, 120),
                         st.just(None), st.integers(400, 3000)),
        layout=st.sampled_from(["python", "node"]),
        hash=st.one_of(st.sampled_from(HASHES), st.sampled_from(sorted(CALLABLES))),
    )
    def start(self, vnodes: int | None, layout: str, hash: str) -> None:
        hash_arg: str | Callable = CALLABLES.get(hash, hash)
        self.router = ConsistentHashRouter(vnodes, hash=hash_arg, layout=layout)
        base = vnodes if vnodes is not None else {"python": 100, "node": 150}[layout]
        assert self.router.virtual_node_count == base
        assert self.router.layout == layout
        assert self.router.hash == hash_arg
        self.model = ModelRouter(base, layout, hash_arg)
        note(f"router: {self.router!r}")

    def unchanged(self, before: tuple) -> None:
        assert snapshot(self.router) == before

    # -- membership ---------------------------------------------------------------

    def weight_for(self, weight: float) -> float:
        """Big rings get small weights: the model hashes every point in Python."""
        return min(weight, 1.5) if self.model.virtual_node_count > 120 else weight

    @rule(node=node_ids, weight=good_weights)
    def add(self, node: str, weight: float) -> None:
        weight = self.weight_for(weight)
        self.router.add_service_node(node, weight)
        self.model.weights[node] = float(weight)

    @rule(node=node_ids)
    def add_default(self, node: str) -> None:
        if self.model.virtual_node_count > 1500 and len(self.model.weights) >= 3:
            return
        self.router.add_service_node(node)
        self.model.weights[node] = 1.0

    @rule(nodes=st.lists(node_ids, max_size=6), weight=good_weights)
    def add_many(self, nodes: list[str], weight: float) -> None:
        weight = self.weight_for(weight)
        self.router.add_service_nodes(iter(nodes), weight=weight)
        for node in nodes:
            self.model.weights[node] = float(weight)

    @rule(node=node_ids, weight=st.sampled_from(BAD_WEIGHTS + BAD_WEIGHT_TYPES), many=st.booleans())
    def add_bad_weight(self, node: str, weight: object, many: bool) -> None:
        before = snapshot(self.router)
        with pytest.raises((TypeError, ValueError)):
            if many:
                self.router.add_service_nodes([node], weight)
            else:
                self.router.add_service_node(node, weight)
        self.unchanged(before)

    @rule(node=node_ids, extra=st.integers(0, 3), many=st.booleans())
    def add_too_many_points(self, node: str, extra: int, many: bool) -> None:
        # Just past MAX_NODE_POINTS points (a margin of one for rounding).
        weight = (MAX_NODE_POINTS + 2 + extra) / self.model.virtual_node_count
        before = snapshot(self.router)
        with pytest.raises(ValueError, match="points"):
            if many:
                self.router.add_service_nodes([node], weight=weight)
            else:
                self.router.add_service_node(node, weight)
        self.unchanged(before)

    @rule(node=surrogate_text, weight=good_weights)
    def add_surrogate(self, node: str, weight: float) -> None:
        before = snapshot(self.router)
        with pytest.raises(UnicodeEncodeError):
            self.router.add_service_node(node, weight)
        self.unchanged(before)
        assert node not in self.router

    @rule(good=st.lists(node_ids, max_size=4), poison=st.one_of(surrogate_text, st.sampled_from(
        [b"bytes", 1, None, 1.5])), at=st.integers(0, 4))
    def add_many_poisoned(self, good: list[str], poison: object, at: int) -> None:
        """One bad node anywhere in a batch: nothing at all is added."""
        nodes: list[object] = list(good)
        nodes.insert(min(at, len(nodes)), poison)
        before = snapshot(self.router)
        with pytest.raises((TypeError, UnicodeEncodeError)):
            self.router.add_service_nodes(nodes)
        self.unchanged(before)

    @rule(node=st.one_of(node_ids, st.sampled_from(NODE_POOL)), discard=st.booleans())
    def remove(self, node: str, discard: bool) -> None:
        if node in self.model.weights:
            if discard:
                self.router.discard_service_node(node)
            else:
                self.router.remove_service_node(node)
            del self.model.weights[node]
            return
        before = snapshot(self.router)
        if discard:
            self.router.discard_service_node(node)
        else:
            with pytest.raises(KeyError) as info:
                self.router.remove_service_node(node)
            assert info.value.args == (node,)
        self.unchanged(before)

    @precondition(lambda self: self.model.weights)
    @rule(data=st.data())
    def remove_present(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(list(self.model.weights)))
        self.router.remove_service_node(node)
        del self.model.weights[node]

    @rule(node=st.one_of(surrogate_text, st.sampled_from([b"a", 1, None])), discard=st.booleans())
    def remove_bad(self, node: object, discard: bool) -> None:
        before = snapshot(self.router)
        with pytest.raises((TypeError, UnicodeEncodeError)):
            if discard:
                self.router.discard_service_node(node)
            else:
                self.router.remove_service_node(node)
        self.unchanged(before)
        assert node not in self.router

    # -- lookups ------------------------------------------------------------------

    @rule(key=any_keys)
    def lookup(self, key: str | bytes) -> None:
        if has_surrogate(key):
            before = snapshot(self.router)
            for call in (self.router.get_target_node, self.router._calculate_hash,
                         lambda k: self.router.get_preference_list(k, 2)):
                with pytest.raises(UnicodeEncodeError):
                    call(key)
            self.unchanged(before)
            return
        expected = self.model.get_target_node(key)
        assert self.router.get_target_node(key) == expected
        assert self.router._calculate_hash(key) == self.model.key_point(key)
        if isinstance(key, str):
            assert self.router.get_target_node(as_bytes(key)) == expected

    @rule(keys=st.lists(any_keys, max_size=11), container=st.sampled_from(["list", "tuple", "iter"]))
    def lookup_many(self, keys: list[str | bytes], container: str) -> None:
        def wrap(seq):
            return {"list": list, "tuple": tuple, "iter": iter}[container](seq)

        if any(has_surrogate(k) for k in keys):
            before = snapshot(self.router)
            with pytest.raises(UnicodeEncodeError):
                self.router.get_target_nodes(wrap(keys))
            with pytest.raises(UnicodeEncodeError):
                self.router.key_distribution(wrap(keys))
            self.unchanged(before)
            return
        expected = [self.model.get_target_node(k) for k in keys]
        assert self.router.get_target_nodes(wrap(keys)) == expected
        counts = {node: 0 for node in self.model.weights}
        for node in expected:
            if node is not None:
                counts[node] += 1
        assert self.router.key_distribution(wrap(keys)) == counts

    @rule(key=good_keys, n=st.one_of(st.integers(0, 10), st.just(2**80), st.just(2**63 - 1)))
    def preference(self, key: str | bytes, n: int) -> None:
        expected = self.model.preference(key, n)
        assert self.router.get_preference_list(key, n) == expected
        if expected:
            assert expected[0] == self.model.get_target_node(key)

    @rule(key=good_keys, n=st.one_of(st.integers(-5, -1), st.just(-2**80)))
    def preference_negative(self, key: str | bytes, n: int) -> None:
        with pytest.raises(ValueError):
            self.router.get_preference_list(key, n)

    @rule()
    def ownership(self) -> None:
        got = self.router.ownership()
        want = self.model.ownership()
        assert got.keys() == want.keys()
        for node, share in want.items():
            assert math.isclose(got[node], share, rel_tol=1e-9, abs_tol=1e-12), node
        if want:
            assert math.isclose(sum(got.values()), 1.0, rel_tol=1e-9)

    @rule()
    def pickle_round_trip(self) -> None:
        copy = pickle.loads(pickle.dumps(self.router))
        assert copy == self.router
        assert snapshot(copy) == snapshot(self.router)
        copy._check()

    # -- after every step ---------------------------------------------------------

    @invariant()
    def agrees_with_model(self) -> None:
        assert_same_ring(self.router, self.model)
        assert self.router.memory_bytes >= 8 * len(self.model.points())


def test_binding_state_machine() -> None:
    run_state_machine_as_test(
        BindingMachine,
        settings=settings(FUZZ, max_examples=budget(ci=150, dev=60), stateful_step_count=25),
    )


# -- single calls ------------------------------------------------------------------

@fuzz(ci=400, dev=200)
@given(
    vnodes=st.one_of(st.none(), st.integers(), st.integers(-2, 3),
                     st.sampled_from([MAX_VIRTUAL_NODES, MAX_VIRTUAL_NODES + 1, 2**63, -2**63, 2**100]),
                     st.sampled_from([True, False, 1.0, "3", b"3"])),
    hash=st.one_of(st.sampled_from(HASHES), st.text(max_size=8),
                   st.sampled_from(["md5\x00", "MD5", " md5", "\ud800", b"md5", None, 5, signed_narrow_hash])),
    layout=st.one_of(st.sampled_from(LAYOUTS), st.text(max_size=8),
                     st.sampled_from(["python\x00", "Python", "\udfff", b"node", None, 1])),
)
def test_constructor_arguments(vnodes: object, hash: object, layout: object) -> None:
    """Any arguments give a router or a TypeError/ValueError, never more."""
    try:
        router = ConsistentHashRouter(vnodes, hash=hash, layout=layout)
    except (TypeError, ValueError):
        valid = (
            (vnodes is None or (type(vnodes) is int and 1 <= vnodes <= MAX_VIRTUAL_NODES
                                and (layout != "haproxy" or vnodes == 16)
                                and (layout != "nghttpx" or vnodes == 160)))
            and (callable(hash) or hash in HASHES or hash is None)
            and layout in LAYOUTS
            and scheme_exists(layout, hash)
        )
        assert not valid
        return
    assert vnodes is None or (type(vnodes) is int and 1 <= vnodes <= MAX_VIRTUAL_NODES)
    assert layout in LAYOUTS and (callable(hash) or hash in HASHES or hash is None)
    assert scheme_exists(layout, hash)
    assert router.layout == layout and router.hash == (hash if hash is not None else LAYOUT_HASH[layout])
    # nghttpx hashes a backend's address: its nodes are HOST:PORT
    node = "10.0.0.1:80" if layout == "nghttpx" else "n"
    if router.virtual_node_count <= 5000:
        try:
            router.add_service_node(node)
        except ValueError as exc:
            # Ketama's points come in fours (one MD5 digest each): with
            # fewer than 4 per node a lone node would own none, and is
            # refused, the router left empty.
            assert "would own 0 points" in str(exc) and router.virtual_node_count < 4
            assert router.get_target_node("k") is None and not router.node_map
            return
        assert router.get_target_node("k") == node
        router._check()


# The hash each layout uses by default, and the hashes it is defined over
# (any hash, or a callable, where absent).
LAYOUT_HASH = {"python": "md5", "node": "md5", "ketama": "md5", "nginx": "crc32",
               "libmemcached": "one_at_a_time", "haproxy": "sdbm_avalanche", "varnish": "sha256",
               "nghttpx": "sha256"}
LAYOUT_HASHES = {"ketama": {"md5"}, "nginx": {"crc32"}, "libmemcached": {"one_at_a_time", "md5"},
                 "varnish": {"sha256"}, "nghttpx": {"sha256"},
                 "haproxy": {"sdbm", "djb2", "wt6", "crc32", "sdbm_avalanche", "djb2_avalanche",
                             "wt6_avalanche", "crc32_avalanche"}}


def scheme_exists(layout: object, hash: object) -> bool:
    if hash is None or layout not in LAYOUT_HASHES:
        return True
    return not callable(hash) and hash in LAYOUT_HASHES[str(layout)]


@fuzz(ci=300, dev=150)
@given(key=any_keys, layout=st.sampled_from(LAYOUTS), hash=st.sampled_from(HASHES))
def test_key_hash_every_scheme(key: str | bytes, layout: str, hash: str) -> None:
    assume(scheme_exists(layout, hash))
    # haproxy's points per weight are HAProxy's 16, nghttpx's 160, not settings
    vnodes = None if layout in ("haproxy", "nghttpx") else 3
    router = ConsistentHashRouter(vnodes, hash=hash, layout=layout)
    if has_surrogate(key):
        with pytest.raises(UnicodeEncodeError):
            router._calculate_hash(key)
        return
    assert router._calculate_hash(key) == ModelRouter(3, layout, hash).key_point(key)


@fuzz(ci=40, dev=20)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 55, 56, 64, 1 << 20, (1 << 20) + 7, 3 << 20]),
                   min_size=1, max_size=6),
    char=st.sampled_from(["a", "é", "\U0001F600", "\x00"]),
    hash=st.sampled_from(["md5", "sha1", "xxh3", "murmur3", "crc32"]),
)
def test_huge_and_empty_keys(sizes: list[int], char: str, hash: str) -> None:
    """Keys of megabytes, alone and in batches (MD5's four lanes of very
    different lengths), route as the model says."""
    router = ConsistentHashRouter(8, hash=hash)
    model = ModelRouter(8, "python", hash)
    for node in ("a", "b\x00", "\U0001F600", ""):
        router.add_service_node(node)
        model.weights[node] = 1.0
    keys: list[str | bytes] = []
    for i, size in enumerate(sizes):
        text = (char * size)[:size] if char != "\U0001F600" else char * (size // 4)
        keys.append(text if i % 2 == 0 else text.encode("utf-8"))
    expected = [model.get_target_node(k) for k in keys]
    assert router.get_target_nodes(keys) == expected
    assert [router.get_target_node(k) for k in keys] == expected
    assert router._calculate_hash(keys[0]) == model.key_point(keys[0])


@fuzz(ci=60, dev=30)
@given(
    nodes=st.lists(node_ids, min_size=1, max_size=5, unique=True),
    keys=st.lists(good_keys, max_size=8),
    returns=st.sampled_from([0, -1, 2**32, 2**64 - 1, 2**64, -2**64 - 3, 2**200 + 5, True, False]),
)
def test_python_hash_results_mod_2_32(nodes: list[str], keys: list, returns: int) -> None:
    """A callable's result counts modulo 2**32, however wide or negative."""
    router = ConsistentHashRouter(3, hash=lambda data: returns + len(data))
    for node in nodes:
        router.add_service_node(node)
    router._check()
    for key in keys:
        assert router._calculate_hash(key) == (returns + len(as_bytes(key))) % 2**32
    model = ModelRouter(3, "python", lambda data: returns + len(data))
    for node in nodes:
        model.weights[node] = 1.0
    assert router.get_target_nodes(keys) == [model.get_target_node(k) for k in keys]


class HashFailure(Exception):
    pass


@fuzz(ci=80, dev=40)
@given(
    present=st.lists(node_ids, max_size=4, unique=True),
    nodes=st.lists(node_ids, min_size=1, max_size=4, unique=True),
    fail_after=st.integers(0, 30),
    result=st.sampled_from(["raise", "str", "float", "none"]),
    weight=st.sampled_from([0.5, 1.0, 3.0]),
)
def test_python_hash_failing_midway(present: list[str], nodes: list[str], fail_after: int,
                                    result: str, weight: float) -> None:
    """A callable that raises or returns a non-int after some calls: adds,
    reweighs and lookups fail with its error and change nothing."""
    armed = [False]
    calls = [0]

    def flaky(data: bytes) -> object:
        if armed[0]:
            calls[0] += 1
            if calls[0] > fail_after:
                if result == "raise":
                    raise HashFailure(data)
                return {"str": "1", "float": 1.0, "none": None}[result]
        return zlib.crc32(data)

    router = ConsistentHashRouter(4, hash=flaky)
    for node in present:
        router.add_service_node(node)
    before = snapshot(router)
    error = HashFailure if result == "raise" else TypeError
    for action in (
        lambda: router.add_service_nodes(nodes, weight),
        lambda: [router.add_service_node(n, weight) for n in nodes],
        lambda: router.get_target_nodes([n.encode() for n in nodes] * 3),
        lambda: router.key_distribution(nodes),
        lambda: router.get_preference_list(nodes[0], 3),
    ):
        armed[0], calls[0] = True, 0
        try:
            action()
        except error:
            armed[0] = False
            after = snapshot(router)
            # One by one, the nodes before the failure are in; nothing else moved.
            assert set(after[0]) >= set(before[0])
            router._check()
            for node in after[0]:
                if node not in before[0]:
                    assert node in nodes
            for n in list(router.nodes):
                if n not in present:
                    router.remove_service_node(n)
            for n in present:
                router.add_service_node(n)
            assert snapshot(router) == before
        armed[0] = False
        router._check()


def test_python_hash_failure_changes_nothing() -> None:
    """A hash failing on the last node of a batch adds none of them; failing
    while a node's weight grows or shrinks leaves the node as it was."""
    fail_on: list[bytes] = [b"zed"]

    def picky(data: bytes) -> int:
        if any(data.startswith(prefix) for prefix in fail_on):
            raise HashFailure(data)
        return zlib.crc32(data)

    router = ConsistentHashRouter(5, hash=picky)
    router.add_service_node("present", weight=2)
    before = snapshot(router)
    with pytest.raises(HashFailure):
        router.add_service_nodes(["a", "b", "zed"])
    assert snapshot(router) == before
    fail_on[:] = [b"present_virtual_12"]
    with pytest.raises(HashFailure):
        router.add_service_node("present", weight=3)  # points 10..14
    assert snapshot(router) == before
    fail_on[:] = [b"present_virtual_7"]
    with pytest.raises(HashFailure):
        router.add_service_node("present", weight=1)  # points 5..9 go
    assert snapshot(router) == before
    router._check()


@fuzz(ci=20, dev=10)
@given(vnodes=st.sampled_from([1, 2, 999, 1000, 2500, 4000]),
       nodes=st.lists(node_ids, min_size=1, max_size=3, unique=True),
       keys=st.lists(good_keys, min_size=1, max_size=20))
def test_virtual_node_count_extremes(vnodes: int, nodes: list[str], keys: list) -> None:
    """The documented layout at the smallest and at thousands of points a node."""
    router = ConsistentHashRouter(vnodes)
    model = ModelRouter(vnodes, "python", "md5")
    router.add_service_nodes(nodes)
    for node in nodes:
        model.weights[node] = 1.0
    router._check()
    assert len(router.hash_ring) == vnodes * len(nodes)
    assert router.get_target_nodes(keys) == [model.get_target_node(k) for k in keys]
    router.remove_service_node(nodes[0])
    del model.weights[nodes[0]]
    assert router.get_target_nodes(keys) == [model.get_target_node(k) for k in keys]
    router._check()


def test_module_limits_are_the_documented_ones() -> None:
    assert MAX_VIRTUAL_NODES == 1_000_000
    assert chash.MAX_NODE_POINTS == 1 << 24
    assert chash.MAX_POINTS == 1 << 28
    assert chash.MAX_NODES == 1 << 20
    for bad in (0, -1, MAX_VIRTUAL_NODES + 1, 2**64):
        with pytest.raises(ValueError):
            ConsistentHashRouter(bad)
