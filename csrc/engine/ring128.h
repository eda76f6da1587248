/*
 * ring128.h - the sorted points of uhashring's continuums (the engine of
 * chash.compat.uhashring.HashRing; csrc/python/uhashring.c binds it).
 *
 * A point is a value, its owner (the caller's node slot) and seq, the
 * order the value first entered the continuum (uhashring keeps a dict, and
 * its order is part of what it shows).  Two kinds of value:
 *
 * - md5 points: int(md5(f"{name}-{i}").hexdigest(), 16), 128 bits, held
 *   as hi and lo, their big-endian halves; points sorted by (hi, lo) are
 *   in 128-bit order, compared with 64-bit words;
 * - ketama points: a little-endian 32-bit word of md5(f"{name}-{w}") in
 *   hi, lo = 0.
 *
 * The successor rule, written once in chash_r128_successor(): the first
 * point strictly greater than the key, wrapping to index 0.  A bucket
 * index over the top bits of the values (chash_r128_index()) narrows each
 * search to one bucket.
 *
 * Invariants (chash_r128_check()): points sorted by (hi, lo, seq); every
 * owner below the node count; in md5 mode every value once, in ketama
 * mode a repeated value's points all owned alike; ketama values below
 * 2**32; the index maps each bucket to the first point at or above it.
 *
 * Plain C11, no Python; allocation through CHASH_MALLOC (alloc.h).  The
 * functions that write take room the caller reserved, so that a change
 * once started cannot fail.
 */
#ifndef CHASH_RING128_H
#define CHASH_RING128_H

#include <stddef.h>
#include <stdint.h>

#include "chash.h"

typedef struct chash_r128_point {
    uint64_t hi;    /* the value, high half (ketama: the 32-bit value) */
    uint64_t lo;    /* its low half (ketama: 0) */
    uint64_t seq;   /* when the value first entered the continuum */
    uint32_t owner; /* the owning node's slot */
    uint32_t spare; /* 0; free for a caller's mark */
} chash_r128_point;

/* The most points one node may have (a count above is refused by callers). */
#define CHASH_R128_MAX_NODE_POINTS ((size_t)1 << 26)

/*
 * Sorts p[0..n) by (hi, lo, seq): a stable LSD radix sort on the 32 bits
 * of hi from bit shift up (32 for md5 values, 0 for ketama's), then one
 * insertion pass settling the runs those bits tie (O(n) when they are
 * rare).  scratch, when not NULL, is room for n points the sort may
 * overwrite; else it allocates its own.  0, or CHASH_ENOMEM (p unchanged).
 */
int chash_r128_sort(chash_r128_point *p, size_t n, int shift, chash_r128_point *scratch);

/*
 * The successor rule: the index of the first point > (hi, lo) in
 * p[from..to), else to, wrapping (to == n) to 0.  The caller guarantees
 * every point before from is <= the key and every point from to on is >
 * it (0 and n always do; so do a bucket's bounds in the index).  n > 0.
 */
size_t chash_r128_successor(const chash_r128_point *p, size_t n, size_t from, size_t to, uint64_t hi,
                            uint64_t lo);

/* The key a digest makes: (hi, lo) of the 128-bit value, or ketama's first
 * little-endian word in hi. */
void chash_r128_key(const uint8_t digest[16], int ketama, uint64_t *hi, uint64_t *lo);

/* The bucket bits of an index over n points: about log2(n), 1 to 24. */
int chash_r128_index_bits(size_t n);

/* The bucket of a value: the top bits of hi (md5) or of its 32 bits
 * (ketama). */
static inline size_t chash_r128_bucket(uint64_t hi, int ketama, int bits)
{
    return (size_t)(ketama ? (hi & 0xffffffffu) >> (32 - bits) : hi >> (64 - bits));
}

/* Writes the bucket index of sorted p[0..n) into index (room for
 * 2**bits + 1): index[b] the first point whose bucket is >= b. */
void chash_r128_index(const chash_r128_point *p, size_t n, int ketama, int bits, uint32_t *index);

/*
 * The points of one node: the MD5 of prefix (plen bytes) followed by the
 * decimal i, for i < count, into out (count points for md5 values, count
 * * replicas for ketama's, replicas 0 to 4), owned by owner, numbered
 * from *seq on (advanced).  0, or CHASH_ENOMEM (nothing written that
 * matters; *seq unchanged).
 */
int chash_r128_node_points(const char *prefix, size_t plen, size_t count, int ketama, int replicas,
                           uint32_t owner, uint64_t *seq, chash_r128_point *out);

/* The same points, hashed sixteen at a time (chash_md5_x16): more than
 * twice the throughput of chash_r128_node_points for four times its code.
 * The binding makes every node's points with it, a single node's too (a
 * node added now and then, its code cold, still comes out ahead at
 * uhashring's 160 points). */
int chash_r128_node_points_wide(const char *prefix, size_t plen, size_t count, int ketama,
                                int replicas, uint32_t owner, uint64_t *seq, chash_r128_point *out);

/*
 * md5 mode: the points of sorted pts[0..n) but owner's, merged with
 * sorted add[0..count) (owner's new points) into out (room for n +
 * count): a value both hold stays where it was and becomes owner's; a
 * value add repeats is kept once.  Returns the number written.
 */
size_t chash_r128_merge(const chash_r128_point *pts, size_t n, const chash_r128_point *add, size_t count,
                        uint32_t owner, chash_r128_point *out);

/* md5 mode: drops owner's points of pts[0..n) in place and gives last's
 * points the slot owner (the caller moves its last node there).  Returns
 * the number left. */
size_t chash_r128_drop(chash_r128_point *pts, size_t n, uint32_t owner, uint32_t last);

/*
 * A whole build's sorted points, settled in place: a value written more
 * than once belongs to its last writer (the largest seq) and keeps the
 * first one's seq; md5 mode keeps it once, ketama every time.  Returns the
 * number left.
 */
size_t chash_r128_settle(chash_r128_point *pts, size_t n, int ketama);

/* The distinct values of sorted p[0..n). */
size_t chash_r128_unique(const chash_r128_point *p, size_t n);

/* Checks the invariants above, index included (index NULL: skipped); 0 or
 * CHASH_ECORRUPT. */
int chash_r128_check(const chash_r128_point *p, size_t n, size_t nnodes, int ketama, const uint32_t *index,
                     int bits);

#endif /* CHASH_RING128_H */
