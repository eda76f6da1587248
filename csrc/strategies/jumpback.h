/*
 * jumpback.h - JumpBackHash (Ertl, "JumpBackHash: Say Goodbye to the
 * Modulo Operation to Distribute Keys Uniformly to Buckets", Software:
 * Practice and Experience 55.3, 2025), exactly as hash4j's
 * ConsistentHashing.jumpBackHashSplitMix64() computes it.  The contract is
 * jump's (jump.h): a key hash goes to a bucket in [0, n), growing n by one
 * moves only the keys the new bucket takes, and only the last bucket can go
 * away; but the walk is a few integer steps in expected O(1), with no
 * floating point and no division.
 *
 * The random numbers come from the SplitMix64 stream started at the hash
 * (state = hash; each number: state += 0x9e3779b97f4a7c15, then the
 * SplitMix64 finaliser), the stream hash4j's PseudoRandomGeneratorProvider
 * .splitMix64_V1() gives after reset(hash).  A hash is the unsigned 64-bit
 * image of Java's long.  Plain C11, no state, no allocation.
 */
#ifndef CHASH_JUMPBACK_H
#define CHASH_JUMPBACK_H

#include <stddef.h>
#include <stdint.h>

#include "engine/chash.h"

/* Largest bucket count JumpBackHash accepts (hash4j's int bucket counts). */
#define CHASH_JUMPBACK_MAX_BUCKETS ((uint32_t)INT32_MAX)

/* The SplitMix64 stream: state advanced by the golden gamma, then mixed. */
typedef struct chash_splitmix64 {
    uint64_t state;
} chash_splitmix64;

/* The stream's next 64-bit number. */
static inline uint64_t chash_splitmix64_next(chash_splitmix64 *g)
{
    uint64_t z = (g->state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The walk, inline (chash_jumpback_walk() below is this); the helpers
 * are its own. */
/* Index of the highest set bit of x != 0, and the number of set bits:
 * one instruction each where the compiler offers it. */
#if defined(__GNUC__) || defined(__clang__)
static inline unsigned chash_jb_top_bit(uint32_t x)
{
    return 31u - (unsigned)__builtin_clz(x);
}

static inline unsigned chash_jb_popcount32(uint32_t x)
{
    return (unsigned)__builtin_popcount(x);
}
#else
static inline unsigned chash_jb_top_bit(uint32_t x)
{
    unsigned i = 0;
    while (x >>= 1)
        i++;
    return i;
}

static inline unsigned chash_jb_popcount32(uint32_t x)
{
    unsigned c = 0;
    for (; x; x &= x - 1)
        c++;
    return c;
}
#endif

/*
 * The paper's idea, run backwards from jump: a key's bucket with n buckets
 * is the largest bucket index at which it "jumped" while the count grew.
 * The indices split into ranges [2^i, 2^(i+1)); the key jumps inside range
 * i with probability 1/2, and where is uniform over the range.  One 64-bit
 * number decides everything for all ranges at once: bit i of the XOR of
 * its halves says whether the key jumps inside range i, and the half picked
 * by the parity of the number of ranges still in play gives the position.
 * Ranges are visited from the highest below n downwards; the first jump
 * position below n is the answer.  A position in the top (partial) range
 * at or above n is resolved by drawing further numbers (two 32-bit tries
 * each) until one lands either below 2^i (the key did not jump in this
 * range after all: try the next lower range) or inside [2^i, n).
 */
static inline uint32_t chash_jumpback_walk_inline(chash_splitmix64 *g, uint32_t nbuckets)
{
    uint64_t r0 = chash_splitmix64_next(g);
    uint32_t mask = UINT32_MAX >> (31 - chash_jb_top_bit(nbuckets - 1)); /* bits of nbuckets - 1 */
    uint32_t ranges = (uint32_t)(r0 ^ (r0 >> 32)) & mask;
    while (ranges != 0) {
        uint32_t lo = UINT32_C(1) << chash_jb_top_bit(ranges);
        /* hash4j shifts a long by 32 * popcount, which Java takes mod 64:
         * the high half for an odd count, the low half for an even one. */
        uint32_t half = (uint32_t)(r0 >> (32 * (chash_jb_popcount32(ranges) & 1)));
        uint32_t bucket = lo + (half & (lo - 1));
        if (bucket < nbuckets)
            return bucket;
        uint32_t hi = (lo << 1) - 1;
        for (;;) {
            uint64_t r1 = chash_splitmix64_next(g);
            bucket = (uint32_t)r1 & hi;
            if (bucket < lo)
                break;
            if (bucket < nbuckets)
                return bucket;
            bucket = (uint32_t)(r1 >> 32) & hi;
            if (bucket < lo)
                break;
            if (bucket < nbuckets)
                return bucket;
        }
        ranges ^= lo;
    }
    return 0;
}

/* chash_jumpback() itself, for a caller's hot loop to inline (jump.h's
 * chash_jump_by does): the same answers. */
static inline uint32_t chash_jumpback_inline(uint64_t hash, uint32_t nbuckets)
{
    if (nbuckets <= 1 || nbuckets > CHASH_JUMPBACK_MAX_BUCKETS)
        return 0;
    chash_splitmix64 g = {hash};
    return chash_jumpback_walk_inline(&g, nbuckets);
}

/*
 * JumpBackHash of one key hash: a bucket in [0, nbuckets).  nbuckets must
 * lie in [1, CHASH_JUMPBACK_MAX_BUCKETS]; 0 for any other value (callers
 * validate first, as chash_jumpback_assign() does).
 */
uint32_t chash_jumpback(uint64_t hash, uint32_t nbuckets);

/* chash_jumpback() for every key; 0, or CHASH_EINVAL for a bad nbuckets. */
int chash_jumpback_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out);

/*
 * The walk itself over a stream the caller owns, for JumpBackAnchor
 * (anchor.h), which goes on drawing from the same stream afterwards:
 * nbuckets in [2, CHASH_JUMPBACK_MAX_BUCKETS] (not checked).  Returns a
 * bucket in [0, nbuckets) and leaves g after the last number drawn.
 */
uint32_t chash_jumpback_walk(chash_splitmix64 *g, uint32_t nbuckets);

#endif /* CHASH_JUMPBACK_H */
