"""Writes the seed corpus of tests/fuzz/fuzz_wide.c into tests/fuzz/corpus_wide/.

Each seed is a short program in that fuzzer's input format (an operation
byte, then its arguments, big-endian; missing bytes read as zeros): a build
and probes of rings with repeated values and the ends of the range, Envoy's
counts and point keys, Maglev fills, failing allocations.

    python3 tests/fuzz/make_corpus_wide.py          # rewrite the corpus
    python3 tests/fuzz/make_corpus_wide.py --check  # exit 1 if it is stale
"""
from __future__ import annotations

import sys
from pathlib import Path

from corpus_files import write_corpus

CORPUS = Path(__file__).resolve().parent / "corpus_wide"
(OP_BUILD, OP_PROBE, OP_COUNTS, OP_POINTS, OP_MAGLEV, OP_FAILNEXT, OP_ENVOY_TABLE, OP_MOD, OP_JUMP,
 OP_LOADS) = range(10)


def build(points: int, nodes: int, kinds: list[int]) -> bytes:
    """A build of `points` points over `nodes` nodes, point kinds cycling
    (0: zero, 1: max, 2: a repeat, 3: one bucket, 4: any)."""
    out = bytes([OP_BUILD, points & 0xFF, points >> 8, nodes, 1])
    for i in range(points):
        kind = kinds[i % len(kinds)]
        out += bytes([kind]) + (bytes([i % 7]) if kind in (2, 3) else b"")
        out += (i * 0x9E3779B97F4A7C15 % 2**64).to_bytes(8, "big") if kind >= 4 else b""
        out += bytes([i % max(nodes, 1)])
    return out


def probe(n: int) -> bytes:
    return bytes([OP_PROBE]) + bytes([i % 251 for i in range(3 * n)]) + bytes([5])


def envoy_table(size: int, hosts: list[tuple[bytes, int]]) -> bytes:
    """An ENVOY_TABLE of the size picked by `size` and hosts (key bytes,
    each read % 4 as a letter; a weight byte)."""
    out = bytes([OP_ENVOY_TABLE, size, len(hosts)])
    for key, weight in hosts:
        out += bytes([len(key)]) + key + bytes([weight + 4 if weight else 0])
    return out


def seeds() -> dict[str, bytes]:
    return {
        "ring-small": build(12, 6, [4]) + probe(8),
        "ring-repeats": build(40, 3, [4, 2, 2, 0, 1]) + probe(8),
        "ring-one-bucket": build(200, 16, [3, 4]) + probe(8) + probe(8),
        "ring-failing": build(30, 4, [4]) + bytes([OP_FAILNEXT, 1]) + build(50, 5, [4]) + probe(8),
        "counts": bytes([OP_COUNTS, 3, 1, 2, 3, 0x18, 0x00, 1, 0x00, 0x20, 0x00])
                  + bytes([OP_COUNTS, 4, 1, 1, 1, 1, 2, 0, 0]),
        "points": bytes([OP_POINTS, 1, 12]) + b"127.0.0.1:90" + bytes([3, 0])
                  + bytes([OP_POINTS, 0, 150]) + b"h" * 300 + bytes([5, 1]),
        "maglev": bytes([OP_MAGLEV, 1, 2, 6]) + bytes(range(1, 61))
                  + bytes([OP_MAGLEV, 1, 6, 3]) + bytes(range(7, 40)),
        # Six hosts of keys with shared prefixes at M = 251, a repeat, a
        # weight of 0, a failing allocation, M = 8.
        "envoy-table": envoy_table(5, [(b"\x01\x02", 1), (b"\x01", 2), (b"", 3), (b"\x02\x03\x01", 1),
                                       (b"\x03", 4), (b"\x01\x02\x03", 1)])
                       + envoy_table(3, [(b"\x01", 1), (b"\x01", 2)])
                       + envoy_table(3, [(b"\x01", 0), (b"\x02", 2)])
                       + bytes([OP_FAILNEXT, 2]) + envoy_table(6, [(b"\x01", 1), (b"\x02", 1)])
                       + envoy_table(9, [(b"\x01", 1)]) + envoy_table(6, []),
        "mod": bytes([OP_MOD]) + (65537).to_bytes(8, "big") + bytes([3]) + bytes(range(24))
               + bytes([OP_MOD]) + (2**64 - 1).to_bytes(8, "big") + bytes([2]) + b"\xff" * 16
               + bytes([OP_MOD]) + bytes(8) + bytes([1]) + b"\x80" + bytes(7),
        # A long whose first step wraps Guava's int sum, over 10 buckets;
        # the long where Guava's rounding parts from the paper's; the
        # largest counts; preference lists of every length.
        "jump": bytes([OP_JUMP]) + (17068571456203592619).to_bytes(8, "big") + bytes([0, 10, 2, 1, 5])
                + bytes([OP_JUMP]) + (12970273959431459788).to_bytes(8, "big") + bytes([1])
                + (459790).to_bytes(8, "big") + bytes([3, 0, 7])
                + bytes([OP_JUMP]) + b"\xff" * 8 + bytes([2, 1, 0, 0, 1, 69])
                + bytes([OP_JUMP]) + bytes(8) + bytes([3, 63, 1, 1, 64]),
        # Load tables: four slots at weights 3, 1, 0, 2 and balance 1 (shape
        # 4: index 0), takes onto slot 0 past its bound, walks, puts (one
        # of a slot holding none); a bad weight; a balance below 1 (index 3);
        # a huge balance (index 5) over 16 slots.
        "loads": bytes([OP_LOADS, 4, 3, 1, 0, 2, 12]) + bytes([0, 0, 0, 0])
                 + bytes([2, 4, 0, 1, 2, 3]) + bytes([1, 5, 9, 2, 3, 17, 0, 1]) + bytes([4 << 2 | 1])
                 + bytes([OP_LOADS, 3, 1, 0xFF, 2])
                 + bytes([OP_LOADS, 3 << 5 | 2, 1, 1])
                 + bytes([OP_LOADS, 5 << 5 | 16]) + bytes(range(1, 17)) + bytes([3, 0, 4, 2, 2, 0, 15]),
    }


def main(argv: list[str]) -> int:
    return write_corpus(CORPUS, seeds(), Path(__file__).name, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
