/*
 * test_ring.c - the ring engine on its own: successor rule, collisions,
 * incremental add/remove/grow/shrink against a brute-force model, and
 * all-or-nothing mutations under injected allocation failures.
 *
 * The engine is included directly so its allocator can be swapped for one
 * that fails on demand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failing_alloc.h"
#include "../../csrc/engine/ring.c"
#include "../../csrc/engine/ring_bulk.c"
#include "../../csrc/engine/ring_index.c"
#include "../../csrc/engine/sort.c"

#include "check.h"

/* xorshift64*: deterministic pseudo-random points. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Du) >> 32);
}

static int add_str(chash_ring *ring, const char *id, const uint32_t *points, size_t n)
{
    return chash_ring_add(ring, id, strlen(id), (void *)id, points, n);
}

/* The owner's data through chash_ring_lookup, NULL on an empty ring. */
static const char *lookup_data(const chash_ring *ring, uint32_t h)
{
    void *data = NULL;
    return chash_ring_lookup(ring, h, &data) == CHASH_OK ? data : NULL;
}

/* Brute force: owner (as data) of the first point >= h, smallest id on ties. */
static const char *model_lookup(const chash_ring *ring, uint32_t h)
{
    const char *best = NULL, *first = NULL;
    uint32_t best_v = 0, first_v = 0;
    for (size_t i = 0; i < ring->npoints; i++) {
        uint32_t v = chash_ring_point(ring, i);
        const chash_node *node = &ring->nodes[chash_ring_point_owner(ring, i)];
        const char *id = node->data;
        if (v >= h && (!best || v < best_v || (v == best_v && strcmp(id, best) < 0))) {
            best = id;
            best_v = v;
        }
        if (!first || v < first_v || (v == first_v && strcmp(id, first) < 0)) {
            first = id;
            first_v = v;
        }
    }
    return best ? best : first;
}

static void test_empty(void)
{
    chash_ring *ring = chash_ring_new();
    CHECK(ring != NULL);
    CHECK(lookup_data(ring, 123) == NULL);
    CHECK(chash_ring_check(ring) == CHASH_OK);
    size_t out[1];
    size_t found = 1;
    CHECK(chash_ring_preference(ring, 5, 1, out, &found) == CHASH_OK && found == 0);
    void *data = &found;
    CHECK(chash_ring_lookup(ring, 1, &data) == CHASH_ENOENT && data == &found);
    CHECK(chash_ring_remove(ring, "x", 1, NULL) == CHASH_ENOENT);
    uint32_t p = 1;
    CHECK(add_str(ring, "x", &p, 0) == CHASH_EINVAL);
    chash_ring_free(ring);
}

static void test_successor_rule(void)
{
    chash_ring *ring = chash_ring_new();
    uint32_t a[] = {100, 300}, b[] = {200};
    CHECK(add_str(ring, "a", a, 2) == CHASH_OK);
    CHECK(add_str(ring, "b", b, 1) == CHASH_OK);
    CHECK(strcmp(lookup_data(ring, 0), "a") == 0);
    CHECK(strcmp(lookup_data(ring, 100), "a") == 0);   /* equal: that point */
    CHECK(strcmp(lookup_data(ring, 101), "b") == 0);
    CHECK(strcmp(lookup_data(ring, 200), "b") == 0);
    CHECK(strcmp(lookup_data(ring, 201), "a") == 0);
    CHECK(strcmp(lookup_data(ring, 301), "a") == 0);   /* wraps */
    CHECK(strcmp(lookup_data(ring, UINT32_MAX), "a") == 0);
    CHECK(add_str(ring, "a", a, 2) == CHASH_EEXIST);
    size_t pref[3];
    size_t found = 0;
    CHECK(chash_ring_preference(ring, 150, 3, pref, &found) == CHASH_OK && found == 2);
    CHECK(pref[0] == 1 && pref[1] == 0);
    double share[2];
    chash_ring_ownership(ring, share);
    CHECK(share[1] == 100.0 / 4294967296.0);
    CHECK(share[0] + share[1] == 1.0);
    CHECK(chash_ring_check(ring) == CHASH_OK);
    chash_ring_free(ring);
}

