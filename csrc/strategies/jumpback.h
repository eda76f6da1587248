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
