"""Jump consistent hash in plain Python, the oracle of chash.JumpRouter.

``jump`` is the function of Lamping & Veach, "A Fast, Minimal Memory,
Consistent Hash Algorithm" (2014), as its reference code computes it:
``b = (b + 1) * (2**31 / ((key >> 33) + 1))`` in double precision.
``guava`` is Guava's ``Hashing.consistentHash(long, int)`` as its
documentation and generator describe it: ``r = ((int)(state >>> 33) + 1) /
2**31`` first (an int sum: at 2**31 - 1 it wraps, r is -1 and the walk
stops), then ``(int)((candidate + 1) / r)``, the other rounding.
Python floats are IEEE doubles, so both are bit-exact.

``preference`` is the router's documented preference list: the bucket,
then for k >= 1 the jump of ``mix64(key + k)`` over the buckets not chosen
yet, in bucket order.
"""
from __future__ import annotations

from collections.abc import Callable

M64 = (1 << 64) - 1
LCG = 2862933555777941757


def jump(key: int, buckets: int) -> int:
    """The paper's jump of a 64-bit key into [0, buckets)."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * LCG + 1) & M64
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def guava(key: int, buckets: int) -> int:
    """Guava's consistentHash of a long (its 64 bits) into [0, buckets)."""
    state, candidate = key & M64, 0
    while True:
        state = (LCG * state + 1) & M64
        top = (state >> 33) + 1
        if top == 1 << 31:  # Java's int sum wraps to -2**31: r = -1
            top = -(1 << 31)
        r = float(top) / float(1 << 31)
        quotient = (candidate + 1) / r
        nxt = min(int(quotient), (1 << 31) - 1)  # Java's (int) saturates
        if nxt < 0 or nxt >= buckets:
            return candidate
        candidate = nxt


def mix64(x: int) -> int:
    """MurmurHash3's fmix64 (strategies/mix.h)."""
    x &= M64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    x ^= x >> 33
    return x


def preference(rule: Callable[[int, int], int], key: int, buckets: int, n: int) -> list[int]:
    """The first min(n, buckets) buckets of the key's preference list."""
    free = list(range(buckets))
    out: list[int] = []
    for k in range(min(n, buckets)):
        h = mix64(key + k) if k else key
        out.append(free.pop(rule(h, len(free))))
    return out
