/*
 * ring_index.c - the ring's id index: an open-addressing table
 * (linear probing, backward-shift deletion) from a node's id to its
 * position in insertion order, so finding a node costs O(1) expected
 * whatever the node count.  Representation in ring_repr.h.
 */
#include "ring_repr.h"

/* Smallest id index for this many nodes: a power of two, at least twice
 * as many slots as nodes (probe runs stay short), at least 8. */
CHASH_PRIVATE size_t chash_priv_index_size_for(size_t nnodes)
{
    size_t size = 8;
    while (size < 2 * nnodes)
        size *= 2;
    return size;
}

/* A 64-bit hash of id bytes for the index: eight bytes a multiply, then a
 * final avalanche.  Only the index's slot order depends on it, never a
 * route, so it need not match any published hash. */
CHASH_PRIVATE uint64_t chash_priv_id_hash_of(const char *id, size_t len)
{
    const uint64_t mul = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t h = (uint64_t)len * mul;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t word;
        memcpy(&word, id + i, 8);
        h = (h ^ word) * mul;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    for (unsigned shift = 0; i < len; i++, shift += 8)
        tail |= (uint64_t)(unsigned char)id[i] << shift;
    h = (h ^ tail) * UINT64_C(0xD6E8FEB86659FD93);
    h ^= h >> 32;
    h *= UINT64_C(0xD6E8FEB86659FD93);
    return h ^ (h >> 32);
}

/* The slot holding the node with this id, or the free slot that ends its
 * probe run.  The table always has a free slot (it is at most half full). */
CHASH_PRIVATE size_t chash_priv_index_probe(const chash_ring *ring, const char *id, size_t id_len, uint64_t h)
{
    size_t mask = ring->slot_mask;
    for (size_t s = (size_t)h & mask;; s = (s + 1) & mask) {
        uint32_t e = ring->slot[s];
        if (e == 0)
            return s;
        const chash_node *node = &ring->nodes[e - 1];
        if (node->id_hash == h && node->id_len == id_len
            && (id_len == 0 || memcmp(id_of(node), id, id_len) == 0))
            return s;
    }
}

/* Enters node k (registered, id not yet in the index); cannot fail. */
static void index_insert(chash_ring *ring, size_t k)
{
    const chash_node *node = &ring->nodes[k];
    size_t s = chash_priv_index_probe(ring, id_of(node), node->id_len, node->id_hash);
    ring->slot[s] = (uint32_t)(k + 1);
}

/* Refills the index (size slots, already allocated) from the node table. */
CHASH_PRIVATE void chash_priv_index_rebuild(chash_ring *ring, size_t size)
{
    ring->slot_mask = size - 1;
    memset(ring->slot, 0, size * sizeof *ring->slot);
    for (size_t k = 0; k < ring->nnodes; k++)
        index_insert(ring, k);
}

/* Room in the index for count more nodes: *fresh receives a new table when
 * the current one would be over half full (NULL otherwise); 0 or
 * CHASH_ENOMEM, and the ring is untouched either way. */
CHASH_PRIVATE int chash_priv_reserve_index(const chash_ring *ring, size_t count, uint32_t **fresh)
{
    size_t size = chash_priv_index_size_for(ring->nnodes + count);
    *fresh = NULL;
    if (size <= ring->slot_mask + 1)
        return CHASH_OK;
    *fresh = CHASH_MALLOC(size * sizeof **fresh);
    return *fresh ? CHASH_OK : CHASH_ENOMEM;
}

/* Enters nodes [first, nnodes), into fresh (from reserve_index) if given. */
CHASH_PRIVATE void chash_priv_index_commit(chash_ring *ring, uint32_t *fresh, size_t first)
{
    if (fresh) {
        CHASH_FREE(ring->slot);
        ring->slot = fresh;
        ring->slot_cap = chash_priv_index_size_for(ring->nnodes);
        chash_priv_index_rebuild(ring, ring->slot_cap);
        return;
    }
    for (size_t k = first; k < ring->nnodes; k++)
        index_insert(ring, k);
}

/* Takes node k out of the index (before the node table closes the gap)
 * and renumbers the nodes after it, k + 1 .. n - 1, one lower.  Backward
 * shift: every entry after the hole in the probe run moves into it when
 * its home slot does not lie between the hole and itself, so no probe run
 * is ever broken and no tombstone is needed. */
CHASH_PRIVATE void chash_priv_index_remove(chash_ring *ring, size_t k)
{
    const chash_node *node = &ring->nodes[k];
    size_t mask = ring->slot_mask;
    size_t hole = chash_priv_index_probe(ring, id_of(node), node->id_len, node->id_hash);
    for (size_t j = (hole + 1) & mask; ring->slot[j] != 0; j = (j + 1) & mask) {
        size_t home = (size_t)ring->nodes[ring->slot[j] - 1].id_hash & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            ring->slot[hole] = ring->slot[j];
            hole = j;
        }
    }
    ring->slot[hole] = 0;
    uint32_t limit = (uint32_t)(k + 1);
    for (size_t s = 0; s <= mask; s++)
        ring->slot[s] -= ring->slot[s] > limit;
}
