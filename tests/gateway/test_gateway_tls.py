"""TLS to clients (chash.gateway.tls, chash.gateway.listener), against real
clients: httpx, the websockets library, Python's ssl and ``openssl
s_client``, with certificates made by trustme.

HTTPS routes every key as HTTP does and tells the backends
``X-Forwarded-Proto: https``; TLS 1.2 and 1.3 with ALPN http/1.1; a
failed handshake (garbage, plain HTTP, an old version, silence, no client
certificate) closes that connection only, logged once with its reason;
client certificates are verified and their subject is a key; wss works
as ws does; a reload serves a new certificate to new handshakes while open
connections keep theirs, and a certificate that does not load changes
nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import shutil
import signal
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
httpx = pytest.importorskip("httpx", reason="httpx is not installed")
websockets = pytest.importorskip("websockets", reason="websockets is not installed")

from test_gateway_websocket import WsBackend  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from _support.compat_programs import require  # noqa: E402
from _support.echo_backends import EchoBackend  # noqa: E402
from _support.tls_certificates import Certificates, make_certificates  # noqa: E402
from _support.waiting import run  # noqa: E402
from chash.gateway import Gateway, GatewayConfig  # noqa: E402
from chash.gateway.reload import ReloadError, RingChanges  # noqa: E402
from chash.gateway.tls import server_context, subject_of  # noqa: E402

USERS = [f"user-{i}" for i in range(40)]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"),
                             clients=("tenant-a", "tenant-b", "Acme, Inc. +1"))


def tls_config(certs: Certificates, **options: Any) -> GatewayConfig:
    options.setdefault("health", False)
    return GatewayConfig(tls_cert=certs.cert, tls_key=certs.key, **options)


def client_context(certs: Certificates, client: str | None = None,
                   version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs.ca)
    if client is not None:
        context.load_cert_chain(certs.clients[client])
    if version is not None:
        context.minimum_version = context.maximum_version = version
    return context


async def backends(count: int = 3) -> dict[str, EchoBackend]:
    return {f"b{i}": await EchoBackend(f"b{i}").start() for i in range(count)}


def port_of(gateway: Gateway) -> int:
    return gateway.bound[0][1]


async def handshake(port: int, context: ssl.SSLContext) -> ssl.SSLObject:
    """A TLS connection to the gateway; its SSL object (closed after)."""
    _, writer = await asyncio.wait_for(asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost"), 10)
    tls = writer.get_extra_info("ssl_object")
    writer.close()
    return tls  # type: ignore[no-any-return]


def test_https_routes_every_key_as_http_does_and_says_https(certs: Certificates) -> None:
    async def main() -> None:
        echo = await backends()
        gateway = Gateway({n: b.address for n, b in echo.items()}, tls_config(certs))
        try:
            url = await gateway.start()
            assert url.startswith("https://127.0.0.1:")
            async with httpx.AsyncClient(verify=client_context(certs), timeout=30) as client:
                for user in USERS:
                    resp = await client.get(f"https://localhost:{port_of(gateway)}/page",
                                            headers={"X-User-Id": user})
                    body = resp.json()
                    assert body["backend"] == gateway.router.get_target_node(user.encode())
                    assert body["headers"]["X-Forwarded-Proto"] == "https"
                    assert resp.http_version == "HTTP/1.1"
            for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
                context = client_context(certs, version=version)
                context.set_alpn_protocols(["h2", "http/1.1"])
                tls = await handshake(port_of(gateway), context)
                assert tls.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                         ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
                assert tls.selected_alpn_protocol() == "http/1.1"
            assert gateway.status()["tls"]["handshake_failures"] == 0
        finally:
            await gateway.stop()
            for backend in echo.values():
                await backend.stop()

    run(main())


def test_an_answer_with_connection_close_ends_the_tls_connection_at_once(
        certs: Certificates) -> None:
    """A client that asks ``Connection: close`` and reads to the end gets
    TLS's close_notify right after the answer, not after the lingering
    close's wait for silence (2 s: TLS has no half-close to send)."""
    def fetch(port: int) -> bytes:
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        with client_context(certs).wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"GET /x HTTP/1.1\r\nHost: localhost\r\nX-User-Id: u\r\n"
                        b"Connection: close\r\n\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += tls.recv(65536)
            tls.settimeout(1.5)  # the end comes at once (it used to take 2 s)
            while chunk := tls.recv(65536):
                answer += chunk
            return answer

    async def main() -> None:
        echo = await backends(1)
        gateway = Gateway({n: b.address for n, b in echo.items()}, tls_config(certs))
        try:
            await gateway.start()
            for _ in range(3):
                answer = await asyncio.to_thread(fetch, port_of(gateway))
                assert answer.startswith(b"HTTP/1.1 200 ")
                assert b"connection: close" in answer.lower()
        finally:
            await gateway.stop()
            for backend in echo.values():
                await backend.stop()

    run(main())


