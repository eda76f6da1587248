"""``chash gateway --zone``: backends declare their zones
(``--backend NAME=HOST:PORT@ZONE``), the gateway routes each key to its
node in its own zone and fails over within the zone before leaving it; as
real processes on 127.0.0.1, with several workers, and with two instances
in two zones sharing one ring through a redis-server started here."""

from __future__ import annotations

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

# As in test_gateway_workers: the gateways are child processes; an unclosed
# socket collected here is the tests' own echo servers' or clients'.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.gateway_processes import gateway_process, route, status  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402
from chash.cli import main  # noqa: E402
from chash.zones import LocalFirst  # noqa: E402

KEYS = [f"user-{i}" for i in range(60)]
ZONES = {"a": "eu", "b": "eu", "c": "us", "d": "us"}


def ring(names: str) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for name in names:
        router.add_service_node(name)
    return router


def local(names: str, zone: str) -> dict[str, str]:
    """Where a gateway in ``zone`` sends each key when ``names`` are in the ring."""
    first = LocalFirst(ring(names), zone, ZONES)
    return {key: str(first.get_target_node(key)) for key in KEYS}


def spec(backends: dict[str, EchoBackend]) -> str:
    return ",".join(f"{n}={b.address}@{ZONES[n]}" for n, b in backends.items())


def test_workers_route_to_their_zone_and_fail_over_within_it() -> None:
    async def main() -> None:
        backends = {name: await EchoBackend(name).start() for name in "abcd"}
        try:
            async with gateway_process("--backend", spec(backends), "--zone", "eu",
                                       "--workers", "2", "--health-interval", "0.2",
                                       "--fall", "1", "--rise", "1",
                                       "--admin-listen", "127.0.0.1:0") as (url, admin, _):
                assert admin is not None
                seen = await route(url, KEYS)  # new connections: both workers serve
                assert seen == local("abcd", "eu")
                assert set(seen.values()) == {"a", "b"}  # the zone's own, both used
                page = await status(admin)
                assert page["zone"] == "eu"
                assert {n["node"]: n["zone"] for n in page["nodes"]} == ZONES

                async def ring_is(names: str) -> bool:
                    page = await status(admin)
                    return {w["fingerprint"] for w in page["workers"]} == \
                        {ring(names).fingerprint()}

                # a dies: its keys go to b, the zone's next node, whether a
                # request is retried there or the ring has dropped a.
                await backends["a"].stop()
                assert await route(url, KEYS) == {k: "b" for k in KEYS}
                await eventually(lambda: ring_is("bcd"), "every worker drops a", timeout=30)
                assert await route(url, KEYS) == local("bcd", "eu") == {k: "b" for k in KEYS}
                # b dies too: the zone is empty, the whole ring answers.
                await backends["b"].stop()
                await eventually(lambda: ring_is("cd"), "every worker drops b", timeout=30)
                seen = await route(url, KEYS)
                assert seen == {k: ring("cd").get_target_node(k) for k in KEYS}
                assert set(seen.values()) == {"c", "d"}
                # a comes back: every key is home in the zone again.
                await backends["a"].start()
                await eventually(lambda: ring_is("acd"), "every worker takes a back", timeout=30)
                assert await route(url, KEYS) == {k: "a" for k in KEYS}
        finally:
            for backend in backends.values():
                await backend.stop()
    run(main(), timeout=180)


