/*
 * bounded.c - bounded loads (bounded.h): the batch assignment over a
 * ring's successor rule, Envoy's weighted slots, and the live load table.
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

/* ------------------------------------------------------------------ */
/* The weighted bound and the live table                              */

/* ceil(x), exactly, without a call into the maths library (there is no
 * rounding instruction before SSE4.1, so the compiler calls ceil(); a
 * bounded lookup computes two bounds a node it tries).  From 2**52 every
 * double is whole (and NaN and the infinities are their own ceil); below
 * it, x >= 0 truncates exactly through an integer. */
static inline double ceil_exact(double x)
{
    if (!(x >= 0.0 && x < 4503599627370496.0))
        return ceil(x);
    double whole = (double)(uint64_t)x;
    return whole < x ? whole + 1.0 : x;
}

double chash_bounded_slots_real(double balance, double load, double weight, double total_weight)
{
    if (!(weight > 0.0) || !(total_weight > 0.0))
        return 0.0;
    double total = ceil_exact(balance * (load + 1.0));
    /*
     * T * weight / total_weight, multiplied first: with whole weights the
     * product is exact and the division correctly rounded, so a share
     * that divides T gives a whole number (T * (1.0 / n) might not).
     */
    double slots = weight >= total_weight ? total : ceil_exact(total * weight / total_weight);
    return slots < 1.0 ? 1.0 : slots;
}

uint64_t chash_bounded_slots(double balance, uint64_t in_flight, double weight,
                             double total_weight)
{
    /* 2**64 as a double: anything at or above saturates. */
    const double cap = 18446744073709551616.0;
    double slots = chash_bounded_slots_real(balance, (double)in_flight, weight, total_weight);
    return slots >= cap ? UINT64_MAX : (uint64_t)slots;
}

/* A slot's load beside its weight: admitting a request reads both, so
 * they share a cache line (a lookup touches one line of the table, not two). */
typedef struct {
    uint64_t load;
    double weight;
} loads_slot;

struct chash_loads {
    size_t n;
    double balance;
    double total_weight;
    uint64_t in_flight;
    loads_slot *slots;
};

int chash_loads_create(chash_loads **out, double balance, size_t n, const double *weights,
                       const uint64_t *loads)
{
    if (!isfinite(balance) || balance < 1.0 || n > CHASH_LOADS_MAX || (n && !weights))
        return CHASH_EINVAL;
    double total = 0.0;
    uint64_t in_flight = 0;
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(weights[k]) || weights[k] < 0.0)
            return CHASH_EINVAL;
        total += weights[k];
        if (loads) {
            if (loads[k] > UINT64_MAX - in_flight)
                return CHASH_EINVAL;
            in_flight += loads[k];
        }
    }
    if (!isfinite(total))
        return CHASH_EINVAL;
    chash_loads *t = CHASH_MALLOC(sizeof *t);
    loads_slot *slots = CHASH_MALLOC((n ? n : 1) * sizeof *slots);
    if (!t || !slots) {
        CHASH_FREE(t);
        CHASH_FREE(slots);
        return CHASH_ENOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        slots[k].load = loads ? loads[k] : 0;
        slots[k].weight = weights[k];
    }
    t->n = n;
    t->balance = balance;
    t->total_weight = total;
    t->in_flight = in_flight;
    t->slots = slots;
    *out = t;
    return CHASH_OK;
}

void chash_loads_free(chash_loads *loads)
{
    if (!loads)
        return;
    CHASH_FREE(loads->slots);
    CHASH_FREE(loads);
}

size_t chash_loads_size(const chash_loads *loads)
{
    return loads->n;
}

double chash_loads_balance(const chash_loads *loads)
{
    return loads->balance;
}

uint64_t chash_loads_in_flight(const chash_loads *loads)
{
    return loads->in_flight;
}

uint64_t chash_loads_load(const chash_loads *loads, size_t slot)
{
    return slot < loads->n ? loads->slots[slot].load : 0;
}

/*
 * The rules behind chash_loads_bound and chash_loads_admits, for a slot in
 * range.  Static, so that the exported functions built on them (admits,
 * try_take, pick) inline them rather than call each other through the
 * shared object's symbol table.
 */
static uint64_t slot_bound(const chash_loads *loads, const loads_slot *at)
{
    if (!(loads->total_weight > 0.0))
        return 0;
    return chash_bounded_slots(loads->balance, loads->in_flight, at->weight, loads->total_weight);
}

static int slot_admits(const chash_loads *loads, const loads_slot *at)
{
    /* The common case under light load: a weighted node holding nothing has
     * at least one slot, so the bound need not be computed. */
    if (at->load == 0)
        return at->weight > 0.0;
    return at->load < slot_bound(loads, at);
}

uint64_t chash_loads_bound(const chash_loads *loads, size_t slot)
{
    return slot < loads->n ? slot_bound(loads, &loads->slots[slot]) : 0;
}

int chash_loads_admits(const chash_loads *loads, size_t slot)
{
    return slot < loads->n && slot_admits(loads, &loads->slots[slot]);
}

size_t chash_loads_pick(const chash_loads *loads, const uint32_t *order, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (order[i] < loads->n && slot_admits(loads, &loads->slots[order[i]]))
            return i;
    return n;
}

int chash_loads_take(chash_loads *loads, size_t slot)
{
    if (slot >= loads->n || loads->in_flight == UINT64_MAX)
        return CHASH_EINVAL;
    loads->slots[slot].load++;
    loads->in_flight++;
    return CHASH_OK;
}

int chash_loads_try_take(chash_loads *loads, size_t slot)
{
    if (slot >= loads->n || loads->in_flight == UINT64_MAX)
        return CHASH_EINVAL;
    loads_slot *at = &loads->slots[slot];
    if (!slot_admits(loads, at))
        return 0;
    at->load++;
    loads->in_flight++;
    return 1;
}

int chash_loads_put(chash_loads *loads, size_t slot)
{
    if (slot >= loads->n)
        return CHASH_EINVAL;
    if (loads->slots[slot].load == 0)
        return CHASH_ENOENT;
    loads->slots[slot].load--;
    loads->in_flight--;
    return CHASH_OK;
}

int chash_loads_check(const chash_loads *loads)
{
    uint64_t sum = 0;
    double total = 0.0;
    for (size_t k = 0; k < loads->n; k++) {
        const loads_slot *at = &loads->slots[k];
        if (!isfinite(at->weight) || at->weight < 0.0)
            return CHASH_ECORRUPT;
        if (at->load > UINT64_MAX - sum)
            return CHASH_ECORRUPT;
        sum += at->load;
        total += at->weight;
    }
    if (sum != loads->in_flight || total != loads->total_weight)
        return CHASH_ECORRUPT;
    return CHASH_OK;
}
