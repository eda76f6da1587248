"""Readers of the answers recorded from hash4j (tests/vectors/hash4j/,
README.md there gives their layout and how they were made): JumpBackHash's
(hash, n, bucket) triples and JumpBackAnchor's scripted histories."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "vectors" / "hash4j"

# The ops of an anchor step, as the README numbers them.
ADD, REMOVED, REFUSED, NOTHING = 0, 1, 2, 3
FNV_OFFSET, FNV_PRIME, M64 = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


@dataclass(frozen=True)
class Jumpback:
    hashes: tuple[int, ...]
    counts: tuple[int, ...]
    buckets: tuple[tuple[int, ...], ...]  # buckets[count index][hash index]


@dataclass(frozen=True)
class Checkpoint:
    live: int
    buckets: tuple[int, ...]  # at every probe (empty when live == 0)
    state: bytes


@dataclass(frozen=True)
class Step:
    op: int
    arg: int  # the Java int's bits
    digest: int
    checkpoint: Checkpoint | None


@dataclass(frozen=True)
class History:
    kind: int  # 1: hash4j's stability test (digests over its own lookups), 0: shared probes
    seed: int
    checksum: int
    steps: tuple[Step, ...]
    final: Checkpoint


@dataclass(frozen=True)
class Anchor:
    probes: tuple[int, ...]
    histories: tuple[History, ...]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def one(self, fmt: str) -> int:
        return self.take(fmt)[0]

    def raw(self, n: int) -> bytes:
        self.at += n
        return self.data[self.at - n:self.at]


def jumpback() -> Jumpback:
    r = _Reader((HERE / "jumpback.bin").read_bytes())
    assert r.raw(8) == b"CHJBACK1"
    nhashes, ncounts = r.take("II")
    hashes = r.take(f"{nhashes}Q")
    counts = r.take(f"{ncounts}I")
    buckets = tuple(r.take(f"{nhashes}I") for _ in counts)
    assert r.at == len(r.data)
    return Jumpback(hashes, counts, buckets)


def _checkpoint(r: _Reader, nprobes: int) -> Checkpoint:
    live = r.one("I")
    buckets = r.take(f"{nprobes}I") if live else ()
    return Checkpoint(live, buckets, r.raw(r.one("I")))


def anchor() -> Anchor:
    r = _Reader((HERE / "anchor.bin").read_bytes())
    assert r.raw(8) == b"CHACCHR1"
    nprobes = r.one("I")
    probes = r.take(f"{nprobes}Q")
    histories = []
    for _ in range(r.one("I")):
        kind, seed, checksum, nsteps = r.take("IQQI")
        steps = []
        for _ in range(nsteps):
            op, arg, digest, follows = r.take("BIQB")
            steps.append(Step(op, arg, digest, _checkpoint(r, nprobes) if follows else None))
        histories.append(History(kind, seed, checksum, tuple(steps), _checkpoint(r, nprobes)))
    assert r.at == len(r.data)
    return Anchor(probes, tuple(histories))


def digest(buckets: list[int] | None) -> int:
    """The README's digest of one step's answers (0: no bucket)."""
    if buckets is None:
        return 0
    d = FNV_OFFSET
    for b in buckets:
        d = ((d ^ (b & 0xFFFFFFFF)) * FNV_PRIME) & M64
    return d


class SplittableRandom:
    """java.util.SplittableRandom's nextLong / nextInt(bound) / nextDouble,
    for replaying hash4j's stability test (its random choices)."""

    GOLDEN = 0x9E3779B97F4A7C15

    def __init__(self, seed: int) -> None:
        self.seed = seed & M64

    @staticmethod
    def _mix64(z: int) -> int:
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    @staticmethod
    def _mix32(z: int) -> int:
        z = ((z ^ (z >> 33)) * 0x62A9D9ED799705F5) & M64
        return (((z ^ (z >> 28)) * 0xCB24D0A5C88C35B3) & M64) >> 32

    def _next(self) -> int:
        self.seed = (self.seed + self.GOLDEN) & M64
        return self.seed

    def next_long(self) -> int:
        return self._mix64(self._next())

    def next_double(self) -> float:
        return (self.next_long() >> 11) * (1.0 / (1 << 53))

    def next_int(self) -> int:
        """nextInt(): a signed 32-bit int."""
        v = self._mix32(self._next())
        return v - (1 << 32) if v >= 1 << 31 else v

    def next_int_below(self, bound: int) -> int:
        """nextInt(bound), Java's int arithmetic (overflow included)."""
        m = bound - 1
        x = self.next_int() & 0xFFFFFFFF
        if bound & m == 0:
            return x & m
        u = x >> 1
        while True:
            res = u % bound
            if u + m - res <= (1 << 31) - 1:
                return res
            u = (self.next_int() & 0xFFFFFFFF) >> 1
