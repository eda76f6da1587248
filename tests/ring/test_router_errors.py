"""The error matrix: every entry point against every kind of bad input.

Each case checks the exception type, that its message names the problem,
and that the router is exactly as it was before the failed call.
"""
from __future__ import annotations

import hashlib
from decimal import Decimal
from fractions import Fraction

import pytest

from _support.reference_router import snapshot
from chash import MAX_VIRTUAL_NODES, ConsistentHashRouter

NODES = {"api-1": 1.0, "api-2": 2.0, "é": 0.5}


def make_router(**kwargs) -> ConsistentHashRouter:
    router = ConsistentHashRouter(10, **kwargs)
    for node, weight in NODES.items():
        router.add_service_node(node, weight)
    return router


def assert_fails_cleanly(router: ConsistentHashRouter, call, exc: type[BaseException], match: str | None):
    before = snapshot(router)
    with pytest.raises(exc, match=match) as info:
        call(router)
    assert snapshot(router) == before
    router._check()
    return info


# -- bad keys ------------------------------------------------------------------

BAD_KEYS = [
    pytest.param(1, TypeError, r"key must be str or bytes, not int", id="int"),
    pytest.param(None, TypeError, r"key must be str or bytes, not NoneType", id="None"),
    pytest.param(True, TypeError, r"key must be str or bytes, not bool", id="bool"),
    pytest.param(1.5, TypeError, r"key must be str or bytes, not float", id="float"),
    pytest.param(bytearray(b"a"), TypeError, r"key must be str or bytes, not bytearray", id="bytearray"),
    pytest.param(memoryview(b"a"), TypeError, r"key must be str or bytes, not memoryview", id="memoryview"),
    pytest.param(["a"], TypeError, r"key must be str or bytes, not list", id="list"),
    pytest.param("\ud800", UnicodeEncodeError, r"surrogates not allowed", id="lone-surrogate"),
    pytest.param("ok\udfffok", UnicodeEncodeError, r"surrogates not allowed", id="inner-surrogate"),
]

KEY_CALLS = {
    "get_target_node": lambda r, k: r.get_target_node(k),
    "_calculate_hash": lambda r, k: r._calculate_hash(k),
    "get_preference_list": lambda r, k: r.get_preference_list(k, 2),
    "get_target_nodes[0]": lambda r, k: r.get_target_nodes([k]),
    "get_target_nodes[3]": lambda r, k: r.get_target_nodes(["a", "b", "c", k, "e"]),
    "get_target_nodes[5]": lambda r, k: r.get_target_nodes(["a", "b", "c", "d", "e", k]),
    "key_distribution[0]": lambda r, k: r.key_distribution([k]),
    "key_distribution[6]": lambda r, k: r.key_distribution(["a"] * 6 + [k, "b"]),
}


@pytest.mark.parametrize("key,exc,match", BAD_KEYS)
@pytest.mark.parametrize("method", sorted(KEY_CALLS))
def test_bad_keys(method, key, exc, match) -> None:
    call = KEY_CALLS[method]
    assert_fails_cleanly(make_router(), lambda r: call(r, key), exc, match)
    # An empty ring still checks the key rather than answering None.
    assert_fails_cleanly(ConsistentHashRouter(10), lambda r: call(r, key), exc, match)


@pytest.mark.parametrize("keys,match", [
    (1, r"keys must be an iterable"),
    (None, r"keys must be an iterable"),
    (1.5, r"keys must be an iterable"),
    (b"ab", r"key must be str or bytes, not int"),
])
@pytest.mark.parametrize("method", ["get_target_nodes", "key_distribution"])
def test_bad_key_collections(method, keys, match) -> None:
    assert_fails_cleanly(make_router(), lambda r: getattr(r, method)(keys), TypeError, match)


def test_an_iterator_that_raises_propagates() -> None:
    class Boom(Exception):
        pass

    def keys():
        yield "a"
        raise Boom("keys failed")

    router = make_router()
    assert_fails_cleanly(router, lambda r: r.get_target_nodes(keys()), Boom, "keys failed")
    assert_fails_cleanly(router, lambda r: r.key_distribution(keys()), Boom, "keys failed")


