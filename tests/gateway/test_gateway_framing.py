"""Bodies through the gateway, byte for byte (chash.gateway.bodies), against
a scripted backend on 127.0.0.1: the one chunked decoder serves both
directions, and each keeps its own rule for trailer fields.

* Requests: a chunked body is streamed to the backend chunk by chunk and
  its trailer fields are dropped (none of them is forwarded to a backend).
* Responses: a chunked body is passed on chunk by chunk with its trailer
  fields, or, to an HTTP/1.0 client, as the bare data ending at close.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")

from _support.gateways import raw, split
from _support.raw_backends import RawBackend
from _support.waiting import run
from chash.gateway import Gateway, GatewayConfig

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CHUNKED_HEAD = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n"
                b"X-Backend: raw\r\n\r\n")
CHUNKS = b"5;name=value\r\nhello\r\n3\r\nabc\r\n0\r\nX-Sum: 8\r\nX-More: yes\r\n\r\n"
BIG = bytes(range(256)) * 800  # 204,800 bytes: more than one 64 KiB block


@contextlib.asynccontextmanager
async def through(backend: RawBackend, **settings: Any) -> AsyncIterator[Gateway]:
    """A gateway in front of ``backend`` alone (no health checks, no metrics)."""
    await backend.start()
    gateway = Gateway([backend.address], GatewayConfig(health=False, metrics=False, **settings))
    try:
        await gateway.start()
        yield gateway
    finally:
        await gateway.stop()
        await backend.stop()


def upload(body: bytes) -> bytes:
    return (b"POST /up HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\nConnection: close\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + body)


def test_request_chunks_are_streamed_and_their_trailers_dropped() -> None:
    async def main() -> None:
        backend = RawBackend(OK, until=b"0\r\n\r\n")
        async with through(backend) as gateway:
            status, _, body = split(await raw(gateway.url, upload(CHUNKS)))
            assert (status, body) == (200, b"ok")
            sent = backend.requests[0]
            head, _, forwarded = sent.partition(b"\r\n\r\n")
            assert b"\r\nTransfer-Encoding: chunked" in head
            # Sizes as sent, extensions and trailer fields left behind.
            assert forwarded == b"5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"
            assert b"X-Sum" not in sent and b"X-More" not in sent
    run(main())


def test_a_large_request_chunk_arrives_whole() -> None:
    async def main() -> None:
        backend = RawBackend(OK, until=b"\r\n0\r\n\r\n")
        async with through(backend) as gateway:
            body = b"%x\r\n" % len(BIG) + BIG + b"\r\n0\r\n\r\n"
            status, _, answer = split(await raw(gateway.url, upload(body)))
            assert (status, answer) == (200, b"ok")
            assert backend.requests[0].partition(b"\r\n\r\n")[2] == body
    run(main())


def test_response_chunks_are_passed_on_with_their_trailers() -> None:
    async def main() -> None:
        async with through(RawBackend(CHUNKED_HEAD + CHUNKS)) as gateway:
            request = b"GET / HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\nConnection: close\r\n\r\n"
            status, headers, body = split(await raw(gateway.url, request))
            assert status == 200 and headers["transfer-encoding"] == "chunked"
            assert headers["x-backend"] == "raw" and "trailer" not in headers  # hop-by-hop
            assert body == b"5\r\nhello\r\n3\r\nabc\r\n0\r\nX-Sum: 8\r\nX-More: yes\r\n\r\n"
    run(main())


def test_an_http10_client_gets_the_bare_data_until_close() -> None:
    async def main() -> None:
        async with through(RawBackend(CHUNKED_HEAD + CHUNKS)) as gateway:
            status, headers, body = split(
                await raw(gateway.url, b"GET / HTTP/1.0\r\nX-User-Id: u1\r\n\r\n"))
            assert status == 200 and headers["connection"] == "close"
            assert "transfer-encoding" not in headers and "content-length" not in headers
            assert body == b"helloabc"  # no chunks, no trailer fields
    run(main())


def test_a_large_response_chunk_is_relayed_whole() -> None:
    async def main() -> None:
        chunk = b"%x\r\n" % len(BIG) + BIG + b"\r\n"
        answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 2 + \
            b"0\r\n\r\n"
        async with through(RawBackend(answer)) as gateway:
            request = b"GET / HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\nConnection: close\r\n\r\n"
            status, _, body = split(await raw(gateway.url, request))
            assert status == 200 and body == chunk * 2 + b"0\r\n\r\n"
    run(main())


def test_a_malformed_response_chunk_cuts_the_client_off(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        # The first chunk runs past its size: no CRLF where one must be.
        answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n"
        async with through(RawBackend(answer)) as gateway:
            request = b"GET / HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\n\r\n"
            status, _, body = split(await raw(gateway.url, request))
            assert status == 200  # the head had gone out already
            assert body == b"3\r\nabc" and not body.endswith(b"0\r\n\r\n")  # truncated
    with caplog.at_level(logging.WARNING, logger="chash.gateway"):
        run(main())
    assert any("failed mid-response: malformed chunked body" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize(("body", "status", "message"), [
    (b"3\r\nabcdef\r\n0\r\n\r\n", 400, b"malformed chunked body"),
    (b"xyz\r\nabc\r\n0\r\n\r\n", 400, b"malformed chunk size"),
    (b"8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n", 413, b"request body over 10 bytes"),
])
def test_a_bad_request_body_is_answered_by_the_gateway(body: bytes, status: int,
                                                       message: bytes) -> None:
    async def main() -> None:
        backend = RawBackend(OK, until=b"0\r\n\r\n")
        async with through(backend, max_body=10) as gateway:
            answer_status, _, answer = split(await raw(gateway.url, upload(body)))
            assert answer_status == status
            assert answer == b"chash gateway: " + message + b"\n"
    run(main())


def test_answers_on_a_reused_connection_that_are_not_plain_go_the_general_way() -> None:
    # A request without a body on a pooled connection is sent in one pass;
    # an answer that is not a plain one (chunked, after a 1xx, running to
    # the backend's close) is then relayed by the general path from where
    # it stands: the request is not sent again, the answer arrives whole.
    get = b"GET /p HTTP/1.1\r\nHost: g\r\nX-User-Id: u1\r\nConnection: close\r\n\r\n"

    async def main() -> None:
        backend = RawBackend(OK)
        async with through(backend) as gateway:
            assert split(await raw(gateway.url, get))[::2] == (200, b"ok")
            backend.answer = CHUNKED_HEAD + CHUNKS
            status, headers, body = split(await raw(gateway.url, get))
            assert (status, headers["transfer-encoding"]) == (200, "chunked")
            assert body == b"5\r\nhello\r\n3\r\nabc\r\n0\r\nX-Sum: 8\r\nX-More: yes\r\n\r\n"
            backend.answer = b"HTTP/1.1 100 Continue\r\n\r\n" + OK
            assert split(await raw(gateway.url, get))[::2] == (200, b"ok")
            backend.answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno"
            assert split(await raw(gateway.url, get))[::2] == (200, b"no")
            assert len(backend.requests) == 4
            assert backend.connections == 1  # one pooled connection served them all
            backend.answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close"
            backend.close = True
            assert split(await raw(gateway.url, get))[::2] == (200, b"until close")
            assert len(backend.requests) == 5
    run(main())
