"""The one-pass path for plain requests, run from the connections' callbacks.

A keep-alive client's common request has no body, its key's owner has an
idle pooled connection, and the answer comes back at once, whole, with a
final status the policy lets through.  ``Express`` serves such requests
from the channels' ``data_received`` callbacks (``Channel.fast``), before
the connection has a task (``begin``) or while its task is parked
(``park``): no task step, future or coroutine frame per request, and a
connection whose requests are all plain (a TLS one closed after its answer,
say) never has a task.  Everything else is handed to the task, started
then if need be, as it stands, through ``Express.take_over``: a head still
arriving, a refused head, a request with a body or without an idle
connection, an answer that is not plain, late or cut.  The task then runs the general path (``Proxy.serve_request``,
or ``Proxy.forward`` from an answer not read yet), so the outcome is the
general path's.

A callback never raises: uvloop would close the transport.  Whatever fails
inside one is handed to the task, which meets the failure again and deals
with it as it always does.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Final, Protocol

from chash.gateway.channel import BLOCK, Channel, ReadTimeout
from chash.gateway.config import GatewayConfig
from chash.gateway.heads import HttpError, RequestHead, ResponseHead, parse_response_head
from chash.gateway.messages import Body, backend_head, client_head, request_start
from chash.gateway.parser import PENDING, RequestParser
from chash.gateway.pool import Pool
from chash.gateway.tls import request_key
from chash.metrics import RouteCounters
from chash.routers import Ranking
from chash.routing.keys import KeyRule

__all__ = ["CLOSE", "Express", "ExpressHost", "Handoff", "Refuse", "Relayed", "Resume",
           "Sent", "Serve", "plain_answer"]

#: A request sent already on the one-pass path: (the pooled connection it
#: went on, when the wait for its answer ends, how long that wait is).
Sent = tuple[Channel, float, float]
#: What ``plain_answer`` remembers of a backend's head: the client's head,
#: its body's framing, whether the client connection goes on, the parsed head.
Relayed = tuple[bytes, Body, bool, ResponseHead]
#: Response heads remembered by ``plain_answer`` (then forgotten at once).
_MEMO = 512


@dataclass(frozen=True, slots=True)
class Serve:
    """Hand-off: a parsed request for the general path."""

    request: RequestHead


@dataclass(frozen=True, slots=True)
class Resume:
    """Hand-off: a request sent on the one-pass path whose answer the
    general path reads (and fails over from)."""

    request: RequestHead
    key: bytes
    nodes: list[str]
    upstream_head: bytes
    deadline: float
    sent: Sent


@dataclass(frozen=True, slots=True)
class Refuse:
    """Hand-off: a head to refuse with ``status``, then close."""

    status: int
    reason: str


class _Close:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CLOSE"


#: Hand-off: answered; the connection ends.
CLOSE: Final = _Close()
#: What the task is to do next (``Express.take_over``); None: read the
#: next request itself.
Handoff = Serve | Resume | Refuse | _Close | None


class ExpressHost(Protocol):
    """What ``Express`` needs of the proxy it serves for (``Proxy``)."""

    config: GatewayConfig
    key_rule: KeyRule
    router: Ranking
    pools: dict[str, Pool]
    in_flight: dict[str, int]
    """``{node: requests in flight}``, kept by whoever sends them."""
    counters: RouteCounters
    closing: bool
    """Set when the gateway stops: a connection ends after its request."""
    relayed: dict[tuple[bytes, str, bytes, bool, str], Relayed]
    """``plain_answer``'s memo of backend heads, shared by the connections."""

    def node_line(self, node: str) -> bytes | None:
        """The header line naming the node that answered, if configured."""

    def succeeded(self, node: str) -> None:
        """Report a request ``node`` answered."""


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

    def begin(self, idle_timeout: float) -> None:
        """Serve a new connection (from ``connection_made``: no byte has
        come yet) from its callbacks before it has a task: whatever they
        cannot finish (the end, ``idle_timeout`` s without a request, a
        hand-off) wakes the channel, whose ``on_wake`` starts the task,
        which then carries on with ``take_over``'s hand-off."""
        self._client.fast = self._on_client
        self._client.expect(idle_timeout)

    @property
    def busy(self) -> bool:
        """Whether a request is in progress here (the task must not read)."""
        return self._state is not _State.IDLE

    async def park(self, idle_timeout: float) -> Handoff:
        """Let the callbacks serve the connection until they need the task;
        then what the task is to do (``Handoff``).  ReadTimeout after
        ``idle_timeout`` s without a request."""
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
        if request.content_length or request.chunked or request.upgrade is not None:
            return False
        key = request_key(proxy.key_rule, request, self._client.tls_subject)
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
        upstream_head = backend_head(request, self._remote, client.secure)
        self._state = _State.SENT
        client.busy = True
        self._request, self._key, self._nodes, self._node = request, key, nodes, node
        self._pool, self._conn, self._upstream_head = pool, conn, upstream_head
        self._deadline, self._wait, self._wait_end = now + config.deadline, wait, now + wait
        proxy.in_flight[node] = proxy.in_flight.get(node, 0) + 1
        # take_idle found the connection sound: the transport's own write.
        conn.transport.write(request_start(request, pool.authority) + upstream_head)
        conn.fast = self._on_backend
        conn.expect(wait)
        # The client's idle time does not run while its request is served.
        client.extend(wait + config.idle_timeout)
        return True

    def take_over(self) -> Handoff:
        """What the task does with the connection as the callbacks left it
        (see ``park``); the path is idle afterwards."""
        state, self._state = self._state, _State.IDLE
        if state is _State.SENT:
            conn, request = self._conn, self._request
            assert conn is not None and request is not None
            conn.fast = None
            self._proxy.in_flight[self._node] -= 1
            handoff: Handoff = Resume(request, self._key, self._nodes, self._upstream_head,
                                      self._deadline, (conn, self._wait_end, self._wait))
            self._forget()
            return handoff
        if state is _State.PARSED:
            request = self._request
            assert request is not None
            self._forget()
            return Serve(request)
        if state is _State.REFUSED:
            error, self._error = self._error, None
            assert error is not None
            return Refuse(error.status, error.reason)
        if state is _State.CLOSE:
            return CLOSE
        return None

    # -- callbacks ---------------------------------------------------------

    def _on_client(self, client: Channel) -> None:
        """Bytes or the end arrived from the client."""
        if client.peer_closed or client.lost:
            client.wake()  # the task sees the end (and any request in progress)
        elif self._state is _State.IDLE:
            if client.expired and not client.buffered:
                # Idle too long (before the connection has a task: a task's
                # own wait ends with ReadTimeout instead): it ends.
                self._state = _State.CLOSE
                client.wake()
                return
            self._serve_buffered()
        # else: the bytes wait in the buffer until the answer has gone

    def _serve_buffered(self) -> None:
        """Start the next buffered request, or hand over to the task."""
        client = self._client
        try:
            request = self._parser.next_request(client, self._proxy.config.max_header_size)
        except HttpError as exc:
            self._state, self._error = _State.REFUSED, exc
            client.wake()
            return
        if request is None:
            return
        if request is PENDING:  # a head still arriving: the task's, with its timeout
            client.wake()
            return
        assert isinstance(request, RequestHead)
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
            answered = plain_answer(proxy, client, request, node, conn, end)
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


