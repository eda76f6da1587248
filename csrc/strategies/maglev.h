/*
 * maglev.h - Maglev (Eisenbud et al., "Maglev: A Fast and Reliable Software
 * Network Load Balancer", NSDI 2016): a lookup table of prime size M filled
 * from per-node permutations; a lookup is one remainder and one load.
 *
 * Everything of Maglev lives here:
 *   - the permutations: this project's, from a 64-bit node hash
 *     (chash_maglev_build), and Envoy's MAGLEV, from a host's key
 *     (chash_envoy_maglev_entry);
 *   - the fills: the paper's round-robin (chash_maglev_build) and Envoy's
 *     weighted one (chash_maglev_build_weighted);
 *   - Envoy's whole table build from its hosts' keys and weights
 *     (chash_maglev_envoy_table), behind chash.MaglevRouter;
 *   - the lookup: table[key % M] (chash_table_assign), and that remainder
 *     without a division (chash_maglev_mod_magic, chash_maglev_mod).
 *
 * Plain C11: no Python, no global state.  Functions return 0 or a negative
 * chash_status (chash.h) and write nothing useful on error; their scratch
 * space goes through CHASH_MALLOC / CHASH_FREE, replaceable at compile
 * time.  The tables are the caller's.
 */
#ifndef CHASH_MAGLEV_H
#define CHASH_MAGLEV_H

#include <stddef.h>
#include <stdint.h>

#include "engine/chash.h"

/* Largest Maglev table (entries are uint32_t node indices). */
#define CHASH_MAGLEV_MAX_TABLE ((size_t)1 << 30)

/* The usual Maglev table size: prime, and roomy enough for ~650 nodes at
 * the 1% imbalance the paper aims for (M > 100 n). */
#define CHASH_MAGLEV_DEFAULT_TABLE ((size_t)65537)

/* 1 when n is prime, else 0 (trial division; n up to 2**32 is instant). */
int chash_is_prime(size_t n);

/*
 * Fills a Maglev lookup table of table_size entries with node indices.
 * Node i's preference list is the permutation
 *     offset_i, offset_i + skip_i, offset_i + 2 skip_i, ...  (mod M)
 * with offset_i = mix64(node ^ A) % M and skip_i = mix64(node ^ B) % (M - 1)
 * + 1, two independent views of the one node hash; M prime makes every
 * skip coprime to M, so each list visits every entry.  Nodes then take
 * turns, in index order, claiming the next free entry of their list until
 * the table is full, so every node gets floor(M / n) or ceil(M / n) entries.
 *
 * Returns 0, CHASH_EINVAL (nnodes == 0 or above UINT32_MAX, table_size not
 * a prime in [nnodes, CHASH_MAGLEV_MAX_TABLE], or table_size < 2) or
 * CHASH_ENOMEM (scratch space of 8 bytes a node); on error the table's
 * contents are unspecified.
 */
int chash_maglev_build(const uint64_t *nodes, size_t nnodes, uint32_t *table, size_t table_size);

/*
 * Envoy's permutation of host id in a Maglev table of prime size m >= 2:
 * it starts at XXH64(id, 0) % m and steps by XXH64(id, 1) % (m - 1) + 1.
 */
void chash_envoy_maglev_entry(const char *id, size_t id_len, uint64_t m, uint64_t *offset,
                              uint64_t *skip);

/*
 * The weighted Maglev fill of Envoy's MAGLEV: node k's permutation is
 * offsets[k] + j * skips[k] (mod M) (offset < M, 1 <= skip < M), and in turn
 * t = 1, 2, ... node k claims its next free entry only when
 * t * weights[k] >= target[k] (target starting at 0), then target[k] grows
 * by the largest weight: a node of the largest weight claims every turn,
 * one of a third of it every third turn.  Equal weights give the plain
 * round-robin of chash_maglev_build().  Nodes may outnumber entries (the
 * table fills first).  Returns 0, CHASH_EINVAL (nnodes == 0 or above
 * UINT32_MAX, table_size not a prime in [2, CHASH_MAGLEV_MAX_TABLE], an
 * offset or skip out of range, a weight not finite and > 0) or
 * CHASH_ENOMEM; on error the table's contents are unspecified.
 */
