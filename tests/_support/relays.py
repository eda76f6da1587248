"""A TCP relay that delays and loses, for the partition tests' slow links.

This machine's kernel has no netem, so latency and loss are made here: a
relay listens on an address, connects each client to the target, and
forwards every chunk in each direction ``delay`` seconds after it arrived,
in order.  A lost chunk is what TCP makes of a lost segment: it arrives
late, after a retransmission timeout (``rto``, by default three times the
delay and at least 0.2 s), so with ``loss`` 0.05 one chunk in twenty is
that much later.  The random choices come from ``seed``, so a run can be
replayed.

Run it inside a host of ``tests/_support/netns.py``::

    python relays.py LISTEN_HOST:PORT TARGET_HOST:PORT --delay 0.2 --loss 0.05 --seed 7

It prints ``ready`` once it listens, and runs until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys

__all__ = ["Relay", "main"]


class Relay:
    """Forwards connections from ``listen`` to ``target`` with ``delay``
    seconds of latency each way, a chunk in ``loss`` late by ``rto``."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], delay: float,
                 loss: float, seed: int, rto: float | None = None) -> None:
        if delay < 0 or not 0 <= loss < 1:
            raise ValueError("delay must be >= 0 and loss in [0, 1)")
        self.listen = listen
        self.target = target
        self.delay = delay
        self.loss = loss
        self.rto = rto if rto is not None else max(0.2, 3 * delay)
        self.random = random.Random(seed)
        self.chunks = 0
        self.late = 0

    async def serve(self) -> asyncio.Server:
        return await asyncio.start_server(self._client, *self.listen)

    async def _client(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, upstream_writer),
                             self._pipe(upstream_reader, writer), return_exceptions=True)
        for each in (writer, upstream_writer):
            each.close()
            try:
                await each.wait_closed()
            except OSError:
                pass

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy ``reader`` to ``writer``, each chunk due ``delay`` (plus
        ``rto`` if lost) after it arrived, never before the one before."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    break
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(chunk)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()  # the other direction may still carry data
            else:
                writer.close()

        sender = asyncio.create_task(send())
        last = 0.0
        try:
            while chunk := await reader.read(65536):
                self.chunks += 1
                due = loop.time() + self.delay
                if self.random.random() < self.loss:
                    self.late += 1
                    due += self.rto
                last = max(last, due)
                queue.put_nowait((last, chunk))
        except OSError:
            pass
        finally:
            queue.put_nowait((last, b""))
            try:
                await sender
            except OSError:
                pass


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("listen", type=_address)
    parser.add_argument("target", type=_address)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--loss", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    relay = Relay(args.listen, args.target, args.delay, args.loss, args.seed)

    async def run() -> None:
        server = await relay.serve()
        print("ready", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(run())


if __name__ == "__main__":
    main(sys.argv[1:])