# -- bad node ids --------------------------------------------------------------

BAD_NODES = [
    pytest.param(1, TypeError, r"node id must be str, not int", id="int"),
    pytest.param(None, TypeError, r"node id must be str, not NoneType", id="None"),
    pytest.param(True, TypeError, r"node id must be str, not bool", id="bool"),
    pytest.param(b"api-1", TypeError, r"node id must be str, not bytes", id="bytes"),
    pytest.param(bytearray(b"api-1"), TypeError, r"node id must be str, not bytearray", id="bytearray"),
    pytest.param(("api-1",), TypeError, r"node id must be str, not tuple", id="tuple"),
    pytest.param("\ud800", UnicodeEncodeError, r"surrogates not allowed", id="lone-surrogate"),
    pytest.param("api-\udc80", UnicodeEncodeError, r"surrogates not allowed", id="inner-surrogate"),
]

NODE_CALLS = {
    "add_service_node": lambda r, n: r.add_service_node(n),
    "add_service_node+weight": lambda r, n: r.add_service_node(n, 2),
    "remove_service_node": lambda r, n: r.remove_service_node(n),
    "discard_service_node": lambda r, n: r.discard_service_node(n),
}


@pytest.mark.parametrize("node,exc,match", BAD_NODES)
@pytest.mark.parametrize("method", sorted(NODE_CALLS))
def test_bad_node_ids(method, node, exc, match) -> None:
    assert_fails_cleanly(make_router(), lambda r: NODE_CALLS[method](r, node), exc, match)


@pytest.mark.parametrize("node", ["absent", "", "API-1", "api-1 ", "e\u0301"])
def test_removing_an_absent_node_raises_key_error_naming_it(node) -> None:
    info = assert_fails_cleanly(make_router(), lambda r: r.remove_service_node(node), KeyError, None)
    assert info.value.args == (node,)
    assert repr(node) in str(info.value)


def test_discarding_an_absent_node_changes_nothing() -> None:
    router = make_router()
    before = snapshot(router)
    router.discard_service_node("absent")
    router.discard_service_node("e\u0301")  # not the same str as "é"
    assert snapshot(router) == before


def test_removing_twice_raises_the_second_time() -> None:
    router = make_router()
    router.remove_service_node("api-2")
    assert_fails_cleanly(router, lambda r: r.remove_service_node("api-2"), KeyError, "api-2")


# -- bad weights -----------------------------------------------------------------

BAD_WEIGHTS = [
    pytest.param(0, ValueError, r"weight must be a finite number > 0", id="0"),
    pytest.param(0.0, ValueError, r"weight must be a finite number > 0", id="0.0"),
    pytest.param(-0.0, ValueError, r"weight must be a finite number > 0", id="-0.0"),
    pytest.param(-1, ValueError, r"weight must be a finite number > 0", id="-1"),
    pytest.param(-1e-300, ValueError, r"weight must be a finite number > 0", id="tiny-negative"),
    pytest.param(float("nan"), ValueError, r"weight must be a finite number > 0", id="nan"),
    pytest.param(float("inf"), ValueError, r"weight must be a finite number > 0", id="inf"),
    pytest.param(float("-inf"), ValueError, r"weight must be a finite number > 0", id="-inf"),
    pytest.param(1e30, ValueError, r"weight gives node .* more than \d+ points", id="1e30"),
    pytest.param(10**400, ValueError, r"weight", id="int-beyond-float"),
    pytest.param("2", TypeError, r"weight must be int or float, not str", id="str"),
    pytest.param(None, TypeError, r"weight must be int or float, not NoneType", id="None"),
    pytest.param(True, TypeError, r"weight must be int or float, not bool", id="True"),
    pytest.param(False, TypeError, r"weight must be int or float, not bool", id="False"),
    pytest.param([1], TypeError, r"weight must be int or float, not list", id="list"),
    pytest.param(Decimal("1.5"), TypeError, r"weight must be int or float, not decimal.Decimal",
                 id="Decimal"),
    pytest.param(Fraction(1, 2), TypeError, r"weight must be int or float, not Fraction", id="Fraction"),
    pytest.param(1 + 0j, TypeError, r"weight must be int or float, not complex", id="complex"),
]


