"""The gateway's proxy path: answering the requests of client connections.

For each connection, ``Proxy`` reads request heads (strictly, with
``chash.gateway.parser``), takes the key, asks the ring for the preference
list and tries its nodes as ``chash.gateway.retry.next_attempt`` says, over
per-backend keep-alive pools (``chash.gateway.pool``), then relays the
answer (bodies framed by ``chash.gateway.bodies``).  Plain requests are
served from the connections' callbacks by ``chash.gateway.express`` while
the connection's task is parked; the task runs the general path for all
the rest.  It is given what it needs (the configuration, the ring, the
addresses, the counters and the health checker) and knows nothing of the
``Gateway`` that owns it.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from chash.gateway.bodies import copy_chunked, copy_exactly
from chash.gateway.channel import BLOCK, Channel, ReadTimeout
from chash.gateway.config import GatewayConfig
from chash.gateway.express import CLOSE, Express, Handoff, Refuse, Relayed, Resume, Sent, Serve
from chash.gateway.failover import Failover
from chash.gateway.heads import HttpError, RequestHead, ResponseHead, parse_response_head
from chash.gateway.llm import PromptRoutes, error_event, event_stream, relay_events
from chash.gateway.messages import (
    Body,
    backend_head,
    client_head,
    request_start,
    simple_answer,
    switching_head,
    upgrade_head,
)
from chash.gateway.parser import PENDING, RequestParser
from chash.gateway.pool import NoSlot, Pool
from chash.gateway.retry import Outcome
from chash.gateway.tls import request_key
from chash.gateway.tracing import AttemptTracer
from chash.gateway.tunnel import Tunnels
from chash.gateway.upstream import BackendTls, open_channel, upstream_of
from chash.metrics import RouteCounters
from chash.routers import Ranking

__all__ = ["HealthReports", "Proxy", "Routes", "describe"]

logger = logging.getLogger("chash.gateway")

#: An attempt's result: (outcome, detail, keep); see ``Proxy._attempt``.
Attempt = tuple[Outcome, str, bool]


class HealthReports(Protocol):
    """Where the proxy reports the outcome of real requests: a health
    checker, or whatever forwards them to one."""

    def report_success(self, node: str) -> None:
        """A request to ``node`` succeeded."""

    def report_failure(self, node: str, reason: str = ...) -> None:
        """A request to ``node`` failed for ``reason``."""


class _ClientBodyCut(Exception):
    """The client's own streamed body failed; the client was answered."""


