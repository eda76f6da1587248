/*
 * test_diff.c - the arcs that change owner between two rings
 * (engine/diff.h): adds, removes, weight changes, shared points (ties by
 * id and by insertion order), the whole space moving, the cut at the top,
 * the nearest rule (HAProxy's),
 * the 64-bit ring, lookup tables (Maglev's), argument checks and
 * allocation failures; random small
 * rings against routing both rings at every place their routing can
 * change (diff_check.h).
 *
 * diff.c is included directly so its allocator can be swapped for one
 * that fails on demand; the ring, the 64-bit ring and the hashes are
 * linked.  Ends with "N passed, M failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failing_alloc.h"
#include "../../csrc/engine/diff.c"

#include "check.h"
#include "diff_check.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Du;
static uint64_t next_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x9E3779B97F4A7C15u;
}

static int add(chash_ring *r, const char *id, const uint32_t *pts, size_t n)
{
    return chash_ring_add(r, id, strlen(id), NULL, pts, n);
}

/* The diff of from and to checked against routing; returns the count. */
static size_t checked_diff(const chash_ring *from, const chash_ring *to)
{
    chash_move *moves = NULL;
    size_t n = 0;
    CHECK(chash_ring_diff(from, to, &moves, &n) == CHASH_OK);
    CHECK(diff_shape_ok(moves, n, UINT32_MAX));
    size_t na, nb;
    uint64_t *pa = diff_ring_probes(from, &na), *pb = diff_ring_probes(to, &nb);
    CHECK(pa && pb);
    if (pa && pb) {
        CHECK(diff_ring_mismatches(from, to, moves, n, pa, na) == 0);
        CHECK(diff_ring_mismatches(from, to, moves, n, pb, nb) == 0);
    }
    free(pa);
    free(pb);
    chash_moves_free(moves);
    return n;
}

static void test_add_remove_grow(void)
{
    chash_ring *a = chash_ring_new(), *b = chash_ring_new();
    const uint32_t pa[] = {100, 2000, 30000}, pb[] = {500, 4000000000u}, pc[] = {1500, 25000};
    CHECK(add(a, "a", pa, 3) == 0 && add(a, "b", pb, 2) == 0);
    CHECK(add(b, "a", pa, 3) == 0 && add(b, "b", pb, 2) == 0 && add(b, "c", pc, 2) == 0);
    chash_move *moves;
    size_t n;
    /* c takes (500, 1500] and (2000, 25000] from a. */
    CHECK(chash_ring_diff(a, b, &moves, &n) == 0 && n == 2);
    if (n == 2) {
        CHECK(moves[0].start == 500 && moves[0].end == 1500 && moves[0].source == 0
              && moves[0].target == 2);
        CHECK(moves[1].start == 2000 && moves[1].end == 25000 && moves[1].source == 0);
    }
    chash_moves_free(moves);
    CHECK(checked_diff(a, b) == 2);
    CHECK(checked_diff(b, a) == 2); /* the remove: the same arcs back */
    /* Identical rings: nothing moves. */
    CHECK(checked_diff(a, a) == 0);
    /* A weight change: b grows a point inside a's first arc. */
    const uint32_t more[] = {50};
    chash_ring *g = chash_ring_new();
    CHECK(add(g, "a", pa, 3) == 0 && add(g, "b", pb, 2) == 0);
    CHECK(chash_ring_grow(g, "b", 1, more, 1) == 0);
    CHECK(chash_ring_diff(a, g, &moves, &n) == 0 && n == 1);
    /* (4000000000, 50] wraps past the top: it was a's, now b's. */
    if (n == 1)
        CHECK(moves[0].start == 4000000000u && moves[0].end == 50 && moves[0].source == 0
              && moves[0].target == 1);
    chash_moves_free(moves);
    CHECK(checked_diff(a, g) == 1);
    chash_ring_free(a);
    chash_ring_free(b);
    chash_ring_free(g);
}

