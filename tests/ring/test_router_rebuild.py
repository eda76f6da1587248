"""Routers built whole from (node, weight) pairs: unpickling (``_rebuild``)
and ``_replace_nodes``.  Pickles made before this code still load and route
the same, and a replacement is all-or-nothing."""
from __future__ import annotations

import base64
import pickle
from collections.abc import Callable

import pytest

from _support.hashes import narrow_hash
from chash import ConsistentHashRouter
from chash._chash import _rebuild

KEYS = [f"key-{i}" for i in range(0, 2000, 7)] + ["", "\x00", "\U0001F600", "节点"]


def _python() -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    router.add_service_nodes(["a", "b", "c"])
    router.add_service_node("d", 2.5)
    return router


def _node() -> ConsistentHashRouter:
    router = ConsistentHashRouter(40, hash="xxh3", layout="node")
    router.add_service_nodes(["n1", "n2"])
    router.add_service_node("n3", 0.5)
    return router


def _ketama() -> ConsistentHashRouter:
    router = ConsistentHashRouter(layout="ketama")
    for node, weight in [("10.0.0.1:11211", 1), ("10.0.0.2:11211", 3), ("10.0.0.3:11211", 2)]:
        router.add_service_node(node, weight)
    return router


def _nginx() -> ConsistentHashRouter:
    router = ConsistentHashRouter(layout="nginx")
    router.add_service_node("10.0.0.1:80", 1)
    router.add_service_node("10.0.0.2:80", 2)
    return router


def _libmemcached() -> ConsistentHashRouter:
    router = ConsistentHashRouter(layout="libmemcached")
    router.add_service_nodes(["m1:11211", "m2:11211", "m3:11211"])
    return router


def _libmemcached_weighted() -> ConsistentHashRouter:
    router = ConsistentHashRouter(layout="libmemcached", hash="md5")
    router.add_service_node("m1:11211", 1)
    router.add_service_node("m2:11211", 4)
    return router


BUILDERS: dict[str, Callable[[], ConsistentHashRouter]] = {
    "python": _python,
    "node": _node,
    "ketama": _ketama,
    "nginx": _nginx,
    "libmemcached": _libmemcached,
    "libmemcached-weighted": _libmemcached_weighted,
    "empty": lambda: ConsistentHashRouter(7),
}

