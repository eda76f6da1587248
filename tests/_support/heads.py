"""Generated and mutated request heads, for the parser's differential tests."""

from __future__ import annotations

import random
from collections.abc import Sequence


def generated_head(rng: random.Random, methods: Sequence[bytes], targets: Sequence[bytes],
                   versions: Sequence[bytes], fields: Sequence[bytes], noise: Sequence[bytes],
                   *, most_fields: int, mutations: Sequence[int], kept_end: int = 0) -> bytes:
    """A head from the parts given (a Host field first 60 % of the time),
    then ``rng.choice(mutations)`` byte mutations (an insertion, a deletion
    or a replacement by a piece of ``noise``), none in its last
    ``kept_end`` bytes."""
    line = b" ".join([rng.choice(methods), rng.choice(targets), rng.choice(versions)])
    chosen = rng.sample(list(fields), rng.randint(0, most_fields))
    if rng.random() < 0.6:
        chosen.insert(0, b"Host: g")
    data = bytearray(b"\r\n".join([line, *chosen]) + b"\r\n\r\n")
    for _ in range(rng.choice(mutations)):
        at = rng.randrange(len(data) - kept_end)
        kind = rng.random()
        if kind < 0.5:
            data[at:at] = rng.choice(noise)
        elif kind < 0.75:
            del data[at]
        else:
            data[at:at + 1] = rng.choice(noise)
    return bytes(data)
