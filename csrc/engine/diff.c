/*
 * diff.c - the arcs whose owner differs between two rings (diff.h).
 *
 * A cursor walks one ring's routing as a step function over [0, max]: a
 * sequence of steps (pos, owner), pos strictly increasing and ending at
 * max, step k owning the hashes (pos of step k - 1, pos] (from 0 for the
 * first).  The cyclic function is cut at the top of the space: the last
 * step repeats the owner of the first.  Two cursors are merged like two
 * sorted lists; each stretch between consecutive positions of either has
 * one owner in each ring, and is reported when the two differ.
 *
 * The steps of one ring, from its sorted points (runs of equal values):
 *  - successor rule: (v, first point's owner) for each run's value v, the
 *    owner the successor rule reads (chash_ring_successor() returns the
 *    first point whose value is >= the hash, so the first of a run);
 *  - nearest rule (chash_ring_nearest()): between the run of value a
 *    (last point owner L) and the next run, of value b (first point owner
 *    F), lie g = b - a (mod 2**32) values: a + 1 .. a + g/2 (rounded down)
 *    are nearer a or tied and go to L, the rest, b included, to F.  So the
 *    steps are (b, F) and (a + g/2, L) when g/2 > 0; the last run's middle
 *    may wrap past the top and then comes first.  A ring whose points all
 *    share one value v gives v itself, a tie at distance 0, to the point
 *    before the successor, the last point: (v - 1, v + 2**31] go to L and
 *    the rest to F;
 *  - varnish rule (chash_ring_varnish()): no wrap, so no cut at the top:
 *    (v, F) for each run's value v, F its first point's owner, but (v - 1,
 *    F) then (v, X) where an exact hit on v starts from another owner X,
 *    and (max, last point's owner) for the values above the last point;
 *    a ring of two points routes every hash to the second (the
 *    bisection's first probe, i = 1, is the last point).
 *    These steps are listed whole (varnish_steps) and merged as lists.
 */
#include "diff.h"

#include "alloc.h"
#include "ring_repr.h"

#include <string.h>

typedef struct {
    const chash_pair *pt;   /* the 32-bit ring's points, or NULL */
    const chash_wide *wide; /* or the 64-bit ring's */
    size_t n;               /* points, > 0 */
    uint64_t max;           /* the top of the hash space */
    int nearest;
    int phase;
    size_t i;               /* first point of the current run */
    size_t end;             /* one past its last point */
    /* A prepared list of steps (the wrapped middle, or a one-value
     * nearest ring), read before the runs. */
    uint64_t list_pos[2];
    uint32_t list_owner[2];
    int nlist, at;
    uint32_t first_owner;   /* the first step's owner, repeated at max */
    int emitted;
} cursor;

enum { PHASE_LIST, PHASE_VALUE, PHASE_MIDDLE, PHASE_FINAL };

static inline uint64_t value_at(const cursor *c, size_t i)
{
    return c->pt ? c->pt[i].value : chash_wide_point(c->wide, i);
}

static inline uint32_t owner_at(const cursor *c, size_t i)
{
    return c->pt ? c->pt[i].owner : chash_wide_owner(c->wide, i);
}

/* One past the last point of the run starting at i. */
static inline size_t run_end(const cursor *c, size_t i)
{
    uint64_t v = value_at(c, i);
    size_t j = i + 1;
    while (j < c->n && value_at(c, j) == v)
        j++;
    return j;
}

static void cursor_init(cursor *c, const chash_pair *pt, const chash_wide *wide, size_t n,
                        uint64_t max, int nearest)
{
    memset(c, 0, sizeof *c);
    c->pt = pt;
    c->wide = wide;
    c->n = n;
    c->max = max;
    c->nearest = nearest;
    c->phase = PHASE_LIST;
    if (!nearest)
        return;
    uint64_t first = value_at(c, 0), last = value_at(c, n - 1);
    if (first == last) {
        /* One value only: (v - 1, v + 2**31] to the last point's owner. */
        uint64_t p1 = (first - 1) & max, p2 = (first + (max >> 1) + 1) & max;
        uint32_t f = owner_at(c, 0), l = owner_at(c, n - 1);
        int swap = p2 < p1;
        c->list_pos[0] = swap ? p2 : p1;
        c->list_owner[0] = swap ? l : f;
        c->list_pos[1] = swap ? p1 : p2;
        c->list_owner[1] = swap ? f : l;
        c->nlist = 2;
        c->i = n; /* no runs to read after the list */
        return;
    }
    /* The last run's middle, when it wraps past the top, comes first. */
    uint64_t half = ((first - last) & max) / 2;
    if (half > max - last) {
        c->list_pos[0] = last + half - max - 1;
        c->list_owner[0] = owner_at(c, n - 1);
        c->nlist = 1;
    }
}