@pytest.mark.parametrize("weight,exc,match", BAD_WEIGHTS)
@pytest.mark.parametrize("node", ["new-node", "api-2"], ids=["new", "present"])
def test_bad_weights(node, weight, exc, match) -> None:
    assert_fails_cleanly(make_router(), lambda r: r.add_service_node(node, weight), exc, match)
    assert_fails_cleanly(make_router(), lambda r: r.add_service_node(node, weight=weight), exc, match)


def test_bad_argument_shapes_of_add() -> None:
    router = make_router()
    assert_fails_cleanly(router, lambda r: r.add_service_node(), TypeError, "real_node_id")
    assert_fails_cleanly(router, lambda r: r.add_service_node("x", 1, 2), TypeError, "at most 2")
    assert_fails_cleanly(router, lambda r: r.add_service_node("x", wieght=2), TypeError, "wieght")


# -- preference lists ------------------------------------------------------------

BAD_COUNTS = [
    pytest.param(-1, ValueError, r"n must be >= 0", id="-1"),
    pytest.param(-(2**100), ValueError, r"n must be >= 0", id="-2**100"),
    pytest.param(1.5, TypeError, r"n must be int, not float", id="float"),
    pytest.param(2.0, TypeError, r"n must be int, not float", id="integral-float"),
    pytest.param("2", TypeError, r"n must be int, not str", id="str"),
    pytest.param(None, TypeError, r"n must be int, not NoneType", id="None"),
    pytest.param(True, TypeError, r"n must be int, not bool", id="bool"),
]


@pytest.mark.parametrize("n,exc,match", BAD_COUNTS)
def test_bad_preference_counts(n, exc, match) -> None:
    assert_fails_cleanly(make_router(), lambda r: r.get_preference_list("k", n), exc, match)
    assert_fails_cleanly(ConsistentHashRouter(3), lambda r: r.get_preference_list("k", n), exc, match)


def test_bad_preference_argument_counts() -> None:
    router = make_router()
    assert_fails_cleanly(router, lambda r: r.get_preference_list("k"), TypeError, "2 arguments")
    assert_fails_cleanly(router, lambda r: r.get_preference_list("k", 1, 2), TypeError, "2 arguments")
    assert_fails_cleanly(router, lambda r: r.get_preference_list(), TypeError, "2 arguments")


def test_methods_without_arguments_reject_them() -> None:
    router = make_router()
    for name in ["ownership", "fingerprint", "_check"]:
        assert_fails_cleanly(router, lambda r, name=name: getattr(r, name)(1), TypeError, "argument")
    assert_fails_cleanly(router, lambda r: r.get_target_node(), TypeError, "argument")
    assert_fails_cleanly(router, lambda r: r.get_target_node("a", "b"), TypeError, "argument")


# -- the constructor -------------------------------------------------------------

