"""The gateway's request parser against h11 and llhttp, on generated and
mutated heads: nothing the gateway forwards is refused by both, and every
parser that accepts a head the gateway forwards frames its body alike.

The heads are built from the parts smuggling relies on (lengths, codings,
Host, versions, targets) and then mutated byte by byte (bare CR and LF,
spaces, control and non-ASCII bytes, lines dropped or repeated); a fixed
seed makes every run try the same few thousand heads.
"""

from __future__ import annotations

import random

import pytest

h11 = pytest.importorskip("h11", reason="h11 is not installed (the test extra)")
httptools = pytest.importorskip("httptools", reason="the gateway extra (httptools) is not "
                                "installed")

from _support.heads import generated_head  # noqa: E402
from chash.gateway.heads import HttpError  # noqa: E402
from chash.gateway.parser import RequestParser  # noqa: E402

METHODS = [b"GET", b"POST", b"PUT", b"HEAD", b"DELETE", b"OPTIONS", b"PATCH"]
TARGETS = [b"/", b"/a/b?c=d", b"/%41%42", b"http://h:1/x?y", b"*", b"/u42/cart"]
VERSIONS = [b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0"]
FIELDS = [
    b"Host: g", b"Host: g", b"Host: other", b"X-User-Id: u1", b"Connection: close",
    b"Connection: keep-alive", b"Content-Length: 5", b"Content-Length: 05",
    b"Content-Length: 0", b"Content-Length:  5 ", b"Content-Length: 5, 5",
    b"Content-Length: +5", b"Transfer-Encoding: chunked", b"Transfer-Encoding: Chunked",
    b"Transfer-Encoding: gzip, chunked", b"Transfer-Encoding: chunked, gzip",
    b"Transfer-Encoding: identity", b"Expect: 100-continue", b"Cookie: a=1; b=2",
]
NOISE = [b" ", b"\t", b"\r", b"\n", b"\r\n", b"\x00", b"\x7f", b"\xff", b":", b",", b"a",
         b"0", b";"]


def generated(rng: random.Random) -> bytes:
    """A head from the parts above, then a few mutations."""
    return generated_head(rng, METHODS, TARGETS, VERSIONS, FIELDS, NOISE, most_fields=5,
                          mutations=[0, 0, 1, 1, 2, 3])


def ours(data: bytes) -> tuple[int, bool] | None:
    """What the gateway forwards of ``data``: (Content-Length, chunked), or
    None when it refuses the head or waits for more of it."""
    end = data.find(b"\r\n\r\n")
    parser = RequestParser()
    try:
        if end < 0:
            parser.check(data)
            return None
        request = parser.parse(data[:end + 4])
    except HttpError:
        return None
    return request.content_length, request.chunked


def body_for(framing: tuple[int, bool]) -> tuple[bytes, bytes]:
    """(the body on the wire, its data) for the gateway's framing."""
    length, chunked = framing
    if chunked:
        return b"3\r\nabc\r\n0\r\n\r\n", b"abc"
    return b"x" * length, b"x" * length


def h11_reads(wire: bytes) -> bytes | None:
    """The body h11 reads from ``wire`` (head and body), or None if it
    refuses the head.  AssertionError if it frames the body otherwise."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(wire)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return None
    if event is h11.NEED_DATA:
        return None
    assert isinstance(event, h11.Request)
    data = b""
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise AssertionError(f"h11 frames the body otherwise: {exc}") from None
        if isinstance(event, h11.Data):
            data += event.data
        elif isinstance(event, h11.EndOfMessage):
            return data
        else:
            raise AssertionError(f"h11 frames the body otherwise: {event!r}")


class _Llhttp:
    def __init__(self) -> None:
        self.headers = False
        self.body = b""
        self.complete = False

    def on_headers_complete(self) -> None:
        self.headers = True

    def on_body(self, data: bytes) -> None:
        self.body += data

    def on_message_complete(self) -> None:
        self.complete = True


def llhttp_reads(wire: bytes, head_size: int) -> bytes | None:
    """The body llhttp reads from ``wire``, or None if it refuses the head."""
    seen = _Llhttp()
    parser = httptools.HttpRequestParser(seen)
    try:
        parser.feed_data(wire[:head_size])
    except httptools.HttpParserUpgrade:
        return b""
    except httptools.HttpParserError:
        return None
    if not seen.headers:
        return None
    try:
        parser.feed_data(wire[head_size:])
    except httptools.HttpParserError as exc:
        raise AssertionError(f"llhttp frames the body otherwise: {exc}") from None
    assert seen.complete, "llhttp frames the body otherwise: no end of message"
    return seen.body


def test_nothing_forwarded_that_both_refuse_and_no_framing_difference() -> None:
    rng = random.Random(22)
    forwarded = refused = 0
    for _ in range(10000):
        data = generated(rng)
        framing = ours(data)
        if framing is None:
            refused += 1
            continue
        forwarded += 1
        head_size = data.index(b"\r\n\r\n") + 4
        wire, expected = body_for(framing)
        wire = data[:head_size] + wire
        by_h11 = h11_reads(wire)
        by_llhttp = llhttp_reads(wire, head_size)
        assert by_h11 is not None or by_llhttp is not None, data
        for name, body in (("h11", by_h11), ("llhttp", by_llhttp)):
            assert body is None or body == expected, (name, data, body, expected)
    # Both kinds are tried in numbers, or the test proves little.
    assert forwarded > 500 and refused > 500, (forwarded, refused)


@pytest.mark.parametrize("data", [
    b"GET / HTTP/1.1\r\nHost: g\r\n\r\n",
    b"POST /a HTTP/1.1\r\nHost: g\r\nContent-Length: 05\r\n\r\n",
    b"POST /a HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET http://h/x HTTP/1.0\r\n\r\n",
])
def test_heads_all_three_accept_are_framed_alike(data: bytes) -> None:
    framing = ours(data)
    assert framing is not None
    wire, expected = body_for(framing)
    assert h11_reads(data + wire) == expected
    assert llhttp_reads(data + wire, len(data)) == expected
