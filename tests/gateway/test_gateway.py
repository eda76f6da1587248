"""Tests of chash.gateway against real backends on 127.0.0.1.

Every test runs its own event loop (bounded by ``run``), with echo backends
on OS-chosen ports.  Health rounds are driven with ``check_now()`` where a
test depends on them, so nothing waits on a timer; where the background
runner is under test, conditions are polled with generous deadlines.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from yarl import URL  # noqa: E402

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.gateways import cluster, get, owner_of, served_by  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash import ConsistentHashRouter  # noqa: E402
from chash.gateway import Gateway, GatewayConfig, KeyRule, parse_address  # noqa: E402
from chash.gateway.parser import parse_request_head  # noqa: E402

USERS = [f"user-{i:03d}" for i in range(240)]


# -- helpers ------------------------------------------------------------------


def in_ring(gateway: Gateway, node: str) -> bool:
    return node in gateway.router


# -- configuration ------------------------------------------------------------


@pytest.mark.parametrize(("spec", "rule"), [
    ("header:X-User-Id", KeyRule("header", "X-User-Id")),
    ("cookie:session", KeyRule("cookie", "session")),
    ("query:user", KeyRule("query", "user")),
    ("path", KeyRule("path")),
    ("path:2", KeyRule("path", segments=2)),
    (" Header : X-Tenant ", KeyRule("header", "X-Tenant")),
])
def test_key_rule_parse(spec: str, rule: KeyRule) -> None:
    assert KeyRule.parse(spec) == rule
    assert KeyRule.parse(str(rule)) == rule


@pytest.mark.parametrize(("spec", "message"), [
    ("ip", "unknown key source"),
    ("body:user", "unknown key source"),
    ("header", "header: needs a name"),
    ("cookie:", "cookie: needs a name"),
    ("header:X User", "not a valid header name"),
    ("path:0", "path:N needs a whole number N >= 1"),
    ("path:two", "path:N needs a whole number N >= 1"),
])
def test_key_rule_parse_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KeyRule.parse(spec)


@pytest.mark.parametrize(("spec", "path", "headers", "key"), [
    ("header:X-User-Id", "/", {"x-user-id": "u1"}, "u1"),
    ("header:X-User-Id", "/", {}, None),
    ("header:X-User-Id", "/", {"X-User-Id": ""}, None),
    ("cookie:sid", "/", {"Cookie": "other=1; sid=s-42"}, "s-42"),
    ("cookie:sid", "/", {"Cookie": "other=1"}, None),
    ("query:user", "/cart?user=u7&user=u8", {}, "u7"),
    ("query:user", "/cart", {}, None),
    ("path", "/u42/cart/items", {}, "u42"),
    ("path", "/u42/", {}, "u42"),
    ("path", "/", {}, None),
    ("path:2", "/users/42/cart", {}, "users/42"),
    ("path:2", "/users", {}, "users"),
])
def test_key_rule_extract(spec: str, path: str, headers: dict[str, str],
                          key: str | None) -> None:
    lines = [f"GET {path} HTTP/1.1", "Host: h", *(f"{k}: {v}" for k, v in headers.items())]
    request = parse_request_head(("\r\n".join(lines) + "\r\n\r\n").encode())
    assert KeyRule.parse(spec).extract(request) == (None if key is None else key.encode())


@pytest.mark.parametrize(("text", "address"), [
    ("127.0.0.1:9001", "127.0.0.1:9001"),
    ("http://127.0.0.1:9001/", "127.0.0.1:9001"),
    ("backend-1.internal:80", "backend-1.internal:80"),
    ("[::1]:8080", "[::1]:8080"),
    (" 10.0.0.1:09 ", "10.0.0.1:9"),
])
def test_parse_address(text: str, address: str) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize(("text", "message"), [
    ("127.0.0.1", "is not HOST:PORT"),
    (":80", "is not HOST:PORT"),
    ("https://a:443", "only http://"),
    ("a:0", "port must be a number from 1 to 65535"),
    ("a:70000", "port must be a number from 1 to 65535"),
    ("a:http", "port must be a number"),
    ("::1:80", "IPv6 host in brackets"),
    ("http://a:80/api", "is not HOST:PORT"),
])
def test_parse_address_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_address(text)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"backends": ["127.0.0.1:1", "127.0.0.1:1"]}, "listed twice"),
    ({"attempts": 0}, "attempts must be an integer >= 1"),
    ({"missing_key": "drop"}, "missing_key must be 'remote' or 'reject'"),
    ({"key": "ip"}, "unknown key source"),
    ({"connect_timeout": 0}, "connect_timeout must be a positive number"),
    ({"read_timeout": float("nan")}, "read_timeout must be a positive number"),
    ({"health_interval": -1}, "health_interval must be a positive number"),
    ({"status_path": "status"}, "status_path must start with '/'"),
    ({"pool_size": -1}, "pool_size must be an integer >= 0"),
    ({"deadline": 0}, "deadline must be a positive number"),
    ({"header_timeout": float("inf")}, "header_timeout must be a positive number"),
])
def test_gateway_argument_errors(kwargs: dict[str, Any], message: str) -> None:
    backends = kwargs.pop("backends", ["127.0.0.1:1"])
    with pytest.raises(ValueError, match=message):
        Gateway(backends, GatewayConfig(**kwargs))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"health": False}, r"to turn the checks off, pass GatewayConfig\(health=False\)"),
    ({"health": True}, "health takes a health checker"),
    ({"health": "http://a/health"}, "health must be a health checker .* not str"),
    ({"config": {"attempts": 2}}, "config must be a GatewayConfig, not dict"),
])
def test_gateway_collaborator_type_errors(kwargs: dict[str, Any], message: str) -> None:
    """A wrong kind of collaborator is refused when the gateway is made,
    naming what is wanted, not met later as an AttributeError."""
    with pytest.raises(TypeError, match=message):
        Gateway(["127.0.0.1:1"], **kwargs)


def test_backends_join_a_given_router() -> None:
    router = ConsistentHashRouter(50, hash="xxh3")
    router.add_service_node("a", 2.0)
    gateway = Gateway({"a": "127.0.0.1:1", "b": "127.0.0.1:2"},
                      GatewayConfig(health=False, metrics=False), router=router,
                      weights={"a": 5.0, "b": 3.0})
    assert gateway.router is router
    assert router.weights == {"a": 2.0, "b": 3.0}  # a kept the weight it had
    assert gateway.address_of("b") == "127.0.0.1:2"
    assert gateway.address_of("zz") == "zz"


def test_the_builder_makes_the_parts_and_the_gateway_stores_them() -> None:
    """``GatewayParts.build`` makes every collaborator from the arguments,
    with no gateway; ``Gateway(...)`` is that build, stored."""
    from chash.gateway.server import GatewayParts

    router = ConsistentHashRouter(40, hash="xxh3")
    backends = {"a": "127.0.0.1:1", "b": "127.0.0.1:2"}
    config = GatewayConfig(metrics=False, health_path="/up")
    parts = GatewayParts.build(backends, config, router=router, weights={"b": 3.0})
    assert parts.router is router and router.weights == {"a": 1.0, "b": 3.0}
    assert parts.addresses == backends and parts.config is config
    assert parts.proxy.router is router  # no zone, no membership: the router itself
    assert parts.own_health and parts.health is not None
    assert parts.health.url_for("a") == "http://a/up"  # no gateway: the plain template
    assert parts.tls is None and parts.tls_certificate is None
    gateway = Gateway(backends, config, router=ConsistentHashRouter(40, hash="xxh3"),
                      weights={"b": 3.0})
    assert gateway.router.fingerprint() == router.fingerprint()
    assert gateway.health is not None and gateway.health.url_for("a") == "http://127.0.0.1:1/up"
    # A wrong argument is refused by the builder, before anything is made.
    with pytest.raises(TypeError, match="config must be a GatewayConfig"):
        GatewayParts.build(backends, {"attempts": 2})  # type: ignore[arg-type]


def test_collaborators_are_injected() -> None:
    """A library user's own router and health checker are the ones used:
    request outcomes are reported to that checker."""
    from chash.health import AsyncHealthChecker

    async def main() -> None:
        backends = {name: await EchoBackend(name).start() for name in "ab"}
        addresses = {name: b.address for name, b in backends.items()}
        router = ConsistentHashRouter(40, hash="xxh3")
        for name in addresses:
            router.add_service_node(name)
        checker = AsyncHealthChecker(router, url=lambda node: f"http://{addresses[node]}/health",
                                     interval=3600.0, fall=1)
        gateway = Gateway(addresses, GatewayConfig(metrics=False), router=router, health=checker)
        assert gateway.router is router and gateway.health is checker
        await gateway.start()
        try:
            owner = owner_of(gateway, "u1")
            await backends[owner].stop()
            async with aiohttp.ClientSession() as session:
                status, body = await get(session, gateway, "u1")
            assert status == 200 and body["backend"] != owner
            assert owner not in router  # fall = 1: one refused connection, reported
            assert str(checker.status()[owner].state) == "down"
        finally:
            await gateway.stop()
            for backend in backends.values():
                await backend.stop()
    run(main())


def test_missing_aiohttp_names_the_extra(chash_env: dict[str, str]) -> None:
    # In a fresh interpreter where aiohttp cannot be imported: the module
    # imports, and building a gateway names the extra.
    code = (
        "import sys\n"
        "sys.modules['aiohttp'] = None\n"
        "from chash.gateway import Gateway, GatewayConfig\n"
        "try:\n"
        "    Gateway(['127.0.0.1:1'])\n"
        "except ImportError as exc:\n"
        "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=chash_env)
    assert out.returncode == 0, out.stderr
    assert "pip install 'chash-router[gateway]'" in out.stdout


# -- routing ------------------------------------------------------------------


def test_sticky_routing_follows_the_ring() -> None:
    async def main() -> None:
        async with cluster() as (gateway, backends, session):
            first = await served_by(session, gateway, USERS)
            again = await served_by(session, gateway, USERS)
            assert first == again
            assert first == {u: gateway.router.get_target_node(u) for u in USERS}
            assert set(first.values()) == {"a", "b", "c"}
            snap = gateway.counters.snapshot()
            assert sum(snap.lookups.values()) == 2 * len(USERS)
            assert snap.requests["ok"] == 2 * len(USERS)
            assert snap.retries == 0
    run(main())


@pytest.mark.parametrize(("key", "path", "headers", "routing_key"), [
    ("cookie:sid", "/page", {"Cookie": "sid=s-9"}, "s-9"),
    ("query:user", "/page?user=u-5&x=1", {}, "u-5"),
    ("path", "/tenant-3/orders", {}, "tenant-3"),
    ("path:2", "/users/77/cart", {}, "users/77"),
])
def test_every_key_source(key: str, path: str, headers: dict[str, str],
                          routing_key: str) -> None:
    async def main() -> None:
        async with cluster(key=key) as (gateway, backends, session):
            status, body = await get(session, gateway, None, path, headers=headers)
            assert status == 200
            assert body["backend"] == gateway.router.get_target_node(routing_key)
    run(main())


def test_missing_key_routes_by_client_address_or_is_rejected() -> None:
    async def main() -> None:
        async with cluster() as (gateway, backends, session):
            status, body = await get(session, gateway, None)
            assert status == 200
            assert body["backend"] == gateway.router.get_target_node("127.0.0.1")
        async with cluster(missing_key="reject") as (gateway, backends, session):
            status, body = await get(session, gateway, None)
            assert status == 400
            assert "no routing key (header:X-User-Id)" in body
            assert sum(b.hits for b in backends.values()) == 0
            assert gateway.counters.snapshot().requests["rejected"] == 1
    run(main())


def test_request_and_response_are_relayed() -> None:
    async def main() -> None:
        async with cluster(node_header="X-Chash-Node") as (gateway, backends, session):
            headers = {"X-User-Id": "u1", "Connection": "keep-alive, X-Secret",
                       "X-Secret": "hop", "X-Trace": "t-1", "X-Forwarded-For": "10.1.1.1",
                       "Content-Type": "text/plain"}
            url = URL(gateway.url + "/orders/7%2Fa?expand=items&x=%20y", encoded=True)
            async with session.post(url, data=b"hello", headers=headers) as resp:
                assert resp.status == 200
                body = await resp.json()
                owner = owner_of(gateway, "u1")
                assert resp.headers["X-Chash-Node"] == owner
                assert resp.headers["X-Backend"] == owner
                assert resp.headers.getall("Set-Cookie") == ["a=1", "b=2"]
            assert body["method"] == "POST"
            assert body["raw_path"] == "/orders/7%2Fa?expand=items&x=%20y"
            assert body["body"] == "hello"
            sent = body["headers"]
            assert sent["X-Trace"] == "t-1"
            assert sent["Content-Type"] == "text/plain"
            assert sent["X-Forwarded-For"] == "10.1.1.1, 127.0.0.1"
            assert sent["X-Forwarded-Proto"] == "http"
            assert sent["X-Forwarded-Host"] == gateway.url.removeprefix("http://")
            assert sent["Host"] == backends[owner].address
            # Hop-by-hop headers, and those named by Connection, stay behind;
            # the gateway adds no defaults of its own.
            assert "x-secret" not in body["header_names"]
            assert "user-agent" in body["header_names"]  # the client's own
            async with session.get(gateway.url + "/", headers={"X-User-Id": "u1"},
                                   skip_auto_headers=["User-Agent", "Accept-Encoding"],
                                   ) as resp:
                names = (await resp.json())["header_names"]
            assert "user-agent" not in names and "accept-encoding" not in names

            backends[owner].status = 404
            status, body = await get(session, gateway, "u1")
            assert status == 404 and body["backend"] == owner  # passed through
            async with session.head(gateway.url + "/", headers={"X-User-Id": "u1"}) as resp:
                assert resp.status == 404
                assert await resp.read() == b""
    run(main())


def test_large_responses_are_streamed_whole() -> None:
    async def main() -> None:
        async with cluster() as (gateway, _, session), session.get(
                gateway.url + "/big/3000000", headers={"X-User-Id": "u1"}) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Length"] == "3000000"
            assert len(await resp.read()) == 3_000_000
    run(main())


def test_a_backend_dying_mid_response_cuts_the_client_off() -> None:
    async def main() -> None:
        async with cluster() as (gateway, backends, session):
            # A large answer is streamed: the status line is gone when the
            # backend dies, so the client's connection is cut.
            with pytest.raises(aiohttp.ClientPayloadError):
                async with session.get(gateway.url + "/cut?size=1000000",
                                       headers={"X-User-Id": "u1"}) as resp:
                    assert resp.status == 200
                    await resp.read()
            status, _ = await get(session, gateway, "u1")  # the gateway carries on
            assert status == 200
            # A small answer is read whole before anything is sent: a backend
            # dying in it is a failed attempt, retried and then reported.
            status, body = await get(session, gateway, "u2", "/cut")
            assert status == 502
            assert body.count("disconnected mid-response") == 3
    run(main())


def test_request_bodies_are_bounded() -> None:
    async def main() -> None:
        async with cluster(max_body=100) as (gateway, backends, session):
            status, _ = await get(session, gateway, "u1", method="PUT", data=b"x" * 100)
            assert status == 200
            status, _ = await get(session, gateway, "u1", method="PUT", data=b"x" * 101)
            assert status == 413
            assert sum(b.hits for b in backends.values()) == 1
    run(main())


def test_connections_to_backends_are_pooled() -> None:
    async def main() -> None:
        async with cluster() as (gateway, backends, session):
            owner = backends[owner_of(gateway, "u1")]
            for _ in range(40):
                status, _ = await get(session, gateway, "u1")
                assert status == 200
            assert owner.hits == 40
            assert len(owner.peers) == 1  # one connection, reused 40 times
            assert gateway.loads == {"a": 0, "b": 0, "c": 0}
    run(main())


def test_in_flight_load_is_counted() -> None:
    async def main() -> None:
        async with cluster() as (gateway, backends, session):
            node = owner_of(gateway, "u1")
            gate = backends[node].gate = asyncio.Event()
            pending = [asyncio.ensure_future(get(session, gateway, "u1")) for _ in range(3)]
            await eventually(lambda: gateway.loads[node] == 3)
            assert gateway.status()["nodes"][ord(node) - ord("a")]["in_flight"] == 3
            gate.set()
            assert [status for status, _ in await asyncio.gather(*pending)] == [200] * 3
            assert gateway.loads[node] == 0
    run(main())


# -- failures -----------------------------------------------------------------


def test_failover_costs_no_request_and_users_come_back() -> None:
    """A backend dies: its users go to the next node of their preference
    list at once (retries, then the ring without it); nobody else moves;
    when it returns, exactly its users come back."""
    async def main() -> None:
        transitions: list[tuple[str, str, str]] = []
        async with cluster(on_change=lambda n, old, new, why: transitions.append(
                (n, str(old), str(new)))) as (gateway, backends, session):
            before = await served_by(session, gateway, USERS)
            second = {u: gateway.router.get_preference_list(u, 2)[1] for u in USERS}
            victims = {u for u, node in before.items() if node == "b"}
            assert victims

            await backends["b"].stop()
            during = await served_by(session, gateway, USERS)  # no request fails
            assert {u for u in USERS if during[u] != before[u]} == victims
            assert all(during[u] == second[u] for u in victims)
            assert gateway.counters.snapshot().retries >= 1
            # Failed requests took b out of the ring (fall = 3).
            assert not in_ring(gateway, "b")
            assert ("b", "up", "down") in transitions
            assert await served_by(session, gateway, USERS) == during
            status = {n["node"]: n for n in gateway.status()["nodes"]}
            assert status["b"]["in_ring"] is False
            assert status["b"]["health"]["state"] == "down"
            assert status["b"]["health"]["last_error"] == "connection refused"
            assert status["b"]["ownership"] == 0.0

            await backends["b"].start()
            assert gateway.health is not None
            for _ in range(2):  # rise = 2
                await gateway.health.check_now()
            assert in_ring(gateway, "b")
            assert ("b", "down", "up") in transitions
            after = await served_by(session, gateway, USERS)
            assert after == before
            assert gateway.counters.snapshot().requests["failed"] == 0
    run(main())


def test_background_health_checks_take_a_silent_backend_out_and_back() -> None:
    async def main() -> None:
        async with cluster(health_interval=0.1, health_timeout=5.0,
                           ) as (gateway, backends, session):
            await backends["c"].stop()  # no traffic: only probes notice
            await eventually(lambda: not in_ring(gateway, "c"))
            await backends["c"].start()
            await eventually(lambda: in_ring(gateway, "c"))
            transitions = gateway.counters.snapshot().transitions
            assert transitions == {("c", "down"): 1, ("c", "up"): 1}
    run(main())


def test_undelivered_requests_are_retried_whatever_the_method() -> None:
    async def main() -> None:
        async with cluster(health=False) as (gateway, backends, session):
            owner, second = gateway.router.get_preference_list("u1", 2)
            await backends[owner].stop()
            status, body = await get(session, gateway, "u1", method="POST", data=b"x")
            assert (status, body["backend"], body["body"]) == (200, second, "x")
    run(main())


def test_retry_statuses_respect_idempotency() -> None:
    async def main() -> None:
        async with cluster(health=False) as (gateway, backends, session):
            owner, second = gateway.router.get_preference_list("u1", 2)
            backends[owner].status = 503
            status, body = await get(session, gateway, "u1")
            assert (status, body["backend"]) == (200, second)
            # A POST may have had effects: the backend's answer stands.
            status, body = await get(session, gateway, "u1", method="POST")
            assert (status, body["backend"]) == (503, owner)
            # When every node answers 503, the last answer is passed on.
            for backend in backends.values():
                backend.status = 503
            status, body = await get(session, gateway, "u1")
            assert status == 503 and body["backend"] in backends
        async with cluster(health=False, retry_unsafe=True) as (gateway, backends, session):
            owner, second = gateway.router.get_preference_list("u1", 2)
            backends[owner].status = 503
            status, body = await get(session, gateway, "u1", method="POST")
            assert (status, body["backend"]) == (200, second)
    run(main())


def test_slow_backends_time_out() -> None:
    async def main() -> None:
        async with cluster(health=False, read_timeout=1.0) as (gateway, backends, session):
            owner, second = gateway.router.get_preference_list("u1", 2)
            backends[owner].gate = asyncio.Event()  # never set: the owner hangs
            status, body = await get(session, gateway, "u1")
            assert (status, body["backend"]) == (200, second)
            status, body = await get(session, gateway, "u1", method="POST")
            assert status == 504
            assert f"{owner}: timed out after 1s" in body
    run(main())


def test_when_no_backend_answers() -> None:
    async def main() -> None:
        async with cluster(health=False, attempts=2) as (gateway, backends, session):
            for backend in backends.values():
                await backend.stop()
            status, body = await get(session, gateway, "u1")
            assert status == 502
            first, second = gateway.router.get_preference_list("u1", 2)
            assert body == (f"chash gateway: no backend answered ({first}: connection refused;"
                            f" {second}: connection refused)\n")
            snap = gateway.counters.snapshot()
            assert snap.requests["failed"] == 1 and snap.retries == 1
            for node in list(gateway.router.nodes):
                gateway.router.remove_service_node(node)
            status, body = await get(session, gateway, "u1")
            assert (status, body) == (503, "chash gateway: no backend in service\n")
    run(main())


# -- the gateway's own pages --------------------------------------------------


def test_status_page() -> None:
    async def main() -> None:
        async with cluster() as (gateway, backends, session):
            await served_by(session, gateway, USERS[:30])
            async with session.get(f"{gateway.admin_url}/-/status") as resp:
                assert resp.status == 200
                page = await resp.json()
            assert page["key"] == "header:X-User-Id"
            assert page["ring"]["nodes"] == 3 and page["ring"]["points"] == 300
            assert page["ring"]["fingerprint"] == gateway.router.fingerprint()
            assert page["health"]["fall"] == 3 and page["health"]["panicking"] is False
            nodes = {n["node"]: n for n in page["nodes"]}
            assert set(nodes) == {"a", "b", "c"}
            assert sum(n["ownership"] for n in nodes.values()) == pytest.approx(1.0)
            assert sum(n["lookups"] for n in nodes.values()) == 30
            for name, node in nodes.items():
                assert node["address"] == backends[name].address
                assert node["in_ring"] is True and node["points"] == 100
                assert node["health"]["state"] == "up"
            assert page["requests"] == {"ok": 30, "failed": 0, "rejected": 0}
            assert sum(b.hits for b in backends.values()) == 30
            # On the proxy's port, /-/status is an ordinary path.
            status, body = await get(session, gateway, "u1", "/-/status")
            assert status == 200 and body["path"] == "/-/status"
        # Without admin_listen there is no admin listener at all.
        async with cluster(admin_listen=None) as (gateway, backends, session):
            assert gateway.admin_url is None
            status, body = await get(session, gateway, "u1", "/-/status")
            assert status == 200 and body["path"] == "/-/status"
    run(main())


def test_metrics_page() -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")

    async def main() -> None:
        async with cluster() as (gateway, backends, session):
            await served_by(session, gateway, USERS[:30])
            await backends["a"].stop()
            await served_by(session, gateway, USERS[:30])
            async with session.get(f"{gateway.admin_url}/metrics") as resp:
                assert resp.status == 200
                assert resp.headers["Content-Type"].startswith("text/plain")
                text = await resp.text()
            lines = set(text.splitlines())
            assert 'chash_node_in_ring{node="a"} 0.0' in lines
            assert 'chash_node_up{node="a"} 0.0' in lines
            assert 'chash_node_up{node="b"} 1.0' in lines
            assert 'chash_health_transitions_total{node="a",state="down"} 1.0' in lines
            assert 'chash_node_in_flight{node="b"} 0.0' in lines
            assert 'chash_requests_total{outcome="ok"} 60.0' in lines
            lookups = [line for line in lines if line.startswith("chash_lookups_total{")]
            assert sum(float(line.rsplit(" ", 1)[1]) for line in lookups) == 60
            assert sum(b.hits for b in backends.values()) == 60
        # Without metrics, the admin listener says why at the metrics path;
        # on the proxy's port /metrics is an ordinary path.
        async with cluster(metrics=False) as (gateway, backends, session):
            assert gateway.registry is None
            async with session.get(f"{gateway.admin_url}/metrics") as resp:
                assert resp.status == 404
                assert await resp.text() == "chash gateway: metrics are turned off\n"
            status, body = await get(session, gateway, "u1", "/metrics")
            assert status == 200 and body["path"] == "/metrics"
    run(main())


# -- the command --------------------------------------------------------------


def test_command_serves_until_interrupted(chash_env: dict[str, str]) -> None:
    async def main() -> None:
        backends = [await EchoBackend(name).start() for name in "ab"]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "chash", "gateway", "--listen", "127.0.0.1:0",
            "--backend", f"a={backends[0].address},b={backends[1].address}",
            "--key", "query:user", "--health-interval", "60", "--duration", "60",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=chash_env)
        try:
            assert proc.stdout is not None
            first = (await proc.stdout.readline()).decode()
            assert first.startswith("chash gateway listening on http://127.0.0.1:")
            url = first.split()[-1]
            rest = [(await proc.stdout.readline()).decode() for _ in range(2)]
            assert f"key query:user; backends a={backends[0].address}" in rest[0]
            router = ConsistentHashRouter()
            for name in "ab":
                router.add_service_node(name)
            async with aiohttp.ClientSession() as session:
                for user in ("u1", "u2", "u3", "u4"):
                    async with session.get(f"{url}/x?user={user}") as resp:
                        assert (await resp.json())["backend"] == router.get_target_node(user)
            proc.send_signal(signal.SIGTERM)
            out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            assert b"chash gateway stopping" in out
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            for backend in backends:
                await backend.stop()
    run(main())


@pytest.mark.parametrize(("argv", "message"), [
    ([], "at least one --backend is required"),
    (["--backend", "nowhere"], "backend 'nowhere' is not HOST:PORT"),
    (["--backend", "127.0.0.1:1,127.0.0.1:1"], "backend 127.0.0.1:1 is listed twice"),
    (["--backend", "127.0.0.1:1", "--key", "ip"], "argument --key: unknown key source 'ip'"),
    (["--backend", "127.0.0.1:1", "--listen", "8080"], "argument --listen: expected HOST:PORT"),
    (["--backend", "127.0.0.1:1", "--read-timeout", "0"], "must be a positive number"),
    (["--backend", "127.0.0.1:1", "--fall", "0"], "argument --fall: must be >= 1"),
    (["--backend", "a=127.0.0.1:1", "--weight", "b=2"], "--weight names unknown node(s): b"),
    (["--backend", "127.0.0.1:1", "--health-path", "health"],
     "health_path must start with '/'"),
    (["--backend", "127.0.0.1:1", "--ring", "shop"], "--ring and --bootstrap need --redis URL"),
    (["--backend", "127.0.0.1:1", "--bootstrap"], "--ring and --bootstrap need --redis URL"),
    (["--backend", "127.0.0.1:1", "--vote-ttl", "2"],
     "--vote-ttl and --resync-interval need --redis URL or --etcd URL"),
    (["--backend", "127.0.0.1:1", "--etcd", "http://127.0.0.1:1", "--resync-interval", "0"],
     "argument --resync-interval: must be a positive number of seconds"),
    (["--backend", "127.0.0.1:1", "--redis", "redis://127.0.0.1:1/0", "--etcd",
      "http://127.0.0.1:1"], "give --redis or --etcd, not both"),
    (["--backend", "127.0.0.1:1", "--etcd", "127.0.0.1:2379"],
     "etcd endpoint '127.0.0.1:2379' is not an http(s)://HOST:PORT URL"),
    (["--backend", "127.0.0.1:1", "--nameserver", "127.0.0.1"],
     "--nameserver needs --dns-srv NAME"),
    (["--dns-srv", "_http._tcp.x.example", "--nameserver", "dns.example"],
     "nameserver 'dns.example' is not an IP address"),
    (["--backend", "127.0.0.1:1", "--fail-on-status", "5xx"], "expected HTTP statuses"),
    (["--backend", "127.0.0.1:1", "--max-body", "lots"], "expected a size in bytes"),
    (["--backend", "127.0.0.1:1", "--workers", "0"], "argument --workers: must be >= 1"),
])
def test_command_argument_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                                 message: str) -> None:
    from chash.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["gateway", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage: chash gateway" in err and message in err
