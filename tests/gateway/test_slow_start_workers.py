"""``chash gateway --slow-start S --workers N``: worker 0 drives the ramp of
a backend that comes back, and every worker's ring goes through the same
weights (one change number, one fingerprint), only that backend's keys
moving; real processes on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

# As in test_gateway_workers: the gateways are child processes; an unclosed
# socket collected here is the tests' own echo servers' or clients'.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.gateway_processes import gateway_process, route, status  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402

KEYS = [f"user-{i}" for i in range(60)]


def ring(names: str) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for name in names:
        router.add_service_node(name)
    return router


def test_every_worker_follows_one_ramp_and_only_its_keys_move() -> None:
    full, without_b = ring("abc"), ring("ac")
    home = {k: full.get_target_node(k) for k in KEYS}
    away = {k: without_b.get_target_node(k) for k in KEYS}

    async def main() -> None:
        backends = {name: await EchoBackend(name).start() for name in "abc"}
        spec = ",".join(f"{n}={b.address}" for n, b in backends.items())
        try:
            async with gateway_process("--backend", spec, "--workers", "2",
                                       "--slow-start", "3", "--health-interval", "0.1",
                                       "--fall", "1", "--rise", "1",
                                       "--admin-listen", "127.0.0.1:0") as (url, admin, _):
                assert admin is not None

                async def workers() -> list[dict[str, object]]:
                    return list((await status(admin))["workers"])

                async def all_on(router: ConsistentHashRouter) -> bool:
                    return {w["fingerprint"] for w in await workers()} == {router.fingerprint()}

                await backends["b"].stop()
                await eventually(lambda: all_on(without_b), "every worker drops b", timeout=30)
                assert await route(url, KEYS) == away

                # b comes back: its weight ramps over 3 s, in steps of 0.5 s.
                seen: dict[int, set[str]] = {}  # change number -> fingerprints reported
                by_worker: dict[int, set[str]] = {0: set(), 1: set()}
                weights: set[float] = set()
                routed: list[dict[str, str]] = []
                await backends["b"].start()
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 60
                while loop.time() < deadline:
                    page = await status(admin)
                    for w in page["workers"]:
                        seen.setdefault(w["ring_changes"], set()).add(w["fingerprint"])
                        by_worker[w["worker"]].add(w["fingerprint"])
                    weights.add(next(n["weight"] for n in page["nodes"] if n["node"] == "b")
                                or 0.0)
                    if len(routed) < 3:  # new connections: both workers serve
                        routed.append(await route(url, KEYS))
                    if {w["fingerprint"] for w in page["workers"]} == {full.fingerprint()}:
                        break
                    await asyncio.sleep(0.05)
                assert await all_on(full), "the ramp did not end on the full ring"

                # One change number, one ring, whichever worker reported it.
                assert all(len(prints) == 1 for prints in seen.values()), seen
                # The follower went through the ramp's steps, not just its ends.
                between = by_worker[1] - {full.fingerprint(), without_b.fingerprint()}
                assert len(between) >= 2, by_worker
                assert any(0 < w < 1 for w in weights), weights
                # Meanwhile only b's keys moved: every other key stayed home,
                # each of b's was on b or where it went while b was down.
                for served in routed:
                    for key, node in served.items():
                        assert node == home[key] or (home[key] == "b" and node == away[key])
                assert await route(url, KEYS) == home
        finally:
            for backend in backends.values():
                await backend.stop()
    run(main(), timeout=180)
