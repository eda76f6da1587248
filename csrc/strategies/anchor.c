/*
 * anchor.c - JumpBackAnchor (anchor.h), from AnchorHash's memory-optimised
 * form, Ertl's JumpBackHash, and hash4j's documented behaviour.
 *
 * Representation.  slots[b], for b < nslots, says what became of bucket b:
 * view == 0 while b is live; once b is removed, view is the number of live
 * buckets its removal left (n), and next is the bucket that held position n
 * of the view of n + 1 buckets at that moment.  Ids at or above nslots are
 * live, so the array only reaches the largest id ever removed.  The stack
 * of removed ids is kept in removal order; a removed bucket's view equals
 * high - 1 - its depth, so a view also tells whether a bucket was removed
 * before or after another.
 */
#include <string.h>

#include "anchor.h"
#include "engine/alloc.h"
#include "jumpback.h"

typedef struct anchor_slot {
    uint32_t next; /* while removed: the bucket at position view in the view of view + 1 */
    uint32_t view; /* 0: live; else the live count left by this bucket's removal */
} anchor_slot;

struct chash_anchor {
    uint32_t high;     /* ids in use lie below it (hash4j's historicMaxNumBuckets) */
    uint32_t nremoved; /* the stack's depth */
    uint32_t *stack;   /* removed ids, oldest first; stack_cap entries */
    size_t stack_cap;
    anchor_slot *slots; /* nslots entries; ids >= nslots are live */
    size_t nslots;
};

chash_anchor *chash_anchor_new(void)
{
    chash_anchor *a = CHASH_MALLOC(sizeof *a);
    if (a)
        memset(a, 0, sizeof *a);
    return a;
}

void chash_anchor_free(chash_anchor *a)
{
    if (!a)
        return;
    CHASH_FREE(a->stack);
    CHASH_FREE(a->slots);
    CHASH_FREE(a);
}

/*
 * Where position b of the view of v buckets lies: follow, from b, every
 * bucket removed while at least v buckets were live (their view is >= v)
 * to the bucket that took its place.  Buckets removed later (smaller
 * views) are not part of that view and are not followed.
 */
static uint32_t at_view(const anchor_slot *slots, size_t nslots, uint32_t b, uint32_t v)
{
    while (b < nslots && slots[b].view >= v)
        b = slots[b].next;
    return b;
}

/* A uniform integer in [0, bound) from the stream, bound in [1, 2^31):
 * Lemire's multiply-and-reject on 32-bit draws (the low half of each
 * number), as hash4j's uniformInt. */
static uint32_t uniform_below(chash_splitmix64 *g, uint32_t bound)
{
    uint64_t m = (uint64_t)(uint32_t)chash_splitmix64_next(g) * bound;
    if ((uint32_t)m < bound) {
        uint32_t threshold = (uint32_t)(UINT64_C(0x100000000) % bound);
        while ((uint32_t)m < threshold)
            m = (uint64_t)(uint32_t)chash_splitmix64_next(g) * bound;
    }
    return (uint32_t)(m >> 32);
}

int chash_anchor_lookup(const chash_anchor *a, uint64_t hash, uint32_t *bucket)
{
    if (a->high <= a->nremoved)
        return CHASH_ENOENT;
    if (a->high <= 1) {
        *bucket = 0;
        return CHASH_OK;
    }
    chash_splitmix64 g = {hash};
    uint32_t b = chash_jumpback_walk_inline(&g, a->high);
    /* Landed on a removed bucket: its keys go uniformly to the view its
     * removal left, which may hold buckets removed later: go on. */
    while (b < a->nslots && a->slots[b].view != 0) {
        uint32_t v = a->slots[b].view;
        b = at_view(a->slots, a->nslots, uniform_below(&g, v), v);
    }
    *bucket = b;
    return CHASH_OK;
}

/*
 * The set as it would be after some removals, without touching it: high
 * (lowered while the removals took the top bucket with nothing removed, as
 * chash_anchor_remove() does), the stack's depth, and the removed buckets'
 * slots kept aside, consulted before the set's own.
 */
typedef struct overlay {
    const chash_anchor *a;
    uint32_t high, nremoved;
    size_t n;
    uint32_t *ids;
    anchor_slot *slots;
} overlay;

static anchor_slot overlay_slot(const overlay *o, uint32_t b)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->ids[i] == b)
            return o->slots[i];
    anchor_slot live = {0, 0};
    return b < o->a->nslots ? o->a->slots[b] : live;
}

static uint32_t overlay_at_view(const overlay *o, uint32_t b, uint32_t v)
{
    for (;;) {
        anchor_slot s = overlay_slot(o, b);
        if (s.view < v)
            return b;
        b = s.next;
    }
}

