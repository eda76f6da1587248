"""Message bodies on the wire: one of known length, and the chunked coding.

The proxy copies bodies in both directions, requests from the client to a
backend and responses from a backend to the client, with the same two
pieces: ``copy_exactly`` for a body whose length was announced and
``copy_chunked``, the one chunked decoder (RFC 9112 §7.1).  Both copy at
most ``BLOCK`` bytes at a time and wait for the receiving side to drain
after each, so that memory stays bounded however large the body.
"""

from __future__ import annotations

from chash.gateway.channel import BLOCK, Channel
from chash.gateway.heads import HttpError

__all__ = ["copy_chunked", "copy_exactly", "parse_chunk_size"]

#: The longest chunk-size line (size and extensions) and trailer line read.
_SIZE_LINE = 4096
_TRAILER_LINE = 8192


def parse_chunk_size(line: bytes) -> int:
    """The size on a chunk-size line (extensions ignored); HttpError(400)
    unless it is 1 to 16 hex digits."""
    size = line.split(b";", 1)[0].strip(b" \t")
    if not size or len(size) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in size):
        raise HttpError(400, "malformed chunk size")
    return int(size, 16)


async def copy_exactly(source: Channel, sink: Channel, size: int, timeout: float) -> None:
    """Copy exactly ``size`` bytes from ``source`` to ``sink``, waiting for
    ``sink`` to drain after each block.  EOFError if ``source`` closes
    first; ReadTimeout if it stays silent for ``timeout`` seconds."""
    left = size
    while left:
        data = await source.read_some(min(left, BLOCK), timeout)
        if not data:
            raise EOFError(f"connection closed after {size - left} of {size} bytes")
        left -= len(data)
        sink.write(data)
        await sink.drain()


async def copy_chunked(source: Channel, sink: Channel, timeout: float, *, rechunk: bool,
                       trailers: bool, limit: int | None = None) -> None:
    """Decode the chunked body arriving on ``source`` and write it to ``sink``.

    ``rechunk``: write it chunked again, each chunk as large as it came
    (extensions dropped), then the last chunk and a trailer section: the
    trailer fields as received if ``trailers``, else none.  Not
    ``rechunk``: write the data alone, trailers dropped (for an HTTP/1.0
    client, whose body ends when the connection closes).

    Raises HttpError(413) as soon as the data would exceed ``limit`` bytes
    (None: no limit), HttpError(400) when the framing is malformed, and
    EOFError or ReadTimeout when ``source`` closes or stays silent for
    ``timeout`` seconds; what was written by then stays written.
    """
    total = 0
    while True:
        size = parse_chunk_size(await source.read_line(_SIZE_LINE, timeout))
        total += size
        if limit is not None and total > limit:
            raise HttpError(413, f"request body over {limit} bytes")
        if size == 0:
            break
        if rechunk:
            sink.write(b"%x\r\n" % size)
        await copy_exactly(source, sink, size, timeout)
        if await source.read_line(2, timeout) != b"":
            raise HttpError(400, "malformed chunked body")
        if rechunk:
            sink.write(b"\r\n")
    fields = b""
    while line := await source.read_line(_TRAILER_LINE, timeout):
        fields += line + b"\r\n"
    if rechunk:
        sink.write(b"0\r\n" + (fields if trailers else b"") + b"\r\n")
