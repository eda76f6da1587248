/*
 * test_strategies.c - the strategies of strategies/strategies.h on their own:
 * jump's published known answers and its monotonicity, rendezvous moving
 * only the keys it must, Maglev's table shares and disruption, the
 * bounded-loads guarantee, the live load table (Envoy's weighted slots,
 * the walk, takes and puts), argument checks, and allocation failures.
 *
 * The strategies are included directly so their allocator can be swapped
 * for one that fails on demand; the ring engine and the hashes are linked
 * as they are.  Ends with "N passed, M failed"; the exit
 * status is non-zero when anything failed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failing_alloc.h"
#include "../../csrc/strategies/mix.c"
#include "../../csrc/strategies/jump.c"
#include "../../csrc/strategies/jumpback.c"
#include "../../csrc/strategies/rendezvous.c"
#include "../../csrc/strategies/maglev.c"
#include "../../csrc/strategies/bounded.c"

#include "check.h"

/* xorshift64*: deterministic pseudo-random key hashes. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t next_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}

static uint64_t *random_keys(size_t n)
{
    uint64_t *keys = malloc(n * sizeof *keys);
    if (!keys) {
        printf("out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = next_u64();
    return keys;
}

static uint32_t *new_out(size_t n)
{
    uint32_t *out = malloc((n ? n : 1) * sizeof *out);
    if (!out) {
        printf("out of memory\n");
        exit(2);
    }
    return out;
}

static size_t count_moved(const uint32_t *a, const uint32_t *b, size_t n)
{
    size_t moved = 0;
    for (size_t i = 0; i < n; i++)
        moved += a[i] != b[i];
    return moved;
}

static int popcount64(uint64_t x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

static void test_mix64(void)
{
    CHECK(chash_mix64(0) == 0); /* fmix64 fixes zero */
    CHECK(chash_mix64(1) != 1);
    CHECK(chash_mix64(1) != chash_mix64(2));
    /* One flipped input bit flips about half the output bits. */
    int bits = 0;
    for (int b = 0; b < 64; b++)
        bits += popcount64(chash_mix64(12345) ^ chash_mix64(12345 ^ ((uint64_t)1 << b)));
    CHECK(bits > 64 * 24 && bits < 64 * 40);
}

/* Values published by two independent implementations of the paper's
 * algorithm (Guava's consistentHash tests, ClickHouse's
 * jumpConsistentHash tests). */
static void test_jump_known_answers(void)
{
    static const struct {
        uint64_t key;
        size_t buckets;
        uint32_t bucket;
    } cases[] = {
        {UINT64_C(10863919174838991), 11, 6},
        {UINT64_C(2016238256797177309), 11, 3},
        {UINT64_C(1673758223894951030), 11, 5},
        {UINT64_C(1), 1, 0},
        {UINT64_C(42), 57, 43},
        {UINT64_C(256), 1024, 520},
        {UINT64_C(3735883980), 1, 0},
        {UINT64_C(3735883980), 666, 361},
        {UINT64_C(16045690984833335023), 255, 237},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got = chash_jump(cases[i].key, cases[i].buckets);
        if (got != cases[i].bucket)
            printf("  jump(%llu, %zu) = %u, expected %u\n", (unsigned long long)cases[i].key,
                   cases[i].buckets, got, cases[i].bucket);
        CHECK(got == cases[i].bucket);
    }
}