static void test_collisions_independent_of_order(void)
{
    uint32_t shared[] = {7, 7, 9000};
    const char *ids[] = {"zeta", "alpha", "mid", "alph"};
    for (int order = 0; order < 4; order++) {
        chash_ring *ring = chash_ring_new();
        for (int i = 0; i < 4; i++)
            CHECK(add_str(ring, ids[(i + order) % 4], shared, 3) == CHASH_OK);
        CHECK(strcmp(lookup_data(ring, 7), "alph") == 0); /* a prefix sorts first */
        CHECK(chash_ring_remove(ring, "alph", 4, NULL) == CHASH_OK);
        CHECK(strcmp(lookup_data(ring, 3), "alpha") == 0);
        CHECK(strcmp(lookup_data(ring, 8999), "alpha") == 0);
        CHECK(chash_ring_check(ring) == CHASH_OK);
        chash_ring_free(ring);
    }
}

static chash_ring *ordered_ring(void)
{
    chash_ring *ring = chash_ring_new();
    CHECK(ring && chash_ring_set_ties(ring, CHASH_TIES_BY_ORDER) == CHASH_OK);
    return ring;
}

/* CHASH_TIES_BY_ORDER: a shared point goes to the node added first, through
 * adds, grows, shrinks, removals and batch adds of either size class. */
static void test_ties_by_insertion_order(void)
{
    uint32_t shared[] = {7, 7, 9000};
    const char *ids[] = {"zeta", "alpha", "mid", "alph"};
    for (int order = 0; order < 4; order++) {
        chash_ring *ring = ordered_ring();
        CHECK(chash_ring_ties(ring) == CHASH_TIES_BY_ORDER);
        for (int i = 0; i < 4; i++)
            CHECK(add_str(ring, ids[(i + order) % 4], shared, 3) == CHASH_OK);
        CHECK(strcmp((const char *)lookup_data(ring, 7), ids[order]) == 0);
        CHECK(chash_ring_check(ring) == CHASH_OK);
        /* Growing the first node onto a value others hold: still first. */
        uint32_t more = 9000;
        const char *first = ids[order];
        CHECK(chash_ring_grow(ring, first, strlen(first), &more, 1) == CHASH_OK);
        CHECK(strcmp((const char *)lookup_data(ring, 8999), first) == 0);
        CHECK(chash_ring_check(ring) == CHASH_OK);
        CHECK(chash_ring_shrink(ring, first, strlen(first), &more, 1) == CHASH_OK);
        CHECK(chash_ring_check(ring) == CHASH_OK);
        /* Removing it hands the point to the node added second. */
        CHECK(chash_ring_remove(ring, first, strlen(first), NULL) == CHASH_OK);
        CHECK(strcmp((const char *)lookup_data(ring, 7), ids[(order + 1) % 4]) == 0);
        /* Re-added, it comes last now. */
        CHECK(add_str(ring, first, shared, 3) == CHASH_OK);
        CHECK(strcmp((const char *)lookup_data(ring, 7), ids[(order + 1) % 4]) == 0);
        CHECK(chash_ring_check(ring) == CHASH_OK);
        chash_ring_free(ring);
    }
    /* The rule is set on an empty ring only. */
    chash_ring *ring = chash_ring_new();
    CHECK(chash_ring_ties(ring) == CHASH_TIES_BY_ID);
    CHECK(add_str(ring, "a", shared, 1) == CHASH_OK);
    CHECK(chash_ring_set_ties(ring, CHASH_TIES_BY_ORDER) == CHASH_EINVAL);
    CHECK(chash_ring_set_ties(ring, (chash_ties)7) == CHASH_EINVAL);
    CHECK(chash_ring_ties(ring) == CHASH_TIES_BY_ID);
    chash_ring_free(ring);
    /* Batch adds keep the given order, below and above the radix sort's
     * threshold, and agree with one add at a time. */
    enum { NODES = 12 };
    for (int big = 0; big < 2; big++) {
        size_t per = big ? 1000 : 20;
        static uint32_t pts[NODES][1000];
        static char names[NODES][8];
        chash_node_spec specs[NODES];
        for (int i = 0; i < NODES; i++) {
            snprintf(names[i], sizeof names[i], "%c", 'z' - i); /* ids sort opposite to order */
            for (size_t k = 0; k < per; k++)
                pts[i][k] = next_u32() % 500; /* collisions everywhere */
            specs[i] = (chash_node_spec){names[i], 1, names[i], pts[i], per};
        }
        chash_ring *one = ordered_ring(), *many = ordered_ring();
        for (int i = 0; i < NODES; i++)
            CHECK(chash_ring_add(one, names[i], 1, names[i], pts[i], per) == CHASH_OK);
        CHECK(chash_ring_add(many, names[0], 1, names[0], pts[0], per) == CHASH_OK);
        CHECK(chash_ring_add_many(many, specs + 1, NODES - 1) == CHASH_OK);
        CHECK(chash_ring_check(one) == CHASH_OK && chash_ring_check(many) == CHASH_OK);
        CHECK(memcmp(many->pt, one->pt, one->npoints * sizeof *one->pt) == 0);
        for (size_t i = 1; i < one->npoints; i++)
            if (one->pt[i].value == one->pt[i - 1].value)
                CHECK(one->pt[i - 1].owner <= one->pt[i].owner);
        chash_ring_free(one);
        chash_ring_free(many);
    }
}