def test_a_tls_connection_without_a_request_is_closed_when_idle(certs: Certificates) -> None:
    """A client that handshakes and sends nothing is closed after the idle
    timeout, silently (TLS's close, then the end), while one that asks
    in time is answered."""
    async def main() -> None:
        echo = await backends(1)
        gateway = Gateway({n: b.address for n, b in echo.items()},
                          tls_config(certs, idle_timeout=0.5))
        try:
            await gateway.start()
            loop = asyncio.get_running_loop()
            opened = loop.time()
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                "127.0.0.1", port_of(gateway), ssl=client_context(certs),
                server_hostname="localhost"), 10)
            assert await asyncio.wait_for(reader.read(), 20) == b""  # closed by the gateway
            assert loop.time() - opened >= 0.4
            writer.close()
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                "127.0.0.1", port_of(gateway), ssl=client_context(certs),
                server_hostname="localhost"), 10)
            await asyncio.sleep(0.2)
            writer.write(b"GET /x HTTP/1.1\r\nHost: localhost\r\nX-User-Id: u\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200 ")
            # The answer's body, then the end once the connection is idle again.
            rest = await asyncio.wait_for(reader.read(), 20)
            assert json.loads(rest)["backend"] == "b0"
            writer.close()
        finally:
            await gateway.stop()
            for backend in echo.values():
                await backend.stop()

    run(main())


