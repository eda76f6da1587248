/*
 * maglev.c - Maglev's permutations, fills, Envoy's table build and the
 * lookup (maglev.h).
 *
 * Each piece is written from its source (the paper's Pseudocode 1, Envoy's
 * MaglevTable); the comments give the reasoning the code relies on.  No
 * function keeps state between calls, so every result depends only on the
 * arguments.
 */
#include "maglev.h"

#include "mix.h"
#include "engine/alloc.h"
#include "hash/hash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Salts giving Maglev two independent views (offset, skip) of a node hash. */
#define MAGLEV_OFFSET_SALT UINT64_C(0x6A09E667F3BCC908)
#define MAGLEV_SKIP_SALT UINT64_C(0xBB67AE8584CAA73B)

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
 * chash_maglev_build_weighted().  taken holds a bit an entry, all 0 on
 * entry: a node's search reads it, not the table, so the probes stay in
 * M / 8 bytes (8 KiB for Envoy's default table) that the first-level
 * cache holds, where the table is M * 4 bytes.  Every entry is written
 * once, so the table needs no fill beforehand. */
static void maglev_fill(size_t *pos, const double *weights, double *target, double max_weight,
                        size_t nnodes, uint32_t *table, uint64_t *taken, size_t table_size)
{
    size_t filled = 0;
    for (double turn = 1.0; filled < table_size; turn += 1.0) {
        for (size_t k = 0; k < nnodes && filled < table_size; k++) {
            if (weights) {
                if (turn * weights[k] < target[k])
                    continue;
                target[k] += max_weight;
            }
            size_t entry = pos[2 * k];
            while (taken[entry >> 6] >> (entry & 63) & 1) {
                /* entry, skip < M <= 2**30: the sum cannot overflow. */
                entry += pos[2 * k + 1];
                if (entry >= table_size)
                    entry -= table_size;
            }
            taken[entry >> 6] |= (uint64_t)1 << (entry & 63);
            table[entry] = (uint32_t)k;
            filled++;
            entry += pos[2 * k + 1];
            pos[2 * k] = entry >= table_size ? entry - table_size : entry;
        }
    }
}

/* The bitmap maglev_fill() reads, all 0; NULL when out of memory. */
static uint64_t *taken_bits(size_t table_size)
{
    size_t words = table_size / 64 + 1;
    uint64_t *taken = CHASH_MALLOC(words * sizeof *taken);
    if (taken)
        memset(taken, 0, words * sizeof *taken);
    return taken;
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
    uint64_t *taken = pos ? taken_bits(table_size) : NULL;
    if (!taken) {
        CHASH_FREE(pos);
        return CHASH_ENOMEM;
    }
    for (size_t k = 0; k < nnodes; k++) {
        pos[2 * k] = (size_t)(chash_mix64(nodes[k] ^ MAGLEV_OFFSET_SALT) % table_size);
        pos[2 * k + 1] = (size_t)(chash_mix64(nodes[k] ^ MAGLEV_SKIP_SALT) % (table_size - 1)) + 1;
    }
    maglev_fill(pos, NULL, NULL, 0.0, nnodes, table, taken, table_size);
    CHASH_FREE(pos);
    CHASH_FREE(taken);
    return CHASH_OK;
}

void chash_envoy_maglev_entry(const char *id, size_t id_len, uint64_t m, uint64_t *offset,
                              uint64_t *skip)
{
    *offset = chash_xxh64(id, id_len, 0) % m;
    *skip = chash_xxh64(id, id_len, 1) % (m - 1) + 1;
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
    uint64_t *taken = pos && target ? taken_bits(table_size) : NULL;
    if (!taken) {
        CHASH_FREE(pos);
        CHASH_FREE(target);
        return CHASH_ENOMEM;
    }
    for (size_t k = 0; k < nnodes; k++) {
        pos[2 * k] = (size_t)offsets[k];
        pos[2 * k + 1] = (size_t)skips[k];
        target[k] = 0.0;
    }
    maglev_fill(pos, weights, target, max_weight, nnodes, table, taken, table_size);
    CHASH_FREE(pos);
    CHASH_FREE(target);
    CHASH_FREE(taken);
    return CHASH_OK;
}

/* Hosts sorted by their keys' bytes, as Envoy sorts host keys. */
typedef struct {
    const char *id;
    size_t len;
    size_t at; /* the host's position in the caller's order */
} sorted_host;

static int compare_hosts(const void *pa, const void *pb)
{
    const sorted_host *a = pa, *b = pb;
    size_t common = a->len < b->len ? a->len : b->len;
    int c = common ? memcmp(a->id, b->id, common) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

int chash_maglev_envoy_table(const char *const *ids, const size_t *lens, const uint64_t *weights,
                             size_t n, size_t m, uint32_t *table, size_t *counts)
{
    if (n == 0)
        return CHASH_OK;
    if (n > UINT32_MAX || m < 2 || m > CHASH_MAGLEV_MAX_TABLE || !chash_is_prime(m))
        return CHASH_EINVAL;
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        if (weights[k] == 0 || weights[k] > UINT64_MAX - sum)
            return CHASH_EINVAL;
        sum += weights[k];
    }
    sorted_host *hosts = CHASH_MALLOC(n * sizeof *hosts);
    uint64_t *offsets = CHASH_MALLOC(n * sizeof *offsets);
    uint64_t *skips = CHASH_MALLOC(n * sizeof *skips);
    double *norm = CHASH_MALLOC(n * sizeof *norm);
    int status = CHASH_ENOMEM;
    if (!hosts || !offsets || !skips || !norm)
        goto done;
    for (size_t k = 0; k < n; k++)
        hosts[k] = (sorted_host){ids[k], lens[k], k};
    qsort(hosts, n, sizeof *hosts, compare_hosts);
    status = CHASH_EEXIST;
    for (size_t i = 1; i < n; i++)
        if (compare_hosts(&hosts[i - 1], &hosts[i]) == 0)
            goto done;
    /* n >= 1: a do-while says so to GCC 12, which otherwise fears norm
     * unwritten (-Wmaybe-uninitialized, in a split-off part of this
     * function that no longer knows n > 0). */
    size_t i = 0;
    do {
        chash_envoy_maglev_entry(hosts[i].id, hosts[i].len, m, &offsets[i], &skips[i]);
        norm[i] = (double)weights[hosts[i].at] / (double)sum;
    } while (++i < n);
    status = chash_maglev_build_weighted(offsets, skips, norm, n, table, m);
    if (status != CHASH_OK)
        goto done;
    for (size_t k = 0; k < n; k++)
        counts[k] = 0;
    for (size_t e = 0; e < m; e++) {
        size_t at = hosts[table[e]].at;
        table[e] = (uint32_t)at;
        counts[at]++;
    }
done:
    CHASH_FREE(hosts);
    CHASH_FREE(offsets);
    CHASH_FREE(skips);
    CHASH_FREE(norm);
    return status;
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
