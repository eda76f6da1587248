"""The gateway's proxy path: answering the requests of client connections.

For each connection, ``Proxy`` reads request heads (strictly, with
``chash._http``), takes the key, asks the ring for the preference list and
tries its nodes as ``chash._retry.next_attempt`` says, over per-backend
keep-alive pools (``chash._gateway_io``), then relays the answer.  The
configuration, lifecycle, status and collaborators are ``chash.gateway.Gateway``'s.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from chash import ConsistentHashRouter
from chash._gateway_io import BLOCK, Channel, NoSlot, Pool, ReadTimeout
from chash._http import (
    HttpError,
    RequestHead,
    ResponseHead,
    parse_chunk_size,
    parse_request_head,
    parse_response_head,
)
from chash._retry import Outcome, next_attempt
from chash.metrics import RouteCounters

if TYPE_CHECKING:
    from chash.gateway import GatewayConfig
    from chash.health import AsyncHealthChecker

__all__ = ["Proxy"]

logger = logging.getLogger("chash.gateway")

# Hop-by-hop headers (RFC 9110 §7.6.1) are never forwarded, in either
# direction; nor are those the gateway recomputes itself.
_HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization",
    b"proxy-connection", b"te", b"trailer", b"trailers", b"transfer-encoding", b"upgrade",
})
_NOT_FORWARDED = _HOP_BY_HOP | {b"host", b"content-length", b"expect",
                                b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"}
_REASONS = {400: "Bad Request", 404: "Not Found", 408: "Request Timeout",
            413: "Content Too Large", 414: "URI Too Long",
            431: "Request Header Fields Too Large", 500: "Internal Server Error",
            501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout", 505: "HTTP Version Not Supported"}
_NO_BODY = frozenset({204, 304})


def _describe(exc: BaseException, config: GatewayConfig) -> str:
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
    if isinstance(exc, OSError):
        return f"cannot connect: {exc.strerror or exc}"
    if isinstance(exc, HttpError):
        return exc.reason
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _simple(status: int, message: str, close: bool) -> bytes:
    body = f"chash gateway: {message}\n".encode()
    return (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode() + body



class Proxy:
    """Serves client connections for one gateway; see the module docstring."""

    def __init__(self, config: GatewayConfig, router: ConsistentHashRouter,
                 addresses: Mapping[str, str], counters: RouteCounters,
                 health: AsyncHealthChecker | None) -> None:
        self._config = config
        self._key = config.key_rule
        self._router = router
        self._addresses = addresses
        self._counters = counters
        self._health = health
        self._loads: dict[str, int] = {}
        self._pools: dict[str, Pool] = {}
        self._connections: set[Channel] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def loads(self) -> dict[str, int]:
        """``{node: requests in flight}`` for every configured backend."""
        return {node: self._loads.get(node, 0) for node in dict.fromkeys(
            [*self._addresses, *self._loads])}

    def address_of(self, node: str) -> str:
        """The ``host:port`` that ``node`` is reached at."""
        return self._addresses.get(node, node)

    async def close(self, grace: float) -> None:
        """Let requests in flight finish (``grace`` seconds at most), then
        close every client and backend connection."""
        # Idle keep-alive connections close now; busy ones after their answer.
        for channel in list(self._connections):
            channel.finish_if_idle()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        for channel in list(self._connections):
            channel.abort()
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    def accept(self) -> Channel:
        """A protocol for a new client connection (``create_server``'s factory)."""
        return Channel(self._connected)

    def _connected(self, channel: Channel) -> None:
        self._connections.add(channel)
        task = asyncio.get_running_loop().create_task(self._serve(channel))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, client: Channel) -> None:
        """Answer the requests of one client connection, one after another."""
        config = self._config
        assert client.transport is not None
        peer = client.transport.get_extra_info("peername")
        remote = str(peer[0]) if peer else ""
        try:
            while True:
                try:
                    if not client.buffered:
                        await client.wait_data(config.idle_timeout)
                    head = await client.read_head(config.max_header_size,
                                                  config.header_timeout, 400)
                except ReadTimeout:
                    if client.buffered:  # a head begun and not finished
                        logger.info("client %s sent no complete request head in %gs; "
                                    "closing", remote, config.header_timeout)
                        self._send_last(client, 408, "request head not received in time")
                    break
                except HttpError as exc:
                    self._send_last(client, exc.status, exc.reason)
                    break
                if head is None:
                    break
                try:
                    request = parse_request_head(head)
                except HttpError as exc:
                    self._send_last(client, exc.status, exc.reason)
                    break
                if not await self._proxy(client, request, remote):
                    break
            await client.linger(2.0, 10.0)
        except ConnectionError:
            logger.info("client %s went away", remote)
        except Exception:
            logger.exception("request from %s failed", remote)
        finally:
            self._connections.discard(client)
            client.close()

    def _send_last(self, client: Channel, status: int, message: str) -> None:
        if not client.lost:
            client.write(_simple(status, message, close=True))

    def _upstream_head(self, request: RequestHead, remote: str) -> bytes:
        """Everything after the Host line of the request to a backend."""
        named = {token.strip(b" \t").lower() for name, value in request.fields
                 if name == b"connection" for token in value.split(b",")}
        out = []
        forwarded_for = b""
        for (name, value), line in zip(request.fields, request.lines, strict=True):
            if name in _NOT_FORWARDED or name in named:
                if name == b"x-forwarded-for":
                    forwarded_for = value
                continue
            out.append(line)
        client_ip = remote.encode()
        if client_ip:
            forwarded_for = forwarded_for + b", " + client_ip if forwarded_for else client_ip
        if forwarded_for:
            out.append(b"X-Forwarded-For: " + forwarded_for)
        out.append(b"X-Forwarded-Proto: http")
        host = request.host
        if host:
            out.append(b"X-Forwarded-Host: " + host)
        if request.chunked:
            out.append(b"Transfer-Encoding: chunked")
        elif request.content_length or request.method not in ("GET", "HEAD"):
            out.append(b"Content-Length: %d" % request.content_length)
        out.append(b"")
        out.append(b"")
        return b"\r\n".join(out)

    async def _proxy(self, client: Channel, request: RequestHead, remote: str) -> bool:
        """Answer one request; whether the client connection may go on."""
        config = self._config
        loop = asyncio.get_running_loop()
        deadline = loop.time() + config.deadline
        has_body = request.chunked or request.content_length > 0
        key = self._key.extract(request)
        if key is None:
            if config.missing_key == "reject":
                self._counters.request("rejected")
                return self._answer(client, request, 400,
                                    f"no routing key ({self._key}) in the request", has_body)
            key = remote.encode()
        if request.content_length > config.max_body:
            self._counters.request("rejected")
            return self._answer(client, request, 413,
                                f"request body over {config.max_body} bytes", True)
        nodes = self._router.get_preference_list(key, config.attempts)
        if not nodes:
            self._counters.request("failed")
            return self._answer(client, request, 503, "no backend in service", has_body)
        self._counters.lookup(nodes[0])
        if request.expect_continue and has_body:
            client.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body: bytes | None = b""
        if request.chunked or request.content_length > config.buffer_body:
            body = None  # streamed on the first attempt that connects
        elif request.content_length:
            try:
                body = await client.read_exact(request.content_length, config.body_timeout)
            except (ReadTimeout, EOFError):
                self._counters.request("rejected")
                return self._answer(client, request, 408,
                                    "request body not received in time", True)
        upstream_head = self._upstream_head(request, remote)
        tried: list[str] = []
        timed_out = False
        index: int | None = 0
        while index is not None:
            node = nodes[index]
            if index:
                self._counters.retry()
            pool = self._pools.get(node)
            if pool is None:
                pool = self._pools[node] = Pool(self.address_of(node), config.pool_size)
            self._loads[node] = self._loads.get(node, 0) + 1
            try:
                outcome, detail, keep = await self._try(
                    client, request, nodes, index, pool, upstream_head, body, deadline)
            finally:
                self._loads[node] -= 1
            if outcome is Outcome.ANSWERED:
                if detail:  # the client's side of a streamed body failed
                    self._counters.request("rejected")
                    return False
                if index:
                    logger.info("request for key %r served by %s after %s", key, node,
                                "; ".join(tried), extra={"node": node})
                self._counters.request("ok")
                return keep
            tried.append(f"{node}: {detail}")
            timed_out = detail.startswith(("timed out", "connect timed out", "no free"))
            if not keep:  # a streamed body went with the attempt
                break
            index = next_attempt(nodes, index, request.method, outcome,
                                 retry_unsafe=config.retry_unsafe, replayable=body is not None)
            if index is not None and loop.time() >= deadline:
                tried.append(f"deadline of {config.deadline:g}s passed")
                timed_out = True
                break
        self._counters.request("failed")
        detail = "; ".join(tried)
        if timed_out:
            return self._answer(client, request, 504, f"no backend answered in time ({detail})",
                                body is None)
        return self._answer(client, request, 502, f"no backend answered ({detail})",
                            body is None)

    def _answer(self, client: Channel, request: RequestHead, status: int, message: str,
                close: bool = False) -> bool:
        """Answer with the gateway's own message; whether the connection may
        go on (``close``: a body was left unread, so it may not)."""
        close = close or not request.keep_alive
        if client.lost:
            return False
        data = _simple(status, message, close)
        if request.method == "HEAD":
            data = data[:data.index(b"\r\n\r\n") + 4]
        client.write(data)
        return not close

    def _failed(self, node: str, reason: str) -> None:
        self._counters.attempt(node, ok=False)
        logger.warning("backend %s failed: %s", node, reason, extra={"node": node})
        if self._health is not None:
            self._health.report_failure(node, reason)

    def _succeeded(self, node: str) -> None:
        self._counters.attempt(node, ok=True)
        if self._health is not None:
            self._health.report_success(node)

    async def _attempt(self, client: Channel, request: RequestHead, nodes: Sequence[str],
                       index: int, pool: Pool, upstream_head: bytes, body: bytes | None,
                       deadline: float, fresh: bool = False) -> tuple[Outcome, str, bool]:
        """One attempt on ``nodes[index]``: ``(outcome, detail, keep)``.

        ANSWERED: the answer was relayed and ``keep`` says whether the client
        connection may go on (``detail`` is set if the client's own body
        failed instead).  Otherwise ``detail`` describes the failure and
        ``keep`` False means no other attempt is possible (a streamed body
        is gone).  ``fresh``: open a new connection rather than reuse one.
        """
        config = self._config
        node = nodes[index]
        loop = asyncio.get_running_loop()
        try:
            conn, reused = await pool.acquire(config.connect_timeout, deadline, fresh=fresh)
        except (OSError, TimeoutError, NoSlot) as exc:
            reason = _describe(exc, config)
            if isinstance(exc, TimeoutError):
                reason = f"connect timed out after {config.connect_timeout:g}s"
            self._failed(node, reason)
            return Outcome.NOT_DELIVERED, reason, True
        reuse = False
        try:
            head = b"%s %s HTTP/1.1\r\nHost: %s\r\n" % (
                request.method.encode(), request.target, self.address_of(node).encode())
            wait = min(config.read_timeout, deadline - loop.time())
            try:
                if body is not None:
                    conn.write(head + upstream_head + body)
                else:
                    conn.write(head + upstream_head)
                    if await self._stream_body(client, request, conn) is not None:
                        return Outcome.ANSWERED, "client", False
                while True:
                    raw = await conn.read_head(65536, max(wait, 0.001), 502)
                    if raw is None:
                        raise EOFError("disconnected before answering")
                    response = parse_response_head(raw)
                    if response.status >= 200:
                        break  # 1xx interim answers are dropped
            except ReadTimeout:
                reason = (f"timed out after {config.read_timeout:g}s"
                          if wait >= config.read_timeout else "timed out (deadline)")
                self._failed(node, reason)
                return Outcome.FAILED, reason, body is not None
            except (EOFError, ConnectionError, HttpError) as exc:
                if reused and body is not None and not isinstance(exc, HttpError):
                    # A kept-alive connection the backend closed just as it
                    # was reused: not a byte came back, so the request was
                    # not processed (RFC 9112 §9.3.1).  Once more, on a new
                    # connection; not a failure of the node.
                    return Outcome.NOT_DELIVERED, "", True
                reason = _describe(exc, config)
                self._failed(node, reason)
                return Outcome.FAILED, reason, body is not None
            status = response.status
            if status in config.fail_on_status:
                self._failed(node, f"HTTP {status}")
            else:
                self._succeeded(node)
            if status in config.retry_statuses and next_attempt(
                    nodes, index, request.method, Outcome.RETRY_STATUS,
                    retry_unsafe=config.retry_unsafe, replayable=body is not None) is not None:
                return Outcome.RETRY_STATUS, f"HTTP {status}", True
            try:
                reuse, keep = await self._relay(client, request, response, conn, node)
            except (EOFError, ReadTimeout) as exc:
                reason = "timed out mid-response" if isinstance(exc, ReadTimeout) \
                    else "disconnected mid-response"
                self._failed(node, reason)
                return Outcome.FAILED, reason, body is not None
            return Outcome.ANSWERED, "", keep
        finally:
            pool.release(conn, reuse)

    async def _try(self, client: Channel, request: RequestHead, nodes: Sequence[str],
                   index: int, pool: Pool, upstream_head: bytes, body: bytes | None,
                   deadline: float) -> tuple[Outcome, str, bool]:
        """``_attempt``, and once more on a new connection when a reused one
        turned out closed (``_attempt`` reports that as NOT_DELIVERED with
        no detail)."""
        outcome, detail, keep = await self._attempt(client, request, nodes, index, pool,
                                                    upstream_head, body, deadline)
        if outcome is Outcome.NOT_DELIVERED and not detail:
            outcome, detail, keep = await self._attempt(client, request, nodes, index, pool,
                                                        upstream_head, body, deadline, True)
            if outcome is Outcome.NOT_DELIVERED and not detail:  # cannot happen: fresh
                detail = "disconnected before answering"
        return outcome, detail, keep

    async def _stream_body(self, client: Channel, request: RequestHead,
                           conn: Channel) -> int | None:
        """Copy the request body from ``client`` to ``conn``; None when done,
        else the status already sent to the client (the body was cut)."""
        config = self._config
        timeout = config.body_timeout
        total = 0
        try:
            if not request.chunked:
                left = request.content_length
                while left:
                    data = await client.read_some(min(left, BLOCK), timeout)
                    if not data:
                        raise EOFError
                    left -= len(data)
                    conn.write(data)
                    await conn.drain()
                return None
            while True:
                size = parse_chunk_size(await client.read_line(4096, timeout))
                total += size
                if total > config.max_body:
                    self._send_last(client, 413, f"request body over {config.max_body} bytes")
                    return 413
                if size == 0:
                    while await client.read_line(8192, timeout):  # trailer fields
                        pass
                    conn.write(b"0\r\n\r\n")
                    return None
                conn.write(b"%x\r\n" % size)
                left = size
                while left:
                    data = await client.read_some(min(left, BLOCK), timeout)
                    if not data:
                        raise EOFError
                    left -= len(data)
                    conn.write(data)
                    await conn.drain()
                if await client.read_line(2, timeout) != b"":
                    raise HttpError(400, "malformed chunked body")
                conn.write(b"\r\n")
        except HttpError as exc:
            self._send_last(client, exc.status, exc.reason)
            return exc.status
        except (ReadTimeout, EOFError):
            self._send_last(client, 408, "request body not received in time")
            return 408

    async def _relay(self, client: Channel, request: RequestHead, response: ResponseHead,
                     conn: Channel, node: str) -> tuple[bool, bool]:
        """Send ``response`` and its body to the client: ``(reuse the backend
        connection, keep the client connection)``."""
        config = self._config
        status = response.status
        keep = request.keep_alive
        lines = [b"HTTP/1.1 %d %s" % (status, response.reason), *response.relay]
        if config.node_header:
            lines.append(config.node_header.encode() + b": " + node.encode())
        no_body = request.method == "HEAD" or status in _NO_BODY or status < 200
        length = response.content_length
        if no_body:
            if length is not None:
                lines.append(b"Content-Length: %d" % length)
            elif response.chunked and request.method == "HEAD":
                lines.append(b"Transfer-Encoding: chunked")
        elif length is not None:
            lines.append(b"Content-Length: %d" % length)
        elif response.chunked:
            lines.append(b"Transfer-Encoding: chunked")
        else:
            keep = False  # the body ends when the backend closes
        dechunk = response.chunked and not no_body and request.version == b"HTTP/1.0"
        if dechunk:  # an HTTP/1.0 client knows no chunks: the body ends at close
            lines.pop()
            keep = False
        if not keep:
            lines.append(b"Connection: close")
        elif request.version == b"HTTP/1.0":
            lines.append(b"Connection: keep-alive")
        head = b"\r\n".join(lines) + b"\r\n\r\n"
        timeout = config.read_timeout
        try:
            if client.peer_closed:  # the client closed its side: nobody will read this
                raise ConnectionResetError("the client closed the connection")
            if no_body:
                client.write(head)
                return response.keep_alive, keep
            if length is not None and length <= BLOCK:
                # Read whole, then written in one call; nothing has reached
                # the client yet, so a backend failing here is an ordinary
                # failed attempt (retried when the method allows).
                data = await conn.read_exact(length, timeout)
                client.write(head + data)
                return response.keep_alive, keep
            client.write(head)
            if length is not None:
                left = length
                while left:
                    try:
                        data = await conn.read_some(min(left, BLOCK), timeout)
                    except ReadTimeout as exc:
                        return self._cut(client, node, exc)
                    if not data:
                        return self._cut(client, node, EOFError())
                    left -= len(data)
                    client.write(data)
                    await client.drain()
                return response.keep_alive, keep
            if response.chunked:
                while True:
                    try:
                        line = await conn.read_line(4096, timeout)
                        size = parse_chunk_size(line)
                        if size == 0:
                            trailer = b""
                            while True:
                                extra = await conn.read_line(8192, timeout)
                                if not extra:
                                    break
                                trailer += extra + b"\r\n"
                            if not dechunk:
                                client.write(b"0\r\n" + trailer + b"\r\n")
                            return response.keep_alive, keep
                        data = await conn.read_exact(size + 2, timeout)
                        if data[-2:] != b"\r\n":
                            raise HttpError(502, "malformed chunk from the backend")
                    except (HttpError, EOFError, ReadTimeout) as exc:
                        return self._cut(client, node, exc)
                    client.write(data[:-2] if dechunk else b"%x\r\n" % size + data)
                    await client.drain()
            while True:  # until the backend closes
                try:
                    data = await conn.read_some(BLOCK, timeout)
                except ReadTimeout as exc:
                    return self._cut(client, node, exc)
                if not data:
                    return False, False
                client.write(data)
                await client.drain()
        except ConnectionError:
            logger.info("client went away before the answer of %s was sent: %s %s", node,
                        request.method, request.target.decode("latin-1")[:200],
                        extra={"node": node})
            return False, False

    def _cut(self, client: Channel, node: str, exc: BaseException) -> tuple[bool, bool]:
        # The status line is gone already: all that is left is to cut the
        # connection, so that the client sees a truncated answer rather
        # than a complete-looking one.
        reason = _describe(exc, self._config)
        logger.warning("backend %s failed mid-response: %s", node, reason,
                       extra={"node": node})
        if self._health is not None:
            self._health.report_failure(node, f"mid-response: {reason}")
        client.abort()
        return False, False
