/*
 * rendezvous.h - highest random weight (Thaler & Ravishankar 1998): each
 * key goes to the node with the highest score of (key, node); O(n) a
 * lookup, and removing a node moves exactly its keys.
 *
 * Two faces:
 *  - chash_rendezvous_score / _assign: the unweighted strategy chash
 *    simulate measures, over 64-bit node hashes; no state, no allocation.
 *  - chash_rdv_set: the node set behind chash.RendezvousRouter, in one of
 *    four layouts, each a scoring rule and a tie rule:
 *      CHASH_RDV_HRW        weighted rendezvous, the logarithmic method:
 *                           u = a uniform in (0, 1) from
 *                           mix64(XXH64(key) ^ XXH64(node)), score =
 *                           weight / -ln(u), so a node owns its weight's
 *                           share; equal scores go to the larger mix, then
 *                           to the smaller node name (bytes).  The answer
 *                           depends on the set of (node, weight), never on
 *                           the order nodes were added.
 *      CHASH_RDV_PYMEMCACHE pymemcache 4.0.0's RendezvousHash: score =
 *                           murmur3_32(node "-" key, seed 0) over the
 *                           bytes given (the binding passes the low byte
 *                           of every code point, as pymemcache's murmur3
 *                           reads a str); ties go to the larger name.
 *      CHASH_RDV_CADDY      Caddy 2.6's hostByHashing (2.6.0 - 2.6.3, the
 *                           2.6 of Debian 12): score = FNV-1a-32(key
 *                           dial), nodes scanned in add order, the first
 *                           score strictly above the best so far (from 0)
 *                           wins; no node wins when every score is 0.
 *      CHASH_RDV_SQUID      Squid 5.7's CARP (src/carp.cc): the peers
 *                           scanned sorted by weight (stably, add order
 *                           among equals), each peer's hash and load
 *                           multiplier computed as carpInit does, and the
 *                           key's hash carried on from one peer to the next
 *                           as carpSelectParent carries it (it never resets
 *                           it); score = combined hash * multiplier, the
 *                           first strictly above the best so far (from 0)
 *                           wins.  Bytes are read as signed chars, as
 *                           Squid's amd64 build reads them.
 *    A set is built whole from its nodes (all-or-nothing) and never
 *    changes: a change of membership builds a new one.  Node-only work
 *    (node hashes, pymemcache's murmur3 state after "node-", CARP's
 *    multipliers) is done at build time.
 * Plain C11, no Python.
 */
#ifndef CHASH_RENDEZVOUS_H
#define CHASH_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/chash.h"

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

/* ------------------------------------------------------------------ */
/* The router's node sets                                             */

typedef enum {
    CHASH_RDV_HRW = 0,
    CHASH_RDV_PYMEMCACHE = 1,
    CHASH_RDV_CADDY = 2,
    CHASH_RDV_SQUID = 3,
    CHASH_RDV_LAYOUT_COUNT = 4
} chash_rdv_layout;

/* The largest node count of a set (the ring's own limit). */
#define CHASH_RDV_MAX_NODES CHASH_MAX_NODES
/* CARP sums its weights in a C int. */
#define CHASH_RDV_SQUID_MAX_TOTAL ((uint64_t)2147483647)

typedef struct chash_rdv_set chash_rdv_set;

/*
 * A set of n nodes in add order.  Node k is hashed from ids[k] (id_lens[k]
 * bytes) and told apart in ties by names[k] (name_lens[k] bytes, compared
 * as unsigned bytes: UTF-8 compares as code points do); weights[k] is its
 * weight: hrw any finite value > 0; pymemcache and caddy exactly 1 (they
 * have none); squid an integer >= 1 with a total of at most
 * CHASH_RDV_SQUID_MAX_TOTAL.  The bytes are copied.  Node names must be
 * distinct (not checked here: the binding's index guarantees it).
 * Returns 0 and *out (free with chash_rdv_free), or CHASH_EINVAL (layout,
 * weight, n above CHASH_RDV_MAX_NODES) or CHASH_ENOMEM; *out is untouched
 * on error.  n == 0 is a valid, empty set.
 */
int chash_rdv_build(chash_rdv_layout layout, size_t n, const char *const *ids,
                    const size_t *id_lens, const char *const *names, const size_t *name_lens,
                    const double *weights, chash_rdv_set **out);

/* Frees a set; NULL is a no-op. */
void chash_rdv_free(chash_rdv_set *set);

/* The number of nodes; the layout. */
size_t chash_rdv_size(const chash_rdv_set *set);
chash_rdv_layout chash_rdv_layout_of(const chash_rdv_set *set);

/*
 * The node (add-order index) of a key of len bytes: for hrw the key's
 * bytes are hashed with XXH64 (seed 0) first (chash_rdv_lookup_hash takes
 * that hash).  Returns 0 and *winner, or CHASH_ENOENT when the set is
 * empty, or (caddy, squid) when no score beats 0, as those programs then
 * pick no node.  No allocation.
 */
int chash_rdv_lookup(const chash_rdv_set *set, const void *key, size_t len, uint32_t *winner);
/* hrw only: the node of a key whose XXH64 is h; CHASH_EINVAL for another
 * layout, CHASH_ENOENT when empty. */
int chash_rdv_lookup_hash(const chash_rdv_set *set, uint64_t h, uint32_t *winner);

/*
 * Every node, best first, for a key: order[0 .. n) receives the add-order
 * indexes by descending score, ties broken by the layout's tie rule (so
 * order[0] is chash_rdv_lookup's winner whenever there is one).  Returns
 * 0, CHASH_ENOMEM (order unspecified) or CHASH_ENOENT when empty.
 */
int chash_rdv_rank(const chash_rdv_set *set, const void *key, size_t len, uint32_t *order);

/*
 * The share of keys node k is designed to own: hrw and squid weight /
 * total weight (hrw exactly, for uniform hashes; squid the load factor
 * CARP's multipliers aim at), pymemcache and caddy 1 / n.  0 for k >= n.
 */
double chash_rdv_share(const chash_rdv_set *set, size_t k);

/*
 * Every invariant (node hashes, multipliers and scan order recomputed from
 * the bytes kept): 0, or CHASH_ECORRUPT (or CHASH_ENOMEM).
 */
int chash_rdv_check(const chash_rdv_set *set);

/*
 * The layouts' own hashes, for tests: Squid's CARP hash of bytes
 * (carpInit's peer hash); pymemcache's murmur3_32 resumed from a state:
 * chash_rdv_murmur3_32 of a||b equals chash_murmur3_32(a||b, 0).
 */
uint32_t chash_rdv_carp_hash(const void *data, size_t len);
uint32_t chash_rdv_murmur3_32(const void *a, size_t alen, const void *b, size_t blen);

#endif /* CHASH_RENDEZVOUS_H */
