"""Tests of chash.health.async_checker: AsyncHealthChecker's asyncio task,
its prompt cancellation, the optional aiohttp dependency, and the asyncio
gateway of docs/health.md.

Verdicts and ring effects are shared with the thread runner and tested for
both runners in test_health_core.py.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from _support.http_backends import Backend, ring_of
from _support.waiting import eventually, run
from chash import ConsistentHashRouter
from chash.health import NodeState

pytest.importorskip("aiohttp", reason="the async runner needs aiohttp (chash-router[async])")

from chash.health import AsyncHealthChecker


def other_tasks() -> set[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return {task for task in asyncio.all_tasks() if task is not current}


def test_background_task_takes_out_and_brings_back(backends: Callable[..., Backend]) -> None:
    group = [backends() for _ in range(3)]
    router = ring_of(group)
    before = {f"user:{i}": router.get_target_node(f"user:{i}") for i in range(2000)}
    changes: list[tuple[str, NodeState, NodeState]] = []

    async def main() -> None:
        async with AsyncHealthChecker(
                router, interval=0.05, timeout=2.0, fall=2, rise=2,
                on_change=lambda node, old, new, reason: changes.append((node, old, new)),
        ) as checker:
            assert checker.running
            await asyncio.to_thread(group[1].stop)
            await eventually(lambda: group[1].node not in router)
            await asyncio.to_thread(group[1].start)
            await eventually(lambda: group[1].node in router)
        assert not checker.running
        assert other_tasks() == set()

    run(main())
    assert changes == [(group[1].node, NodeState.UP, NodeState.DOWN),
                       (group[1].node, NodeState.DOWN, NodeState.UP)]
    assert {key: router.get_target_node(key) for key in before} == before


def test_stop_is_prompt_and_leaves_no_task(backends: Callable[..., Backend]) -> None:
    backend = backends()

    async def main() -> None:
        checker = AsyncHealthChecker(ring_of([backend]), interval=30.0)
        await checker.start()
        with pytest.raises(RuntimeError):
            await checker.start()
        await eventually(lambda: checker.status().get(backend.node) is not None
                    and checker.status()[backend.node].consecutive_successes == 1)
        started = time.monotonic()
        await checker.stop()
        assert time.monotonic() - started < 2.0
        assert other_tasks() == set()
        await checker.aclose()  # idempotent
        await checker.start()  # and restartable
        await eventually(lambda: backend.hits >= 2)
        await checker.aclose()
        assert other_tasks() == set()

    run(main())


def test_stop_cancels_a_hanging_probe_without_counting_it(
        backends: Callable[..., Backend]) -> None:
    backend = backends().hang()

    async def main() -> None:
        checker = AsyncHealthChecker(ring_of([backend]), interval=30.0, timeout=30.0)
        await checker.start()
        await eventually(lambda: backend.hits >= 1)
        started = time.monotonic()
        await checker.stop()
        assert time.monotonic() - started < 2.0
        assert other_tasks() == set()
        assert checker.status()[backend.node].consecutive_failures == 0

    run(main())


def test_check_now_without_start(backends: Callable[..., Backend]) -> None:
    good, bad = backends(), backends(500)
    router = ring_of([good, bad])

    async def main() -> None:
        checker = AsyncHealthChecker(router, fall=1, rise=1)
        try:
            await checker.check_now()
        finally:
            await checker.aclose()
        assert other_tasks() == set()

    run(main())
    assert router.nodes == [good.node]


def test_a_round_failing_does_not_stop_the_task(backends: Callable[..., Backend]) -> None:
    backend = backends()
    calls = 0

    class Broken:
        def watched_nodes(self) -> dict[str, float]:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise ConnectionError("store unavailable")
            return {backend.node: 1.0}

        def mark_down(self, node: str, reason: str) -> None:
            pass

        def mark_up(self, node: str) -> None:
            pass

    async def main() -> None:
        async with AsyncHealthChecker(None, membership=Broken(), interval=0.05) as checker:
            await eventually(lambda: backend.node in checker.status()
                        and checker.status()[backend.node].consecutive_successes >= 1)

    run(main())
    assert calls >= 2


def test_missing_aiohttp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # import aiohttp: ModuleNotFoundError
    with pytest.raises(ImportError, match=r"pip install 'chash-router\[async\]'") as info:
        AsyncHealthChecker(ConsistentHashRouter())
    assert str(info.value) == "AsyncHealthChecker needs aiohttp: pip install 'chash-router[async]'"


def test_documentation_async_gateway(backends: Callable[..., Backend],
                                     health_doc_examples: list[str]) -> None:
    from aiohttp import ClientSession, web

    (block,) = [b for b in health_doc_examples if "AsyncHealthChecker(router" in b]
    example: dict[str, Any] = {"__name__": "async_gateway_example"}
    exec(compile(block, "docs/health.md", "exec"), example)
    router = example["router"]
    for node in router.nodes:
        router.remove_service_node(node)
    group = [backends() for _ in range(3)]
    for backend in group:
        router.add_service_node(backend.node, 1.0)

    async def main() -> None:
        runner = web.AppRunner(example["make_app"]())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with ClientSession() as client:
                async def get(user: str) -> tuple[int, str]:
                    async with client.get(f"http://127.0.0.1:{port}/profile",
                                          headers={"X-User-Id": user}) as response:
                        return response.status, await response.text()

                users = [str(i) for i in range(40)]
                for user in users:
                    owner = router.get_target_node(f"user:{user}")
                    assert await get(user) == (200, f"200 from {owner}\n")
                victim = group[0]
                user = next(u for u in users
                            if router.get_target_node(f"user:{u}") == victim.node)
                successor = router.get_preference_list(f"user:{user}", 2)[1]
                await asyncio.to_thread(victim.stop)
                assert [(await get(user))[0] for _ in range(3)] == [502, 502, 502]
                assert victim.node not in router
                assert await get(user) == (200, f"200 from {successor}\n")
        finally:
            await runner.cleanup()
        assert other_tasks() == set()

    run(main())
