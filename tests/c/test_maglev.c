/*
 * test_maglev.c - Envoy's whole Maglev table build and the fast remainder
 * (strategies/maglev.h): the tables of Envoy's maglev_lb_test.cc (the same
 * vectors tests/compat/test_envoy_vectors.py holds MaglevRouter to, from
 * tests/vectors/envoy.json), order independence, the counts, the sort by
 * key bytes, agreement with the permutation and fill called by hand, every
 * argument check and allocation failure, and h % m against the division.
 *
 * maglev.c is included directly so its allocator can be swapped for one
 * that fails on demand; the hashes are linked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failing_alloc.h"
#include "../../csrc/strategies/mix.c"
#include "../../csrc/strategies/maglev.c"

#include "check.h"

#define MAX_HOSTS 16

typedef struct {
    const char *ids[MAX_HOSTS];
    size_t lens[MAX_HOSTS];
    uint64_t weights[MAX_HOSTS];
    size_t n;
} hosts;

static hosts make_hosts(const char *const *names, const uint64_t *weights, size_t n)
{
    hosts h = {{0}, {0}, {0}, n};
    for (size_t k = 0; k < n; k++) {
        h.ids[k] = names[k];
        h.lens[k] = strlen(names[k]);
        h.weights[k] = weights ? weights[k] : 1;
    }
    return h;
}

static int build(const hosts *h, size_t m, uint32_t *table, size_t *counts)
{
    return chash_maglev_envoy_table(h->ids, h->lens, h->weights, h->n, m, table, counts);
}

/* The table equals want[] and the counts are the table's. */
static int table_is(const uint32_t *table, const size_t *counts, size_t n, const uint32_t *want,
                    size_t m)
{
    if (memcmp(table, want, m * sizeof *table) != 0)
        return 0;
    for (size_t k = 0; k < n; k++) {
        size_t c = 0;
        for (size_t e = 0; e < m; e++)
            c += want[e] == k;
        if (counts[k] != c)
            return 0;
    }
    return 1;
}

static const char *const PORTS[6] = {"127.0.0.1:90", "127.0.0.1:91", "127.0.0.1:92",
                                     "127.0.0.1:93", "127.0.0.1:94", "127.0.0.1:95"};

static void test_envoy_vectors(void)
{
    uint32_t table[17];
    size_t counts[MAX_HOSTS];
    /* SingleHost, WeightedSingleHost. */
    hosts one = make_hosts(PORTS, (const uint64_t[]){7}, 1);
    CHECK(build(&one, 7, table, counts) == CHASH_OK);
    CHECK(table_is(table, counts, 1, (const uint32_t[7]){0}, 7) && counts[0] == 7);
    CHECK(build(&one, 17, table, counts) == CHASH_OK && counts[0] == 17);
    /* Basic (and BasicWithRetryHostPredicate's table). */
    hosts basic = make_hosts(PORTS, NULL, 6);
    CHECK(build(&basic, 7, table, counts) == CHASH_OK);
    CHECK(table_is(table, counts, 6, (const uint32_t[]){2, 4, 0, 1, 5, 0, 3}, 7));
    /* BasicWithHostName: keys without the address. */
    const char *names[6] = {"90", "91", "92", "93", "94", "95"};
    hosts by_name = make_hosts(names, NULL, 6);
    CHECK(build(&by_name, 7, table, counts) == CHASH_OK);
    CHECK(table_is(table, counts, 6, (const uint32_t[]){2, 5, 0, 3, 4, 1, 0}, 7));
    /* Weighted: 1 and 2. */
    hosts weighted = make_hosts(PORTS, (const uint64_t[]){1, 2}, 2);
    const uint32_t w12[17] = {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1};
    CHECK(build(&weighted, 17, table, counts) == CHASH_OK && table_is(table, counts, 2, w12, 17));
    CHECK(counts[0] == 6 && counts[1] == 11);
    /* LocalityWeightedSameLocalityWeights, ...DifferentLocalityWeights. */
    hosts same = make_hosts(PORTS, (const uint64_t[]){1, 1}, 2);
    CHECK(build(&same, 17, table, counts) == CHASH_OK);
    CHECK(table_is(table, counts, 2,
                   (const uint32_t[]){1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1}, 17));
    hosts four_one = make_hosts(PORTS, (const uint64_t[]){4, 1}, 2);
    CHECK(build(&four_one, 17, table, counts) == CHASH_OK);
    CHECK(table_is(table, counts, 2,
                   (const uint32_t[]){1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0}, 17));
    CHECK(counts[0] == 13 && counts[1] == 4);
    /* Weights scaled alike normalise alike. */
    hosts scaled = make_hosts(PORTS, (const uint64_t[]){8, 2}, 2);
    uint32_t again[17];
    CHECK(build(&scaled, 17, again, counts) == CHASH_OK && memcmp(table, again, sizeof again) == 0);
}

