/*
 * jump.h - the stateless strategies: modulo, and jump consistent hash
 * (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm",
 * 2014).  A key hash goes to a bucket in [0, n): modulo moves nearly every
 * key when n changes; jump moves the optimal 1/n when a bucket is added,
 * but buckets are numbered 0..n-1 and only the last one can go away.
 * Plain C11, no state, no allocation.
 */
#ifndef CHASH_JUMP_H
#define CHASH_JUMP_H

#include <stddef.h>
#include <stdint.h>

#include "engine/chash.h"

/* Largest bucket count jump accepts (the paper's int32 bucket numbers). */
#define CHASH_JUMP_MAX_BUCKETS ((uint32_t)INT32_MAX)

/*
 * hash % nbuckets for every key.  Returns 0, or CHASH_EINVAL when nbuckets
 * is 0 or above UINT32_MAX.
 */
int chash_modulo_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out);

/*
 * Jump consistent hash of one key: a bucket in [0, nbuckets).
 * nbuckets must lie in [1, CHASH_JUMP_MAX_BUCKETS]; 0 for any other value
 * (callers validate first, as chash_jump_assign() does).
 */
uint32_t chash_jump(uint64_t key, size_t nbuckets);

/* chash_jump() for every key; 0, or CHASH_EINVAL for a bad nbuckets. */
int chash_jump_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out);

#endif /* CHASH_JUMP_H */
