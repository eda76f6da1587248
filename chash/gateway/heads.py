"""HTTP/1.1 message heads, parsed without I/O (RFC 9110, RFC 9112).

The gateway's proxy path reads bytes from sockets and hands complete heads
(request or status line plus header fields, up to and including the empty
line) to ``parse_request_head`` / ``parse_response_head``; bodies are
framed by ``chash.gateway.bodies``.  The parsers are
strict where leniency lets two parties disagree on where a message ends
(request smuggling): a request with both ``Content-Length`` and
``Transfer-Encoding``, conflicting lengths, a coding other than
``chunked``, obsolete line folding, bare CR or LF, whitespace before a
colon, a missing or repeated ``Host`` -- all are refused with the status a
strict server answers.  Header values are kept as bytes: nothing is
decoded, so any byte a client sends in a value can be a routing key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "HttpError",
    "RequestHead",
    "ResponseHead",
    "parse_request_head",
    "parse_response_head",
]

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")
_VERSION = re.compile(rb"HTTP/[0-9]\.[0-9]")
_ABSOLUTE = re.compile(rb"[A-Za-z][A-Za-z0-9+.\-]*://([^/?#]*)([^#]*)")
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-9][0-9][0-9])(?: ([^\r\n]*))?")


class HttpError(Exception):
    """A message the gateway refuses: ``status`` is what to answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


@dataclass(slots=True)
class RequestHead:
    """One parsed request head; every field as sent, in bytes."""

    method: str
    target: bytes
    """The origin-form target (path and query) the backend gets."""
    authority: bytes | None
    """The host an absolute-form target named (never connected to)."""
    version: bytes
    fields: list[tuple[bytes, bytes]]
    """``(lower-case name, value)`` of every header field, in order."""
    lines: list[bytes]
    """The raw header lines, aligned with ``fields``."""
    content_length: int
    chunked: bool
    keep_alive: bool
    expect_continue: bool

    def get(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lower-case), or None."""
        for field, value in self.fields:
            if field == name:
                return value
        return None

    @property
    def host(self) -> bytes:
        """The authority the client addressed: the absolute target's, else Host."""
        return self.authority if self.authority is not None else (self.get(b"host") or b"")


@dataclass(slots=True)
class ResponseHead:
    """One parsed status line and header section from a backend."""

    status: int
    reason: bytes
    content_length: int | None
    """None when the body is chunked or runs to the end of the connection."""
    chunked: bool
    keep_alive: bool
    relay: list[bytes]
    """The header lines a client gets: all but hop-by-hop fields, those
    named by Connection, and the framing."""


_FIELDS = re.compile(rb"(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\x00-\x08\x0a-\x1f\x7f]*\r\n)*")


def _split_fields(lines: list[bytes], status: int) -> list[tuple[bytes, bytes]]:
    # One regular expression checks the whole section in C (token names,
    # no folding, no control characters); the loop below only splits.
    block = b"\r\n".join(lines) + b"\r\n" if lines else b""
    if _FIELDS.fullmatch(block) is None:
        for line in lines:  # find the culprit, for the message
            if not line or line[0] in b" \t":
                raise HttpError(status, "obsolete line folding")
            name, sep, value = line.partition(b":")
            if not sep or _TOKEN.fullmatch(name) is None:
                raise HttpError(status, f"malformed header line {line[:40]!r}")
        raise HttpError(status, "control character in a header value")
    fields = []
    for line in lines:
        name, _, value = line.partition(b":")
        fields.append((name.lower(), value.strip(b" \t")))
    return fields


def _lengths(fields: list[tuple[bytes, bytes]], status: int) -> int | None:
    length: int | None = None
    for name, value in fields:
        if name == b"content-length":
            for item in value.split(b","):
                item = item.strip(b" \t")
                if not item.isdigit() or len(item) > 18:
                    raise HttpError(status, "invalid Content-Length")
                if length is not None and int(item) != length:
                    raise HttpError(status, "conflicting Content-Length values")
                length = int(item)
    return length


def _connection_tokens(fields: list[tuple[bytes, bytes]]) -> set[bytes]:
    return {token.strip(b" \t").lower() for name, value in fields if name == b"connection"
            for token in value.split(b",")}


