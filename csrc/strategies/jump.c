/*
 * jump.c - modulo and jump consistent hash (jump.h), from the paper.  No
 * function keeps state between calls, so every result depends only on the
 * arguments.
 */
#include "jump.h"

#include "jumpback.h"

/* ------------------------------------------------------------------ */
/* Modulo                                                             */

int chash_modulo_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out)
{
    if (nbuckets == 0 || nbuckets > UINT32_MAX)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++)
        out[i] = (uint32_t)(keys[i] % nbuckets);
    return CHASH_OK;
}

/* ------------------------------------------------------------------ */
/* Jump consistent hash                                               */

/*
 * Follow a key as the bucket count grows from 1: with b + 1 buckets it sits
 * in bucket b, and it jumps to bucket j > b exactly when the count reaches
 * j + 1, which happens with probability 1 / (j + 1) at each step, so that
 * each growth takes the new bucket's fair share and nothing else.  Instead
 * of testing every step, the paper draws the next jump directly: with r
 * uniform in (0, 1], the key stays put until the count exceeds
 * (b + 1) / r, so the next destination is floor((b + 1) / r).
 *
 * The random numbers come from the key itself through the 64-bit linear
 * congruential generator key = key * 2862933555777941757 + 1, whose top 31
 * bits give r = ((key >> 33) + 1) / 2**31.  The division is done in double
 * precision exactly as the paper does, because the result has to match it
 * bit for bit: a different rounding would send some keys elsewhere.
 */
uint32_t chash_jump(uint64_t key, size_t nbuckets)
{
    if (nbuckets == 0 || nbuckets > CHASH_JUMP_MAX_BUCKETS)
        return 0;
    uint32_t bucket = 0; /* every key starts in bucket 0 of a single bucket */
    for (;;) {
        key = key * UINT64_C(2862933555777941757) + 1;
        /* (bucket + 1) <= 2**31 and the quotient <= 2**31: next <= 2**62. */
        double next = (double)((uint64_t)bucket + 1) * (2147483648.0 / (double)((key >> 33) + 1));
        /* floor(next) < n exactly when next < n, n being an integer. */
        if (next >= (double)nbuckets)
            return bucket;
        bucket = (uint32_t)next;
    }
}

int chash_jump_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out)
{
    if (nbuckets == 0 || nbuckets > CHASH_JUMP_MAX_BUCKETS)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++)
        out[i] = chash_jump(keys[i], nbuckets);
    return CHASH_OK;
}

/*
 * Guava's arithmetic (com.google.common.hash.Hashing.consistentHash and its
 * LinearCongruentialGenerator): state = 2862933555777941757 * state + 1 as
 * a Java long (two's complement, so unsigned wrap-around here); nextDouble
 * = ((int)(state >>> 33) + 1) / 2**31, in (0, 1]; next = (int)((candidate
 * + 1) / nextDouble).  Java's (int) of a double saturates at 2**31 - 1,
 * which is never below nbuckets, so "next >= nbuckets" ends the walk, and
 * so does Java's next >= 0 when the int sum in nextDouble wraps (top 31
 * bits all ones: r = -1): then the key stays in its bucket.
 */
uint32_t chash_jump_guava(uint64_t key, size_t nbuckets)
{
    if (nbuckets == 0 || nbuckets > CHASH_JUMP_MAX_BUCKETS)
        return 0;
    uint64_t state = key;
    uint32_t candidate = 0;
    for (;;) {
        state = UINT64_C(2862933555777941757) * state + 1;
        /* (int)(state >>> 33) + 1 is Java int arithmetic: at 2**31 - 1 it
         * wraps to -2**31, r is -1, the quotient negative, and Guava's
         * next >= 0 test ends the walk where it is. */
        if ((state >> 33) == INT32_MAX)
            return candidate;
        /* Otherwise the sum is at most 2**31 - 1 + 1 without wrapping; the
         * division by a power of two is exact. */
        double r = (double)((state >> 33) + 1) / 2147483648.0;
        double next = (double)((uint64_t)candidate + 1) / r; /* <= 2**62 */
        if (next >= (double)nbuckets)
            return candidate;
        candidate = (uint32_t)next;
    }
}

uint32_t chash_jump_by(chash_jump_rule rule, uint64_t key, size_t nbuckets)
{
    switch (rule) {
    case CHASH_JUMP_LAMPING: return chash_jump(key, nbuckets);
    case CHASH_JUMP_GUAVA: return chash_jump_guava(key, nbuckets);
    case CHASH_JUMP_BACK:
        return nbuckets > CHASH_JUMPBACK_MAX_BUCKETS ? 0 : chash_jumpback_inline(key, (uint32_t)nbuckets);
    default: return 0;
    }
}

int chash_jump_preference(chash_jump_rule rule, uint64_t key, size_t nbuckets, size_t want,
                          uint32_t *out, size_t *found)
{
    if ((rule != CHASH_JUMP_LAMPING && rule != CHASH_JUMP_GUAVA && rule != CHASH_JUMP_BACK)
        || nbuckets == 0
        || nbuckets > CHASH_JUMP_MAX_BUCKETS)
        return CHASH_EINVAL;
    if (want > nbuckets)
        want = nbuckets;
    for (size_t k = 0; k < want; k++) {
        uint64_t h = k ? chash_mix64(key + (uint64_t)k) : key;
        /* The j-th bucket not chosen yet: out[0..k) kept sorted aside would
         * be faster; k stays small (a replica count), so O(k^2) it is. */
        size_t j = chash_jump_by(rule, h, nbuckets - k);
        uint32_t bucket = (uint32_t)j;
        for (;;) {
            /* bucket = j + how many chosen buckets are <= bucket: the
             * smallest such fixed point is the j-th free bucket. */
            size_t below = 0;
            for (size_t c = 0; c < k; c++)
                below += out[c] <= bucket;
            uint32_t next = (uint32_t)(j + below);
            if (next == bucket)
                break;
            bucket = next;
        }
        out[k] = bucket;
    }
    *found = want;
    return CHASH_OK;
}