def test_plain_http_is_still_plain(certs: Certificates) -> None:
    async def main() -> None:
        echo = await backends(1)
        gateway = Gateway({n: b.address for n, b in echo.items()}, GatewayConfig(health=False))
        try:
            url = await gateway.start()
            assert url.startswith("http://") and gateway.tls_context is None
            async with httpx.AsyncClient(timeout=30) as client:
                body = (await client.get(url + "/x", headers={"X-User-Id": "u"})).json()
            assert body["headers"]["X-Forwarded-Proto"] == "http"
            assert gateway.status()["tls"] is None
        finally:
            await gateway.stop()
            await echo["b0"].stop()

    run(main())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_failed_handshake_closes_that_connection_only_logged_once(
        certs: Certificates, caplog: pytest.LogCaptureFixture, loop: str) -> None:
    async def main() -> None:
        echo = await backends(2)
        gateway = Gateway({n: b.address for n, b in echo.items()},
                          tls_config(certs, tls_handshake_timeout=0.5, tls_min_version="1.3"))
        try:
            await gateway.start()
            port = port_of(gateway)
            async with httpx.AsyncClient(verify=client_context(certs), timeout=30) as client:
                url = f"https://localhost:{port}/x"
                assert (await client.get(url, headers={"X-User-Id": "kept"})).status_code == 200

                async def send(data: bytes) -> bytes:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(data)
                    answer = await asyncio.wait_for(reader.read(), 10)  # closed by the gateway
                    writer.close()
                    return answer

                await send(b"\x16\x03\x01\x00\x05garbage-that-is-no-hello" * 4)
                await send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                await send(b"")  # silence: the handshake times out
                with pytest.raises((ssl.SSLError, ConnectionError)):
                    await handshake(port, client_context(certs, version=ssl.TLSVersion.TLSv1_2))
                failures = [r for r in caplog.records if "TLS handshake" in r.getMessage()]
                for _ in range(100):  # the last failure may be logged just after
                    if len(failures) == 4:
                        break
                    await asyncio.sleep(0.05)
                    failures = [r for r in caplog.records if "TLS handshake" in r.getMessage()]
                reasons = [r.getMessage().split("failed: ", 1)[1] for r in failures]
                assert len(reasons) == 4, reasons
                assert "a plain HTTP request on the TLS port" in reasons
                assert "timed out" in reasons
                assert any("unsupported protocol" in r or "version" in r for r in reasons)
                assert gateway.tls_handshake_failures == 4
                assert gateway.status()["tls"]["handshake_failures"] == 4
                # The connection opened before is served on, as are new ones.
                assert (await client.get(url, headers={"X-User-Id": "kept"})).status_code == 200
            async with httpx.AsyncClient(verify=client_context(certs), timeout=30) as client:
                assert (await client.get(url, headers={"X-User-Id": "new"})).status_code == 200
        finally:
            await gateway.stop()
            for backend in echo.values():
                await backend.stop()

    caplog.set_level(logging.INFO, logger="chash.gateway")
    if loop == "uvloop":  # the loop chash gateway runs on when installed
        uvloop = pytest.importorskip("uvloop", reason="uvloop (the gateway extra) is not installed")
        uvloop.run(asyncio.wait_for(main(), 60))
    else:
        run(main())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_listener_out_of_descriptors_says_so_rests_and_serves_on(
        certs: Certificates, caplog: pytest.LogCaptureFixture, loop: str) -> None:
    """An accept that fails (here: no descriptor left) is logged, the
    listener rests a moment instead of spinning, and the connection that
    waited is served once descriptors are free again."""
    async def main() -> None:
        echo = await backends(1)
        gateway = Gateway({n: b.address for n, b in echo.items()}, tls_config(certs))
        limits = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            await gateway.start()
            # Connected by the kernel, waiting in the backlog: the loop has
            # not run since, so the listener has not accepted it yet.
            waiting = socket.create_connection(("127.0.0.1", port_of(gateway)), timeout=10)
            lowest_free = os.dup(0)
            os.close(lowest_free)
            resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, limits[1]))
            try:
                for _ in range(200):
                    if any("accepting a TLS connection failed" in r.getMessage()
                           for r in caplog.records):
                        break
                    await asyncio.sleep(0.01)
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, limits)
            failed = [r.getMessage() for r in caplog.records
                      if "accepting a TLS connection failed" in r.getMessage()]
            assert failed and "Too many open files" in failed[0], failed
            assert len(failed) <= 3, failed  # it rests between tries, not spinning
            waiting.setblocking(False)
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                sock=waiting, ssl=client_context(certs), server_hostname="localhost"), 10)
            writer.write(b"GET /x HTTP/1.1\r\nHost: localhost\r\nX-User-Id: u\r\n"
                         b"Connection: close\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:80]
            assert gateway.tls_handshake_failures == 0
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, limits)
            await gateway.stop()
            for backend in echo.values():
                await backend.stop()

    caplog.set_level(logging.INFO, logger="chash.gateway")
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop", reason="uvloop (the gateway extra) is not installed")
        uvloop.run(asyncio.wait_for(main(), 60))
    else:
        run(main())


def test_client_certificates_are_required_and_their_subject_is_the_key(
        certs: Certificates) -> None:
    async def main() -> None:
        echo = await backends(4)
        gateway = Gateway({n: b.address for n, b in echo.items()},
                          tls_config(certs, tls_client_ca=certs.client_ca, key="tls-subject",
                                     missing_key="reject"))
        try:
            await gateway.start()
            url = f"https://localhost:{port_of(gateway)}/x"
            for name in certs.clients:
                subject = _openssl_subject(certs.clients[name])
                async with httpx.AsyncClient(verify=client_context(certs, name),
                                             timeout=30) as client:
                    body = (await client.get(url)).json()
                assert body["backend"] == gateway.router.get_target_node(subject.encode()), name
            with pytest.raises(httpx.TransportError):  # no certificate: refused
                async with httpx.AsyncClient(verify=client_context(certs), timeout=30) as client:
                    await client.get(url)
            assert gateway.tls_handshake_failures >= 1
        finally:
            await gateway.stop()
            for backend in echo.values():
                await backend.stop()

    run(main())


