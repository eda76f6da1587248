"""Request heads parsed by llhttp (through httptools), the gateway's policy on top.

llhttp is strict about the grammar (CRLF line ends, token names, no
control characters, no raw non-ASCII byte in the target, one
``Content-Length``, no ``Content-Length`` with ``Transfer-Encoding``).
``RequestParser`` adds what a gateway in front of other parsers must also
refuse, so that no backend can read the head differently: a transfer
coding other than ``chunked`` (501), ``Transfer-Encoding`` in an HTTP/1.0
request, obsolete line folding, a request line with other than two single
spaces, a missing or repeated ``Host``, and versions other than HTTP/1.0
and HTTP/1.1 (505).

Each client connection has one ``RequestParser``.  ``check`` feeds the
bytes of a head still arriving, so that a malformed one is refused as soon
as its first wrong byte is in, never left waiting for the header timeout
(a head whose lines end in a bare CR or a bare LF is such a head: llhttp
refuses both).  ``parse`` parses a complete head and checks that llhttp
saw it end exactly where the gateway did, so that the two never frame a
message differently.
"""

from __future__ import annotations

import re
from typing import Any

from chash._optional import require
from chash.gateway.heads import HttpError, RequestHead

__all__ = ["RequestParser", "parse_request_head"]

_VERSION = re.compile(rb"HTTP/[0-9]\.[0-9]")
_ABSOLUTE = re.compile(rb"[A-Za-z][A-Za-z0-9+.\-]*://([^/?#]*)([^#]*)")
_HTTP10 = b"HTTP/1.0"
_HTTP11 = b"HTTP/1.1"

_httptools: Any = None


def _module() -> Any:
    global _httptools
    if _httptools is None:
        _httptools = require("httptools", user="chash.gateway", extra="gateway")
    return _httptools


class _Collector:
    """httptools' callbacks: the target and the raw header fields."""

    __slots__ = ("complete", "fields", "url")

    def __init__(self) -> None:
        self.url = b""
        self.fields: list[tuple[bytes, bytes]] = []
        self.complete = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name, value))

    def on_headers_complete(self) -> None:
        self.complete = True