static void test_ids_with_nul_and_empty(void)
{
    chash_ring *ring = chash_ring_new();
    uint32_t p = 42, q = 42;
    CHECK(chash_ring_add(ring, "a\0b", 3, "a\\0b", &p, 1) == CHASH_OK);
    CHECK(chash_ring_add(ring, "a", 1, "a", &q, 1) == CHASH_OK);
    CHECK(chash_ring_add(ring, "", 0, "", &q, 1) == CHASH_OK);
    size_t at = 9;
    CHECK(chash_ring_find(ring, "a\0b", 3, &at) == CHASH_OK && at == 0);
    CHECK(chash_ring_find(ring, "", 0, &at) == CHASH_OK && at == 2);
    CHECK(chash_ring_find(ring, "a\0c", 3, &at) == CHASH_ENOENT && at == 2);
    CHECK(chash_ring_find(ring, NULL, 1, NULL) == CHASH_ENOENT);
    /* Ids past the inline size live on the heap; either way they are found. */
    static const char longer[] = "an-id-of-forty-bytes-for-the-heap-copy!";
    CHECK(chash_ring_add(ring, longer, sizeof longer - 1, "long", &q, 1) == CHASH_OK);
    CHECK(chash_ring_find(ring, longer, sizeof longer - 1, &at) == CHASH_OK && at == 3);
    CHECK(chash_ring_find(ring, longer, sizeof longer - 2, &at) == CHASH_ENOENT);
    CHECK(memcmp(chash_ring_node(ring, 3).id, longer, sizeof longer) == 0);
    CHECK(chash_ring_remove(ring, "a", 1, NULL) == CHASH_OK);
    CHECK(chash_ring_find(ring, longer, sizeof longer - 1, &at) == CHASH_OK && at == 2);
    CHECK(strcmp(lookup_data(ring, 42), "") == 0); /* the empty id is smallest */
    CHECK(chash_ring_check(ring) == CHASH_OK);
    chash_ring_free(ring);
}