/* The next step; never called after the step at max. */
static inline void cursor_next(cursor *c, uint64_t *pos, uint32_t *owner)
{
    for (;;) {
        switch (c->phase) {
        case PHASE_LIST:
            if (c->at < c->nlist) {
                *pos = c->list_pos[c->at];
                *owner = c->list_owner[c->at];
                c->at++;
                goto emit;
            }
            c->phase = PHASE_VALUE;
            continue;
        case PHASE_VALUE:
            if (c->i == c->n) {
                c->phase = PHASE_FINAL;
                continue;
            }
            c->end = run_end(c, c->i);
            *pos = value_at(c, c->i);
            *owner = owner_at(c, c->i);
            if (c->nearest)
                c->phase = PHASE_MIDDLE;
            else
                c->i = c->end;
            goto emit;
        case PHASE_MIDDLE: {
            uint64_t v = value_at(c, c->i);
            int last_run = c->end == c->n;
            uint64_t next = value_at(c, last_run ? 0 : c->end);
            uint64_t half = ((next - v) & c->max) / 2;
            size_t last_point = c->end - 1;
            c->i = c->end;
            c->phase = PHASE_VALUE;
            /* No middle step for a gap of one value; the last run's middle
             * came first when it wraps. */
            if (half == 0 || half > c->max - v)
                continue;
            *pos = v + half;
            *owner = owner_at(c, last_point);
            goto emit;
        }
        default:
            *pos = c->max;
            *owner = c->first_owner;
            return;
        }
    }
emit:
    if (!c->emitted) {
        c->emitted = 1;
        c->first_owner = *owner;
    }
}

typedef struct {
    chash_move *moves;
    size_t count, cap;
} move_list;

/* Appends the stretch [lo, hi] moving from source to target, joined to the
 * last arc when it continues it; 0 or CHASH_ENOMEM. */
static int push_move(move_list *list, uint64_t lo, uint64_t hi, uint32_t source, uint32_t target,
                     uint64_t max)
{
    if (list->count) {
        chash_move *last = &list->moves[list->count - 1];
        if (last->end + 1 == lo && last->source == source && last->target == target) {
            last->end = hi;
            return CHASH_OK;
        }
    }
    if (list->count == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 64;
        chash_move *grown = CHASH_REALLOC(list->moves, cap * sizeof *grown);
        if (!grown)
            return CHASH_ENOMEM;
        list->moves = grown;
        list->cap = cap;
    }
    /* The arc before lo: the top of the space when lo is 0 (max + 1 is
     * not a power of two for a table's entries). */
    list->moves[list->count++] = (chash_move){lo ? lo - 1 : max, hi, source, target};
    return CHASH_OK;
}

/* The cut at the top: an arc ending at max continued by one from 0 is
 * joined to it.  Hands the list over to *moves (NULL when empty). */
static int finish(move_list *list, uint64_t max, chash_move **moves, size_t *count)
{
    size_t n = list->count;
    if (n >= 2 && list->moves[0].start == max && list->moves[n - 1].end == max
        && list->moves[0].source == list->moves[n - 1].source
        && list->moves[0].target == list->moves[n - 1].target) {
        list->moves[0].start = list->moves[n - 1].start;
        list->count--;
    }
    if (list->count == 0) {
        CHASH_FREE(list->moves);
        list->moves = NULL;
    }
    *moves = list->moves;
    *count = list->count;
    return CHASH_OK;
}

/* The merge of two cursors; same maps a's owners to b's.  0 or
 * CHASH_ENOMEM (nothing returned). */
static int merge(cursor *a, cursor *b, const uint32_t *same, uint64_t max, chash_move **moves,
                 size_t *count)
{
    move_list list = {NULL, 0, 0};
    uint64_t pa, pb, lo = 0;
    uint32_t oa, ob;
    cursor_next(a, &pa, &oa);
    cursor_next(b, &pb, &ob);
    for (;;) {
        uint64_t hi = pa < pb ? pa : pb;
        if (same[oa] != ob && push_move(&list, lo, hi, oa, ob, max) != CHASH_OK) {
            CHASH_FREE(list.moves);
            return CHASH_ENOMEM;
        }
        if (hi == max)
            break;
        lo = hi + 1;
        if (pa == hi)
            cursor_next(a, &pa, &oa);
        if (pb == hi)
            cursor_next(b, &pb, &ob);
    }
    return finish(&list, max, moves, count);
}

