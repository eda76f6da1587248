/*
 * rendezvous.h - highest random weight (Thaler & Ravishankar 1998): each
 * key goes to the node with the highest score mix(key, node); O(n) a
 * lookup, exactly the keys of a removed node move.  Nodes are told apart by
 * a 64-bit hash each, so the result depends on the set of node hashes, not
 * on the order they are listed in.  Plain C11, no state, no allocation.
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

#endif /* CHASH_RENDEZVOUS_H */
