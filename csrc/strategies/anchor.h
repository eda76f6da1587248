/*
 * anchor.h - JumpBackAnchor: a consistent hash over a set of buckets from
 * which any bucket can be removed, exactly as hash4j's
 * ConsistentHashing.jumpBackAnchorHash(PseudoRandomGeneratorProvider
 * .splitMix64_V1()) computes it (the memory-optimised AnchorHash of
 * Mendelson et al., 2020, over JumpBackHash, jumpback.h, instead of a
 * fixed anchor).  Same history of adds and removes, same bucket for every
 * hash, same ids, same state bytes.
 *
 * The model.  Buckets are ids in [0, high), "high" being the most buckets
 * ever in use since the set was last empty (hash4j's historicMaxNumBuckets,
 * the paper's a).  Removed ids form a stack; adding pops the most recently
 * removed id, or takes id high when none is removed.  A key walks
 * JumpBackHash over all high ids; while it lands on a removed bucket b, it
 * draws a uniform index below the number of buckets b's removal left and
 * follows, through the buckets removed later, the chain to that index's
 * bucket in that smaller view.  So removing a bucket moves only its keys,
 * evenly onto the others, and re-adding it (the stack's top) moves them
 * back.  Two special cases keep the state minimal, as hash4j does:
 * removing the last live bucket empties the set (high = 0), and removing
 * bucket high - 1 while nothing is removed just lowers high.
 *
 * The state (chash_anchor_state()): 4 + 4 * removed bytes, little-endian
 * 32-bit integers: high, then the removed ids from the bottom of the stack
 * to its top: hash4j's getState() byte for byte.  Memory in use grows with
 * the largest removed id (8 bytes per id below it) and the number removed.
 *
 * Invariants (checked by chash_anchor_check()): nremoved < high, or both
 * are 0; the stack holds distinct ids below high; exactly the stacked ids
 * are marked removed; the r-th removed id from the bottom (r from 0) has
 * the view high - 1 - r (the live count its removal left) and the chain
 * target a replay of the stack computes; no id at or above high is marked.
 *
 * Plain C11, no Python.  Every allocation goes through CHASH_MALLOC /
 * CHASH_REALLOC / CHASH_FREE (alloc.h).  A chash_anchor is not safe to
 * change from two threads at once; lookups only read.
 */
#ifndef CHASH_ANCHOR_H
#define CHASH_ANCHOR_H

#include <stddef.h>
#include <stdint.h>

#include "engine/chash.h"

/* Most ids a set can use (high's limit): a state naming more is refused,
 * which bounds what a foreign state can make us allocate (8 bytes an id,
 * 128 MiB at most). */
#define CHASH_ANCHOR_MAX_BUCKETS (UINT32_C(1) << 24)

typedef struct chash_anchor chash_anchor;

/* An empty set; NULL when out of memory.  Free with chash_anchor_free(). */
chash_anchor *chash_anchor_new(void);

/* Frees the set and everything it owns; NULL is accepted. */
void chash_anchor_free(chash_anchor *a);

/*
 * Adds a bucket and writes its id to *bucket: the most recently removed id
 * when one is removed, otherwise high (then high grows by one).  This is
 * the id hash4j's addBucket() returns.  Never allocates.  Returns 0, or
 * CHASH_ERANGE when high would pass CHASH_ANCHOR_MAX_BUCKETS (nothing
 * changed).
 */
int chash_anchor_add(chash_anchor *a, uint32_t *bucket);

/*
 * Removes bucket id b, whichever it is.  Returns 0; CHASH_ENOENT when b is
 * not a live bucket (hash4j's removeBucket() returning false); or
 * CHASH_ENOMEM.  All-or-nothing: on error the set is as it was.
 */
int chash_anchor_remove(chash_anchor *a, uint32_t b);

/*
 * The bucket of a 64-bit key hash (the unsigned image of Java's long), as
 * hash4j's getBucket(hash).  Returns 0 and writes *bucket, or CHASH_ENOENT
 * when the set has no bucket.  Reads only.
 */
int chash_anchor_lookup(const chash_anchor *a, uint64_t hash, uint32_t *bucket);

/*
 * A preference list for a key hash: out[0] is its bucket, out[k] the
 * bucket it would have if out[0..k) were removed, in that order (each
 * removal as chash_anchor_remove() would do it), without changing the set.
 * want is cut to the number of live buckets; writes *found (<= want) ids.
 * Costs O(want^2) beyond want lookups.  Returns 0, CHASH_ENOENT when the
 * set has no bucket (and want > 0), or CHASH_ENOMEM (scratch for want
 * entries); nothing is changed either way.
 */
int chash_anchor_preference(const chash_anchor *a, uint64_t hash, size_t want, uint32_t *out,
                            size_t *found);

/* Live buckets (hash4j's getNumBuckets()). */
uint32_t chash_anchor_size(const chash_anchor *a);

/* high: live ids all lie below it (0 when empty). */
uint32_t chash_anchor_high(const chash_anchor *a);

/* 1 when b is a live bucket, else 0. */
int chash_anchor_contains(const chash_anchor *a, uint32_t b);

/* Writes the chash_anchor_size() live ids to out, ascending (hash4j's
 * getBuckets() order). */
void chash_anchor_buckets(const chash_anchor *a, uint32_t *out);

/* The state's length in bytes: 4 + 4 * (high - size). */
size_t chash_anchor_state_size(const chash_anchor *a);

/*
 * Writes the state (hash4j's getState() bytes) to out, which holds cap
 * bytes.  Returns 0, or CHASH_EINVAL when cap < chash_anchor_state_size()
 * (nothing written).
 */
int chash_anchor_state(const chash_anchor *a, uint8_t *out, size_t cap);

/*
 * Replaces the set by the one a state describes, as hash4j's setState()
 * does for every state its getState() writes.  Refused with CHASH_EINVAL,
 * the set unchanged: a length below 4 or not a multiple of 4; high above
 * CHASH_ANCHOR_MAX_BUCKETS (CHASH_ERANGE); a removed id not below high or
 * named twice; every id removed (a state getState() never writes: hash4j
 * takes it and is left with no bucket yet one id not marked removed).  CHASH_ENOMEM leaves it unchanged
 * too.
 */
int chash_anchor_set_state(chash_anchor *a, const uint8_t *state, size_t len);

/*
 * Asserts every invariant listed above (O(slots + removed * chain), for
 * tests).  Returns 0 or CHASH_ECORRUPT.
 */
int chash_anchor_check(const chash_anchor *a);

#endif /* CHASH_ANCHOR_H */