# What pickle.dumps(BUILDERS[name](), protocol=4) gave with the code of
# a5b9db3, base64, and the fingerprint of that router then.
PICKLES: dict[str, tuple[str, str]] = {
    "python": (
        "b8b60b4251c5fab5",
        "gASVlAAAAAAAAACMDGNoYXNoLl9jaGFzaJSMCF9yZWJ1aWxklJOUKIwFY2hhc2iUjBRDb25zaXN0"
        "ZW50SGFzaFJvdXRlcpSTlEtkjANtZDWUjAZweXRob26UXZQojAFhlEc/8AAAAAAAAIaUjAFilEc/"
        "8AAAAAAAAIaUjAFjlEc/8AAAAAAAAIaUjAFklEdABAAAAAAAAIaUZXSUUpQu"
    ),
    "node": (
        "dd8b88a4a9a0d693",
        "gASVhwAAAAAAAACMDGNoYXNoLl9jaGFzaJSMCF9yZWJ1aWxklJOUKIwFY2hhc2iUjBRDb25zaXN0"
        "ZW50SGFzaFJvdXRlcpSTlEsojAR4eGgzlIwEbm9kZZRdlCiMAm4xlEc/8AAAAAAAAIaUjAJuMpRH"
        "P/AAAAAAAACGlIwCbjOURz/gAAAAAAAAhpRldJRSlC4="
    ),
    "ketama": (
        "97292bc2ec6b0732",
        "gASVrAAAAAAAAACMDGNoYXNoLl9jaGFzaJSMCF9yZWJ1aWxklJOUKIwFY2hhc2iUjBRDb25zaXN0"
        "ZW50SGFzaFJvdXRlcpSTlEugjANtZDWUjAZrZXRhbWGUXZQojA4xMC4wLjAuMToxMTIxMZRHP/AA"
        "AAAAAACGlIwOMTAuMC4wLjI6MTEyMTGUR0AIAAAAAAAAhpSMDjEwLjAuMC4zOjExMjExlEdAAAAA"
        "AAAAAIaUZXSUUpQu"
    ),
    "nginx": (
        "caaa8d24eef43bb7",
        "gASViwAAAAAAAACMDGNoYXNoLl9jaGFzaJSMCF9yZWJ1aWxklJOUKIwFY2hhc2iUjBRDb25zaXN0"
        "ZW50SGFzaFJvdXRlcpSTlEugjAVjcmMzMpSMBW5naW54lF2UKIwLMTAuMC4wLjE6ODCURz/wAAAA"
        "AAAAhpSMCzEwLjAuMC4yOjgwlEdAAAAAAAAAAIaUZXSUUpQu"
    ),
    "libmemcached": (
        "12faaea0cf6d4861",
        "gASVqgAAAAAAAACMDGNoYXNoLl9jaGFzaJSMCF9yZWJ1aWxklJOUKIwFY2hhc2iUjBRDb25zaXN0"
        "ZW50SGFzaFJvdXRlcpSTlEtkjA1vbmVfYXRfYV90aW1llIwMbGlibWVtY2FjaGVklF2UKIwIbTE6"
        "MTEyMTGURz/wAAAAAAAAhpSMCG0yOjExMjExlEc/8AAAAAAAAIaUjAhtMzoxMTIxMZRHP/AAAAAA"
        "AACGlGV0lFKULg=="
    ),
    "libmemcached-weighted": (
        "a22e47601a07b561",
        "gASVigAAAAAAAACMDGNoYXNoLl9jaGFzaJSMCF9yZWJ1aWxklJOUKIwFY2hhc2iUjBRDb25zaXN0"
        "ZW50SGFzaFJvdXRlcpSTlEtkjANtZDWUjAxsaWJtZW1jYWNoZWSUXZQojAhtMToxMTIxMZRHP/AA"
        "AAAAAACGlIwIbTI6MTEyMTGUR0AQAAAAAAAAhpRldJRSlC4="
    ),
    "empty": (
        "ca10308e53bb9bae",
        "gASVVgAAAAAAAACMDGNoYXNoLl9jaGFzaJSMCF9yZWJ1aWxklJOUKIwFY2hhc2iUjBRDb25zaXN0"
        "ZW50SGFzaFJvdXRlcpSTlEsHjANtZDWUjAZweXRob26UXZR0lFKULg=="
    ),
}


def assert_same(a: ConsistentHashRouter, b: ConsistentHashRouter) -> None:
    assert type(a) is type(b)
    assert a == b
    assert (a.virtual_node_count, a.hash, a.layout) == (b.virtual_node_count, b.hash, b.layout)
    assert (a.nodes, a.weights, a.points) == (b.nodes, b.weights, b.points)
    assert a.hash_ring == b.hash_ring and a.node_map == b.node_map
    assert a.fingerprint() == b.fingerprint()
    assert a.get_target_nodes(KEYS) == b.get_target_nodes(KEYS)


@pytest.mark.parametrize("name", sorted(PICKLES))
def test_a_pickle_of_the_earlier_code_loads_and_routes_the_same(name: str) -> None:
    fingerprint, data = PICKLES[name]
    loaded = pickle.loads(base64.b64decode("".join(data)))
    loaded._check()
    assert loaded.fingerprint() == fingerprint
    assert_same(loaded, BUILDERS[name]())


@pytest.mark.parametrize("name", sorted(PICKLES))
def test_a_pickle_of_this_code_loads_the_same(name: str) -> None:
    router = BUILDERS[name]()
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert_same(pickle.loads(pickle.dumps(router, protocol)), router)


