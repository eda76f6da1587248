/*
 * test_wide.c - the ring of 64-bit points (engine/wide.h), Envoy's and
 * gRPC's placement rules (engine/envoy.h) and the weighted Maglev fill
 * (strategies/strategies.h): known answers published in Envoy's own tests
 * (test/extensions/load_balancing_policies/ring_hash/ring_hash_lb_test.cc
 * and maglev/maglev_lb_test.cc), the successor rule against a linear scan,
 * argument checks, and allocation failures leaving the ring as it was.
 *
 * The files under test are included directly so their allocator can be
 * swapped for one that fails on demand.  Ends with "N passed, M failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failing_alloc.h"
#include "../../csrc/engine/wide.c"
#include "../../csrc/engine/envoy.c"
#include "../../csrc/strategies/mix.c"
#include "../../csrc/strategies/jump.c"
#include "../../csrc/strategies/jumpback.c"
#include "../../csrc/strategies/rendezvous.c"
#include "../../csrc/strategies/maglev.c"
#include "../../csrc/strategies/bounded.c"

#include "check.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t next_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}

/* The successor by a linear scan: the first point >= h, else point 0. */
static size_t scan_successor(const chash_wide *ring, uint64_t h)
{
    for (size_t i = 0; i < ring->n; i++)
        if (ring->pt[i].value >= h)
            return i;
    return 0;
}

static void test_successor_against_scan(void)
{
    enum { N = 3000, NODES = 7 };
    uint64_t *points = malloc(N * sizeof *points);
    uint32_t *owners = malloc(N * sizeof *owners);
    for (size_t i = 0; i < N; i++) {
        /* Shared values (every 10th repeats an earlier one), the ends. */
        points[i] = i % 10 == 9 ? points[i - 3] : next_u64();
        owners[i] = (uint32_t)(next_u64() % NODES);
    }
    points[0] = 0;
    points[1] = UINT64_MAX;
    chash_wide *ring = chash_wide_new();
    CHECK(ring != NULL);
    CHECK(chash_wide_build(ring, points, owners, N, NODES) == CHASH_OK);
    CHECK(chash_wide_check(ring) == CHASH_OK);
    CHECK(chash_wide_count(ring) == N && chash_wide_nodes(ring) == NODES);
    int agree = 1;
    for (size_t i = 0; i < 20000; i++) {
        uint64_t h = i % 3 == 0 ? points[i % N] : i % 3 == 1 ? points[i % N] + 1 : next_u64();
        agree &= chash_wide_successor(ring, h) == scan_successor(ring, h);
    }
    CHECK(agree);
    /* A shared value goes to the smaller owner. */
    int ties = 1;
    for (size_t i = 1; i < N; i++)
        if (ring->pt[i].value == ring->pt[i - 1].value)
            ties &= ring->pt[i - 1].owner <= ring->pt[i].owner;
    CHECK(ties);
    /* The batch form agrees with the single one. */
    uint64_t hashes[64];
    uint32_t got[64];
    for (size_t i = 0; i < 64; i++)
        hashes[i] = next_u64();
    chash_wide_owners(ring, hashes, 64, got);
    int batch = 1;
    for (size_t i = 0; i < 64; i++)
        batch &= got[i] == ring->pt[chash_wide_successor(ring, hashes[i])].owner;
    CHECK(batch);
    /* Preference: distinct owners, the successor's first. */
    uint32_t pref[NODES];
    size_t found;
    CHECK(chash_wide_preference(ring, hashes[0], NODES + 3, pref, &found) == CHASH_OK);
    CHECK(found == NODES && pref[0] == got[0]);
    int distinct = 1;
    for (size_t a = 0; a < found; a++)
        for (size_t b = a + 1; b < found; b++)
            distinct &= pref[a] != pref[b];
    CHECK(distinct);
    double share[NODES], sum = 0.0;
    chash_wide_ownership(ring, share);
    for (size_t k = 0; k < NODES; k++)
        sum += share[k];
    CHECK(fabs(sum - 1.0) < 1e-9);
    /* Bad arguments and failed allocations leave the ring as it was. */
    owners[5] = NODES;
    CHECK(chash_wide_build(ring, points, owners, N, NODES) == CHASH_EINVAL);
    CHECK(chash_wide_build(ring, points, owners, CHASH_WIDE_MAX_POINTS + 1, NODES) == CHASH_ERANGE);
    owners[5] = 0;
    for (long k = 0; k < 2; k++) {
        fail_countdown = k;
        CHECK(chash_wide_build(ring, points, owners, 10, NODES) == CHASH_ENOMEM);
        CHECK(chash_wide_count(ring) == N && chash_wide_check(ring) == CHASH_OK);
    }
    fail_countdown = -1;
    fail_countdown = 0;
    CHECK(chash_wide_preference(ring, 1, 3, pref, &found) == CHASH_ENOMEM && found == 0);
    fail_countdown = -1;
    /* An empty build empties the ring. */
    CHECK(chash_wide_build(ring, points, owners, 0, 0) == CHASH_OK);
    CHECK(chash_wide_count(ring) == 0 && chash_wide_check(ring) == CHASH_OK);
    CHECK(chash_wide_preference(ring, 1, 3, pref, &found) == CHASH_OK && found == 0);
    chash_wide_free(ring);
    free(points);
    free(owners);
}

