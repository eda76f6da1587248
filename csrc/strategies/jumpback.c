/*
 * jumpback.c - JumpBackHash (jumpback.h), from Ertl's paper and hash4j's
 * documented behaviour: the walk itself is inline in jumpback.h, for the
 * hot loops of jump.c and anchor.c.  No function keeps state between calls.
 */
#include "jumpback.h"

uint32_t chash_jumpback_walk(chash_splitmix64 *g, uint32_t nbuckets)
{
    return chash_jumpback_walk_inline(g, nbuckets);
}

uint32_t chash_jumpback(uint64_t hash, uint32_t nbuckets)
{
    return chash_jumpback_inline(hash, nbuckets);
}

int chash_jumpback_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out)
{
    if (nbuckets == 0 || nbuckets > CHASH_JUMPBACK_MAX_BUCKETS)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++)
        out[i] = chash_jumpback(keys[i], (uint32_t)nbuckets);
    return CHASH_OK;
}
