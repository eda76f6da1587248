"""TLS session tickets (chash.gateway.session_tickets): contexts given the same
keys open each other's tickets; a gateway keeps its keys through a reload that
renews the certificate and changes them with the rules of who may resume; the
workers of ``--workers 2`` share them, so a client resumes on either worker,
before and after SIGHUP.  Handshakes in memory (``ssl.MemoryBIO``) and
against real gateways, with certificates made by trustme.
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
from chash.gateway.session_tickets import (
    TICKET_KEYS_SIZE,
    new_ticket_keys,
    set_ticket_keys,
    ticket_keys_for,
)
from chash.gateway.tls import server_context


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def client_context(certs: Certificates) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=certs.ca)


def in_memory(server: ssl.SSLContext, client: ssl.SSLContext,
              session: ssl.SSLSession | None = None) -> ssl.SSLObject:
    """A whole TLS connection in memory, the server's tickets read by the
    client; the client's SSL object."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    ours = client.wrap_bio(to_client, to_server, server_hostname="localhost", session=session)
    theirs = server.wrap_bio(to_server, to_client, server_side=True)
    done = set()
    for _ in range(10):
        for name, side in (("client", ours), ("server", theirs)):
            if name not in done:
                try:
                    side.do_handshake()
                    done.add(name)
                except ssl.SSLWantReadError:
                    pass
        if len(done) == 2:
            break
    assert done == {"client", "server"}
    theirs.write(b"x")  # TLS 1.3 tickets come after the handshake: read them
    assert ours.read(1) == b"x"
    return ours


def keyed_context(certs: Certificates, keys: bytes) -> ssl.SSLContext:
    context = server_context(certs.cert, certs.key)
    assert set_ticket_keys(context, keys)
    return context


def test_contexts_with_the_same_keys_open_each_others_tickets(certs: Certificates) -> None:
    keys = new_ticket_keys()
    first, second = keyed_context(certs, keys), keyed_context(certs, keys)
    client = client_context(certs)
    session = in_memory(first, client).session
    assert session is not None
    assert in_memory(second, client, session).session_reused
    # Other keys (a context of its own, or other set keys) open none of them.
    assert not in_memory(server_context(certs.cert, certs.key), client, session).session_reused
    assert not in_memory(keyed_context(certs, new_ticket_keys()), client,
                         session).session_reused


def test_keys_are_derived_from_the_base_and_every_rule() -> None:
    base = new_ticket_keys()
    keys = ticket_keys_for(base, b"ab", b"c")
    assert len(keys) == TICKET_KEYS_SIZE and keys == ticket_keys_for(base, b"ab", b"c")
    others = {ticket_keys_for(base, b"a", b"bc"), ticket_keys_for(base, b"ab", b"d"),
              ticket_keys_for(new_ticket_keys(), b"ab", b"c"), ticket_keys_for(base, b"abc")}
    assert keys not in others and len(others) == 4


def test_keys_of_another_size_are_refused(certs: Certificates) -> None:
    context = server_context(certs.cert, certs.key)
    with pytest.raises(ValueError, match="ticket keys are 80 bytes, not 48"):
        set_ticket_keys(context, bytes(48))


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


def test_the_context_pointer_is_one_openssl_reported() -> None:
    """The ``SSL_CTX`` used is one OpenSSL announced making, forgotten when
    OpenSSL frees it; a read at any other offset of the object finds no
    announced address and sets nothing (nothing unvouched is called)."""
    import gc

    from chash.gateway import session_tickets

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    pointer = session_tickets._ssl_ctx_of(context)
    assert pointer is not None and pointer in session_tickets._alive
    for wrong in (8, 24, 32, 40):  # not where this build keeps it
        session_tickets._HEADER = object.__basicsize__ + wrong - 16
        try:
            assert session_tickets._ssl_ctx_of(context) is None
            assert not set_ticket_keys(context, new_ticket_keys())
        finally:
            session_tickets._HEADER = object.__basicsize__
    assert set_ticket_keys(context, new_ticket_keys())
    del context
    gc.collect()
    assert pointer not in session_tickets._alive


def test_a_context_made_before_the_module_is_left_alone() -> None:
    """OpenSSL never announced it: no keys are set, and nothing breaks."""
    import subprocess
    import sys

    code = ("import ssl\n"
            "early = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
            "from chash.gateway.session_tickets import new_ticket_keys, set_ticket_keys\n"
            "late = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
            "print(set_ticket_keys(early, new_ticket_keys()), "
            "set_ticket_keys(late, new_ticket_keys()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["False", "True"]
