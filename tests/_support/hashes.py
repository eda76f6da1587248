"""Independent oracles for every hash chash implements, written once.

hashlib (MD5, SHA-1, SHA-256), zlib (CRC-32), mmh3 (MurmurHash3 x86_32
and x64_128), the murmurhash2 package (MurmurHash2, 32-bit) and the
xxhash package (XXH32, XXH64, XXH3-64) are the oracles where a library
exists; FNV-1a and the others have none, so they are written here from the
algorithm descriptions.

``ORACLES[name]`` is ``Oracle(value, seed_bits, width)``: ``value(data,
seed)`` is the hash as an int (the digest read big-endian for MD5, SHA-1,
SHA-256 and MurmurHash3 x64_128's 16 bytes), ``seed_bits`` the width of the seed (0 when unseeded), ``width`` the
width of the value in bits.  ``digest(name, data)`` gives the big-endian
digest bytes that ring points are cut from.

``narrow_hash`` and ``signed_narrow_hash`` are hash callables for routers
(``ConsistentHashRouter(hash=narrow_hash)``) whose few positions make
points collide everywhere; module-level, so routers using them pickle.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from typing import NamedTuple

import mmh3
import xxhash

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def fnv1a32(data: bytes) -> int:
    """FNV-1a, 32-bit: xor each byte in, then multiply by the FNV prime."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & M32
    return h


def one_at_a_time(data: bytes) -> int:
    """Bob Jenkins's one-at-a-time hash, each byte taken as a signed char
    (as libmemcached computes it on x86, where char is signed)."""
    h = 0
    for byte in data:
        h = (h + (byte - 256 if byte >= 0x80 else byte)) & M32
        h = (h + (h << 10)) & M32
        h ^= h >> 6
    h = (h + (h << 3)) & M32
    h ^= h >> 11
    return (h + (h << 15)) & M32


def sdbm(data: bytes) -> int:
    """sdbm: h = h * 65599 + c for each byte, from 0 (HAProxy's ``sdbm``)."""
    h = 0
    for byte in data:
        h = (h * 65599 + byte) & M32
    return h


def djb2(data: bytes) -> int:
    """djb2: h = h * 33 + c for each byte, from 5381 (HAProxy's ``djb2``)."""
    h = 5381
    for byte in data:
        h = (h * 33 + byte) & M32
    return h


def _rotl(v: int, k: int) -> int:
    return ((v << k) | (v >> (32 - k))) & M32 if k else v


def wt6(data: bytes) -> int:
    """wt6, HAProxy's two-lane hash with data-driven rotations."""
    h0, h1, s0, s1 = 0xA53C965A, 0x5CA6953A, 6, 18
    for t in data:
        h0 = ~(h0 ^ t) & M32
        h1 = ~(h1 + t) & M32
        h0, h1 = _rotl(h1, s0), _rotl(h0, s1)
        u = ((h0 >> 16) ^ h1) & 0xFFFF
        s0, s1 = u & 31, u >> 11
    return h0 ^ h1


def full_hash(a: int) -> int:
    """Bob Jenkins' 32-bit full-avalanche integer hash times 3221225473
    (HAProxy's ``full_hash``, its ``avalanche`` modifier)."""
    a = ((a + 0x7ED55D16) + (a << 12)) & M32
    a = ((a ^ 0xC761C23C) ^ (a >> 19)) & M32
    a = ((a + 0x165667B1) + (a << 5)) & M32
    a = ((a + 0xD3A2646C) ^ (a << 9)) & M32
    a = ((a + 0xFD7046C5) + (a << 3)) & M32
    a = ((a ^ 0xB55A4F09) ^ (a >> 16)) & M32
    return (a * 3221225473) & M32


def _murmurhash2(data: bytes, seed: int) -> int:
    """MurmurHash2 (32-bit) as the murmurhash2 package computes it; the
    package (the test extra's) is imported when first used, so that what
    imports this module only for the other hashes (the benchmarks'
    reference router) does not need it."""
    import murmurhash2

    return int(murmurhash2.murmurhash2(data, seed))


class Oracle(NamedTuple):
    """One hash function: its value, seed width and result width in bits."""

    value: Callable[[bytes, int], int]
    seed_bits: int
    width: int


ORACLES: dict[str, Oracle] = {
    "md5": Oracle(lambda d, s: int.from_bytes(hashlib.md5(d).digest(), "big"), 0, 128),
    "sha1": Oracle(lambda d, s: int.from_bytes(hashlib.sha1(d).digest(), "big"), 0, 160),
    # Austin Appleby's MurmurHash2 (h = seed ^ length, m = 0x5bd1e995, r = 24),
    # as the murmurhash2 package computes it: it gives SMHasher's published
    # verification value (tests/ring/test_hash_oracles.py).
    "murmur2": Oracle(_murmurhash2, 32, 32),
    "murmur3": Oracle(lambda d, s: mmh3.hash(d, s, signed=False), 32, 32),
    "xxh32": Oracle(lambda d, s: xxhash.xxh32_intdigest(d, s), 32, 32),
    "xxh64": Oracle(lambda d, s: xxhash.xxh64_intdigest(d, s), 64, 64),
    "xxh3": Oracle(lambda d, s: xxhash.xxh3_64_intdigest(d, s), 64, 64),
    "fnv1a": Oracle(lambda d, s: fnv1a32(d), 0, 32),
    "crc32": Oracle(lambda d, s: zlib.crc32(d) & M32, 0, 32),
    "one_at_a_time": Oracle(lambda d, s: one_at_a_time(d), 0, 32),
    "sdbm": Oracle(lambda d, s: sdbm(d), 0, 32),
    "djb2": Oracle(lambda d, s: djb2(d), 0, 32),
    "wt6": Oracle(lambda d, s: wt6(d), 0, 32),
    "sdbm_avalanche": Oracle(lambda d, s: full_hash(sdbm(d)), 0, 32),
    "djb2_avalanche": Oracle(lambda d, s: full_hash(djb2(d)), 0, 32),
    "wt6_avalanche": Oracle(lambda d, s: full_hash(wt6(d)), 0, 32),
    "crc32_avalanche": Oracle(lambda d, s: full_hash(zlib.crc32(d) & M32), 0, 32),
    "sha256": Oracle(lambda d, s: int.from_bytes(hashlib.sha256(d).digest(), "big"), 0, 256),
    # Its 16 bytes (h1, h2 little-endian, as Guava's HashCode holds them)
    # read big-endian, like the other byte digests.
    "murmur3_128": Oracle(lambda d, s: int.from_bytes(mmh3.hash_bytes(d, s), "big"), 32, 128),
}


def value(name: str, data: bytes, seed: int = 0) -> int:
    """The hash ``name`` of ``data`` as an int (unseeded hashes ignore ``seed``)."""
    return ORACLES[name].value(data, seed)


def digest(name: str, data: bytes) -> bytes:
    """The big-endian digest bytes of ``name`` (seed 0) that ring points are cut from."""
    return value(name, data).to_bytes(ORACLES[name].width // 8, "big")


def narrow_hash(data: bytes) -> int:
    """64 ring positions (CRC-32 mod 64): most points collide, and many keys
    land exactly on a point."""
    return zlib.crc32(data) % 64


def signed_narrow_hash(data: bytes) -> int:
    """97 ring positions, negative values included (CRC-32 mod 97, less 48):
    most points collide, and the router must take a negative int mod 2**32."""
    return zlib.crc32(data) % 97 - 48