def _openssl_subject(pem: str) -> str:
    """The certificate's subject as ``openssl x509 -nameopt RFC2253``
    writes it (nginx's ``$ssl_client_s_dn``): the oracle of ``subject_of``."""
    out = subprocess.run([require("openssl"), "x509", "-in", pem, "-noout", "-subject",
                          "-nameopt", "RFC2253"], capture_output=True, text=True, check=True)
    return out.stdout.strip().removeprefix("subject=")


def test_the_subject_is_written_as_openssl_writes_it(certs: Certificates) -> None:
    for pem in certs.clients.values():
        decoded = ssl._ssl._test_decode_cert(pem)  # type: ignore[attr-defined]
        assert subject_of(decoded) == _openssl_subject(pem).encode()
    assert subject_of(None) is None and subject_of({}) is None


def test_tls_subject_needs_client_certificates() -> None:
    with pytest.raises(ValueError, match=r"tls-subject .* needs tls_client_ca"):
        GatewayConfig(key="tls-subject", tls_cert="c.pem")
    with pytest.raises(ValueError, match="tls_client_ca without tls_cert"):
        GatewayConfig(tls_client_ca="ca.pem")
    with pytest.raises(ValueError, match=r"tls_min_version must be '1\.2' or '1\.3'"):
        GatewayConfig(tls_cert="c.pem", tls_min_version="1.1")
    from chash.httpx.exchange import reader_for

    with pytest.raises(ValueError, match="tls-subject is the gateway's"):
        reader_for("tls-subject")


