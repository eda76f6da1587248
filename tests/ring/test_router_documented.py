"""ConsistentHashRouter against the documented pure-Python router, bit for bit.

Same MD5 positions, same ring, same point -> node map (on rings without
collisions, where the two classes agree by construction), and the same node
for every key: empty, embedded NUL, non-BMP, kilobytes long, and keys that
hash exactly onto a ring point.  The known-answer tables come from
tests/make_vectors.py and are checked against both routers.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _support.reference_router import DocumentedRouter, ModelRouter, md5_point
from chash import ConsistentHashRouter

EXAMPLE_NODES = ["order-service-v1", "order-service-v2", "order-service-v3"]

# python tests/make_vectors.py
KNOWN_ROUTES = {
    'user_0': 'order-service-v1',
    'user_1': 'order-service-v3',
    'user_2': 'order-service-v2',
    'user_3': 'order-service-v3',
    'user_4': 'order-service-v2',
    'user_5': 'order-service-v1',
    'user_6': 'order-service-v3',
    'user_7': 'order-service-v2',
    'user_8': 'order-service-v2',
    'user_9': 'order-service-v1',
}
KNOWN_HASHES = {
    'user_0': 0x3c7dadc0,
    'user_1': 0xec6c0a41,
    'user_2': 0xd1c86100,
    'user_3': 0xb32a67c0,
    'user_4': 0x40dd6a2e,
    'user_5': 0xe1c0450f,
    'user_6': 0x693b197c,
    'user_7': 0xa9356259,
    'user_8': 0xfc3767ca,
    'user_9': 0x59a3b144,
}

# The last 32 bits of RFC 1321's test-suite digests (A.5).
RFC1321_POINTS = {
    "": 0xECF8427E,  # d41d8cd98f00b204e9800998ecf8427e
    "a": 0x69772661,  # 0cc175b9c0f1b6a831c399e269772661
    "abc": 0x28E17F72,  # 900150983cd24fb0d6963f7d28e17f72
    "message digest": 0xAAF161D0,  # f96b697d7cb7938d525a2f31aaf161d0
    "abcdefghijklmnopqrstuvwxyz": 0xCA67E13B,  # c3fcd3d76192e4007dfb496cca67e13b
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789": 0x9F419D9F,
    "1234567890" * 8: 0x2107B67A,  # 57edf4a22be3c955ac49da2e2107b67a
}


def _random_keys(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabets = [
        "abcdefghijklmnopqrstuvwxyz0123456789_:-/",
        "\x00\x01\x7f\x80\xff éßü",
        "节点用户服务",
        "\U0001F600\U0001F4A9\U00010348\U0010FFFF",
    ]
    keys = []
    for _ in range(count):
        length = rng.randrange(0, 40)
        keys.append("".join(rng.choice(rng.choice(alphabets)) for _ in range(length)))
    return keys


def _special_keys() -> list[str]:
    keys = [
        "", "\x00", "a\x00b", "\x00\x00\x00", "user_7", "user:10086:profile",
        "é", "节点", "\U0001F600", "\U0010FFFF", "\U0001D518\U0001D52B\U0001D526",
        "x" * 5000, "é" * 2500, "\U0001F600" * 1300, "\x00" * 5000,
    ]
    # Every length around MD5's block and padding boundaries.
    keys += ["k" * n for n in range(0, 131)]
    return keys


KEYS = _special_keys() + _random_keys(1500, seed=20240601) + [f"user_{i}" for i in range(500)]


def build_pair(nodes: list[str], vnodes: int) -> tuple[ConsistentHashRouter, DocumentedRouter]:
    fast = ConsistentHashRouter(vnodes)
    slow = DocumentedRouter(vnodes)
    for node in nodes:
        fast.add_service_node(node)
        slow.add_service_node(node)
    return fast, slow


CLUSTERS = {
    "example-50": (EXAMPLE_NODES, 50),
    "two-nodes-1": (["alpha", "beta"], 1),
    "mixed-100": (["api-1", "api-2", "é-node", "节点-3", "\U0001F600-4", "a", "ab", "abc"], 100),
    "twenty-160": ([f"cache-{i:02d}.internal:11211" for i in range(20)], 160),
}


@pytest.fixture(params=sorted(CLUSTERS), scope="module")
def cluster(request: pytest.FixtureRequest) -> tuple[ConsistentHashRouter, DocumentedRouter, list[str]]:
    nodes, vnodes = CLUSTERS[request.param]
    fast, slow = build_pair(nodes, vnodes)
    # Without collisions the documented node_map is unambiguous.
    assert len(set(slow.hash_ring)) == len(slow.hash_ring)
    return fast, slow, nodes


def test_ring_and_node_map_equal_the_documented_ones(cluster) -> None:
    fast, slow, nodes = cluster
    assert fast.hash_ring == slow.hash_ring
    assert fast.node_map == slow.node_map
    assert fast.nodes == nodes
    assert len(fast) == len(nodes)
    assert fast.virtual_node_count == slow.virtual_node_count
    fast._check()


def test_every_str_key_routes_like_the_documented_router(cluster) -> None:
    fast, slow, _ = cluster
    for key in KEYS:
        assert fast.get_target_node(key) == slow.get_target_node(key), key


def test_bytes_keys_route_like_their_utf8_str(cluster) -> None:
    fast, slow, _ = cluster
    for key in KEYS:
        assert fast.get_target_node(key.encode("utf-8")) == slow.get_target_node(key), key


def test_batch_lookup_equals_the_documented_router(cluster) -> None:
    fast, slow, _ = cluster
    expected = [slow.get_target_node(key) for key in KEYS]
    assert fast.get_target_nodes(KEYS) == expected
    assert fast.get_target_nodes([key.encode("utf-8") for key in KEYS]) == expected
    mixed = [key.encode("utf-8") if i % 3 == 1 else key for i, key in enumerate(KEYS)]
    assert fast.get_target_nodes(mixed) == expected
    # Every length mod 4 (the batch hashes four keys at a time), and tuples.
    for size in range(0, 10):
        assert fast.get_target_nodes(tuple(KEYS[:size])) == expected[:size]
    assert fast.get_target_nodes(iter(KEYS[:7])) == expected[:7]


def test_keys_landing_exactly_on_a_point_go_to_that_point(cluster) -> None:
    # f"{node}_virtual_{i}" hashes to the point itself: the >= rule keeps it there.
    fast, slow, nodes = cluster
    for node in nodes:
        for index in range(slow.virtual_node_count):
            key = f"{node}_virtual_{index}"
            assert fast.get_target_node(key) == node == slow.get_target_node(key)


def test_calculate_hash_equals_the_documented_one() -> None:
    fast = ConsistentHashRouter()
    slow = DocumentedRouter()
    for key in KEYS:
        expected = slow._calculate_hash(key)
        assert fast._calculate_hash(key) == expected == md5_point(key)
        assert fast._calculate_hash(key.encode("utf-8")) == expected


def test_calculate_hash_known_answers() -> None:
    fast = ConsistentHashRouter()
    for key, point in RFC1321_POINTS.items():
        assert fast._calculate_hash(key) == point
    for key, point in KNOWN_HASHES.items():
        assert fast._calculate_hash(key) == point
        assert md5_point(key) == point


def test_known_answer_routes_of_the_example_cluster() -> None:
    fast, slow = build_pair(EXAMPLE_NODES, 50)
    for key, node in KNOWN_ROUTES.items():
        assert fast.get_target_node(key) == node
        assert slow.get_target_node(key) == node
    assert fast.get_target_nodes(list(KNOWN_ROUTES)) == list(KNOWN_ROUTES.values())


def test_make_vectors_still_prints_the_committed_tables() -> None:
    import make_vectors

    assert make_vectors.routes() == KNOWN_ROUTES
    assert make_vectors.hashes() == KNOWN_HASHES


def test_defaults_are_the_documented_ones() -> None:
    fast = ConsistentHashRouter()
    slow = DocumentedRouter()
    assert fast.virtual_node_count == slow.virtual_node_count == 100
    assert fast.hash == "md5"
    assert fast.layout == "python"
    for node in EXAMPLE_NODES:
        fast.add_service_node(node)
        slow.add_service_node(node)
    assert fast.hash_ring == slow.hash_ring
    assert fast.points == {node: 100 for node in EXAMPLE_NODES}
    for key in KEYS[:300]:
        assert fast.get_target_node(key) == slow.get_target_node(key)


def test_empty_ring_returns_none_like_the_documented_router() -> None:
    fast = ConsistentHashRouter(50)
    slow = DocumentedRouter(50)
    for key in ["", "user_1", "\U0001F600"]:
        assert fast.get_target_node(key) is None
        assert slow.get_target_node(key) is None
    assert fast.get_target_nodes(["a", "b", "c", "d", "e"]) == [None] * 5
    assert fast.hash_ring == [] == slow.hash_ring
    assert fast.node_map == {} == slow.node_map


def test_add_and_remove_sequence_matches_the_documented_router() -> None:
    nodes = [f"svc-{i}" for i in range(8)]
    fast, slow = build_pair(nodes, 40)
    for node in ["svc-3", "svc-0", "svc-7"]:
        fast.remove_service_node(node)
        slow.remove_service_node(node)
        assert fast.hash_ring == slow.hash_ring
        assert fast.node_map == slow.node_map
        for key in KEYS[:400]:
            assert fast.get_target_node(key) == slow.get_target_node(key)
        fast._check()
    fast.add_service_node("svc-3")
    slow.add_service_node("svc-3")
    assert fast.hash_ring == slow.hash_ring
    assert fast.get_target_nodes(KEYS) == [slow.get_target_node(key) for key in KEYS]


_EXAMPLE_FAST, _EXAMPLE_SLOW = build_pair(EXAMPLE_NODES, 50)
_EXAMPLE_MODEL = ModelRouter(50)
for _node in EXAMPLE_NODES:
    _EXAMPLE_MODEL.weights[_node] = 1.0


@given(st.text())
def test_any_text_key_routes_like_the_documented_router(key: str) -> None:
    expected = _EXAMPLE_SLOW.get_target_node(key)
    assert _EXAMPLE_FAST.get_target_node(key) == expected
    assert _EXAMPLE_FAST.get_target_node(key.encode("utf-8")) == expected
    assert _EXAMPLE_FAST._calculate_hash(key) == _EXAMPLE_SLOW._calculate_hash(key)


@given(st.binary(max_size=300))
def test_any_bytes_key_routes_like_the_model(key: bytes) -> None:
    # Not only UTF-8: bytes keys are hashed as they are.
    assert _EXAMPLE_FAST.get_target_node(key) == _EXAMPLE_MODEL.get_target_node(key)
    assert _EXAMPLE_FAST._calculate_hash(key) == md5_point(key)


@given(st.lists(st.text(max_size=12), max_size=40))
def test_any_batch_routes_like_single_lookups(keys: list[str]) -> None:
    assert _EXAMPLE_FAST.get_target_nodes(keys) == [_EXAMPLE_SLOW.get_target_node(k) for k in keys]
