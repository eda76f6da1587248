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

Each client connection has one ``RequestParser``, and its next request
head is read one way, ``RequestParser.next_request``, by the one-pass path
in the connection's callbacks and by the connection's task alike: a
complete head is taken and parsed; the bytes of a head still arriving are
checked (``check``), so that a malformed one is refused as soon as its
first wrong byte is in, never left waiting for the header timeout (a head
whose lines end in a bare CR or a bare LF is such a head: llhttp refuses
both).  ``parse`` parses a complete head and checks that llhttp saw it
end exactly where the gateway did, so that the two never frame a message
differently.

The policy itself is in C (``chash._chash._request_head``, over
``csrc/http/request_head.c``): once llhttp has accepted a head, one call
reads its fields and applies the rules, instead of a Python callback per
field and a Python pass over them.  A connection's llhttp parser is kept
from one request to the next while its messages have no body.
"""

from __future__ import annotations

import re
from typing import Any, Final, Protocol

from chash._chash import _request_head
from chash._optional import require
from chash.gateway.heads import HttpError, RequestHead

__all__ = ["PENDING", "HeadBuffer", "RequestParser", "parse_request_head"]

_VERSION = re.compile(rb"HTTP/[0-9]\.[0-9]")
_HTTP10 = b"HTTP/1.0"
_HTTP11 = b"HTTP/1.1"

_httptools: Any = None


def _module() -> Any:
    global _httptools
    if _httptools is None:
        _httptools = require("httptools", user="chash.gateway", extra="gateway")
    return _httptools


class _Pending:
    """The type of ``PENDING``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PENDING"


#: What ``RequestParser.next_request`` gives for a head begun and not
#: complete yet (its bytes so far are valid).
PENDING: Final = _Pending()


class HeadBuffer(Protocol):
    """Where request heads are read from: a client connection's buffer
    (``chash.gateway.channel.Channel``)."""

    @property
    def buffered(self) -> int:
        """Bytes received and not read yet."""

    def next_head(self, limit: int) -> bytes | None:
        """A complete head of at most ``limit`` bytes, taken; else None."""

    def peek_from(self, start: int) -> bytes:
        """The buffered bytes from offset ``start`` on, left in the buffer."""


class _Ends:
    """httptools' one callback the gateway needs: where a head ends (the
    fields are read from the head's bytes, once llhttp accepted them)."""

    __slots__ = ("complete",)

    def __init__(self) -> None:
        self.complete = False

    def on_headers_complete(self) -> None:
        self.complete = True


class RequestParser:
    """The request heads of one client connection (see the module docstring)."""

    __slots__ = ("_checked", "_kept", "_partial")

    def __init__(self) -> None:
        _module()
        self._partial: Any = None
        self._checked = 0  # bytes of the head still arriving fed to ``check``
        # The parser of the last head, ready for the next one: only after a
        # message that ended with its head (no body, no upgrade, kept alive).
        self._kept: tuple[Any, _Ends] | None = None

    def next_request(self, buffer: HeadBuffer, limit: int) -> RequestHead | _Pending | None:
        """The next request head in ``buffer``, taken and parsed; PENDING
        when a head is begun and not complete (its new bytes checked);
        None when nothing is buffered.  HttpError as ``parse`` and
        ``check`` raise it, and 431 for a head over ``limit`` bytes."""
        head = buffer.next_head(limit)
        if head is not None:
            return self.parse(head)
        size = buffer.buffered
        if not size:
            return None
        if size > limit:
            raise HttpError(431, "head too large")
        if size > self._checked:
            self.check(buffer.peek_from(self._checked))
            self._checked = size
        return PENDING

    def check(self, data: bytes) -> None:
        """Feed ``data``, the next bytes of a head not complete yet;
        HttpError as soon as they cannot begin a valid head."""
        if self._partial is None:
            self._partial = _module().HttpRequestParser(_Ends())
        _feed(self._partial, data, data)

    def parse(self, head: bytes) -> RequestHead:
        """Parse ``head``, a complete request head ending with its empty
        line.  HttpError with the status to answer: 400 for anything
        malformed or ambiguous, 501 for a transfer coding other than
        chunked or a CONNECT, 505 for a version other than HTTP/1.0 and
        HTTP/1.1."""
        self._partial = None
        self._checked = 0
        kept, self._kept = self._kept, None
        request, parser, upgrade = _parse(head, kept)
        if request.keep_alive and not request.content_length and not request.chunked \
                and not upgrade:
            self._kept = parser
        return request


def _feed(parser: Any, data: bytes, head: bytes) -> bool:
    """Feed ``data`` to ``parser`` (the bytes of ``head`` after those fed already);
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
    return _parse(head, None)[0]


def _websocket(request: RequestHead) -> bytes | None:
    """The ``Upgrade`` value if ``request`` is a WebSocket handshake (RFC
    6455 §4.1: GET, ``upgrade`` among the Connection tokens, ``websocket``
    among the Upgrade ones), else None."""
    if request.method != "GET":
        return None
    connection = b",".join(v for n, v in request.fields if n == b"connection")
    if b"upgrade" not in {t.strip(b" \t").lower() for t in connection.split(b",")}:
        return None
    upgrade = b",".join(v for n, v in request.fields if n == b"upgrade")
    protocols = {t.strip(b" \t").split(b"/", 1)[0].lower() for t in upgrade.split(b",")}
    return upgrade if b"websocket" in protocols else None


def _parse(head: bytes, kept: tuple[Any, _Ends] | None,
           ) -> tuple[RequestHead, tuple[Any, _Ends], bool]:
    """Parse ``head`` with the parser ``kept`` (a new one if None): the
    request, the parser, and whether llhttp saw an upgrade (then the
    parser may not go on to the next head)."""
    if kept is None:
        ends = _Ends()
        kept = (_module().HttpRequestParser(ends), ends)
    parser, ends = kept
    ends.complete = False
    # The last byte fed alone: llhttp must end the head on it, not before
    # (it would then read what follows as a body) and not after.
    _feed(parser, head[:-1], head)
    if ends.complete:
        raise HttpError(400, "malformed request head: it ends before its empty line")
    upgrade = _feed(parser, head[-1:], head)
    if not ends.complete:
        raise HttpError(400, "malformed request head: no empty line at its end")
    request = _request_head(head, upgrade, RequestHead)
    if type(request) is tuple:
        raise HttpError(*request)
    if upgrade:
        request.upgrade = _websocket(request)
    return request, kept, upgrade


