"""Echo backends on 127.0.0.1 for the gateway tests (aiohttp servers).

Each ``EchoBackend`` listens on an OS-chosen port and answers every request
with JSON describing it (which backend, method, path, query, headers,
body), so a test sees exactly what the gateway forwarded.  A test may
change its behaviour at any time:

* ``status = 503``: answer that status (``/health`` excepted);
* ``health = 500``: answer that status on ``/health``;
* ``delay = 5.0``: wait that long before answering;
* ``gate = asyncio.Event()``: hold every answer until the event is set;
* ``await stop()`` / ``await start()``: close the port (connections are
  refused) and listen on the same port again.

With ``tls`` (a server ``ssl.SSLContext``) a backend serves HTTPS: its
``address`` is then ``https://localhost:PORT``, and ``server_names``
records the SNI of every handshake.

``GET /big/N`` answers N bytes; ``GET /cut?size=N`` starts an N-byte answer (1000 by
default) and drops the connection a tenth of the way; ``POST /sink`` reads the body in blocks and answers its
size (``sunk`` adds them up).
"""

from __future__ import annotations

import asyncio
import ssl

from aiohttp import web

from _support.ports import PortClaim


class EchoBackend:
    """One HTTP backend; see the module docstring."""

    def __init__(self, name: str, tls: ssl.SSLContext | None = None) -> None:
        self.name = name
        self.tls = tls
        self.server_names: list[str | None] = []
        if tls is not None:
            tls.sni_callback = self._sni
        self._claim = PortClaim()
        self.port = self._claim.port
        self.status = 200
        self.health = 200
        self.delay = 0.0
        self.gate: asyncio.Event | None = None
        self.hits = 0
        self.sunk = 0
        self.peers: set[tuple[str, int]] = set()
        self._runner: web.AppRunner | None = None

    @property
    def address(self) -> str:
        """host:port, or https://localhost:port with TLS."""
        if self.tls is not None:
            return f"https://localhost:{self.port}"
        return f"127.0.0.1:{self.port}"

    def _sni(self, _ssl: object, name: str | None, _context: object) -> None:
        self.server_names.append(name)

    @property
    def running(self) -> bool:
        """Whether the backend listens."""
        return self._runner is not None

    async def start(self) -> EchoBackend:
        """Listen (on the same port as before, once it has one)."""
        if self._runner is not None:
            return self
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/big/{size}", self._big)
        app.router.add_get("/cut", self._cut)
        app.router.add_post("/sink", self._sink)
        app.router.add_route("*", "/{tail:.*}", self._echo)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        # The port stays claimed while stopped, so nothing else takes it.
        site = web.SockSite(runner, self._claim.listener(), ssl_context=self.tls)
        await site.start()
        self._runner = runner
        return self

    async def stop(self) -> EchoBackend:
        """Stop listening and close every connection."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        return self

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.health, text="ok\n")

    async def _big(self, request: web.Request) -> web.StreamResponse:
        size = int(request.match_info["size"])
        response = web.StreamResponse(headers={"X-Backend": self.name})
        response.content_length = size
        await response.prepare(request)
        block = b"x" * 65536
        left = size
        while left:
            await response.write(block[:min(left, len(block))])
            left -= min(left, len(block))
        await response.write_eof()
        return response

    async def _sink(self, request: web.Request) -> web.Response:
        size = 0
        async for block in request.content.iter_any():
            size += len(block)
        self.sunk += size
        return web.Response(text=str(size), headers={"X-Backend": self.name})

    async def _cut(self, request: web.Request) -> web.StreamResponse:
        size = int(request.query.get("size", "1000"))
        response = web.StreamResponse(headers={"X-Backend": self.name})
        response.content_length = size
        await response.prepare(request)
        await response.write(b"y" * (size // 10))
        assert request.transport is not None
        request.transport.close()
        return response

    async def _echo(self, request: web.Request) -> web.Response:
        self.hits += 1
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer:
            self.peers.add((peer[0], peer[1]))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.gate is not None:
            await self.gate.wait()
        body = await request.read()
        response = web.json_response({
            "backend": self.name,
            "method": request.method,
            "secure": request.transport.get_extra_info("sslcontext") is not None
            if request.transport else None,
            "path": request.path,
            "raw_path": request.raw_path,
            "query": request.query_string,
            "headers": {k: v for k, v in request.headers.items()},
            "header_names": [k.lower() for k in request.headers],
            "body": body.decode("utf-8", "replace"),
        }, status=self.status)
        response.headers["X-Backend"] = self.name
        response.headers.add("Set-Cookie", "a=1")
        response.headers.add("Set-Cookie", "b=2")
        return response