/* BasicStability: any order of the same hosts gives the same table, its
 * entries naming each host by its place in the order given. */
static void test_order(void)
{
    hosts basic = make_hosts(PORTS, (const uint64_t[]){1, 3, 1, 2, 1, 5}, 6);
    uint32_t table[251], other[251];
    size_t counts[6], other_counts[6];
    CHECK(build(&basic, 251, table, counts) == CHASH_OK);
    size_t sum = 0;
    for (size_t k = 0; k < 6; k++)
        sum += counts[k];
    CHECK(sum == 251);
    const size_t perm[6] = {4, 0, 5, 2, 1, 3}; /* host perm[i] listed at i */
    hosts shuffled = basic;
    for (size_t i = 0; i < 6; i++) {
        shuffled.ids[i] = basic.ids[perm[i]];
        shuffled.lens[i] = basic.lens[perm[i]];
        shuffled.weights[i] = basic.weights[perm[i]];
    }
    CHECK(build(&shuffled, 251, other, other_counts) == CHASH_OK);
    int same = 1;
    for (size_t e = 0; e < 251; e++)
        same &= perm[other[e]] == table[e];
    for (size_t i = 0; i < 6; i++)
        same &= other_counts[i] == counts[perm[i]];
    CHECK(same);
}

/* The build is the permutation and the fill over the hosts sorted by key
 * bytes, a prefix before its extensions, called here by hand. */
static void test_against_the_pieces(void)
{
    const char *names[5] = {"b", "ab", "a", "a\xff", ""};
    const size_t sorted[5] = {4, 2, 1, 3, 0}; /* "", "a", "ab", "a\xff", "b" */
    hosts h = make_hosts(names, (const uint64_t[]){2, 1, 3, 1, 4}, 5);
    double sum = 11.0;
    uint64_t offsets[5], skips[5];
    double norm[5];
    for (size_t i = 0; i < 5; i++) {
        size_t k = sorted[i];
        chash_envoy_maglev_entry(h.ids[k], h.lens[k], 1009, &offsets[i], &skips[i]);
        norm[i] = (double)h.weights[k] / sum;
    }
    uint32_t want[1009], table[1009];
    size_t counts[5];
    CHECK(chash_maglev_build_weighted(offsets, skips, norm, 5, want, 1009) == CHASH_OK);
    for (size_t e = 0; e < 1009; e++)
        want[e] = (uint32_t)sorted[want[e]];
    CHECK(build(&h, 1009, table, counts) == CHASH_OK && table_is(table, counts, 5, want, 1009));
}

