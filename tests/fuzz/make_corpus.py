"""Writes the seed corpus of tests/fuzz/fuzz_ring.c into tests/fuzz/corpus/.

Each seed is a short program in the fuzzer's input format (see the decoder
in fuzz_ring.c: an operation byte, then its arguments; missing bytes read as
zeros).  The seeds give the fuzzer a start on every operation: ids that are
prefixes of each other or hold NULs, points shared by several nodes, rings
big enough for a multi-level bucket index, limits, every layout and hash,
failing allocations.  Files named regress-* replay bugs once found.

    python3 tests/fuzz/make_corpus.py          # rewrite the corpus
    python3 tests/fuzz/make_corpus.py --check  # exit 1 if it is stale
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

from corpus_files import write_corpus

CORPUS = Path(__file__).resolve().parent / "corpus"

(OP_ADD, OP_ADD_MANY, OP_REMOVE, OP_GROW, OP_SHRINK, OP_LOOKUP, OP_PREFERENCE,
 OP_OWNERSHIP, OP_LIMITS, OP_SCHEME, OP_WEIGHT, OP_NAMES, OP_RESET, OP_FAILNEXT,
 OP_OWNERS) = range(15)

LAYOUTS = ["python", "node", "ketama", "nginx", "libmemcached"]
HASHES = ["md5", "sha1", "murmur2", "murmur3", "xxh32", "xxh64", "xxh3", "fnv1a", "crc32",
          "one_at_a_time"]
# The hashes each layout is defined over (all of them where absent).
LAYOUT_HASHES = {"ketama": ["md5"], "nginx": ["crc32"], "libmemcached": ["one_at_a_time", "md5"]}
# fz_pool_ids, fz_edges and fz_key_lens in fuzz_ring.c, by index.
POOL_IDS = [b"", b"\0", b"a", b"a\0", b"ab", b"b", b"\xff", b"\0\0", b"a\xff", b"node-1",
            b"node-10", "é".encode()]
EDGES = [0, 1, 2, 0x00FFFFFF, 0x01000000, 0x3FFFFFFF, 0x40000000, 0x7FFFFFFF, 0x80000000,
         0xBFFFFFFF, 0xC0000000, 0xFFFFFFFE, 0xFFFFFFFF, 0x0000FFFF, 0x00010000, 0xFFFF0000]
KEY_LENS = [0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 200]


def u8(v: int) -> bytes:
    return bytes([v & 0xFF])


def u16(v: int) -> bytes:
    return struct.pack("<H", v & 0xFFFF)


def u32(v: int) -> bytes:
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


# -- ids (fz_gen_id) -----------------------------------------------------------

def id_existing(k: int) -> bytes:
    """The id of model node k (the ring must not be empty)."""
    return u8(0) + u8(k)


def id_raw(data: bytes, null_when_empty: bool = False) -> bytes:
    assert len(data) <= 16
    out = u8(1) + u8(len(data)) + data
    return out + (u8(0 if null_when_empty else 1) if not data else b"")


def id_near(k: int, how: int, arg: int = 0) -> bytes:
    """Node k's id cut short (how 0), extended by byte arg (1), last byte +-1 (2)."""
    return u8(2) + u8(k) + u8(how) + u8(arg)


def id_pool(i: int) -> bytes:
    out = u8(3) + u8(i)
    return out + (u8(1) if not POOL_IDS[i] else b"")


def id_long(half_len: int, a: int, b: int) -> bytes:
    """64 + 2 * half_len bytes (a + i * b)."""
    return u8(4) + u8(half_len) + u8(a) + u8(b)


def id_empty(null: bool) -> bytes:
    return u8(5) + u8(0 if null else 1)


# -- points (fz_gen_points, fz_gen_value) --------------------------------------

def v_raw(v: int) -> bytes:
    return u8(0) + u32(v)


def v_edge(i: int) -> bytes:
    return u8(1 | (i << 2))


def v_near(index: int, delta: int) -> bytes:
    """A model point's value (by index) plus delta in {-1, 0, 1}."""
    return u8(2 | ((delta + 1) << 2)) + u16(index)


