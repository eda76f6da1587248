"""get_target_node_by_hash / get_target_nodes_by_hash on the 32-bit ring:
the same node as the key whose hash it is, the ring's range checked."""
from __future__ import annotations

import pytest

from chash import LAYOUTS, ConsistentHashRouter

KEYS = [f"key-{i}" for i in range(300)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_by_hash_agrees_with_the_key(layout: str) -> None:
    router = ConsistentHashRouter(layout=layout)
    router.add_service_nodes([f"10.0.0.{i}:11211" for i in range(7)])
    hashes = [router._calculate_hash(k) for k in KEYS]
    owners = router.get_target_nodes(KEYS)
    assert [router.get_target_node_by_hash(h) for h in hashes] == owners
    assert router.get_target_nodes_by_hash(hashes) == owners
    assert router.get_target_nodes_by_hash(iter(hashes)) == owners


def test_the_ends_of_the_range_and_the_wrap() -> None:
    router = ConsistentHashRouter(3)
    router.add_service_nodes(["a", "b"])
    ring, node_map = router.hash_ring, router.node_map
    assert router.get_target_node_by_hash(0) == node_map[ring[0]]
    assert router.get_target_node_by_hash(ring[-1]) == node_map[ring[-1]]
    if ring[-1] < 2**32 - 1:
        assert router.get_target_node_by_hash(ring[-1] + 1) == node_map[ring[0]]
    assert router.get_target_node_by_hash(2**32 - 1) in ("a", "b")
    assert router.get_target_node_by_hash(ring[1]) == node_map[ring[1]]
    assert router.get_target_node_by_hash(ring[1] - 1) == node_map[ring[1]]


def test_an_empty_ring_gives_none() -> None:
    router = ConsistentHashRouter()
    assert router.get_target_node_by_hash(5) is None
    assert router.get_target_nodes_by_hash([1, 2]) == [None, None]
    assert router.get_target_nodes_by_hash([]) == []


@pytest.mark.parametrize("bad, error, text", [
    (-1, ValueError, "between 0 and 2**32 - 1 for the python layout"),
    (2**32, ValueError, "between 0 and 2**32 - 1"),
    (2**70, ValueError, "between 0 and 2**32 - 1"),
    ("5", TypeError, "hash must be int, not str"),
    (5.0, TypeError, "hash must be int, not float"),
    (True, TypeError, "hash must be int, not bool"),
])
def test_bad_hashes_name_the_problem(bad: object, error: type[Exception], text: str) -> None:
    router = ConsistentHashRouter()
    router.add_service_node("a")
    with pytest.raises(error) as info:
        router.get_target_node_by_hash(bad)  # type: ignore[arg-type]
    assert text in str(info.value)
    with pytest.raises(error):
        router.get_target_nodes_by_hash([1, bad])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="iterable of int"):
        router.get_target_nodes_by_hash(5)  # type: ignore[arg-type]


def test_an_array_of_64_bit_words_is_read_as_its_ints() -> None:
    # array('Q') is read word by word without an int object a hash; the
    # result and the range check are those of the same hashes as a list.
    from array import array

    from chash import JumpRouter, MaglevRouter

    nodes = [f"10.0.0.{i}:11211" for i in range(7)]
    narrow = ConsistentHashRouter()
    routers = [narrow, ConsistentHashRouter(layout="envoy"), MaglevRouter(251), JumpRouter()]
    for router in routers:
        router.add_service_nodes(nodes)
    small = [0, 1, 2**31, 2**32 - 1, 12345]
    for router in routers:
        assert router.get_target_nodes_by_hash(array("Q", small)) == router.get_target_nodes_by_hash(small)
        assert router.get_target_nodes_by_hash(array("Q")) == []
    for router in routers[1:]:
        wide = [2**64 - 1, 2**63, 2**40 + 3]
        assert router.get_target_nodes_by_hash(array("Q", wide)) == router.get_target_nodes_by_hash(wide)
    with pytest.raises(ValueError, match="2\\*\\*32 - 1"):
        narrow.get_target_nodes_by_hash(array("Q", [1, 2**32]))
    # Other buffers are iterables of ints, as before.
    assert narrow.get_target_nodes_by_hash(array("I", small[:4])) == narrow.get_target_nodes_by_hash(small[:4])
    assert narrow.get_target_nodes_by_hash(b"\x01\x02") == narrow.get_target_nodes_by_hash([1, 2])
    with pytest.raises(TypeError, match="hash must be int"):
        narrow.get_target_nodes_by_hash(array("d", [1.0]))
