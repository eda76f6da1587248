"""The gateway's TLS ticket keys (chash.gateway.session_tickets) on the
running interpreter alone: contexts given the same keys open each other's
tickets, keys are derived from the base and every rule, the ``SSL_CTX``
used is one OpenSSL reported making (read at this interpreter's object
header, larger on free-threaded builds), and a context made before the
module was imported is left alone.

These need nothing but ``ssl``, so they run on every interpreter CI tests,
3.11 to 3.15 and free-threaded 3.13, where the gateway's own TLS tests
(tests/gateway, which need its extra) run on 3.11 to 3.13.  Handshakes in
memory (``ssl.MemoryBIO``), with ``localhost.pem`` beside this file: a
self-signed P-256 certificate for ``localhost`` and its key, valid until
2126, made once by
``openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes
-days 36500 -subj /CN=localhost -addext subjectAltName=DNS:localhost``
(the certificate, then the key, in one file).
"""

from __future__ import annotations

import gc
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from chash.gateway import session_tickets
from chash.gateway.session_tickets import (
    TICKET_KEYS_SIZE,
    new_ticket_keys,
    set_ticket_keys,
    ticket_keys_for,
)
from chash.gateway.tls import server_context

LOCALHOST = str(Path(__file__).resolve().parent / "localhost.pem")


def client_context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=LOCALHOST)


def keyed_context(keys: bytes) -> ssl.SSLContext:
    context = server_context(LOCALHOST)
    assert set_ticket_keys(context, keys)
    return context


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


def test_contexts_with_the_same_keys_open_each_others_tickets() -> None:
    keys = new_ticket_keys()
    first, second = keyed_context(keys), keyed_context(keys)
    client = client_context()
    session = in_memory(first, client).session
    assert session is not None
    assert in_memory(second, client, session).session_reused
    # Other keys (a context of its own, or other set keys) open none of them.
    assert not in_memory(server_context(LOCALHOST), client, session).session_reused
    assert not in_memory(keyed_context(new_ticket_keys()), client, session).session_reused


def test_keys_are_derived_from_the_base_and_every_rule() -> None:
    base = new_ticket_keys()
    keys = ticket_keys_for(base, b"ab", b"c")
    assert len(keys) == TICKET_KEYS_SIZE and keys == ticket_keys_for(base, b"ab", b"c")
    others = {ticket_keys_for(base, b"a", b"bc"), ticket_keys_for(base, b"ab", b"d"),
              ticket_keys_for(new_ticket_keys(), b"ab", b"c"), ticket_keys_for(base, b"abc")}
    assert keys not in others and len(others) == 4


def test_keys_of_another_size_are_refused() -> None:
    context = server_context(LOCALHOST)
    with pytest.raises(ValueError, match="ticket keys are 80 bytes, not 48"):
        set_ticket_keys(context, bytes(48))


def test_the_context_pointer_is_one_openssl_reported() -> None:
    """The ``SSL_CTX`` used is one OpenSSL announced making, forgotten when
    OpenSSL frees it; a read at any other offset of the object finds no
    announced address and sets nothing (nothing unvouched is called)."""
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


def test_a_context_made_before_the_module_is_left_alone(tmp_path: Path) -> None:
    """OpenSSL never announced it: no keys are set, and nothing breaks.  Run
    from an empty folder, so the interpreter imports the chash these tests
    run (an installed wheel, or the checkout on its path), not a source
    folder without its extension."""
    code = ("import ssl\n"
            "early = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
            "from chash.gateway.session_tickets import new_ticket_keys, set_ticket_keys\n"
            "late = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
            "print(set_ticket_keys(early, new_ticket_keys()), "
            "set_ticket_keys(late, new_ticket_keys()))\n")
    chash_parent = str(Path(session_tickets.__file__).resolve().parents[2])
    env = dict(os.environ)  # a sanitized build's preloaded runtime included
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [chash_parent, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True, cwd=tmp_path, env=env)
    assert out.stdout.split() == ["False", "True"]
