"""add_service_nodes: the same ring as one-by-one adds, all or nothing."""
from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chash import ConsistentHashRouter

names = st.lists(st.text(alphabet="ab\u00e9\U0001f600-", min_size=0, max_size=4), max_size=12)


def narrow(data: bytes) -> int:
    """A hash with 64 values: many collisions."""
    return zlib.crc32(data) % 64


@given(first=names, second=names, weight=st.sampled_from([0.5, 1, 2.5]))
def test_bulk_equals_one_by_one(first: list[str], second: list[str], weight: float) -> None:
    for hash_fn in ("md5", narrow):
        one = ConsistentHashRouter(5, hash=hash_fn)
        bulk = ConsistentHashRouter(5, hash=hash_fn)
        for node in first:
            one.add_service_node(node)
        bulk.add_service_nodes(first)
        for node in second:
            one.add_service_node(node, weight)
        bulk.add_service_nodes(second, weight)
        bulk._check()
        assert bulk.hash_ring == one.hash_ring
        assert bulk.node_map == one.node_map
        assert bulk.weights == one.weights
        assert bulk.nodes == one.nodes
        assert bulk.fingerprint() == one.fingerprint()


def test_bad_item_adds_nothing() -> None:
    router = ConsistentHashRouter(10)
    router.add_service_node("kept")
    before = (router.hash_ring, router.weights)
    with pytest.raises(TypeError, match="node id must be str, not int"):
        router.add_service_nodes(["a", "b", 3])  # type: ignore[list-item]
    with pytest.raises(UnicodeEncodeError):
        router.add_service_nodes(["a", "\ud800"])
    with pytest.raises(ValueError, match="weight must be a finite number > 0"):
        router.add_service_nodes(["a"], weight=0)
    with pytest.raises(TypeError, match="nodes must be an iterable of str"):
        router.add_service_nodes(5)  # type: ignore[arg-type]
    assert (router.hash_ring, router.weights) == before
    router._check()


def test_generator_and_duplicates() -> None:
    router = ConsistentHashRouter(10)
    router.add_service_nodes(f"n{i % 3}" for i in range(9))
    assert router.nodes == ["n0", "n1", "n2"]
    assert len(router.hash_ring) == 30
