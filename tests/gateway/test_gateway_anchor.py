"""``chash gateway --router anchor``: three gateway processes sharing one
AnchorRouter ring through a real redis-server and a real etcd started
here route every key alike through removals of middle backends (``chash
ring remove``), a re-add and a gateway restarted after missing changes;
a removal moves only the removed backend's keys and the re-add moves them
back (the mapping is stamped under each version, docs/membership.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

# As in test_gateway_workers: the gateways are child processes; an unclosed
# socket collected here is the tests' own echo servers' or clients'.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.gateway_processes import gateway_process, route, status  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash.cli import main  # noqa: E402

KEYS = [f"user-{i}" for i in range(120)]
NAMES = "abcdef"


@pytest.fixture(params=["redis", "etcd"])
def store(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The gateways' and ``chash ring``'s store arguments."""
    if request.param == "redis":
        pytest.importorskip("redis", reason="the redis extra (redis-py) is not installed")
        from _support.redis_server import running_server

        servers = running_server()
        server = next(servers)
        yield ["--redis", server.url]
        servers.close()
    else:
        pytest.importorskip("httpx", reason="the etcd extra (httpx) is not installed")
        from _support.etcd_server import VERSIONS, running_cluster

        clusters = running_cluster(1, VERSIONS[-1])
        cluster = next(clusters)
        yield ["--etcd", cluster.url]
        clusters.close()


def test_three_gateways_route_alike_through_removals_re_adds_and_a_restart(
        store: list[str]) -> None:
    async def main_() -> None:
        backends = {name: await EchoBackend(name).start() for name in NAMES}
        spec = ",".join(f"{n}={b.address}" for n, b in backends.items())
        common = ("--backend", spec, "--router", "anchor", *store, "--ring", "anchored",
                  "--resync-interval", "0.3", "--health-interval", "3600",
                  "--admin-listen", "127.0.0.1:0")

        def ring(*argv: str) -> None:
            assert main(["ring", *argv, *store, "--ring", "anchored"]) == 0

        async with AsyncExitStack() as stack:
            first = await stack.enter_async_context(gateway_process(*common, "--bootstrap"))
            gateways: list[Any] = [first]
            gateways.append(await stack.enter_async_context(gateway_process(*common)))
            third_stack = AsyncExitStack()
            gateways.append(await third_stack.enter_async_context(gateway_process(*common)))

            async def agreed(names: set[str]) -> bool:
                pages = [await status(g[1]) for g in gateways]
                return len({p["ring"]["fingerprint"] for p in pages}) == 1 and \
                    all({n["node"] for n in p["nodes"] if n["in_ring"]} == names for p in pages) and \
                    all(p["ring"]["router"] == "AnchorRouter" for p in pages)

            async def routes() -> dict[str, str]:
                seen = [await route(g[0], KEYS) for g in gateways]
                assert seen[1] == seen[0] and seen[2] == seen[0]
                return seen[0]

            await eventually(lambda: agreed(set(NAMES)), "the three hold one ring", timeout=60)
            before = await routes()
            assert set(before.values()) == set(NAMES)

            ring("remove", "c")  # a backend in the middle
            await eventually(lambda: agreed(set(NAMES) - {"c"}), "c removed everywhere",
                             timeout=60)
            without_c = await routes()
            assert all(without_c[k] == before[k] for k in KEYS if before[k] != "c")
            assert "c" not in without_c.values()

            ring("add", "c")  # back on its id: its keys come back
            await eventually(lambda: agreed(set(NAMES)), "c back everywhere", timeout=60)
            assert await routes() == before

            # the third gateway stops, misses two changes, starts again
            gateways.pop()
            await third_stack.aclose()
            ring("remove", "b")
            ring("remove", "e")
            gateways.append(await stack.enter_async_context(gateway_process(*common)))
            await eventually(lambda: agreed(set(NAMES) - {"b", "e"}),
                             "the restarted gateway holds the ring", timeout=60)
            after = await routes()
            assert all(after[k] == before[k] for k in KEYS if before[k] not in "be")
        for backend in backends.values():
            await backend.stop()

    run(main_(), timeout=300)