static void test_whole_space_and_top(void)
{
    chash_ring *a = chash_ring_new(), *b = chash_ring_new();
    const uint32_t p[] = {7, UINT32_MAX};
    CHECK(add(a, "x", p, 2) == 0 && add(b, "y", p, 2) == 0);
    chash_move *moves;
    size_t n;
    CHECK(chash_ring_diff(a, b, &moves, &n) == 0 && n == 1);
    if (n == 1)
        CHECK(moves[0].start == moves[0].end); /* every hash moves */
    chash_moves_free(moves);
    CHECK(checked_diff(a, b) == 1);
    /* A point at 0 and one at the top. */
    chash_ring *c = chash_ring_new(), *d = chash_ring_new();
    const uint32_t q[] = {0, UINT32_MAX}, r[] = {1u << 31};
    CHECK(add(c, "x", q, 2) == 0 && add(d, "x", q, 2) == 0 && add(d, "y", r, 1) == 0);
    CHECK(checked_diff(c, d) == 1);
    CHECK(checked_diff(d, c) == 1);
    chash_ring_free(a);
    chash_ring_free(b);
    chash_ring_free(c);
    chash_ring_free(d);
}

static void test_ties(void)
{
    /* Shared points: by id, "a" owns 10 whoever came first; by order the
     * node added first does.  Removing the owner hands the point on. */
    for (int ties = 0; ties < 2; ties++) {
        chash_ring *a = chash_ring_new(), *b = chash_ring_new();
        CHECK(chash_ring_set_ties(a, (chash_ties)ties) == 0);
        CHECK(chash_ring_set_ties(b, (chash_ties)ties) == 0);
        const uint32_t shared[] = {10, 10, 90}, other[] = {10, 50};
        CHECK(add(a, "b", other, 2) == 0 && add(a, "a", shared, 3) == 0);
        CHECK(add(b, "b", other, 2) == 0 && add(b, "a", shared, 3) == 0 && add(b, "c", other, 2) == 0);
        checked_diff(a, b);
        chash_ring *c = chash_ring_new();
        CHECK(chash_ring_set_ties(c, (chash_ties)ties) == 0);
        CHECK(add(c, "a", shared, 3) == 0 && add(c, "b", other, 2) == 0);
        checked_diff(a, c); /* the same nodes added in the other order */
        checked_diff(c, b);
        chash_ring_free(a);
        chash_ring_free(b);
        chash_ring_free(c);
    }
}

static void test_errors(void)
{
    chash_ring *a = chash_ring_new(), *e = chash_ring_new();
    const uint32_t p[] = {1};
    CHECK(add(a, "x", p, 1) == 0);
    chash_move *moves = (chash_move *)1;
    size_t n = 9;
    CHECK(chash_ring_diff(a, e, &moves, &n) == CHASH_EINVAL && moves == NULL && n == 0);
    CHECK(chash_ring_diff(e, a, &moves, &n) == CHASH_EINVAL);
    CHECK(chash_ring_diff(e, e, &moves, &n) == CHASH_OK && n == 0 && moves == NULL);
    /* Every allocation failing in turn: ENOMEM and nothing returned. */
    chash_ring *big = chash_ring_new();
    uint32_t pts[300];
    for (size_t i = 0; i < 300; i++)
        pts[i] = (uint32_t)next_u64();
    CHECK(add(big, "x", pts, 150) == 0 && add(big, "y", pts + 150, 150) == 0);
    int saw_failure = 0, saw_success = 0;
    for (long k = 0; k < 8 && !saw_success; k++) {
        fail_countdown = k;
        int status = chash_ring_diff(a, big, &moves, &n);
        fail_countdown = -1;
        if (status == CHASH_ENOMEM) {
            saw_failure = 1;
            CHECK(moves == NULL && n == 0);
        } else {
            CHECK(status == CHASH_OK && n > 64); /* past the first growth */
            saw_success = 1;
            chash_moves_free(moves);
        }
    }
    CHECK(saw_failure && saw_success);
    chash_ring_free(a);
    chash_ring_free(e);
    chash_ring_free(big);
}

/* Random small rings over a narrow value range (so points collide), with
 * nodes added, removed and regrown, each diff against routing. */