def test_rebuild_checks_its_arguments_as_the_constructor_does() -> None:
    with pytest.raises(TypeError, match="cls must be a ConsistentHashRouter type"):
        _rebuild(dict, 10, "md5", "python", [])
    with pytest.raises(ValueError, match="unknown layout"):
        _rebuild(ConsistentHashRouter, 10, "md5", "nope", [])
    with pytest.raises(ValueError, match="virtual_node_count must be between"):
        _rebuild(ConsistentHashRouter, 0, "md5", "python", [])
    with pytest.raises(ValueError, match="ketama layout is defined over md5 only"):
        _rebuild(ConsistentHashRouter, 10, "crc32", "ketama", [])
    with pytest.raises(TypeError):
        _rebuild(ConsistentHashRouter, 10, "md5", "python", [("a", 1.0), "b"])
    with pytest.raises(TypeError):
        _rebuild(ConsistentHashRouter, 10, "md5", "ketama", [("a", 1.0), ("b",)])


@pytest.mark.parametrize("layout,hash", [("python", "md5"), ("python", narrow_hash), ("node", "xxh3"),
                                         ("ketama", "md5"), ("nginx", "crc32"),
                                         ("libmemcached", "one_at_a_time"), ("libmemcached", "md5")])
def test_replace_nodes_equals_a_router_built_with_the_new_nodes(layout: str, hash: object) -> None:
    weights = [1.0, 2.0, 1.0, 3.0] if layout != "python" else [1.0, 0.5, 2.0, 1.5]
    before = ConsistentHashRouter(20, hash=hash, layout=layout)  # type: ignore[arg-type]
    before.add_service_nodes(["old-1", "shared", "old-2"])
    wanted = list(zip(["new-1", "shared", "new-2", "new-3"], weights, strict=True))
    before._replace_nodes(wanted)
    before._check()
    expected = ConsistentHashRouter(20, hash=hash, layout=layout)  # type: ignore[arg-type]
    for node, weight in wanted:
        expected.add_service_node(node, weight)
    assert_same(before, expected)
    assert before.nodes == ["new-1", "shared", "new-2", "new-3"]


@pytest.mark.parametrize("layout", ["python", "node", "nginx", "ketama"])
def test_replace_nodes_that_fails_leaves_the_router_as_it_was(layout: str) -> None:
    router = ConsistentHashRouter(20, layout=layout)
    router.add_service_nodes(["a", "b", "c"])
    snapshot = pickle.dumps(router)
    bad_lists: list[object] = [[("d", 1.0), ("e", -1.0)], [("d", 1.0), 5], [("d", 1.0), (7, 1.0)], 5]
    if layout == "ketama":
        bad_lists.append([("d", 1.0), ("d", 2.0)])
    for bad in bad_lists:
        with pytest.raises((TypeError, ValueError)):
            router._replace_nodes(bad)  # type: ignore[arg-type]
        router._check()
        assert_same(router, pickle.loads(snapshot))


@pytest.mark.parametrize("layout", ["python", "node", "nginx"])
def test_replace_nodes_given_a_node_twice_adds_then_reweighs_it(layout: str) -> None:
    """As ``add_service_node`` one pair after another would: the second
    pair of a node reweighs it, in its first place.  (Ketama's one update
    of every count refuses the list instead, the router unchanged: the
    test above.)"""
    router = ConsistentHashRouter(20, layout=layout)
    router.add_service_nodes(["x"])
    router._replace_nodes([("a", 1.0), ("b", 1.0), ("a", 3.0)])
    router._check()
    expected = ConsistentHashRouter(20, layout=layout)
    for node, weight in [("a", 1.0), ("b", 1.0), ("a", 3.0)]:
        expected.add_service_node(node, weight)
    assert_same(router, expected)
    assert router.nodes == ["a", "b"] and router.weights == {"a": 3.0, "b": 1.0}


def test_replace_nodes_keeps_the_class_and_the_python_hash() -> None:
    class Sub(ConsistentHashRouter):
        pass

    router = Sub(5, hash=narrow_hash)
    router._replace_nodes([("x", 1.0), ("y", 2.0)])
    assert type(router) is Sub and router.hash is narrow_hash
    assert router.weights == {"x": 1.0, "y": 2.0}
