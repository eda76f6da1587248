/*
 * diff_check.h - what the C test and the fuzz target of the ring diff
 * (engine/diff.h) both check, written once: the shape of a diff's arcs
 * (ring order, none empty, none overlapping, neighbours of the same pair
 * joined) and its agreement with routing both rings.
 *
 * Routing is a step function that changes only at point values and, under
 * the nearest rule, at the middles of the gaps between them, so routing
 * every hash at each such place and one either side of it (plus 0 and the
 * top) routes every stretch of both rings at both its ends: every hash of
 * a small ring, in effect.  diff_probe_hashes() collects those hashes.
 */
#ifndef CHASH_TEST_DIFF_CHECK_H
#define CHASH_TEST_DIFF_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/chash.h"
#include "engine/diff.h"

/* 1 when h lies in the arc (start, end], wrapping; start == end is all. */
static inline int diff_arc_holds(const chash_move *m, uint64_t h)
{
    if (m->start == m->end)
        return 1;
    if (m->start < m->end)
        return m->start < h && h <= m->end;
    return h > m->start || h <= m->end;
}

/* The arcs' shape; max is the top of the hash space.  1 when right. */
static inline int diff_shape_ok(const chash_move *moves, size_t n, uint64_t max)
{
    for (size_t i = 0; i < n; i++) {
        const chash_move *m = &moves[i];
        if (m->end > max || m->start > max)
            return 0;
        if (m->start == m->end && n != 1)
            return 0; /* the whole space, with other arcs beside it */
        if (m->start > m->end && i != 0)
            return 0; /* only the first arc may wrap */
        if (i && moves[i - 1].end >= m->end)
            return 0; /* ring order */
        if (i && m->start < moves[i - 1].end)
            return 0; /* overlap */
        /* Touching neighbours of one (source, target) are joined. */
        if (i && m->start == moves[i - 1].end && m->source == moves[i - 1].source
            && m->target == moves[i - 1].target)
            return 0;
    }
    if (n >= 2) {
        /* The first arc may wrap (or begin at 0: start == max); the last
         * must end at or before its start, and is joined to it when it
         * ends at the top and the first begins at 0 with the same pair. */
        const chash_move *first = &moves[0], *last = &moves[n - 1];
        if (first->start > first->end && last->end > first->start)
            return 0;
        if (first->start == max && last->end == max && first->source == last->source
            && first->target == last->target)
            return 0;
    }
    return 1;
}

/* Appends h, h - 1 and h + 1 (within [0, max]) to out[*n..]. */
static inline void diff_push3(uint64_t *out, size_t *n, uint64_t h, uint64_t max)
{
    out[(*n)++] = h;
    if (h > 0)
        out[(*n)++] = h - 1;
    if (h < max)
        out[(*n)++] = h + 1;
}

/* Probe hashes of a ring whose sorted point values are v[0..n): room for
 * 6 * n + 2 entries; returns how many were written. */
static inline size_t diff_probe_hashes(const uint64_t *v, size_t n, uint64_t max, uint64_t *out)
{
    size_t k = 0;
    out[k++] = 0;
    out[k++] = max;
    for (size_t i = 0; i < n; i++) {
        diff_push3(out, &k, v[i], max);
        uint64_t next = v[(i + 1) % n];
        uint64_t gap = (next - v[i]) & max;
        diff_push3(out, &k, (v[i] + gap / 2) & max, max);
    }
    return k;
}

/* Probe hashes of a 32-bit ring: room for 6 * points + 2; a new array
 * (NULL when out of memory), *n its length. */
static inline uint64_t *diff_ring_probes(const chash_ring *ring, size_t *n)
{
    size_t np = chash_ring_point_count(ring);
    uint64_t *v = malloc((np ? np : 1) * sizeof *v);
    uint64_t *out = malloc((6 * np + 2) * sizeof *out);
    if (!v || !out) {
        free(v);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < np; i++)
        v[i] = chash_ring_point(ring, i);
    *n = np ? diff_probe_hashes(v, np, UINT32_MAX, out) : 0;
    free(v);
    return out;
}

/* The owner's id of hash h in ring r. */
static inline chash_node_view diff_owner(const chash_ring *r, uint64_t h)
{
    uint32_t hash = (uint32_t)h, owner;
    chash_ring_owners(r, &hash, 1, &owner);
    return chash_ring_node(r, owner);
}

static inline int diff_same_id(chash_node_view a, chash_node_view b)
{
    return a.id_len == b.id_len && (a.id_len == 0 || memcmp(a.id, b.id, a.id_len) == 0);
}

/*
 * Routes each of hashes[0..nh) in both (non-empty) 32-bit rings: where the
 * owners' ids differ exactly one arc holds h, naming both owners; where
 * they agree no arc holds it.  Returns the number of hashes that disagree.
 */
static inline size_t diff_ring_mismatches(const chash_ring *from, const chash_ring *to,
                                          const chash_move *moves, size_t n,
                                          const uint64_t *hashes, size_t nh)
{
    size_t bad = 0;
    for (size_t k = 0; k < nh; k++) {
        chash_node_view a = diff_owner(from, hashes[k]), b = diff_owner(to, hashes[k]);
        size_t holding = 0, at = 0;
        for (size_t i = 0; i < n; i++)
            if (diff_arc_holds(&moves[i], hashes[k])) {
                holding++;
                at = i;
            }
        if (diff_same_id(a, b)) {
            bad += holding != 0;
            continue;
        }
        if (holding != 1) {
            bad++;
            continue;
        }
        chash_node_view src = chash_ring_node(from, moves[at].source);
        chash_node_view dst = chash_ring_node(to, moves[at].target);
        bad += !diff_same_id(src, a) || !diff_same_id(dst, b);
    }
    return bad;
}

/* The entries of two tables (chash_table_diff) where the diff disagrees
 * with comparing them entry by entry: an entry that changes owner and no
 * arc holds, or not with that (source, target), or held by two arcs, or
 * one held that does not change.  0 when the diff is right. */
static inline size_t diff_table_mismatches(const uint32_t *from, const uint32_t *to, size_t size,
                                           const uint32_t *same, const chash_move *moves,
                                           size_t n)
{
    size_t bad = 0;
    for (size_t e = 0; e < size; e++) {
        size_t held = 0, right = 0;
        for (size_t i = 0; i < n; i++) {
            if (!diff_arc_holds(&moves[i], e))
                continue;
            held++;
            right += moves[i].source == from[e] && moves[i].target == to[e];
        }
        int changes = same[from[e]] != to[e];
        if (changes ? held != 1 || right != 1 : held != 0)
            bad++;
    }
    return bad;
}

#endif /* CHASH_TEST_DIFF_CHECK_H */