static uint32_t overlay_lookup(const overlay *o, uint64_t hash)
{
    if (o->high <= 1)
        return 0;
    chash_splitmix64 g = {hash};
    uint32_t b = chash_jumpback_walk_inline(&g, o->high);
    for (;;) {
        uint32_t v = overlay_slot(o, b).view;
        if (v == 0)
            return b;
        b = overlay_at_view(o, uniform_below(&g, v), v);
    }
}

/* chash_anchor_remove()'s rules on the overlay; b is live and not the
 * last live bucket (the caller stops before that). */
static void overlay_remove(overlay *o, uint32_t b)
{
    if (b == o->high - 1 && o->nremoved == 0) {
        o->high--;
        return;
    }
    o->nremoved++;
    uint32_t n = o->high - o->nremoved;
    anchor_slot s = {overlay_at_view(o, n, n + 1), n};
    o->ids[o->n] = b;
    o->slots[o->n] = s;
    o->n++;
}

int chash_anchor_preference(const chash_anchor *a, uint64_t hash, size_t want, uint32_t *out,
                            size_t *found)
{
    *found = 0;
    if (want == 0)
        return CHASH_OK;
    if (a->high <= a->nremoved)
        return CHASH_ENOENT;
    uint32_t live = a->high - a->nremoved;
    if (want > live)
        want = live;
    overlay o = {a, a->high, a->nremoved, 0, NULL, NULL};
    if (want > 1) {
        o.ids = CHASH_MALLOC((want - 1) * sizeof *o.ids);
        o.slots = CHASH_MALLOC((want - 1) * sizeof *o.slots);
        if (!o.ids || !o.slots) {
            CHASH_FREE(o.ids);
            CHASH_FREE(o.slots);
            return CHASH_ENOMEM;
        }
    }
    for (size_t k = 0; k < want; k++) {
        out[k] = overlay_lookup(&o, hash);
        if (k + 1 < want)
            overlay_remove(&o, out[k]);
    }
    CHASH_FREE(o.ids);
    CHASH_FREE(o.slots);
    *found = want;
    return CHASH_OK;
}

int chash_anchor_add(chash_anchor *a, uint32_t *bucket)
{
    if (a->nremoved > 0) {
        uint32_t b = a->stack[--a->nremoved];
        a->slots[b].view = 0;
        a->slots[b].next = 0;
        *bucket = b;
        return CHASH_OK;
    }
    if (a->high >= CHASH_ANCHOR_MAX_BUCKETS)
        return CHASH_ERANGE;
    *bucket = a->high++;
    return CHASH_OK;
}

static int is_live(const chash_anchor *a, uint32_t b)
{
    return b < a->high && (b >= a->nslots || a->slots[b].view == 0);
}

/* Room for one more stacked id and a slot for b: grown geometrically, never
 * past high; nothing else changes, so a failure leaves the set intact. */
static int reserve(chash_anchor *a, uint32_t b)
{
    if (a->stack_cap <= a->nremoved) {
        size_t cap = a->stack_cap ? 2 * a->stack_cap : 8;
        if (cap > a->high)
            cap = a->high;
        uint32_t *stack = CHASH_REALLOC(a->stack, cap * sizeof *stack);
        if (!stack)
            return CHASH_ENOMEM;
        a->stack = stack;
        a->stack_cap = cap;
    }
    if (a->nslots <= b) {
        size_t n = 2 * a->nslots > (size_t)b + 1 ? 2 * a->nslots : (size_t)b + 1;
        if (n < 16)
            n = 16;
        if (n > a->high)
            n = a->high;
        anchor_slot *slots = CHASH_REALLOC(a->slots, n * sizeof *slots);
        if (!slots)
            return CHASH_ENOMEM;
        memset(slots + a->nslots, 0, (n - a->nslots) * sizeof *slots);
        a->slots = slots;
        a->nslots = n;
    }
    return CHASH_OK;
}

int chash_anchor_remove(chash_anchor *a, uint32_t b)
{
    if (!is_live(a, b))
        return CHASH_ENOENT;
    if (a->high - 1 == a->nremoved) {
        /* The last live bucket: the set is empty again, as new. */
        CHASH_FREE(a->stack);
        CHASH_FREE(a->slots);
        memset(a, 0, sizeof *a);
        return CHASH_OK;
    }
    if (b == a->high - 1 && a->nremoved == 0) {
        /* The top bucket with nothing else removed: plain JumpBackHash
         * over one bucket fewer is the same mapping, and a smaller state. */
        a->high--;
        return CHASH_OK;
    }
    int rc = reserve(a, b);
    if (rc != CHASH_OK)
        return rc;
    a->stack[a->nremoved++] = b;
    uint32_t n = a->high - a->nremoved;
    uint32_t next = at_view(a->slots, a->nslots, n, n + 1);
    a->slots[b].next = next;
    a->slots[b].view = n;
    return CHASH_OK;
}