BAD_CONSTRUCTIONS = [
    pytest.param({"virtual_node_count": 0}, ValueError,
                 rf"virtual_node_count must be between 1 and {MAX_VIRTUAL_NODES}, not 0", id="vnodes=0"),
    pytest.param({"virtual_node_count": -1}, ValueError, r"virtual_node_count must be between", id="vnodes=-1"),
    pytest.param({"virtual_node_count": MAX_VIRTUAL_NODES + 1}, ValueError,
                 r"virtual_node_count must be between", id="vnodes=max+1"),
    pytest.param({"virtual_node_count": 2**100}, ValueError, r"virtual_node_count must be between",
                 id="vnodes=2**100"),
    pytest.param({"virtual_node_count": -(2**100)}, ValueError, r"virtual_node_count must be between",
                 id="vnodes=-2**100"),
    pytest.param({"virtual_node_count": 1.5}, TypeError, r"virtual_node_count must be int, not float",
                 id="vnodes=1.5"),
    pytest.param({"virtual_node_count": 3.0}, TypeError, r"virtual_node_count must be int, not float",
                 id="vnodes=3.0"),
    pytest.param({"virtual_node_count": "3"}, TypeError, r"virtual_node_count must be int, not str",
                 id="vnodes='3'"),
    pytest.param({"virtual_node_count": True}, TypeError, r"virtual_node_count must be int, not bool",
                 id="vnodes=True"),
    pytest.param({"virtual_node_count": False}, TypeError, r"virtual_node_count must be int, not bool",
                 id="vnodes=False"),
    pytest.param({"virtual_node_count": Decimal(3)}, TypeError, r"virtual_node_count must be int",
                 id="vnodes=Decimal"),
    pytest.param({"hash": "nope"}, ValueError, r"unknown hash 'nope'", id="hash=nope"),
    pytest.param({"hash": "MD5"}, ValueError, r"unknown hash 'MD5'", id="hash=MD5"),
    pytest.param({"hash": ""}, ValueError, r"unknown hash ''", id="hash=empty"),
    pytest.param({"hash": "md5 "}, ValueError, r"unknown hash", id="hash=trailing-space"),
    pytest.param({"hash": "md5\x00junk"}, ValueError, r"unknown hash", id="hash=embedded-NUL"),
    pytest.param({"hash": "\ud800"}, (ValueError, UnicodeEncodeError), r"unknown hash|surrogates",
                 id="hash=surrogate"),
    pytest.param({"layout": "nginx", "hash": "md5"}, ValueError, r"nginx.*crc32", id="nginx+md5"),
    pytest.param({"layout": "libmemcached", "hash": "crc32"}, ValueError, r"libmemcached.*one_at_a_time",
                 id="libmemcached+crc32"),
    pytest.param({"hash": 5}, TypeError, r"hash must be a str or a callable, not int", id="hash=5"),
    pytest.param({"hash": b"md5"}, TypeError, r"hash must be a str or a callable, not bytes", id="hash=bytes"),
    pytest.param({"layout": "nope"}, ValueError, r"unknown layout 'nope'", id="layout=nope"),
    pytest.param({"layout": "Python"}, ValueError, r"unknown layout 'Python'", id="layout=Python"),
    pytest.param({"layout": ""}, ValueError, r"unknown layout", id="layout=empty"),
    pytest.param({"layout": "python\x00"}, ValueError, r"null character|unknown layout", id="layout=NUL"),
    pytest.param({"layout": None}, TypeError, r"layout.* must be str, not None", id="layout=None"),
    pytest.param({"layout": 1}, TypeError, r"layout.* must be str, not int", id="layout=1"),
    pytest.param({"layout": "ketama", "hash": "sha1"}, ValueError, r"ketama.*md5", id="ketama+sha1"),
    pytest.param({"layout": "ketama", "hash": "crc32"}, ValueError, r"ketama.*md5", id="ketama+crc32"),
    pytest.param({"layout": "ketama", "hash": hash}, ValueError, r"ketama.*md5", id="ketama+callable"),
    pytest.param({"vnodes": 3}, TypeError, r"vnodes", id="unknown-keyword"),
]


@pytest.mark.parametrize("kwargs,exc,match", BAD_CONSTRUCTIONS)
def test_bad_constructions(kwargs, exc, match) -> None:
    with pytest.raises(exc, match=match):
        ConsistentHashRouter(**kwargs)


def test_hash_and_layout_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        ConsistentHashRouter(10, "md5")
    with pytest.raises(TypeError):
        ConsistentHashRouter(10, "md5", "python")


def test_constructor_boundaries_are_accepted() -> None:
    assert ConsistentHashRouter(1).virtual_node_count == 1
    assert ConsistentHashRouter(MAX_VIRTUAL_NODES).virtual_node_count == MAX_VIRTUAL_NODES
    assert ConsistentHashRouter(None).virtual_node_count == 100
    assert ConsistentHashRouter(virtual_node_count=None, layout="node").virtual_node_count == 150


# -- user hash functions -------------------------------------------------------------


class Failure(Exception):
    pass