static void test_random_against_model(void)
{
    enum { NODES = 40, MAXP = 64 };
    static char names[NODES][16];
    static uint32_t pts[NODES][MAXP];
    static size_t npts[NODES];
    chash_ring *ring = chash_ring_new();
    for (int i = 0; i < NODES; i++)
        snprintf(names[i], sizeof names[i], "n%d", i);
    for (int step = 0; step < 3000; step++) {
        int i = (int)(next_u32() % NODES);
        const char *id = names[i];
        size_t len = strlen(id);
        int present = chash_ring_find(ring, id, len, NULL) == CHASH_OK;
        uint32_t op = next_u32() % 4;
        if (!present) {
            npts[i] = 1 + next_u32() % 32;
            for (size_t k = 0; k < npts[i]; k++)
                pts[i][k] = next_u32() % 5000; /* a small range: many collisions */
            CHECK(chash_ring_add(ring, id, len, names[i], pts[i], npts[i]) == CHASH_OK);
        } else if (op == 0) {
            void *data = NULL;
            CHECK(chash_ring_remove(ring, id, len, &data) == CHASH_OK);
            CHECK(data == names[i]);
        } else if (op == 1 && npts[i] < MAXP) {
            size_t extra = 1 + next_u32() % (MAXP - npts[i]);
            for (size_t k = 0; k < extra; k++)
                pts[i][npts[i] + k] = next_u32() % 5000;
            CHECK(chash_ring_grow(ring, id, len, pts[i] + npts[i], extra) == CHASH_OK);
            npts[i] += extra;
        } else if (op == 2 && npts[i] > 1) {
            size_t drop = 1 + next_u32() % (npts[i] - 1);
            CHECK(chash_ring_shrink(ring, id, len, pts[i] + npts[i] - drop, drop) == CHASH_OK);
            npts[i] -= drop;
        } else {
            uint32_t missing = 6000; /* outside the range: never a point */
            int want = npts[i] > 1 ? CHASH_ENOENT : CHASH_EINVAL; /* must keep one */
            CHECK(chash_ring_shrink(ring, id, len, &missing, 1) == want);
        }
        CHECK(chash_ring_check(ring) == CHASH_OK);
        for (int q = 0; q < 8; q++) {
            uint32_t h = next_u32() % 5200;
            const char *got = lookup_data(ring, h);
            const char *want = model_lookup(ring, h);
            CHECK(got == want);
        }
    }
    chash_ring_free(ring);
}

/* A snapshot of everything observable, to prove failed calls change nothing. */
typedef struct {
    size_t npoints, nnodes;
    uint32_t value[512], owner[512];
    const void *data[64];
} snapshot;

static void take(const chash_ring *ring, snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->npoints = ring->npoints;
    s->nnodes = ring->nnodes;
    for (size_t i = 0; i < ring->npoints; i++) {
        s->value[i] = chash_ring_point(ring, i);
        s->owner[i] = (uint32_t)chash_ring_point_owner(ring, i);
    }
    for (size_t i = 0; i < ring->nnodes; i++)
        s->data[i] = ring->nodes[i].data;
}

static int same(const snapshot *a, const snapshot *b) { return memcmp(a, b, sizeof *a) == 0; }

static void test_failed_allocations_change_nothing(void)
{
    static char names[12][16];
    uint32_t points[24];
    chash_ring *ring = chash_ring_new();
    int failures_seen = 0;
    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "f%d", i);
        for (int k = 0; k < 24; k++)
            points[k] = next_u32();
        for (long budget = 0;; budget++) {
            snapshot before, after;
            take(ring, &before);
            fail_countdown = budget;
            int status = i % 3 == 2
                ? chash_ring_grow(ring, names[i - 1], strlen(names[i - 1]), points, 12)
                : chash_ring_add(ring, names[i], strlen(names[i]), names[i], points, 24);
            fail_countdown = -1;
            if (status == CHASH_OK)
                break;
            CHECK(status == CHASH_ENOMEM);
            take(ring, &after);
            CHECK(same(&before, &after));
            CHECK(chash_ring_check(ring) == CHASH_OK);
            failures_seen++;
        }
    }
    CHECK(failures_seen > 12);
    /* Shrinking allocates once (its sorted copy); failing there changes nothing. */
    snapshot before, after;
    take(ring, &before);
    fail_countdown = 0;
    uint32_t first = chash_ring_point(ring, 0);
    CHECK(chash_ring_shrink(ring, names[0], strlen(names[0]), &first, 1) == CHASH_ENOMEM);
    fail_countdown = -1;
    take(ring, &after);
    CHECK(same(&before, &after));
    /* Removal never allocates. */
    fail_countdown = 0;
    CHECK(chash_ring_remove(ring, names[1], strlen(names[1]), NULL) == CHASH_OK);
    fail_countdown = -1;
    CHECK(chash_ring_check(ring) == CHASH_OK);
    fail_countdown = 0;
    CHECK(chash_ring_new() == NULL);
    fail_countdown = -1;
    chash_ring_free(ring);
}

static void test_limits(void)
{
    chash_ring *ring = chash_ring_new();
    uint32_t p = 1;
    CHECK(add_str(ring, "x", &p, CHASH_MAX_NODE_POINTS + 1) == CHASH_EINVAL);
    CHECK(add_str(ring, "x", &p, 1) == CHASH_OK);
    CHECK(chash_ring_shrink(ring, "x", 1, &p, 1) == CHASH_EINVAL); /* would leave none */
    CHECK(chash_ring_grow(ring, "y", 1, &p, 1) == CHASH_ENOENT);
    CHECK(chash_ring_check(ring) == CHASH_OK);
    chash_ring_free(ring);
}

