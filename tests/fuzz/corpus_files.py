"""The seed corpus writer the make_corpus*.py scripts share.

Each script builds its seeds (file name -> bytes) and hands them here with
its corpus folder: the folder is rewritten to hold exactly those files, or,
given --check, left alone and the exit status says whether it is stale.
"""
from __future__ import annotations

import sys
from pathlib import Path


def write_corpus(corpus: Path, wanted: dict[str, bytes], script: str, argv: list[str]) -> int:
    """Writes `wanted` into `corpus` (removing any other file there), or with
    "--check" in `argv` returns 1 if the folder does not hold exactly
    `wanted`; `script` is the file name the stale message tells to run."""
    if "--check" in argv:
        have = {p.name: p.read_bytes() for p in corpus.iterdir()} if corpus.is_dir() else {}
        if have != wanted:
            print(f"{corpus} is stale: run python3 {script}", file=sys.stderr)
            return 1
        return 0
    corpus.mkdir(exist_ok=True)
    for stale in corpus.iterdir():
        if stale.name not in wanted:
            stale.unlink()
    for name, data in sorted(wanted.items()):
        (corpus / name).write_bytes(data)
    print(f"{len(wanted)} seeds in {corpus}")
    return 0