class SwitchableHash:
    """MD5 as an int, or, once switched, a chosen misbehaviour."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.trigger = b""

    def __call__(self, data: bytes):
        if self.mode == "ok" or self.trigger not in data:
            return int.from_bytes(hashlib.md5(data).digest(), "big")
        if self.mode == "raise":
            raise Failure(f"cannot hash {data!r}")
        return {"str": "12", "float": 1.5, "none": None, "bytes": b"\x01"}[self.mode]


MISBEHAVIOURS = [
    pytest.param("raise", Failure, r"cannot hash", id="raises"),
    pytest.param("str", TypeError, r"hash function must return int, not str", id="returns-str"),
    pytest.param("float", TypeError, r"hash function must return int, not float", id="returns-float"),
    pytest.param("none", TypeError, r"hash function must return int, not NoneType", id="returns-None"),
    pytest.param("bytes", TypeError, r"hash function must return int, not bytes", id="returns-bytes"),
]

HASH_CALLS = {
    "add": (lambda r: r.add_service_node("fresh"), b"fresh"),
    # Fails on the fourth point only: three points were already computed.
    "add-late": (lambda r: r.add_service_node("fresh"), b"fresh_virtual_3"),
    "reweigh-up": (lambda r: r.add_service_node("api-1", 3), b"api-1_virtual_2"),
    "reweigh-down": (lambda r: r.add_service_node("api-2", 0.5), b"api-2_virtual_1"),
    "get_target_node": (lambda r: r.get_target_node("user"), b"user"),
    "_calculate_hash": (lambda r: r._calculate_hash(b"user"), b"user"),
    "get_preference_list": (lambda r: r.get_preference_list("user", 2), b"user"),
    "get_target_nodes": (lambda r: r.get_target_nodes(["a", "b", "user", "c", "d"]), b"user"),
    "key_distribution": (lambda r: r.key_distribution(["a", "b", "c", "d", "user"]), b"user"),
}


@pytest.mark.parametrize("mode,exc,match", MISBEHAVIOURS)
@pytest.mark.parametrize("method", sorted(HASH_CALLS))
@pytest.mark.parametrize("layout", ["python", "node"])
def test_a_misbehaving_hash_function_propagates_and_changes_nothing(layout, method, mode, exc, match) -> None:
    fn = SwitchableHash()
    router = make_router(hash=fn, layout=layout)
    call, trigger = HASH_CALLS[method]
    if layout == "node":
        trigger = trigger.replace(b"_virtual_", b"#vnode")
    before = snapshot(router)
    fn.mode, fn.trigger = mode, trigger
    with pytest.raises(exc, match=match):
        call(router)
    fn.mode = "ok"
    assert snapshot(router) == before
    router._check()
    call(router)  # and works again once the hash behaves


def test_a_hash_function_that_raises_base_exceptions_propagates_them() -> None:
    def interrupted(data: bytes) -> int:
        raise KeyboardInterrupt

    router = ConsistentHashRouter(3, hash=interrupted)
    with pytest.raises(KeyboardInterrupt):
        router.add_service_node("a")
    with pytest.raises(KeyboardInterrupt):
        router.get_target_node("a")
    assert len(router) == 0 and router.hash_ring == []


# -- protocols ------------------------------------------------------------------


def test_ordering_and_hashing_are_refused() -> None:
    router = make_router()
    for op in [lambda: router < router, lambda: router <= make_router(), lambda: router > 1]:
        with pytest.raises(TypeError, match="not supported"):
            op()
    with pytest.raises(TypeError, match="unhashable type"):
        hash(router)


def test_read_only_properties() -> None:
    router = make_router()
    for name, value in [("virtual_node_count", 5), ("hash_ring", []), ("node_map", {}),
                        ("nodes", []), ("weights", {}), ("points", {}), ("hash", "sha1"),
                        ("layout", "node"), ("memory_bytes", 0)]:
        before = snapshot(router)
        with pytest.raises(AttributeError, match=name):
            setattr(router, name, value)
        with pytest.raises(AttributeError):
            delattr(router, name)
        assert snapshot(router) == before
