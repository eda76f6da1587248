"""Writes the seed corpus of tests/fuzz/fuzz_anchor.c into tests/fuzz/corpus_anchor/.

Each seed is that fuzzer's input: a mode byte (0 a raw state, 1 a state
with ids folded below a small high, 2 a script), then its bytes.  A
script's op byte: low two bits 0 add, 1 remove (the next byte names the
id), 2 a failing allocation armed for the next op, 3 a round trip through
the state.

    python3 tests/fuzz/make_corpus_anchor.py          # rewrite the corpus
    python3 tests/fuzz/make_corpus_anchor.py --check  # exit 1 if it is stale
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

from corpus_files import write_corpus

CORPUS = Path(__file__).resolve().parent / "corpus_anchor"
ADD, REMOVE, FAIL, ROUND_TRIP = range(4)


def state(high: int, *removed: int) -> bytes:
    return struct.pack(f"<{1 + len(removed)}I", high, *removed)


def remove(*ids: int) -> bytes:
    return b"".join(bytes([REMOVE, i]) for i in ids)


def seeds() -> dict[str, bytes]:
    return {
        "state-empty": b"\0" + state(0),
        "state-removed": b"\0" + state(10, 3, 7, 0),
        "state-twice": b"\0" + state(10, 3, 3),
        "state-all-removed": b"\0" + state(2, 0, 1),
        "state-short": b"\0\x05\x00\x00",
        "folded": b"\1" + bytes([40]) + state(0, 5, 17, 39, 2, 8)[4:],
        "script-middle": b"\2" + bytes([ADD] * 12) + remove(3, 7, 0) + bytes([ADD, ADD, ROUND_TRIP]),
        "script-last": b"\2" + bytes([ADD] * 6) + remove(5, 4, 3, 2, 1, 0) + bytes([ADD] * 3),
        "script-failing": b"\2" + bytes([ADD] * 20) + bytes([FAIL]) + remove(4) + bytes([FAIL | 4])
                          + remove(9) + bytes([FAIL | 8, ROUND_TRIP]) + remove(4, 0xFF, 90),
    }


def main(argv: list[str]) -> int:
    return write_corpus(CORPUS, seeds(), Path(__file__).name, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
