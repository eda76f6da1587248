/*
 * strategies.h - key-to-node strategies other than the ring itself,
 * for comparing them with it (chash simulate) and for routers of their own:
 * one header for the binding, which includes each strategy's own.
 *
 * Every strategy here maps a 64-bit key hash to a node index in [0, n).
 * Nodes are numbered by the caller; where a strategy needs to tell nodes
 * apart by more than their number (rendezvous, Maglev) the caller passes
 * one 64-bit hash per node, so the result depends on the set of node
 * hashes, not on the order in which they are listed (but for Maglev,
 * whose table is filled round-robin in the given order).
 *
 *   jump.h        modulo (hash % n: nearly every key moves when n changes)
 *                 and jump consistent hash (Lamping & Veach 2014);
 *   jumpback.h    JumpBackHash (Ertl 2025), hash4j's, over SplitMix64;
 *   anchor.h      JumpBackAnchor, hash4j's: any bucket removable, its
 *                 state shared as bytes;
 *   rendezvous.h  highest random weight (Thaler & Ravishankar 1998);
 *   maglev.h      Maglev (Eisenbud et al. 2016): permutations, the plain
 *                 and Envoy's weighted fill, Envoy's whole table, lookups;
 *   bounded.h     consistent hashing with bounded loads (Mirrokni, Thorup
 *                 & Zadimoghaddam 2018) over a chash_ring;
 *   mix.h         the 64-bit mixer rendezvous and Maglev derive from.
 *
 * Plain C11: no Python, no global state.  Bulk functions take arrays and
 * write one node index a key to out; they return 0 or a negative
 * chash_status (chash.h) and write nothing useful on error.  The only
 * allocations (Maglev and bounded loads scratch space, JumpBackAnchor's
 * set) go through CHASH_MALLOC / CHASH_REALLOC / CHASH_FREE, replaceable
 * at compile time.  No .c file of its own: each strategy's file includes
 * only its own header and mix.h (anchor.c also jumpback.h, whose walk it
 * continues).
 */
#ifndef CHASH_STRATEGIES_H
#define CHASH_STRATEGIES_H

#include "mix.h"
#include "jump.h"
#include "jumpback.h"
#include "anchor.h"
#include "rendezvous.h"
#include "maglev.h"
#include "bounded.h"

#endif /* CHASH_STRATEGIES_H */