static void test_errors(void)
{
    uint32_t table[17];
    size_t counts[4] = {9, 9, 9, 9};
    hosts two = make_hosts(PORTS, (const uint64_t[]){1, 2}, 2);
    /* No host: nothing written. */
    CHECK(chash_maglev_envoy_table(NULL, NULL, NULL, 0, 17, NULL, NULL) == CHASH_OK);
    CHECK(chash_maglev_envoy_table(NULL, NULL, NULL, 0, 16, NULL, NULL) == CHASH_OK);
    /* Sizes that are not primes in [2, max]. */
    CHECK(build(&two, 16, table, counts) == CHASH_EINVAL);
    CHECK(build(&two, 1, table, counts) == CHASH_EINVAL);
    CHECK(build(&two, 0, table, counts) == CHASH_EINVAL);
    CHECK(build(&two, CHASH_MAGLEV_MAX_TABLE + 3, table, counts) == CHASH_EINVAL);
    CHECK(chash_maglev_envoy_table(two.ids, two.lens, two.weights, (size_t)UINT32_MAX + 1, 17, table,
                                   counts) == CHASH_EINVAL);
    /* A weight of 0, weights past UINT64_MAX; one just at it is fine. */
    two.weights[0] = 0;
    CHECK(build(&two, 17, table, counts) == CHASH_EINVAL);
    two.weights[0] = UINT64_MAX;
    two.weights[1] = 1;
    CHECK(build(&two, 17, table, counts) == CHASH_EINVAL);
    two.weights[0] = UINT64_MAX - 1;
    CHECK(build(&two, 17, table, counts) == CHASH_OK && counts[0] + counts[1] == 17);
    /* Two hosts with one key, wherever they are listed. */
    const char *dup[3] = {"x", "y", "x"};
    hosts d = make_hosts(dup, NULL, 3);
    CHECK(build(&d, 17, table, counts) == CHASH_EEXIST);
    const char *empty[2] = {"", ""};
    hosts e = make_hosts(empty, NULL, 2);
    CHECK(build(&e, 17, table, counts) == CHASH_EEXIST);
    /* Each allocation failing in turn: four of the build's, three of the
     * fill's (positions, targets, the taken bits); then none. */
    hosts basic = make_hosts(PORTS, NULL, 4);
    for (long fail = 0; fail < 7; fail++) {
        fail_countdown = fail;
        CHECK(build(&basic, 17, table, counts) == CHASH_ENOMEM);
    }
    fail_countdown = 7;
    CHECK(build(&basic, 17, table, counts) == CHASH_OK);
    fail_countdown = -1;
}

static uint64_t rng = 0x243F6A8885A308D3u;
static uint64_t next_u64(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * UINT64_C(2685821657736338717);
}

static void test_fast_remainder(void)
{
    const uint64_t sizes[] = {2, 3, 7, 17, 251, 65537, 65536, 1000003, CHASH_MAGLEV_MAX_TABLE,
                              (uint64_t)UINT32_MAX, (uint64_t)UINT32_MAX + 2, UINT64_MAX / 3,
                              UINT64_MAX - 1, UINT64_MAX};
    int exact = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t m = sizes[i], magic[2];
        chash_maglev_mod_magic(m, magic);
        const uint64_t edges[] = {0, 1, m - 1, m, m + 1, 2 * m - 1, UINT64_MAX, UINT64_MAX - 1,
                                  (UINT64_MAX / m) * m, (UINT64_MAX / m) * m - 1};
        for (size_t j = 0; j < sizeof edges / sizeof edges[0]; j++)
            exact &= chash_maglev_mod(magic, m, edges[j]) == edges[j] % m;
        for (int r = 0; r < 20000; r++) {
            uint64_t h = next_u64();
            exact &= chash_maglev_mod(magic, m, h) == h % m;
        }
    }
    for (int r = 0; r < 2000; r++) {
        uint64_t m = next_u64() >> (r % 63);
        if (m < 2)
            continue;
        uint64_t magic[2];
        chash_maglev_mod_magic(m, magic);
        for (int k = 0; k < 20; k++) {
            uint64_t h = next_u64();
            exact &= chash_maglev_mod(magic, m, h) == h % m;
        }
    }
    CHECK(exact);
}

int main(void)
{
    test_envoy_vectors();
    test_order();
    test_against_the_pieces();
    test_errors();
    test_fast_remainder();
    return check_report();
}
