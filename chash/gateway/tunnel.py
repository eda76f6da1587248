"""WebSocket tunnels: the bytes of an upgraded connection, both ways.

Once a backend has answered a WebSocket handshake with ``101 Switching
Protocols`` (the proxy routes and fails over the handshake like any
request), ``Tunnels.run`` relays the bytes both ways unchanged until either
side closes, from the connections' callbacks (``Tunnel``).  A half-close
is passed on.  Whatever arrives is written to the other side at once; when
that side falls behind (its transport's buffer over the high-water mark),
reading from the other pauses until it catches up: a slow reader holds the
sender back, and the memory of a tunnel stays bounded whatever its traffic.

A tunnel with no byte either way for ``tunnel_idle_timeout`` seconds is
closed.  The gateway closes tunnels itself in two more cases, with
WebSocket close frames between two frames of each stream
(``chash.gateway.frames``): 1012 (Service Restart) to the client when the
ring gives the tunnel's key another owner (``on_ring_change="close"``) or
its node left the ring, and 1001 (Going Away) when the gateway stops; the
backend gets 1001 in both.  Each direction first finishes the frame in
flight, however long a reader that paused takes, within
``tunnel_close_grace`` seconds; what is not done then is cut without a
frame (logged).  The ring's changes reach ``Tunnels.ring_changed`` from
whoever makes them (``Gateway.ring_changed``); nothing polls the ring.

``Tunnels`` also keeps the counts the admin listener shows: tunnels open
by node, opened by node, closed by node and reason, bytes by direction.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from chash.gateway.channel import Channel
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
    gateway knows of the two streams of frames it relays.

    The bytes are relayed from the channels' callbacks (``Channel.fast``):
    what arrives on one side is written to the other at once, with no task
    step per read.  When a side falls behind (its transport's buffer over
    the high-water mark), reading from the other side pauses until it has
    caught up (``Channel.on_writable``).

    Closed by the gateway (``close``), a tunnel goes on relaying each
    direction up to the end of the frame in flight: the client then gets
    the close frame, the backend a masked close frame of its own (1001),
    and whatever comes after is read and dropped until the other end
    answers with its close frame (or closes), when its connection closes
    once what was written has gone out.  A side that stopped reading holds
    that up, not the other; the grace bounds it all."""

    __slots__ = ("_client_eof", "_backend_eof", "_down_closed", "_done", "_idle", "_polite",
                 "_timer", "_up_closed", "backend", "boundaries", "client", "client_frames",
                 "closing", "down", "half_closed", "key", "last", "node", "reason", "up")

    def __init__(self, client: Channel, backend: Channel, node: str, key: bytes,
                 idle: float) -> None:
        self.client = client
        self.backend = backend
        self.node = node
        self.key = key
        #: The frames of the backend's stream (to the client) ...
        self.boundaries = FrameBoundaries()
        #: ... and of the client's (to the backend).
        self.client_frames = FrameBoundaries()
        #: The close code to send the client at the next frame boundary
        #: (None once sent, or when the gateway is not closing the tunnel).
        self.closing: int | None = None
        #: Why the tunnel ended (None while it runs).
        self.reason: str | None = None
        #: The side that closed its sending side first, if one did.
        self.half_closed: str | None = None
        #: When the last byte went either way (the loop's clock).
        self.last = client.loop.time()
        #: Bytes relayed so far: client to backend, backend to client.
        self.up = self.down = 0
        self._idle = idle
        self._timer: asyncio.TimerHandle | None = None
        self._done: asyncio.Future[None] = client.loop.create_future()
        # Closing by the gateway: under way; each direction's close frame
        # written (or not needed); an EOF passed on to the client, the backend.
        self._polite = self._down_closed = self._up_closed = False
        self._client_eof = self._backend_eof = False

    # -- running ---------------------------------------------------------------

    def start(self) -> asyncio.Future[None]:
        """Relay from the callbacks (bytes already buffered first); a
        future done when the tunnel has ended."""
        client, backend = self.client, self.backend
        client.fast, backend.fast = self._from_client, self._from_backend
        client.on_writable, backend.on_writable = self._client_writable, self._backend_writable
        self._arm(self._idle)
        self._from_backend(backend)
        if not self._done.done():
            self._from_client(client)
        return self._done

    def _from_client(self, client: Channel) -> None:
        backend = self.backend
        if client.buffered:
            data = client.take(client.buffered)
            self.last = client.loop.time()
            frames = self.client_frames
            had_close = frames.saw_close
            first = frames.feed(data)
            if not self._up_closed:  # (after it, read to see the client's answer; dropped)
                ends = self._polite and first >= 0
                if ends:
                    data = data[:first]  # the frame in flight, and no more
                self.up += len(data)
                if backend.lost:
                    if not self._polite:
                        self.end("backend")
                        return
                else:
                    assert backend.transport is not None
                    backend.transport.write(data)
                    if ends:
                        self._close_up(had_close)
                    elif backend.write_paused and not client.lost:
                        assert client.transport is not None
                        client.transport.pause_reading()  # until the backend catches up
        if self._polite:
            self._settle()
        elif client.peer_closed:
            self._closed_by("client", client, backend)

    def _from_backend(self, backend: Channel) -> None:
        client = self.client
        if backend.buffered:
            data = backend.take(backend.buffered)
            self.last = backend.loop.time()
            had_close = self.boundaries.saw_close
            first = self.boundaries.feed(data)
            if not self._down_closed:  # (after it, read to see the backend's answer; dropped)
                ends = self._polite and first >= 0
                if ends:
                    data = data[:first]
                self.down += len(data)
                if client.lost:
                    if not self._polite:
                        self.end("client")
                        return
                else:
                    assert client.transport is not None
                    client.transport.write(data)
                    if ends:
                        self._close_down(had_close)
                    elif client.write_paused and not backend.lost:
                        assert backend.transport is not None
                        backend.transport.pause_reading()  # until the client catches up
        if self._polite:
            self._settle()
        elif backend.peer_closed:
            self._closed_by("backend", backend, client)

    def _client_writable(self) -> None:
        backend = self.backend
        if not self._done.done() and backend.transport is not None and not backend.lost:
            backend.transport.resume_reading()

    def _backend_writable(self) -> None:
        client = self.client
        if not self._done.done() and client.transport is not None and not client.lost:
            client.transport.resume_reading()

    def _closed_by(self, side: str, source: Channel, sink: Channel) -> None:
        """``source`` sent its end (or went away): pass the half-close on,
        or end the tunnel when both sides have closed (or one is gone)."""
        if self._done.done():
            return
        if self.half_closed is None:
            # Closing after its close frame, the backend ends the
            # WebSocket; without one, it went away.
            self.half_closed = "closed" if self.boundaries.saw_close else side
        source.fast = None  # nothing more comes from it
        if source.lost or sink.lost or sink.transport is None \
                or not sink.transport.can_write_eof():
            self.end(side)  # gone, not half-closed
        elif sink.peer_closed:  # both sides have closed theirs
            self.end(self.half_closed)
        else:
            sink.transport.write_eof()  # the half-close, passed on
            if sink is self.client:
                self._client_eof = True
            else:
                self._backend_eof = True

    def _arm(self, delay: float) -> None:
        self._timer = self.client.loop.call_later(delay, self._check_idle)

    def _check_idle(self) -> None:
        self._timer = None
        if self._done.done():
            return
        left = self.last + self._idle - self.client.loop.time()
        if left <= 0:
            self.end("idle")
        else:
            self._arm(left)

    # -- ending ----------------------------------------------------------------

    def end(self, reason: str) -> None:
        """Close both sides now (the first reason given is kept)."""
        if self.reason is None:
            self.reason = reason
        self.closing = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        client, backend = self.client, self.backend
        client.fast = backend.fast = None
        client.on_writable = backend.on_writable = None
        client.close()
        backend.close()
        if not self._done.done():
            self._done.set_result(None)

    def close(self, code: int, reason: str, grace: float) -> None:
        """Close the tunnel politely: send the client a close frame with
        ``code`` at the next frame boundary of the backend's stream (and
        the backend a close frame, 1001, at the next of the client's),
        then close each side once it has answered; after ``grace``
        seconds, cut whatever is left without a frame (logged when the
        client's close frame did not go out)."""
        if self.reason is not None or self._done.done():
            return
        self.reason = reason
        self.closing = code
        self._polite = True
        # Hear from both sides again (a side that half-closed was let go):
        # their ends, and that their connections are gone, settle the close.
        self.client.fast, self.backend.fast = self._from_client, self._from_backend
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.client.loop.call_later(grace, self._cut, grace)
        self._settle()

    def _close_down(self, had_close: bool) -> None:
        """The backend's stream is at a frame boundary: the client's close
        frame (unless ``had_close``: the backend's own went before it); from now on the
        backend's bytes are read and dropped."""
        self._down_closed = True
        code, self.closing = self.closing, None
        client, backend = self.client, self.backend
        if code is not None and not had_close and not self._client_eof:
            try:
                client.write(close_frame(code))
            except ConnectionError:
                pass
        if backend.transport is not None and not backend.lost:
            backend.transport.resume_reading()

    def _close_up(self, had_close: bool) -> None:
        """The client's stream is at a frame boundary: the backend's close
        frame (unless ``had_close``: the client's own went before it); from now on the
        client's bytes are read and dropped."""
        self._up_closed = True
        client, backend = self.client, self.backend
        if not had_close and not self._backend_eof:
            try:
                backend.write(close_frame(GOING_AWAY, os.urandom(4)))
            except ConnectionError:
                pass
        if client.transport is not None and not client.lost:
            client.transport.resume_reading()

    def _settle(self) -> None:
        """Closing politely: write the close frames a boundary allows,
        close each side whose end answered, end once both are gone."""
        if self._done.done():
            return
        client, backend = self.client, self.backend
        if not self._down_closed:
            if self.boundaries.at_boundary:
                self._close_down(self.boundaries.saw_close)
            elif backend.peer_closed:
                # The backend's stream ended mid-frame: no boundary will come.
                self._cut(None)
                return
        if not self._up_closed and (self.client_frames.at_boundary or client.peer_closed):
            # (A client stream that ended mid-frame gets no frame after it.)
            self._close_up(self.client_frames.saw_close or not self.client_frames.at_boundary)
        if client.closed and not self._down_closed:  # gone: nobody to tell
            self._finish()
            backend.abort()
            return
        if self._down_closed and not client.lost and (
                client.peer_closed or self.client_frames.saw_close):
            client.close()  # the client answered: once the close frame is out
        if self._up_closed and not backend.lost and (
                backend.peer_closed or self.boundaries.saw_close):
            backend.close()
        if client.closed and backend.closed:
            self._finish()

    def _finish(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        client, backend = self.client, self.backend
        client.fast = backend.fast = None
        client.on_writable = backend.on_writable = None
        if not self._done.done():
            self._done.set_result(None)

    def _cut(self, grace: float | None) -> None:
        """Close both sides at once, logging when the client's close frame
        has not gone out whole: the grace ran out (``grace``), or the
        backend's stream ended mid-frame (None)."""
        self._timer = None
        if self._done.done():
            return
        client = self.client
        unsent = not self._down_closed or (
            not client.closed and client.transport is not None
            and client.transport.get_write_buffer_size() > 0)
        if unsent and not client.closed:
            logger.warning(
                "WebSocket tunnel to %s cut without its close frame (%s): %s",
                self.node, self.reason,
                f"no frame boundary, or a client not reading, within {grace:g} s"
                if grace is not None else "the backend's stream ended mid-frame",
                extra={"node": self.node})
        self._finish()
        client.abort()
        self.backend.abort()


class Tunnels:
    """Every tunnel of one gateway process: how they run, and their counts."""

    def __init__(self, config: GatewayConfig,
                 owner: Callable[[bytes], str | None] | None = None,
                 in_ring: Callable[[str], bool] | None = None) -> None:
        """``owner(key)``: the node the ring gives ``key`` now (None: no
        node); ``in_ring(node)``: whether ``node`` is in the ring.  Without
        both, tunnels ignore the ring.  Whoever changes the ring calls
        ``ring_changed`` after (the gateway does, on each change it makes
        or hears of)."""
        self._config = config
        self._owner = owner
        self._in_ring = in_ring
        self.live: set[Tunnel] = set()
        self._open: dict[str, int] = {}
        self._opened: dict[str, int] = {}
        self._closed: dict[tuple[str, str], int] = {}
        self._bytes = dict.fromkeys(DIRECTIONS, 0)
        #: Handshakes under way (kept by the proxy), which count against the cap.
        self.pending = 0

    def reconfigure(self, config: GatewayConfig) -> None:
        """Take the tunnel settings of ``config`` (a reload): the cap and the
        closes from now on, and the idle timeout of the tunnels opened after."""
        self._config = config

    @property
    def full(self) -> bool:
        """Whether ``max_tunnels`` are open or being opened (a handshake is
        answered 503)."""
        most = self._config.max_tunnels
        return bool(most) and len(self.live) + self.pending >= most

    def counts(self) -> TunnelCounts:
        """The counters now."""
        moved = dict(self._bytes)  # the tunnels ended; the live ones' bytes added
        for tunnel in self.live:
            moved[DIRECTIONS[0]] += tunnel.up
            moved[DIRECTIONS[1]] += tunnel.down
        return TunnelCounts(dict(self._open), dict(self._opened), dict(self._closed), moved)

    async def run(self, client: Channel, backend: Channel, node: str, key: bytes,
                  head: bytes) -> None:
        """Send the client ``head`` (the backend's 101), then relay bytes
        both ways until the tunnel ends; both connections are closed after."""
        tunnel = Tunnel(client, backend, node, key, self._config.tunnel_idle_timeout)
        self.live.add(tunnel)
        self._open[node] = self._open.get(node, 0) + 1
        self._opened[node] = self._opened.get(node, 0) + 1
        try:
            client.write(head)
            await tunnel.start()
        except ConnectionError:
            tunnel.end("client")  # gone before its 101 could be written
        except BaseException:
            tunnel.end("stop")
            raise
        finally:
            tunnel.end("client")  # a no-op for the reason when one was given
            self.live.discard(tunnel)
            self._bytes[DIRECTIONS[0]] += tunnel.up
            self._bytes[DIRECTIONS[1]] += tunnel.down
            self._open[node] -= 1
            reason = tunnel.reason or "client"
            self._closed[node, reason] = self._closed.get((node, reason), 0) + 1

    # -- closing by the gateway ------------------------------------------------

    def close_all(self, code: int = GOING_AWAY, reason: str = "stop") -> None:
        """Close every tunnel with ``code`` at a frame boundary (a stop)."""
        for tunnel in list(self.live):
            tunnel.close(code, reason, self._config.tunnel_close_grace)

    def ring_changed(self) -> None:
        """The ring changed: close the tunnels it moved, with
        ``on_ring_change="close"`` those whose key has another owner,
        always those whose node left the ring (1012, so that their clients
        reconnect).  Called right after each change, on the loop's thread;
        a call with nothing moved closes nothing."""
        owner, in_ring = self._owner, self._in_ring
        if owner is None or in_ring is None:
            return
        move = self._config.on_ring_change == "close"
        for tunnel in list(self.live):
            if (move and owner(tunnel.key) != tunnel.node) or not in_ring(tunnel.node):
                tunnel.close(SERVICE_RESTART, "ring_change", self._config.tunnel_close_grace)
