"""Jump consistent hash in plain Python, the oracle of chash.JumpRouter.

``jump`` is the function of Lamping & Veach, "A Fast, Minimal Memory,
Consistent Hash Algorithm" (2014), as its reference code computes it:
``b = (b + 1) * (2**31 / ((key >> 33) + 1))`` in double precision.
``guava`` is Guava's ``Hashing.consistentHash(long, int)`` as its
documentation and generator describe it: ``r = ((int)(state >>> 33) + 1) /
2**31`` first (an int sum: at 2**31 - 1 it wraps, r is -1 and the walk
stops), then ``(int)((candidate + 1) / r)``, the other rounding.
Python floats are IEEE doubles, so both are bit-exact.
``jumpback`` is JumpBackHash (Ertl 2024) over the SplitMix64 stream started
at the key, as the paper and hash4j's documentation describe it: integers
only.

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


GOLDEN = 0x9E3779B97F4A7C15


def splitmix64(state: int) -> tuple[int, int]:
    """The SplitMix64 stream's next state and number."""
    state = (state + GOLDEN) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def jumpback(key: int, buckets: int) -> int:
    """JumpBackHash of a 64-bit key into [0, buckets): the ranges
    [2**i, 2**(i+1)) below buckets from the highest down; bit i of the XOR of
    the first number's halves says whether the key jumps in range i, the
    half picked by the parity of the ranges still in play where; a position
    at or above buckets in the top range is redrawn (two 32-bit tries a
    number) until it falls below 2**i (no jump there) or below buckets."""
    if buckets <= 1:
        return 0
    state, r0 = splitmix64(key & M64)
    mask = (1 << (buckets - 1).bit_length()) - 1
    ranges = (r0 ^ (r0 >> 32)) & mask & 0xFFFFFFFF
    while ranges:
        lo = 1 << (ranges.bit_length() - 1)
        half = (r0 >> (32 * (bin(ranges).count("1") & 1))) & 0xFFFFFFFF
        bucket = lo + (half & (lo - 1))
        if bucket < buckets:
            return bucket
        hi = (lo << 1) - 1
        jumped = False
        while not jumped:
            state, r1 = splitmix64(state)
            for part in (r1 & 0xFFFFFFFF, r1 >> 32):
                bucket = part & hi
                if bucket < lo:
                    break
                if bucket < buckets:
                    return bucket
            else:
                continue
            jumped = True
        ranges ^= lo
    return 0
