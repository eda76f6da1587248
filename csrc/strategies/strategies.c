/*
 * strategies.c - modulo, jump, rendezvous, Maglev and bounded-loads
 * assignment of 64-bit key hashes to node indices (strategies.h).
 *
 * Each strategy is written from its paper; the comments give the reasoning
 * the code relies on.  No function keeps state between calls, so every
 * result depends only on the arguments.
 */
#include "strategies.h"

#include "engine/alloc.h"

#include <math.h>

/* Salts giving Maglev two independent views (offset, skip) of a node hash. */
#define MAGLEV_OFFSET_SALT UINT64_C(0x6A09E667F3BCC908)
#define MAGLEV_SKIP_SALT UINT64_C(0xBB67AE8584CAA73B)

uint64_t chash_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xFF51AFD7ED558CCD);
    x ^= x >> 33;
    x *= UINT64_C(0xC4CEB9FE1A85EC53);
    x ^= x >> 33;
    return x;
}

/* ------------------------------------------------------------------ */
/* Modulo                                                             */

int chash_modulo_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out)
{
    if (nbuckets == 0 || nbuckets > UINT32_MAX)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++)
        out[i] = (uint32_t)(keys[i] % nbuckets);
    return CHASH_OK;
}

/* ------------------------------------------------------------------ */
/* Jump consistent hash                                               */

/*
 * Follow a key as the bucket count grows from 1: with b + 1 buckets it sits
 * in bucket b, and it jumps to bucket j > b exactly when the count reaches
 * j + 1, which happens with probability 1 / (j + 1) at each step, so that
 * each growth takes the new bucket's fair share and nothing else.  Instead
 * of testing every step, the paper draws the next jump directly: with r
 * uniform in (0, 1], the key stays put until the count exceeds
 * (b + 1) / r, so the next destination is floor((b + 1) / r).
 *
 * The random numbers come from the key itself through the 64-bit linear
 * congruential generator key = key * 2862933555777941757 + 1, whose top 31
 * bits give r = ((key >> 33) + 1) / 2**31.  The division is done in double
 * precision exactly as the paper does, because the result has to match it
 * bit for bit: a different rounding would send some keys elsewhere.
 */
uint32_t chash_jump(uint64_t key, size_t nbuckets)
{
    if (nbuckets == 0 || nbuckets > CHASH_JUMP_MAX_BUCKETS)
        return 0;
    uint32_t bucket = 0; /* every key starts in bucket 0 of a single bucket */
    for (;;) {
        key = key * UINT64_C(2862933555777941757) + 1;
        /* (bucket + 1) <= 2**31 and the quotient <= 2**31: next <= 2**62. */
        double next = (double)((uint64_t)bucket + 1) * (2147483648.0 / (double)((key >> 33) + 1));
        /* floor(next) < n exactly when next < n, n being an integer. */
        if (next >= (double)nbuckets)
            return bucket;
        bucket = (uint32_t)next;
    }
}

int chash_jump_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out)
{
    if (nbuckets == 0 || nbuckets > CHASH_JUMP_MAX_BUCKETS)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++)
        out[i] = chash_jump(keys[i], nbuckets);
    return CHASH_OK;
}

/* ------------------------------------------------------------------ */
/* Rendezvous (highest random weight)                                 */

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

/* ------------------------------------------------------------------ */
/* Maglev                                                             */

int chash_is_prime(size_t n)
{
    if (n < 2)
        return 0;
    if (n % 2 == 0)
        return n == 2;
    /* d <= n / d rather than d * d <= n: no overflow for any size_t. */
    for (size_t d = 3; d <= n / d; d += 2)
        if (n % d == 0)
            return 0;
    return 1;
}

/*
 * The population loop of the paper (its Pseudocode 1).  Rather than
 * materialising each node's permutation (M entries a node), it keeps each
 * node's current position in it and steps by skip, which is the same
 * sequence offset + j * skip (mod M) read one entry at a time.
 *
 * Termination: a node's permutation visits every entry, so while the table
 * has a free entry each node finds one; every turn fills one entry, and the
 * loop stops at the M-th.  A node's search only ever moves forward in its
 * own permutation, so the total work is O(M log M) expected, as the paper
 * notes.
 */
/* The fill: node k's current entry is pos[2k], its skip pos[2k + 1];
 * weights (NULL: every node claims every turn) and target as in
 * chash_maglev_build_weighted().  The table is all `empty` on entry. */