def v_small(v: int) -> bytes:
    assert 0 <= v < 64
    return u8(3 | (v << 2))


def pts(*values: bytes) -> bytes:
    assert len(values) < 40
    return u8(len(values)) + b"".join(values)


def pts_prng(n: int, seed: int, base: int, mask_index: int) -> bytes:
    """n pseudo-random points base + (xorshift & mask), n in 1..12288."""
    big = 0x18 if n > 1024 else 0
    return u8(0xE0 | big | mask_index) + u16(n - 1) + u32(seed) + u32(base)


def smalls(*vs: int) -> bytes:
    return pts(*(v_small(v) for v in vs))


# -- operations ------------------------------------------------------------------

def add(ident: bytes, points: bytes) -> bytes:
    return u8(OP_ADD) + ident + points


def add_many(*specs: tuple[bytes, bytes]) -> bytes:
    return u8(OP_ADD_MANY) + u8(len(specs)) + b"".join(i + p for i, p in specs)


def remove(ident: bytes, want_data: bool = True) -> bytes:
    return u8(OP_REMOVE) + ident + u8(1 if want_data else 0)


def grow(ident: bytes, points: bytes) -> bytes:
    return u8(OP_GROW) + ident + points


def shrink_own(k: int, mode: int, start: int = 0, stride: int = 1, count: int = 1,
               extra: bytes = b"", empty_id: bool = False) -> bytes:
    """Points of model node k: mode 0 a stride, 1 all, 2 a stride reversed,
    3 a stride plus one more value (extra)."""
    out = u8(OP_SHRINK) + u8(mode) + u8(k) + (u8(1) if empty_id else b"")
    out += u16(start) + u8(stride - 1)
    if mode != 1:
        out += u8(count - 1)
    if mode == 3:
        out += extra
    return out


def shrink_any(ident: bytes, points: bytes) -> bytes:
    return u8(OP_SHRINK) + u8(4) + ident + points


def lookup(value: bytes) -> bytes:
    return u8(OP_LOOKUP) + value


def preference(value: bytes, n: int) -> bytes:
    return u8(OP_PREFERENCE) + value + u8(n)


def ownership() -> bytes:
    return u8(OP_OWNERSHIP)


def owners(*values: bytes, in_place: bool = False) -> bytes:
    """The batch lookup of the given hashes."""
    return u8(OP_OWNERS) + u8(len(values)) + u8(1 if in_place else 0) + b"".join(values)


def reset() -> bytes:
    return u8(OP_RESET)


def failnext(n: int) -> bytes:
    return u8(OP_FAILNEXT) + u8(n)


def limits(what: int, ident: bytes, *args: bytes) -> bytes:
    return u8(OP_LIMITS) + u8(what) + ident + b"".join(args)


def key(length: int, a: int = 0x41, b: int = 7) -> bytes:
    """A key of one of fz_key_lens' lengths, a pattern of a and b."""
    return u8(1) + u8(KEY_LENS.index(length)) + u8(a) + u8(b) + (u8(1) if length == 0 else b"")


def key_long(eighths: int, a: int = 3, b: int = 5) -> bytes:
    """A key of 8 * eighths bytes (up to 2,040: past xxh3's 1 KiB blocks)."""
    return u8(2) + u8(eighths) + u8(a) + u8(b) + (u8(1) if eighths == 0 else b"")


def key_bytes(data: bytes) -> bytes:
    assert 1 <= len(data) < 12
    return u8(0) + u8(len(data)) + u8(0) + u8(0) + data


def scheme(layout: str, hash_name: str, ident: bytes, first: bytes, count: int, split: int,
           keys: tuple[bytes, bytes, bytes, bytes], seed: int = 0, exact_cap: bool = True) -> bytes:
    out = u8(OP_SCHEME) + u8(LAYOUTS.index(layout)) + u8(HASHES.index(hash_name))
    out += ident + first + u8(count) + u8(split)
    out += u8(1) if exact_cap else u8(0) + u8(3)
    return out + b"".join(keys) + u64(seed)