def describe(exc: BaseException) -> str:
    """A short description of a failed attempt, for logs and the status page."""
    if isinstance(exc, NoSlot):
        return "no free connection before the deadline"
    if isinstance(exc, (TimeoutError, ReadTimeout)):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == \
            errno.ECONNREFUSED:
        return "connection refused"
    if isinstance(exc, EOFError):
        return "disconnected before answering"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: the backend's certificate is not trusted ({exc.verify_message})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed ({exc.reason or exc})"
    if isinstance(exc, OSError):
        return f"cannot connect: {exc.strerror or exc}"
    if isinstance(exc, HttpError):
        return exc.reason
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: What the proxy asks of the ring (``chash.routers.Ranking``; the old
#: name, kept): a router, or a view over one (``chash.zones.LocalFirst``
#: for a gateway with a zone, ``chash.gateway.server.LocalVerdicts``).
Routes = Ranking


class Proxy:
    """Serves client connections for one gateway; see the module docstring.

    ``config``, ``key_rule``, ``router``, ``pools``, ``in_flight``,
    ``counters``, ``closing``, ``relayed`` and ``node_line`` are public for
    ``chash.gateway.express``, which serves plain requests on the proxy's
    behalf (``ExpressHost``)."""

    def __init__(self, config: GatewayConfig, router: Ranking,
                 addresses: Mapping[str, str], counters: RouteCounters,
                 health: HealthReports | None, tracer: AttemptTracer | None = None,
                 tunnels: Tunnels | None = None, backend_tls: BackendTls | None = None) -> None:
        self.config = config
        #: The context of connections to https:// backends (a reload may
        #: replace it: ``reconfigure``).
        self.backend_tls = backend_tls if backend_tls is not None else BackendTls(
            config.backend_ca, config.backend_insecure)
        self.key_rule = config.key_rule
        self.router = router
        self._addresses = addresses
        self.counters = counters
        self._health = health
        self._tracer = tracer
        #: The WebSocket tunnels of this process (``chash.gateway.tunnel``).
        self.tunnels = tunnels if tunnels is not None else Tunnels(config)
        self.in_flight: dict[str, int] = {}
        #: Set by ``close``: each connection ends after the request it serves.
        self.closing = False
        self.pools: dict[str, Pool] = {}
        self._connections: set[Channel] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._node_lines: dict[str, bytes] = {}
        self.relayed: dict[tuple[bytes, str, bytes, bool, str], Relayed] = {}
        #: Completions routed by their prompt (``chash.gateway.llm``), or
        #: None (``affinity`` off).
        self.prompts: PromptRoutes | None = None

    @property
    def loads(self) -> dict[str, int]:
        """``{node: requests in flight}`` for every configured backend."""
        return {node: self.in_flight.get(node, 0) for node in dict.fromkeys(
            [*self._addresses, *self.in_flight])}

    def address_of(self, node: str) -> str:
        """The ``host:port`` (or ``https://host:port``) that ``node`` is
        reached at."""
        return self._addresses.get(node, node)

    def reconfigure(self, config: GatewayConfig, backend_tls: BackendTls | None = None) -> None:
        """Serve the requests from now on with ``config`` (a reload), and
        with ``backend_tls`` if it verifies backends otherwise than the
        current one: the TLS backends' pools are dropped then, so that
        every new connection to them is verified the new way."""
        self.config = config
        self.key_rule = config.key_rule
        self._node_lines.clear()
        if backend_tls is not None and not backend_tls.same_as(self.backend_tls):
            self.backend_tls = backend_tls
            for node in [node for node, pool in self.pools.items() if pool.upstream.secure]:
                self.drop_pool(node)

    def pool_of(self, node: str) -> Pool:
        """``node``'s pool, made on its first request."""
        pool = self.pools.get(node)
        if pool is None:
            upstream = upstream_of(self.address_of(node))
            pool = self.pools[node] = Pool(self.address_of(node), self.config.pool_size,
                                           self.backend_tls.for_upstream(upstream))
        return pool

    def drop_pool(self, node: str) -> None:
        """Close ``node``'s idle pooled connections and forget its pool (its
        address changed, or it left the configuration); connections in use
        finish their exchange and are closed after it."""
        pool = self.pools.pop(node, None)
        if pool is not None:
            pool.close()

    async def close(self, grace: float) -> None:
        """Let requests in flight finish (``grace`` seconds at most), then
        close every client and backend connection."""
        # Idle keep-alive connections close now; busy ones after their
        # answer; tunnels with a close frame (1001) at a frame boundary.
        self.closing = True
        for channel in list(self._connections):
            channel.finish_if_idle()
            # One its callbacks serve without a task yet gets one now (a
            # request in flight carried on by it), so that it is waited for.
            if channel.on_wake is not None:
                channel.wake()
        self.tunnels.close_all()
        if self._tasks:
            # A tunnel has its own grace to reach its close frames (it cuts
            # itself after it): waited for, when longer.
            if self.tunnels.live:
                grace = max(grace, self.config.tunnel_close_grace)
            await asyncio.wait(list(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        for channel in list(self._connections):
            channel.abort()
        for pool in self.pools.values():
            pool.close()
        self.pools.clear()

    def accept(self, peer: Any = None) -> Channel:
        """A protocol for a new client connection (``create_server``'s
        factory; the TLS listener's, given the peer's address)."""
        return Channel(self._connected, peer)

    def _connected(self, channel: Channel) -> None:
        assert channel.transport is not None
        self._connections.add(channel)
        peer = channel.peer if channel.peer is not None \
            else channel.transport.get_extra_info("peername")
        remote = str(peer[0]) if peer else ""
        parser = RequestParser()
        # Every request on the general path: with spans, or with completions
        # routed by their prompt (a bodiless POST would pass as plain).
        if self._tracer is not None or self.prompts is not None:
            self._start_task(channel, remote, parser, None, None)
            return
        # Plain requests are served from the channels' callbacks; the
        # connection gets its task only when they hand something over
        # (``_woken``), and a connection whose requests are all plain
        # never has one.
        express = Express(self, channel, remote, parser)
        channel.on_wake = functools.partial(self._woken, remote, parser, express)
        express.begin(self.config.idle_timeout)

    def _woken(self, remote: str, parser: RequestParser, express: Express,
               client: Channel) -> None:
        """The callbacks of a connection without a task handed it over."""
        handoff = express.take_over()
        if handoff is CLOSE and not client.lingers:
            # Answered, with nothing to linger for (over TLS, say): closing
            # needs no task.
            self._connections.discard(client)
            client.close()
            return
        self._start_task(client, remote, parser, express, handoff)

    def _start_task(self, client: Channel, remote: str, parser: RequestParser,
                    express: Express | None, handoff: Handoff) -> None:
        task = client.loop.create_task(self._serve(client, remote, parser, express, handoff))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one client connection -------------------------------------------------

    async def _serve(self, client: Channel, remote: str, parser: RequestParser,
                     express: Express | None, handoff: Handoff) -> None:
        """Answer the requests of one client connection, one after another,
        beginning with ``handoff`` (what its callbacks handed over)."""
        config = self.config
        try:
            # (A hand-off is carried out even while the gateway stops.)
            while handoff is not None or not self.closing:
                if handoff is None and express is not None and (express.busy or not (
                        client.buffered or client.peer_closed)):
                    try:
                        handoff = await express.park(config.idle_timeout)
                    except ReadTimeout:
                        break
                if handoff is not None:
                    keep = await self._take_over(client, handoff, remote)
                    handoff = None
                    if not keep:
                        break
                    continue
                request = await self._next_request(client, remote, parser)
                if request is None:
                    break
                if express is not None and express.start(request):
                    continue
                client.busy = True
                keep = await self.serve_request(client, request, remote)
                client.busy = False
                if not keep:
                    break
            await client.linger(2.0, 10.0)
        except ConnectionError:
            logger.info("client %s went away", remote)
        except Exception:
            logger.exception("request from %s failed", remote)
        finally:
            self._connections.discard(client)
            client.close()

    async def _take_over(self, client: Channel, handoff: Handoff, remote: str) -> bool:
        """Carry out what the one-pass path handed over; whether the
        connection may go on."""
        if handoff is CLOSE:
            return False
        if isinstance(handoff, Refuse):
            self.send_last(client, handoff.status, handoff.reason)
            return False
        client.busy = True
        if isinstance(handoff, Resume):
            keep = await self.forward(client, handoff.request, handoff.key, handoff.nodes, b"",
                                      handoff.upstream_head, handoff.deadline, handoff.sent)
        else:
            assert isinstance(handoff, Serve)
            keep = await self.serve_request(client, handoff.request, remote)
        client.busy = False
        return keep

    async def _next_request(self, client: Channel, remote: str,
                            parser: RequestParser) -> RequestHead | None:
        """The client's next request head; None when the connection is to
        end (closed, idle too long, or a bad head, answered already)."""
        config = self.config
        deadline = None
        try:
            while True:
                request = parser.next_request(client, config.max_header_size)
                if request is None:  # nothing buffered
                    if client.peer_closed:
                        return None
                    await client.wait_data(config.idle_timeout)
                    continue
                if request is not PENDING:
                    assert isinstance(request, RequestHead)
                    return request
                if client.peer_closed:
                    raise HttpError(400, "connection closed mid-head")
                if deadline is None:
                    deadline = client.loop.time() + config.header_timeout
                await client.park(deadline - client.loop.time())  # the rest of the head
        except ReadTimeout:
            if client.buffered:  # a head begun and not finished
                logger.info("client %s sent no complete request head in %gs; closing",
                            remote, config.header_timeout)
                self.send_last(client, 408, "request head not received in time")
        except HttpError as exc:
            self.send_last(client, exc.status, exc.reason)
        return None

    def send_last(self, client: Channel, status: int, message: str) -> None:
        """Answer with the gateway's own message before closing."""
        if not client.lost:
            client.write(simple_answer(status, message, close=True))

    def _answer(self, client: Channel, request: RequestHead, status: int, message: str,
                close: bool = False) -> bool:
        """Answer with the gateway's own message; whether the connection may
        go on (``close``: a body was left unread, so it may not)."""
        close = close or not request.keep_alive
        if client.lost:
            return False
        data = simple_answer(status, message, close)
        if request.method == "HEAD":
            data = data[:data.index(b"\r\n\r\n") + 4]
        client.write(data)
        return not close

    # -- one request -----------------------------------------------------------

    async def serve_request(self, client: Channel, request: RequestHead, remote: str) -> bool:
        """Answer one request; whether the client connection may go on."""
        config = self.config
        if self.prompts is not None and self.prompts.serves(request):
            return await self._serve_prompt(client, request, remote, self.prompts)
        deadline = client.loop.time() + config.deadline
        has_body = request.chunked or request.content_length > 0
        key = request_key(self.key_rule, request, client.tls_subject)
        if key is None:
            if config.missing_key == "reject":
                self.counters.request("rejected")
                return self._answer(client, request, 400,
                                    f"no routing key ({self.key_rule}) in the request", has_body)
            key = remote.encode()
        if request.content_length > config.max_body:
            self.counters.request("rejected")
            return self._answer(client, request, 413,
                                f"request body over {config.max_body} bytes", True)
        nodes = self.router.get_preference_list(key, config.attempts)
        if not nodes:
            self.counters.request("failed")
            return self._answer(client, request, 503, "no backend in service", has_body)
        if request.upgrade is not None:
            if has_body:
                self.counters.request("rejected")
                return self._answer(client, request, 400,
                                    "a WebSocket handshake has no body", True)
            return await self._upgrade(client, request, key, nodes, remote)
        if request.expect_continue and has_body:
            client.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body: bytes | None = b""
        if request.chunked or request.content_length > config.buffer_body:
            body = None  # streamed on the first attempt that connects
        elif request.content_length:
            try:
                body = await client.read_exact(request.content_length, config.body_timeout)
            except (ReadTimeout, EOFError):
                self.counters.routed(nodes[0], "rejected")
                return self._answer(client, request, 408,
                                    "request body not received in time", True)
        return await self.forward(client, request, key, nodes, body,
                                   backend_head(request, remote, client.secure), deadline)

    async def _serve_prompt(self, client: Channel, request: RequestHead, remote: str,
                            prompts: PromptRoutes) -> bool:
        """Answer a completion routed by its prompt (``chash.gateway.llm``):
        its body read first (unless streamed), then its nodes chosen."""
        config = self.config
        deadline = client.loop.time() + config.deadline
        if request.content_length > config.max_body:
            self.counters.request("rejected")
            return self._answer(client, request, 413,
                                f"request body over {config.max_body} bytes", True)
        if request.expect_continue and (request.chunked or request.content_length):
            client.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body: bytes | None = b""
        if request.chunked or request.content_length > config.buffer_body:
            body = None  # streamed: routed without its prompt
        elif request.content_length:
            try:
                body = await client.read_exact(request.content_length, config.body_timeout)
            except (ReadTimeout, EOFError):
                self.counters.request("rejected")
                return self._answer(client, request, 408,
                                    "request body not received in time", True)
        session = prompts.session_of(request) or request_key(self.key_rule, request,
                                                             client.tls_subject)
        choice = prompts.choose(body, session, config.attempts)
        if not choice.nodes:
            self.counters.request("failed")
            return self._answer(client, request, 503, "no backend in service", body is None)
        prompts.under_way[client] = choice
        try:
            return await self.forward(client, request, session or choice.nodes[0].encode(),
                                      choice.nodes, body,
                                      backend_head(request, remote, client.secure), deadline)
        finally:
            del prompts.under_way[client]
            prompts.done(choice)

    def node_line(self, node: str) -> bytes | None:
        """The header line naming the node that answered, if configured."""
        line = self._node_lines.get(node)
        if line is None:
            header = self.config.node_header
            if header is None:
                return None
            line = self._node_lines[node] = header.encode() + b": " + node.encode()
        return line

    async def forward(self, client: Channel, request: RequestHead, key: bytes,
                       nodes: Sequence[str], body: bytes | None, upstream_head: bytes,
                       deadline: float, first: Sent | None = None) -> bool:
        """Try the nodes of the preference list as the retry policy says,
        until one answers; else answer 502 or 504.  Whether the client
        connection may go on.  ``body`` None: streamed from the client.
        ``first``: the request went to ``nodes[0]`` already (see ``Sent``)."""
        # (A streamed body that went with a failed attempt is not
        # replayable: the policy stops there.)
        walk = self._walk(request, nodes, deadline, replayable=body is not None)
        for node in walk:
            if walk.attempt:
                self.counters.retry()
            pool = self.pool_of(node)
            self.in_flight[node] = self.in_flight.get(node, 0) + 1
            tracer = self._tracer
            span = None if tracer is None else tracer.start(
                node, walk.attempt, request.method, pool.host, pool.port)
            outcome, detail = Outcome.FAILED, "the gateway failed"
            try:
                outcome, detail, keep = await self._attempt(
                    client, request, walk, pool, upstream_head, body, deadline, first=first)
                first = None
                if outcome is Outcome.NOT_DELIVERED and not detail:
                    # A reused connection turned out closed: once more, on
                    # a new one (a fresh one never reports this).
                    outcome, detail, keep = await self._attempt(
                        client, request, walk, pool, upstream_head, body, deadline, True)
                    if outcome is Outcome.NOT_DELIVERED and not detail:
                        detail = "disconnected before answering"
            finally:
                self.in_flight[node] -= 1
                if span is not None:
                    assert tracer is not None
                    tracer.end(span, outcome.value, detail)
            if outcome is Outcome.ANSWERED:
                if detail == "client":  # the client's side of a streamed body failed
                    self.counters.routed(walk.owner, "rejected")
                    return False
                if walk.attempt:
                    logger.info("request for key %r served by %s after %s", key, node,
                                "; ".join(walk.tried), extra={"node": node})
                # One lock for the request's counts; an answer whose status
                # counts as a failure was counted as a failed attempt already.
                self.counters.routed(walk.owner, "ok", None if detail else node)
                return keep
            walk.failed(detail, outcome, client.loop.time())
        return self._unanswered(client, request, walk, body is None)

    def _walk(self, request: RequestHead, nodes: Sequence[str], deadline: float, *,
              replayable: bool) -> Failover:
        """The walk of ``request`` along ``nodes`` under this configuration's
        retry policy, until the loop time ``deadline``."""
        config = self.config
        # A completion is safe to send again while nothing has come back.
        unsafe = config.retry_unsafe or (self.prompts is not None and self.prompts.serves(request))
        return Failover(nodes, request.method, retry_unsafe=unsafe,
                        replayable=replayable, deadline=deadline, limit=config.deadline)

    def _unanswered(self, client: Channel, request: RequestHead, walk: Failover,
                    close: bool = False) -> bool:
        """Count the request failed and answer 502 or 504 (``walk.verdict``);
        whether the client connection may go on."""
        self.counters.routed(walk.owner, "failed")
        status, message = walk.verdict()
        return self._answer(client, request, status, message, close)

    # -- a WebSocket handshake -------------------------------------------------

    async def _upgrade(self, client: Channel, request: RequestHead, key: bytes,
                       nodes: Sequence[str], remote: str) -> bool:
        """Route a WebSocket handshake as a request (failing over while no
        101 has reached the client), then run its tunnel; whether the
        client connection may go on (only after an answer other than 101)."""
        tunnels = self.tunnels
        if tunnels.full:
            self.counters.routed(nodes[0], "rejected")
            if client.lost:
                return False
            client.write(simple_answer(
                503, f"{self.config.max_tunnels} WebSocket tunnels are open, the most allowed",
                not request.keep_alive, retry_after=1))
            return request.keep_alive
        head = upgrade_head(request, remote, client.secure)
        deadline = client.loop.time() + self.config.deadline
        walk = self._walk(request, nodes, deadline, replayable=True)
        for node in walk:
            if walk.attempt:
                self.counters.retry()
            self.in_flight[node] = self.in_flight.get(node, 0) + 1
            tunnels.pending += 1  # counted against the cap while under way
            try:
                outcome, detail, conn, response = await self._handshake(
                    request, node, head, deadline)
            finally:
                self.in_flight[node] -= 1
                tunnels.pending -= 1
            if conn is not None and response is not None:
                if outcome is Outcome.ANSWERED or walk.last(outcome):  # the last node's answer
                    self.counters.routed(walk.owner, "ok", node)
                    if response.status == 101:
                        await tunnels.run(client, conn, node, key, switching_head(
                            response, b"websocket", self.node_line(node)))
                        return False
                    try:
                        _, keep = await self._relay(client, request, response, conn, node)
                    except (EOFError, ReadTimeout):
                        keep = False
                    conn.close()
                    return keep and not client.lost
                conn.close()
            walk.failed(detail, outcome, client.loop.time())
        return self._unanswered(client, request, walk)

    async def _handshake(self, request: RequestHead, node: str, head: bytes, deadline: float,
                         ) -> tuple[Outcome, str, Channel | None, ResponseHead | None]:
        """Send the handshake to ``node`` on a connection of its own (a
        tunnel keeps it): ``(outcome, detail, connection, answer)``, the
        connection and the answer's head when one came (ANSWERED, or
        RETRY_STATUS for a status to fail over from)."""
        config = self.config
        upstream = upstream_of(self.address_of(node))
        loop = asyncio.get_running_loop()
        try:
            conn = await open_channel(
                upstream, self.backend_tls.for_upstream(upstream),
                max(0.001, min(config.connect_timeout, deadline - loop.time())))
        except (OSError, TimeoutError) as exc:
            reason = f"connect timed out after {config.connect_timeout:g}s" \
                if isinstance(exc, TimeoutError) else describe(exc)
            self._failed(node, reason)
            return Outcome.NOT_DELIVERED, reason, None, None
        try:
            conn.write(request_start(request, upstream.authority) + head)
            wait = max(0.001, min(config.read_timeout, deadline - loop.time()))
            while True:
                raw = await conn.read_head(65536, wait, 502)
                if raw is None:
                    raise EOFError("disconnected before answering")
                response = parse_response_head(raw)
                if response.status >= 200 or response.status == 101:
                    break
        except (ReadTimeout, EOFError, ConnectionError, HttpError) as exc:
            conn.close()
            reason = f"timed out after {config.read_timeout:g}s" \
                if isinstance(exc, ReadTimeout) else describe(exc)
            self._failed(node, reason)
            return Outcome.FAILED, reason, None, None
        status = response.status
        if status in config.fail_on_status:
            self._failed(node, f"HTTP {status}")
        else:
            self.succeeded(node)
        if status in config.retry_statuses:
            return Outcome.RETRY_STATUS, f"HTTP {status}", conn, response
        return Outcome.ANSWERED, "", conn, response

    def _failed(self, node: str, reason: str) -> None:
        self.counters.attempt(node, ok=False)
        logger.warning("backend %s failed: %s", node, reason, extra={"node": node})
        if self._health is not None:
            self._health.report_failure(node, reason)

    def succeeded(self, node: str) -> None:
        # Counted by the caller: with the request when it is answered.
        if self._health is not None:
            self._health.report_success(node)

    # -- one attempt -----------------------------------------------------------

    async def _attempt(self, client: Channel, request: RequestHead, walk: Failover,
                       pool: Pool, upstream_head: bytes, body: bytes | None,
                       deadline: float, fresh: bool = False,
                       first: Sent | None = None) -> Attempt:
        """One attempt on ``walk.node``: ``(outcome, detail, keep)``.

        ANSWERED: the answer was relayed and ``keep`` says whether the client
        connection may go on; ``detail`` is "client" if the client's own
        body failed instead, "HTTP <status>" for an answer whose status
        counts as the node's failure (``fail_on_status``), else "".  Otherwise ``detail`` describes the failure and
        ``keep`` False means no other attempt is possible (a streamed body
        is gone).  ``fresh``: open a new connection rather than reuse one.
        ``first``: the request was sent already on a pooled connection.
        """
        config = self.config
        node = walk.node
        if first is not None:
            conn, reused = first[0], True
        else:
            try:
                conn, reused = await pool.acquire(config.connect_timeout, deadline, fresh=fresh)
            except (OSError, TimeoutError, NoSlot) as exc:
                reason = describe(exc)
                if isinstance(exc, TimeoutError):
                    reason = f"connect timed out after {config.connect_timeout:g}s"
                self._failed(node, reason)
                return Outcome.NOT_DELIVERED, reason, True
        replayable = body is not None
        reuse = False
        try:
            now = conn.loop.time()
            if first is None:
                wait = min(config.read_timeout, deadline - now)
                left = wait
            else:  # what is left of the wait the first pass began
                wait, left = first[2], first[1] - now
            try:
                response = await self._exchange(client, request, conn, pool.authority,
                                                upstream_head, body, max(left, 0.001),
                                                first is not None)
            except _ClientBodyCut:
                return Outcome.ANSWERED, "client", False
            except ReadTimeout:
                reason = (f"timed out after {config.read_timeout:g}s"
                          if wait >= config.read_timeout else "timed out (deadline)")
                self._failed(node, reason)
                return Outcome.FAILED, reason, replayable
            except (EOFError, ConnectionError, HttpError) as exc:
                if reused and replayable and not isinstance(exc, HttpError):
                    # A kept-alive connection the backend closed just as it
                    # was reused: not a byte came back, so the request was
                    # not processed (RFC 9112 §9.3.1).  Once more, on a new
                    # connection; not a failure of the node.
                    return Outcome.NOT_DELIVERED, "", True
                reason = describe(exc)
                self._failed(node, reason)
                return Outcome.FAILED, reason, replayable
            status = response.status
            failed = status in config.fail_on_status
            if failed:
                self._failed(node, f"HTTP {status}")
            else:
                self.succeeded(node)
            if status in config.retry_statuses and not walk.last(Outcome.RETRY_STATUS):
                if not failed:
                    self.counters.attempt(node, ok=True)
                return Outcome.RETRY_STATUS, f"HTTP {status}", True
            try:
                reuse, keep = await self._relay(client, request, response, conn, node)
            except (EOFError, ReadTimeout) as exc:
                reason = "timed out mid-response" if isinstance(exc, ReadTimeout) \
                    else "disconnected mid-response"
                self._failed(node, reason)
                return Outcome.FAILED, reason, replayable
            return Outcome.ANSWERED, f"HTTP {status}" if failed else "", keep
        finally:
            pool.release(conn, reuse)

    async def _exchange(self, client: Channel, request: RequestHead, conn: Channel,
                        authority: bytes, upstream_head: bytes, body: bytes | None,
                        wait: float, sent: bool = False) -> ResponseHead:
        """Send the request on ``conn`` (``body``, or the client's streamed
        one when None; nothing if ``sent`` already) and read the backend's
        final response head (1xx interim answers are dropped), waiting
        ``wait`` seconds at most.  _ClientBodyCut when the client's
        streamed body failed."""
        if sent:
            pass
        elif body is not None:
            conn.write(request_start(request, authority) + upstream_head + body)
        else:
            conn.write(request_start(request, authority) + upstream_head)
            await self._stream_body(client, request, conn)
        while True:
            raw = await conn.read_head(65536, wait, 502)
            if raw is None:
                raise EOFError("disconnected before answering")
            response = parse_response_head(raw)
            if response.status >= 200:
                return response

    async def _stream_body(self, client: Channel, request: RequestHead,
                           conn: Channel) -> None:
        """Copy the request body from ``client`` to ``conn``, chunked or of
        announced length; a chunked body's trailer fields are dropped.  When
        the client's side fails, answer it and raise _ClientBodyCut."""
        config = self.config
        try:
            if request.chunked:
                await copy_chunked(client, conn, config.body_timeout, rechunk=True,
                                   trailers=False, limit=config.max_body)
            else:
                await copy_exactly(client, conn, request.content_length, config.body_timeout)
        except HttpError as exc:
            self.send_last(client, exc.status, exc.reason)
            raise _ClientBodyCut from exc
        except (ReadTimeout, EOFError) as exc:
            self.send_last(client, 408, "request body not received in time")
            raise _ClientBodyCut from exc

    # -- the answer ------------------------------------------------------------

    async def _relay(self, client: Channel, request: RequestHead, response: ResponseHead,
                     conn: Channel, node: str) -> tuple[bool, bool]:
        """Send ``response`` and its body to the client: ``(reuse the backend
        connection, keep the client connection)``.  EOFError or ReadTimeout
        while nothing has reached the client yet (a failed attempt)."""
        head, body, keep = client_head(request, response, self.node_line(node))
        length = response.content_length
        try:
            if client.peer_closed:  # the client closed its side: nobody will read this
                raise ConnectionResetError("the client closed the connection")
            if body is Body.NONE:
                client.write(head)
                return response.keep_alive, keep
            if body is Body.LENGTH and length is not None and length <= BLOCK:
                # Read whole, then written in one call; nothing has reached
                # the client yet, so a backend failing here is an ordinary
                # failed attempt (retried when the method allows).
                data = await conn.read_exact(length, self.config.read_timeout)
                client.write(head + data)
                return response.keep_alive, keep
            client.write(head)
            events = self.prompts is not None and body is Body.CHUNKED \
                and event_stream(response)
            try:
                if events:  # whole chunks, so that an error event can end it
                    assert self.prompts is not None
                    await relay_events(conn, client, self.config.read_timeout,
                                       functools.partial(self.prompts.started, client))
                    ended = True
                else:
                    ended = await self._relay_body(conn, client, body, length)
            except (HttpError, EOFError, ReadTimeout) as exc:
                return self._cut(client, node, exc, events)
            return ended and response.keep_alive, ended and keep
        except ConnectionError:
            logger.info("client went away before the answer of %s was sent: %s %s", node,
                        request.method, request.target.decode("latin-1")[:200],
                        extra={"node": node})
            return False, False

    async def _relay_body(self, conn: Channel, client: Channel, body: Body,
                          length: int | None) -> bool:
        """Copy a response body framed as ``body`` from ``conn`` to ``client``;
        whether it ended by its framing (False: at the backend's close, so
        neither connection goes on).  Chunked bodies keep their trailer
        fields, except for an HTTP/1.0 client (DECHUNKED)."""
        timeout = self.config.read_timeout
        if body is Body.LENGTH:
            assert length is not None
            await copy_exactly(conn, client, length, timeout)
        elif body is Body.CHUNKED or body is Body.DECHUNKED:
            chunked = body is Body.CHUNKED
            await copy_chunked(conn, client, timeout, rechunk=chunked, trailers=chunked)
        else:  # until the backend closes
            while data := await conn.read_some(BLOCK, timeout):
                client.write(data)
                await client.drain()
            return False
        return True

    def _cut(self, client: Channel, node: str, exc: BaseException,
             events: bool = False) -> tuple[bool, bool]:
        # The status line is gone already: all that is left is to cut the
        # connection, so that the client sees a truncated answer rather
        # than a complete-looking one; an event stream of a completion, at
        # a chunk boundary, ends with an error event instead.
        reason = describe(exc)
        logger.warning("backend %s failed mid-response: %s", node, reason,
                       extra={"node": node})
        if self._health is not None:
            self._health.report_failure(node, f"mid-response: {reason}")
        if events:
            client.write(error_event(reason))
        else:
            client.abort()
        return False, False
