"""Gateway replicas with ``affinity="prefix"`` sharing their per-backend
loads through a real redis-server (``chash.gateway.shared_loads``), and a
replica cut off from it falling back to its own view, and saying so."""
from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from _support.redis_server import RedisServer, running_server
from _support.waiting import eventually, run

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
httpx = pytest.importorskip("httpx", reason="httpx (the test extra) is not installed")
pytest.importorskip("redis", reason="the redis extra is not installed")

from chash.demo.engine import StandInEngine  # noqa: E402
from chash.gateway import Gateway, GatewayConfig  # noqa: E402

NODE = "X-Node"


@pytest.fixture
def redis_srv() -> Iterator[RedisServer]:
    yield from running_server()


@contextlib.asynccontextmanager
async def replicas(url: str, count: int = 2) -> AsyncIterator[tuple[list[Gateway],
                                                                     dict[str, StandInEngine]]]:
    """Three slow stand-in engines and ``count`` gateways sharing loads."""
    engines = {name: await StandInEngine(name, token_rate=10.0).start() for name in "abc"}
    config = GatewayConfig(affinity="prefix", health=False, node_header=NODE,
                           shared_loads=url, shared_loads_key="test:loads",
                           admin_listen=("127.0.0.1", 0))
    gateways = [Gateway({e.name: e.address for e in engines.values()}, config)
                for _ in range(count)]
    try:
        for gateway in gateways:
            await gateway.start()
        yield gateways, engines
    finally:
        for gateway in gateways:
            await gateway.stop()
        for engine in engines.values():
            await engine.stop()


def session_owned_by(gateway: Gateway, node: str) -> str:
    return next(key for key in (f"user-{i}" for i in range(1000))
                if gateway.router.get_preference_list(key, 1) == [node])


def body(text: str, tokens: int = 1, stream: bool = False) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}],
            "max_tokens": tokens, "stream": stream}


def test_config_needs_affinity_for_shared_loads() -> None:
    with pytest.raises(ValueError, match=r"shared_loads .* needs affinity='prefix'"):
        GatewayConfig(shared_loads="redis://127.0.0.1:6379/0")


def test_replicas_bound_on_each_others_loads_and_fall_back_when_cut_off(
        redis_srv: RedisServer) -> None:
    async def main() -> None:
        async with replicas(redis_srv.url) as ((one, other), engines), \
                httpx.AsyncClient(timeout=30.0) as http:
            prompts = other.prompts
            assert prompts is not None and prompts.shared is not None
            await eventually(lambda: prompts.shared is not None and prompts.shared.up,
                             "the replica reads Redis")
            # A slow stream in flight through the first replica...
            async with http.stream("POST", f"{one.url}/v1/chat/completions",
                                   json=body("hold " * 50, 60, stream=True)) as slow:
                busy = slow.headers[NODE]
                # ...is seen by the other one at its next round.
                await eventually(lambda: prompts.views()[0].get(busy, 0) >= 1,
                                 "the other replica sees the first one's load")
                assert other.loads[busy] == 0  # not its own
                status = other.status()["affinity"]["shared_loads"]
                assert status["shared"] is True and status["replicas"] == 2
                # A session owned by the busy engine: ceil(1.25 x 2) = 3 over
                # 3 engines is 1 each, so the cluster's load bounds it away.
                session = session_owned_by(other, busy)
                answer = await http.post(f"{other.url}/v1/chat/completions", json=body("q"),
                                         headers={"x-session-id": session})
                assert answer.status_code == 200 and answer.headers[NODE] != busy
                # Cut off from Redis: its own view (nothing in flight here),
                # said on the status page and in the metrics.
                redis_srv.stop()
                await eventually(lambda: prompts.shared is not None and not prompts.shared.up,
                                 "the replica notices Redis is gone")
                status = other.status()["affinity"]["shared_loads"]
                assert status["shared"] is False and status["error"]
                assert prompts.views()[0].get(busy, 0) == 0
                answer = await http.post(f"{other.url}/v1/chat/completions", json=body("q"),
                                         headers={"x-session-id": session})
                assert answer.status_code == 200 and answer.headers[NODE] == busy
                metrics = (await http.get(f"{other.admin_url}/metrics")).text
                assert "chash_gateway_shared_loads_up 0.0" in metrics
                assert 'chash_gateway_completions_routed_total{how="session"} 2.0' in metrics
                # Back: shared again.
                redis_srv.start()
                await eventually(lambda: prompts.shared is not None and prompts.shared.up,
                                 "the replica reads Redis again")
                await eventually(lambda: prompts.views()[0].get(busy, 0) >= 1,
                                 "the first replica's load is seen again")
                await slow.aclose()
            assert sum(e.requests for e in engines.values()) == 3
    run(main())


def test_a_stopped_replica_leaves_the_shared_view(redis_srv: RedisServer) -> None:
    async def main() -> None:
        async with replicas(redis_srv.url, 3) as (gateways, _):
            last = gateways[-1]
            assert last.prompts is not None and last.prompts.shared is not None
            shared = last.prompts.shared
            await eventually(lambda: shared.status()["replicas"] == 3, "three replicas")
            await gateways[0].stop()
            await eventually(lambda: shared.status()["replicas"] == 2,
                             "the stopped replica is gone")
    run(main())


def test_chash_gateway_with_workers_is_one_replica_publishing_every_workers_loads(
        redis_srv: RedisServer) -> None:
    from _support.gateway_processes import gateway_process, status

    async def main() -> None:
        engines = {name: await StandInEngine(name, token_rate=10.0).start() for name in "ab"}
        backends = ",".join(f"{e.name}={e.address}" for e in engines.values())
        argv = ("--backend", backends, "--affinity", "prefix", "--redis", redis_srv.url,
                "--ring", "llm", "--bootstrap", "--no-health", "--workers", "2",
                "--admin-listen", "127.0.0.1:0")
        try:
            async with gateway_process(*argv) as first, gateway_process(*argv) as second, \
                    httpx.AsyncClient(timeout=30.0) as http:
                admins = [first.admin, second.admin]

                async def replicas_seen(admin: str | None) -> bool:
                    assert admin is not None
                    shared = (await status(admin))["affinity"]["shared_loads"]
                    return bool(shared["shared"]) and shared["replicas"] == 2

                # Two gateways of two workers each: two replicas, not four.
                for admin in admins:
                    await eventually(lambda a=admin: replicas_seen(a), "both gateways in Redis")
                redis = redis_srv.connect()
                assert len(redis.keys("chash:loads:llm:replica:*")) == 2
                # Streams held through the first gateway, on whichever
                # workers took their connections: what it publishes is the
                # sum of both workers' counts.
                streams = []
                for i in range(4):
                    request = http.build_request("POST", f"{first.url}/v1/completions", json={
                        "model": "m", "prompt": f"held {i} " * 100, "max_tokens": 400,
                        "stream": True})
                    streams.append(await http.send(request, stream=True))
                assert first.admin is not None
                rows = (await status(first.admin))["affinity"]["workers"]["rows"]
                assert sum(sum(row["in_flight"].values()) for row in rows) == 4

                def published() -> list[float]:
                    views = [json.loads(v) for v in redis.mget(
                        redis.keys("chash:loads:llm:replica:*"))]
                    return sorted(sum(view["loads"].values()) for view in views)

                await eventually(lambda: published() == [0, 4],
                                 "the first gateway publishes its four in flight")
                for stream in streams:
                    await stream.aclose()
        finally:
            for engine in engines.values():
                await engine.stop()
    run(main())