static void test_jump_properties(void)
{
    enum { KEYS = 5000, MAX_N = 300 };
    uint64_t *keys = random_keys(KEYS);
    int monotone = 1, in_range = 1;
    for (size_t i = 0; i < KEYS; i++) {
        uint32_t prev = chash_jump(keys[i], 1);
        in_range &= prev == 0;
        for (size_t n = 2; n <= MAX_N; n++) {
            uint32_t b = chash_jump(keys[i], n);
            /* Growing to n buckets moves a key to the new bucket or not at all. */
            monotone &= b == prev || b == n - 1;
            in_range &= b < n;
            prev = b;
        }
    }
    CHECK(monotone);
    CHECK(in_range);
    free(keys);

    /* Balance: 200,000 keys over 10 buckets, each within 2% of 20,000
     * (the binomial standard deviation is 134 keys, 0.7%). */
    enum { BKEYS = 200000, BUCKETS = 10 };
    uint64_t *bkeys = random_keys(BKEYS);
    uint32_t *out = new_out(BKEYS);
    size_t counts[BUCKETS] = {0};
    CHECK(chash_jump_assign(bkeys, BKEYS, BUCKETS, out) == CHASH_OK);
    for (size_t i = 0; i < BKEYS; i++)
        counts[out[i]]++;
    for (size_t b = 0; b < BUCKETS; b++)
        CHECK(counts[b] > 19600 && counts[b] < 20400);

    /* 10 -> 11 buckets moves about 1/11 of the keys, all to bucket 10. */
    uint32_t *grown = new_out(BKEYS);
    CHECK(chash_jump_assign(bkeys, BKEYS, BUCKETS + 1, grown) == CHASH_OK);
    size_t moved = count_moved(out, grown, BKEYS);
    CHECK(fabs((double)moved / BKEYS - 1.0 / 11) < 0.005);
    int only_to_new = 1;
    for (size_t i = 0; i < BKEYS; i++)
        only_to_new &= out[i] == grown[i] || grown[i] == BUCKETS;
    CHECK(only_to_new);
    free(grown);
    free(out);
    free(bkeys);

    /* Extremes of the bucket count. */
    CHECK(chash_jump(99, 0) == 0);
    CHECK(chash_jump(99, (size_t)CHASH_JUMP_MAX_BUCKETS + 1) == 0);
    CHECK(chash_jump(UINT64_MAX, CHASH_JUMP_MAX_BUCKETS) < CHASH_JUMP_MAX_BUCKETS);
    uint32_t one;
    uint64_t key = 7;
    CHECK(chash_jump_assign(&key, 1, 0, &one) == CHASH_EINVAL);
    CHECK(chash_jump_assign(&key, 1, (size_t)CHASH_JUMP_MAX_BUCKETS + 1, &one) == CHASH_EINVAL);
    CHECK(chash_jump_assign(NULL, 0, 5, NULL) == CHASH_OK);
}

/* Guava's Hashing.consistentHash, values printed by Guava 31.1 (Debian's
 * libguava-java) for these longs (given here as their 64 bits).  The first
 * is a key where Guava's rounding and the paper's part: the paper's
 * function sends it to bucket 327679. */
