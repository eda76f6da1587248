"""Every router class is what ``chash.routers`` says a router is.

The protocols are ``runtime_checkable``: ``isinstance`` finds each name
they list on the object.  The signatures are checked by ``mypy --strict
chash`` itself, through the check at the end of ``chash/routers.py``.
"""
from __future__ import annotations

from typing import Any

import pytest

import chash
from chash.routers import Lookup, MutableRouter, Ranking, Router
from chash.zones import LocalFirst

PROTOCOLS = (Ranking, Lookup, Router, MutableRouter)


NODES = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"]  # names every layout takes (nghttpx's too)


def every_router() -> list[Any]:
    """One router of every class and layout, with the three nodes."""
    routers: list[Any] = [chash.ConsistentHashRouter(layout=layout)
                          for layout in (*chash.LAYOUTS, "envoy", "grpc")]
    routers.append(chash.MaglevRouter())
    routers += [chash.JumpRouter(layout=layout) for layout in ("jump", "guava", "jumpback")]
    routers += [chash.RendezvousRouter(layout=layout)
                for layout in ("hrw", "pymemcache", "caddy", "squid")]
    routers.append(chash.AnchorRouter())
    for router in routers:
        router.add_service_nodes(NODES)
    return routers


@pytest.mark.parametrize("router", every_router(),
                         ids=lambda r: f"{type(r).__name__}-{r.layout}")
def test_every_router_class_and_layout_is_a_mutable_router(router: Any) -> None:
    for protocol in PROTOCOLS:
        assert isinstance(router, protocol), protocol.__name__
    # What each protocol names answers as documented.
    assert router.get_preference_list("key", 3)[0] == router.get_target_node("key")
    assert sorted(router.nodes) == NODES and len(router) == 3 and NODES[0] in router
    assert router.get_target_nodes(["key"]) == [router.get_target_node("key")]
    assert set(router.weights) == set(router.ownership()) == set(NODES)
    assert isinstance(router.fingerprint(), str) and isinstance(router.layout, str)


def test_each_protocol_asks_more_than_the_one_before() -> None:
    class Ranks:
        def get_preference_list(self, key: str | bytes, n: int, /) -> list[str]:
            return ["a"][:n]

    class Looks(Ranks):
        @property
        def nodes(self) -> list[str]:
            return ["a"]

        def __len__(self) -> int:
            return 1

        def get_target_node(self, request_key: str | bytes, /) -> str | None:
            return "a"

    assert isinstance(Ranks(), Ranking) and not isinstance(Ranks(), Lookup)
    assert isinstance(Looks(), Lookup) and not isinstance(Looks(), Router)
    assert not isinstance(object(), Ranking)


def test_a_view_over_a_router_is_a_ranking() -> None:
    router = chash.ConsistentHashRouter()
    router.add_service_node("a", zone="z1")
    router.add_service_node("b", zone="z2")
    view = LocalFirst(router, "z2", router.zones)
    assert isinstance(view, Ranking)
    assert view.get_preference_list(b"key", 2)[0] == "b"


def test_the_old_names_are_the_protocols() -> None:
    from chash.gateway.proxy import Routes
    from chash.gateway.view import GatewayRouter
    from chash.health.membership import EditableRouter
    from chash.migration.core import Ring as MigrationRing
    from chash.routing.sticky import Ring
    from chash.weights.apply import WeightedRouter

    assert Routes is Ranking and Ring is Lookup and MigrationRing is Router
    assert GatewayRouter is EditableRouter is WeightedRouter is MutableRouter
