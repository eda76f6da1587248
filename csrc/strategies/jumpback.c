/*
 * jumpback.c - JumpBackHash (jumpback.h), from Ertl's paper and hash4j's
 * documented behaviour.  No function keeps state between calls.
 */
#include "jumpback.h"

/* Index of the highest set bit of x != 0, and the number of set bits:
 * one instruction each where the compiler offers it. */
#if defined(__GNUC__) || defined(__clang__)
static inline unsigned top_bit(uint32_t x)
{
    return 31u - (unsigned)__builtin_clz(x);
}

static inline unsigned popcount32(uint32_t x)
{
    return (unsigned)__builtin_popcount(x);
}
#else
static inline unsigned top_bit(uint32_t x)
{
    unsigned i = 0;
    while (x >>= 1)
        i++;
    return i;
}

static inline unsigned popcount32(uint32_t x)
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
uint32_t chash_jumpback_walk(chash_splitmix64 *g, uint32_t nbuckets)
{
    uint64_t r0 = chash_splitmix64_next(g);
    uint32_t mask = UINT32_MAX >> (31 - top_bit(nbuckets - 1)); /* bits of nbuckets - 1 */
    uint32_t ranges = (uint32_t)(r0 ^ (r0 >> 32)) & mask;
    while (ranges != 0) {
        uint32_t lo = UINT32_C(1) << top_bit(ranges);
        /* hash4j shifts a long by 32 * popcount, which Java takes mod 64:
         * the high half for an odd count, the low half for an even one. */
        uint32_t half = (uint32_t)(r0 >> (32 * (popcount32(ranges) & 1)));
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

uint32_t chash_jumpback(uint64_t hash, uint32_t nbuckets)
{
    if (nbuckets <= 1 || nbuckets > CHASH_JUMPBACK_MAX_BUCKETS)
        return 0;
    chash_splitmix64 g = {hash};
    return chash_jumpback_walk(&g, nbuckets);
}

int chash_jumpback_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out)
{
    if (nbuckets == 0 || nbuckets > CHASH_JUMPBACK_MAX_BUCKETS)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++)
        out[i] = chash_jumpback(keys[i], (uint32_t)nbuckets);
    return CHASH_OK;
}
