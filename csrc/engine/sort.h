/*
 * sort.h - the ring's points as (value, owner) pairs and their radix sort
 * (private to csrc/engine/; chash.h is the public contract).
 *
 * A leaf: sort.c calls nothing of the ring, so the ring (ring.c), its
 * index (ring_index.c) and its bulk path (ring_bulk.c) all sort through
 * it without calling each other in a circle.  ring_repr.h, which the ring's
 * files share, includes this header.
 */
#ifndef CHASH_SORT_H
#define CHASH_SORT_H

#include <stddef.h>
#include <stdint.h>

/* Names shared between the engine's files carry the chash_priv_ prefix and
 * are hidden from the shared object where the compiler allows. */
#if defined(__GNUC__) || defined(__clang__)
#define CHASH_PRIVATE __attribute__((visibility("hidden")))
#else
#define CHASH_PRIVATE
#endif

typedef struct chash_pair {
    uint32_t value; /* the 32-bit ring position */
    uint32_t owner; /* index of the owning node */
} chash_pair;

/*
 * Sorts p[0..n) by (value, owner) in place, with no scratch memory (a build
 * leaves no freed buffer behind in the heap).  Cannot fail.
 */
CHASH_PRIVATE void chash_priv_sort_pairs(chash_pair *p, size_t n);

/*
 * The n points of node k as pairs sorted by (value, owner), in a block of
 * CHASH_MALLOC the caller CHASH_FREEs; NULL when out of memory (nothing
 * else happened).  k must fit in 32 bits (a ring has at most
 * CHASH_MAX_NODES nodes).
 */
CHASH_PRIVATE chash_pair *chash_priv_sorted_pairs(const uint32_t *points, size_t n, size_t k);

#endif /* CHASH_SORT_H */
