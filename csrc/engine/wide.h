/*
 * wide.h - a ring of 64-bit points, built whole (Envoy's RING_HASH,
 * gRPC's ring_hash).
 *
 * Envoy and gRPC place 64-bit points and rebuild their ring from the host
 * list on every change, each host's point count depending on every weight
 * (envoy.h).  This ring does the same: chash_wide_build() replaces the
 * whole table at once, so there is no per-node mutation to keep in step,
 * and the 32-bit ring (chash.h) stays as it is, its lookups untouched.
 *
 * A point is (value, owner): owner is the caller's node index.  Points are
 * sorted by (value, owner), so a value several nodes share goes to the
 * smallest owner index (the references sort by value alone with std::sort,
 * which leaves such ties in no defined order; with 64-bit points they need
 * a hash collision).
 *
 * The successor rule, written once in chash_wide_successor(): the first
 * point whose value is >= the hash, wrapping to index 0.  Every lookup
 * (single, batch, preference walk) goes through it.
 *
 * Invariants (chash_wide_check()): values sorted by (value, owner); every
 * owner < the node count given to build; the bucket index maps the top
 * bits of a value to the first point whose top bits are not smaller.
 *
 * Plain C11, no Python; allocation through CHASH_MALLOC (alloc.h).  Not
 * thread-safe by itself: callers serialise builds against lookups.
 */
#ifndef CHASH_WIDE_H
#define CHASH_WIDE_H

#include <stddef.h>
#include <stdint.h>

#include "chash.h"

/* Largest ring chash_wide_build() takes: 2**27 points (12 bytes each). */
#define CHASH_WIDE_MAX_POINTS ((size_t)1 << 27)

typedef struct chash_wide chash_wide;

/* A new empty ring, or NULL when out of memory. */
chash_wide *chash_wide_new(void);
void chash_wide_free(chash_wide *ring);

/*
 * Replaces the ring's points with points[0..n) owned by owners[0..n) (any
 * order), for nnodes nodes (every owner < nnodes).  Returns 0, CHASH_EINVAL
 * (an owner >= nnodes, nnodes above CHASH_MAX_NODES), CHASH_ERANGE (n above
 * CHASH_WIDE_MAX_POINTS) or CHASH_ENOMEM; on error the ring is exactly as
 * it was (the new table is built aside, then swapped in).
 */
int chash_wide_build(chash_wide *ring, const uint64_t *points, const uint32_t *owners, size_t n,
                     size_t nnodes);

size_t chash_wide_count(const chash_wide *ring);
/* The node count given to the last successful build (0 for a new ring). */
size_t chash_wide_nodes(const chash_wide *ring);

/* Bytes the ring asked the allocator for. */
size_t chash_wide_memory(const chash_wide *ring);

/* Value and owner of point i, 0 <= i < count, in ring order. */
uint64_t chash_wide_point(const chash_wide *ring, size_t i);
uint32_t chash_wide_owner(const chash_wide *ring, size_t i);

/* The successor rule: index of the first point >= hash, wrapping to 0.
 * The ring must not be empty. */
size_t chash_wide_successor(const chash_wide *ring, uint64_t hash);

/* The owner of the successor of each hashes[i] into owners[i]; the ring
 * must not be empty. */
void chash_wide_owners(const chash_wide *ring, const uint64_t *hashes, size_t n, uint32_t *owners);

/*
 * The first n distinct owners met walking clockwise from the successor of
 * hash, into out (room for n); *found receives how many (fewer than n when
 * fewer nodes own a point).  0, or CHASH_ENOMEM (*found is then 0).
 */
int chash_wide_preference(const chash_wide *ring, uint64_t hash, size_t n, uint32_t *out,
                          size_t *found);

/* Fraction of the 2**64 values each node owns into share[0..nodes). */
void chash_wide_ownership(const chash_wide *ring, double *share);

/* Checks every invariant above in O(points); 0 or CHASH_ECORRUPT. */
int chash_wide_check(const chash_wide *ring);

#endif /* CHASH_WIDE_H */
