"""TLS to backends (``--backend NAME=https://HOST:PORT``, ``--backend-ca``,
``--backend-insecure``), against real TLS servers (aiohttp and the
websockets library) with certificates made by trustme.

The gateway verifies each backend's certificate for the host of its
address, sends that host as SNI, reuses its pooled TLS connections, probes
``/health`` over TLS with the same verification, carries WebSocket tunnels
over TLS (wss upstream), and refuses a backend it cannot verify with a 502
naming the reason; ``--backend-insecure`` verifies nothing; a reload with a
new CA bundle verifies new connections against it, and one that does not
load changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
httpx = pytest.importorskip("httpx", reason="httpx is not installed")
websockets = pytest.importorskip("websockets", reason="websockets is not installed")
trustme = pytest.importorskip("trustme", reason="trustme (the test extra) is not installed")

from test_gateway_websocket import WsBackend  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from _support.echo_backends import EchoBackend  # noqa: E402
from _support.gateway_processes import gateway_process  # noqa: E402
from _support.tls_certificates import Certificates, make_certificates  # noqa: E402
from _support.waiting import eventually, run  # noqa: E402
from chash.gateway import Gateway, GatewayConfig  # noqa: E402
from chash.gateway.reload import ReloadError, RingChanges  # noqa: E402
from chash.gateway.tls import server_context  # noqa: E402
from chash.gateway.upstream import parse_backend, upstream_of  # noqa: E402
from chash.health import NodeState  # noqa: E402

USERS = [f"user-{i}" for i in range(40)]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def backend_tls(certs: Certificates) -> ssl.SSLContext:
    return server_context(certs.cert, certs.key)


async def tls_backends(certs: Certificates, count: int = 3) -> dict[str, EchoBackend]:
    return {f"b{i}": await EchoBackend(f"b{i}", backend_tls(certs)).start()
            for i in range(count)}


async def stop_all(gateway: Gateway, backends: dict[str, Any]) -> None:
    await gateway.stop()
    for backend in backends.values():
        await backend.stop()


@pytest.mark.parametrize(("text", "address"), [
    ("https://localhost:8443", "https://localhost:8443"),
    ("https://127.0.0.1:08443/", "https://127.0.0.1:8443"),
    (" https://[::1]:443 ", "https://[::1]:443"),
    ("http://10.0.0.1:80", "10.0.0.1:80"),
    ("10.0.0.1:80", "10.0.0.1:80"),
])
def test_backend_addresses(text: str, address: str) -> None:
    assert parse_backend(text) == address


def test_a_backend_address_split() -> None:
    upstream = upstream_of("https://[::1]:8443")
    assert (upstream.secure, upstream.host, upstream.port, upstream.authority) == \
        (True, "::1", 8443, b"[::1]:8443")
    assert not upstream_of("h:80").secure


@pytest.mark.parametrize(("text", "message"), [
    ("https://localhost", "'https://localhost' is not HOST:PORT"),
    ("ftp://a:21", "only http:// and https://"),
    ("https://a:0", "port must be a number from 1 to 65535"),
])
def test_bad_backend_addresses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_backend(text)


def test_https_backends_verified_named_by_sni_pooled_and_health_checked(
        certs: Certificates) -> None:
    async def main() -> None:
        echo = await tls_backends(certs)
        gateway = Gateway({n: b.address for n, b in echo.items()},
                          GatewayConfig(backend_ca=certs.ca, health_interval=0.2))
        try:
            url = await gateway.start()
            health = gateway.health
            assert health is not None
            await eventually(lambda: len(health.status()) == 3 and all(
                s.state is NodeState.UP and s.consecutive_successes >= 2
                for s in health.status().values()), "every TLS backend probed healthy")
            async with httpx.AsyncClient(timeout=30) as client:
                for user in USERS:
                    body = (await client.get(url + "/page", headers={"X-User-Id": user})).json()
                    assert body["backend"] == gateway.router.get_target_node(user.encode())
                    assert body["secure"] is True
                    assert body["headers"]["Host"] == f"localhost:{echo[body['backend']].port}"
            for backend in echo.values():
                assert backend.hits
                # One request at a time: each backend's pooled TLS connection
                # served every request it got.
                assert len(backend.peers) == 1, backend.peers
                assert set(backend.server_names) == {"localhost"}
        finally:
            await stop_all(gateway, echo)

    run(main())


def test_an_untrusted_backend_is_refused_with_the_reason(certs: Certificates) -> None:
    async def main() -> None:
        echo = await tls_backends(certs, 1)
        for config in (GatewayConfig(health=False, backend_ca=certs.client_ca),
                       GatewayConfig(health=False)):  # the system's CAs know not this one
            gateway = Gateway({n: b.address for n, b in echo.items()}, config)
            try:
                url = await gateway.start()
                async with httpx.AsyncClient(timeout=30) as client:
                    resp = await client.get(url + "/x", headers={"X-User-Id": "u"})
                assert resp.status_code == 502
                assert "certificate is not trusted" in resp.text, resp.text
                assert echo["b0"].hits == 0
            finally:
                await gateway.stop()
        await echo["b0"].stop()

    run(main())


def test_the_host_name_is_verified(certs: Certificates, tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    other = ca.issue_cert("other.example")
    other.cert_chain_pems[0].write_to_path(str(tmp_path / "other.pem"))
    other.private_key_pem.write_to_path(str(tmp_path / "other-key.pem"))

    async def main() -> None:
        backend = await EchoBackend("b0", server_context(
            str(tmp_path / "other.pem"), str(tmp_path / "other-key.pem"))).start()
        gateway = Gateway({"b0": backend.address},
                          GatewayConfig(health=False, backend_ca=str(tmp_path / "ca.pem")))
        try:
            url = await gateway.start()
            async with httpx.AsyncClient(timeout=30) as client:
                resp = await client.get(url + "/x", headers={"X-User-Id": "u"})
            assert resp.status_code == 502
            assert "not trusted" in resp.text and "localhost" in resp.text, resp.text
        finally:
            await stop_all(gateway, {"b0": backend})

    run(main())


def test_backend_insecure_verifies_nothing(certs: Certificates) -> None:
    async def main() -> None:
        echo = await tls_backends(certs, 2)
        gateway = Gateway({n: b.address for n, b in echo.items()},
                          GatewayConfig(health=False, backend_insecure=True))
        try:
            url = await gateway.start()
            async with httpx.AsyncClient(timeout=30) as client:
                for user in USERS[:10]:
                    body = (await client.get(url + "/x", headers={"X-User-Id": user})).json()
                    assert body["secure"] is True
        finally:
            await stop_all(gateway, echo)

    run(main())


def test_plain_and_tls_backends_side_by_side(certs: Certificates) -> None:
    async def main() -> None:
        echo = {"tls": await EchoBackend("tls", backend_tls(certs)).start(),
                "plain": await EchoBackend("plain").start()}
        gateway = Gateway({n: b.address for n, b in echo.items()},
                          GatewayConfig(health=False, backend_ca=certs.ca))
        try:
            url = await gateway.start()
            seen = set()
            async with httpx.AsyncClient(timeout=30) as client:
                for user in USERS:
                    body = (await client.get(url + "/x", headers={"X-User-Id": user})).json()
                    assert body["secure"] is (body["backend"] == "tls")
                    seen.add(body["backend"])
            assert seen == {"tls", "plain"}
        finally:
            await stop_all(gateway, echo)

    run(main())


def test_websocket_tunnels_to_wss_backends(certs: Certificates) -> None:
    async def main() -> None:
        ws_backends = {name: await WsBackend(name, backend_tls(certs)).start() for name in "ab"}
        gateway = Gateway({b.name: b.address for b in ws_backends.values()},
                          GatewayConfig(health=False, backend_ca=certs.ca))
        try:
            await gateway.start()
            port = gateway.bound[0][1]
            for user in USERS[:8]:
                async with connect(f"ws://127.0.0.1:{port}/room",
                                   additional_headers={"X-User-Id": user}) as ws:
                    hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    assert hello["backend"] == gateway.router.get_target_node(user.encode())
                    await ws.send(b"\x01" * 100_000)
                    assert await asyncio.wait_for(ws.recv(), 10) == b"\x01" * 100_000
            for backend in ws_backends.values():
                for headers in backend.handshakes:
                    assert headers["Host"].startswith("localhost:")
        finally:
            await stop_all(gateway, ws_backends)

    run(main())


def test_backend_settings_checked(certs: Certificates, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="backend_ca and backend_insecure"):
        GatewayConfig(backend_ca=certs.ca, backend_insecure=True)
    with pytest.raises(TypeError, match="backend_insecure must be a bool"):
        GatewayConfig(backend_insecure=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backend_ca: no such file"):
        Gateway({"b": "https://localhost:9"},
                GatewayConfig(health=False, backend_ca=str(tmp_path / "missing.pem")))
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"backend_ca: .*empty\.pem"):
        Gateway({"b": "https://localhost:9"},
                GatewayConfig(health=False, backend_ca=str(empty)))


def test_a_reload_verifies_new_connections_with_the_new_ca(
        certs: Certificates, tmp_path: Path) -> None:
    async def main() -> None:
        echo = await tls_backends(certs, 1)
        address = echo["b0"].address
        config = GatewayConfig(health=False, backend_ca=certs.client_ca)
        gateway = Gateway({"b0": address}, config)
        try:
            url = await gateway.start()
            async with httpx.AsyncClient(timeout=30) as client:
                async def status() -> int:
                    return (await client.get(url + "/x", headers={"X-User-Id": "u"})).status_code

                assert await status() == 502
                missing = GatewayConfig(health=False, backend_ca=str(tmp_path / "gone.pem"))
                with pytest.raises(ReloadError, match="backend_ca: no such file"):
                    gateway.reconfigure(missing, RingChanges())
                assert gateway.config is config and await status() == 502
                good = GatewayConfig(health=False, backend_ca=certs.ca)
                assert gateway.reconfigure(good, RingChanges()) == ("backend_ca",)
                assert await status() == 200
                # The same CA again: the pool and its connection are kept.
                peers = set(echo["b0"].peers)
                gateway.reconfigure(GatewayConfig(health=False, backend_ca=certs.ca),
                                    RingChanges())
                assert await status() == 200 and echo["b0"].peers == peers
        finally:
            await stop_all(gateway, echo)

    run(main())


def test_the_command_speaks_tls_to_its_backends(certs: Certificates, tmp_path: Path) -> None:
    async def main() -> None:
        echo = await tls_backends(certs, 2)
        config = tmp_path / "gateway.toml"
        config.write_text(f'backend_ca = "{certs.ca}"\nhealth_interval = 0.5\n'
                          f'backend = ["b0={echo["b0"].address}", "b1={echo["b1"].address}"]\n')
        try:
            async with gateway_process("--config", str(config)) as gateway, \
                    httpx.AsyncClient(timeout=30) as client:
                for user in USERS[:10]:
                    body = (await client.get(gateway.url + "/x",
                                             headers={"X-User-Id": user})).json()
                    assert body["secure"] is True
        finally:
            for backend in echo.values():
                await backend.stop()

    run(main())


def test_check_config_reads_the_backend_ca(certs: Certificates, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from chash.cli import main

    config = tmp_path / "gateway.toml"
    config.write_text(f'backend = ["https://localhost:9"]\nbackend_ca = "{tmp_path}/none.pem"\n')
    with pytest.raises(SystemExit) as exit_:
        main(["gateway", "--check-config", str(config)])
    assert exit_.value.code == 2
    assert "backend_ca: no such file" in capsys.readouterr().err
    config.write_text(f'backend = ["https://localhost:9"]\nbackend_ca = "{certs.ca}"\n')
    assert main(["gateway", "--check-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f'backend_ca = "{certs.ca}"' in out and "https://localhost:9" in out
