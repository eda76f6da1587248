/*
 * bounded.c - bounded loads over a ring's successor rule (bounded.h).
 */
#include "bounded.h"

#include "engine/alloc.h"

#include <math.h>

int chash_bounded_assign(const chash_ring *ring, double balance, const uint64_t *keys,
                         size_t nkeys, uint32_t *out)
{
    size_t npoints = chash_ring_point_count(ring), nnodes = chash_ring_node_count(ring);
    if (npoints == 0 || !isfinite(balance) || balance < 1.0)
        return CHASH_EINVAL;
    size_t *load = CHASH_MALLOC(nnodes * sizeof *load);
    if (!load)
        return CHASH_ENOMEM;
    for (size_t k = 0; k < nnodes; k++)
        load[k] = 0;
    for (size_t m = 0; m < nkeys; m++) {
        /*
         * load < ceil(x) holds exactly when load < x for an integer load, so
         * the bound is tested without ceil(): load * n < balance * (m + 1).
         */
        double bound = balance * (double)(m + 1);
        size_t i = chash_ring_successor(ring, (uint32_t)keys[m]);
        size_t owner = chash_ring_point_owner(ring, i);
        /* At most one turn: every node owns a point, and one is under the bound. */
        for (size_t step = 1; step < npoints && (double)load[owner] * (double)nnodes >= bound; step++) {
            if (++i == npoints)
                i = 0;
            owner = chash_ring_point_owner(ring, i);
        }
        load[owner]++;
        out[m] = (uint32_t)owner;
    }
    CHASH_FREE(load);
    return CHASH_OK;
}
