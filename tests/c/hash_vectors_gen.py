#!/usr/bin/env python3
"""Regenerate the oracle-derived vectors in tests/c/test_hash.c.

Every vector hashes a prefix of one deterministic byte pattern (see
pattern() below, mirrored by fill_pattern() in test_hash.c) with an oracle:
hashlib for MD5, SHA-1 and SHA-256, zlib for CRC-32, mmh3 for MurmurHash3
(x86_32, and x64_128's bytes as mmh3.hash_bytes gives them), the
xxhash package for XXH32/XXH64/XXH3, the murmurhash2 package for
MurmurHash2, and for FNV-1a the small reference implementation of
tests/_support/hashes.py.

The output replaces the text between the BEGIN/END GENERATED VECTORS
markers of test_hash.c.  Usage: python3 tests/c/hash_vectors_gen.py
"""
import hashlib
import os
import sys

import mmh3

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from _support.hashes import M32, ORACLES  # noqa: E402

TARGET = os.path.join(HERE, "test_hash.c")
BEGIN = "/* BEGIN GENERATED VECTORS (tests/c/hash_vectors_gen.py) */\n"
END = "/* END GENERATED VECTORS */\n"


def pattern(n):
    """Byte i is the top byte of i * 2654435761 mod 2^32 (all 256 values)."""
    return bytes(((i * 2654435761) & M32) >> 24 for i in range(n))


# Lengths cover every branch of every function: each tail size, block and
# stripe boundaries (MD5/SHA-1 55/56/63/64/119/120, XXH32 16, XXH64 32, the
# XXH3 classes 0, 1-3, 4-8, 9-16, 17-128, 129-240, >240 and its 64-byte
# stripes and 1024-byte blocks), and a few kilobytes.
LENGTHS = sorted(set(
    [*range(0, 34), 47, 48, 55, 56, 57, 63, 64, 65, 95, 96, 97, 100, 119, 120, 127, 128,
     129, 130, 143, 144, 200, 239, 240, 241, 242, 255, 256, 257, 300, 511,
     512, 513, 1000, 1023, 1024, 1025, 1087, 1088, 1089, 2047, 2048, 2049,
     3000, 4096, 5000, 8191, 10000]))

SEEDS32 = [0, 1, 0x9747B28C, 0xFFFFFFFF]
SEEDS64 = [0, 1, 0x9747B28C, 0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFF]


def seeded(name, fn, seeds, width):
    rows = []
    for n in LENGTHS:
        d = pattern(n)
        for s in seeds:
            rows.append("    {%d, 0x%0*xu, 0x%0*xu}," % (
                n, width // 4, s, width // 4, fn(d, s)))
    kind = "vec%d" % width
    return "static const struct %s %s_vectors[] = {\n%s\n};\n" % (
        kind, name, "\n".join(rows))


def digest(name, fn):
    rows = []
    for n in LENGTHS:
        rows.append('    {%d, "%s"},' % (n, fn(pattern(n)).hexdigest()))
    return "static const struct vecdig %s_vectors[] = {\n%s\n};\n" % (
        name, "\n".join(rows))


def seeded_digest(name, fn, seeds):
    rows = []
    for n in LENGTHS:
        for s in seeds:
            rows.append('    {%d, 0x%08xu, "%s"},' % (n, s, fn(pattern(n), s).hex()))
    return "static const struct vecdigs %s_vectors[] = {\n%s\n};\n" % (
        name, "\n".join(rows))


def unseeded(name, fn):
    rows = []
    for n in LENGTHS:
        rows.append("    {%d, 0, 0x%08xu}," % (n, fn(pattern(n))))
    return "static const struct vec32 %s_vectors[] = {\n%s\n};\n" % (
        name, "\n".join(rows))


SECTIONS = [
    lambda: digest("md5", hashlib.md5),
    lambda: digest("sha1", hashlib.sha1),
    lambda: seeded("murmur2", ORACLES["murmur2"].value, SEEDS32, 32),
    lambda: seeded("murmur3", ORACLES["murmur3"].value, SEEDS32, 32),
    lambda: seeded("xxh32", ORACLES["xxh32"].value, SEEDS32, 32),
    lambda: seeded("xxh64", ORACLES["xxh64"].value, SEEDS64, 64),
    lambda: seeded("xxh3", ORACLES["xxh3"].value, SEEDS64, 64),
    lambda: unseeded("fnv1a", lambda d: ORACLES["fnv1a"].value(d, 0)),
    lambda: unseeded("crc32", lambda d: ORACLES["crc32"].value(d, 0)),
    lambda: unseeded("one_at_a_time", lambda d: ORACLES["one_at_a_time"].value(d, 0)),
    lambda: digest("sha256", hashlib.sha256),
    lambda: seeded_digest("murmur3_128", mmh3.hash_bytes, SEEDS32),
]


def main():
    body = "\n".join(make() for make in SECTIONS)
    with open(TARGET, encoding="utf-8") as f:
        text = f.read()
    start = text.index(BEGIN) + len(BEGIN)
    stop = text.index(END)
    new = text[:start] + body + text[stop:]
    if new != text:
        with open(TARGET, "w", encoding="utf-8") as f:
            f.write(new)
        print("updated", TARGET)
    else:
        print("unchanged", TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main())
