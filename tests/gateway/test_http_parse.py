"""The gateway's HTTP/1.1 head parsers (chash.gateway.parser for requests,
chash.gateway.heads for responses) and chunk-size
lines (chash.gateway.bodies), without sockets: every
ambiguity a smuggling attack relies on is refused with the right status."""

from __future__ import annotations

import pytest

from chash.gateway.bodies import parse_chunk_size
from chash.gateway.heads import HttpError, parse_response_head
from chash.gateway.parser import parse_request_head


def head(*lines: str | bytes) -> bytes:
    return b"\r\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) \
        + b"\r\n\r\n"


def test_an_ordinary_request() -> None:
    request = parse_request_head(head("POST /a/b?c=%20d HTTP/1.1", "Host: h:1",
                                      "X-User-Id: u1", "Content-Length: 5",
                                      "Connection: keep-alive, X-Hop"))
    assert request.method == "POST" and request.target == b"/a/b?c=%20d"
    assert request.authority is None and request.host == b"h:1"
    assert request.content_length == 5 and not request.chunked and request.keep_alive
    assert request.get(b"x-user-id") == b"u1"
    assert request.lines[1] == b"X-User-Id: u1"


def test_absolute_form_is_split_into_authority_and_path() -> None:
    request = parse_request_head(head("GET http://evil.example:1/p?q=1 HTTP/1.1",
                                      "Host: other"))
    assert (request.authority, request.target, request.host) == (
        b"evil.example:1", b"/p?q=1", b"evil.example:1")
    assert parse_request_head(head("GET http://h HTTP/1.1", "Host: h")).target == b"/"
    assert parse_request_head(head("GET http://h?x HTTP/1.1", "Host: h")).target == b"/?x"


def test_header_values_stay_bytes() -> None:
    request = parse_request_head(head(b"GET / HTTP/1.1", b"Host: h", b"X-User-Id: \xff\xfe"))
    assert request.get(b"x-user-id") == b"\xff\xfe"


def test_keep_alive_by_version() -> None:
    assert not parse_request_head(head("GET / HTTP/1.1", "Host: h",
                                       "Connection: close")).keep_alive
    assert not parse_request_head(head("GET / HTTP/1.0")).keep_alive
    assert parse_request_head(head("GET / HTTP/1.0", "Connection: Keep-Alive")).keep_alive


@pytest.mark.parametrize(("lines", "status"), [
    (["GET / HTTP/1.1", "Host: h", "Content-Length: 5", "Transfer-Encoding: chunked"], 400),
    (["GET / HTTP/1.1", "Host: h", "Content-Length: 5", "Content-Length: 6"], 400),
    (["GET / HTTP/1.1", "Host: h", "Content-Length: 5, 6"], 400),
    (["GET / HTTP/1.1", "Host: h", "Content-Length: +5"], 400),
    (["GET / HTTP/1.1", "Host: h", "Content-Length: 0x5"], 400),
    (["GET / HTTP/1.1", "Host: h", "Transfer-Encoding: gzip, chunked"], 501),
    # chunked not the last coding: the length is unknown, 400 (RFC 9112 §6.3)
    (["GET / HTTP/1.1", "Host: h", "Transfer-Encoding: chunked, identity"], 400),
    (["GET / HTTP/1.1", "Host: h", "Transfer-Encoding: xchunked"], 400),
    (["GET / HTTP/1.0", "Transfer-Encoding: chunked"], 400),
    (["GET / HTTP/1.1", "Host: h", "Transfer-Encoding : chunked"], 400),
    (["GET / HTTP/1.1", "Host: h", "X-A: 1", " folded"], 400),
    (["GET / HTTP/1.1", "Host: h", b"X-A: 1\nTransfer-Encoding: chunked"], 400),
    (["GET / HTTP/1.1", "Host: h", b"X-A: \x001"], 400),
    (["GET / HTTP/1.1"], 400),
    (["GET / HTTP/1.1", "Host: a", "Host: b"], 400),
    (["GET /  HTTP/1.1", "Host: h"], 400),
    (["GET / HTTP/2.0", "Host: h"], 505),
    (["GET / http/1.1", "Host: h"], 400),
    (["G(T / HTTP/1.1", "Host: h"], 400),
    (["CONNECT h:443 HTTP/1.1", "Host: h"], 501),
    (["GET relative HTTP/1.1", "Host: h"], 400),
    ([b"GET /\x7f HTTP/1.1", "Host: h"], 400),
])
def test_ambiguous_requests_are_refused(lines: list[str | bytes], status: int) -> None:
    with pytest.raises(HttpError) as exc:
        parse_request_head(head(*lines))
    assert exc.value.status == status


def test_responses() -> None:
    response = parse_response_head(head("HTTP/1.1 200 OK", "Content-Length: 3",
                                        "Set-Cookie: a=1"))
    assert (response.status, response.reason, response.content_length) == (200, b"OK", 3)
    assert response.keep_alive and not response.chunked
    chunked = parse_response_head(head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked",
                                       "Content-Length: 3"))
    assert chunked.chunked and chunked.content_length is None
    to_close = parse_response_head(head("HTTP/1.1 200 OK"))
    assert to_close.content_length is None and not to_close.chunked
    assert not parse_response_head(head("HTTP/1.0 200 OK", "Content-Length: 1")).keep_alive
    assert parse_response_head(head("HTTP/1.1 204")).reason == b""
    for bad in (["HTTP/1.1 20 OK"], ["HTTP/2 200 OK"], ["HTTP/1.1 200 OK", "A: 1", " b"],
                ["HTTP/1.1 200 OK", "Content-Length: 1", "Content-Length: 2"]):
        with pytest.raises(HttpError) as exc:
            parse_response_head(head(*bad))
        assert exc.value.status == 502


def test_chunk_sizes() -> None:
    assert parse_chunk_size(b"1f") == 31
    assert parse_chunk_size(b"A;ext=1") == 10
    for bad in (b"", b"-1", b"0x1", b"1 1", b"g", b"1" * 17):
        with pytest.raises(HttpError):
            parse_chunk_size(bad)


def test_relayed_response_lines() -> None:
    response = parse_response_head(head(
        "HTTP/1.1 200 OK", "Content-Length: 3", "Connection: keep-alive, X-Hop",
        "X-Hop: secret", "Keep-Alive: timeout=5", "Set-Cookie: a=1", "Set-Cookie: b=2",
        "Transfer-Encoding: chunked", "X-Backend: a"))
    assert response.relay == [b"Set-Cookie: a=1", b"Set-Cookie: b=2", b"X-Backend: a"]
    assert response.chunked and response.content_length is None
    plain = parse_response_head(head("HTTP/1.1 200 OK", "Content-Length: 3", "Server: x"))
    assert plain.relay == [b"Server: x"] and plain.keep_alive