uint32_t chash_anchor_size(const chash_anchor *a)
{
    return a->high - a->nremoved;
}

uint32_t chash_anchor_high(const chash_anchor *a)
{
    return a->high;
}

int chash_anchor_contains(const chash_anchor *a, uint32_t b)
{
    return is_live(a, b);
}

void chash_anchor_buckets(const chash_anchor *a, uint32_t *out)
{
    size_t k = 0;
    for (uint32_t b = 0; b < a->high; b++)
        if (is_live(a, b))
            out[k++] = b;
}

size_t chash_anchor_state_size(const chash_anchor *a)
{
    return 4 + 4 * (size_t)a->nremoved;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int chash_anchor_state(const chash_anchor *a, uint8_t *out, size_t cap)
{
    if (cap < chash_anchor_state_size(a))
        return CHASH_EINVAL;
    put_le32(out, a->high);
    for (uint32_t r = 0; r < a->nremoved; r++)
        put_le32(out + 4 + 4 * (size_t)r, a->stack[r]);
    return CHASH_OK;
}

/*
 * The state is read into fresh arrays, replaying the removals in stack
 * order from a full set of high buckets (the view each one left, the chain
 * target it got), then swapped in whole: any refusal or failed allocation
 * frees the fresh arrays and leaves a untouched.
 */
int chash_anchor_set_state(chash_anchor *a, const uint8_t *state, size_t len)
{
    if (len < 4 || len % 4 != 0)
        return CHASH_EINVAL;
    uint32_t high = get_le32(state);
    if (high > (uint32_t)INT32_MAX)
        return CHASH_EINVAL; /* a negative Java int */
    if (high > CHASH_ANCHOR_MAX_BUCKETS)
        return CHASH_ERANGE;
    size_t nremoved = (len - 4) / 4;
    if (nremoved > 0 && nremoved >= high)
        return CHASH_EINVAL; /* all removed, or more ids than there are */
    uint32_t top = 0;
    for (size_t r = 0; r < nremoved; r++) {
        uint32_t b = get_le32(state + 4 + 4 * r);
        if (b >= high)
            return CHASH_EINVAL;
        if (b > top)
            top = b;
    }
    uint32_t *stack = NULL;
    anchor_slot *slots = NULL;
    size_t nslots = 0;
    if (nremoved > 0) {
        nslots = (size_t)top + 1;
        stack = CHASH_MALLOC(nremoved * sizeof *stack);
        slots = CHASH_MALLOC(nslots * sizeof *slots);
        if (!stack || !slots) {
            CHASH_FREE(stack);
            CHASH_FREE(slots);
            return CHASH_ENOMEM;
        }
        memset(slots, 0, nslots * sizeof *slots);
    }
    for (size_t r = 0; r < nremoved; r++) {
        uint32_t b = get_le32(state + 4 + 4 * r);
        if (slots[b].view != 0) { /* named twice */
            CHASH_FREE(stack);
            CHASH_FREE(slots);
            return CHASH_EINVAL;
        }
        uint32_t n = high - 1 - (uint32_t)r; /* >= 1: not all removed */
        slots[b].next = at_view(slots, nslots, n, n + 1);
        slots[b].view = n;
        stack[r] = b;
    }
    CHASH_FREE(a->stack);
    CHASH_FREE(a->slots);
    a->high = high;
    a->nremoved = (uint32_t)nremoved;
    a->stack = stack;
    a->stack_cap = nremoved;
    a->slots = slots;
    a->nslots = nslots;
    return CHASH_OK;
}

int chash_anchor_check(const chash_anchor *a)
{
    if (a->high > CHASH_ANCHOR_MAX_BUCKETS)
        return CHASH_ECORRUPT;
    if (a->nremoved >= a->high && !(a->nremoved == 0 && a->high == 0))
        return CHASH_ECORRUPT;
    if (a->nremoved > a->stack_cap || (a->nremoved > 0 && !a->slots))
        return CHASH_ECORRUPT;
    size_t marked = 0;
    for (size_t b = 0; b < a->nslots; b++) {
        if (a->slots[b].view == 0)
            continue;
        if (b >= a->high)
            return CHASH_ECORRUPT;
        marked++;
    }
    if (marked != a->nremoved)
        return CHASH_ECORRUPT;
    for (uint32_t r = 0; r < a->nremoved; r++) {
        uint32_t b = a->stack[r];
        uint32_t n = a->high - 1 - r;
        /* The view pins the depth, so a repeated id cannot pass. */
        if (b >= a->high || b >= a->nslots || a->slots[b].view != n)
            return CHASH_ECORRUPT;
        /* Buckets removed later have smaller views and are skipped, so
         * the chain is what it was when b was removed. */
        if (a->slots[b].next != at_view(a->slots, a->nslots, n, n + 1))
            return CHASH_ECORRUPT;
    }
    return CHASH_OK;
}
