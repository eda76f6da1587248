"""The demo's backends: small aiohttp servers that keep state in memory.

``SessionBackend`` keeps each user's session (``chash demo``);
``RoomBackend`` keeps chat rooms whose players talk over WebSocket
(``chash demo --rooms``), and serves a page that joins a room from a
browser.  Stopping either loses what it held, as a restarted process would.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from types import ModuleType
from typing import TYPE_CHECKING, Any

from chash._optional import require

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["ROOM_PAGE", "RoomBackend", "SessionBackend", "aiohttp_module", "listen", "web_module"]


def aiohttp_module() -> ModuleType:
    """aiohttp (the gateway extra); ImportError naming the extra without it."""
    return require("aiohttp", user="chash.demo", extra="gateway")


def web_module() -> ModuleType:
    """aiohttp.web, as ``aiohttp_module()``."""
    return require("aiohttp.web", user="chash.demo", extra="gateway", package="aiohttp")


async def listen(runner: web.AppRunner, port: int) -> int:
    """Set ``runner`` up and serve it on 127.0.0.1:``port`` (0: any free
    port); the port it listens on.  On a restart the old port may be
    briefly taken by an outgoing connection's ephemeral port: it is waited
    for a little.  The runner is cleaned up if it cannot listen."""
    web_ = web_module()
    await runner.setup()
    try:
        for attempt in itertools.count():
            try:
                await web_.TCPSite(runner, "127.0.0.1", port, reuse_address=True).start()
                break
            except OSError:
                if port == 0 or attempt >= 50:
                    raise
                await asyncio.sleep(0.1)
    except BaseException:
        await runner.cleanup()
        raise
    return int(runner.addresses[0][1])


class LoopbackServer:
    """An aiohttp application on 127.0.0.1 that can stop and listen again on
    the same port, as a restarted process would: what the demo's backends
    and the stand-in engine share.  A subclass adds its routes
    (``_routes``) and says how long its open connections get at a stop
    (``SHUTDOWN_TIMEOUT``)."""

    #: Seconds aiohttp gives open connections when the server stops.
    SHUTDOWN_TIMEOUT = 2.0

    def __init__(self) -> None:
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:port`` (the port is chosen by the OS at first start)."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server is listening."""
        return self._runner is not None

    def _routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def _listen(self) -> None:
        """Listen on 127.0.0.1, on the same port as before if restarted;
        nothing when already listening."""
        if self._runner is not None:
            return
        web_ = web_module()
        app = web_.Application()
        self._routes(app)
        runner: web.AppRunner = web_.AppRunner(app, access_log=None,
                                               shutdown_timeout=self.SHUTDOWN_TIMEOUT)
        self.port = await listen(runner, self.port)
        self._runner = runner

    async def _close(self) -> None:
        """Stop listening (nothing when not listening)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


class SessionBackend(LoopbackServer):
    """A small HTTP backend keeping per-user sessions in memory.

    ``GET /health`` answers ``ok``; any other request with an ``X-User-Id``
    header answers JSON ``{"backend", "user", "session", "visits"}``: the
    user's session on this backend (created on the first visit) and how
    many requests it has served.  Stopping the backend loses every session,
    as a restarted process would.
    """

    def __init__(self, name: str) -> None:
        """A backend called ``name``; ``await start()`` to listen."""
        super().__init__()
        self.name = name
        self._sessions: dict[str, tuple[str, int]] = {}
        self._ids = itertools.count(1)

    @property
    def sessions(self) -> int:
        """How many sessions the backend holds."""
        return len(self._sessions)

    async def start(self) -> SessionBackend:
        """Listen on 127.0.0.1, on the same port as before if restarted."""
        await self._listen()
        return self

    def _routes(self, app: web.Application) -> None:
        app.router.add_get("/health", self._health)
        app.router.add_route("*", "/{tail:.*}", self._visit)

    async def stop(self) -> None:
        """Stop listening and forget every session."""
        await self._close()
        self._sessions.clear()

    async def _health(self, request: web.Request) -> web.Response:
        response: web.Response = web_module().Response(text="ok\n")
        return response

    async def _visit(self, request: web.Request) -> web.Response:
        user = request.headers.get("X-User-Id", "")
        session, visits = self._sessions.get(user) or (f"{self.name}-{next(self._ids)}", 0)
        self._sessions[user] = (session, visits + 1)
        response: web.Response = web_module().json_response(
            {"backend": self.name, "user": user, "session": session, "visits": visits + 1})
        return response


#: The page ``RoomBackend`` serves at ``/``: it joins the room of its
#: ``room`` query parameter over WebSocket (on the host it came from, so
#: through the gateway when loaded through it), says hello, and shows what
#: it hears in its body's ``data-`` attributes.
ROOM_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>chash rooms</title></head>
<body data-state="connecting"><pre id="log">connecting</pre>
<script>
const params = new URLSearchParams(location.search);
const room = params.get("room") || "lobby";
const player = params.get("player") || "browser";
const body = document.body;
const log = document.getElementById("log");
const ws = new WebSocket("ws://" + location.host + "/room?room=" + encodeURIComponent(room)
                         + "&player=" + encodeURIComponent(player));
ws.onmessage = (event) => {
  const data = JSON.parse(event.data);
  if (data.type === "joined") {
    body.dataset.backend = data.backend;
    body.dataset.state = "joined";
    ws.send("hello from " + player);
  } else if (data.type === "say") {
    body.dataset.heard = data.from + ": " + data.text + " (on " + data.backend + ")";
    body.dataset.state = "heard";
  }
  log.textContent += "\\n" + event.data;
};
ws.onclose = (event) => { body.dataset.closed = String(event.code); };
</script></body></html>
"""