static void test_random(void)
{
    const char *ids[] = {"n0", "n1", "n2", "n3", "n4", "n5"};
    for (int round = 0; round < 400; round++) {
        chash_ring *r[2];
        chash_ties ties = (chash_ties)(round & 1);
        /* Every rule in turn: successor, nearest, varnish. */
        chash_rule rule = (chash_rule)((round / 2) % 3);
        for (int k = 0; k < 2; k++) {
            r[k] = chash_ring_new();
            CHECK(chash_ring_set_ties(r[k], ties) == 0);
            CHECK(chash_ring_set_rule(r[k], rule) == 0);
            for (int j = 0; j < 6; j++) {
                if (next_u64() % 3 == 0)
                    continue;
                uint32_t pts[8];
                size_t np = 1 + next_u64() % 8;
                for (size_t i = 0; i < np; i++) {
                    /* Node j's points are mostly the same in both rings. */
                    uint64_t x = next_u64();
                    uint32_t narrow = (uint32_t)((size_t)j * 7 + i * 13) % 97;
                    pts[i] = x % 4 ? narrow : (x % 2 ? (uint32_t)(x >> 32) : UINT32_MAX - narrow);
                }
                CHECK(add(r[k], ids[j], pts, np) == 0);
            }
        }
        if (chash_ring_node_count(r[0]) && chash_ring_node_count(r[1])) {
            checked_diff(r[0], r[1]);
        }
        chash_ring_free(r[0]);
        chash_ring_free(r[1]);
    }
}

/* The nearest rule (HAProxy's): gaps split at their middle, a tie to the
 * point before; one value only; the middle of the last gap wrapping past
 * the top; rings of different rules refused. */
static void test_nearest(void)
{
    chash_ring *a = chash_ring_new(), *b = chash_ring_new();
    CHECK(chash_ring_set_rule(a, CHASH_RULE_NEAREST) == 0 && chash_ring_set_rule(b, CHASH_RULE_NEAREST) == 0);
    const uint32_t px[] = {100}, py[] = {200};
    CHECK(add(a, "x", px, 1) == 0 && add(b, "x", px, 1) == 0 && add(b, "y", py, 1) == 0);
    chash_move *moves;
    size_t n;
    /* y takes (150, 200] and beyond: the gap 100..200 splits at 150 (a tie
     * at 150 stays with x), the gap 200..100 (wrapping) at 200 + 2**31 - 50. */
    CHECK(chash_ring_diff(a, b, &moves, &n) == 0 && n == 1);
    if (n == 1)
        CHECK(moves[0].start == 150 && moves[0].end == 200u + (1u << 31) - 50u && moves[0].target == 1);
    chash_moves_free(moves);
    CHECK(checked_diff(a, b) == 1 && checked_diff(b, a) == 1);
    /* One value shared by two nodes: the last point gets the value itself. */
    chash_ring *c = chash_ring_new(), *d = chash_ring_new();
    CHECK(chash_ring_set_rule(c, CHASH_RULE_NEAREST) == 0 && chash_ring_set_rule(d, CHASH_RULE_NEAREST) == 0);
    const uint32_t same[] = {5};
    CHECK(add(c, "p", same, 1) == 0 && add(d, "p", same, 1) == 0 && add(d, "q", same, 1) == 0);
    checked_diff(c, d);
    checked_diff(d, c);
    const uint32_t top[] = {UINT32_MAX - 3, 2};
    chash_ring *e = chash_ring_new();
    CHECK(chash_ring_set_rule(e, CHASH_RULE_NEAREST) == 0 && add(e, "p", top, 2) == 0);
    CHECK(add(e, "r", px, 1) == 0);
    checked_diff(c, e);
    checked_diff(e, d);
    /* Another rule: refused. */
    chash_ring *s = chash_ring_new();
    CHECK(add(s, "x", px, 1) == 0);
    CHECK(chash_ring_diff(a, s, &moves, &n) == CHASH_EINVAL && n == 0 && moves == NULL);
    chash_ring_free(a);
    chash_ring_free(b);
    chash_ring_free(c);
    chash_ring_free(d);
    chash_ring_free(e);
    chash_ring_free(s);
}

/* The varnish rule: no wrap (the values above the last point stay with
 * its owner), exact hits on a shared value where Varnish's bisection
 * lands; another rule refused. */
