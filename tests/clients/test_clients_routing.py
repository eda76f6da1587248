"""chash.routing: the sticky clients' core without sockets, and the
gateway's names that now live there."""

from __future__ import annotations

from pathlib import Path

import pytest

import chash
import chash.gateway.config
import chash.gateway.retry
from chash.routing import keys, retry
from chash.routing.sticky import NodePool, StickyRoutes, host_port


def ring(*nodes: str) -> chash.ConsistentHashRouter:
    router = chash.ConsistentHashRouter()
    router.add_service_nodes(list(nodes))
    return router


def test_the_gateway_names_are_the_shared_ones() -> None:
    assert chash.gateway.config.KeyRule is keys.KeyRule
    assert chash.gateway.config.parse_address is keys.parse_address
    assert chash.gateway.config.KEY_SOURCES is keys.KEY_SOURCES
    assert chash.gateway.retry.next_attempt is retry.next_attempt
    assert chash.gateway.retry.Outcome is retry.Outcome


def test_routes_follow_the_preference_list() -> None:
    router = ring("10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80")
    routes = StickyRoutes(router, retries=2)
    for key in ("a", b"b", "user-7"):
        nodes, held = routes.route(key)
        assert nodes == router.get_preference_list(key, 3) and held is None
    assert StickyRoutes(router, retries=0).route("a")[0] == [router.get_target_node("a")]
    assert routes.address("10.0.0.2:80") == ("10.0.0.2", 80)
    assert host_port("[::1]:8080") == ("::1", 8080)
    with pytest.raises(LookupError, match="no nodes"):
        StickyRoutes(ring()).route("a")
    with pytest.raises(TypeError, match="ConsistentHashRouter"):
        StickyRoutes(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not HOST:PORT"):
        StickyRoutes(ring("cache-a")).address("cache-a")


def test_balance_holds_the_first_node_until_released() -> None:
    router = ring("a:1", "b:1", "c:1")
    routes = StickyRoutes(router, retries=1, balance=1.0)
    first, held = routes.route("k")
    assert held == first[0] == router.get_target_node("k") and len(first) == 2
    second, held2 = routes.route("k")  # the owner is at the bound: the next node
    assert held2 == second[0] == router.get_preference_list("k", 2)[1]
    assert second == [held2, first[0]]  # then the owner, as the ring orders them
    routes.release(held)
    routes.release(held2)
    assert routes.bounded is not None and routes.bounded.in_flight == 0


def test_feedback_goes_to_a_checker_or_a_membership() -> None:
    calls: list[tuple[str, ...]] = []

    class Checker:
        def report_failure(self, node: str, reason: str) -> None:
            calls.append(("failure", node, reason))

        def report_success(self, node: str) -> None:
            calls.append(("success", node))

    class Membership:
        def mark_down(self, node: str, reason: str) -> None:
            calls.append(("down", node, reason))

    router = ring("a:1")
    for health in (Checker(), Membership()):
        routes = StickyRoutes(router, health=health)
        routes.failed("a:1", "refused")
        routes.answered("a:1")
    assert calls == [("failure", "a:1", "refused"), ("success", "a:1"), ("down", "a:1", "refused")]


def test_node_pool_opens_once_and_hands_back_what_left() -> None:
    router = ring("a:1", "b:1")
    opened: list[str] = []
    pool: NodePool[str] = NodePool(router, lambda node: opened.append(node) or f"<{node}>")
    assert pool.left() == []
    assert pool.get("a:1") == pool.get("a:1") == "<a:1>" and opened == ["a:1"]
    pool.get("b:1")
    router.remove_service_node("a:1")
    assert pool.left() == ["<a:1>"] and pool.left() == [] and pool.nodes == ["b:1"]
    assert pool.drain() == ["<b:1>"] and pool.nodes == []


@pytest.mark.parametrize("module, hidden, message", [
    ("chash.httpx", ["httpx", "httpx2"], "chash.httpx needs httpx: pip install 'chash-router[httpx]'"),
    ("chash.grpc", ["grpc"], "chash.grpc needs grpcio: pip install 'chash-router[grpc]'"),
    ("chash.aiohttp", ["aiohttp"], "chash.aiohttp needs aiohttp: pip install 'chash-router[aiohttp]'"),
])
def test_a_missing_library_names_its_extra(module: str, hidden: list[str], message: str,
                                           tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    code = (f"import sys\nfor name in {hidden!r}: sys.modules[name] = None\n"
            f"try:\n    import {module}\nexcept ImportError as exc:\n    print(exc)\n")
    # The chash under test, from a folder with no other chash in it; the rest
    # of the environment kept (a sanitized run preloads its runtime).
    root = str(Path(chash.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path, check=True)
    assert done.stdout.strip() == message
