"""WebSocket tunnels: the bytes of an upgraded connection, both ways.

Once a backend has answered a WebSocket handshake with ``101 Switching
Protocols`` (the proxy routes and fails over the handshake like any
request), ``Tunnels.run`` relays the bytes both ways unchanged until either
side closes.  A half-close is passed on.  Each direction reads at most
``BLOCK`` bytes at a time and waits for the other side to take them before
reading more (``Channel.drain``): a slow reader pauses the other side,
and the memory of a tunnel stays bounded whatever its traffic.

A tunnel with no byte either way for ``tunnel_idle_timeout`` seconds is
closed.  The gateway closes tunnels itself in two more cases, with a
WebSocket close frame sent to the client between two of the backend's
frames (``chash.gateway.frames``): 1012 (Service Restart) when the ring
gives the tunnel's key another owner (``on_ring_change="close"``) or its
node left the ring, and 1001 (Going Away) when the gateway stops.  A
tunnel that reaches no frame boundary within ``tunnel_close_grace``
seconds is closed without the frame.

``Tunnels`` also keeps the counts the admin listener shows: tunnels open
by node, opened by node, closed by node and reason, bytes by direction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from chash.gateway.channel import BLOCK, Channel, ReadTimeout
from chash.gateway.config import GatewayConfig
from chash.gateway.frames import FrameBoundaries, close_frame

__all__ = ["CLOSE_REASONS", "DIRECTIONS", "Tunnel", "TunnelCounts", "Tunnels",
           "merge_tunnel_counts"]

logger = logging.getLogger("chash.gateway")

#: Why a tunnel ended: closed by its ends (the backend's close frame went
#: by, then both sides closed), the client or the backend went away (lost,
#: or closed without a close frame from the backend), no byte for the idle
#: timeout, the ring moved its key (or dropped its node), the gateway stopped.
CLOSE_REASONS = ("closed", "client", "backend", "idle", "ring_change", "stop")
#: The two directions of a tunnel's bytes.
DIRECTIONS = ("client_to_backend", "backend_to_client")
#: WebSocket close codes (RFC 6455 §7.4.1, IANA registry).
GOING_AWAY = 1001
SERVICE_RESTART = 1012
#: Seconds between two looks at the ring for tunnels to close.
RING_POLL = 0.2


@dataclass(frozen=True)
class TunnelCounts:
    """The tunnels' counters at one moment (what ``/metrics`` shows)."""

    open: dict[str, int]
    """``{node: tunnels open}``."""
    opened: dict[str, int]
    """``{node: tunnels opened so far}``."""
    closed: dict[tuple[str, str], int]
    """``{(node, reason): tunnels closed so far}``."""
    bytes: dict[str, int]
    """``{direction: bytes relayed so far}``."""


def merge_tunnel_counts(counts: list[TunnelCounts]) -> TunnelCounts:
    """The sum of ``counts`` (every worker's), counter by counter."""
    merged = TunnelCounts({}, {}, {}, dict.fromkeys(DIRECTIONS, 0))
    for part in counts:
        for total, some in ((merged.open, part.open), (merged.opened, part.opened),
                            (merged.bytes, part.bytes)):
            for name, count in some.items():
                total[name] = total.get(name, 0) + count
        for pair, count in part.closed.items():
            merged.closed[pair] = merged.closed.get(pair, 0) + count
    return merged


class Tunnel:
    """One upgraded connection: the client's, the backend's, and what the
    gateway knows of the stream it relays to the client."""

    __slots__ = ("_timer", "backend", "boundaries", "client", "closing", "half_closed", "key",
                 "last", "node", "reason")

    def __init__(self, client: Channel, backend: Channel, node: str, key: bytes) -> None:
        self.client = client
        self.backend = backend
        self.node = node
        self.key = key
        self.boundaries = FrameBoundaries()
        #: The close code to send the client at the next frame boundary.
        self.closing: int | None = None
        #: Why the tunnel ended (None while it runs).
        self.reason: str | None = None
        #: The side that closed its sending side first, if one did.
        self.half_closed: str | None = None
        #: When the last byte went either way (the loop's clock).
        self.last = client.loop.time()
        self._timer: asyncio.TimerHandle | None = None

    def end(self, reason: str) -> None:
        """Close both sides now (the first reason given is kept)."""
        if self.reason is None:
            self.reason = reason
        self.closing = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.client.close()
        self.backend.close()

    def close(self, code: int, reason: str, grace: float) -> None:
        """Send the client a close frame with ``code`` at the next frame
        boundary of the backend's stream, then close both sides; after
        ``grace`` seconds without a boundary, close without the frame."""
        if self.reason is not None or self.closing is not None:
            return
        self.reason = reason
        if self.boundaries.at_boundary:
            # Whatever the backend sent has been written whole: the frame
            # goes between two of its frames.
            self._send_close(code)
            return
        self.closing = code
        self._timer = self.client.loop.call_later(grace, self.end, reason)

    def _send_close(self, code: int) -> None:
        try:
            self.client.write(close_frame(code))
        except ConnectionError:
            pass
        self.end(self.reason or "stop")