def scheme_invalid(layout_index: int, hash_index: int) -> bytes:
    return u8(OP_SCHEME) + u8(layout_index) + u8(hash_index)


def first_small(v: int) -> bytes:
    return u8(0) + u8(v)


def first_u32(v: int) -> bytes:
    return u8(1) + u32(v)


def first_top(below: int) -> bytes:
    """SIZE_MAX - 64 - below: twenty-digit indices."""
    return u8(2) + u8(below)


def weight(base_index: int | None, w: bytes, max_index: int, base: int = 0) -> bytes:
    head = u8(1) + u8(base_index) if base_index is not None else u8(0) + u32(base)
    return u8(OP_WEIGHT) + head + w + u8(max_index)


def w_bits(value: float) -> bytes:
    return u8(0) + struct.pack("<d", value)


def w_ratio(num: int, den_minus_one: int) -> bytes:
    return u8(1) + u16(num) + u16(den_minus_one)


def w_pool(i: int, negative: bool = False) -> bytes:
    return u8(3 if negative else 4) + u8(i)


def w_special(inf: bool, negative: bool) -> bytes:
    return u8(2) + u8(1 if negative else 0) + u8(1 if inf else 0)


def names(name: bytes, bad: int = 0, status: int = 0) -> bytes:
    return u8(OP_NAMES) + u8(len(name)) + name + u8(bad) + u32(status)


# -- the seeds -------------------------------------------------------------------

