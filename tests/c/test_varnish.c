/*
 * test_varnish.c - Varnish 7.1's shard director lookup in the engine
 * (CHASH_RULE_VARNISH, chash_ring_varnish()): the successor but for a hash
 * above the last point (the last point, no wrap) and an exact hit on a
 * shared value (where the bisection lands); preference walks from there,
 * ownership, the batch form and the invariant check.
 *
 * The expected points were worked out by hand from the director's
 * shard_lookup() in vmod_directors_shard_dir.c, step by step.
 */
#include "engine/chash.h"
#include "engine/scheme.h"

#include "check.h"

#include <string.h>

static int add(chash_ring *r, const char *id, const uint32_t *pts, size_t n)
{
    return chash_ring_add(r, id, strlen(id), (void *)id, pts, n);
}

static const char *owner_of(const chash_ring *r, uint32_t h)
{
    void *data = NULL;
    CHECK(chash_ring_lookup(r, h, &data) == CHASH_OK);
    return (const char *)data;
}

/* Points 10 (a), 20 (b, c, d: one value, three nodes, in that order), 30 (e). */
static chash_ring *five(void)
{
    chash_ring *r = chash_ring_new();
    CHECK(r != NULL);
    CHECK(chash_ring_set_ties(r, CHASH_TIES_BY_ORDER) == 0);
    CHECK(chash_ring_set_rule(r, CHASH_RULE_VARNISH) == 0);
    CHECK(chash_ring_rule(r) == CHASH_RULE_VARNISH);
    const uint32_t p10[] = {10}, p20[] = {20}, p30[] = {30};
    CHECK(add(r, "a", p10, 1) == 0 && add(r, "b", p20, 1) == 0 && add(r, "c", p20, 1) == 0
          && add(r, "d", p20, 1) == 0 && add(r, "e", p30, 1) == 0);
    CHECK(chash_ring_check(r) == 0);
    return r;
}

static void test_lookup(void)
{
    chash_ring *r = five();
    /* [0, 10] to a (i = 2, 1, then 0), (10, 20) to b, the run's first. */
    CHECK(chash_ring_varnish(r, 0) == 0 && chash_ring_varnish(r, 10) == 0);
    CHECK(chash_ring_varnish(r, 11) == 1 && chash_ring_varnish(r, 19) == 1);
    /* 20 itself: the first probe, i = 2, is equal: c, not the successor's b. */
    CHECK(chash_ring_varnish(r, 20) == 2 && chash_ring_successor(r, 20) == 1);
    CHECK(strcmp(owner_of(r, 20), "c") == 0 && strcmp(owner_of(r, 19), "b") == 0);
    CHECK(chash_ring_varnish(r, 21) == 4 && chash_ring_varnish(r, 30) == 4);
    /* Above the last point: the last point (e), where the successor wraps to a. */
    CHECK(chash_ring_varnish(r, 31) == 4 && chash_ring_varnish(r, UINT32_MAX) == 4);
    CHECK(chash_ring_successor(r, 31) == 0);
    CHECK(strcmp(owner_of(r, UINT32_MAX), "e") == 0);
    /* The batch form follows the rule. */
    uint32_t hashes[] = {0, 20, 25, UINT32_MAX}, owners[4];
    chash_ring_owners(r, hashes, 4, owners);
    CHECK(owners[0] == 0 && owners[1] == 2 && owners[2] == 4 && owners[3] == 4);
    chash_ring_free(r);
}

static void test_preference(void)
{
    chash_ring *r = five();
    size_t out[5], found = 0;
    /* From c at 20: c, d, e, then wrapping a, b (the director's walk). */
    CHECK(chash_ring_preference(r, 20, 5, out, &found) == 0 && found == 5);
    CHECK(out[0] == 2 && out[1] == 3 && out[2] == 4 && out[3] == 0 && out[4] == 1);
    /* From the top: e, then a, b, c, d. */
    CHECK(chash_ring_preference(r, UINT32_MAX, 2, out, &found) == 0 && found == 2);
    CHECK(out[0] == 4 && out[1] == 0);
    chash_ring_free(r);
}

static void test_ownership(void)
{
    chash_ring *r = five();
    double share[5];
    chash_ring_ownership(r, share);
    const double full = 4294967296.0;
    CHECK(share[0] == 11.0 / full);                       /* [0, 10] */
    CHECK(share[1] == 10.0 / full);                       /* (10, 20] */
    CHECK(share[2] == 0.0 && share[3] == 0.0);
    CHECK(share[4] == (full - 21.0) / full);              /* (20, top] */
    /* One point: everything. */
    chash_ring *one = chash_ring_new();
    const uint32_t p[] = {7};
    CHECK(chash_ring_set_rule(one, CHASH_RULE_VARNISH) == 0 && add(one, "x", p, 1) == 0);
    chash_ring_ownership(one, share);
    CHECK(share[0] == 1.0);
    CHECK(chash_ring_varnish(one, 0) == 0 && chash_ring_varnish(one, 7) == 0
          && chash_ring_varnish(one, UINT32_MAX) == 0);
    chash_ring_free(one);
    chash_ring_free(r);
}

/* Every hash of a small dense ring against the successor with the two
 * documented exceptions, one hash at a time: the bisection always stops. */
static void test_dense(void)
{
    chash_ring *r = chash_ring_new();
    CHECK(chash_ring_set_rule(r, CHASH_RULE_VARNISH) == 0);
    uint32_t pts[64];
    for (size_t i = 0; i < 64; i++)
        pts[i] = (uint32_t)(i * 3 + 5); /* distinct: exact hits are the successor's */
    CHECK(add(r, "n", pts, 33) == 0 && add(r, "m", pts + 33, 31) == 0);
    size_t n = chash_ring_point_count(r);
    for (uint32_t h = 0; h < 300; h++) {
        size_t want = h > chash_ring_point(r, n - 1) ? n - 1 : chash_ring_successor(r, h);
        CHECK(chash_ring_varnish(r, h) == want);
    }
    chash_ring_free(r);
}

/* Two points: the first probe (i = 1) is the last point, so every hash,
 * even one below the first point, goes to the second. */
static void test_two_points(void)
{
    chash_ring *r = chash_ring_new();
    const uint32_t p[] = {100}, q[] = {200};
    CHECK(chash_ring_set_rule(r, CHASH_RULE_VARNISH) == 0 && add(r, "x", p, 1) == 0
          && add(r, "y", q, 1) == 0);
    CHECK(chash_ring_varnish(r, 0) == 1 && chash_ring_varnish(r, 100) == 1
          && chash_ring_varnish(r, UINT32_MAX) == 1);
    double share[2];
    chash_ring_ownership(r, share);
    CHECK(share[0] == 0.0 && share[1] == 1.0);
    chash_ring_free(r);
}

static void test_rule_setting(void)
{
    chash_ring *r = chash_ring_new();
    CHECK(chash_ring_set_rule(r, (chash_rule)3) == CHASH_EINVAL);
    const uint32_t p[] = {1};
    CHECK(add(r, "x", p, 1) == 0);
    CHECK(chash_ring_set_rule(r, CHASH_RULE_VARNISH) == CHASH_EINVAL); /* not empty */
    chash_ring_free(r);
}

int main(void)
{
    test_lookup();
    test_preference();
    test_ownership();
    test_dense();
    test_two_points();
    test_rule_setting();
    return check_report();
}
