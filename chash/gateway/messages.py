"""What the gateway writes of its own, without I/O: heads and answers.

The request line and Host field of a request to a backend
(``request_start``), the rest of its head (``backend_head``), the head of a
response to a client and how its body is framed (``client_head``), and the
gateway's own plain-text answers (``simple_answer``).  The proxy does the
I/O.
"""

from __future__ import annotations

import enum

from chash._chash import _backend_head
from chash.gateway.heads import RequestHead, ResponseHead

__all__ = ["Body", "backend_head", "client_head", "request_start", "simple_answer",
           "switching_head", "upgrade_head"]

_REASONS = {400: "Bad Request", 404: "Not Found", 408: "Request Timeout",
            413: "Content Too Large", 414: "URI Too Long",
            431: "Request Header Fields Too Large", 500: "Internal Server Error",
            501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout", 505: "HTTP Version Not Supported"}
_NO_BODY = frozenset({204, 304})


class Body(enum.Enum):
    """How the body of a response to a client is framed."""

    NONE = "none"
    """No body: a HEAD request, a 1xx, 204 or 304."""
    LENGTH = "length"
    """``Content-Length`` bytes, as the backend announced."""
    CHUNKED = "chunked"
    """Chunked, as the backend sent it, trailer fields included."""
    DECHUNKED = "dechunked"
    """Chunked from the backend, the bare data to an HTTP/1.0 client (which
    knows no chunks): the body ends when the connection closes."""
    UNTIL_CLOSE = "until close"
    """Neither length nor chunks: the body ends when the backend closes."""


def simple_answer(status: int, message: str, close: bool,
                  retry_after: int | None = None) -> bytes:
    """A whole plain-text answer of the gateway's own: ``chash gateway:
    MESSAGE`` (with ``Retry-After: SECONDS`` if ``retry_after`` is given)."""
    body = f"chash gateway: {message}\n".encode()
    return (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            + ("" if retry_after is None else f"Retry-After: {retry_after}\r\n")
            + ("Connection: close\r\n" if close else "") + "\r\n").encode() + body


def request_start(request: RequestHead, authority: bytes) -> bytes:
    """The request line and Host field of ``request`` sent to the backend
    at ``authority`` (``host:port``): what ``backend_head`` follows."""
    return b"%s %s HTTP/1.1\r\nHost: %s\r\n" % (request.method.encode(), request.target, authority)


def backend_head(request: RequestHead, remote: str, secure: bool = False) -> bytes:
    """Everything after the Host line of the request to a backend: the
    client's fields but the hop-by-hop ones (RFC 9110 §7.6.1), those its
    Connection field names and those the gateway recomputes, then the
    ``X-Forwarded-*`` fields (``X-Forwarded-Proto: https`` when the client
    came over TLS: ``secure``), the framing, and the empty line.  Written
    in C (``chash._chash._backend_head``): it is built for every request."""
    return _backend_head(request.fields, request.lines, remote, request.host,
                         request.chunked, request.content_length,
                         request.method == "GET" or request.method == "HEAD", secure)


def upgrade_head(request: RequestHead, remote: str, secure: bool = False) -> bytes:
    """``backend_head`` for a WebSocket handshake: the hop-by-hop
    ``Connection`` and ``Upgrade`` fields, which the gateway passes on for
    this one protocol, written again (the ``Sec-WebSocket-*`` fields are
    end-to-end, and went with the others)."""
    assert request.upgrade is not None
    head = backend_head(request, remote, secure)
    return head[:-2] + b"Connection: Upgrade\r\nUpgrade: " + request.upgrade + b"\r\n\r\n"


def switching_head(response: ResponseHead, upgrade: bytes, extra: bytes | None = None) -> bytes:
    """The head of a backend's ``101 Switching Protocols`` as the client
    gets it: its end-to-end fields (``Sec-WebSocket-Accept``, ...), the
    ``Connection`` and ``Upgrade`` fields of the switch, and ``extra``."""
    lines = [b"HTTP/1.1 101 %s" % (response.reason or b"Switching Protocols"), *response.relay,
             b"Connection: Upgrade", b"Upgrade: " + upgrade]
    if extra is not None:
        lines.append(extra)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def client_head(request: RequestHead, response: ResponseHead,
                extra: bytes | None = None) -> tuple[bytes, Body, bool]:
    """The head of ``response`` as the client gets it (with the header line
    ``extra`` if given), how its body is framed, and whether the client
    connection may go on after it."""
    keep = request.keep_alive
    lines = [b"HTTP/1.1 %d %s" % (response.status, response.reason), *response.relay]
    if extra is not None:
        lines.append(extra)
    length = response.content_length
    if request.method == "HEAD" or response.status in _NO_BODY or response.status < 200:
        body = Body.NONE
        if length is not None:
            lines.append(b"Content-Length: %d" % length)
        elif response.chunked and request.method == "HEAD":
            lines.append(b"Transfer-Encoding: chunked")
    elif length is not None:
        body = Body.LENGTH
        lines.append(b"Content-Length: %d" % length)
    elif response.chunked and request.version == b"HTTP/1.0":
        body = Body.DECHUNKED
        keep = False
    elif response.chunked:
        body = Body.CHUNKED
        lines.append(b"Transfer-Encoding: chunked")
    else:
        body = Body.UNTIL_CLOSE
        keep = False
    if not keep:
        lines.append(b"Connection: close")
    elif request.version == b"HTTP/1.0":
        lines.append(b"Connection: keep-alive")
    return b"\r\n".join(lines) + b"\r\n\r\n", body, keep
