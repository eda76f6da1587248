"""HTTP/1.1 message heads (RFC 9110, RFC 9112): the parsed forms, and the
backend's response heads parsed without I/O.

``RequestHead`` is what ``chash.gateway.parser`` (llhttp, with the
gateway's policy on top) makes of a client's request head;
``parse_response_head`` reads a backend's status line and header fields
(bodies are framed by ``chash.gateway.bodies``).  It is strict where
leniency lets two parties disagree on where a message ends: conflicting
lengths, obsolete line folding, bare CR or LF, whitespace before a colon
are refused with 502.  Header values are kept as bytes: nothing is
decoded, so any byte a client sends in a value can be a routing key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "HttpError",
    "RequestHead",
    "ResponseHead",
    "parse_response_head",
]

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
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
    upgrade: bytes | None = None
    """The ``Upgrade`` value of a WebSocket handshake (RFC 6455 §4.1:
    ``GET``, ``Connection: Upgrade``, ``Upgrade: websocket``), else None:
    a request asking for another protocol is served as a plain one, its
    ``Upgrade`` left behind."""

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
