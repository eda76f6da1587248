"""The gateway's request-head policy and backend head written plainly in Python, over
llhttp's own callbacks: the reference the C policy
(``chash._chash._request_head``, ``csrc/http/request_head.c``) is tested
against.  It collects the target and the fields as llhttp reports them
(on_url, on_header) rather than reading them from the bytes, so that the
two agree only if the C policy reads the bytes as llhttp does.
"""

from __future__ import annotations

import re
from typing import Any

import httptools

from chash.gateway.heads import HttpError, RequestHead

_ABSOLUTE = re.compile(rb"[A-Za-z][A-Za-z0-9+.\-]*://([^/?#]*)([^#]*)")
_HTTP10 = b"HTTP/1.0"
_HTTP11 = b"HTTP/1.1"


class _Collector:
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


def reference_parse(head: bytes) -> RequestHead:
    """``head`` (llhttp must accept it whole) read by the reference policy;
    HttpError as the gateway refuses it.  ValueError if llhttp refuses it."""
    collector = _Collector()
    parser = httptools.HttpRequestParser(collector)
    upgrade = False
    try:
        parser.feed_data(head)
    except httptools.HttpParserUpgrade:
        upgrade = True
    except httptools.HttpParserError as exc:
        raise ValueError(f"llhttp refuses the head: {exc}") from None
    if not collector.complete:
        raise ValueError("llhttp saw no end of the head")
    return _policy(parser, collector, head, upgrade)


def _policy(parser: Any, collector: _Collector, head: bytes, upgrade: bool) -> RequestHead:
    method = parser.get_method().decode("ascii")
    line = head[:head.find(b"\r\n")]
    if line.count(b" ") != 2:
        raise HttpError(400, "malformed request line")
    version = line[line.rindex(b" ") + 1:]
    if version != _HTTP11 and version != _HTTP10:
        raise HttpError(505, "only HTTP/1.0 and HTTP/1.1 are served")
    if b"\r" in line.lstrip(b"\r\n") or b"\n" in line.lstrip(b"\r\n"):
        raise HttpError(400, "malformed request line")
    if upgrade and method == "CONNECT":
        raise HttpError(501, "CONNECT is not supported")
    if b"\n " in head or b"\n\t" in head:
        raise HttpError(400, "obsolete line folding")
    target = collector.url
    if not target.isascii() or b"\x7f" in target:
        raise HttpError(400, "malformed request target")
    authority: bytes | None = None
    if target[:1] != b"/":
        absolute = _ABSOLUTE.fullmatch(target)
        if absolute is not None:
            authority = absolute.group(1)
            target = absolute.group(2) or b"/"
            if target[:1] != b"/":
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
            length = int(value)
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


_NOT_FORWARDED = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization",
    b"proxy-connection", b"te", b"trailer", b"trailers", b"transfer-encoding", b"upgrade",
    b"host", b"content-length", b"expect", b"x-forwarded-for", b"x-forwarded-proto",
    b"x-forwarded-host",
})


def reference_backend_head(request: RequestHead, remote: str, secure: bool = False) -> bytes:
    """``chash.gateway.messages.backend_head`` written plainly."""
    named = {token.strip(b" \t").lower() for name, value in request.fields
             if name == b"connection" for token in value.split(b",")}
    out = []
    forwarded_for = b""
    for (name, value), line in zip(request.fields, request.lines, strict=True):
        if name in _NOT_FORWARDED or name in named:
            if name == b"x-forwarded-for":
                forwarded_for = value
            continue
        out.append(line)
    client_ip = remote.encode()
    if client_ip:
        forwarded_for = forwarded_for + b", " + client_ip if forwarded_for else client_ip
    if forwarded_for:
        out.append(b"X-Forwarded-For: " + forwarded_for)
    out.append(b"X-Forwarded-Proto: https" if secure else b"X-Forwarded-Proto: http")
    host = request.host
    if host:
        out.append(b"X-Forwarded-Host: " + host)
    if request.chunked:
        out.append(b"Transfer-Encoding: chunked")
    elif request.content_length or request.method not in ("GET", "HEAD"):
        out.append(b"Content-Length: %d" % request.content_length)
    out.append(b"")
    out.append(b"")
    return b"\r\n".join(out)