/* Points of hosts "127.0.0.1:{port}" for counts[i], sorted, as Envoy
 * logs its ring. */
static chash_wide *envoy_ring(chash_point_hash kind, const int *ports, const size_t *counts,
                              size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += counts[i];
    uint64_t *points = malloc((total ? total : 1) * sizeof *points);
    uint32_t *owners = malloc((total ? total : 1) * sizeof *owners);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        char id[32];
        int len = snprintf(id, sizeof id, "127.0.0.1:%d", ports[i]);
        CHECK(chash_envoy_points(kind, id, (size_t)len, counts[i], points + at) == CHASH_OK);
        for (size_t j = 0; j < counts[i]; j++)
            owners[at + j] = (uint32_t)i;
        at += counts[i];
    }
    chash_wide *ring = chash_wide_new();
    CHECK(chash_wide_build(ring, points, owners, total, n) == CHASH_OK);
    free(points);
    free(owners);
    return ring;
}

/* RingHashLoadBalancerTest.Basic: six hosts, minimum_ring_size 12. */
static void test_envoy_basic_ring(void)
{
    const uint64_t weights[6] = {1, 1, 1, 1, 1, 1};
    size_t counts[6], total;
    CHECK(chash_envoy_counts(weights, 6, 12, 8388608, counts, &total) == CHASH_OK);
    CHECK(total == 12 && counts[0] == 2 && counts[5] == 2);
    const int ports[6] = {90, 91, 92, 93, 94, 95};
    chash_wide *ring = envoy_ring(CHASH_POINT_XXH64, ports, counts, 6);
    const uint64_t published[12] = {
        833437586790550860u,   928266305478181108u,   1033482794131418490u,
        3551244743356806947u,  3851675632748031481u,  5583722120771150861u,
        6311230543546372928u,  7700377290971790572u,  13144177310400110813u,
        13444792449719432967u, 15516499411664133160u, 16117243373044804889u};
    const uint32_t owner_port[12] = {94, 92, 90, 95, 93, 91, 91, 93, 95, 92, 94, 90};
    int same = chash_wide_count(ring) == 12;
    for (size_t i = 0; same && i < 12; i++)
        same &= ring->pt[i].value == published[i] && (uint32_t)ports[ring->pt[i].owner] == owner_port[i];
    CHECK(same);
    CHECK(ports[ring->pt[chash_wide_successor(ring, 0)].owner] == 94);
    CHECK(ports[ring->pt[chash_wide_successor(ring, UINT64_MAX)].owner] == 94);
    CHECK(ports[ring->pt[chash_wide_successor(ring, 3551244743356806947u)].owner] == 95);
    CHECK(ports[ring->pt[chash_wide_successor(ring, 3551244743356806948u)].owner] == 93);
    chash_wide_free(ring);
}

/* RingHashLoadBalancerTest.BasicWithMurmur2. */
static void test_envoy_murmur_ring(void)
{
    const int ports[6] = {80, 81, 82, 83, 84, 85};
    const size_t counts[6] = {2, 2, 2, 2, 2, 2};
    chash_wide *ring = envoy_ring(CHASH_POINT_MURMUR2_64, ports, counts, 6);
    const uint64_t published[12] = {
        1358027074129602068u,  4361834613929391114u,  7224494972555149682u,
        7701421856454313576u,  8649315368077433379u,  8739448859063030639u,
        9887544217113020895u,  10150910876324007731u, 15168472011420622455u,
        15427156902705414897u, 16375050414328759093u, 17613279263364193813u};
    const uint32_t owner_port[12] = {85, 83, 84, 81, 82, 84, 81, 82, 83, 80, 85, 80};
    int same = chash_wide_count(ring) == 12;
    for (size_t i = 0; same && i < 12; i++)
        same &= ring->pt[i].value == published[i] && (uint32_t)ports[ring->pt[i].owner] == owner_port[i];
    CHECK(same);
    chash_wide_free(ring);
}

/* The point counts of UnevenHosts, HostWeightedTinyRing, HostWeightedLargeRing,
 * SmallFractionalScale and LargeFractionalScale. */
