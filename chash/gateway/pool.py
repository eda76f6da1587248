"""Keep-alive connections to one backend: ``Pool``, at most ``limit`` open.

A pool of an ``https://`` backend keeps its TLS connections: a request on
a reused one costs no handshake.  Every backend has a pool of its own, so that a hung backend holding all of
its connections cannot hold up requests to the others.  Waiting for a free
connection is bounded by the request's deadline (``NoSlot`` after it).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

from chash.gateway.channel import Channel
from chash.gateway.upstream import open_channel, upstream_of

__all__ = ["NoSlot", "Pool"]


class NoSlot(Exception):
    """No pooled connection freed up before the request's deadline."""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(NoSlot())


class Pool:
    """Keep-alive connections to one backend, at most ``limit`` open."""

    def __init__(self, address: str, limit: int, tls: ssl.SSLContext | None = None) -> None:
        """A pool for ``address`` (``host:port`` or ``https://host:port``,
        whose connections ``tls`` verifies)."""
        self.upstream = upstream = upstream_of(address)
        self.host = upstream.host
        self.port = upstream.port
        #: The address as a request's Host field names it.
        self.authority = upstream.authority
        self.tls = tls
        self.limit = limit
        self.idle: list[Channel] = []
        self.open = 0
        self.waiters: deque[asyncio.Future[None]] = deque()
        #: Set by ``close``: connections given back are closed, not pooled.
        self.closed = False

    async def acquire(self, connect_timeout: float, deadline: float,
                      fresh: bool = False) -> tuple[Channel, bool]:
        """A connection and whether it was reused (never, if ``fresh``);
        NoSlot, TimeoutError or OSError when none could be had (nothing was
        sent)."""
        loop = asyncio.get_running_loop()
        while True:
            idle = None if fresh else self.take_idle()
            if idle is not None:
                return idle, True
            if not self.limit or self.open < self.limit:
                break
            waiter = loop.create_future()
            self.waiters.append(waiter)
            handle = loop.call_at(deadline, _expire, waiter)
            try:
                await waiter
            finally:
                handle.cancel()
                if waiter in self.waiters:
                    self.waiters.remove(waiter)
        self.open += 1
        try:
            timeout = min(connect_timeout, max(0.0, deadline - loop.time()))
            channel = await open_channel(self.upstream, self.tls, timeout)
        except BaseException:
            self.open -= 1
            self._wake()
            raise
        return channel, False

    def take_idle(self) -> Channel | None:
        """An idle connection that still looks sound, or None (closing
        those found gone, closed by the backend or with unread bytes)."""
        while self.idle:
            channel = self.idle.pop()
            if channel.peer_closed or channel.buffered or channel.lost:
                self.open -= 1
                channel.close()
                continue
            return channel
        return None

    def release(self, channel: Channel, reuse: bool) -> None:
        """Give ``channel`` back: pooled if ``reuse`` and still sound."""
        if reuse and not channel.lost and not channel.buffered and not self.closed:
            self.idle.append(channel)
        else:
            self.open -= 1
            channel.close()
        self._wake()

    def _wake(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        """Close every idle connection, and each one in use when it is given
        back."""
        self.closed = True
        for channel in self.idle:
            channel.close()
        self.open -= len(self.idle)
        self.idle.clear()