int chash_maglev_build_weighted(const uint64_t *offsets, const uint64_t *skips,
                                const double *weights, size_t nnodes, uint32_t *table,
                                size_t table_size);

/*
 * Envoy's MAGLEV table of n hosts, as Envoy builds it: the hosts sorted by
 * their keys' bytes (ids[k], lens[k] bytes; a shorter key first when one is
 * a prefix of the other), each host's permutation from its key
 * (chash_envoy_maglev_entry), its weight normalised by the sum
 * (weights[k] / sum, in double precision), the weighted fill
 * (chash_maglev_build_weighted); then every entry renamed to the host's
 * position k in the given order, and counts[k] set to the entries host k
 * holds (counts sum to m).  So the table depends on the set of (key,
 * weight) pairs, not on their order, but for the names of the positions.
 *
 * table has room for m entries, counts for n.  n == 0 writes nothing and
 * returns 0.  Returns 0, CHASH_EINVAL (n above UINT32_MAX, m not a prime in
 * [2, CHASH_MAGLEV_MAX_TABLE], a weight of 0, or weights summing past
 * UINT64_MAX), CHASH_EEXIST (two hosts with one key) or CHASH_ENOMEM
 * (scratch space of about 40 bytes a host); on error table and counts are
 * unspecified.
 */
int chash_maglev_envoy_table(const char *const *ids, const size_t *lens, const uint64_t *weights,
                             size_t n, size_t m, uint32_t *table, size_t *counts);

/*
 * table[key % table_size] for every key: the Maglev lookup (any table of
 * node indices works).  Returns 0, or CHASH_EINVAL when table_size is 0.
 */
int chash_table_assign(const uint64_t *keys, size_t nkeys, const uint32_t *table,
                       size_t table_size, uint32_t *out);

/*
 * h % m by multiplications (Lemire, Kaser & Kurz, "Faster Remainder by
 * Direct Computation", 2019): with magic = floor((2**128 - 1) / m) + 1, the
 * remainder is the top 64 bits of ((magic * h) mod 2**128) * m / 2**64,
 * exact for every 64-bit h and 2 <= m < 2**64.  A Maglev lookup is one
 * remainder, and a 64-bit division costs more than the rest of it.
 *
 * chash_maglev_mod_magic writes magic's high and low halves for m >= 2
 * (zeros where the compiler has no 128-bit integers);
 * chash_maglev_mod(magic, m, h) is then h % m, for every h.  Inline: it is
 * the lookup's hot path.
 */
#if defined(__SIZEOF_INT128__)
static inline void chash_maglev_mod_magic(uint64_t m, uint64_t magic[2])
{
    unsigned __int128 full = ~(unsigned __int128)0 / m + 1;
    magic[0] = (uint64_t)(full >> 64);
    magic[1] = (uint64_t)full;
}

static inline uint64_t chash_maglev_mod(const uint64_t magic[2], uint64_t m, uint64_t h)
{
    unsigned __int128 full = (unsigned __int128)magic[0] << 64 | magic[1];
    unsigned __int128 low = full * h;
    unsigned __int128 bottom = ((low & UINT64_MAX) * m) >> 64;
    unsigned __int128 top = (low >> 64) * m;
    return (uint64_t)((top + bottom) >> 64);
}
#else
static inline void chash_maglev_mod_magic(uint64_t m, uint64_t magic[2])
{
    (void)m;
    magic[0] = magic[1] = 0;
}

static inline uint64_t chash_maglev_mod(const uint64_t magic[2], uint64_t m, uint64_t h)
{
    (void)magic;
    return h % m;
}
#endif

#endif /* CHASH_MAGLEV_H */
