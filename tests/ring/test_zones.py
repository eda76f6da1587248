"""Zones: add_service_node(zone=), router.zones, get_preference_list's
distinct_zones, pickling, and chash.zones.ZonedRouter's local-zone-first
routing with its fallback.  Zones never change a ring's routing."""
from __future__ import annotations

import pickle
from typing import Any

import pytest

from chash import ConsistentHashRouter
from chash.zones import LocalFirst, ZonedRouter

LAYOUTS: list[dict[str, Any]] = [{"layout": "python"}, {"layout": "ketama"}, {"layout": "haproxy"},
                                 {"layout": "varnish"},
                                 {"layout": "envoy", "minimum_ring_size": 256}]
ZONES = {"a1": "eu", "a2": "eu", "b1": "us", "b2": "us", "b3": "us", "c1": "ap"}
KEYS = [f"key-{i}" for i in range(500)]


def zoned(**kwargs: Any) -> ConsistentHashRouter:
    router = ConsistentHashRouter(**kwargs)
    for node, zone in ZONES.items():
        router.add_service_node(node, zone=zone)
    router.add_service_node("lone")  # no zone
    return router


def plain(**kwargs: Any) -> ConsistentHashRouter:
    router = ConsistentHashRouter(**kwargs)
    for node in [*ZONES, "lone"]:
        router.add_service_node(node)
    return router


@pytest.mark.parametrize("kwargs", LAYOUTS, ids=lambda k: k["layout"])
def test_zones_are_kept_beside_the_ring(kwargs: dict[str, Any]) -> None:
    router = zoned(**kwargs)
    assert router.zones == ZONES
    same = plain(**kwargs)
    assert router == same and router.fingerprint() == same.fingerprint()
    assert router.get_target_nodes(KEYS) == same.get_target_nodes(KEYS)
    router.add_service_node("a1", 2)  # a weight change keeps the zone
    assert router.zones["a1"] == "eu" and router.weights["a1"] == 2
    router.add_service_node("a1", 2, zone="us")
    assert router.zones["a1"] == "us"
    router.remove_service_node("a1")
    router.discard_service_node("b1")
    assert "a1" not in router.zones and "b1" not in router.zones
    router._replace_nodes([("b2", 1.0), ("c1", 1.0)])
    assert router.zones == {"b2": "us", "c1": "ap"}
    back = pickle.loads(pickle.dumps(router))
    assert back.zones == router.zones and back == router


