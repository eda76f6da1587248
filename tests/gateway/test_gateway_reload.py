"""Reloading ``chash gateway --config FILE``: SIGHUP and ``POST /-/reload``
reread the file; backends, weights and the live settings change in one
step, settings that cannot change while running are refused by name, a
file that does not validate changes nothing; with ``--workers N`` every
worker applies it and shows its digest.  Real gateway processes, echo
backends of the test's own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.gateway_processes import gateway_process, route, status  # noqa: E402
from _support.gateways import CHASH_ROOT  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402
from chash.gateway import GatewayConfig  # noqa: E402
from chash.gateway.reload import RingChanges, ring_changes  # noqa: E402

KEYS = [f"user-{i}" for i in range(80)]
#: The flags every gateway of these tests gets (gateway_process adds
#: --listen, --log-level and --duration, which the digest counts too).
FLAGS = ("--listen", "127.0.0.1:0", "--log-level", "warning", "--duration", "120")


def ring(weights: dict[str, float]) -> ConsistentHashRouter:
    router = ConsistentHashRouter()
    for name, weight in weights.items():
        router.add_service_node(name, weight)
    return router


def config_text(backends: dict[str, EchoBackend], weights: dict[str, float] | None = None,
                **settings: object) -> str:
    lines = ["backend = [" + ", ".join(f'"{n}={b.address}"' for n, b in backends.items()) + "]",
             "weight = [" + ", ".join(f'"{n}={w}"' for n, w in (weights or {}).items()) + "]",
             "no_health = true", 'admin_listen = "127.0.0.1:0"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def checked_digest(path: Path, *argv: str) -> str:
    """The digest ``chash gateway --check-config`` gives the file with these flags."""
    done = subprocess.run([sys.executable, "-m", "chash", "gateway", "--check-config", str(path),
                           *FLAGS, *argv], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(CHASH_ROOT)})
    assert done.returncode == 0, done.stderr
    return next(line[2:] for line in done.stdout.splitlines() if line.startswith("# sha256:"))


async def reload(admin: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, \
            session.post(f"{admin}/-/reload") as resp:
        return resp.status, json.loads(await resp.text())


async def backends(names: str) -> dict[str, EchoBackend]:
    return {name: await EchoBackend(name).start() for name in names}


def test_sighup_moves_only_the_changed_nodes_keys(tmp_path: Path) -> None:
    async def main() -> None:
        echo = await backends("abcd")
        path = tmp_path / "gateway.toml"
        three = {n: echo[n] for n in "abc"}
        path.write_text(config_text(three))
        try:
            async with gateway_process("--config", str(path)) as (url, admin, proc):
                assert admin is not None
                page = await status(admin)
                first = page["config"]["digest"]
                assert first == checked_digest(path)
                assert page["config"]["file"] == str(path) and page["config"]["reloads"] == 0
                assert page["ring"]["fingerprint"] == ring(dict.fromkeys("abc", 1.0)).fingerprint()
                before = await route(url, KEYS)
                # c leaves, d joins, b weighs twice as much: one reload.
                path.write_text(config_text({n: echo[n] for n in "abd"}, {"b": 2.0}))
                expected = ring({"a": 1.0, "b": 2.0, "d": 1.0})
                proc.send_signal(signal.SIGHUP)

                async def reloaded() -> bool:
                    return (await status(admin))["config"]["reloads"] == 1
                await eventually(reloaded, "the reload is applied", timeout=30)
                page = await status(admin)
                assert page["ring"]["fingerprint"] == expected.fingerprint()
                assert page["config"]["digest"] == checked_digest(path) != first
                last = page["config"]["last_reload"]
                assert last["reloaded"] and last["changes"]["added"] == ["d"]
                assert last["changes"]["removed"] == ["c"]
                assert last["changes"]["weights"] == {"b": 2.0}
                after = await route(url, KEYS)
                assert after == {k: expected.get_target_node(k) for k in KEYS}
                changed = {"b", "c", "d"}
                moved = [k for k in KEYS if before[k] != after[k]]
                assert moved and all({before[k], after[k]} & changed for k in moved)
                # The ring as one step: every arc that changed owner is the
                # changed nodes' (the router's own diff of the two rings).
                old = ring(dict.fromkeys("abc", 1.0))
                assert all({m.source, m.target} & changed for m in old.diff(expected))
                assert sum(b.hits for b in echo.values()) > 0
        finally:
            for backend in echo.values():
                await backend.stop()
    run(main(), timeout=180)


def test_a_refused_or_invalid_reload_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        echo = await backends("abc")
        path = tmp_path / "gateway.toml"
        path.write_text(config_text({n: echo[n] for n in "ab"}))
        try:
            async with gateway_process("--config", str(path)) as (url, admin, _):
                assert admin is not None
                page = await status(admin)
                digest, fingerprint = page["config"]["digest"], page["ring"]["fingerprint"]
                before = await route(url, KEYS)
                # Settings that cannot change while running, beside ones that could.
                path.write_text(config_text(echo, workers=2, vnodes=40, read_timeout=5)
                                .replace("127.0.0.1:0", "127.0.0.1:1"))
                code, body = await reload(admin)
                assert code == 409 and not body["reloaded"]
                assert body["refused"] == ["vnodes", "workers", "admin_listen"]
                assert "vnodes, workers, admin_listen cannot change while the gateway runs" \
                    in body["error"]
                # A file that does not validate: its key and line.
                path.write_text(config_text(echo) + "\nattempts = 0\n")
                code, body = await reload(admin)
                assert code == 422 and not body["reloaded"] and body["refused"] == []
                assert f"{path}:6: attempts: must be >= 1, not 0" in body["error"]
                path.write_text("backend = [\n")
                code, body = await reload(admin)
                assert code == 422 and "not valid TOML" in body["error"]
                page = await status(admin)
                assert page["config"]["digest"] == digest and page["config"]["reloads"] == 0
                assert page["ring"]["fingerprint"] == fingerprint
                assert page["config"]["last_reload"]["error"] == body["error"]
                assert await route(url, KEYS) == before
        finally:
            for backend in echo.values():
                await backend.stop()
    run(main(), timeout=180)


def test_live_settings_apply_and_flags_stay_over_the_file(tmp_path: Path) -> None:
    async def main() -> None:
        echo = await backends("ab")
        path = tmp_path / "gateway.toml"
        path.write_text(config_text(echo, attempts=2))
        try:
            async with gateway_process("--config", str(path), "--attempts", "3") as (url, admin, _):
                assert admin is not None
                async with aiohttp.ClientSession() as session:
                    async with session.get(f"{url}/x", headers={"X-User-Id": "u"}) as resp:
                        assert "X-Node" not in resp.headers
                    path.write_text(config_text(echo, attempts=1, node_header="X-Node",
                                                key="header:X-Tenant"))
                    code, body = await reload(admin)
                    assert code == 200, body
                    assert body["settings"] == ["key", "node_header"]  # attempts: the flag's
                    expected = ring(dict.fromkeys("ab", 1.0))
                    for tenant in ("t1", "t2", "t3", "t4"):
                        async with session.get(f"{url}/x", headers={"X-Tenant": tenant}) as resp:
                            assert resp.headers["X-Node"] == expected.get_target_node(tenant)
                assert body["digest"] == checked_digest(path, "--attempts", "3")
        finally:
            for backend in echo.values():
                await backend.stop()
    run(main(), timeout=180)


def test_without_a_file_a_reload_is_refused() -> None:
    async def main() -> None:
        echo = await backends("a")
        try:
            async with gateway_process("--backend", echo["a"].address, "--no-health",
                                       "--admin-listen", "127.0.0.1:0") as (_, admin, proc):
                assert admin is not None
                code, body = await reload(admin)
                assert code == 409 and "without --config" in body["error"]
                proc.send_signal(signal.SIGHUP)  # logged, and the gateway serves on
                page = await status(admin)
                assert page["config"]["file"] is None and page["config"]["reloads"] == 0
        finally:
            await echo["a"].stop()
    run(main(), timeout=120)


@pytest.mark.parametrize("how", ["sighup", "post"])
def test_every_worker_applies_the_reload(tmp_path: Path, how: str) -> None:
    async def main() -> None:
        echo = await backends("abcd")
        path = tmp_path / "gateway.toml"
        path.write_text(config_text({n: echo[n] for n in "abc"}))
        try:
            async with gateway_process("--config", str(path), "--workers", "2") \
                    as (url, admin, proc):
                assert admin is not None

                async def workers_report(count: int) -> bool:
                    return len((await status(admin)).get("workers", [])) == count
                await eventually(lambda: workers_report(2), "both workers report", timeout=30)
                first = checked_digest(path, "--workers", "2")
                assert {w["config_digest"] for w in (await status(admin))["workers"]} == {first}
                path.write_text(config_text({n: echo[n] for n in "abd"}, {"a": 3.0}))
                new = checked_digest(path, "--workers", "2")
                if how == "sighup":
                    proc.send_signal(signal.SIGHUP)  # the parent: it sends it on to each worker
                else:
                    code, body = await reload(admin)
                    assert code == 200 and body["digest"] == new
                expected = ring({"a": 3.0, "b": 1.0, "d": 1.0}).fingerprint()

                async def every_worker_reloaded() -> bool:
                    workers = (await status(admin))["workers"]
                    return len(workers) == 2 and all(
                        w["config_digest"] == new and w["fingerprint"] == expected
                        for w in workers)
                await eventually(every_worker_reloaded, "every worker runs the new file",
                                 timeout=30)
                ring_now = ring({"a": 3.0, "b": 1.0, "d": 1.0})
                for _ in range(2):  # new connections: both workers answer
                    seen = await route(url, KEYS)
                    assert seen == {k: ring_now.get_target_node(k) for k in KEYS}
        finally:
            for backend in echo.values():
                await backend.stop()
    run(main(), timeout=240)


def test_ring_changes_name_what_differs() -> None:
    changes = ring_changes({"a": "h:1", "b": "h:2", "c": "h:3"},
                           {"a": "h:1", "b": "h:9", "d": "h:4"},
                           {"a": 2.0}, {"a": 1.0, "d": 3.0}, {"a": "eu"}, {})
    assert changes.added == {"d": 3.0} and changes.removed == ("c",)
    assert changes.weights == {"a": 1.0} and changes.addresses == {"b": "h:9", "d": "h:4"}
    assert changes.zones == {"a": None}
    assert changes.as_json()["addresses"] == {"b": "h:9"}
    assert not ring_changes({"a": "h:1"}, {"a": "h:1"}, {}, {"a": 1.0}, {}, {})
    assert not RingChanges()


def test_reconfigure_refuses_a_setting_fixed_at_start_and_changes_nothing() -> None:
    from chash.gateway import Gateway
    from chash.gateway.reload import ReloadError

    gateway = Gateway({"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, GatewayConfig(health=False))
    fingerprint = gateway.router.fingerprint()
    with pytest.raises(ReloadError) as caught:
        gateway.reconfigure(GatewayConfig(health=False, pool_size=5, read_timeout=1.0),
                            RingChanges(removed=("a",)))
    assert caught.value.refused == ("pool_size",)
    assert gateway.router.fingerprint() == fingerprint and gateway.config.read_timeout == 30.0
    changed = gateway.reconfigure(GatewayConfig(health=False, read_timeout=1.0),
                                  RingChanges(added={"c": 2.0}, removed=("a",),
                                              addresses={"c": "127.0.0.1:3"}))
    assert changed == ("read_timeout",)
    assert gateway.router.weights == {"b": 1.0, "c": 2.0}
    assert gateway.addresses == {"b": "127.0.0.1:2", "c": "127.0.0.1:3"}
    assert gateway.config.read_timeout == 1.0


@pytest.mark.parametrize("make", ["maglev", "rendezvous"])
def test_reconfigure_changes_a_maglev_or_rendezvous_router_in_one_step(make: str) -> None:
    from chash import MaglevRouter, RendezvousRouter
    from chash.gateway import Gateway

    router = MaglevRouter() if make == "maglev" else RendezvousRouter()
    gateway = Gateway({"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, GatewayConfig(health=False),
                      router=router)
    before = {key: router.get_target_node(key) for key in KEYS}
    gateway.reconfigure(gateway.config, RingChanges(added={"c": 1.0}, addresses={"c": "127.0.0.1:3"}))
    assert gateway.router is router and set(router.nodes) == {"a", "b", "c"}
    after = {key: router.get_target_node(key) for key in KEYS}
    assert {after[key] for key in KEYS if after[key] != before[key]} <= {"c"}
    fingerprint = router.fingerprint()
    from chash.gateway.reload import ReloadError
    with pytest.raises(ReloadError, match="zones are the ConsistentHashRouter's"):
        gateway.reconfigure(gateway.config, RingChanges(removed=("a",), zones={"b": "eu"}))
    assert router.fingerprint() == fingerprint and set(router.nodes) == {"a", "b", "c"}


def test_reconfigure_refuses_a_weight_on_a_weightless_layout_and_changes_nothing() -> None:
    from chash.gateway import Gateway
    from chash.gateway.reload import ReloadError

    router = ConsistentHashRouter(layout="nghttpx")
    gateway = Gateway({"127.0.0.1:1": "127.0.0.1:1", "127.0.0.1:2": "127.0.0.1:2"},
                      GatewayConfig(health=False), router=router)
    fingerprint = router.fingerprint()
    with pytest.raises(ReloadError, match="nghttpx layout has no weights"):
        gateway.reconfigure(gateway.config, RingChanges(removed=("127.0.0.1:1",),
                                                        weights={"127.0.0.1:2": 3.0}))
    assert router.fingerprint() == fingerprint and len(router.weights) == 2


def test_a_reloaded_zone_keeps_the_nodes_points() -> None:
    from chash.gateway import Gateway

    gateway = Gateway({"a": "127.0.0.1:1", "b": "127.0.0.1:2"},
                      GatewayConfig(health=False), zones={"a": "eu"})
    fingerprint = gateway.router.fingerprint()
    gateway.reconfigure(gateway.config, RingChanges(zones={"a": "us", "b": "eu"}))
    assert gateway.router.fingerprint() == fingerprint
    assert gateway.zones == {"a": "us", "b": "eu"} and gateway.router.zones == gateway.zones


def test_a_reload_forgets_a_removed_node_the_health_checks_took_out() -> None:
    from chash.gateway import Gateway

    async def main() -> None:
        echo = await backends("abde")
        await echo["b"].stop()  # b is down from the start, and c never listens
        config = GatewayConfig(health_interval=0.05, health_timeout=0.5, fall=1, rise=1)
        gateway = Gateway({**{n: b.address for n, b in echo.items()}, "c": "127.0.0.1:1"},
                          config)
        await gateway.start()
        try:
            checker = gateway.health
            assert checker is not None
            await eventually(lambda: set(gateway.router.nodes) == {"a", "d", "e"},
                             "b and c taken out")
            # c leaves the configuration while down; b, down, gets weight 3.
            gateway.reconfigure(config, RingChanges(removed=("c",), weights={"b": 3.0}))
            assert "c" not in checker.membership.watched_nodes()
            await echo["b"].start()
            await eventually(lambda: "b" in gateway.router, "b back")
            assert gateway.router.weights == {"a": 1.0, "b": 3.0, "d": 1.0, "e": 1.0}
            await checker.check_now()
            assert "c" not in gateway.router and "c" not in gateway.addresses
        finally:
            await gateway.stop()
            for backend in echo.values():
                await backend.stop()
    run(main(), timeout=60)


def test_with_a_shared_ring_a_reload_changes_only_this_instances_settings(
        tmp_path: Path) -> None:
    from _support.redis_server import RedisServer

    pytest.importorskip("redis", reason="the redis extra (redis-py) is not installed")

    async def main() -> None:
        server = RedisServer()
        server.start()
        echo = await backends("abc")
        path = tmp_path / "gateway.toml"
        shared = f'redis = "{server.url}"\nring = "shop"\nbootstrap = true\n'
        path.write_text(config_text({n: echo[n] for n in "ab"}) + shared)
        try:
            async with gateway_process("--config", str(path)) as (url, admin, _):
                assert admin is not None
                fingerprint = (await status(admin))["ring"]["fingerprint"]
                path.write_text(config_text(echo, {"a": 2.0}) + shared)
                code, body = await reload(admin)
                assert code == 409 and body["refused"] == ["backend", "weight"]
                assert "shared ring" in body["error"]
                path.write_text(config_text({n: echo[n] for n in "ab"}, node_header="X-Node")
                                + shared)
                code, body = await reload(admin)
                assert code == 200 and body["settings"] == ["node_header"]
                assert body["changes"]["added"] == [] == body["changes"]["removed"]
                page = await status(admin)
                assert page["ring"]["fingerprint"] == fingerprint
                async with aiohttp.ClientSession() as session, \
                        session.get(f"{url}/x", headers={"X-User-Id": "u"}) as resp:
                    assert resp.headers["X-Node"] in ("a", "b")
        finally:
            for backend in echo.values():
                await backend.stop()
            server.stop()
    run(main(), timeout=180)


def test_a_worker_reloading_after_the_leaders_verdict_still_takes_the_node_out() -> None:
    """Worker 0 added x, judged it down and said so before worker 1 added x:
    worker 1's reload asks for the verdicts, and both rings agree."""
    import socket

    from chash.gateway import Gateway
    from chash.gateway.workers import Follower, Leader

    async def main() -> None:
        ours, theirs = socket.socketpair()
        rings = ring(dict.fromkeys("abc", 1.0)), ring(dict.fromkeys("abc", 1.0))
        addresses = {n: f"127.0.0.1:{i + 1}" for i, n in enumerate("abc")}
        leader = Leader(rings[0], [ours], share_verdicts=True)
        follower = Follower(rings[1], theirs)
        first = Gateway(addresses, GatewayConfig(), router=rings[0], membership=leader,
                        counters=leader.counters)
        second = Gateway(addresses, GatewayConfig(health=False), router=rings[1],
                         health_reports=follower)
        await leader.start(first)
        await follower.start(second)
        try:
            added = RingChanges(added={"x": 1.0}, addresses={"x": "127.0.0.1:4"})
            first.reconfigure(first.config, added)
            leader.mark_down("x", "connection refused")  # its checker's verdict, sent now
            await eventually(lambda: follower.ring_changes == leader.ring_changes,
                             "the verdict reached worker 1")
            assert "x" not in rings[1]  # nothing to take out there yet
            second.reconfigure(second.config, added)
            await eventually(lambda: rings[1].fingerprint() == rings[0].fingerprint(),
                             "worker 1 takes x out as worker 0 did")
            assert "x" not in rings[1] and set(rings[1].nodes) == set("abc")
        finally:
            await follower.stop()
            await leader.stop()
    run(main(), timeout=60)


def test_a_reloaded_weight_stops_a_slow_start_ramp_and_is_its_new_target() -> None:
    from chash.gateway import Gateway

    gateway = Gateway({"a": "127.0.0.1:1", "b": "127.0.0.1:2"},
                      GatewayConfig(health=False, slow_start=60.0))
    ramp = gateway.ramp
    assert ramp is not None
    ramp.node_up("b")  # b back in service: ramping from a small weight
    assert gateway.router.weights["b"] < 1.0 and ramp.ramping() == ["b"]
    gateway.reconfigure(gateway.config, RingChanges(weights={"b": 2.0}))
    assert gateway.router.weights["b"] == 2.0 and ramp.ramping() == []
    ramp.node_up("b")
    ramp.step()
    # ramping again from 5% of its new full weight of 2 (not of 1)
    assert 0.099 < gateway.router.weights["b"] < 2.0
