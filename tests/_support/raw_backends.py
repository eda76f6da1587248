"""A scripted TCP backend on 127.0.0.1 (asyncio), for tests that need the
exact bytes on the wire: what the gateway sent, and an answer written byte
for byte (bad framing, trailer fields, a close at a chosen moment).

``RawBackend(answer, until=...)`` reads each request until the bytes
``until`` have arrived (the end of a head by default; ``b"0\\r\\n\\r\\n"``
for a chunked body), records it in ``requests``, writes ``answer`` and, if
``close``, closes the connection; otherwise it waits for the next request
on the same connection.  ``connections`` counts the connections accepted.
Start and stop it inside the test's own event loop.
"""

from __future__ import annotations

import asyncio


class RawBackend:
    """One scripted backend; see the module docstring."""

    def __init__(self, answer: bytes, *, until: bytes = b"\r\n\r\n",
                 close: bool = False) -> None:
        self.answer = answer
        self.until = until
        self.close = close
        self.requests: list[bytes] = []
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        """host:port."""
        return f"127.0.0.1:{self.port}"

    async def start(self) -> RawBackend:
        """Listen on an OS-chosen port."""
        # A generous read limit: a request of several MiB is read in one piece.
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=1 << 24)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while True:
                try:
                    request = await reader.readuntil(self.until)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.requests.append(request)
                writer.write(self.answer)
                await writer.drain()
                if self.close:
                    return
        finally:
            self._writers.discard(writer)
            writer.close()
