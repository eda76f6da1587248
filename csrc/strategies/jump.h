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
#include "strategies/mix.h"

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

/*
 * Guava's Hashing.consistentHash(long input, int buckets): the same walk
 * over the same generator, but its own arithmetic, so it is not the paper's
 * function: the generator's top 31 bits become r = ((int)(state >>> 33) +
 * 1) / 2**31 first and the next bucket is (int)((candidate + 1) / r), a
 * different rounding from the paper's (b + 1) * (2**31 / (x + 1)), so some
 * keys land elsewhere; and when the generator's top 31 bits are all ones,
 * Java's int sum wraps, r is -1 and the walk stops where it is.  key is
 * the Java long's 64 bits.  nbuckets in
 * [1, CHASH_JUMP_MAX_BUCKETS]; 0 for any other value.
 */
uint32_t chash_jump_guava(uint64_t key, size_t nbuckets);

/* Which of the functions: the paper's, Guava's, or JumpBackHash
 * (jumpback.h: the same contract in expected O(1) integer steps). */
typedef enum chash_jump_rule {
    CHASH_JUMP_LAMPING,
    CHASH_JUMP_GUAVA,
    CHASH_JUMP_BACK,
} chash_jump_rule;

/* chash_jump(), chash_jump_guava() or chash_jumpback(); 0 for an unknown
 * rule or a bad nbuckets. */
uint32_t chash_jump_by(chash_jump_rule rule, uint64_t key, size_t nbuckets);

/*
 * A preference list of want distinct buckets for key: out[0] is the
 * rule's bucket among all nbuckets; out[k] (k >= 1) is the rule's bucket
 * of the rehashed key chash_mix64(key + k) among the nbuckets - k buckets
 * not chosen yet, counted in bucket order.  So each further choice is
 * jump over the buckets that remain: when a bucket fails, its keys spread
 * evenly over all the others (the next bucket in number would take them
 * all).  want is cut to nbuckets.  Writes *found (<= want) buckets;
 * returns 0, or CHASH_EINVAL for an unknown rule or a bad nbuckets.
 * (JumpBackHash's limit, CHASH_JUMPBACK_MAX_BUCKETS, is jump's.)
 */
int chash_jump_preference(chash_jump_rule rule, uint64_t key, size_t nbuckets, size_t want,
                          uint32_t *out, size_t *found);

#endif /* CHASH_JUMP_H */