class RequestParser:
    """The request heads of one client connection (see the module docstring)."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        _module()
        self._partial: tuple[Any, _Collector] | None = None

    def check(self, data: bytes) -> None:
        """Feed ``data``, the next bytes of a head not complete yet;
        HttpError as soon as they cannot begin a valid head."""
        if self._partial is None:
            collector = _Collector()
            self._partial = (_module().HttpRequestParser(collector), collector)
        parser, collector = self._partial
        _feed(parser, collector, data, data)

    def parse(self, head: bytes) -> RequestHead:
        """Parse ``head``, a complete request head ending with its empty
        line.  HttpError with the status to answer: 400 for anything
        malformed or ambiguous, 501 for a transfer coding other than
        chunked or a CONNECT, 505 for a version other than HTTP/1.0 and
        HTTP/1.1."""
        self._partial = None
        return parse_request_head(head)


def _feed(parser: Any, collector: _Collector, data: bytes, head: bytes) -> bool:
    """Feed ``data`` (the bytes of ``head`` after those fed already);
    whether the request is an upgrade (CONNECT, or Upgrade asked for).
    HttpError when llhttp refuses the bytes."""
    httptools = _httptools
    try:
        parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        return True
    except httptools.HttpParserError as exc:
        raise _refusal(head, exc) from None
    return False


def _refusal(head: bytes, exc: Exception) -> HttpError:
    """The answer to a head llhttp refused with ``exc``."""
    line = head.split(b"\n", 1)[0].rstrip(b"\r")
    parts = line.split(b" ")
    if len(parts) == 3 and _VERSION.fullmatch(parts[2]) and \
            parts[2] not in (_HTTP10, _HTTP11) and "version" in str(exc):
        return HttpError(505, "only HTTP/1.0 and HTTP/1.1 are served")
    if isinstance(exc, _httptools.HttpParserInvalidMethodError):
        return HttpError(400, "malformed or unknown method")
    if isinstance(exc, _httptools.HttpParserInvalidURLError):
        return HttpError(400, "malformed request target")
    return HttpError(400, f"malformed request head: {exc}")


def parse_request_head(head: bytes) -> RequestHead:
    """Parse a complete request head; see ``RequestParser.parse``."""
    httptools = _module()
    collector = _Collector()
    parser = httptools.HttpRequestParser(collector)
    # The last byte fed alone: llhttp must end the head on it, not before
    # (it would then read what follows as a body) and not after.
    _feed(parser, collector, head[:-1], head)
    if collector.complete:
        raise HttpError(400, "malformed request head: it ends before its empty line")
    upgrade = _feed(parser, collector, head[-1:], head)
    if not collector.complete:
        raise HttpError(400, "malformed request head: no empty line at its end")
    return _policy(parser, collector, head, upgrade)


def _policy(parser: Any, collector: _Collector, head: bytes, upgrade: bool) -> RequestHead:
    """The gateway's rules over what llhttp accepted."""
    method_b = parser.get_method()
    method = method_b.decode("ascii")
    first = head.find(b"\r\n")
    line = head[:first]
    if line.count(b" ") != 2:
        raise HttpError(400, "malformed request line")
    version = line[line.rindex(b" ") + 1:]
    if version != _HTTP11 and version != _HTTP10:
        raise HttpError(505, "only HTTP/1.0 and HTTP/1.1 are served")
    if upgrade and method == "CONNECT":
        raise HttpError(501, "CONNECT is not supported")
    if b"\n " in head or b"\n\t" in head:
        raise HttpError(400, "obsolete line folding")
    target = collector.url
    if not target.isascii() or b"\x7f" in target:  # llhttp refuses them too
        raise HttpError(400, "malformed request target")
    authority: bytes | None = None
    if target[:1] != b"/":
        absolute = _ABSOLUTE.fullmatch(target)
        if absolute is not None:
            # RFC 9112 §3.2.2: the target's authority replaces Host.  The
            # request is routed by its path like any other; the host it
            # names is only passed on in X-Forwarded-Host.
            authority = absolute.group(1)
            target = absolute.group(2) or b"/"
            if target[:1] != b"/":  # "http://h?q": the path is empty
                target = b"/" + target
        elif not (target == b"*" and method == "OPTIONS"):
            raise HttpError(400, "malformed request target")
    fields = []
    lines = []
    hosts = 0
    length: int | None = None
    codings: list[bytes] = []
    tokens: set[bytes] = set()
    expect = False
    for raw_name, raw_value in collector.fields:
        name = raw_name.lower()
        value = raw_value.rstrip(b" \t")
        fields.append((name, value))
        lines.append(raw_name + b": " + value)
        if name == b"host":
            hosts += 1
        elif name == b"content-length":
            length = int(value)  # llhttp checked the digits and that it is the only one
        elif name == b"transfer-encoding":
            codings.append(value)
        elif name == b"connection":
            tokens.update(t.strip(b" \t").lower() for t in value.split(b","))
        elif name == b"expect":
            expect = value.lower() == b"100-continue"
    chunked = False
    if codings:
        if version == _HTTP10:
            raise HttpError(400, "Transfer-Encoding in an HTTP/1.0 request")
        if b",".join(codings).strip(b" \t").lower() != b"chunked":
            raise HttpError(501, "only the chunked transfer coding is supported")
        chunked = True
    if hosts > 1 or (version == _HTTP11 and not hosts):
        raise HttpError(400, "a request needs exactly one Host header")
    keep_alive = (b"close" not in tokens if version == _HTTP11
                  else b"keep-alive" in tokens)
    return RequestHead(method, target, authority, version, fields, lines,
                       length or 0, chunked, keep_alive, expect)