/* 1 when the ring routes by the nearest rule. */
static int ring_nearest(const chash_ring *ring)
{
    return chash_ring_rule(ring) == CHASH_RULE_NEAREST;
}

/* A ring's routing as a list of steps (pos strictly increasing, the last
 * at max), for the varnish rule. */
typedef struct {
    uint64_t *pos;
    uint32_t *owner;
    size_t n;
} step_list;

static void push_step(step_list *list, uint64_t pos, uint32_t owner)
{
    list->pos[list->n] = pos;
    list->owner[list->n] = owner;
    list->n++;
}

/* The steps of a varnish-rule ring (the header's list); 0 or CHASH_ENOMEM.
 * At most two steps a run and one at the top. */
static int varnish_steps(const chash_ring *ring, step_list *list)
{
    size_t n = ring->npoints;
    list->n = 0;
    list->pos = CHASH_MALLOC((2 * n + 1) * sizeof *list->pos);
    list->owner = CHASH_MALLOC((2 * n + 1) * sizeof *list->owner);
    if (!list->pos || !list->owner) {
        CHASH_FREE(list->pos);
        CHASH_FREE(list->owner);
        return CHASH_ENOMEM;
    }
    const chash_pair *pt = ring->pt;
    if (n == 2) { /* the bisection's first probe is the last point: all of it */
        push_step(list, UINT32_MAX, pt[1].owner);
        return CHASH_OK;
    }
    for (size_t i = 0; i < n;) {
        uint32_t v = pt[i].value, first = pt[i].owner;
        size_t end = i + 1;
        while (end < n && pt[end].value == v)
            end++;
        uint32_t hit = end - i > 1 ? pt[chash_ring_varnish(ring, v)].owner : first;
        if (hit != first && v > 0 && (list->n == 0 || list->pos[list->n - 1] < (uint64_t)v - 1))
            push_step(list, (uint64_t)v - 1, first);
        push_step(list, v, hit);
        i = end;
    }
    if (pt[n - 1].value < UINT32_MAX)
        push_step(list, UINT32_MAX, pt[n - 1].owner);
    return CHASH_OK;
}

/* The merge of two step lists; same maps a's owners to b's.  0 or
 * CHASH_ENOMEM (nothing returned). */
static int merge_steps(const step_list *a, const step_list *b, const uint32_t *same,
                       chash_move **moves, size_t *count)
{
    const uint64_t max = UINT32_MAX;
    move_list list = {NULL, 0, 0};
    size_t i = 0, j = 0;
    uint64_t lo = 0;
    for (;;) {
        uint64_t pa = a->pos[i], pb = b->pos[j], hi = pa < pb ? pa : pb;
        uint32_t oa = a->owner[i], ob = b->owner[j];
        if (same[oa] != ob && push_move(&list, lo, hi, oa, ob, max) != CHASH_OK) {
            CHASH_FREE(list.moves);
            return CHASH_ENOMEM;
        }
        if (hi == max)
            break;
        lo = hi + 1;
        i += pa == hi;
        j += pb == hi;
    }
    return finish(&list, max, moves, count);
}

/* The diff of two varnish-rule rings, both non-empty. */
static int diff_varnish(const chash_ring *from, const chash_ring *to, const uint32_t *same,
                        chash_move **moves, size_t *count)
{
    step_list a, b;
    if (varnish_steps(from, &a) != CHASH_OK)
        return CHASH_ENOMEM;
    if (varnish_steps(to, &b) != CHASH_OK) {
        CHASH_FREE(a.pos);
        CHASH_FREE(a.owner);
        return CHASH_ENOMEM;
    }
    int status = merge_steps(&a, &b, same, moves, count);
    CHASH_FREE(a.pos);
    CHASH_FREE(a.owner);
    CHASH_FREE(b.pos);
    CHASH_FREE(b.owner);
    return status;
}

/*
 * The merge for two 32-bit rings under the successor rule, the common
 * case, on the point arrays directly: the same steps as two cursors (a
 * run's value and its first point's owner; the first owner again at the
 * top), with a stretch of points the two rings share walked in one pass.
 */
