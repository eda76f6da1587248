"""The frame-header reader of the tunnels (chash.gateway.frames): the
boundaries it finds are those of the frames a real encoder (the websockets
library's) wrote, wherever the stream is cut, and any bytes at all are a
stream to it: it never raises.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chash.gateway.frames import FrameBoundaries, close_frame

frames_mod = pytest.importorskip("websockets.frames", reason="websockets is not installed")


def _encode(opcode: int, payload: bytes, fin: bool, mask: bool) -> bytes:
    """One frame as the websockets library writes it (its own encoder)."""
    frame = frames_mod.Frame(frames_mod.Opcode(opcode), payload, fin=fin)
    return frame.serialize(mask=mask, extensions=[])


_FRAME = st.tuples(
    st.sampled_from([0x0, 0x1, 0x2, 0x9, 0xA]),
    st.one_of(st.binary(max_size=200), st.integers(0, 70000).map(lambda n: b"x" * n)),
    st.booleans(), st.booleans())


def _ends(frames: list[bytes]) -> list[int]:
    ends, at = [], 0
    for frame in frames:
        at += len(frame)
        ends.append(at)
    return ends


def _boundaries_seen(stream: bytes, cuts: list[int]) -> list[int]:
    """Feed ``stream`` in pieces cut at ``cuts``: where the reader says a
    frame ended, as offsets in the whole stream (each piece's first
    boundary, and every piece end it reports as a boundary)."""
    reader = FrameBoundaries()
    seen = []
    start = 0
    for end in [*sorted(set(cuts)), len(stream)]:
        if end <= start:
            continue
        piece = stream[start:end]
        first = reader.feed(piece)
        if first >= 0:
            seen.append(start + first)
        if reader.at_boundary:
            seen.append(end)
        start = end
    return sorted(set(seen))


@given(st.lists(_FRAME, min_size=1, max_size=8), st.lists(st.integers(0, 300000), max_size=10))
def test_the_boundaries_are_the_encoders_wherever_the_stream_is_cut(
        spec: list[tuple[int, bytes, bool, bool]], cuts: list[int]) -> None:
    frames = [_encode(opcode if opcode else 0x0, payload if opcode < 8 else payload[:125],
                      fin or opcode >= 8, mask) for opcode, payload, fin, mask in spec]
    stream = b"".join(frames)
    ends = _ends(frames)
    seen = _boundaries_seen(stream, [c for c in cuts if c < len(stream)])
    # Every boundary seen is a real frame end; the stream's end is one.
    assert set(seen) <= set(ends)
    assert seen[-1] == len(stream)


@given(st.lists(_FRAME, min_size=1, max_size=6))
def test_byte_by_byte_every_frame_end_is_found(spec: list[tuple[int, bytes, bool, bool]]) -> None:
    frames = [_encode(opcode, payload[:125] if opcode >= 8 else payload[:300],
                      fin or opcode >= 8, mask) for opcode, payload, fin, mask in spec]
    stream = b"".join(frames)
    reader = FrameBoundaries()
    found = []
    for offset in range(len(stream)):
        if reader.feed(stream[offset:offset + 1]) == 1:
            found.append(offset + 1)
    assert found == _ends(frames)


@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=8))
def test_any_bytes_are_read_without_an_error(data: bytes, cuts: list[int]) -> None:
    reader = FrameBoundaries()
    start = 0
    for end in [*sorted(set(c for c in cuts if c <= len(data))), len(data)]:
        first = reader.feed(data[start:end])
        assert first == -1 or 1 <= first <= end - start
        start = max(start, end)


def test_headers_of_every_size() -> None:
    # 2 bytes (length 0..125), 4 (126: 16-bit length), 10 (127: 64-bit),
    # each with 4 more for a mask; the 64-bit length is read whole.
    for payload, mask, size in ((b"", False, 2), (b"a" * 125, True, 6), (b"a" * 126, False, 4),
                                (b"a" * 65536, True, 14)):
        frame = _encode(0x2, payload, True, mask)
        assert len(frame) - len(payload) == size
        reader = FrameBoundaries()
        assert reader.feed(frame[:size - 1]) == -1 and not reader.at_boundary
        assert reader.feed(frame[size - 1:]) == len(frame) - size + 1
        assert reader.at_boundary
    huge = bytes([0x82, 127]) + (1 << 63).to_bytes(8, "big")
    reader = FrameBoundaries()
    assert reader.feed(huge + b"x" * 10) == -1 and not reader.at_boundary


def test_close_frames_are_the_protocols() -> None:
    parsed = frames_mod.Close.parse(close_frame(1012)[2:])
    assert parsed.code == 1012
    assert close_frame(1001) == b"\x88\x02\x03\xe9"
    with pytest.raises(ValueError, match="1000 to 4999"):
        close_frame(999)


def test_a_masked_close_frame_is_what_a_client_sends() -> None:
    """The frame the gateway sends a backend: read back by the websockets
    library's own parser as a server reads a client's frames."""
    frame = close_frame(1001, mask=b"\x12\x34\x56\x78")
    assert frame[:6] == b"\x88\x82\x12\x34\x56\x78"
    chunks = [frame]

    def read_exact(n: int):  # type: ignore[no-untyped-def]
        data = chunks[0][:n]
        chunks[0] = chunks[0][n:]
        yield from ()
        return data

    reading = frames_mod.Frame.parse(read_exact, mask=True)
    try:
        next(reading)
    except StopIteration as done:
        parsed = done.value
    assert parsed.opcode is frames_mod.Opcode.CLOSE
    assert frames_mod.Close.parse(parsed.data).code == 1001
    reader = FrameBoundaries()
    assert reader.feed(frame) == len(frame) and reader.saw_close
    with pytest.raises(ValueError, match="4 bytes"):
        close_frame(1001, mask=b"\x00")


def test_a_close_frame_is_noticed() -> None:
    reader = FrameBoundaries()
    reader.feed(_encode(0x1, b"hi", True, False) + _encode(0x9, b"", True, False))
    assert not reader.saw_close
    reader.feed(close_frame(1000)[:1])
    assert not reader.saw_close  # its header is not complete yet
    reader.feed(close_frame(1000)[1:])
    assert reader.saw_close and reader.at_boundary
