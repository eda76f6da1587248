"""ConsistentHashRouter is one type whatever its layout: every layout's router
is exactly that type, a subclass works with every layout, and every method of
the type acts on the router's one ring (there is no other ring to act on)."""
from __future__ import annotations

import pickle

import pytest

import chash
from chash import ConsistentHashRouter

LAYOUTS = [*chash.LAYOUTS, "envoy", "grpc"]
KEYS = [f"user:{i}" for i in range(300)]


def n(layout: str, name: str) -> str:
    """A node name the layout takes: nghttpx's are addresses ("b:2" is
    10.0.0.2:2 there), the others any string."""
    if layout != "nghttpx":
        return name
    letter, port = name.split(":")
    return f"10.0.0.{ord(letter) - ord('a') + 1}:{port}"


def d_weight(layout: str) -> float:
    return 1.0 if layout == "nghttpx" else 2.0  # nghttpx's affinity ring has no weights


class Mine(ConsistentHashRouter):
    """A user's subclass with a method of its own."""

    def owners(self) -> list[str | None]:
        return self.get_target_nodes(KEYS)


def filled(cls: type[ConsistentHashRouter], layout: str) -> ConsistentHashRouter:
    router = cls(layout=layout)
    router.add_service_nodes([n(layout, "a:1"), n(layout, "b:1"), n(layout, "c:1")])
    router.add_service_node(n(layout, "d:1"), d_weight(layout), zone="z1")
    return router


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_makes_exactly_the_one_type(layout: str) -> None:
    router = ConsistentHashRouter(layout=layout)
    assert type(router) is ConsistentHashRouter
    assert type(router).__mro__ == (ConsistentHashRouter, object)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_subclass_works_with_every_layout(layout: str) -> None:
    base, mine = filled(ConsistentHashRouter, layout), filled(Mine, layout)
    assert type(mine) is Mine
    assert mine.owners() == base.get_target_nodes(KEYS)
    assert mine.fingerprint() == base.fingerprint()
    assert mine.zones == {n(layout, "d:1"): "z1"}
    copy = pickle.loads(pickle.dumps(mine))
    assert type(copy) is Mine and copy == mine and copy.zones == mine.zones
    mine._replace_nodes([(n(layout, "a:1"), 1), (n(layout, "e:1"), 1)])
    assert mine.nodes == [n(layout, "a:1"), n(layout, "e:1")] and mine.zones == {}
    mine._check()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_types_methods_act_on_the_routers_one_ring(layout: str) -> None:
    router = filled(ConsistentHashRouter, layout)
    b2 = n(layout, "b:2")
    ConsistentHashRouter.add_service_node(router, b2)
    assert b2 in router and b2 in router.nodes and len(router) == 5
    assert b2 in router.points and router.points[b2] >= 1
    owners = set(ConsistentHashRouter.get_target_nodes(router, KEYS))
    assert b2 in owners
    ConsistentHashRouter.remove_service_node(router, b2)
    assert b2 not in router and b2 not in set(router.get_target_nodes(KEYS))
    router._check()


def test_settings_that_belong_to_one_family_read_none_on_the_other() -> None:
    wide = ConsistentHashRouter(layout="grpc", minimum_ring_size=64, maximum_ring_size=512)
    assert (wide.minimum_ring_size, wide.maximum_ring_size, wide.virtual_node_count) == (64, 512, 0)
    ring = ConsistentHashRouter(layout="nginx")
    assert (ring.minimum_ring_size, ring.maximum_ring_size, ring.virtual_node_count) == (None, None, 160)
    assert wide.ids == {} and ring.ids == {}


def test_routers_of_two_families_compare_unequal_and_do_not_diff() -> None:
    a, b = ConsistentHashRouter(layout="envoy"), ConsistentHashRouter(layout="python")
    a.add_service_node("n")
    b.add_service_node("n")
    assert a != b
    with pytest.raises(ValueError, match="same layout and hash"):
        a.diff(b)
    with pytest.raises(ValueError, match="same layout and hash"):
        b.diff(a)


def test_an_id_on_a_layout_without_ids_changes_nothing() -> None:
    for layout in ("envoy", "python"):
        router = filled(ConsistentHashRouter, layout)
        before = router.fingerprint()
        with pytest.raises(ValueError, match="id is for layout='haproxy' only"):
            router.add_service_node("x", id=3, zone="z9")
        assert router.fingerprint() == before and "x" not in router
        assert router.zones == {"d:1": "z1"}


def test_a_failed_add_leaves_the_zones_as_they_were() -> None:
    for layout in LAYOUTS:
        router = filled(ConsistentHashRouter, layout)
        with pytest.raises((ValueError, TypeError)):
            router.add_service_node(n(layout, "d:1"), -1.0, zone="z2")
        with pytest.raises((ValueError, TypeError)):
            router.add_service_node(n(layout, "n:1"), 0, zone="z3")
        assert router.zones == {n(layout, "d:1"): "z1"}, layout
        assert router.weights[n(layout, "d:1")] == d_weight(layout)


def test_the_module_holds_no_other_router_type() -> None:
    router_types = {name for name in dir(chash._chash)
                    if isinstance(getattr(chash._chash, name), type)
                    and name.endswith("Router")}
    assert router_types == {"ConsistentHashRouter", "JumpRouter", "MaglevRouter", "RendezvousRouter",
                            "AnchorRouter"}
