"""Where WebSocket frames begin, from their headers alone (RFC 6455 §5.2).

The gateway relays a tunnel's bytes unchanged and never parses a payload.
To close a tunnel politely (a ring change, a stop) it must put its own
close frame between two of the backend's frames, never inside one:
``FrameBoundaries`` follows the backend-to-client byte stream by reading
each frame's header (2 to 14 bytes: the length, and a masking key if the
mask bit is set) and skipping its payload by count.  It is total: any
bytes are a stream of frames to it, whatever their opcodes or reserved
bits say, so it never raises.  It also tells whether a close frame's
header went by (the backend closing the WebSocket).  No I/O.
"""

from __future__ import annotations

__all__ = ["FrameBoundaries", "close_frame"]


def _header_size(head: bytes) -> int:
    """The size of the frame header that ``head`` (at least 2 bytes) begins."""
    length = head[1] & 0x7F
    size = 2 + (2 if length == 126 else 8 if length == 127 else 0)
    return size + 4 if head[1] & 0x80 else size


def _payload_length(head: bytes) -> int:
    """The payload length a complete frame header gives."""
    length = head[1] & 0x7F
    if length == 126:
        return int.from_bytes(head[2:4], "big")
    if length == 127:
        return int.from_bytes(head[2:10], "big")
    return length


class FrameBoundaries:
    """The frame boundaries of one byte stream, fed in order (``feed``)."""

    __slots__ = ("_head", "_left", "saw_close")

    def __init__(self) -> None:
        self._left = 0  # payload bytes of the current frame still to come
        self._head = b""  # the bytes of a frame header begun
        #: Whether a close frame's header (opcode 8) was read.
        self.saw_close = False

    @property
    def at_boundary(self) -> bool:
        """Whether the bytes fed so far end exactly where a frame ends (or
        nothing was fed)."""
        return not self._left and not self._head

    def feed(self, data: bytes) -> int:
        """Follow the stream over ``data``; the offset in ``data`` just past
        the first frame that ends inside it (1 to ``len(data)``), or -1 if
        none does."""
        first = -1
        pos, end = 0, len(data)
        left, head = self._left, self._head
        while True:
            if left:
                if end - pos < left:
                    self._left, self._head = left - (end - pos), b""
                    return first
                pos += left
                left = 0
                if first < 0:
                    first = pos
            if pos >= end:
                break
            if not head and end - pos >= 14:
                # A whole header is in ``data`` (at most 14 bytes): read in place.
                b1 = data[pos + 1]
                if data[pos] & 0x0F == 0x8:
                    self.saw_close = True
                left = b1 & 0x7F
                if left < 126:
                    pos += 2
                elif left == 126:
                    left = data[pos + 2] << 8 | data[pos + 3]
                    pos += 4
                else:
                    left = int.from_bytes(data[pos + 2:pos + 10], "big")
                    pos += 10
                if b1 & 0x80:
                    pos += 4
            else:
                # A header cut by the end of a piece: gathered across pieces.
                piece = head + data[pos:pos + 14 - len(head)]
                if len(piece) < 2 or len(piece) < _header_size(piece):
                    self._left, self._head = 0, piece  # it goes on in the next bytes
                    return first
                size = _header_size(piece)
                if piece[0] & 0x0F == 0x8:
                    self.saw_close = True
                pos += size - len(head)
                head = b""
                left = _payload_length(piece)
            if not left and first < 0:
                first = pos
        self._left, self._head = 0, b""
        return first


def close_frame(code: int, mask: bytes | None = None) -> bytes:
    """A close frame with status ``code`` and no reason: unmasked (a
    server's), or masked with the 4-byte ``mask`` (a client's, RFC 6455
    §5.3: what the gateway sends a backend)."""
    if not 1000 <= code <= 4999:
        raise ValueError(f"a close code is 1000 to 4999, not {code!r}")
    if mask is None:
        return b"\x88\x02" + code.to_bytes(2, "big")
    if len(mask) != 4:
        raise ValueError(f"a masking key is 4 bytes, not {len(mask)}")
    payload = bytes(a ^ b for a, b in zip(code.to_bytes(2, "big"), mask, strict=False))
    return b"\x88\x82" + mask + payload