static void test_varnish(void)
{
    chash_ring *a = chash_ring_new(), *b = chash_ring_new(), *c = chash_ring_new();
    CHECK(chash_ring_set_rule(a, CHASH_RULE_VARNISH) == 0 && chash_ring_set_rule(b, CHASH_RULE_VARNISH) == 0
          && chash_ring_set_rule(c, CHASH_RULE_VARNISH) == 0);
    CHECK(chash_ring_set_ties(a, CHASH_TIES_BY_ORDER) == 0 && chash_ring_set_ties(b, CHASH_TIES_BY_ORDER) == 0
          && chash_ring_set_ties(c, CHASH_TIES_BY_ORDER) == 0);
    const uint32_t px[] = {100}, pz[] = {300}, py[] = {200};
    CHECK(add(a, "x", px, 1) == 0 && add(b, "x", px, 1) == 0 && add(b, "y", py, 1) == 0);
    CHECK(add(a, "z", pz, 1) == 0 && add(b, "z", pz, 1) == 0);
    chash_move *moves;
    size_t n;
    /* a has two points: all is z's (the bisection's first probe).  In b, y
     * takes (100, 200] from z and x takes [0, 100]; z keeps the rest, the
     * values above 300 too (no wrap). */
    CHECK(chash_ring_diff(a, b, &moves, &n) == 0 && n == 2);
    if (n == 2) {
        CHECK(moves[0].start == UINT32_MAX && moves[0].end == 100 && moves[0].target == 0);
        CHECK(moves[1].start == 100 && moves[1].end == 200 && moves[1].target == 1);
    }
    chash_moves_free(moves);
    CHECK(checked_diff(a, b) == 2 && checked_diff(b, a) == 2);
    /* Three nodes sharing the value 20: the bisection lands on the middle
     * point, so 20 itself moves with it. */
    const uint32_t p10[] = {10}, p20[] = {20}, p30[] = {30, UINT32_MAX};
    CHECK(add(c, "a", p10, 1) == 0 && add(c, "b", p20, 1) == 0 && add(c, "c", p20, 1) == 0
          && add(c, "d", p20, 1) == 0 && add(c, "e", p30, 2) == 0);
    checked_diff(c, b);
    checked_diff(b, c);
    checked_diff(c, a);
    chash_ring *s = chash_ring_new();
    CHECK(add(s, "x", px, 1) == 0);
    CHECK(chash_ring_diff(a, s, &moves, &n) == CHASH_EINVAL && n == 0 && moves == NULL);
    chash_ring_free(a);
    chash_ring_free(b);
    chash_ring_free(c);
    chash_ring_free(s);
}

/* The 64-bit ring: owners are the caller's indices, same[] maps them. */
static void test_wide(void)
{
    chash_wide *a = chash_wide_new(), *b = chash_wide_new();
    const uint64_t pa[] = {10, 1000, UINT64_MAX - 5}, pb[] = {10, 500, 1000, UINT64_MAX - 5};
    const uint32_t oa[] = {0, 1, 0}, ob[] = {1, 2, 0, 1}; /* b's nodes: y, z, x */
    CHECK(chash_wide_build(a, pa, oa, 3, 2) == 0 && chash_wide_build(b, pb, ob, 4, 3) == 0);
    const uint32_t same[] = {2, 0}; /* a's x is b's 2, a's y is b's 0 */
    chash_move *moves;
    size_t n;
    CHECK(chash_wide_diff(a, b, same, &moves, &n) == 0);
    CHECK(diff_shape_ok(moves, n, UINT64_MAX));
    /* a: (MAX-5, 10] x, (10, 1000] y, (1000, MAX-5] x.  b: (MAX-5, 10] z
     * (owner 1), (10, 500] x, (500, 1000] y, (1000, MAX-5] z.  So x -> z on
     * (1000, MAX-5] and (MAX-5, 10], joined across the top, and y -> x on
     * (10, 500]. */
    CHECK(n == 2);
    if (n == 2) {
        CHECK(moves[0].start == 1000 && moves[0].end == 10 && moves[0].source == 0
              && moves[0].target == 1);
        CHECK(moves[1].start == 10 && moves[1].end == 500 && moves[1].source == 1
              && moves[1].target == 2);
    }
    chash_moves_free(moves);
    const uint32_t bad[] = {7, 0};
    CHECK(chash_wide_diff(a, b, bad, &moves, &n) == CHASH_EINVAL);
    chash_wide_free(a);
    chash_wide_free(b);
}

