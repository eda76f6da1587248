"""``LocalVerdicts``: with a shared ring, the nodes a gateway's own checks
hold down are tried last for every key, the ring's order kept otherwise."""
from __future__ import annotations

import pytest

pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from chash import ConsistentHashRouter
from chash.gateway.server import LocalVerdicts

KEYS = [f"user-{i}".encode() for i in range(200)]


def ring() -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for node in ("a", "b", "c", "d"):
        router.add_service_node(node)
    return router


def test_nothing_held_down_is_the_ring_itself() -> None:
    router = ring()
    routes = LocalVerdicts(router, set())
    for key in KEYS:
        assert routes.get_preference_list(key, 3) == router.get_preference_list(key, 3)


def test_a_node_held_down_goes_last_and_the_rest_keep_their_order() -> None:
    router = ring()
    down: set[str] = set()
    routes = LocalVerdicts(router, down)
    down.add("a")  # read at each lookup: the caller keeps it
    moved = 0
    for key in KEYS:
        every = router.get_preference_list(key, 4)
        assert routes.get_preference_list(key, 4) == [n for n in every if n != "a"] + ["a"]
        first = routes.get_preference_list(key, 2)
        assert "a" not in first and first == [n for n in every if n != "a"][:2]
        moved += every[0] == "a"
    assert moved > 0  # some keys were a's, and go to their next node here
    down.update({"b", "c", "d"})  # everything held down: still tried, in the ring's order
    for key in KEYS:
        assert routes.get_preference_list(key, 4) == router.get_preference_list(key, 4)
    down.clear()
    assert routes.get_preference_list(KEYS[0], 1) == router.get_preference_list(KEYS[0], 1)
