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

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

__all__ = ["TlsListener", "handshake_failure"]

logger = logging.getLogger("chash.gateway")

#: Connections accepted in one go before the loop runs other callbacks.
_ACCEPT_BATCH = 64


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

    ``context``: called at each accept for the context to handshake with;
    ``handshake_timeout``: seconds a handshake may take."""

    def __init__(self, protocol: Callable[[], asyncio.BaseProtocol],
                 context: Callable[[], ssl.SSLContext], handshake_timeout: float) -> None:
        self._protocol = protocol
        self._context = context
        #: Seconds a handshake may take (a reload may change it).
        self.handshake_timeout = handshake_timeout
        self._sockets: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
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
        self._accepting = [loop.create_task(self._accept(s)) for s in sockets]

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        # Read once, not per connection: socket.family makes an enum each time.
        tcp = listening.family in (socket.AF_INET, socket.AF_INET6)
        while True:
            try:
                conn, peer = await loop.sock_accept(listening)
            except OSError as exc:  # out of descriptors, say: the listener goes on
                logger.warning("accepting a TLS connection failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            self._hand_over(loop, conn, peer, tcp)
            # What else is waiting, without a trip through the loop each.
            for _ in range(_ACCEPT_BATCH):
                try:
                    conn, peer = listening.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
                self._hand_over(loop, conn, peer, tcp)

    def _hand_over(self, loop: asyncio.AbstractEventLoop, conn: socket.socket, peer: object,
                   tcp: bool) -> None:
        """Start the handshake of an accepted connection: the loop's own
        coroutine as the task (no wrapper of ours per connection), its
        outcome seen by ``_handshaken``."""
        conn.setblocking(False)
        if tcp:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = loop.create_task(loop.connect_accepted_socket(
            self._protocol, conn, ssl=self._context(),
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
        for task in (*self._accepting, *self._handshakes):
            task.cancel()
        self._accepting = []
        for listening in self._sockets:
            listening.close()
        self._sockets = []
