/*
 * rendezvous.c - highest random weight over node hashes (rendezvous.h).
 */
#include "rendezvous.h"

#include "mix.h"

uint64_t chash_rendezvous_score(uint64_t key, uint64_t node)
{
    return chash_mix64(key ^ node);
}

int chash_rendezvous_assign(const uint64_t *keys, size_t nkeys, const uint64_t *nodes,
                            size_t nnodes, uint32_t *out)
{
    if (nnodes == 0 || nnodes > UINT32_MAX)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++) {
        size_t best = 0;
        uint64_t best_score = chash_rendezvous_score(keys[i], nodes[0]);
        for (size_t k = 1; k < nnodes; k++) {
            uint64_t score = chash_rendezvous_score(keys[i], nodes[k]);
            /* Ties go to the smaller node hash so that listing order never
             * matters; strict comparisons keep the smaller index last. */
            if (score > best_score || (score == best_score && nodes[k] < nodes[best])) {
                best = k;
                best_score = score;
            }
        }
        out[i] = (uint32_t)best;
    }
    return CHASH_OK;
}