def seeds() -> dict[str, bytes]:
    s: dict[str, bytes] = {}
    s["one-byte"] = u8(OP_OWNERSHIP)

    s["shared-points"] = (
        add(id_raw(b"b"), smalls(5, 5, 9, 63))
        + add(id_raw(b"a"), smalls(5, 9, 0))
        + add(id_raw(b"c"), pts(v_small(9), v_edge(12), v_edge(0)))
        + lookup(v_small(5)) + lookup(v_small(6)) + lookup(v_edge(12)) + lookup(v_raw(0x80000000))
        + preference(v_small(5), 3) + preference(v_edge(12), 2) + ownership()
        + remove(id_raw(b"a")) + lookup(v_small(5)) + ownership()
    )
    s["prefix-and-nul-ids"] = (
        add(id_pool(2), smalls(7, 7))        # "a"
        + add(id_pool(3), smalls(7, 1))      # "a\0"
        + add(id_pool(0), smalls(7))         # ""
        + add(id_pool(1), smalls(7, 8))      # "\0"
        + add(id_pool(7), smalls(7))         # "\0\0"
        + add(id_pool(4), smalls(7))         # "ab"
        + lookup(v_small(7)) + preference(v_small(7), 6)
        + remove(id_pool(0)) + lookup(v_small(7))
        + add(id_empty(null=True), smalls(7)) + remove(id_empty(null=False))
        + remove(id_pool(3)) + preference(v_small(2), 9) + ownership()
    )
    s["near-miss-ids"] = (
        add(id_raw(b"node"), smalls(1, 2, 3))
        + add(id_near(0, 1, 0), smalls(1, 2))   # "node\0"
        + add(id_near(0, 0, 0), smalls(1))      # "nod"
        + add(id_near(0, 2, 1), smalls(3))      # "nodf"
        + remove(id_near(0, 1, 1)) + grow(id_near(0, 0, 0), smalls(2))
        + lookup(v_small(1)) + lookup(v_small(2)) + preference(v_small(3), 4)
    )
    s["add-many-batch"] = (
        add(id_raw(b"x"), smalls(4, 40))
        + add_many((id_raw(b"m3"), smalls(4, 4, 60)), (id_raw(b"m1"), smalls(4, 0)),
                   (id_empty(null=True), smalls(40)), (id_pool(1), smalls(63, 4)))
        + lookup(v_small(4)) + lookup(v_small(41)) + preference(v_small(4), 7) + ownership()
        + add_many()
        + remove(id_raw(b"m1")) + lookup(v_small(4))
    )
    s["add-many-duplicates"] = (
        add(id_raw(b"x"), smalls(1))
        + add_many((id_raw(b"p"), smalls(1)), (id_raw(b"p"), smalls(2)))
        + add_many((id_raw(b"q"), smalls(1)), (id_raw(b"x"), smalls(2)))
        + add_many((id_empty(null=True), smalls(1)), (id_empty(null=False), smalls(2)))
        + add_many((id_raw(b"r"), smalls(1)), (id_raw(b"s"), pts()))
        + lookup(v_small(1))
    )
    s["grow-and-shrink"] = (
        add(id_raw(b"g"), smalls(10, 20, 30))
        + add(id_raw(b"h"), smalls(20, 25))
        + grow(id_existing(0), smalls(20, 20, 50))
        + grow(id_raw(b"absent"), smalls(1))
        + grow(id_existing(1), pts())
        + shrink_own(0, 0, start=1, stride=2, count=3)
        + shrink_own(1, 1)
        + shrink_own(0, 3, start=0, stride=1, count=1, extra=v_small(33))
        + shrink_own(0, 2, start=0, stride=1, count=2)
        + shrink_any(id_raw(b"absent"), smalls(10))
        + shrink_any(id_existing(0), pts())
        + lookup(v_small(20)) + preference(v_small(21), 2) + ownership()
    )
    s["shrink-duplicates"] = (
        add(id_raw(b"d"), smalls(8, 8, 8, 9))
        + add(id_raw(b"e"), smalls(8))
        + shrink_any(id_existing(0), smalls(8, 8))
        + shrink_any(id_existing(0), smalls(8, 8))
        + shrink_any(id_existing(1), smalls(8))
        + lookup(v_small(8)) + lookup(v_small(9))
    )
    s["wrap-around"] = (
        add(id_raw(b"lo"), pts(v_edge(0), v_edge(1)))
        + add(id_raw(b"hi"), pts(v_edge(12), v_edge(11)))
        + lookup(v_edge(12)) + lookup(v_raw(0xFFFFFFFF)) + lookup(v_raw(2))
        + preference(v_raw(0xFFFFFFFF), 2) + ownership()
        + remove(id_raw(b"lo")) + lookup(v_raw(0)) + ownership()
    )
    s["bulk-index"] = (
        add(id_raw(b"big"), pts_prng(1024, 0x12345, 0, 0))
        + add(id_raw(b"crowd"), pts_prng(700, 0x777, 0x40000000, 1))
        + add_many((id_raw(b"k1"), pts_prng(600, 3, 0xFFFF0000, 2)),
                   (id_raw(b"k2"), pts_prng(600, 5, 0x80000000, 3)))
        + lookup(v_near(100, 0)) + lookup(v_near(2000, -1)) + lookup(v_near(2900, 1))
        + preference(v_near(10, 0), 4) + ownership()
        + remove(id_raw(b"big")) + lookup(v_near(5, 1))
        + grow(id_raw(b"k1"), pts_prng(1000, 9, 0, 4))
        + shrink_own(0, 0, start=3, stride=5, count=60)
        + remove(id_raw(b"crowd")) + remove(id_raw(b"k1")) + ownership()
    )
    s["bulk-one-bucket"] = (
        add(id_raw(b"a"), pts_prng(1024, 1, 0x7FFFFFC0, 1))
        + add(id_raw(b"b"), pts_prng(1024, 2, 0x7FFFFFC0, 1))
        + lookup(v_raw(0x7FFFFFC0)) + lookup(v_raw(0x7FFFFFFF)) + lookup(v_raw(0x80000000))
        + preference(v_raw(0x7FFFFFD0), 2) + remove(id_raw(b"a")) + lookup(v_raw(0x7FFFFFE0))
    )
    # Past 8,192 points in one batch the engine sorts by radix; crowded
    # values (masks 0x3f and 0x3ff) must still come out in id order.
    s["bulk-radix-batch"] = (
        add(id_raw(b"first"), smalls(5, 6))
        + add_many((id_raw(b"r2"), pts_prng(5000, 11, 0, 1)),
                   (id_raw(b"r1"), pts_prng(4000, 13, 0, 2)),
                   (id_pool(1), pts_prng(2000, 17, 0xFFFFF000, 0)))
        + lookup(v_small(5)) + lookup(v_near(4000, 0)) + preference(v_small(33), 4)
        + owners(*(v_near(i * 997, (i % 3) - 1) for i in range(20)))
        + owners(*(v_small(i) for i in range(40)), in_place=True)
        + remove(id_raw(b"r1")) + ownership()
    )
    s["owners"] = (
        owners(v_small(1))
        + add(id_raw(b"a"), smalls(10, 20, 30)) + add(id_raw(b"b"), smalls(20, 40))
        + owners(v_small(0), v_small(10), v_small(11), v_small(20), v_small(41), v_edge(12))
        + owners(*(v_small(i) for i in range(0, 63, 2)), in_place=True)
        + owners()
        + add(id_raw(b"c"), pts_prng(900, 3, 0, 0))
        + owners(*(v_near(i * 31, 1) for i in range(50)))
    )
    s["remove-renumbers"] = (
        add(id_raw(b"n0"), smalls(1, 11)) + add(id_raw(b"n1"), smalls(2, 12))
        + add(id_raw(b"n2"), smalls(3, 13)) + add(id_raw(b"n3"), smalls(1, 14))
        + remove(id_raw(b"n1")) + remove(id_raw(b"n0"), want_data=False)
        + add(id_raw(b"n0"), smalls(2)) + lookup(v_small(2)) + preference(v_small(0), 3)
        + remove(id_raw(b"n3")) + remove(id_raw(b"n2")) + remove(id_raw(b"n0"))
        + remove(id_raw(b"n0")) + lookup(v_small(0))
    )
    s["reset"] = (
        add(id_raw(b"a"), smalls(1, 2)) + reset() + lookup(v_small(1))
        + add(id_raw(b"a"), smalls(3)) + reset() + reset() + ownership()
    )
    s["limits"] = (
        add(id_raw(b"n"), smalls(1, 2))
        + limits(0, id_raw(b"big"))
        + limits(1, id_existing(0), u8(0))
        + limits(2, id_raw(b"z"))
        + limits(3, id_raw(b"z"), v_small(3), u8(2))
        + limits(4, id_existing(0))
        + limits(4, id_raw(b"absent"))
        + lookup(v_small(1))
    )
    # failnext(n): the n-th engine allocation of the next operation fails.
    s["failing-allocations"] = add(id_raw(b"base"), smalls(1, 2, 3, 4, 5, 6)) + b"".join(
        failnext(n) + op
        for n in range(5)
        for op in (
            add(id_raw(b"f%d" % n), pts_prng(40 * n + 1, n + 1, 0, 1)),
            add_many((id_raw(b"m%d" % n), smalls(n)), (id_raw(b"k%d" % n), smalls(n + 1))),
            grow(id_raw(b"base"), pts_prng(300, n + 1, 0, 0)),
            shrink_any(id_raw(b"base"), smalls(1)),
            preference(v_small(n), 3),
            remove(id_raw(b"m%d" % n)),
        )
    ) + failnext(0) + reset() + failnext(1) + reset() + lookup(v_small(1))
    for layout in LAYOUTS:
        program = b""
        for i, hash_name in enumerate(HASHES):
            if hash_name not in LAYOUT_HASHES.get(layout, HASHES):
                continue
            program += scheme(
                layout, hash_name,
                [id_raw(b"node-%d" % i), id_long(40, i, 3), id_empty(null=True), id_pool(1),
                 id_long(12, 1, 1)][i % 5],
                [first_small(0), first_u32(99), first_top(i), first_small(3), first_u32(1 << 31)][i % 5],
                count=[40, 9, 7, 13, 5][i % 5], split=[1, 5, 3, 2, 4][i % 5],
                keys=(key(55), key(56), key(0), key(64)) if i % 2 else
                     (key(119), key_bytes(b"k\0ey"), key(200), key(1)),
                seed=0x1_0000_0005 * (i + 1),
                exact_cap=i % 3 != 0,
            )
        s[f"scheme-{layout}"] = program
    s["scheme-long-ids"] = b"".join(
        scheme(layout, LAYOUT_HASHES.get(layout, ["md5"])[0], id_long(255, 7, 1), first_top(0), 40, 17,
               (key(128), key(129), key(127), key(57)))
        for layout in LAYOUTS
    ) + b"".join(
        scheme("python", name, id_long(13, 0, 0), first_u32(0xFFFFFFFF), 12, 6,
               (key_long(255), key(3), key_long(129), key_long(128)))
        for name in ("xxh3", "xxh64", "xxh32", "murmur3", "sha1")
    )
    s["scheme-invalid"] = (
        scheme_invalid(2, 1) + scheme_invalid(2, 8) + scheme_invalid(5, 0) + scheme_invalid(0, 10)
        + scheme_invalid(3, 0) + scheme_invalid(4, 8)
    )
    s["weights"] = b"".join([
        weight(2, w_pool(0), 2),                  # 100 * 1.0
        weight(2, w_pool(5), 2),                  # 100 * 0.015 -> 2 (ties to even)
        weight(2, w_pool(4), 2),                  # 100 * 0.005 -> 0 -> 1
        weight(5, w_pool(14), 2),                 # 1e6 * 16777216.5: too many
        weight(1, w_pool(13), 2),                 # exactly CHASH_MAX_NODE_POINTS
        weight(1, w_pool(14), 2),                 # 2**24 + 0.5: ties to even, fits
        weight(None, w_bits(16777217.0), 2, base=1),  # one past it
        weight(3, w_special(inf=True, negative=False), 2),
        weight(3, w_special(inf=False, negative=True), 2),
        weight(4, w_pool(7, negative=True), 2),
        weight(0, w_pool(10), 3),                 # 0 * 1e300
        weight(None, w_ratio(3, 1), 4, base=101),
        weight(None, w_bits(2.5), 1, base=1),
        weight(None, w_bits(5e-324), 0, base=0xFFFFFFFF),
    ])
    s["names"] = (
        names(b"md5") + names(b"ketama") + names(b"xxh3\0junk") + names(b"MD5", bad=200)
        + names(b"", status=0xFFFFFFFA) + names(b"python", status=7) + names(b"crc32")
    )
    s["everything"] = (
        add(id_raw(b"alpha"), smalls(1, 2, 3)) + failnext(1)
        + add_many((id_raw(b"beta"), smalls(2)), (id_pool(11), smalls(3)))
        + add_many((id_raw(b"beta"), smalls(2)), (id_pool(11), smalls(3)))
        + scheme("node", "murmur3", id_existing(0), first_small(2), 4, 2,
                 (key(16), key(15), key(8), key(7)))
        + weight(2, w_pool(2), 2) + names(b"sha1")
        + grow(id_existing(1), smalls(2, 2)) + shrink_own(1, 0, count=2)
        + lookup(v_small(2)) + preference(v_small(2), 5) + ownership()
        + limits(1, id_existing(2), u8(3)) + remove(id_existing(1)) + reset()
    )
    # Bugs once found: each replays one.
    # chash_points_for_weight(1, 2**64, SIZE_MAX): the count 2**64 compared
    # <= (double)SIZE_MAX (which is 2**64), then converted to size_t:
    # undefined behaviour (0 points on x86-64) instead of CHASH_EINVAL.
    s["regress-weight-count-past-size-max"] = weight(1, w_pool(12), 6)
    # chash_points_for_weight(0, 4.9e-324, 0): the count is at least 1, yet
    # it was compared with max_points 0 before being raised to 1.
    s["regress-weight-max-points-zero"] = weight(0, w_pool(8), 5)
    # The fuzzer's own nginx reference copied from a NULL empty id.
    s["regress-nginx-empty-id"] = scheme("nginx", "crc32", id_empty(null=True), first_small(2), 3, 1,
                                         (key(0), key(1), key(3), key(4)))
    return s


def main(argv: list[str]) -> int:
    return write_corpus(CORPUS, seeds(), Path(__file__).name, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
