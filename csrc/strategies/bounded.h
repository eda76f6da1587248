/*
 * bounded.h - consistent hashing with bounded loads (Mirrokni, Thorup &
 * Zadimoghaddam 2018) over a ring (chash.h), read through its own
 * successor rule.  Plain C11, no state; its one allocation goes through
 * CHASH_MALLOC / CHASH_FREE.
 */
#ifndef CHASH_BOUNDED_H
#define CHASH_BOUNDED_H

#include <stddef.h>
#include <stdint.h>

#include "engine/chash.h"

/*
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

#endif /* CHASH_BOUNDED_H */