static void maglev_fill(size_t *pos, const double *weights, double *target, double max_weight,
                        size_t nnodes, uint32_t *table, size_t table_size)
{
    const uint32_t empty = UINT32_MAX; /* never a node index: nnodes <= UINT32_MAX */
    size_t filled = 0;
    for (double turn = 1.0; filled < table_size; turn += 1.0) {
        for (size_t k = 0; k < nnodes && filled < table_size; k++) {
            if (weights) {
                if (turn * weights[k] < target[k])
                    continue;
                target[k] += max_weight;
            }
            size_t entry = pos[2 * k];
            while (table[entry] != empty) {
                /* entry, skip < M <= 2**30: the sum cannot overflow. */
                entry += pos[2 * k + 1];
                if (entry >= table_size)
                    entry -= table_size;
            }
            table[entry] = (uint32_t)k;
            filled++;
            entry += pos[2 * k + 1];
            pos[2 * k] = entry >= table_size ? entry - table_size : entry;
        }
    }
}

int chash_maglev_build(const uint64_t *nodes, size_t nnodes, uint32_t *table, size_t table_size)
{
    if (nnodes == 0 || nnodes > UINT32_MAX || table_size < 2 || table_size < nnodes
        || table_size > CHASH_MAGLEV_MAX_TABLE || !chash_is_prime(table_size))
        return CHASH_EINVAL;
    /* pos[2k] is node k's current entry, pos[2k + 1] its skip. */
    if (nnodes > SIZE_MAX / (2 * sizeof(size_t)))
        return CHASH_ENOMEM;
    size_t *pos = CHASH_MALLOC(2 * nnodes * sizeof *pos);
    if (!pos)
        return CHASH_ENOMEM;
    for (size_t k = 0; k < nnodes; k++) {
        pos[2 * k] = (size_t)(chash_mix64(nodes[k] ^ MAGLEV_OFFSET_SALT) % table_size);
        pos[2 * k + 1] = (size_t)(chash_mix64(nodes[k] ^ MAGLEV_SKIP_SALT) % (table_size - 1)) + 1;
    }
    for (size_t e = 0; e < table_size; e++)
        table[e] = UINT32_MAX;
    maglev_fill(pos, NULL, NULL, 0.0, nnodes, table, table_size);
    CHASH_FREE(pos);
    return CHASH_OK;
}

int chash_maglev_build_weighted(const uint64_t *offsets, const uint64_t *skips,
                                const double *weights, size_t nnodes, uint32_t *table,
                                size_t table_size)
{
    if (nnodes == 0 || nnodes > UINT32_MAX || table_size < 2
        || table_size > CHASH_MAGLEV_MAX_TABLE || !chash_is_prime(table_size))
        return CHASH_EINVAL;
    double max_weight = 0.0;
    for (size_t k = 0; k < nnodes; k++) {
        if (offsets[k] >= table_size || skips[k] == 0 || skips[k] >= table_size
            || !isfinite(weights[k]) || !(weights[k] > 0.0))
            return CHASH_EINVAL;
        max_weight = weights[k] > max_weight ? weights[k] : max_weight;
    }
    if (nnodes > SIZE_MAX / (2 * sizeof(size_t)))
        return CHASH_ENOMEM;
    size_t *pos = CHASH_MALLOC(2 * nnodes * sizeof *pos);
    double *target = CHASH_MALLOC(nnodes * sizeof *target);
    if (!pos || !target) {
        CHASH_FREE(pos);
        CHASH_FREE(target);
        return CHASH_ENOMEM;
    }
    for (size_t k = 0; k < nnodes; k++) {
        pos[2 * k] = (size_t)offsets[k];
        pos[2 * k + 1] = (size_t)skips[k];
        target[k] = 0.0;
    }
    for (size_t e = 0; e < table_size; e++)
        table[e] = UINT32_MAX;
    maglev_fill(pos, weights, target, max_weight, nnodes, table, table_size);
    CHASH_FREE(pos);
    CHASH_FREE(target);
    return CHASH_OK;
}

int chash_table_assign(const uint64_t *keys, size_t nkeys, const uint32_t *table,
                       size_t table_size, uint32_t *out)
{
    if (table_size == 0)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++)
        out[i] = table[keys[i] % table_size];
    return CHASH_OK;
}

/* ------------------------------------------------------------------ */
/* Bounded loads                                                      */

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
