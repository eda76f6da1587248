"""Layouts and hash functions against the implementations they must match.

- layout="node": vectors made by running the design document's Node.js ring
  (tests/vectors/node_ring.js, output committed as node_ring.json);
- layout="ketama": uhashring's ketama mode, which differs from libketama
  (and chash) only for a key whose hash is exactly a ring point: uhashring
  takes the first point > the hash, libketama the first point >= it;
- every named hash through a ring, against hashlib, zlib, mmh3, xxhash and
  small reference implementations, cut the way each layout cuts digests.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import pathlib
import subprocess

import pytest
import uhashring

from _support import hashes
from _support.compat_programs import program_env, require
from _support.hashes import ORACLES
from _support.reference_router import ModelRouter
from chash import HASHES, ConsistentHashRouter

VECTORS = pathlib.Path(__file__).parent.parent / "vectors"

M32 = 0xFFFFFFFF


def test_one_at_a_time_known_answers() -> None:
    # Published values of Jenkins's one-at-a-time (ASCII: no sign question).
    oaat = ORACLES["one_at_a_time"].value
    assert oaat(b"a", 0) == 0xCA2E9442
    assert oaat(b"The quick brown fox jumps over the lazy dog", 0) == 0x519E91F5
    router = ConsistentHashRouter(hash="one_at_a_time")
    assert router._calculate_hash("a") == 0xCA2E9442
    # A byte >= 0x80 enters sign-extended (libmemcached on x86), unlike an
    # unsigned reading.
    unsigned = 0
    for byte in b"\xe9":
        unsigned = (unsigned + byte) & M32
        unsigned = (unsigned + (unsigned << 10)) & M32
        unsigned ^= unsigned >> 6
    unsigned = (unsigned + (unsigned << 3)) & M32
    unsigned ^= unsigned >> 11
    unsigned = (unsigned + (unsigned << 15)) & M32
    assert router._calculate_hash(b"\xe9") == oaat(b"\xe9", 0) != unsigned


# How each layout cuts a hash value to 32 bits.
LAYOUT_RULES = {
    "python": lambda value, width: value % 2**32,
    "node": lambda value, width: value >> (width - 32),
}

KEYS = (["", "\x00", "a\x00b", "é", "节点", "\U0001F600", "x" * 5000]
        + ["k" * n for n in range(1, 70)] + [f"user:{i}:profile" for i in range(300)])
NODES = ["api-1", "api-2", "api-3", "é-4", "节点-5", "\U0001F600-6", "a", "ab"]


def test_every_hash_has_an_oracle() -> None:
    assert set(HASHES) == set(ORACLES)
    assert len(HASHES) == len(set(HASHES))


def model_ring(layout: str, name: str, vnodes: int) -> list[tuple[int, bytes, str]]:
    model = ModelRouter(vnodes, layout, name)
    model.weights = dict.fromkeys(NODES, 1.0)
    return model.points()


@pytest.mark.parametrize("name", sorted(ORACLES))
@pytest.mark.parametrize("layout", sorted(LAYOUT_RULES))
def test_named_hashes_through_the_ring(layout: str, name: str) -> None:
    cut = LAYOUT_RULES[layout]
    oracle, _, width = ORACLES[name]
    router = ConsistentHashRouter(20, hash=name, layout=layout)
    assert router.hash == name
    for node in NODES:
        router.add_service_node(node)
    router._check()
    ring = model_ring(layout, name, 20)
    assert router.hash_ring == [value for value, _, _ in ring]
    expected_map: dict[int, str] = {}
    for value, _, node in ring:
        expected_map.setdefault(value, node)
    assert router.node_map == expected_map
    expected = []
    for key in KEYS:
        data = key.encode("utf-8")
        position = cut(oracle(data, 0), width)
        assert router._calculate_hash(key) == position, key
        assert router._calculate_hash(data) == position, key
        expected.append(ring[bisect.bisect_left(ring, (position,)) % len(ring)][2])
    assert [router.get_target_node(key) for key in KEYS] == expected
    assert router.get_target_nodes(KEYS) == expected
    assert router.get_target_nodes([key.encode("utf-8") for key in KEYS]) == expected


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_python_layout_position_is_the_value_mod_2_32(name: str) -> None:
    router = ConsistentHashRouter(hash=name)
    for key in KEYS[:50]:
        assert router._calculate_hash(key) == hashes.value(name, key.encode("utf-8")) % 2**32


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_node_layout_position_is_the_top_32_bits_of_the_digest(name: str) -> None:
    router = ConsistentHashRouter(hash=name, layout="node")
    for key in KEYS[:50]:
        digest = hashes.digest(name, key.encode("utf-8"))
        assert router._calculate_hash(key) == int.from_bytes(digest[:4], "big")


# -- user hash functions -----------------------------------------------------------


def sha256_int(data: bytes) -> int:
    return int.from_bytes(hashlib.sha256(data).digest(), "big")


@pytest.mark.parametrize("layout,fmt", [("python", "{node}_virtual_{index}"), ("node", "{node}#vnode{index}")])
def test_a_callable_hash_places_points_at_its_value_mod_2_32(layout: str, fmt: str) -> None:
    calls: list[bytes] = []

    def recording(data: bytes) -> int:
        calls.append(data)
        return sha256_int(data)

    router = ConsistentHashRouter(5, hash=recording, layout=layout)
    assert router.hash is recording
    router.add_service_node("n1")
    router.add_service_node("n2", 2)
    expected_vkeys = {fmt.format(node="n1", index=i).encode() for i in range(5)}
    expected_vkeys |= {fmt.format(node="n2", index=i).encode() for i in range(10)}
    assert set(calls) == expected_vkeys
    assert router.hash_ring == sorted(sha256_int(vkey) % 2**32 for vkey in expected_vkeys)
    for key in KEYS[:40]:
        assert router._calculate_hash(key) == sha256_int(key.encode("utf-8")) % 2**32
    calls.clear()
    router.get_target_node("user")
    assert calls == [b"user"]


@pytest.mark.parametrize("value,position", [
    (0, 0), (2**32 - 1, 2**32 - 1), (2**32, 0), (2**32 + 5, 5), (2**200 + 7, 7),
    (-1, 2**32 - 1), (-(2**32), 0), (-(2**70) - 3, (-(2**70) - 3) % 2**32), (True, 1),
])
def test_callable_results_are_cut_to_32_bits_mod_2_32(value: int, position: int) -> None:
    router = ConsistentHashRouter(1, hash=lambda data: value)
    assert router._calculate_hash("anything") == position
    router.add_service_node("n")
    assert router.hash_ring == [position]


# -- layout="node" against the document's Node.js ring -----------------------------


def load_node_vectors() -> dict:
    return json.loads((VECTORS / "node_ring.json").read_text(encoding="utf-8"))


NODE_VECTORS = load_node_vectors()


def test_node_vectors_hash_like_the_node_ring() -> None:
    router = ConsistentHashRouter(layout="node")
    assert router.virtual_node_count == 150
    keys, hashes = NODE_VECTORS["keys"], NODE_VECTORS["hashes"]
    assert len(keys) == len(hashes) > 400
    for key, value in zip(keys, hashes, strict=True):
        assert router._calculate_hash(key) == value, key
        assert router._calculate_hash(key.encode("utf-8")) == value, key


@pytest.mark.parametrize("ring", NODE_VECTORS["rings"],
                         ids=[f"{r['virtual_nodes']}-minus-{len(r['removed'])}" for r in NODE_VECTORS["rings"]])
def test_node_layout_routes_like_the_node_ring(ring: dict) -> None:
    router = ConsistentHashRouter(ring["virtual_nodes"], layout="node")
    for node in NODE_VECTORS["nodes"]:
        router.add_service_node(node)
    for node in ring["removed"]:
        router.remove_service_node(node)
    router._check()
    # The generator refused colliding points: the rings must be equal outright.
    assert len(set(ring["sorted_hashes"])) == len(ring["sorted_hashes"])
    assert router.hash_ring == ring["sorted_hashes"]
    keys = NODE_VECTORS["keys"]
    assert [router.get_target_node(key) for key in keys] == ring["routes"]
    assert router.get_target_nodes(keys) == ring["routes"]
    assert router.get_target_nodes([key.encode("utf-8") for key in keys]) == ring["routes"]
    exact = [key for key in keys if "#vnode" in key]
    assert exact, "the vectors include keys that hash onto a point"
    for key in exact:
        node = key.rsplit("#vnode", 1)[0]
        if node not in ring["removed"]:
            assert router.get_target_node(key) == node


def test_node_vectors_regenerate_identically_with_node() -> None:
    # Node.js reruns the design document's ring (skips without it, fails in CI).
    node = require("node", package="nodejs")
    result = subprocess.run([node, str(VECTORS / "node_ring.js")], capture_output=True,
                            check=True, timeout=60, env=program_env())
    assert json.loads(result.stdout.decode("utf-8")) == NODE_VECTORS


# -- layout="ketama" against uhashring ---------------------------------------------------

KETAMA_NODES = ["cache-1:11211", "cache-2:11211", "cache-3:11211", "10.0.0.4:11211",
                "mc-é", "mc-节点", "mc-\U0001F600", "m"]


def ketama_pair(nodes: list[str]) -> tuple[ConsistentHashRouter, uhashring.HashRing]:
    router = ConsistentHashRouter(160, layout="ketama")
    for node in nodes:
        router.add_service_node(node)
    reference = uhashring.HashRing(nodes=list(nodes), hash_fn="ketama")  # 40 vnodes x 4 replicas
    return router, reference


def test_ketama_ring_equals_uhashring_ring() -> None:
    router, reference = ketama_pair(KETAMA_NODES)
    assert ConsistentHashRouter(layout="ketama").virtual_node_count == 160
    assert router.points == {node: 160 for node in KETAMA_NODES}
    ring = router.hash_ring
    assert len(set(ring)) == len(ring), "collisions: pick other node names"
    assert ring == reference.runtime._keys
    assert router.node_map == reference.runtime._ring
    router._check()


def test_ketama_key_hashes_equal_uhashring() -> None:
    router, reference = ketama_pair(KETAMA_NODES)
    for key in KEYS:
        assert router._calculate_hash(key) == reference.hashi(key), key


def test_ketama_routes_like_uhashring_off_the_points() -> None:
    router, reference = ketama_pair(KETAMA_NODES)
    points = set(router.hash_ring)
    keys = KEYS + [f"memcached-key-{i}" for i in range(3000)]
    keys = [key for key in keys if router._calculate_hash(key) not in points]
    assert len(keys) > 3000
    expected = [reference.get_node(key) for key in keys]
    assert router.get_target_nodes(keys) == expected
    assert [router.get_target_node(key) for key in keys[:500]] == expected[:500]


def test_ketama_key_on_a_point_goes_to_that_point_libketama_style() -> None:
    # "{node}-{j}" hashes exactly onto the node's point 4j.  libketama (and
    # chash) take the first point >= the hash: that point; uhashring takes
    # the first point > the hash: the next one.
    router, reference = ketama_pair(KETAMA_NODES)
    ring, owners = router.hash_ring, router.node_map
    for node in KETAMA_NODES:
        for j in range(40):
            key = f"{node}-{j}"
            position = router._calculate_hash(key)
            assert position in owners
            assert router.get_target_node(key) == node
            following = ring[bisect.bisect_right(ring, position) % len(ring)]
            assert reference.get_node(key) == owners[following]


def test_ketama_follows_uhashring_through_removals_and_additions() -> None:
    router, reference = ketama_pair(KETAMA_NODES)
    for node in ["cache-2:11211", "mc-节点"]:
        router.remove_service_node(node)
        reference.remove_node(node)
    router.add_service_node("cache-9:11211")
    reference.add_node("cache-9:11211")
    assert router.hash_ring == reference.runtime._keys
    points = set(router.hash_ring)
    keys = [f"k{i}" for i in range(2000)]
    keys = [key for key in keys if router._calculate_hash(key) not in points]
    assert router.get_target_nodes(keys) == [reference.get_node(key) for key in keys]