static void test_jump_guava(void)
{
    static const struct {
        uint64_t key;
        size_t buckets;
        uint32_t bucket;
    } cases[] = {
        {UINT64_C(12970273959431459788), 459790, 327680},
        {UINT64_C(10863919174838991), 11, 6},
        {UINT64_C(2016238256797177309), 11, 3},
        {UINT64_C(1673758223894951030), 11, 5},
        {UINT64_MAX, CHASH_JUMP_MAX_BUCKETS, 699554662},
        {UINT64_C(1) << 63, CHASH_JUMP_MAX_BUCKETS, 1119800965},
        {UINT64_C(9223372036854775807), 1, 0},
        {0, 1000000, 0},
        /* The generator's first top 31 bits all ones: Java's int sum
         * wraps and the key stays in bucket 0 (the paper's moves it). */
        {UINT64_C(17068571456203592619), 10, 0},
        {UINT64_C(18063469494497682072), 1000, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got = chash_jump_guava(cases[i].key, cases[i].buckets);
        if (got != cases[i].bucket)
            printf("  guava(%llu, %zu) = %u, expected %u\n", (unsigned long long)cases[i].key,
                   cases[i].buckets, got, cases[i].bucket);
        CHECK(got == cases[i].bucket);
        CHECK(chash_jump_by(CHASH_JUMP_GUAVA, cases[i].key, cases[i].buckets) == got);
    }
    CHECK(chash_jump(UINT64_C(12970273959431459788), 459790) == 327679);
    CHECK(chash_jump(UINT64_C(17068571456203592619), 10) == 3);
    CHECK(chash_jump_guava(5, 0) == 0);
    CHECK(chash_jump_guava(5, (size_t)CHASH_JUMP_MAX_BUCKETS + 1) == 0);
    CHECK(chash_jump_by((chash_jump_rule)7, 5, 10) == 0);
    /* JumpBackHash behind the same rule switch (its own answers are
     * hash4j's, checked by test_anchor against recorded vectors). */
    for (size_t n = 1; n <= 300; n++)
        CHECK(chash_jump_by(CHASH_JUMP_BACK, UINT64_C(0x9e3779b97f4a7c15) * n, n)
              == chash_jumpback(UINT64_C(0x9e3779b97f4a7c15) * n, (uint32_t)n));
    CHECK(chash_jump_by(CHASH_JUMP_BACK, 5, 0) == 0);
    CHECK(chash_jump_by(CHASH_JUMP_BACK, 5, (size_t)CHASH_JUMP_MAX_BUCKETS + 1) == 0);

    /* The same monotonicity as the paper's: growing moves a key to the new
     * bucket or not at all. */
    enum { KEYS = 2000, MAX_N = 200 };
    uint64_t *keys = random_keys(KEYS);
    int monotone = 1;
    for (size_t i = 0; i < KEYS; i++) {
        uint32_t prev = chash_jump_guava(keys[i], 1);
        monotone &= prev == 0;
        for (size_t n = 2; n <= MAX_N; n++) {
            uint32_t b = chash_jump_guava(keys[i], n);
            monotone &= b == prev || b == n - 1;
            prev = b;
        }
    }
    CHECK(monotone);
    free(keys);
}

/* Preference lists: distinct buckets in range, the first the rule's own,
 * each next one the rule's jump of the rehashed key over the buckets not
 * chosen yet (checked against a plain list of the free buckets). */
static void test_jump_preference(void)
{
    enum { KEYS = 500, N = 37 };
    uint64_t *keys = random_keys(KEYS);
    int ok = 1;
    for (int rule = 0; rule < 3; rule++) {
        for (size_t i = 0; i < KEYS; i++) {
            uint32_t out[N + 1], free_list[N];
            size_t found = 99;
            CHECK(chash_jump_preference((chash_jump_rule)rule, keys[i], N, N + 1, out, &found)
                  == CHASH_OK);
            ok &= found == N;
            for (size_t b = 0; b < N; b++)
                free_list[b] = (uint32_t)b;
            size_t nfree = N;
            for (size_t k = 0; k < found; k++) {
                uint64_t h = k ? chash_mix64(keys[i] + k) : keys[i];
                size_t j = chash_jump_by((chash_jump_rule)rule, h, nfree);
                ok &= out[k] == free_list[j];
                memmove(free_list + j, free_list + j + 1, (nfree - j - 1) * sizeof *free_list);
                nfree--;
            }
        }
    }
    CHECK(ok);
    free(keys);

    /* A failed bucket's keys spread over all the others: the second
     * choices of the keys of bucket 0 of 10 reach every other bucket. */
    enum { SPREAD = 20000, B = 10 };
    uint64_t *many = random_keys(SPREAD);
    size_t seconds[B] = {0};
    for (size_t i = 0; i < SPREAD; i++) {
        uint32_t out[2];
        size_t found;
        CHECK(chash_jump_preference(CHASH_JUMP_LAMPING, many[i], B, 2, out, &found) == CHASH_OK);
        if (out[0] == 0)
            seconds[out[1]]++;
    }
    CHECK(seconds[0] == 0);
    for (size_t b = 1; b < B; b++)
        CHECK(seconds[b] > 2000 / (B - 1) / 2);
    free(many);

    uint32_t out[4];
    size_t found = 5;
    CHECK(chash_jump_preference(CHASH_JUMP_LAMPING, 1, 0, 1, out, &found) == CHASH_EINVAL);
    CHECK(chash_jump_preference(CHASH_JUMP_GUAVA, 1, (size_t)CHASH_JUMP_MAX_BUCKETS + 1, 1, out,
                                &found) == CHASH_EINVAL);
    CHECK(chash_jump_preference((chash_jump_rule)3, 1, 4, 1, out, &found) == CHASH_EINVAL);
    CHECK(chash_jump_preference(CHASH_JUMP_GUAVA, 1, 4, 0, out, &found) == CHASH_OK && found == 0);
    CHECK(chash_jump_preference(CHASH_JUMP_GUAVA, 1, 1, 4, out, &found) == CHASH_OK && found == 1
          && out[0] == 0);
}

static void test_modulo(void)
{
    uint64_t keys[] = {0, 1, 2, 3, 10, UINT64_MAX};
    uint32_t out[6];
    CHECK(chash_modulo_assign(keys, 6, 3, out) == CHASH_OK);
    CHECK(out[0] == 0 && out[1] == 1 && out[2] == 2 && out[3] == 0 && out[4] == 1);
    CHECK(out[5] == (uint32_t)(UINT64_MAX % 3));
    CHECK(chash_modulo_assign(keys, 6, 0, out) == CHASH_EINVAL);
    CHECK(chash_modulo_assign(keys, 6, (size_t)UINT32_MAX + 1, out) == CHASH_EINVAL);
}

static void test_rendezvous(void)
{
    enum { KEYS = 50000, NODES = 12 };
    uint64_t *keys = random_keys(KEYS);
    uint64_t nodes[NODES + 1];
    for (size_t k = 0; k < NODES + 1; k++)
        nodes[k] = next_u64();
    uint32_t *before = new_out(KEYS), *after = new_out(KEYS);
    CHECK(chash_rendezvous_assign(keys, KEYS, nodes, NODES, before) == CHASH_OK);

    /* Adding node 12 moves keys only onto it, about 1/13 of them. */
    CHECK(chash_rendezvous_assign(keys, KEYS, nodes, NODES + 1, after) == CHASH_OK);
    int only_to_new = 1;
    for (size_t i = 0; i < KEYS; i++)
        only_to_new &= before[i] == after[i] || after[i] == NODES;
    CHECK(only_to_new);
    CHECK(fabs((double)count_moved(before, after, KEYS) / KEYS - 1.0 / 13) < 0.01);

    /* Removing node 5 (the others listed in order) moves exactly its keys. */
    uint64_t fewer[NODES - 1];
    uint32_t label[NODES - 1];
    for (size_t k = 0, j = 0; k < NODES; k++)
        if (k != 5) {
            fewer[j] = nodes[k];
            label[j++] = (uint32_t)k;
        }
    CHECK(chash_rendezvous_assign(keys, KEYS, fewer, NODES - 1, after) == CHASH_OK);
    int exact = 1;
    for (size_t i = 0; i < KEYS; i++)
        exact &= (before[i] == 5) == (label[after[i]] != before[i]);
    CHECK(exact);

    /* Listing order does not matter: reversed, the same node hash wins. */
    uint64_t reversed[NODES];
    for (size_t k = 0; k < NODES; k++)
        reversed[k] = nodes[NODES - 1 - k];
    CHECK(chash_rendezvous_assign(keys, KEYS, reversed, NODES, after) == CHASH_OK);
    int same = 1;
    for (size_t i = 0; i < KEYS; i++)
        same &= reversed[after[i]] == nodes[before[i]];
    CHECK(same);

    /* Equal node hashes: the smaller index wins every key. */
    uint64_t twins[2] = {42, 42};
    CHECK(chash_rendezvous_assign(keys, 100, twins, 2, after) == CHASH_OK);
    int first = 1;
    for (size_t i = 0; i < 100; i++)
        first &= after[i] == 0;
    CHECK(first);

    CHECK(chash_rendezvous_assign(keys, KEYS, nodes, 0, after) == CHASH_EINVAL);
    free(before);
    free(after);
    free(keys);
}

static void test_is_prime(void)
{
    CHECK(!chash_is_prime(0) && !chash_is_prime(1) && chash_is_prime(2) && chash_is_prime(3));
    CHECK(!chash_is_prime(4) && !chash_is_prime(9) && !chash_is_prime(65536));
    CHECK(chash_is_prime(65537) && chash_is_prime(251) && chash_is_prime(2147483647));
    CHECK(!chash_is_prime((size_t)65537 * 65537));
}

static void test_maglev(void)
{
    enum { NODES = 20 };
    const size_t m = CHASH_MAGLEV_DEFAULT_TABLE;
    uint64_t nodes[NODES];
    for (size_t k = 0; k < NODES; k++)
        nodes[k] = next_u64();
    uint32_t *table = new_out(m), *smaller = new_out(m);
    CHECK(chash_maglev_build(nodes, NODES, table, m) == CHASH_OK);
    size_t counts[NODES] = {0};
    int in_range = 1;
    for (size_t e = 0; e < m; e++) {
        in_range &= table[e] < NODES;
        if (table[e] < NODES)
            counts[table[e]]++;
    }
    CHECK(in_range);
    /* Round-robin filling: every node holds floor(M/n) or ceil(M/n) entries. */
    for (size_t k = 0; k < NODES; k++)
        CHECK(counts[k] == m / NODES || counts[k] == m / NODES + 1);

    /* Node 7 fails: its entries change hands, and only a few others do. */
    uint64_t fewer[NODES - 1];
    uint32_t label[NODES - 1];
    for (size_t k = 0, j = 0; k < NODES; k++)
        if (k != 7) {
            fewer[j] = nodes[k];
            label[j++] = (uint32_t)k;
        }
    CHECK(chash_maglev_build(fewer, NODES - 1, smaller, m) == CHASH_OK);
    size_t lost = 0, disturbed = 0;
    for (size_t e = 0; e < m; e++) {
        if (table[e] == 7)
            lost++;
        else if (label[smaller[e]] != table[e])
            disturbed++;
    }
    CHECK(lost == counts[7]);
    CHECK((double)disturbed / (double)m < 0.01); /* about 0.3% */

    /* The smallest tables, and the lookup. */
    uint32_t tiny[3];
    CHECK(chash_maglev_build(nodes, 1, tiny, 2) == CHASH_OK && tiny[0] == 0 && tiny[1] == 0);
    CHECK(chash_maglev_build(nodes, 3, tiny, 3) == CHASH_OK);
    CHECK(tiny[0] != tiny[1] && tiny[1] != tiny[2] && tiny[0] != tiny[2]);
    uint64_t keys[4] = {0, 1, 2, 5};
    uint32_t out[4];
    CHECK(chash_table_assign(keys, 4, tiny, 3, out) == CHASH_OK);
    CHECK(out[0] == tiny[0] && out[1] == tiny[1] && out[2] == tiny[2] && out[3] == tiny[2]);
    CHECK(chash_table_assign(keys, 4, tiny, 0, out) == CHASH_EINVAL);

    /* Bad arguments: no nodes, a table that is not prime, too small, too big. */
    CHECK(chash_maglev_build(nodes, 0, table, m) == CHASH_EINVAL);
    CHECK(chash_maglev_build(nodes, NODES, table, 65536) == CHASH_EINVAL);
    CHECK(chash_maglev_build(nodes, NODES, table, 1) == CHASH_EINVAL);
    CHECK(chash_maglev_build(nodes, NODES, table, 19) == CHASH_EINVAL);
    CHECK(chash_maglev_build(nodes, 3, tiny, 2) == CHASH_EINVAL);
    CHECK(chash_maglev_build(nodes, NODES, table, 1073741827) == CHASH_EINVAL);

    fail_countdown = 0;
    CHECK(chash_maglev_build(nodes, NODES, table, m) == CHASH_ENOMEM);
    fail_countdown = -1;
    free(table);
    free(smaller);
}

/* A ring of nnodes nodes ("b0", "b1", ...) of per_node random points each. */
static chash_ring *random_ring(size_t nnodes, size_t per_node)
{
    chash_ring *ring = chash_ring_new();
    uint32_t *points = malloc(per_node * sizeof *points);
    CHECK(ring != NULL && points != NULL);
    for (size_t k = 0; k < nnodes; k++) {
        char id[16];
        int len = snprintf(id, sizeof id, "b%zu", k);
        for (size_t i = 0; i < per_node; i++)
            points[i] = (uint32_t)(next_u64() >> 32);
        CHECK(chash_ring_add(ring, id, (size_t)len, NULL, points, per_node) == CHASH_OK);
    }
    free(points);
    return ring;
}

/* The owner of a key's ring position by the ring's own successor rule. */
static uint32_t ring_owner(const chash_ring *ring, uint64_t key)
{
    return (uint32_t)chash_ring_point_owner(ring, chash_ring_successor(ring, (uint32_t)key));
}

static void test_bounded(void)
{
    enum { KEYS = 60000, NODES = 7, PER_NODE = 40 };
    chash_ring *ring = random_ring(NODES, PER_NODE);
    uint64_t *keys = random_keys(KEYS);
    uint32_t *out = new_out(KEYS), *plain = new_out(KEYS);

    /* With a huge balance every key stays on its successor (the plain ring). */
    CHECK(chash_bounded_assign(ring, 1e300, keys, KEYS, out) == CHASH_OK);
    int plain_ring = 1;
    for (size_t i = 0; i < KEYS; i++)
        plain_ring &= out[i] == ring_owner(ring, keys[i]);
    CHECK(plain_ring);
    memcpy(plain, out, KEYS * sizeof *out);

    /* The guarantee: no node above ceil(c * keys / n), at every prefix too. */
    const double factors[] = {1.0, 1.05, 1.25, 2.0};
    size_t diverted[4];
    for (size_t f = 0; f < sizeof factors / sizeof factors[0]; f++) {
        CHECK(chash_bounded_assign(ring, factors[f], keys, KEYS, out) == CHASH_OK);
        size_t load[NODES] = {0};
        int bounded = 1;
        for (size_t m = 0; m < KEYS; m++) {
            load[out[m]]++;
            bounded &= (double)load[out[m]] <= ceil(factors[f] * (double)(m + 1) / NODES);
        }
        CHECK(bounded);
        diverted[f] = count_moved(out, plain, KEYS);
    }
    /* A tighter bound diverts more keys from their successor. */
    CHECK(diverted[0] > diverted[2] && diverted[2] > diverted[3]);

    /* Ties on the ring: equal points are ordered by id, the first one is
     * the successor.  Node 0 ("z") owns 100 and 200, node 1 ("a") 100. */
    chash_ring *ties = chash_ring_new();
    uint32_t z_points[2] = {100, 200}, a_points[1] = {100};
    CHECK(chash_ring_add(ties, "z", 1, NULL, z_points, 2) == CHASH_OK);
    CHECK(chash_ring_add(ties, "a", 1, NULL, a_points, 1) == CHASH_OK);
    uint64_t tie_key = 50;
    uint32_t tie_out;
    CHECK(chash_bounded_assign(ties, 1e9, &tie_key, 1, &tie_out) == CHASH_OK);
    CHECK(tie_out == 1);
    /* Wrapping: a key past the last point goes to the first. */
    tie_key = 201;
    CHECK(chash_bounded_assign(ties, 1e9, &tie_key, 1, &tie_out) == CHASH_OK);
    CHECK(tie_out == 1);
    /* Only the low 32 bits of a key hash are its ring position. */
    tie_key = ((uint64_t)1 << 40) | 150;
    CHECK(chash_bounded_assign(ties, 1e9, &tie_key, 1, &tie_out) == CHASH_OK);
    CHECK(tie_out == 0);

    /* Bad arguments: an empty ring, a balance below 1 or not finite. */
    chash_ring *empty = chash_ring_new();
    CHECK(chash_bounded_assign(empty, 1.25, keys, KEYS, out) == CHASH_EINVAL);
    CHECK(chash_bounded_assign(ring, 0.99, keys, KEYS, out) == CHASH_EINVAL);
    CHECK(chash_bounded_assign(ring, NAN, keys, KEYS, out) == CHASH_EINVAL);
    CHECK(chash_bounded_assign(ring, INFINITY, keys, KEYS, out) == CHASH_EINVAL);

    fail_countdown = 0;
    CHECK(chash_bounded_assign(ring, 1.25, keys, KEYS, out) == CHASH_ENOMEM);
    fail_countdown = -1;
    chash_ring_free(empty);
    chash_ring_free(ties);
    chash_ring_free(ring);
    free(keys);
    free(out);
    free(plain);
}

static void test_loads(void)
{
    /* Envoy's slots: T = ceil(c * (t + 1)), a node max(ceil(T * w / W), 1). */
    CHECK(chash_bounded_slots(1.25, 0, 1.0, 4.0) == 1);    /* T = 2: ceil(1/2) */
    CHECK(chash_bounded_slots(1.25, 7, 1.0, 4.0) == 3);    /* T = 10: ceil(10/4) */
    CHECK(chash_bounded_slots(1.0, 7, 3.0, 4.0) == 6);     /* T = 8 */
    CHECK(chash_bounded_slots(1.0, 0, 1.0, 1000.0) == 1);  /* at least one */
    CHECK(chash_bounded_slots(1.0, 9, 5.0, 5.0) == 10);    /* the whole weight */
    CHECK(chash_bounded_slots(1.0, 9, 0.0, 5.0) == 0);     /* gone: never admitted */
    CHECK(chash_bounded_slots(1e300, 9, 1.0, 2.0) == UINT64_MAX);
    /* The same rule over a real load sum (get_bounded's), unsaturated. */
    CHECK(chash_bounded_slots_real(1.25, 7.0, 1.0, 4.0) == 3.0);
    CHECK(chash_bounded_slots_real(1.25, 0.5, 1.0, 4.0) == 1.0);   /* T = ceil(1.875) = 2 */
    CHECK(chash_bounded_slots_real(1.0, 2.5, 3.0, 4.0) == 3.0);    /* T = 4: ceil(3) */
    CHECK(chash_bounded_slots_real(1.5, 2.5, 1.0, 1.0) == 6.0);    /* T = ceil(5.25) */
    CHECK(chash_bounded_slots_real(1.0, 0.0, 1.0, 1000.0) == 1.0); /* at least one */
    CHECK(chash_bounded_slots_real(1.0, 3.0, 0.0, 5.0) == 0.0);    /* no weight: never admitted */
    CHECK(chash_bounded_slots_real(1.0, 3.0, 1.0, 0.0) == 0.0);
    CHECK(chash_bounded_slots_real(1e300, 9.0, 1.0, 2.0) == 5e300);
    int same = 1;
    for (uint64_t t = 0; t < 300; t++)
        for (double w = 0; w <= 6; w++)
            same &= (double)chash_bounded_slots(1.3, t, w, 6.0)
                    == chash_bounded_slots_real(1.3, (double)t, w, 6.0);
    CHECK(same);
    /* Real loads and factors: the rule as written with the maths library's
     * ceil, for fractions, whole numbers, and values about 2**52 (where
     * every double becomes whole), to 1e300. */
    static const double real_loads[] = {0.0, 1e-9, 0.25, 0.5, 1.0, 2.999999, 3.0, 1e6 + 0.5,
                                        4503599627370495.5, 4503599627370496.0,
                                        9007199254740993.0, 1e300};
    static const double balances[] = {1.0, 1.0000001, 1.25, 1.3, 2.0, 7.77};
    int real = 1;
    for (size_t i = 0; i < sizeof real_loads / sizeof real_loads[0]; i++)
        for (size_t j = 0; j < sizeof balances / sizeof balances[0]; j++)
            for (double w = 1; w <= 7; w++) {
                double t = ceil(balances[j] * (real_loads[i] + 1.0));
                double want = w >= 7.0 ? t : ceil(t * w / 7.0);
                real &= chash_bounded_slots_real(balances[j], real_loads[i], w, 7.0) == (want < 1.0 ? 1.0 : want);
            }
    CHECK(real);
    /* Equal weights give the paper's ceil(c * (t + 1) / n), exactly. */
    int paper = 1;
    for (uint64_t t = 0; t < 500; t++)
        for (double n = 1; n <= 13; n++)
            paper &= (double)chash_bounded_slots(1.1, t, 1.0, n) == ceil(ceil(1.1 * (double)(t + 1)) / n)
                     && (double)chash_bounded_slots(1.1, t, 1.0, n) == ceil(1.1 * (double)(t + 1) / n);
    CHECK(paper);

    /* A table of weights 3, 1, 0 (a node gone but holding one), 2. */
    const double weights[4] = {3.0, 1.0, 0.0, 2.0};
    const uint64_t held[4] = {0, 0, 1, 0};
    chash_loads *t = NULL;
    CHECK(chash_loads_create(&t, 1.0, 4, weights, held) == CHASH_OK);
    CHECK(chash_loads_size(t) == 4 && chash_loads_in_flight(t) == 1 && chash_loads_balance(t) == 1.0);
    CHECK(chash_loads_bound(t, 0) == 1 && chash_loads_bound(t, 2) == 0 && chash_loads_bound(t, 9) == 0);
    CHECK(!chash_loads_admits(t, 2) && !chash_loads_admits(t, 9));
    /* Everything on slot 0 while it admits, then the walk moves on. */
    uint32_t order[5] = {0, 2, 1, 3, 7};
    size_t placed[4] = {0};
    for (int i = 0; i < 11; i++) {
        size_t pick = chash_loads_pick(t, order, 5);
        CHECK(pick < 5);
        CHECK(chash_loads_take(t, order[pick]) == CHASH_OK);
        placed[order[pick]]++;
    }
    /* t = 12, T = 12: slots 6, 2, 0, 4; the 11 new ones fill 0 and 1 first. */
    CHECK(placed[0] == 6 && placed[1] == 2 && placed[2] == 0 && placed[3] == 3);
    CHECK(chash_loads_in_flight(t) == 12 && chash_loads_check(t) == CHASH_OK);
    /* Out of range and empty slots: refused, nothing changed. */
    CHECK(chash_loads_take(t, 4) == CHASH_EINVAL);
    CHECK(chash_loads_put(t, 4) == CHASH_EINVAL);
    CHECK(chash_loads_put(t, 2) == CHASH_OK && chash_loads_put(t, 2) == CHASH_ENOENT);
    CHECK(chash_loads_in_flight(t) == 11 && chash_loads_load(t, 2) == 0);
    CHECK(chash_loads_pick(t, order, 0) == 0);
    CHECK(chash_loads_check(t) == CHASH_OK);
    /* Admit-and-take: t = 11, T = 12, slot 1 holds its 2 of 2 and slot 3
     * 3 of 4; slot 2 (weight 0) never admits, 9 is out of range. */
    CHECK(chash_loads_try_take(t, 1) == 0 && chash_loads_load(t, 1) == 2);
    CHECK(chash_loads_try_take(t, 2) == 0 && chash_loads_load(t, 2) == 0);
    CHECK(chash_loads_try_take(t, 9) == CHASH_EINVAL && chash_loads_in_flight(t) == 11);
    CHECK(chash_loads_try_take(t, 3) == 1 && chash_loads_load(t, 3) == 4);
    CHECK(chash_loads_in_flight(t) == 12 && chash_loads_check(t) == CHASH_OK);
    chash_loads_free(t);
    chash_loads_free(NULL);

    /* The empty table; bad arguments; allocation failures. */
    CHECK(chash_loads_create(&t, 1.25, 0, NULL, NULL) == CHASH_OK);
    CHECK(chash_loads_pick(t, order, 5) == 5 && chash_loads_take(t, 0) == CHASH_EINVAL);
    chash_loads_free(t);
    chash_loads *untouched = NULL;
    const double bad[2] = {1.0, -1.0}, nan[1] = {NAN};
    CHECK(chash_loads_create(&untouched, 0.9, 1, weights, NULL) == CHASH_EINVAL);
    CHECK(chash_loads_create(&untouched, INFINITY, 1, weights, NULL) == CHASH_EINVAL);
    CHECK(chash_loads_create(&untouched, 1.0, 2, bad, NULL) == CHASH_EINVAL);
    CHECK(chash_loads_create(&untouched, 1.0, 1, nan, NULL) == CHASH_EINVAL);
    CHECK(chash_loads_create(&untouched, 1.0, 1, NULL, NULL) == CHASH_EINVAL);
    /* Two allocations: the table, and its slots (each load beside its weight). */
    for (long fail = 0; fail < 2; fail++) {
        fail_countdown = fail;
        CHECK(chash_loads_create(&untouched, 1.0, 4, weights, held) == CHASH_ENOMEM);
    }
    fail_countdown = -1;
    CHECK(untouched == NULL);
}

int main(void)
{
    test_mix64();
    test_jump_known_answers();
    test_jump_properties();
    test_jump_guava();
    test_jump_preference();
    test_modulo();
    test_rendezvous();
    test_is_prime();
    test_maglev();
    test_bounded();
    test_loads();
    return check_report();
}