@pytest.mark.parametrize("kwargs", LAYOUTS, ids=lambda k: k["layout"])
def test_bad_zones_change_nothing(kwargs: dict[str, Any]) -> None:
    router = zoned(**kwargs)
    with pytest.raises(TypeError, match="zone must be str"):
        router.add_service_node("new", zone=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        router.add_service_node("new", zone="")
    with pytest.raises(TypeError, match="unexpected keyword"):
        router.get_preference_list("k", 2, zones=True)  # type: ignore[call-arg]
    assert "new" not in router and router.zones == ZONES
    with pytest.raises(ValueError, match="not in the router"):
        router.__setstate__({"zones": {"ghost": "eu"}})
    assert router.zones == ZONES


@pytest.mark.parametrize("kwargs", LAYOUTS, ids=lambda k: k["layout"])
def test_distinct_zones_preference_list(kwargs: dict[str, Any]) -> None:
    router = zoned(**kwargs)
    for key in KEYS[:200]:
        walk = router.get_preference_list(key, len(router))
        for n in (1, 2, 3, 5):
            got = router.get_preference_list(key, n, distinct_zones=True)
            want: list[str] = []
            seen: set[str] = set()
            for node in walk:
                label = ZONES.get(node, "node:" + node)
                if label not in seen and len(want) < n:
                    seen.add(label)
                    want.append(node)
            assert got == want
            assert got[0] == router.get_target_node(key)
        assert router.get_preference_list(key, 3, distinct_zones=False) == walk[:3]
    with pytest.raises(ValueError):
        router.get_preference_list("k", -1, distinct_zones=True)


def test_zoned_router_prefers_its_zone_and_falls_back() -> None:
    router = zoned()
    us = ZonedRouter(router, "us")
    only_us = ConsistentHashRouter()
    for node in ("b1", "b2", "b3"):
        only_us.add_service_node(node)
    assert us.get_target_nodes(KEYS) == only_us.get_target_nodes(KEYS)
    assert us.local_nodes == ["b1", "b2", "b3"]
    for key in KEYS[:50]:
        walk = us.get_preference_list(key, 5)
        assert walk[:3] == only_us.get_preference_list(key, 3) and len(walk) == 5
        assert walk[3:] == [n for n in router.get_preference_list(key, 7)
                            if n not in walk[:3]][:2]
    us.mark_down("b2")
    assert {us.get_target_node(k) for k in KEYS} == {"b1", "b3"}
    for node in ("b1", "b3"):
        us.mark_down(node)
    # The zone is empty: every other node in service answers.
    answered = {us.get_target_node(k) for k in KEYS}
    assert answered and answered.isdisjoint({"b1", "b2", "b3"})
    us.mark_up("b3")
    assert {us.get_target_node(k) for k in KEYS} == {"b3"}
    nowhere = ZonedRouter(router, "mars")
    assert nowhere.get_target_nodes(KEYS) == router.get_target_nodes(KEYS)
    router.add_service_node("m1", zone="mars")
    nowhere.refresh()
    assert {nowhere.get_target_node(k) for k in KEYS} == {"m1"}
    with pytest.raises(ValueError, match="zone"):
        ZonedRouter(router, "")


def test_zones_and_diff_do_not_leak() -> None:
    import gc
    import sys
    import tracemalloc

    names = ["".join(["leak-", str(i)]) for i in range(6)]
    zones = ["".join(["zone-", str(i)]) for i in range(3)]
    keys = ["".join(["key-", str(i)]) for i in range(8)]
    refcounts = [sys.getrefcount(s) for s in names + zones + keys]
    routers = [ConsistentHashRouter(), ConsistentHashRouter(layout="envoy", minimum_ring_size=32)]
    others = [ConsistentHashRouter(), ConsistentHashRouter(layout="envoy", minimum_ring_size=32)]
    for filled in others:
        filled.add_service_nodes(names[:4])
    del filled

    def cycle(i: int) -> None:
        for router, other in zip(routers, others, strict=True):
            router.add_service_node(names[i % 6], 1 + i % 2, zone=zones[i % 3])
            router.get_preference_list(keys[i % 8], 3, distinct_zones=True)
            router.zones  # noqa: B018 - the getter is the work
            router.diff(other)
            router.discard_service_node(names[(i + 3) % 6])
            for method, args, kwargs in (
                    (router.add_service_node, (names[0],), {"zone": ""}),
                    (router.diff, (ConsistentHashRouter(layout="node"),), {}),
                    (router.__setstate__, ({"zones": {"ghost": "z"}},), {})):
                try:
                    method(*args, **kwargs)
                except ValueError:
                    pass
            if i % 50 == 0:
                pickle.loads(pickle.dumps(router))

    for i in range(100):
        cycle(i)
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(50):
            cycle(i)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        objects = len(gc.get_objects())
        for i in range(600):
            cycle(i)
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - before
        objects_growth = len(gc.get_objects()) - objects
    finally:
        tracemalloc.stop()
    assert growth < 30_000, growth
    assert abs(objects_growth) < 50, objects_growth
    routers.clear()
    others.clear()
    gc.collect()
    assert [sys.getrefcount(s) for s in names + zones + keys] == refcounts


@pytest.mark.parametrize("layout", ["python", "ketama", "nginx"])
def test_local_first_routes_as_the_zoned_router_and_follows_the_router(layout: str) -> None:
    """LocalFirst reads the router as it is: the same answers as a
    ZonedRouter refreshed after every change, with no refresh."""
    router = ConsistentHashRouter(layout=layout)
    zones = {f"n{i}": "eu" if i % 3 == 0 else "us" if i % 3 == 1 else "ap" for i in range(9)}
    for node, zone in zones.items():
        router.add_service_node(node, zone=zone)
    first = LocalFirst(router, "eu", zones)
    keys = [f"key-{i}" for i in range(300)]
    for gone in ([], ["n0"], ["n0", "n3"], ["n0", "n3", "n6"], ["n1"]):
        for node in gone:
            router.discard_service_node(node)  # the zone goes with it from the ring
        zoned = ZonedRouter(router, "eu")
        for key in keys:
            assert first.get_preference_list(key, 4) == zoned.get_preference_list(key, 4)
            assert first.get_target_node(key) == zoned.get_target_node(key)
        assert first.local_nodes == zoned.local_nodes
        for node in gone:
            router.add_service_node(node, zone=zones[node])
    assert {first.get_target_node(k) for k in keys} == {"n0", "n3", "n6"}
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        first.get_preference_list("k", -1)
    with pytest.raises(ValueError, match="zone must be a non-empty str"):
        LocalFirst(router, "", zones)
    assert LocalFirst(ConsistentHashRouter(), "eu", {}).get_target_node("k") is None


def test_local_first_takes_the_zones_first_node_of_the_preference_list() -> None:
    """On every layout, haproxy's nearest point included: the zone's nodes
    in the router's order for the key, then the others."""
    for layout in ("haproxy", "envoy"):
        router = ConsistentHashRouter(layout=layout)
        zones = {f"n{i}": "eu" if i % 2 else "us" for i in range(6)}
        for node in zones:
            router.add_service_node(node)
        first = LocalFirst(router, "eu", zones)
        for key in (f"key-{i}" for i in range(200)):
            every = router.get_preference_list(key, 6)
            assert first.get_preference_list(key, 6) == \
                [n for n in every if zones[n] == "eu"] + [n for n in every if zones[n] != "eu"]
