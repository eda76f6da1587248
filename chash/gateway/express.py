"""The one-pass path for plain requests, run from the connections' callbacks.

A keep-alive client's common request has no body, its key's owner has an
idle pooled connection, and the answer comes back at once, whole, with a
final status the policy lets through.  ``Express`` serves such requests
from the channels' ``data_received`` callbacks (``Channel.fast``) while the
connection's task stays parked: no task step, future or coroutine frame per
request.  Everything else is handed to the task, as it stands, through
``Express.take_over``: a head still arriving, a refused head, a request
with a body or without an idle connection, an answer that is not plain,
late or cut.  The task then runs the general path (``Proxy.serve_request``,
or ``Proxy.forward`` from an answer not read yet), so the outcome is the
general path's.

A callback never raises: uvloop would close the transport.  Whatever fails
inside one is handed to the task, which meets the failure again and deals
with it as it always does.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Sequence
from typing import Literal, Protocol

from chash.gateway.channel import Channel, ReadTimeout
from chash.gateway.config import GatewayConfig
from chash.gateway.heads import HttpError, RequestHead
from chash.gateway.messages import backend_head
from chash.gateway.parser import RequestParser
from chash.gateway.pool import Pool
from chash.metrics import RouteCounters
from chash.routing.keys import KeyRule

__all__ = ["Express", "ExpressHost"]


class _Routes(Protocol):
    def get_preference_list(self, key: bytes, n: int, /) -> list[str]: ...


class ExpressHost(Protocol):
    """What ``Express`` needs of the proxy it serves for (``Proxy``)."""

    config: GatewayConfig
    key_rule: KeyRule
    router: _Routes
    pools: dict[str, Pool]
    in_flight: dict[str, int]
    """``{node: requests in flight}``, kept by whoever sends them."""
    counters: RouteCounters
    closing: bool
    """Set when the gateway stops: a connection ends after its request."""

    def plain_answer(self, client: Channel, request: RequestHead, node: str, conn: Channel,
                     end: int) -> tuple[bool, bool] | None:
        """Relay a plain answer buffered on ``conn``; see ``Proxy.plain_answer``."""

    def succeeded(self, node: str) -> None:
        """Report a request ``node`` answered."""

    def forward(self, client: Channel, request: RequestHead, key: bytes, nodes: Sequence[str],
                body: bytes | None, upstream_head: bytes, deadline: float,
                first: tuple[Channel, float, float] | None = None) -> Awaitable[bool]:
        """The general path from an attempt begun; see ``Proxy.forward``."""

    def serve_request(self, client: Channel, request: RequestHead,
                      remote: str) -> Awaitable[bool]:
        """The general path for a parsed request; see ``Proxy.serve_request``."""

    def send_last(self, client: Channel, status: int, message: str) -> None:
        """Answer with the gateway's own message before closing."""

logger = logging.getLogger("chash.gateway")


class _State(enum.Enum):
    IDLE = "idle"            # nothing in progress; the task may read
    SENT = "sent"            # a request went to a backend, its answer is awaited
    PARSED = "parsed"        # for the task: a request the general path serves
    REFUSED = "refused"      # for the task: a head to refuse (``_error``)
    CLOSE = "close"          # for the task: answered; the connection ends


