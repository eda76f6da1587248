"""The gateway's connections: a buffered asyncio protocol, ``Channel``.

``Channel`` is the small part of asyncio streams the proxy needs (a read
buffer with flow control, reads of a head, a line, some or exactly N bytes,
each bounded by a timeout; writes with drain), without their layers.  It
serves both sides: client connections and the backend connections that
``chash.gateway.pool`` keeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

from chash.gateway.heads import HttpError
from chash.gateway.tls import subject_of

__all__ = ["BLOCK", "Channel", "ReadTimeout"]

#: Bytes read or written in one step; also the read buffer's high-water mark.
BLOCK = 65536
#: ``Channel.tls_subject`` before it is first read.
_UNREAD: Final = object()


async def _ready() -> None:
    """Nothing to wait for."""


class ReadTimeout(Exception):
    """A read did not complete in time."""


class Channel(asyncio.Protocol):
    """A TCP connection with a read buffer and write flow control: the
    small part of asyncio streams the proxy needs, without their layers."""

    __slots__ = (
        "_buf",
        "_deadline",
        "_drain",
        "_lost",
        "_on_made",
        "_paused",
        "_timer",
        "_tls_subject",
        "_waiter",
        "_write_paused",
        "busy",
        "fast",
        "loop",
        "on_wake",
        "on_writable",
        "peer",
        "peer_closed",
        "secure",
        "transport",
    )

    def __init__(self, on_made: Callable[[Channel], None] | None = None,
                 peer: Any = None) -> None:
        self.transport: asyncio.Transport | None = None
        #: The peer's address as ``accept`` gave it, when the listener
        #: knows it (else the transport's ``peername`` says).
        self.peer = peer
        self._buf = bytearray()
        #: Whether the peer closed its sending side (EOF received).
        self.peer_closed = False
        self._lost = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._drain: asyncio.Future[None] | None = None
        self._write_paused = False
        #: The loop the connection is served on (asyncio.get_running_loop()
        #: costs a getpid() system call on CPython 3.11: read once here).
        self.loop = asyncio.get_running_loop()
        self._on_made = on_made
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        #: Called with the channel, instead of waking whoever waits, when
        #: bytes or the end arrive (and, with no waiter, when the deadline
        #: ``expect`` set passes): the proxy's one-pass path for plain
        #: requests, which answers from these callbacks (see ``wake``).
        self.fast: Callable[[Channel], None] | None = None
        #: Set by the proxy while a request of this client is being
        #: served: ``finish_if_idle`` leaves the connection alone then.
        self.busy = False
        #: Whether the connection is over TLS.
        self.secure = False
        self._tls_subject: object = _UNREAD
        #: Called when the peer, having fallen behind (``write_paused``),
        #: takes what was written: a tunnel resumes reading its other side.
        self.on_writable: Callable[[], None] | None = None
        #: Called once, with the channel, by a ``wake`` that finds nobody
        #: waiting: a connection served by ``fast`` alone before it has a
        #: task of its own gets one (see ``Express.begin``).
        self.on_wake: Callable[[Channel], None] | None = None

    @property
    def tls_subject(self) -> bytes | None:
        """Over TLS, the subject of the peer's verified certificate (RFC
        4514's form, UTF-8), or None without one; read from the handshake
        when first asked (only ``--key tls-subject`` asks)."""
        subject = self._tls_subject
        if subject is _UNREAD:
            peercert = None if self.transport is None or not self.secure \
                else self.transport.get_extra_info("peercert")
            subject = self._tls_subject = subject_of(peercert)
        return subject  # type: ignore[return-value]  # bytes or None once read

    # protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        self.secure = transport.get_extra_info("sslcontext") is not None
        if self._on_made is not None:
            self._on_made(self)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self.fast is not None:
            self.fast(self)
        else:
            waiter = self._waiter
            if waiter is not None:
                self._waiter = None
                if not waiter.done():
                    waiter.set_result(None)
        if len(self._buf) > BLOCK and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.peer_closed = True
        if self.fast is not None:
            self.fast(self)
        else:
            self._wake()
        # Keep the write side open: a response may still go out.  TLS has no
        # half-close in asyncio (the transport closes after the peer's
        # close_notify, and warns if asked to stay open).
        return not self.secure

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.peer_closed = self._lost = True
        if self.fast is not None:
            self.fast(self)
        else:
            self._wake()
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)
        if self.on_writable is not None:
            self.on_writable()

    @property
    def write_paused(self) -> bool:
        """Whether the peer has fallen behind what was written (the
        transport's buffer is over its high-water mark)."""
        return self._write_paused

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wake(self) -> None:
        """Stop calling ``fast`` and wake whoever waits in ``park`` (with
        nobody waiting, call ``on_wake`` if set)."""
        self.fast = None
        on_wake = self.on_wake
        if on_wake is not None and self._waiter is None:
            self.on_wake = None
            on_wake(self)
        else:
            self._wake()

    def park(self, timeout: float) -> asyncio.Future[None]:
        """Something to await until ``wake`` (or, without ``fast``, bytes
        beyond those buffered or the end arriving: the rest of a head);
        ReadTimeout once ``timeout`` s pass (see ``extend``).  Bytes
        already buffered do not end it."""
        return self._more(timeout)

    def extend(self, timeout: float) -> None:
        """Move the deadline of the wait in progress to ``timeout`` s from now."""
        self._deadline = self.loop.time() + timeout

    def expect(self, timeout: float) -> None:
        """Call ``fast`` once ``timeout`` s pass with nobody waiting (a
        one-pass request's wait for its answer): the deadline, without a
        future."""
        deadline = self._deadline = self.loop.time() + timeout
        if self._timer is None or self._timer.when() > deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_at(deadline, self._on_timer)

    @property
    def expired(self) -> bool:
        """Whether the deadline of the last wait or ``expect`` has passed."""
        return self.loop.time() >= self._deadline

    # reading
    @property
    def buffered(self) -> int:
        """Bytes received and not read yet."""
        return len(self._buf)

    def finish_if_idle(self) -> None:
        """Treat an idle connection (nothing buffered, not ``busy``) as
        closed by the peer, so that whoever waits on it stops waiting: for
        a graceful stop."""
        if not self._buf and not self.busy:
            self.peer_closed = True
            self.wake()

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (``connection_lost`` came: what
        was written before a ``close`` has gone out, or never will)."""
        return self._lost

    @property
    def lost(self) -> bool:
        """Whether the connection is gone or closing."""
        return self._lost or self.transport is None or self.transport.is_closing()

    def wait_data(self, timeout: float) -> Awaitable[None]:
        """Something to await until some bytes (or EOF) arrive; ReadTimeout
        after ``timeout`` s.  (The future itself when it must wait: one
        frame less between a keep-alive connection's requests.)"""
        if self._buf or self.peer_closed:
            return _ready()
        return self._more(timeout)

    def head_end(self) -> int:
        """Where the buffered bytes' first empty line ends (the length of
        a complete head at their start), or -1 if none is buffered yet."""
        end = self._buf.find(b"\r\n\r\n")
        return end + 4 if end >= 0 else -1

    def next_head(self, limit: int) -> bytes | None:
        """A complete head of at most ``limit`` bytes if one is buffered,
        taken; else None and nothing is taken.  (A request head is read
        through ``chash.gateway.parser.RequestParser.next_request``.)"""
        end = self._buf.find(b"\r\n\r\n")
        if end < 0 or end + 4 > limit:
            return None
        return self._take(end + 4)

    def peek(self, size: int) -> bytes:
        """The first ``size`` buffered bytes, left in the buffer."""
        return bytes(self._buf[:size])

    def peek_from(self, start: int) -> bytes:
        """The buffered bytes from offset ``start`` on, left in the buffer."""
        return bytes(self._buf[start:])

    def take(self, size: int) -> bytes:
        """The first ``size`` buffered bytes (all there are, if fewer), taken."""
        return self._take(size)

    def _take(self, size: int) -> bytes:
        buf = self._buf
        if size >= len(buf):  # the usual case: all that came is taken at once
            data = bytes(buf)
            buf.clear()
        else:
            data = bytes(buf[:size])
            del buf[:size]
        if self._paused and len(self._buf) <= BLOCK // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def read_head(self, limit: int, timeout: float, status: int) -> bytes | None:
        """Bytes up to and including the first empty line (a backend's
        response head); None on EOF before any byte.  HttpError(status)
        above ``limit`` bytes or on EOF mid-head; ReadTimeout when
        ``timeout`` s pass without the head complete."""
        start = 0
        deadline = self.loop.time() + timeout
        while True:
            end = self._buf.find(b"\r\n\r\n", start)
            if end >= 0:
                if end + 4 > limit:
                    raise HttpError(status if status != 400 else 431, "head too large")
                return self._take(end + 4)
            if len(self._buf) > limit:
                raise HttpError(status if status != 400 else 431, "head too large")
            if self.peer_closed:
                if not self._buf:
                    return None
                raise HttpError(status, "connection closed mid-head")
            start = max(0, len(self._buf) - 3)
            await self._more(deadline - self.loop.time())

    async def read_line(self, limit: int, timeout: float) -> bytes:
        """One CRLF-terminated line, without the CRLF; HttpError(400) if
        longer than ``limit`` or cut by EOF."""
        while True:
            end = self._buf.find(b"\r\n")
            if end >= 0:
                line = self._take(end + 2)[:-2]
                return line
            if len(self._buf) > limit or self.peer_closed:
                raise HttpError(400, "malformed chunked body")
            await self._more(timeout)

    async def read_some(self, most: int, timeout: float) -> bytes:
        """Up to ``most`` bytes, at least one; b"" at EOF."""
        if not self._buf:
            if self.peer_closed:
                return b""
            await self.wait_data(timeout)
            if not self._buf:
                return b""
        return self._take(most)

    async def read_exact(self, size: int, timeout: float) -> bytes:
        """Exactly ``size`` bytes; EOFError if the peer closes first."""
        while len(self._buf) < size:
            if self.peer_closed:
                raise EOFError(f"connection closed after {len(self._buf)} of {size} bytes")
            await self._more(timeout)
        return self._take(size)

    def _more(self, timeout: float) -> asyncio.Future[None]:
        """A future for bytes beyond those buffered (past the flow-control
        mark): done when some arrive or at EOF, ReadTimeout after
        ``timeout`` s.  A plain function returning the future to await, not
        a coroutine: one frame less for every read that waits.  Whoever
        completes the future clears ``_waiter`` first, so a cancelled wait
        leaves nothing behind but a done future the next wait replaces."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        loop = self.loop
        deadline = self._deadline = loop.time() + timeout
        waiter = self._waiter = loop.create_future()
        # One timer per connection, re-armed lazily: deadlines only move
        # forward from one read to the next, so the timer fires about once
        # per timeout period instead of being set and cancelled per read.
        if self._timer is None or self._timer.when() > deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(deadline, self._on_timer)
        return waiter

    def _on_timer(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            if self.fast is not None:
                if self.loop.time() >= self._deadline:
                    self.fast(self)
                else:
                    self._timer = self.loop.call_at(self._deadline, self._on_timer)
            return
        if self.loop.time() >= self._deadline:
            self._waiter = None
            waiter.set_exception(ReadTimeout())
        else:
            self._timer = self.loop.call_at(self._deadline, self._on_timer)

    # writing
    def write(self, data: bytes) -> None:
        """Queue ``data``; ConnectionResetError if the connection is gone."""
        if self.lost:
            raise ConnectionResetError("connection lost")
        assert self.transport is not None
        self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the peer does not keep up with what was written."""
        if self.lost:
            raise ConnectionResetError("connection lost")
        if self._write_paused:
            self._drain = self.loop.create_future()
            await self._drain

    @property
    def lingers(self) -> bool:
        """Whether ``linger`` has anything to do: the connection is open
        both ways and can close its sending side alone (not TLS: there, no
        half-close to send, so a client reading to the end would wait out
        the linger; closing sends TLS's own end, close_notify, at once, and
        the transport reads on, discarding, until the client's reply or its
        shutdown timeout: that lingers)."""
        return not (self.lost or self.peer_closed) and self.transport is not None \
            and self.transport.can_write_eof()

    async def linger(self, wait: float, most: float) -> None:
        """Close the sending side and read what the peer still sends, so that
        an answer sent before its request was read reaches the peer instead
        of being lost to a reset: until EOF, ``wait`` seconds of silence or
        ``most`` seconds in all.  Nothing unless ``lingers`` (over TLS, the
        caller's close does it)."""
        if not self.lingers:
            return
        assert self.transport is not None
        self.transport.write_eof()
        end = self.loop.time() + most
        try:
            while not self.peer_closed and (left := end - self.loop.time()) > 0:
                self._buf.clear()
                await self._more(min(wait, left))
        except ReadTimeout:
            pass

    def close(self) -> None:
        """Close the connection (what was written is still sent)."""
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection at once."""
        if self.transport is not None:
            self.transport.abort()
