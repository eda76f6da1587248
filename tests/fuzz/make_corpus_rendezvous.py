"""Writes the seed corpus of tests/fuzz/fuzz_rendezvous.c into tests/fuzz/corpus_rendezvous/.

Each seed is an input in that fuzzer's format: a layout byte (0 hrw, 1
pymemcache, 2 caddy, 3 squid), a failing-allocation byte, a node count,
then per node a length byte, its bytes and a weight byte, then keys (a
length byte and its bytes): every layout with a few nodes and keys, weights
Squid sorts, a refused weight, an empty set, failing allocations.

    python3 tests/fuzz/make_corpus_rendezvous.py          # rewrite the corpus
    python3 tests/fuzz/make_corpus_rendezvous.py --check  # exit 1 if it is stale
"""
from __future__ import annotations

import sys
from pathlib import Path

from corpus_files import write_corpus

CORPUS = Path(__file__).resolve().parent / "corpus_rendezvous"
HRW, PYMEMCACHE, CADDY, SQUID = range(4)
KEYS = [b"user:1", b"http://origin.test/k/7", b"", b"\xc3\xa9t\xc3\xa9", b"x" * 40]


def program(layout: int, nodes: list[tuple[bytes, int]], keys: list[bytes] = KEYS,
            fail: int = 0) -> bytes:
    out = bytes([layout, fail, len(nodes)])
    for name, weight in nodes:
        out += bytes([len(name)]) + name + bytes([weight])
    for key in keys:
        out += bytes([len(key)]) + key
    return out


def seeds() -> dict[str, bytes]:
    dials = [(f"127.0.0.1:{8000 + i}".encode(), i % 3) for i in range(5)]
    return {
        "hrw": program(HRW, [(b"a", 7), (b"b", 15), (b"node-c", 0)]),
        "pymemcache": program(PYMEMCACHE, [(b"10.0.0.1:11211", 0), (b"10.0.0.2:11211", 0)]),
        "caddy": program(CADDY, dials),
        "squid": program(SQUID, [(b"p0", 0), (b"p1", 2), (b"p2", 0), (b"\xe9", 4)]),
        "refused": program(SQUID, [(b"p0", 0xFF)]),
        "empty": program(HRW, []),
        "failing": program(SQUID, dials, fail=3),
    }


def main(argv: list[str]) -> int:
    return write_corpus(CORPUS, seeds(), Path(__file__).name, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