class Express:
    """The one-pass path of one client connection (see the module docstring)."""

    __slots__ = ("_client", "_conn", "_deadline", "_error", "_key", "_node", "_nodes",
                 "_parser", "_pool", "_proxy", "_remote", "_request", "_state",
                 "_upstream_head", "_wait", "_wait_end")

    def __init__(self, proxy: ExpressHost, client: Channel, remote: str,
                 parser: RequestParser) -> None:
        self._proxy = proxy
        self._client = client
        self._remote = remote
        self._parser = parser
        self._state = _State.IDLE
        self._request: RequestHead | None = None
        self._error: HttpError | None = None
        self._key = b""
        self._nodes: list[str] = []
        self._node = ""
        self._pool: Pool | None = None
        self._conn: Channel | None = None
        self._upstream_head = b""
        self._deadline = self._wait = self._wait_end = 0.0

    @property
    def busy(self) -> bool:
        """Whether a request is in progress here (the task must not read)."""
        return self._state is not _State.IDLE

    async def park(self, idle_timeout: float) -> Awaitable[bool] | Literal[False] | None:
        """Let the callbacks serve the connection until they need the task;
        then what the task is to do: None to read the next request itself,
        False to end the connection, or an awaitable giving whether it may
        go on.  ReadTimeout after ``idle_timeout`` s without a request."""
        client = self._client
        if not self.busy and (client.peer_closed or client.lost):
            return None  # the task reads the end
        client.fast = self._on_client
        try:
            if not self.busy:
                self._serve_buffered()
            if client.fast is not None:
                await client.park(idle_timeout)
        except ReadTimeout:
            if not self.busy:
                raise
        except BaseException:
            self._abandon()  # cancelled: the backend connection is not reused
            raise
        finally:
            client.fast = None
        return self.take_over()

    def start(self, request: RequestHead) -> bool:
        """Send ``request`` on the one-pass path if it is a plain one;
        whether it went (else nothing was done)."""
        proxy = self._proxy
        config = proxy.config
        if request.content_length or request.chunked:
            return False
        key = proxy.key_rule.extract(request)
        nodes = None if key is None else proxy.router.get_preference_list(key, config.attempts)
        if not nodes:
            return False
        node = nodes[0]
        pool = proxy.pools.get(node)
        conn = None if pool is None else pool.take_idle()
        if conn is None or key is None:
            return False
        assert pool is not None and conn.transport is not None
        client = self._client
        now = client.loop.time()
        wait = max(min(config.read_timeout, config.deadline), 0.001)
        upstream_head = backend_head(request, self._remote)
        self._state = _State.SENT
        client.busy = True
        self._request, self._key, self._nodes, self._node = request, key, nodes, node
        self._pool, self._conn, self._upstream_head = pool, conn, upstream_head
        self._deadline, self._wait, self._wait_end = now + config.deadline, wait, now + wait
        proxy.in_flight[node] = proxy.in_flight.get(node, 0) + 1
        # take_idle found the connection sound: the transport's own write.
        conn.transport.write(b"%s %s HTTP/1.1\r\nHost: %s\r\n%s" % (
            request.method.encode(), request.target, pool.authority, upstream_head))
        conn.fast = self._on_backend
        conn.expect(wait)
        # The client's idle time does not run while its request is served.
        client.extend(wait + config.idle_timeout)
        return True

    def take_over(self) -> Awaitable[bool] | Literal[False] | None:
        """What the task does with the connection as the callbacks left it
        (see ``park``); the path is idle afterwards."""
        state, self._state = self._state, _State.IDLE
        proxy, client = self._proxy, self._client
        if state is _State.SENT:
            conn, request = self._conn, self._request
            assert conn is not None and request is not None
            conn.fast = None
            proxy.in_flight[self._node] -= 1
            first = (conn, self._wait_end, self._wait)
            key, nodes, upstream_head = self._key, self._nodes, self._upstream_head
            self._forget()
            return proxy.forward(client, request, key, nodes, b"", upstream_head,
                                 self._deadline, first)
        if state is _State.PARSED:
            request = self._request
            assert request is not None
            self._forget()
            return proxy.serve_request(client, request, self._remote)
        if state is _State.REFUSED:
            error, self._error = self._error, None
            assert error is not None
            proxy.send_last(client, error.status, error.reason)
            return False
        if state is _State.CLOSE:
            return False
        return None

    # -- callbacks ---------------------------------------------------------

    def _on_client(self, client: Channel) -> None:
        """Bytes or the end arrived from the client."""
        if client.peer_closed or client.lost:
            client.wake()  # the task sees the end (and any request in progress)
        elif self._state is _State.IDLE:
            self._serve_buffered()
        # else: the bytes wait in the buffer until the answer has gone

    def _serve_buffered(self) -> None:
        """Start the next buffered request, or hand over to the task."""
        client = self._client
        head = client.next_head(self._proxy.config.max_header_size)
        if head is None:
            return
        if not head:  # a head still arriving, or too large: the task's
            client.wake()
            return
        try:
            request = self._parser.parse(head)
        except HttpError as exc:
            self._state, self._error = _State.REFUSED, exc
            client.wake()
            return
        try:
            if self.start(request):
                return
        except Exception:
            logger.exception("one-pass path failed; the general path takes over")
            if self.busy:
                client.wake()
                return
        self._state, self._request = _State.PARSED, request
        client.wake()

    def _on_backend(self, conn: Channel) -> None:
        """Bytes, the end or the deadline came on the backend connection."""
        if conn is not self._conn or self._state is not _State.SENT:
            conn.fast = None
            return
        end = conn.head_end()
        if end < 0 and not (conn.peer_closed or conn.lost or conn.expired):
            return  # the rest of the head is on its way
        proxy, client, node = self._proxy, self._client, self._node
        request, pool = self._request, self._pool
        assert request is not None and pool is not None
        try:
            answered = proxy.plain_answer(client, request, node, conn, end)
        except (ReadTimeout, HttpError, ConnectionError):
            answered = None  # the general path reads it again and says why
        except Exception:
            logger.exception("one-pass path failed; the general path takes over")
            answered = None
        if answered is None:
            client.wake()
            return
        reuse, keep = answered
        conn.fast = None
        proxy.in_flight[node] -= 1
        # Done: the references left behind are replaced by the next request.
        self._state = _State.IDLE
        client.busy = False
        try:
            proxy.succeeded(node)
            pool.release(conn, reuse)
            proxy.counters.routed(node, "ok", node)
        except Exception:
            logger.exception("counting a one-pass answer failed")
        if not keep or proxy.closing:
            self._state = _State.CLOSE
            client.wake()
            return
        client.extend(proxy.config.idle_timeout)
        self._serve_buffered()

    def _abandon(self) -> None:
        """Drop a request in progress: its backend connection is closed."""
        if self._state is _State.SENT and self._conn is not None and self._pool is not None:
            self._conn.fast = None
            self._proxy.in_flight[self._node] -= 1
            self._pool.release(self._conn, False)
        self._state = _State.IDLE
        self._client.busy = False
        self._forget()

    def _forget(self) -> None:
        self._request = self._pool = self._conn = None
        self._nodes = []
        self._upstream_head = self._key = b""