class Tunnels:
    """Every tunnel of one gateway process: how they run, and their counts."""

    def __init__(self, config: GatewayConfig,
                 owner: Callable[[bytes], str | None] | None = None,
                 in_ring: Callable[[str], bool] | None = None,
                 fingerprint: Callable[[], object] | None = None) -> None:
        """``owner(key)``: the node the ring gives ``key`` now (None: no
        node); ``in_ring(node)``: whether ``node`` is in the ring;
        ``fingerprint()``: something that changes when the ring does.
        Without all three, tunnels ignore the ring."""
        self._config = config
        self._owner = owner
        self._in_ring = in_ring
        self._fingerprint = fingerprint
        self.live: set[Tunnel] = set()
        self._open: dict[str, int] = {}
        self._opened: dict[str, int] = {}
        self._closed: dict[tuple[str, str], int] = {}
        self._bytes = dict.fromkeys(DIRECTIONS, 0)
        self._watch: asyncio.Task[None] | None = None

    @property
    def full(self) -> bool:
        """Whether ``max_tunnels`` are open (a handshake is answered 503)."""
        most = self._config.max_tunnels
        return bool(most) and len(self.live) >= most

    def counts(self) -> TunnelCounts:
        """The counters now."""
        return TunnelCounts(dict(self._open), dict(self._opened), dict(self._closed),
                            dict(self._bytes))

    async def run(self, client: Channel, backend: Channel, node: str, key: bytes,
                  head: bytes) -> None:
        """Send the client ``head`` (the backend's 101), then relay bytes
        both ways until the tunnel ends; both connections are closed after."""
        tunnel = Tunnel(client, backend, node, key)
        self.live.add(tunnel)
        self._open[node] = self._open.get(node, 0) + 1
        self._opened[node] = self._opened.get(node, 0) + 1
        self._start_watch()
        down = client.loop.create_task(self._pump(tunnel, backend, client, False))
        try:
            client.write(head)
            await self._pump(tunnel, client, backend, True)
            await down
        except BaseException:
            tunnel.end("stop")
            down.cancel()
            raise
        finally:
            tunnel.end("client")  # a no-op for the reason when one was given
            self.live.discard(tunnel)
            self._open[node] -= 1
            reason = tunnel.reason or "client"
            self._closed[node, reason] = self._closed.get((node, reason), 0) + 1

    async def _pump(self, tunnel: Tunnel, source: Channel, sink: Channel, up: bool) -> None:
        """Relay ``source`` to ``sink`` until ``source`` ends (then pass
        the half-close on) or the tunnel does.  ``up``: client to backend;
        else backend to client, where frame boundaries are followed."""
        idle = self._config.tunnel_idle_timeout
        loop = source.loop
        direction = DIRECTIONS[0] if up else DIRECTIONS[1]
        boundaries = tunnel.boundaries
        try:
            while tunnel.reason is None or tunnel.closing is not None:
                try:
                    data = await source.read_some(BLOCK, max(tunnel.last + idle - loop.time(),
                                                             0.001))
                except ReadTimeout:
                    if loop.time() - tunnel.last >= idle:
                        tunnel.end("idle")
                        return
                    continue
                if not data:
                    side = "client" if up else "backend"
                    if tunnel.half_closed is None:
                        # Closing after its close frame, the backend ends
                        # the WebSocket; without one, it went away.
                        tunnel.half_closed = "closed" if boundaries.saw_close else side
                    if source.lost or sink.lost or sink.transport is None \
                            or not sink.transport.can_write_eof():
                        tunnel.end(side)  # gone, not half-closed
                    else:
                        sink.transport.write_eof()  # the half-close, passed on
                        if sink.peer_closed:  # both sides have closed theirs
                            tunnel.end(tunnel.half_closed)
                    return
                tunnel.last = loop.time()
                if not up:
                    first = boundaries.feed(data)
                    if tunnel.closing is not None and first >= 0:
                        sink.write(data[:first])
                        self._bytes[direction] += first
                        tunnel._send_close(tunnel.closing)
                        return
                self._bytes[direction] += len(data)
                sink.write(data)
                await sink.drain()
        except ConnectionError:
            tunnel.end("backend" if up else "client")  # the sink went away

    # -- closing by the gateway ------------------------------------------------

    def close_all(self, code: int = GOING_AWAY, reason: str = "stop") -> None:
        """Close every tunnel with ``code`` at a frame boundary (a stop)."""
        for tunnel in list(self.live):
            tunnel.close(code, reason, self._config.tunnel_close_grace)

    def ring_changed(self) -> None:
        """Close the tunnels the ring moved: with ``on_ring_change="close"``
        those whose key has another owner, always those whose node left
        the ring (1012, so that their clients reconnect)."""
        owner, in_ring = self._owner, self._in_ring
        if owner is None or in_ring is None:
            return
        move = self._config.on_ring_change == "close"
        for tunnel in list(self.live):
            if (move and owner(tunnel.key) != tunnel.node) or not in_ring(tunnel.node):
                tunnel.close(SERVICE_RESTART, "ring_change", self._config.tunnel_close_grace)

    def _start_watch(self) -> None:
        if self._watch is None and self._fingerprint is not None and self._owner is not None \
                and self._in_ring is not None:
            self._watch = asyncio.get_running_loop().create_task(self._follow_ring())

    async def _follow_ring(self) -> None:
        """Look at the ring's fingerprint a few times a second while
        tunnels are open; on a change, close those it moved."""
        assert self._fingerprint is not None
        seen = self._fingerprint()
        try:
            while self.live:
                await asyncio.sleep(RING_POLL)
                now = self._fingerprint()
                if now != seen:
                    seen = now
                    self.ring_changed()
        except Exception:
            logger.exception("following the ring for the tunnels failed")
        finally:
            self._watch = None

    async def stop(self) -> None:
        """Stop following the ring."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            await asyncio.wait([watch])