/* Lookup tables (Maglev's): random small ones against comparing every
 * entry; every entry moving, the run across the last entry joined to the
 * first; bad arguments; allocation failures. */
static void test_table(void)
{
    uint32_t a[64], b[64], same[6];
    for (int round = 0; round < 300; round++) {
        size_t size = 1 + next_u64() % 64, na = 1 + next_u64() % 6, nb = 1 + next_u64() % 6;
        for (size_t k = 0; k < na; k++)
            same[k] = next_u64() % 3 ? (uint32_t)(next_u64() % nb) : CHASH_DIFF_NONE;
        for (size_t e = 0; e < size; e++) {
            a[e] = (uint32_t)(next_u64() % na);
            /* Mostly the same node, so that runs of changes are short. */
            b[e] = next_u64() % 4 && same[a[e]] != CHASH_DIFF_NONE ? same[a[e]]
                                                                   : (uint32_t)(next_u64() % nb);
        }
        chash_move *moves;
        size_t n;
        CHECK(chash_table_diff(a, b, size, same, na, nb, &moves, &n) == CHASH_OK);
        CHECK(diff_shape_ok(moves, n, size - 1));
        CHECK(diff_table_mismatches(a, b, size, same, moves, n) == 0);
        chash_moves_free(moves);
    }
    /* Every entry from node 0 to node 0 of another table: one arc, all. */
    uint32_t zeros[5] = {0}, none[1] = {CHASH_DIFF_NONE}, id[2] = {0, 1};
    chash_move *moves;
    size_t n;
    CHECK(chash_table_diff(zeros, zeros, 5, none, 1, 1, &moves, &n) == CHASH_OK && n == 1);
    CHECK(n == 1 && moves[0].start == moves[0].end);
    chash_moves_free(moves);
    /* Entries 4 and 0 change alike: one arc wrapping past the last entry. */
    uint32_t from[5] = {1, 0, 0, 0, 1}, to[5] = {0, 0, 0, 0, 0};
    CHECK(chash_table_diff(from, to, 5, id, 2, 2, &moves, &n) == CHASH_OK && n == 1);
    CHECK(n == 1 && moves[0].start == 3 && moves[0].end == 0);
    chash_moves_free(moves);
    /* Bad arguments: nothing returned. */
    moves = (chash_move *)1;
    n = 9;
    CHECK(chash_table_diff(from, to, 0, id, 2, 2, &moves, &n) == CHASH_EINVAL);
    CHECK(moves == NULL && n == 0);
    CHECK(chash_table_diff(NULL, to, 5, id, 2, 2, &moves, &n) == CHASH_EINVAL);
    CHECK(chash_table_diff(from, to, 5, id, 1, 2, &moves, &n) == CHASH_EINVAL); /* from[0] = 1 */
    CHECK(chash_table_diff(from, to, 5, id, 2, 1, &moves, &n) == CHASH_EINVAL); /* same[1] = 1 */
    CHECK(moves == NULL && n == 0);
    /* Allocation failures: ENOMEM and nothing, until one succeeds. */
    static uint32_t big_a[400], big_b[400];
    for (size_t e = 0; e < 400; e++) {
        big_a[e] = (uint32_t)(e % 2);
        big_b[e] = (uint32_t)(e % 3 == 0);
    }
    int saw_failure = 0, saw_success = 0;
    for (long k = 0; k < 8 && !saw_success; k++) {
        fail_countdown = k;
        int status = chash_table_diff(big_a, big_b, 400, id, 2, 2, &moves, &n);
        fail_countdown = -1;
        if (status == CHASH_ENOMEM) {
            saw_failure = 1;
            CHECK(moves == NULL && n == 0);
        } else {
            CHECK(status == CHASH_OK && n > 64); /* past the first growth */
            CHECK(diff_table_mismatches(big_a, big_b, 400, id, moves, n) == 0);
            saw_success = 1;
            chash_moves_free(moves);
        }
    }
    CHECK(saw_failure && saw_success);
}

int main(void)
{
    test_add_remove_grow();
    test_whole_space_and_top();
    test_ties();
    test_errors();
    test_random();
    test_nearest();
    test_varnish();
    test_wide();
    test_table();
    return check_report();
}