static void test_bucket_index_large(void)
{
    enum { N = 200000 };
    uint32_t *points = malloc(N * sizeof *points);
    CHECK(points != NULL);
    if (!points)
        return;
    for (size_t i = 0; i < N; i++)
        points[i] = next_u32();
    chash_ring *ring = chash_ring_new();
    CHECK(chash_ring_add(ring, "big", 3, "big", points, N / 2) == CHASH_OK);
    CHECK(chash_ring_add(ring, "bag", 3, "bag", points + N / 2, N / 2) == CHASH_OK);
    CHECK(chash_ring_check(ring) == CHASH_OK);
    CHECK(ring->bucket_bits > 10);
    int wrong = 0;
    for (int q = 0; q < 20000; q++) {
        uint32_t h = next_u32();
        size_t i = chash_ring_successor(ring, h);
        uint32_t at = chash_ring_point(ring, i);
        int ok = at >= h ? (i == 0 || chash_ring_point(ring, i - 1) < h)
                         : (i == 0 && chash_ring_point(ring, ring->npoints - 1) < h);
        wrong += !ok;
    }
    CHECK(wrong == 0);
    CHECK(chash_ring_memory(ring) < 10 * ring->npoints);
    CHECK(chash_ring_remove(ring, "big", 3, NULL) == CHASH_OK);
    CHECK(chash_ring_check(ring) == CHASH_OK);
    chash_ring_free(ring);
    free(points);
}

/* add_many must build exactly the ring that one-by-one adds build. */
static void test_add_many_matches_add(void)
{
    enum { NODES = 30, PER = 20 };
    static char names[NODES][16];
    static uint32_t pts[NODES][PER];
    chash_node_spec specs[NODES];
    for (int i = 0; i < NODES; i++) {
        snprintf(names[i], sizeof names[i], "m%d", (i * 7) % NODES);
        for (int k = 0; k < PER; k++)
            pts[i][k] = next_u32() % 3000; /* collisions across nodes */
        specs[i] = (chash_node_spec){names[i], strlen(names[i]), names[i], pts[i], PER};
    }
    chash_ring *one = chash_ring_new(), *many = chash_ring_new();
    for (int i = 0; i < 10; i++) {
        CHECK(chash_ring_add(one, names[i], strlen(names[i]), names[i], pts[i], PER) == CHASH_OK);
        CHECK(chash_ring_add(many, names[i], strlen(names[i]), names[i], pts[i], PER) == CHASH_OK);
    }
    for (int i = 10; i < NODES; i++)
        CHECK(chash_ring_add(one, names[i], strlen(names[i]), names[i], pts[i], PER) == CHASH_OK);
    CHECK(chash_ring_add_many(many, specs + 10, 5) == CHASH_OK); /* then a failing batch */
    chash_node_spec dup[2] = {specs[20], specs[20]};
    CHECK(chash_ring_add_many(many, dup, 2) == CHASH_EEXIST);
    CHECK(chash_ring_add_many(many, specs + 3, 1) == CHASH_EEXIST);
    int failures = 0;
    for (long budget = 0;; budget++) {
        snapshot before, after;
        take(many, &before);
        fail_countdown = budget;
        int status = chash_ring_add_many(many, specs + 15, NODES - 15);
        fail_countdown = -1;
        if (status == CHASH_OK)
            break;
        CHECK(status == CHASH_ENOMEM);
        take(many, &after);
        CHECK(same(&before, &after));
        failures++;
    }
    CHECK(failures >= 5);
    CHECK(chash_ring_check(many) == CHASH_OK);
    CHECK(many->npoints == one->npoints && many->nnodes == one->nnodes);
    CHECK(memcmp(many->pt, one->pt, one->npoints * sizeof *one->pt) == 0);
    CHECK(chash_ring_add_many(many, specs, 0) == CHASH_OK);
    chash_ring_free(one);
    chash_ring_free(many);
}

