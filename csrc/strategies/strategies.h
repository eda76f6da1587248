/*
 * strategies.h - key-to-node strategies other than the ring itself,
 * for comparing them with it (chash simulate) and for routers of their own.
 *
 * Every strategy here maps a 64-bit key hash to a node index in [0, n).
 * Nodes are numbered by the caller; where a strategy needs to tell nodes
 * apart by more than their number (rendezvous, Maglev) the caller passes
 * one 64-bit hash per node, so the result depends on the set of node
 * hashes, not on the order in which they are listed (but for Maglev,
 * whose table is filled round-robin in the given order).
 *
 *   modulo      hash % n: simple, and nearly every key moves when n changes.
 *   jump        Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash
 *               Algorithm" (2014): no state at all, the optimal 1/n of the
 *               keys move when a bucket is added, but buckets are numbered
 *               0..n-1 and only the last one can go away.
 *   rendezvous  highest random weight (Thaler & Ravishankar 1998): each key
 *               goes to the node with the highest score mix(key, node);
 *               O(n) a lookup, exactly the keys of a removed node move.
 *   maglev      Eisenbud et al., "Maglev: A Fast and Reliable Software
 *               Network Load Balancer" (NSDI 2016): a lookup table of prime
 *               size M filled round-robin from per-node permutations; a
 *               lookup is one modulo and one load.
 *   bounded     consistent hashing with bounded loads (Mirrokni, Thorup &
 *               Zadimoghaddam 2018) over a chash_ring, read through its
 *               own successor rule: keys are placed one by one, each on
 *               the first node met clockwise whose load is below
 *               ceil(c * (placed + 1) / n).
 *
 * Plain C11: no Python, no global state.  Bulk functions take arrays and
 * write one node index a key to out; they return 0 or a negative
 * chash_status (chash.h) and write nothing useful on error.  The only
 * allocations (Maglev and bounded loads scratch space) go through
 * CHASH_MALLOC / CHASH_FREE, replaceable at compile time.
 */
#ifndef CHASH_STRATEGIES_H
#define CHASH_STRATEGIES_H

#include <stddef.h>
#include <stdint.h>

#include "engine/chash.h"

/* Largest bucket count jump accepts (the paper's int32 bucket numbers). */
#define CHASH_JUMP_MAX_BUCKETS ((uint32_t)INT32_MAX)

/* Largest Maglev table (entries are uint32_t node indices). */
#define CHASH_MAGLEV_MAX_TABLE ((size_t)1 << 30)

/* The usual Maglev table size: prime, and roomy enough for ~650 nodes at
 * the 1% imbalance the paper aims for (M > 100 n). */
#define CHASH_MAGLEV_DEFAULT_TABLE ((size_t)65537)

/*
 * MurmurHash3's 64-bit finaliser (fmix64): a bijection on 64-bit values in
 * which every input bit affects every output bit.  Used to derive scores and
 * permutations from hashes that are already uniform but related to each
 * other (a key hash XOR a node hash).
 */
uint64_t chash_mix64(uint64_t x);

/*
 * hash % nbuckets for every key.  Returns 0, or CHASH_EINVAL when nbuckets
 * is 0 or above UINT32_MAX.
 */
int chash_modulo_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out);

/*
 * Jump consistent hash of one key: a bucket in [0, nbuckets).
 * nbuckets must lie in [1, CHASH_JUMP_MAX_BUCKETS]; 0 for any other value
 * (callers validate first, as chash_jump_assign() does).
 */
uint32_t chash_jump(uint64_t key, size_t nbuckets);

/* chash_jump() for every key; 0, or CHASH_EINVAL for a bad nbuckets. */
int chash_jump_assign(const uint64_t *keys, size_t nkeys, size_t nbuckets, uint32_t *out);

/*
 * Rendezvous score of a key on a node: chash_mix64(key ^ node), every bit of
 * both hashes taking part.  The key goes to the node with the highest score;
 * equal scores (equal node hashes, or a 2**-64 coincidence) go to the
 * smaller node hash, then to the smaller index.
 */
uint64_t chash_rendezvous_score(uint64_t key, uint64_t node);

/*
 * Winner index for every key among nnodes node hashes, O(nnodes) a key.
 * Returns 0, or CHASH_EINVAL when nnodes is 0 or above UINT32_MAX.
 */
int chash_rendezvous_assign(const uint64_t *keys, size_t nkeys, const uint64_t *nodes,
                            size_t nnodes, uint32_t *out);

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
 * table[key % table_size] for every key: the Maglev lookup (any table of
 * node indices works).  Returns 0, or CHASH_EINVAL when table_size is 0.
 */
int chash_table_assign(const uint64_t *keys, size_t nkeys, const uint32_t *table,
                       size_t table_size, uint32_t *out);

/*
 * Consistent hashing with bounded loads over a ring (chash.h).
 *
 * A key's ring position is the low 32 bits of its hash; its start is the
 * ring's successor of that position (chash_ring_successor(), the one
 * successor rule).  Keys are placed in array order; with m keys already
 * placed, a key goes to the first owner met from its start, walking
 * clockwise, whose load is below ceil(balance * (m + 1) / n) for the ring's
 * n nodes.  Such a node always exists (the loads sum to m < n * that bound,
 * and every node owns a point), so the walk ends within one turn.  After
 * all keys, no node holds more than ceil(balance * nkeys / n).  With a huge
 * balance every key stays on its successor: the plain ring.  out receives
 * node indices (the ring's insertion order).
 *
 * Returns 0, CHASH_EINVAL (an empty ring, or balance not a finite number
 * >= 1) or CHASH_ENOMEM (n load counters).  The ring is only read.
 */
int chash_bounded_assign(const chash_ring *ring, double balance, const uint64_t *keys,
                         size_t nkeys, uint32_t *out);

#endif /* CHASH_STRATEGIES_H */
