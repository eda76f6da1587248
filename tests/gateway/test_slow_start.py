"""chash.gateway.slow_start.WeightRamp: a node that comes back ramps its
weight on the gateway's router, only its own points moving, and a node
that fails mid-ramp comes back to its full weight."""
from __future__ import annotations

import asyncio
import pickle

from chash import ConsistentHashRouter
from chash.gateway.slow_start import WeightRamp


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_recovered_node_ramps_and_moves_only_its_keys() -> None:
    router = ConsistentHashRouter()
    for node in ("a", "b", "c"):
        router.add_service_node(node, 2.0)
    clock = Clock()
    ramp = WeightRamp(router, 10.0, clock=clock, floor=0.1)
    before = pickle.loads(pickle.dumps(router))
    ramp.node_up("b")
    assert router.weights["b"] == 0.2 and ramp.ramping() == ["b"]
    assert all(m.source == "b" for m in before.diff(router))
    for now in (2.5, 5.0, 10.0):
        clock.now = now
        before = pickle.loads(pickle.dumps(router))
        ramp.step()
        moves = before.diff(router)
        assert moves and all(m.target == "b" for m in moves)  # b only gains keys
    assert router.weights["b"] == 2.0 and ramp.ramping() == []
    # Down mid-ramp, then up again: back to the full weight, not the share.
    ramp.node_up("c")
    clock.now = 12.5
    ramp.step()
    ramp.node_down("c")
    ramp.node_up("c")
    clock.now = 30.0
    ramp.step()
    assert router.weights["c"] == 2.0
    ramp.node_up("absent")  # not in the router: nothing
    assert "absent" not in router


def test_the_ramp_steps_on_the_loop() -> None:
    router = ConsistentHashRouter()
    router.add_service_nodes(["a", "b"])
    clock = Clock()
    ramp = WeightRamp(router, 1.0, clock=clock)

    told: list[float] = []

    async def main() -> None:
        ramp.start(interval=0.01, on_change=lambda: told.append(router.weights["a"]))
        ramp.node_up("a")
        clock.now = 2.0
        for _ in range(200):
            if not ramp.ramping():
                break
            await asyncio.sleep(0.01)
        await ramp.stop()

    asyncio.run(main())
    assert ramp.ramping() == [] and router.weights["a"] == 1.0
    assert told == [1.0]  # told once, after the step that changed the weight


def test_the_gateway_ramps_a_node_its_health_checks_bring_back() -> None:
    import pytest

    pytest.importorskip("aiohttp", reason="the gateway extra is not installed")
    pytest.importorskip("httptools", reason="the gateway extra is not installed")
    from chash.gateway import Gateway, GatewayConfig
    from chash.health import NodeState

    backends = {"a": "127.0.0.1:9", "b": "127.0.0.1:10"}
    gateway = Gateway(backends, GatewayConfig(slow_start=30.0, health=False))
    router = gateway.router
    gateway._health_changed("a", NodeState.DOWN, NodeState.UP, "probe answered 200")
    assert 0 < router.weights["a"] < 1.0 and router.weights["b"] == 1.0
    gateway._health_changed("a", NodeState.UP, NodeState.DOWN, "refused")
    assert Gateway(backends, GatewayConfig(health=False)).router.weights["a"] == 1.0
    with pytest.raises(ValueError, match="slow_start"):
        GatewayConfig(slow_start=-1.0)


def test_the_command_takes_slow_start() -> None:
    from chash.cli import build_parser

    args = build_parser().parse_args(
        ["gateway", "--backend", "127.0.0.1:9001", "--slow-start", "12.5"])
    assert args.slow_start == 12.5


def test_the_command_refuses_slow_start_on_a_shared_ring() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "chash", "gateway", "--backend", "127.0.0.1:9",
         "--slow-start", "5", "--workers", "2", "--redis", "redis://127.0.0.1:1/0"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--slow-start ramps the gateway's own ring" in done.stderr
    assert "not a ring shared through --redis or --etcd" in done.stderr
