"""Writes the seed corpus of tests/fuzz/fuzz_ids.c into tests/fuzz/corpus_ids/.

Each seed is a short program in that fuzzer's input format (an operation
byte, then its arguments; missing bytes read as zeros; an id byte b is id b
below 0xC0 and 2**31 - 1 - (b - 0xC0) above): HAProxy's numbering of
automatic and explicit ids, releases, the counter at the largest id,
reserved room and failing allocations.

    python3 tests/fuzz/make_corpus_ids.py          # rewrite the corpus
    python3 tests/fuzz/make_corpus_ids.py --check  # exit 1 if it is stale
"""
from __future__ import annotations

import sys
from pathlib import Path

from corpus_files import write_corpus

CORPUS = Path(__file__).resolve().parent / "corpus_ids"
OP_TAKE, OP_TAKE32, OP_RELEASE, OP_RESERVE, OP_FREE_FROM, OP_SET_NEXT, OP_FAILNEXT = range(7)
TOP = 0xC0  # id byte of the largest id


def take(*ids: int) -> bytes:
    return b"".join(bytes([OP_TAKE, i]) for i in ids)


def seeds() -> dict[str, bytes]:
    return {
        # 1, 3 (explicit), then 4, 5: HAProxy's example.
        "numbering": take(0, 3, 0, 0) + bytes([OP_FREE_FROM, 1, OP_FREE_FROM, 3]),
        "release": take(0, 0, 0, 0) + bytes([OP_RELEASE, 2, OP_RELEASE, 9]) + take(0, 2, 2)
                   + bytes([OP_FREE_FROM, 0]),
        # The counter two below the largest id: it stops there, then none is left.
        "largest": bytes([OP_SET_NEXT, TOP + 2]) + take(0, 0, 0, 0, TOP) + bytes([OP_FREE_FROM, TOP + 1]),
        "explicit-32": bytes([OP_TAKE32, 0x7F, 0xFF, 0xFF, 0xFF, OP_TAKE32, 0x80, 0, 0, 0,
                              OP_TAKE32, 0xFF, 0xFF, 0xFF, 0xFF, OP_TAKE32, 0, 0, 0, 5]),
        "failing": bytes([OP_FAILNEXT, 0]) + take(0) + take(*range(12)) + bytes([OP_FAILNEXT, 0])
                   + take(*range(20, 40)) + bytes([OP_RESERVE, 200, OP_FAILNEXT, 0, OP_RESERVE, 0xFF]),
        "reserved": bytes([OP_RESERVE, 64, OP_FAILNEXT, 0]) + take(*([0] * 64)) + bytes([OP_SET_NEXT, 0]) + take(0),
    }


def main(argv: list[str]) -> int:
    return write_corpus(CORPUS, seeds(), Path(__file__).name, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