def test_two_zones_share_one_ring_through_redis() -> None:
    """Zones are each instance's own labels beside the shared ring: the
    instances hold one ring (one fingerprint), each prefers its zone."""
    from _support.redis_server import RedisServer

    pytest.importorskip("redis", reason="the redis extra (redis-py) is not installed")

    async def main() -> None:
        server = RedisServer()
        server.start()
        backends = {name: await EchoBackend(name).start() for name in "abcd"}
        common = ("--backend", spec(backends), "--redis", server.url, "--ring", "zoned",
                  "--health-interval", "0.2", "--fall", "1", "--rise", "1",
                  "--admin-listen", "127.0.0.1:0")
        try:
            async with gateway_process(*common, "--zone", "eu", "--bootstrap") as (eu, eu_admin, _), \
                    gateway_process(*common, "--zone", "us") as (us, us_admin, _):
                assert eu_admin and us_admin
                assert await route(eu, KEYS) == local("abcd", "eu")
                assert await route(us, KEYS) == local("abcd", "us")
                pages = [await status(eu_admin), await status(us_admin)]
                assert {p["ring"]["fingerprint"] for p in pages} == {ring("abcd").fingerprint()}
                assert [p["zone"] for p in pages] == ["eu", "us"]
                assert all(n["zone"] == ZONES[n["node"]] for p in pages for n in p["nodes"])

                await backends["c"].stop()  # voted out of the shared ring by both

                async def both_without_c() -> bool:
                    pages = [await status(eu_admin), await status(us_admin)]
                    return {p["ring"]["fingerprint"] for p in pages} == {ring("abd").fingerprint()}
                await eventually(both_without_c, "both instances drop c", timeout=30)
                assert await route(us, KEYS) == {k: "d" for k in KEYS}
                assert await route(eu, KEYS) == local("abd", "eu")
        finally:
            for backend in backends.values():
                await backend.stop()
            server.close()
    run(main(), timeout=180)


def test_zones_given_in_the_shared_ring_are_followed() -> None:
    """Backends given without zones; ``chash ring add NODE --zone Z`` gives
    them zones in the shared ring, and each gateway with ``--zone`` follows
    at once, with no restart: its keys go to its zone's nodes, and its
    status page names the zones.  A zone the shared ring gives wins over
    the command line's."""
    from _support.redis_server import RedisServer

    pytest.importorskip("redis", reason="the redis extra (redis-py) is not installed")

    async def main_() -> None:
        server = RedisServer()
        server.start()
        backends = {name: await EchoBackend(name).start() for name in "abcd"}
        plain = ",".join(f"{n}={b.address}" for n, b in backends.items() if n != "a")
        common = ("--backend", f"a={backends['a'].address}@us," + plain, "--redis", server.url,
                  "--ring", "shared-zones", "--health-interval", "0.2", "--fall", "1",
                  "--rise", "1", "--admin-listen", "127.0.0.1:0")
        try:
            async with gateway_process(*common, "--zone", "eu", "--bootstrap") as (eu, eu_admin, _), \
                    gateway_process(*common, "--zone", "us") as (us, us_admin, _):
                assert eu_admin and us_admin
                only_a = {"a": "us"}
                assert await route(us, KEYS) == {k: "a" for k in KEYS}  # a is us's only one
                assert await route(eu, KEYS) == {
                    key: str(LocalFirst(ring("abcd"), "eu", only_a).get_target_node(key))
                    for key in KEYS}
                for node, zone in ZONES.items():
                    assert main(["ring", "add", node, "--zone", zone, "--redis", server.url,
                                 "--ring", "shared-zones"]) == 0

                async def zoned() -> bool:
                    return await route(eu, KEYS) == local("abcd", "eu") \
                        and await route(us, KEYS) == local("abcd", "us")
                await eventually(zoned, "both gateways route by the shared zones", timeout=30)
                for admin in (eu_admin, us_admin):
                    page = await status(admin)
                    assert {n["node"]: n["zone"] for n in page["nodes"]} == ZONES
        finally:
            for backend in backends.values():
                await backend.stop()
            server.close()
    run(main_(), timeout=180)


@pytest.mark.parametrize(("argv", "says"), [
    (["--backend", "a=127.0.0.1:1@eu", "--zone", "us"], "--zone us: no --backend is in that zone"),
    (["--backend", "a=127.0.0.1:1@", "--zone", "eu"], "no zone after '@'"),
    (["--backend", "a=127.0.0.1:1@eu", "--zone", ""], "expected a zone name"),
])
def test_zone_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                           says: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["gateway", *argv])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err
