"""The request heads the gateway refuses, on real sockets: each answered
with 400 at once (long before the header timeout) and never forwarded;
the ordinary request beside them goes through on the same gateway."""

from __future__ import annotations

import pytest

pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
pytest.importorskip("httptools", reason="the gateway extra (httptools) is not installed")

from _support.gateways import cluster, raw, split
from _support.waiting import run

#: (what, request bytes): every one refused with 400.
REFUSED = [
    ("two Content-Length fields, 5 and 05",
     b"POST /x HTTP/1.1\r\nHost: g\r\nX-User-Id: u\r\nContent-Length: 5\r\n"
     b"Content-Length: 05\r\n\r\nabcde"),
    ("two equal Content-Length fields",
     b"POST /x HTTP/1.1\r\nHost: g\r\nX-User-Id: u\r\nContent-Length: 5\r\n"
     b"Content-Length: 5\r\n\r\nabcde"),
    ("a raw non-ASCII byte in the target",
     b"GET /\xff HTTP/1.1\r\nHost: g\r\nX-User-Id: u\r\n\r\n"),
    ("lines ending in a bare CR",
     b"GET /x HTTP/1.1\rHost: g\rX-User-Id: u\r\r"),
    ("a bare CR inside a CRLF head",
     b"GET /x HTTP/1.1\r\nHost: g\rX-User-Id: u\r\n\r\n"),
    ("lines ending in a bare LF",
     b"GET /x HTTP/1.1\nHost: g\nX-User-Id: u\n\n"),
    ("one line ending in a bare LF",
     b"GET /x HTTP/1.1\r\nHost: g\nX-User-Id: u\r\n\r\n"),
    ("obsolete line folding",
     b"GET /x HTTP/1.1\r\nHost: g\r\nX-User-Id: u\r\n  v\r\n\r\n"),
    ("Content-Length with Transfer-Encoding",
     b"POST /x HTTP/1.1\r\nHost: g\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n"
     b"\r\n0\r\n\r\n"),
    ("two Host fields",
     b"GET /x HTTP/1.1\r\nHost: g\r\nHost: h\r\nX-User-Id: u\r\n\r\n"),
]


def test_malformed_heads_are_refused_at_once_and_never_forwarded() -> None:
    async def main() -> None:
        # A header timeout far beyond raw()'s wait: an answer at all means
        # the gateway did not wait for it.
        async with cluster(health=False, header_timeout=120.0) as (gateway, backends, _):
            for what, data in REFUSED:
                answer = await raw(gateway.url, data, timeout=10.0)
                assert split(answer)[0] == 400, (what, answer[:200])
                assert answer.count(b"HTTP/1.1 ") == 1, what
            assert sum(b.hits for b in backends.values()) == 0
            ok = await raw(gateway.url, b"GET /x HTTP/1.1\r\nHost: g\r\nX-User-Id: u\r\n"
                           b"Connection: close\r\n\r\n", timeout=10.0)
            assert split(ok)[0] == 200
            assert sum(b.hits for b in backends.values()) == 1
    run(main())