def test_files_that_do_not_load_are_named(certs: Certificates, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no such file: .*missing\.pem"):
        Gateway(["127.0.0.1:9"],
                GatewayConfig(health=False, tls_cert=str(tmp_path / "missing.pem")))
    with pytest.raises(ValueError, match="not a certificate and its private key"):
        server_context(certs.cert, certs.key2)  # the key of another certificate
    with pytest.raises(ValueError, match="tls_ciphers: OpenSSL knows no cipher"):
        server_context(certs.cert, certs.key, ciphers="NO-SUCH-CIPHER")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a pem\n")
    with pytest.raises(ValueError, match=r"tls_client_ca: .*junk\.pem"):
        server_context(certs.cert, certs.key, client_ca=str(junk))


def test_wss_through_the_gateway_as_ws(certs: Certificates) -> None:
    async def main() -> None:
        ws_backends = {name: await WsBackend(name).start() for name in "abc"}
        gateway = Gateway({b.name: b.address for b in ws_backends.values()}, tls_config(certs))
        try:
            await gateway.start()
            for user in USERS[:10]:
                async with connect(f"wss://localhost:{port_of(gateway)}/room",
                                   ssl=client_context(certs),
                                   additional_headers={"X-User-Id": user}) as ws:
                    hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    assert hello["backend"] == gateway.router.get_target_node(user.encode())
                    await ws.send("over TLS")
                    assert await asyncio.wait_for(ws.recv(), 10) == "over TLS"
                    await ws.send(b"\x00" * 100_000)
                    assert await asyncio.wait_for(ws.recv(), 10) == b"\x00" * 100_000
            assert ws_backends["a"].handshakes or ws_backends["b"].handshakes
            for backend in ws_backends.values():
                for headers in backend.handshakes:
                    assert headers["X-Forwarded-Proto"] == "https"
        finally:
            await gateway.stop()
            for backend in ws_backends.values():
                await backend.stop()

    run(main())


def _served(tls: ssl.SSLObject) -> bytes:
    der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def _der(pem: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(Path(pem).read_text())


def test_a_reload_serves_a_new_certificate_to_new_handshakes_only(
        certs: Certificates, tmp_path: Path) -> None:
    async def main() -> None:
        echo = await backends(2)
        live_cert, live_key = tmp_path / "live-cert.pem", tmp_path / "live-key.pem"
        shutil.copy(certs.cert, live_cert)
        shutil.copy(certs.key, live_key)
        config = GatewayConfig(health=False, tls_cert=str(live_cert), tls_key=str(live_key))
        gateway = Gateway({n: b.address for n, b in echo.items()}, config)
        try:
            await gateway.start()
            port = port_of(gateway)
            assert _served(await handshake(port, client_context(certs))) == _der(certs.cert)
            before = gateway.tls_certificate
            async with httpx.AsyncClient(verify=client_context(certs), timeout=30) as client:
                url = f"https://localhost:{port}/x"
                assert (await client.get(url, headers={"X-User-Id": "u"})).status_code == 200
                # A renewed certificate at the same paths: a reload reads it.
                shutil.copy(certs.cert2, live_cert)
                shutil.copy(certs.key2, live_key)
                assert gateway.reconfigure(config, RingChanges()) == ()
                assert _served(await handshake(port, client_context(certs))) == _der(certs.cert2)
                assert gateway.tls_certificate != before
                # The connection open before keeps its session and is served.
                assert (await client.get(url, headers={"X-User-Id": "u"})).status_code == 200
                # A certificate that does not load changes nothing.
                live_key.write_text(Path(certs.key).read_text())  # another certificate's key
                with pytest.raises(ReloadError, match="not a certificate and its private key"):
                    gateway.reconfigure(config, RingChanges())
                assert _served(await handshake(port, client_context(certs))) == _der(certs.cert2)
                # TLS off while running: refused, naming the setting.
                with pytest.raises(ReloadError, match="tls_cert: TLS cannot be turned on or off"):
                    gateway.reconfigure(config.replace(tls_cert=None, tls_key=None),
                                        RingChanges())
                assert (await client.get(url, headers={"X-User-Id": "u"})).status_code == 200
        finally:
            await gateway.stop()
            for backend in echo.values():
                await backend.stop()

    run(main())


def test_openssl_s_client_against_the_command(certs: Certificates, tmp_path: Path) -> None:
    """``chash gateway`` from a TOML file, as a process: openssl s_client
    negotiates TLS 1.3 and ALPN http/1.1 and verifies the chain; an
    HTTP request over it is answered; ``-tls1_1`` is refused."""
    from _support.gateway_processes import gateway_process

    openssl = require("openssl")

    async def main() -> None:
        echo = await backends(2)
        config = tmp_path / "gateway.toml"
        config.write_text(f'tls_cert = "{certs.cert}"\ntls_key = "{certs.key}"\n'
                          f'tls_min_version = "1.2"\nno_health = true\n'
                          f'backend = ["b0={echo["b0"].address}", "b1={echo["b1"].address}"]\n')
        try:
            async with gateway_process("--config", str(config)) as gateway:
                assert gateway.url.startswith("https://")
                port = gateway.url.rsplit(":", 1)[1]
                proc = await asyncio.create_subprocess_exec(
                    openssl, "s_client", "-connect", f"127.0.0.1:{port}", "-servername",
                    "localhost", "-CAfile", certs.ca, "-alpn", "http/1.1", "-verify_return_error",
                    "-ign_eof", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT)
                out, _ = await asyncio.wait_for(proc.communicate(
                    b"GET /x HTTP/1.1\r\nHost: localhost\r\nX-User-Id: u1\r\n"
                    b"Connection: close\r\n\r\n"), 30)
                text = out.decode(errors="replace")
                assert "ALPN protocol: http/1.1" in text, text
                assert "Verify return code: 0 (ok)" in text, text
                assert "TLSv1.3" in text, text
                assert "HTTP/1.1 200" in text, text
                assert '"X-Forwarded-Proto": "https"' in text, text
                proc = await asyncio.create_subprocess_exec(
                    openssl, "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_1",
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                out, _ = await asyncio.wait_for(proc.communicate(), 30)
                assert proc.returncode != 0 and b"HTTP/1.1" not in out
        finally:
            for backend in echo.values():
                await backend.stop()

    run(main())


def test_check_config_reads_the_certificates(certs: Certificates, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from chash.cli import main

    config = tmp_path / "gateway.toml"
    config.write_text(f'backend = ["127.0.0.1:9"]\ntls_cert = "{certs.cert}"\n'
                      f'tls_key = "{certs.key2}"\n')
    with pytest.raises(SystemExit) as exit_:
        main(["gateway", "--check-config", str(config)])
    assert exit_.value.code == 2
    assert "not a certificate and its private key" in capsys.readouterr().err
    config.write_text(f'backend = ["127.0.0.1:9"]\ntls_cert = "{certs.cert}"\n'
                      f'tls_key = "{certs.key}"\n')
    assert main(["gateway", "--check-config", str(config)]) == 0
    assert f'tls_cert = "{certs.cert}"' in capsys.readouterr().out


def test_the_listener_takes_a_given_socket_and_closes_it(certs: Certificates) -> None:
    async def main() -> None:
        gateway = Gateway(["127.0.0.1:9"], tls_config(certs))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        try:
            await gateway.start(sock=sock)
            assert gateway.bound == [sock.getsockname()]
            with pytest.raises(RuntimeError, match="already running"):
                await gateway.start()
        finally:
            await gateway.stop()
        assert sock.fileno() == -1  # closed with the listener

    run(main())


def test_every_worker_serves_the_renewed_certificate_after_sighup(
        certs: Certificates, tmp_path: Path) -> None:
    """``--workers 2`` with TLS: SIGHUP makes each worker read the renewed
    certificate; the status page shows each worker's, and every new
    handshake (whichever worker takes it) gets the new one, while a
    keep-alive connection opened before goes on."""
    from _support.gateway_processes import gateway_process, status
    from _support.waiting import eventually

    async def main() -> None:
        echo = await backends(2)
        live_cert, live_key = tmp_path / "live-cert.pem", tmp_path / "live-key.pem"
        shutil.copy(certs.cert, live_cert)
        shutil.copy(certs.key, live_key)
        config = tmp_path / "gateway.toml"
        config.write_text(f'tls_cert = "{live_cert}"\ntls_key = "{live_key}"\nno_health = true\n'
                          f'admin_listen = "127.0.0.1:0"\nworkers = 2\n'
                          f'backend = ["b0={echo["b0"].address}", "b1={echo["b1"].address}"]\n')
        old, new = _fingerprint(certs.cert), _fingerprint(certs.cert2)
        try:
            async with gateway_process("--config", str(config)) as (url, admin, proc):
                assert admin is not None
                port = int(url.rsplit(":", 1)[1])

                async def workers_serve(digest: str) -> bool:
                    workers = (await status(admin)).get("workers", [])
                    return len(workers) == 2 and all(w["tls_certificate"] == digest
                                                     for w in workers)
                await eventually(lambda: workers_serve(old), "both workers serve", timeout=30)
                async with httpx.AsyncClient(verify=client_context(certs), timeout=30) as client:
                    page = f"https://localhost:{port}/x"
                    assert (await client.get(page, headers={"X-User-Id": "u"})).status_code == 200
                    shutil.copy(certs.cert2, live_cert)
                    shutil.copy(certs.key2, live_key)
                    proc.send_signal(signal.SIGHUP)
                    await eventually(lambda: workers_serve(new), "every worker reloaded",
                                     timeout=30)
                    for _ in range(10):  # new handshakes, on either worker
                        tls = await handshake(port, client_context(certs))
                        assert _served(tls) == _der(certs.cert2)
                    assert (await client.get(page, headers={"X-User-Id": "u"})).status_code == 200
                assert (await status(admin))["tls"]["certificate_sha256"] == new
        finally:
            for backend in echo.values():
                await backend.stop()

    run(main(), timeout=180)


def _fingerprint(pem: str) -> str:
    """``openssl x509 -fingerprint -sha256``'s hex: what the status page shows."""
    out = subprocess.run([require("openssl"), "x509", "-in", pem, "-noout", "-fingerprint",
                          "-sha256"], capture_output=True, text=True, check=True)
    return out.stdout.strip().split("=", 1)[1]