def parse_request_head(data: bytes) -> RequestHead:
    """Parse a request head (``data`` ends with the empty line).

    Raises ``HttpError`` with the status to answer: 400 for anything
    malformed or ambiguous, 501 for a transfer coding other than chunked or
    a CONNECT, 505 for a version other than HTTP/1.0 and HTTP/1.1.
    """
    lines = data[:-4].split(b"\r\n") if data.endswith(b"\r\n\r\n") else [b""]
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if _TOKEN.fullmatch(method) is None:
        raise HttpError(400, "malformed method")
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        if _VERSION.fullmatch(version):
            raise HttpError(505, "only HTTP/1.0 and HTTP/1.1 are served")
        raise HttpError(400, "malformed version")
    if not target or _BAD_TARGET.search(target) is not None:
        raise HttpError(400, "malformed request target")
    authority: bytes | None = None
    if target[0] != 0x2F:  # not "/": absolute-form, "*" or authority-form
        absolute = _ABSOLUTE.fullmatch(target)
        if absolute is not None:
            # RFC 9112 §3.2.2: the target's authority replaces Host.  The
            # request is routed by its path like any other; the host it
            # names is only passed on in X-Forwarded-Host.
            authority = absolute.group(1)
            target = absolute.group(2) or b"/"
            if target[0] != 0x2F:  # "http://h?q": the path is empty
                target = b"/" + target
        elif target == b"*" and method == b"OPTIONS":
            pass
        elif method == b"CONNECT":
            raise HttpError(501, "CONNECT is not supported")
        else:
            raise HttpError(400, "malformed request target")
    header_lines = lines[1:]
    fields = _split_fields(header_lines, 400)
    length = _lengths(fields, 400)
    codings = [value for name, value in fields if name == b"transfer-encoding"]
    chunked = False
    if codings:
        if version == b"HTTP/1.0":
            raise HttpError(400, "Transfer-Encoding in an HTTP/1.0 request")
        if length is not None:
            raise HttpError(400, "both Content-Length and Transfer-Encoding")
        if b",".join(codings).strip(b" \t").lower() != b"chunked":
            raise HttpError(501, "only the chunked transfer coding is supported")
        chunked = True
    hosts = [value for name, value in fields if name == b"host"]
    if len(hosts) > 1 or (version == b"HTTP/1.1" and not hosts):
        raise HttpError(400, "a request needs exactly one Host header")
    tokens = _connection_tokens(fields)
    keep_alive = (b"close" not in tokens if version == b"HTTP/1.1"
                  else b"keep-alive" in tokens)
    expect = next((v for n, v in fields if n == b"expect"), None)
    return RequestHead(method.decode("ascii"), target, authority, version, fields,
                       header_lines, length or 0, chunked, keep_alive,
                       expect is not None and expect.lower() == b"100-continue")


# Never relayed from a backend to the client: hop-by-hop fields (RFC 9110
# §7.6.1) and the framing, which the gateway writes itself.
_NOT_RELAYED = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization",
    b"proxy-connection", b"te", b"trailer", b"trailers", b"transfer-encoding", b"upgrade",
    b"content-length",
})


def parse_response_head(data: bytes) -> ResponseHead:
    """Parse a backend's status line and header section; HttpError(502) if
    it is malformed or its framing ambiguous.  One pass also collects the
    header lines to relay (``ResponseHead.relay``)."""
    status_end = data.find(b"\r\n")
    match = _STATUS_LINE.fullmatch(data, 0, status_end)
    if match is None:
        raise HttpError(502, "malformed status line from the backend")
    block = data[status_end + 2:-2]
    header_lines = block.split(b"\r\n")[:-1] if block else []
    if _FIELDS.fullmatch(block) is None:
        _split_fields(header_lines, 502)  # raises, naming the culprit
        raise HttpError(502, "malformed header section from the backend")
    fields = []
    relay = []
    length: int | None = None
    codings = []
    tokens: set[bytes] = set()
    for line in header_lines:
        name, _, value = line.partition(b":")
        lname = name.lower()
        value = value.strip(b" \t")
        fields.append((lname, value))
        if lname not in _NOT_RELAYED:
            relay.append(line)
        elif lname == b"content-length":
            for item in value.split(b","):
                item = item.strip(b" \t")
                if not item.isdigit() or len(item) > 18 or (
                        length is not None and int(item) != length):
                    raise HttpError(502, "invalid or conflicting Content-Length")
                length = int(item)
        elif lname == b"transfer-encoding":
            codings.append(value)
        elif lname == b"connection":
            tokens.update(t.strip(b" \t").lower() for t in value.split(b","))
    if tokens - {b"close", b"keep-alive"}:  # fields named by Connection stay behind
        relay = [line for line, (lname, _) in zip(header_lines, fields, strict=True)
                 if lname not in _NOT_RELAYED and lname not in tokens]
    chunked = bool(codings) and b",".join(codings).rsplit(b",", 1)[-1].strip(
        b" \t").lower() == b"chunked"
    if codings:
        length = None  # Transfer-Encoding overrides Content-Length (RFC 9112 §6.3)
    keep_alive = b"close" not in tokens and data.startswith(b"HTTP/1.1")
    if codings and not chunked:  # the body runs to the end of the connection
        keep_alive = False
    return ResponseHead(int(match.group(1)), match.group(2) or b"", length, chunked,
                        keep_alive, relay)