static void test_envoy_counts(void)
{
    size_t counts[6], total;
    const uint64_t two[2] = {1, 1};
    CHECK(chash_envoy_counts(two, 2, 3, 8388608, counts, &total) == CHASH_OK);
    CHECK(total == 4 && counts[0] == 2 && counts[1] == 2);
    const uint64_t w123[3] = {1, 2, 3};
    CHECK(chash_envoy_counts(w123, 3, 6, 6, counts, &total) == CHASH_OK);
    CHECK(total == 6 && counts[0] == 1 && counts[1] == 2 && counts[2] == 3);
    CHECK(chash_envoy_counts(w123, 3, 6144, 8388608, counts, &total) == CHASH_OK);
    CHECK(total == 6144 && counts[0] == 1024 && counts[1] == 2048 && counts[2] == 3072);
    const uint64_t four[4] = {1, 1, 1, 1};
    CHECK(chash_envoy_counts(four, 4, 2, 2, counts, &total) == CHASH_OK);
    CHECK(total == 2 && counts[0] + counts[1] + counts[2] + counts[3] == 2);
    CHECK((counts[0] == 0) + (counts[1] == 0) + (counts[2] == 0) + (counts[3] == 0) == 2);
    CHECK(chash_envoy_counts(two, 2, 1023, 1023, counts, &total) == CHASH_OK);
    CHECK(total == 1023 && counts[0] == 512 && counts[1] == 511);
    /* gRPC caps both sizes at 4096 before the same rule. */
    CHECK(chash_envoy_counts(w123, 3, 4096, 4096, counts, &total) == CHASH_OK);
    CHECK(total <= 4097);
    /* Argument checks. */
    const uint64_t zero[2] = {1, 0};
    CHECK(chash_envoy_counts(zero, 2, 4, 8, counts, &total) == CHASH_EINVAL);
    CHECK(chash_envoy_counts(two, 2, 9, 8, counts, &total) == CHASH_EINVAL);
    CHECK(chash_envoy_counts(two, 2, 0, 8, counts, &total) == CHASH_EINVAL);
    const uint64_t huge[2] = {UINT64_MAX, 1};
    CHECK(chash_envoy_counts(huge, 2, 4, 8, counts, &total) == CHASH_EINVAL);
    const uint64_t lopsided[2] = {1, 1u << 30};
    CHECK(chash_envoy_counts(lopsided, 2, 1u << 20, 1ull << 40, counts, &total) == CHASH_ERANGE);
    CHECK(chash_envoy_counts(two, 0, 4, 8, counts, &total) == CHASH_OK && total == 0);
}

static void test_envoy_points(void)
{
    uint64_t out[2];
    CHECK(chash_envoy_points(CHASH_POINT_XXH64, "127.0.0.1:90", 12, 1, out) == CHASH_OK);
    CHECK(out[0] == 16117243373044804889u);
    /* A long id takes the heap buffer; allocation failure is reported. */
    char id[600];
    memset(id, 'a', sizeof id);
    fail_countdown = 0;
    CHECK(chash_envoy_points(CHASH_POINT_XXH64, id, sizeof id, 2, out) == CHASH_ENOMEM);
    fail_countdown = -1;
    CHECK(chash_envoy_points(CHASH_POINT_XXH64, id, sizeof id, 2, out) == CHASH_OK);
    CHECK(out[0] != out[1]);
}

/* A Maglev table of hosts "127.0.0.1:{port}" (sorted by key, as Envoy
 * sorts them; the ports here are listed in that order). */
static int envoy_maglev(const int *ports, const double *weights, size_t n, uint32_t *table,
                        size_t m)
{
    uint64_t offsets[8], skips[8];
    for (size_t i = 0; i < n; i++) {
        char id[32];
        int len = snprintf(id, sizeof id, "127.0.0.1:%d", ports[i]);
        chash_envoy_maglev_entry(id, (size_t)len, m, &offsets[i], &skips[i]);
    }
    return chash_maglev_build_weighted(offsets, skips, weights, n, table, m);
}

/* MaglevLoadBalancerTest.Basic and .Weighted. */
static void test_envoy_maglev(void)
{
    const int ports[6] = {90, 91, 92, 93, 94, 95};
    const double even[6] = {1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6};
    uint32_t table[17];
    CHECK(envoy_maglev(ports, even, 6, table, 7) == CHASH_OK);
    const uint32_t basic[7] = {2, 4, 0, 1, 5, 0, 3};
    CHECK(memcmp(table, basic, sizeof basic) == 0);
    const double w12[2] = {1.0 / 3, 2.0 / 3};
    CHECK(envoy_maglev(ports, w12, 2, table, 17) == CHASH_OK);
    const uint32_t weighted[17] = {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1};
    CHECK(memcmp(table, weighted, sizeof weighted) == 0);
    /* Argument checks and allocation failures. */
    CHECK(envoy_maglev(ports, w12, 2, table, 16) == CHASH_EINVAL);
    const double bad[2] = {1.0, 0.0};
    CHECK(envoy_maglev(ports, bad, 2, table, 17) == CHASH_EINVAL);
    const uint64_t offsets[1] = {17}, skips[1] = {1};
    CHECK(chash_maglev_build_weighted(offsets, skips, w12, 1, table, 17) == CHASH_EINVAL);
    fail_countdown = 0;
    CHECK(envoy_maglev(ports, w12, 2, table, 17) == CHASH_ENOMEM);
    fail_countdown = 1;
    CHECK(envoy_maglev(ports, w12, 2, table, 17) == CHASH_ENOMEM);
    fail_countdown = -1;
    /* More hosts than entries: the table fills first. */
    CHECK(envoy_maglev(ports, even, 6, table, 5) == CHASH_OK);
}

int main(void)
{
    test_successor_against_scan();
    test_envoy_basic_ring();
    test_envoy_murmur_ring();
    test_envoy_counts();
    test_envoy_points();
    test_envoy_maglev();
    return check_report();
}