def plain_answer(host: ExpressHost, client: Channel, request: RequestHead, node: str,
                 conn: Channel, end: int) -> tuple[bool, bool] | None:
    """Relay the answer buffered on ``conn`` (its head ``end`` bytes
    long) if it is a plain one: ``(reuse the backend connection, keep
    the client connection)``; else None, and nothing was read."""
    config = host.config
    if end < 0 or end > BLOCK or client.peer_closed or client.lost:
        return None
    assert client.transport is not None
    raw = conn.peek(end)
    # Backends repeat their heads (they differ by a Date field a second
    # or so): what the client gets is a function of the head's bytes,
    # the request's method, version and keep-alive and the node, so it
    # is remembered rather than parsed and built again.
    memo_key = (raw, request.method, request.version, request.keep_alive, node)
    memo = host.relayed
    relayed = memo.get(memo_key)
    if relayed is None:
        response = parse_response_head(raw)
        status = response.status
        if status < 200 or status in config.fail_on_status or \
                status in config.retry_statuses:
            return None
        relayed = (*client_head(request, response, host.node_line(node)), response)
        if len(memo) >= _MEMO:
            memo.clear()
        memo[memo_key] = relayed
    head, body, keep, response = relayed
    if body is Body.LENGTH:
        length = response.content_length
        assert length is not None
        if length > BLOCK or conn.buffered < end + length:
            return None
        client.transport.write(head + conn.take(end + length)[end:])
    elif body is Body.NONE:
        conn.take(end)
        client.transport.write(head)
    else:
        return None
    return response.keep_alive, keep
