"""chash.gateway.messages: the heads and answers the gateway writes, without I/O.

The proxy tests see these bytes only through sockets; here each rule is
checked on its own, on heads parsed by the gateway's own parser.
"""
from __future__ import annotations

import pytest

from chash.gateway.heads import parse_response_head
from chash.gateway.messages import Body, backend_head, client_head, simple_answer
from chash.gateway.parser import parse_request_head


def wire(text: str) -> bytes:
    """A head as it comes off the wire: CRLF line ends and the empty line."""
    return text.replace("\n", "\r\n").encode() + b"\r\n"


def lines(head: bytes) -> list[bytes]:
    assert head.endswith(b"\r\n\r\n")
    return head[:-4].split(b"\r\n")


def test_simple_answer_is_a_whole_plain_text_response() -> None:
    answer = simple_answer(503, "no backend for this key", close=True)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert body == b"chash gateway: no backend for this key\n"
    assert head.split(b"\r\n") == [
        b"HTTP/1.1 503 Service Unavailable",
        b"Content-Type: text/plain; charset=utf-8",
        b"Content-Length: %d" % len(body),
        b"Connection: close",
    ]
    assert b"Connection" not in simple_answer(400, "bad", close=False)
    assert simple_answer(599, "odd", close=False).startswith(b"HTTP/1.1 599 Error\r\n")


def test_backend_head_drops_hop_by_hop_fields_and_those_connection_names() -> None:
    head = parse_request_head(wire(
        "GET /a HTTP/1.1\nHost: users\nConnection: keep-alive, X-Private\nX-Private: 1\n"
        "Keep-Alive: 5\nTE: trailers\nUpgrade: h2c\nX-User-Id: 7\n"))
    out = lines(backend_head(head, "10.1.2.3"))
    assert b"X-User-Id: 7" in out
    names = {line.split(b":")[0].lower() for line in out}
    assert not names & {b"connection", b"x-private", b"keep-alive", b"te", b"upgrade", b"host"}
    assert b"X-Forwarded-Host: users" in out
    assert b"X-Forwarded-Proto: http" in out
    assert not any(line.lower().startswith(b"content-length") for line in out)  # a GET without a body


def test_backend_head_appends_the_client_to_x_forwarded_for() -> None:
    head = parse_request_head(wire("GET / HTTP/1.1\nHost: h\nX-Forwarded-For: 1.1.1.1\n"))
    assert b"X-Forwarded-For: 1.1.1.1, 127.0.0.1" in lines(backend_head(head, "127.0.0.1"))
    head = parse_request_head(wire("GET / HTTP/1.1\nHost: h\n"))
    assert b"X-Forwarded-For: 127.0.0.1" in lines(backend_head(head, "127.0.0.1"))
    out = lines(backend_head(head, ""))
    assert not any(line.startswith(b"X-Forwarded-For") for line in out)


def test_backend_head_frames_the_body_itself() -> None:
    chunked = parse_request_head(wire("POST /u HTTP/1.1\nHost: h\nTransfer-Encoding: chunked\n"))
    assert lines(backend_head(chunked, "c"))[-1] == b"Transfer-Encoding: chunked"
    sized = parse_request_head(wire("PUT /u HTTP/1.1\nHost: h\nContent-Length: 12\n"))
    assert lines(backend_head(sized, "c"))[-1] == b"Content-Length: 12"
    # A POST without a body still says so, so that the backend does not wait.
    empty_post = parse_request_head(wire("POST /u HTTP/1.1\nHost: h\n"))
    assert lines(backend_head(empty_post, "c"))[-1] == b"Content-Length: 0"


@pytest.mark.parametrize(("method", "status", "fields", "body", "framing"), [
    ("GET", "200 OK", "Content-Length: 5", Body.LENGTH, b"Content-Length: 5"),
    ("GET", "200 OK", "Transfer-Encoding: chunked", Body.CHUNKED, b"Transfer-Encoding: chunked"),
    ("HEAD", "200 OK", "Content-Length: 5", Body.NONE, b"Content-Length: 5"),
    ("HEAD", "200 OK", "Transfer-Encoding: chunked", Body.NONE, b"Transfer-Encoding: chunked"),
    ("GET", "204 No Content", "X-A: 1", Body.NONE, None),
    ("GET", "304 Not Modified", "X-A: 1", Body.NONE, None),
])
def test_client_head_framing_on_a_kept_alive_connection(
        method: str, status: str, fields: str, body: Body, framing: bytes | None) -> None:
    req = parse_request_head(wire(f"{method} / HTTP/1.1\nHost: h\n"))
    resp = parse_response_head(wire(f"HTTP/1.1 {status}\n{fields}\n"))
    head, got, keep = client_head(req, resp)
    assert (got, keep) == (body, True)
    out = lines(head)
    assert out[0] == f"HTTP/1.1 {status}".encode()
    if framing is not None:
        assert framing in out
    assert b"Connection: close" not in out


def test_a_body_without_length_or_chunks_ends_the_connection() -> None:
    req = parse_request_head(wire("GET / HTTP/1.1\nHost: h\n"))
    resp = parse_response_head(wire("HTTP/1.1 200 OK\nX-A: 1\n"))
    head, body, keep = client_head(req, resp)
    assert (body, keep) == (Body.UNTIL_CLOSE, False)
    assert lines(head)[-1] == b"Connection: close"


def test_an_http_1_0_client_gets_the_bare_data_of_a_chunked_response() -> None:
    req = parse_request_head(wire("GET / HTTP/1.0\nHost: h\nConnection: keep-alive\n"))
    resp = parse_response_head(wire("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n"))
    head, body, keep = client_head(req, resp)
    assert (body, keep) == (Body.DECHUNKED, False)
    out = lines(head)
    assert b"Transfer-Encoding: chunked" not in out
    assert out[-1] == b"Connection: close"


def test_an_http_1_0_keep_alive_client_is_told_it_stays_open() -> None:
    req = parse_request_head(wire("GET / HTTP/1.0\nHost: h\nConnection: keep-alive\n"))
    resp = parse_response_head(wire("HTTP/1.1 200 OK\nContent-Length: 0\n"))
    head, body, keep = client_head(req, resp)
    assert (body, keep) == (Body.LENGTH, True)
    assert lines(head)[-1] == b"Connection: keep-alive"


def test_client_head_adds_the_extra_line() -> None:
    req = parse_request_head(wire("GET / HTTP/1.1\nHost: h\n"))
    resp = parse_response_head(wire("HTTP/1.1 200 OK\nContent-Length: 0\n"))
    head, _, _ = client_head(req, resp, b"X-Chash-Node: b")
    assert b"X-Chash-Node: b" in lines(head)