/* Above the small-sort threshold add_many radix-sorts: same ring again. */
static void test_add_many_large_matches_add(void)
{
    enum { NODES = 40, PER = 400 };
    static char names[NODES][16];
    static uint32_t pts[NODES][PER];
    chash_node_spec specs[NODES];
    chash_ring *one = chash_ring_new(), *many = chash_ring_new();
    for (int i = 0; i < NODES; i++) {
        snprintf(names[i], sizeof names[i], "L%d", (i * 13) % NODES);
        for (int k = 0; k < PER; k++)
            pts[i][k] = next_u32() % 100000; /* collisions across nodes */
        specs[i] = (chash_node_spec){names[i], strlen(names[i]), names[i], pts[i], PER};
        CHECK(chash_ring_add(one, names[i], strlen(names[i]), names[i], pts[i], PER) == CHASH_OK);
    }
    CHECK(chash_ring_add(many, names[0], strlen(names[0]), names[0], pts[0], PER) == CHASH_OK);
    CHECK(chash_ring_add_many(many, specs + 1, NODES - 1) == CHASH_OK); /* 15,600 points */
    CHECK(chash_ring_check(many) == CHASH_OK);
    CHECK(many->npoints == one->npoints);
    CHECK(memcmp(many->pt, one->pt, one->npoints * sizeof *one->pt) == 0);
    chash_ring_free(one);
    chash_ring_free(many);
}

/* The id index at many nodes: every node found at its position after
 * adds, batches and removals; the index grows and hands room back. */
static void test_id_index_many_nodes(void)
{
    enum { NODES = 20000 };
    static char names[NODES][20];
    static chash_node_spec specs[NODES];
    static uint32_t pts[NODES];
    static int present[NODES];
    chash_ring *ring = chash_ring_new();
    for (int i = 0; i < NODES; i++) {
        snprintf(names[i], sizeof names[i], "node-%d", i);
        pts[i] = next_u32();
        specs[i] = (chash_node_spec){names[i], strlen(names[i]), names[i], &pts[i], 1};
    }
    for (int i = 0; i < NODES / 2; i++)
        CHECK(chash_ring_add(ring, names[i], strlen(names[i]), names[i], &pts[i], 1) == CHASH_OK);
    CHECK(chash_ring_add_many(ring, specs + NODES / 2, NODES / 2) == CHASH_OK);
    for (int i = 0; i < NODES; i++)
        present[i] = 1;
    CHECK(ring->slot_mask + 1 >= 2 * (size_t)NODES);
    CHECK(chash_ring_check(ring) == CHASH_OK);
    /* An id given twice, far apart in the batch: found from the sorted order. */
    chash_node_spec again[3] = {{"x1", 2, NULL, &pts[0], 1}, {"x2", 2, NULL, &pts[1], 1},
                                {"x1", 2, NULL, &pts[2], 1}};
    CHECK(chash_ring_add_many(ring, again, 3) == CHASH_EEXIST);
    CHECK(chash_ring_find(ring, "x1", 2, NULL) == CHASH_ENOENT);
    size_t left = NODES;
    for (int round = 0; round < 2 * NODES && left > 100; round++) {
        int i = (int)(next_u32() % NODES);
        void *data = NULL;
        int status = chash_ring_remove(ring, names[i], strlen(names[i]), &data);
        CHECK(status == (present[i] ? CHASH_OK : CHASH_ENOENT));
        if (status == CHASH_OK) {
            CHECK(data == names[i]);
            present[i] = 0;
            left--;
        }
    }
    CHECK(chash_ring_check(ring) == CHASH_OK);
    CHECK(ring->slot_mask + 1 <= 8 * chash_priv_index_size_for(left)); /* room handed back */
    for (int i = 0; i < NODES; i++) {
        size_t at = 0;
        int status = chash_ring_find(ring, names[i], strlen(names[i]), &at);
        CHECK(status == (present[i] ? CHASH_OK : CHASH_ENOENT));
        if (status == CHASH_OK)
            CHECK(chash_ring_node(ring, at).data == names[i]);
    }
    chash_ring_free(ring);
}

/* change_points: several nodes grow and shrink in one call and the ring is
 * the one built from scratch with their final points, in either tie order;
 * errors and failed allocations leave the ring as it was. */
