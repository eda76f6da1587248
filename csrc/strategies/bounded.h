/*
 * bounded.h - consistent hashing with bounded loads (Mirrokni, Thorup &
 * Zadimoghaddam 2018): the batch assignment over a ring (chash.h), read
 * through its own successor rule, and the live load table behind
 * chash.BoundedLoadRouter (chash_loads), which any router's preference
 * order is walked against.  Plain C11, no global state; allocations go
 * through CHASH_MALLOC / CHASH_FREE.
 *
 * The weighted bound is Envoy's hash_balance_factor rule: with t requests
 * in flight and a balance factor c, the whole cluster has
 * T = ceil(c * (t + 1)) slots, and a node whose weight is the share s of
 * the total weight has max(ceil(T * s), 1) of them.  A node is admitted
 * while its load is below its slots, so no node ever holds more.  With
 * equal weights this is ceil(c * (t + 1) / n), the paper's bound
 * (ceil(ceil(x) / n) == ceil(x / n) for a whole n).  The slots of all
 * nodes sum to at least T >= t + 1, so some node of the router is always
 * below its bound.
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

/*
 * The slots of a node of this weight out of total_weight, with in_flight
 * requests already placed: max(ceil(T * weight / total_weight), 1) for
 * T = ceil(balance * (in_flight + 1)); 0 when weight or total_weight is
 * not > 0 (a node no longer in the router: never admitted).  balance is
 * finite and >= 1 (the caller checked); the result saturates at
 * UINT64_MAX.
 */
uint64_t chash_bounded_slots(double balance, uint64_t in_flight, double weight,
                             double total_weight);

/*
 * The same rule over a real load (the loads a caller tracks itself, which
 * may be fractional: chash's get_bounded): max(ceil(T * weight /
 * total_weight), 1) for T = ceil(balance * (load + 1)), as a double (a
 * whole number, or +inf); 0 when weight or total_weight is not > 0.
 * chash_bounded_slots is this at load = in_flight, saturated.  balance is
 * finite and >= 1 and load finite and >= 0 (the caller checked).
 */
double chash_bounded_slots_real(double balance, double load, double weight, double total_weight);

/*
 * A live load table: one slot a node (numbered by the caller), each with
 * a weight (>= 0: 0 for a node that left the router but still holds
 * requests) and the requests it holds, their sum, and the balance factor.
 * Opaque; made with chash_loads_create, freed with chash_loads_free.
 *
 * Invariants (chash_loads_check): the in-flight count is the sum of the
 * loads; the total weight is the sum of the weights, > 0 when any weight
 * is; every weight is finite and >= 0.
 */
typedef struct chash_loads chash_loads;

/*
 * A table of n slots with these weights and loads (both copied; loads may
 * be NULL for all zero).  *out is set only on success.
 *
 * Returns 0, CHASH_EINVAL (balance not a finite number >= 1, a weight
 * negative or not finite, n above CHASH_LOADS_MAX) or CHASH_ENOMEM.
 */
#define CHASH_LOADS_MAX ((size_t)1 << 30)
int chash_loads_create(chash_loads **out, double balance, size_t n, const double *weights,
                       const uint64_t *loads);
void chash_loads_free(chash_loads *loads);

size_t chash_loads_size(const chash_loads *loads);
double chash_loads_balance(const chash_loads *loads);
uint64_t chash_loads_in_flight(const chash_loads *loads);
/* The load of a slot (0 for one out of range). */
uint64_t chash_loads_load(const chash_loads *loads, size_t slot);
/* The slots of a slot's node if the next request went there
 * (chash_bounded_slots of its weight's share); 0 out of range. */
uint64_t chash_loads_bound(const chash_loads *loads, size_t slot);
/* 1 when the slot's load is below its bound, else 0 (also out of range). */
int chash_loads_admits(const chash_loads *loads, size_t slot);

/*
 * The walk: the first position i of order[0..n) whose slot admits one
 * more request, or n when none does (or an entry is out of range: such
 * entries are skipped).  Only reads.
 */
size_t chash_loads_pick(const chash_loads *loads, const uint32_t *order, size_t n);

/* One more request on slot: 0, or CHASH_EINVAL (out of range; nothing changed). */
int chash_loads_take(chash_loads *loads, size_t slot);
/*
 * chash_loads_admits and chash_loads_take in one call, for the path of
 * nearly every request (its owner below its bound): 1 when the slot
 * admitted one more request and took it, 0 when it is at its bound
 * (nothing changed: walk the preference order), or CHASH_EINVAL when
 * slot is out of range or the in-flight count is at its maximum (nothing
 * changed).
 */
int chash_loads_try_take(chash_loads *loads, size_t slot);
/* One request fewer on slot: 0, CHASH_EINVAL (out of range) or
 * CHASH_ENOENT (it holds none); on error nothing changed. */
int chash_loads_put(chash_loads *loads, size_t slot);

/* 0 when every invariant above holds, CHASH_ECORRUPT otherwise. */
int chash_loads_check(const chash_loads *loads);

#endif /* CHASH_BOUNDED_H */
