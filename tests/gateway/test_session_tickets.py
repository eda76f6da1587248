"""TLS session tickets through real gateways (chash.gateway.session_tickets):
a gateway keeps its keys through a reload that renews the certificate and
changes them with the rules of who may resume; the workers of ``--workers
2`` share them, so a client resumes on either worker, before and after
SIGHUP.  Certificates made by trustme.  The keys on their own (contexts
with the same keys, the derivation, the ``SSL_CTX`` OpenSSL vouches for)
are tested in tests/tickets, on every interpreter CI has.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import ssl
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from _support.echo_backends import EchoBackend
from _support.tls_certificates import Certificates, make_certificates
from _support.waiting import run
from chash.gateway import Gateway, GatewayConfig
from chash.gateway.reload import RingChanges


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def client_context(certs: Certificates) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=certs.ca)


def connect(port: int, context: ssl.SSLContext,
            session: ssl.SSLSession | None = None) -> tuple[bool, ssl.SSLSession | None]:
    """One request on a new connection offering ``session``, its whole
    answer read (and with it the tickets); whether it resumed, and the
    session to offer next."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
        tls.sendall(b"GET /x HTTP/1.1\r\nHost: localhost\r\nX-User-Id: u\r\n"
                    b"Connection: close\r\n\r\n")
        while tls.recv(65536):
            pass
        return tls.session_reused, tls.session


def in_turn(port: int, context: ssl.SSLContext, session: ssl.SSLSession | None,
            count: int) -> tuple[list[bool], ssl.SSLSession | None]:
    """``count`` connections, each offering the last one's session."""
    out = []
    for _ in range(count):
        reused, session = connect(port, context, session)
        out.append(reused)
    return out, session


def test_a_reload_keeps_sessions_unless_the_rules_of_who_may_resume_change(
        certs: Certificates, tmp_path: Path) -> None:
    async def main() -> None:
        backend = await EchoBackend("b0").start()
        live_cert, live_key = tmp_path / "cert.pem", tmp_path / "key.pem"
        shutil.copy(certs.cert, live_cert)
        shutil.copy(certs.key, live_key)
        config = GatewayConfig(health=False, tls_cert=str(live_cert), tls_key=str(live_key))
        gateway = Gateway({"b0": backend.address}, config)
        client = client_context(certs)
        try:
            await gateway.start()
            port = gateway.bound[0][1]
            got, session = await asyncio.to_thread(in_turn, port, client, None, 3)
            assert got == [False, True, True]
            # A renewed certificate: a session issued before still resumes.
            shutil.copy(certs.cert2, live_cert)
            shutil.copy(certs.key2, live_key)
            gateway.reconfigure(config, RingChanges())
            got, session = await asyncio.to_thread(in_turn, port, client, session, 2)
            assert got == [True, True]
            # Other ciphers: new keys, and the session of before is not resumed.
            gateway.reconfigure(config.replace(tls_ciphers="ECDHE+AESGCM"), RingChanges())
            got, _ = await asyncio.to_thread(in_turn, port, client, session, 2)
            assert got == [False, True]
        finally:
            await gateway.stop()
            await backend.stop()

    run(main())


def test_every_worker_resumes_every_session_before_and_after_sighup(
        certs: Certificates, tmp_path: Path) -> None:
    """``--workers 2``: the kernel spreads connections over both workers,
    and each connection after the first resumes, whichever worker issued
    its ticket (with keys of each worker's own, about half would not); a
    SIGHUP that renews the certificate keeps them resumable."""
    from _support.gateway_processes import gateway_process, status
    from _support.waiting import eventually

    async def main() -> None:
        backend = await EchoBackend("b0").start()
        live_cert, live_key = tmp_path / "cert.pem", tmp_path / "key.pem"
        shutil.copy(certs.cert, live_cert)
        shutil.copy(certs.key, live_key)
        config = tmp_path / "gateway.toml"
        config.write_text(f'tls_cert = "{live_cert}"\ntls_key = "{live_key}"\nno_health = true\n'
                          f'admin_listen = "127.0.0.1:0"\nworkers = 2\n'
                          f'backend = ["b0={backend.address}"]\n')
        client = client_context(certs)
        try:
            async with gateway_process("--config", str(config)) as (url, admin, proc):
                assert admin is not None
                port = int(url.rsplit(":", 1)[1])

                async def served(digest: str | None = None) -> bool:
                    workers = (await status(admin)).get("workers", [])
                    return len(workers) == 2 and (
                        digest is None or all(w["tls_certificate"] == digest for w in workers))

                await eventually(served, "both workers serve", timeout=30)
                old = (await status(admin))["tls"]["certificate_sha256"]
                got, session = await asyncio.to_thread(in_turn, port, client, None, 24)
                assert got == [False] + [True] * 23
                shutil.copy(certs.cert2, live_cert)
                shutil.copy(certs.key2, live_key)
                proc.send_signal(signal.SIGHUP)

                async def renewed() -> bool:
                    workers = (await status(admin)).get("workers", [])
                    return len(workers) == 2 and all(w["tls_certificate"] != old
                                                     for w in workers)
                await eventually(renewed, "every worker reloaded", timeout=30)
                got, _ = await asyncio.to_thread(in_turn, port, client, session, 24)
                assert got == [True] * 24
        finally:
            await backend.stop()

    run(main(), timeout=180)
