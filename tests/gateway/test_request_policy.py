"""The C request-head policy against its plain Python reference
(``tests/_support/reference_request_policy.py``), on generated and mutated
heads that llhttp accepts: the same RequestHead, or the same refusal.  And
a connection's parser kept from one head to the next reads each head as a
new parser would.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

httptools = pytest.importorskip("httptools", reason="the gateway extra (httptools) is not "
                                "installed")

from _support.heads import generated_head  # noqa: E402
from _support.reference_request_policy import (  # noqa: E402
    reference_backend_head,
    reference_parse,
)
from chash._chash import _request_head  # noqa: E402
from chash.gateway.heads import HttpError, RequestHead  # noqa: E402
from chash.gateway.messages import backend_head  # noqa: E402
from chash.gateway.parser import RequestParser, parse_request_head  # noqa: E402

METHODS = [b"GET", b"POST", b"PUT", b"HEAD", b"DELETE", b"OPTIONS", b"PATCH", b"CONNECT"]
TARGETS = [b"/", b"/a/b?c=d", b"/%41%42", b"http://h:1/x?y", b"http://h:1", b"http://h?q",
           b"HTTPS://a.b:2/#f", b"h-t.t+p://x/y", b"*", b"/u42/cart", b"/a#frag", b"h:80",
           b"ftp:/x", b"//x", b"1http://h/"]
VERSIONS = [b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.2"]
FIELDS = [
    b"Host: g", b"Host: g", b"host:other", b"HOST:  g\t ", b"X-User-Id: u1",
    b"Connection: close", b"Connection: keep-alive", b"connection: Keep-Alive , x",
    b"Connection: upgrade", b"Upgrade: websocket", b"Connection: ,,CLOSE",
    b"Content-Length: 5", b"Content-Length: 05", b"Content-Length: 0",
    b"Content-Length:  5 ", b"Content-Length: 18446744073709551615",
    b"Transfer-Encoding: chunked", b"Transfer-Encoding: Chunked",
    b"Transfer-Encoding: gzip, chunked", b"Transfer-Encoding: chunked, gzip",
    b"Transfer-Encoding: identity", b"Transfer-Encoding:", b"Expect: 100-continue",
    b"Expect: 100-Continue ", b"Expect: other", b"Cookie: a=1; b=2", b"X-Empty:",
    b"X-Obs: a\xffb", b"X-Tab: a\tb", b" Folded: x", b"\tFolded: y",
    b"X-Forwarded-For: 1.2.3.4", b"X-Forwarded-For:", b"x-forwarded-host: f",
    b"Keep-Alive: 5", b"TE: trailers", b"Connection: X-User-Id, te", b"Proxy-Connection: x",
]
NOISE = [b" ", b"\t", b"\r", b"\n", b"\r\n", b"\x00", b"\x7f", b"\xff", b":", b",", b"a",
         b"0", b";", b"#", b"/"]


def generated(rng: random.Random) -> bytes:
    return generated_head(rng, METHODS, TARGETS, VERSIONS, FIELDS, NOISE, most_fields=6,
                          mutations=[0, 0, 0, 1, 1, 2], kept_end=4)


def verdict(parse, head: bytes) -> RequestHead | tuple[int, str]:
    """The policy's verdict: the head as read, or the refusal.  Whether a
    request is a WebSocket handshake is read on top of the policy, in
    Python (``RequestHead.upgrade``; tests/gateway/test_gateway_parser.py),
    so it is left aside here."""
    try:
        request = parse(head)
    except HttpError as exc:
        return exc.status, exc.reason
    return dataclasses.replace(request, upgrade=None)


def test_the_c_policy_reads_every_head_llhttp_accepts_as_the_reference_does() -> None:
    rng = random.Random(20261201)
    compared = refused = 0
    for _ in range(20000):
        head = generated(rng)
        end = head.find(b"\r\n\r\n")
        if end < 0:
            continue
        head = head[:end + 4]
        try:
            expected = verdict(reference_parse, head)
        except ValueError:
            continue  # llhttp refuses it: the C policy never sees it
        assert verdict(parse_request_head, head) == expected, head
        compared += 1
        refused += isinstance(expected, tuple)
        if not isinstance(expected, tuple):
            for remote in ("127.0.0.1", "::1", ""):
                secure = compared % 2 == 1  # over TLS or not, in turn
                assert backend_head(expected, remote, secure) == reference_backend_head(
                    expected, remote, secure), (head, remote, secure)
    # Enough of both kinds to mean something.
    assert compared > 3000 and 1000 < refused < compared - 800, (compared, refused)


@pytest.mark.parametrize("head, expected", [
    (b"GET http://h:1 HTTP/1.1\r\nHost: x\r\n\r\n", (b"/", b"h:1")),
    (b"GET http://h?q HTTP/1.1\r\nHost: x\r\n\r\n", (b"/?q", b"h")),
    (b"GET HTTP://a.b:2/p?q HTTP/1.1\r\nHost: x\r\n\r\n", (b"/p?q", b"a.b:2")),
    (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", (b"*", None)),
])
def test_absolute_and_asterisk_targets(head: bytes, expected: tuple[bytes, bytes | None]) -> None:
    request = parse_request_head(head)
    assert (request.target, request.authority) == expected
    assert verdict(reference_parse, head) == request


def test_many_fields_take_the_allocated_path() -> None:
    names = [f"X-F{i}".encode() for i in range(300)]
    head = b"GET / HTTP/1.1\r\nHost: h\r\n" + b"".join(
        n + b": v" + str(i).encode() + b"\r\n" for i, n in enumerate(names)) + b"\r\n"
    request = parse_request_head(head)
    assert len(request.fields) == 301
    assert request.fields[-1] == (b"x-f299", b"v299")
    assert request == reference_parse(head)


def test_a_kept_parser_reads_each_head_as_a_new_one() -> None:
    rng = random.Random(7)
    parser = RequestParser()
    heads = [generated(rng) for _ in range(3000)]
    for head in heads:
        end = head.find(b"\r\n\r\n")
        if end < 0:
            continue
        head = head[:end + 4]
        assert verdict(parser.parse, head) == verdict(parse_request_head, head), head


def test_a_message_with_a_body_is_not_followed_on_its_parser() -> None:
    parser = RequestParser()
    parser.parse(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n")
    # A new parser reads the next head: the old one waits for 3 body bytes.
    request = parser.parse(b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
    assert request.target == b"/next"


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="head must be bytes"):
        _request_head("GET", False, RequestHead)
    with pytest.raises(TypeError, match="3 arguments"):
        _request_head(b"GET / HTTP/1.1\r\n\r\n", False)
    assert _request_head(b"garbage", False, RequestHead) == (400, "malformed request line")


@pytest.mark.parametrize("head", [b"", b"\r\n\r\n", b"GET / HTTP/1.1", b"GET  HTTP/1.1\r\n\r\n",
                                  b"GET / HTTP/1.1\r\nnocolon\r\n\r\n",
                                  b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n",
                                  b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: "
                                  b"99999999999999999999\r\n\r\n"])
def test_heads_llhttp_would_refuse_get_a_refusal_not_a_crash(head: bytes) -> None:
    result = _request_head(head, False, RequestHead)
    assert isinstance(result, tuple) and result[0] == 400


def test_the_backend_head_checks_its_arguments() -> None:
    from chash._chash import _backend_head
    with pytest.raises(TypeError, match="8 arguments"):
        _backend_head([], [], "", b"")
    with pytest.raises(TypeError, match="one length"):
        _backend_head([(b"a", b"b")], [], "", b"", False, 0, True, False)
    with pytest.raises(TypeError, match="pairs"):
        _backend_head([b"a"], [b"a: b"], "", b"", False, 0, True, False)
    with pytest.raises(TypeError, match="host must be bytes"):
        _backend_head([], [], "", "h", False, 0, True, False)
    assert _backend_head([], [], "", b"", False, 0, True, False) == b"X-Forwarded-Proto: http\r\n\r\n"
    assert _backend_head([], [], "", b"", False, 0, True, True) == \
        b"X-Forwarded-Proto: https\r\n\r\n"


def test_many_connection_tokens_cost_one_pass() -> None:
    # Thousands of fields named by Connection: one set, not a scan per field.
    names = [f"x-f{i}".encode() for i in range(3000)]
    head = (b"GET / HTTP/1.1\r\nHost: h\r\nConnection: " + b", ".join(names) + b"\r\n"
            + b"".join(n + b": v\r\n" for n in names) + b"X-Kept: 1\r\n\r\n")
    request = parse_request_head(head)
    assert backend_head(request, "10.0.0.1") == reference_backend_head(request, "10.0.0.1")
    assert b"x-f1:" not in backend_head(request, "10.0.0.1")


@pytest.mark.parametrize("fields, upgrade", [
    (b"Connection: Upgrade\r\nUpgrade: websocket\r\n", b"websocket"),
    (b"Connection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n", b"WebSocket"),
    (b"Connection: upgrade\r\nUpgrade: h2c, websocket/13\r\n", b"h2c, websocket/13"),
    (b"Connection: Upgrade\r\nUpgrade: h2c\r\n", None),
    (b"Upgrade: websocket\r\n", None),  # Connection does not name it
    (b"Connection: close\r\nUpgrade: websocket\r\n", None),
    (b"Connection: Upgrade\r\n", None),
])
def test_a_websocket_handshake_is_told_from_other_upgrades(fields: bytes,
                                                           upgrade: bytes | None) -> None:
    head = b"GET /room HTTP/1.1\r\nHost: h\r\n" + fields + b"\r\n"
    assert parse_request_head(head).upgrade == upgrade
    # Only GET opens one (RFC 6455 §4.1).
    post = b"POST /room HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n" + fields + b"\r\n"
    assert parse_request_head(post).upgrade is None


def test_a_parser_after_an_upgrade_reads_the_next_head_afresh() -> None:
    parser = RequestParser()
    first = parser.parse(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                         b"Upgrade: websocket\r\n\r\n")
    assert first.upgrade == b"websocket"
    second = parser.parse(b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
    assert (second.target, second.upgrade) == (b"/next", None)