static int merge_successor(const chash_pair *pa, size_t na, const chash_pair *pb, size_t nb,
                           const uint32_t *same, chash_move **moves, size_t *count)
{
    const uint64_t max = UINT32_MAX;
    move_list list = {NULL, 0, 0};
    size_t i = 0, j = 0;
    uint64_t lo = 0;
    for (;;) {
        /* Points both rings hold with the same owner, no run of equal
         * values among them: nothing moves up to them. */
        while (i + 1 < na && j + 1 < nb && pa[i].value == pb[j].value
               && same[pa[i].owner] == pb[j].owner && pa[i + 1].value != pa[i].value
               && pb[j + 1].value != pb[j].value) {
            lo = (uint64_t)pa[i].value + 1;
            i++;
            j++;
        }
        uint64_t va = i < na ? pa[i].value : max, vb = j < nb ? pb[j].value : max;
        uint32_t oa = i < na ? pa[i].owner : pa[0].owner, ob = j < nb ? pb[j].owner : pb[0].owner;
        uint64_t hi = va < vb ? va : vb;
        if (same[oa] != ob && push_move(&list, lo, hi, oa, ob, max) != CHASH_OK) {
            CHASH_FREE(list.moves);
            return CHASH_ENOMEM;
        }
        if (hi == max)
            break;
        lo = hi + 1;
        if (va == hi)
            while (++i < na && pa[i].value == hi)
                ;
        if (vb == hi)
            while (++j < nb && pb[j].value == hi)
                ;
    }
    return finish(&list, max, moves, count);
}

int chash_ring_diff(const chash_ring *from, const chash_ring *to, chash_move **moves,
                    size_t *count)
{
    *moves = NULL;
    *count = 0;
    if (chash_ring_rule(from) != chash_ring_rule(to))
        return CHASH_EINVAL;
    if (from->npoints == 0 || to->npoints == 0)
        return from->npoints == to->npoints ? CHASH_OK : CHASH_EINVAL;
    uint32_t *same = CHASH_MALLOC(from->nnodes * sizeof *same);
    if (!same)
        return CHASH_ENOMEM;
    for (size_t k = 0; k < from->nnodes; k++) {
        size_t at;
        const chash_node *node = &from->nodes[k];
        same[k] = chash_ring_find(to, id_of(node), node->id_len, &at) == CHASH_OK
                      ? (uint32_t)at
                      : CHASH_DIFF_NONE;
    }
    int status;
    if (chash_ring_rule(from) == CHASH_RULE_VARNISH) {
        status = diff_varnish(from, to, same, moves, count);
    } else if (ring_nearest(from)) {
        cursor a, b;
        cursor_init(&a, from->pt, NULL, from->npoints, UINT32_MAX, 1);
        cursor_init(&b, to->pt, NULL, to->npoints, UINT32_MAX, 1);
        status = merge(&a, &b, same, UINT32_MAX, moves, count);
    } else {
        status = merge_successor(from->pt, from->npoints, to->pt, to->npoints, same, moves,
                                 count);
    }
    CHASH_FREE(same);
    return status;
}

int chash_wide_diff(const chash_wide *from, const chash_wide *to, const uint32_t *same,
                    chash_move **moves, size_t *count)
{
    *moves = NULL;
    *count = 0;
    size_t na = chash_wide_count(from), nb = chash_wide_count(to);
    if (na == 0 || nb == 0)
        return na == nb ? CHASH_OK : CHASH_EINVAL;
    size_t to_nodes = chash_wide_nodes(to);
    for (size_t k = 0; k < chash_wide_nodes(from); k++)
        if (same[k] != CHASH_DIFF_NONE && same[k] >= to_nodes)
            return CHASH_EINVAL;
    cursor a, b;
    cursor_init(&a, NULL, from, na, UINT64_MAX, 0);
    cursor_init(&b, NULL, to, nb, UINT64_MAX, 0);
    return merge(&a, &b, same, UINT64_MAX, moves, count);
}

int chash_table_diff(const uint32_t *from, const uint32_t *to, size_t size, const uint32_t *same,
                     size_t from_nodes, size_t to_nodes, chash_move **moves, size_t *count)
{
    *moves = NULL;
    *count = 0;
    if (size == 0 || !from || !to || !same)
        return CHASH_EINVAL;
    for (size_t k = 0; k < from_nodes; k++)
        if (same[k] != CHASH_DIFF_NONE && same[k] >= to_nodes)
            return CHASH_EINVAL;
    move_list list = {NULL, 0, 0};
    uint64_t max = (uint64_t)size - 1;
    for (size_t e = 0; e < size; e++) {
        uint32_t source = from[e], target = to[e];
        int bad = source >= from_nodes || target >= to_nodes;
        if (bad || (same[source] != target
                    && push_move(&list, e, e, source, target, max) != CHASH_OK)) {
            CHASH_FREE(list.moves);
            return bad ? CHASH_EINVAL : CHASH_ENOMEM;
        }
    }
    return finish(&list, max, moves, count);
}

void chash_moves_free(chash_move *moves) { CHASH_FREE(moves); }
