"""The gateway's TLS listener: accepting connections, each with the context of the moment.

``TlsListener`` accepts on listening sockets of its own and hands each
connection to the event loop with ``loop.connect_accepted_socket(...,
ssl=context)``, the context being whatever ``context()`` returns at that
accept.  A reload swaps the context (a renewed certificate, other ciphers
or client CAs) for the handshakes after it, while every connection
already open keeps the one it was accepted with; ``create_server(ssl=)``
would fix one context for the server's life.

A handshake that fails (another protocol version, garbage, a plain HTTP
request on the TLS port, no valid client certificate, a client that stays
silent past ``handshake_timeout``) closes that connection only; it is
logged once, with its reason, and counted (``failures``).
"""

from __future__ import annotations

import _socket
import asyncio
import functools
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

__all__ = ["TlsListener", "handshake_failure"]

logger = logging.getLogger("chash.gateway")

#: Connections accepted in one go before the loop runs other callbacks.
_ACCEPT_BATCH = 64
#: Seconds the listener pauses after an accept failed (out of descriptors...).
_ACCEPT_PAUSE = 0.1


class _Accepted(socket.socket):
    """An accepted connection's socket whose ``family`` and ``type`` are
    the plain numbers the C socket keeps: ``socket.socket`` makes an enum
    on every read of them, and the loop reads them for each connection."""

    __slots__ = ()
    family = _socket.socket.family  # type: ignore[assignment]  # an int, not the enum
    type = _socket.socket.type  # type: ignore[assignment]


def handshake_failure(exc: BaseException) -> str:
    """A failed handshake's reason, short: OpenSSL's reason, or what
    became of the connection."""
    if isinstance(exc, ssl.SSLError):
        reason = str(exc.reason or "").replace("_", " ").lower()
        if reason == "http request":
            return "a plain HTTP request on the TLS port"
        return reason or str(exc)
    if isinstance(exc, TimeoutError) or (isinstance(exc, ConnectionAbortedError)
                                          and "taking longer than" in str(exc)):
        return "timed out"  # (asyncio aborts a slow handshake: ConnectionAbortedError)
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return "the client reset the connection"
    if isinstance(exc, (ConnectionAbortedError, EOFError)):
        return "the client closed the connection"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class TlsListener:
    """Listens on ``host:port`` (or on given sockets) and serves each
    accepted connection over TLS with ``protocol()``'s protocol.

    ``protocol``: called with the peer's address (as ``accept`` gives
    it) for each connection's protocol; ``context``: called at each accept
    for the context to handshake with; ``handshake_timeout``: seconds a
    handshake may take."""

    def __init__(self, protocol: Callable[[Any], asyncio.BaseProtocol],
                 context: Callable[[], ssl.SSLContext], handshake_timeout: float) -> None:
        self._protocol = protocol
        self._context = context
        #: Seconds a handshake may take (a reload may change it).
        self.handshake_timeout = handshake_timeout
        self._sockets: list[socket.socket] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Listening sockets resting after a failed accept, and when they resume.
        self._paused: dict[socket.socket, asyncio.TimerHandle] = {}
        #: Handshakes under way: each task's connection and peer address.
        self._handshakes: dict[asyncio.Task[Any], tuple[socket.socket, object]] = {}
        #: Handshakes that failed, since the start.
        self.failures = 0

    @property
    def sockets(self) -> list[socket.socket]:
        """The listening sockets."""
        return list(self._sockets)

    async def start(self, host: str, port: int, *, reuse_port: bool = False,
                    sock: socket.socket | None = None, backlog: int = 1024) -> None:
        """Listen on every address of ``host:port`` (or on ``sock``) and
        start accepting."""
        loop = asyncio.get_running_loop()
        if sock is not None:
            sockets = [sock]
        else:
            sockets = []
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                           flags=socket.AI_PASSIVE)
            try:
                for family, kind, proto, _, address in dict.fromkeys(infos):
                    listening = socket.socket(family, kind, proto)
                    sockets.append(listening)
                    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    if reuse_port:
                        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                    if family == socket.AF_INET6:
                        listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    listening.bind(address)
            except BaseException:
                for listening in sockets:
                    listening.close()
                raise
        for listening in sockets:
            listening.listen(backlog)
            listening.setblocking(False)
        self._sockets = sockets
        self._loop = loop
        for listening in sockets:
            self._watch(listening)

    def _watch(self, listening: socket.socket) -> None:
        assert self._loop is not None
        # Read once, not per connection: socket.family makes an enum each time.
        family = int(listening.family)
        # What asyncio's transports look for before they set TCP_NODELAY (a
        # socket passed in may say 0).
        tcp = family in (socket.AF_INET, socket.AF_INET6)
        proto = listening.proto or (socket.IPPROTO_TCP if tcp else 0)
        self._loop.add_reader(listening.fileno(), self._accept, listening,
                              listening._accept, family, proto)  # type: ignore[attr-defined]

    def _accept(self, listening: socket.socket, accept: Callable[[], tuple[int, Any]],
                family: int, proto: int) -> None:
        """The listening socket is readable: accept what is waiting (up to
        a batch), each connection handed to the loop.  A reader callback,
        not a task: no task step per wake, and ``_accept`` (the C socket's,
        a descriptor and the address) makes no socket object to replace."""
        loop = self._loop
        assert loop is not None
        for _ in range(_ACCEPT_BATCH):
            try:
                fd, peer = accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, say: the listener goes on
                logger.warning("accepting a TLS connection failed: %s", exc)
                loop.remove_reader(listening.fileno())
                self._paused[listening] = loop.call_later(_ACCEPT_PAUSE, self._resume, listening)
                return
            self._hand_over(loop, _Accepted(family, socket.SOCK_STREAM, proto, fd), peer)

    def _resume(self, listening: socket.socket) -> None:
        del self._paused[listening]
        self._watch(listening)

    def _hand_over(self, loop: asyncio.AbstractEventLoop, conn: socket.socket,
                   peer: object) -> None:
        """Start the handshake of an accepted connection: the loop's own
        coroutine as the task (no wrapper of ours per connection), its
        outcome seen by ``_handshaken``.  (The loop makes the socket
        non-blocking and sets TCP_NODELAY itself, as asyncio's and
        uvloop's transports do.)"""
        task = loop.create_task(loop.connect_accepted_socket(
            functools.partial(self._protocol, peer), conn, ssl=self._context(),
            ssl_handshake_timeout=self.handshake_timeout))
        self._handshakes[task] = (conn, peer)
        task.add_done_callback(self._handshaken)

    def _handshaken(self, task: asyncio.Task[object]) -> None:
        conn, peer = self._handshakes.pop(task)
        if task.cancelled():
            conn.close()
            return
        exc = task.exception()
        if exc is None:
            return
        conn.close()  # every failure closes this connection only
        self.failures += 1
        who = peer[0] if isinstance(peer, tuple) else "a client"
        logger.info("TLS handshake with %s failed: %s", who, handshake_failure(exc))

    def close(self) -> None:
        """Stop accepting and close the listening sockets; handshakes
        under way are abandoned (their connections closed)."""
        for task in self._handshakes:
            task.cancel()
        for listening in self._sockets:
            pause = self._paused.pop(listening, None)
            if pause is not None:
                pause.cancel()
            elif self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(listening.fileno())
            listening.close()
        self._sockets = []