static void test_change_points_matches_rebuild(void)
{
    enum { NODES = 20, MAXP = 25 }; /* at most 500 points: a snapshot holds 512 */
    static char names[NODES][16];
    static uint32_t pts[NODES][MAXP];
    for (int i = 0; i < NODES; i++) {
        snprintf(names[i], sizeof names[i], "c%d", (i * 13) % NODES);
        for (int k = 0; k < MAXP; k++)
            pts[i][k] = next_u32() % 2000; /* collisions across nodes */
    }
    for (int ties = 0; ties < 2; ties++) {
        size_t have[NODES], want[NODES];
        chash_ring *ring = chash_ring_new();
        CHECK(chash_ring_set_ties(ring, ties ? CHASH_TIES_BY_ORDER : CHASH_TIES_BY_ID) == CHASH_OK);
        for (int i = 0; i < NODES; i++) {
            have[i] = 5 + (size_t)(next_u32() % 20);
            CHECK(add_str(ring, names[i], pts[i], have[i]) == CHASH_OK);
        }
        for (int round = 0; round < 6; round++) {
            chash_point_change changes[NODES];
            size_t n = 0;
            for (int i = 0; i < NODES; i++) {
                want[i] = have[i];
                if (next_u32() % 3)
                    continue;
                want[i] = 1 + (size_t)(next_u32() % MAXP);
                int grow = want[i] > have[i];
                size_t lo = grow ? have[i] : want[i], hi = grow ? want[i] : have[i];
                changes[n++] = (chash_point_change){names[i], strlen(names[i]),
                    grow ? pts[i] + lo : NULL, grow ? hi - lo : 0,
                    grow ? NULL : pts[i] + lo, grow ? 0 : hi - lo};
            }
            /* Errors first: an absent node, a node twice, a foreign point,
             * a node left with none; then failing allocations. */
            snapshot before, after;
            take(ring, &before);
            uint32_t foreign = 7000;
            chash_point_change bad[2] = {{"nobody", 6, NULL, 0, NULL, 0}, changes[0]};
            CHECK(chash_ring_change_points(ring, bad, 1) == CHASH_ENOENT);
            bad[0] = (chash_point_change){names[0], strlen(names[0]), NULL, 0, &foreign, 1};
            CHECK(chash_ring_change_points(ring, bad, 1) == CHASH_ENOENT);
            bad[0] = (chash_point_change){names[1], strlen(names[1]), NULL, 0, pts[1], have[1]};
            CHECK(chash_ring_change_points(ring, bad, 1) == CHASH_EINVAL);
            if (n) {
                bad[0] = changes[0];
                CHECK(chash_ring_change_points(ring, bad, 2) == CHASH_EEXIST);
            }
            for (long budget = 0; budget < 6; budget++) {
                fail_countdown = budget;
                int status = chash_ring_change_points(ring, changes, n);
                fail_countdown = -1;
                if (status == CHASH_OK) {
                    for (int i = 0; i < NODES; i++)
                        have[i] = want[i];
                    break;
                }
                CHECK(status == CHASH_ENOMEM);
                take(ring, &after);
                CHECK(same(&before, &after));
            }
            CHECK(chash_ring_check(ring) == CHASH_OK);
            chash_ring *fresh = chash_ring_new();
            CHECK(chash_ring_set_ties(fresh, ties ? CHASH_TIES_BY_ORDER : CHASH_TIES_BY_ID) == CHASH_OK);
            for (int i = 0; i < NODES; i++)
                CHECK(add_str(fresh, names[i], pts[i], have[i]) == CHASH_OK);
            CHECK(fresh->npoints == ring->npoints);
            CHECK(memcmp(fresh->pt, ring->pt, ring->npoints * sizeof *ring->pt) == 0);
            chash_ring_free(fresh);
        }
        CHECK(chash_ring_change_points(ring, NULL, 0) == CHASH_OK);
        chash_ring_free(ring);
    }
}

int main(void)
{
    test_change_points_matches_rebuild();
    test_id_index_many_nodes();
    test_add_many_large_matches_add();
    test_add_many_matches_add();
    test_empty();
    test_successor_rule();
    test_collisions_independent_of_order();
    test_ties_by_insertion_order();
    test_ids_with_nul_and_empty();
    test_random_against_model();
    test_failed_allocations_change_nothing();
    test_limits();
    test_bucket_index_large();
    return check_report();
}
