/*
 * ring_repr.h - the ring's representation, shared by the files of
 * the ring engine (private to csrc/engine/; chash.h is the public contract):
 *
 *   ring.c        lifecycle, single-node changes, lookups, the check
 *   ring_index.c  the id index (node id -> position), O(1) expected
 *   ring_bulk.c   the bulk path: adding many nodes, recounting many
 *                 nodes at once
 *   sort.c        the radix sort of points (sort.h, a leaf)
 *
 * Calls point one way: ring_bulk.c calls ring.c, which calls
 * ring_index.c; each may call sort.c, which calls none of them.
 * Names shared between those files carry the chash_priv_ prefix and are
 * hidden from the shared object where the compiler allows (CHASH_PRIVATE,
 * from sort.h).
 */
#ifndef CHASH_RING_REPR_H
#define CHASH_RING_REPR_H

#include "chash.h"
#include "alloc.h"
#include "sort.h"

#include <string.h>

/* Ids up to this long live inside their node entry (NUL-terminated), so
 * finding a node by id reads its entry and nothing else; longer ones get a
 * heap copy. */
#define INLINE_ID 31
/* Node entries are aligned to this (a cache line on common CPUs). */
#define NODE_ALIGN 64

/* A node entry, 64 bytes; a new per-node field goes here (chash_ring_node()
 * copies what callers see into a chash_node_view). */
typedef struct chash_node {
    uint64_t id_hash;    /* id_hash_of(id): where the id index looks first */
    size_t id_len;
    void *data;
    size_t npoints;
    union {
        char bytes[INLINE_ID + 1]; /* id_len <= INLINE_ID */
        char *heap;                /* id_len > INLINE_ID */
    } id;
} chash_node;

struct chash_ring {
    chash_pair *pt;      /* npoints points, sorted */
    size_t npoints;
    size_t point_cap;    /* entries allocated in pt */
    uint32_t *bucket;    /* (1 << bucket_bits) + 1 indices into pt */
    size_t bucket_cap;   /* entries allocated in bucket */
    unsigned bucket_bits;
    chash_node *nodes;   /* in insertion order, each entry one cache line */
    void *node_block;    /* the allocation nodes lies in (nodes is aligned up) */
    size_t nnodes;
    size_t node_cap;
    /* The id index: an open-addressing table (linear probing) of
     * slot_mask + 1 entries, a power of two at least twice the node count;
     * 0 is a free slot, k + 1 names node k.  slot_cap entries are
     * allocated (more than slot_mask + 1 after a shrink that could not
     * hand the block back). */
    uint32_t *slot;
    size_t slot_mask;
    size_t slot_cap;
    chash_ties ties;     /* how points of equal value are ordered */
    chash_rule rule;     /* which point a hash is routed to */
};

/* The id bytes of a node, NUL-terminated. */
static inline const char *id_of(const chash_node *node)
{
    return node->id_len <= INLINE_ID ? node->id.bytes : node->id.heap;
}

/* Fills a node entry; heap is the id's copy when it is too long to sit
 * inline (from copy_id(), owned by the entry from now on), else NULL. */
static inline chash_node make_node(const char *id, size_t id_len, char *heap, void *data,
                            size_t npoints, uint64_t id_hash)
{
    chash_node node = {id_hash, id_len, data, npoints, {{0}}};
    if (heap)
        node.id.heap = heap;
    else if (id_len)
        memcpy(node.id.bytes, id, id_len);
    return node;
}

/* The heap copy of an id too long to sit inline, owned by nobody yet. */
static inline void free_node_id(chash_node *node)
{
    if (node->id_len > INLINE_ID)
        CHASH_FREE(node->id.heap);
}

/* ring.c: the points, the bucket index and room for growth. */
CHASH_PRIVATE int chash_priv_check_growth(const chash_ring *ring, size_t already, size_t n);
CHASH_PRIVATE int chash_priv_compare_ids(const char *a, size_t alen, const char *b, size_t blen);
CHASH_PRIVATE char *chash_priv_copy_id(const char *id, size_t id_len);
CHASH_PRIVATE int chash_priv_has_node(const chash_ring *ring, const char *id, size_t id_len);
CHASH_PRIVATE void chash_priv_merge_sorted(chash_ring *ring, const chash_pair *add, size_t n);
CHASH_PRIVATE int chash_priv_owner_before(const chash_ring *ring, size_t a, size_t b);
CHASH_PRIVATE void chash_priv_release_slack(chash_ring *ring);
CHASH_PRIVATE int chash_priv_reserve_buckets(const chash_ring *ring, size_t n, uint32_t **fresh);
CHASH_PRIVATE int chash_priv_reserve_merge(chash_ring *ring, size_t n, uint32_t **fresh);
CHASH_PRIVATE int chash_priv_reserve_nodes(chash_ring *ring, size_t count);
CHASH_PRIVATE int chash_priv_reserve_points(chash_ring *ring, size_t total);
CHASH_PRIVATE void chash_priv_update_buckets(chash_ring *ring, uint32_t *fresh, const chash_pair *add, size_t n, const chash_pair *drop, size_t ndrop);

/* ring_index.c: the id index. */
CHASH_PRIVATE uint64_t chash_priv_id_hash_of(const char *id, size_t len);
CHASH_PRIVATE void chash_priv_index_commit(chash_ring *ring, uint32_t *fresh, size_t first);
CHASH_PRIVATE size_t chash_priv_index_probe(const chash_ring *ring, const char *id, size_t id_len, uint64_t h);
CHASH_PRIVATE void chash_priv_index_rebuild(chash_ring *ring, size_t size);
CHASH_PRIVATE void chash_priv_index_remove(chash_ring *ring, size_t k);
CHASH_PRIVATE size_t chash_priv_index_size_for(size_t nnodes);
CHASH_PRIVATE int chash_priv_reserve_index(const chash_ring *ring, size_t count, uint32_t **fresh);

#endif /* CHASH_RING_REPR_H */