class RoomBackend(LoopbackServer):
    """A small chat server keeping its rooms in memory.

    ``GET /health`` answers ``ok``; ``GET /`` the page ``ROOM_PAGE``;
    ``GET /room?room=R`` opens a WebSocket into room R: the server says
    ``{"type": "joined", "backend", "room", "members"}``, then sends every
    text a member says to everyone in the room as ``{"type": "say",
    "backend", "room", "from", "text"}``.  A member is named by its
    ``X-User-Id`` header, else its ``player`` query parameter.
    """

    SHUTDOWN_TIMEOUT = 1.0

    def __init__(self, name: str) -> None:
        """A backend called ``name``; ``await start()`` to listen."""
        super().__init__()
        self.name = name
        self.rooms: dict[str, set[Any]] = {}
        self._transports: set[Any] = set()

    async def start(self) -> RoomBackend:
        """Listen on 127.0.0.1, on the same port as before if restarted."""
        await self._listen()
        return self

    def _routes(self, app: web.Application) -> None:
        app.router.add_get("/health", self._health)
        app.router.add_get("/room", self._room)
        app.router.add_get("/", self._page)

    async def die(self) -> None:
        """Stop as a killed process does: every connection reset at once,
        every room lost."""
        for transport in list(self._transports):
            transport.abort()
        await self.stop()

    async def stop(self) -> None:
        """Stop listening and forget every room."""
        await self._close()
        self.rooms.clear()
        self._transports.clear()

    async def _health(self, request: web.Request) -> web.Response:
        response: web.Response = web_module().Response(text="ok\n")
        return response

    async def _page(self, request: web.Request) -> web.Response:
        response: web.Response = web_module().Response(text=ROOM_PAGE, content_type="text/html")
        return response

    async def _room(self, request: web.Request) -> web.WebSocketResponse:
        web_ = web_module()
        ws: web.WebSocketResponse = web_.WebSocketResponse()
        await ws.prepare(request)
        room = request.query.get("room", "")
        player = request.headers.get("X-User-Id") or request.query.get("player", "guest")
        members = self.rooms.setdefault(room, set())
        members.add(ws)
        transport = request.transport
        if transport is not None:
            self._transports.add(transport)
        text_type = aiohttp_module().WSMsgType.TEXT
        try:
            await ws.send_json({"type": "joined", "backend": self.name, "room": room,
                                "members": len(members)})
            async for message in ws:
                if message.type is not text_type:
                    continue
                line = json.dumps({"type": "say", "backend": self.name, "room": room,
                                   "from": player, "text": message.data})
                for member in list(members):
                    with contextlib.suppress(ConnectionError, RuntimeError):
                        await member.send_str(line)
        except ConnectionError:
            pass  # the member went away
        finally:
            members.discard(ws)
            if not members and self.rooms.get(room) is members:
                del self.rooms[room]
            self._transports.discard(transport)
        return ws
