/*
 * test_ring128.c - the sorted points of uhashring's continuums
 * (engine/ring128.h) against plain models: the sort against qsort, the
 * successor rule (strictly greater, wrapping) against a scan, bucket
 * bounds included; a node's points against MD5 values Python's hashlib
 * gives (int(md5("node1-0").hexdigest(), 16) and its little-endian
 * words); merge, drop and settle against a dict-like model written here;
 * the check refusing each broken invariant; failed allocations changing
 * nothing.  ring128.c is included here so that allocations can fail on
 * demand.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "failing_alloc.h"
#include "engine/ring128.c"

typedef chash_r128_point pt;

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t rnd(void)
{
    /* SplitMix64. */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static int by_value_seq(const void *a, const void *b)
{
    const pt *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* n random points; with few distinct top bits and repeated values when
 * crowded, ketama's 32-bit values when ketama. */
static void random_points(pt *p, size_t n, int ketama, int crowded)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v = rnd();
        if (crowded)
            v &= ketama ? 0xff00000fu : 0xff0000000000000fu;
        p[i].hi = ketama ? v & 0xffffffffu : v;
        p[i].lo = ketama ? 0 : (crowded ? rnd() & 3 : rnd());
        p[i].seq = i;
        p[i].owner = (uint32_t)(rnd() % 7);
        p[i].spare = 0;
    }
}

static void test_sort(void)
{
    static pt a[3000], b[3000], scratch[3000];
    for (int round = 0; round < 40; round++) {
        int ketama = round & 1, crowded = (round >> 1) & 1;
        size_t n = (size_t)(rnd() % 3000);
        random_points(a, n, ketama, crowded);
        memcpy(b, a, n * sizeof *a);
        CHECK(chash_r128_sort(a, n, ketama ? 0 : 32, round % 3 ? NULL : scratch) == CHASH_OK);
        qsort(b, n, sizeof *b, by_value_seq);
        CHECK(n == 0 || memcmp(a, b, n * sizeof *a) == 0);
    }
    /* Out of memory without scratch: the points as they were. */
    random_points(a, 100, 0, 0);
    memcpy(b, a, 100 * sizeof *a);
    fail_countdown = 0;
    CHECK(chash_r128_sort(a, 100, 32, NULL) == CHASH_ENOMEM);
    fail_countdown = -1;
    CHECK(memcmp(a, b, 100 * sizeof *a) == 0);
}

static size_t scan_successor(const pt *p, size_t n, uint64_t hi, uint64_t lo)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].hi > hi || (p[i].hi == hi && p[i].lo > lo))
            return i;
    return 0;
}

static void test_successor_and_index(void)
{
    static pt p[2000];
    static uint32_t index[(1 << 12) + 1];
    for (int round = 0; round < 30; round++) {
        int ketama = round & 1, crowded = (round >> 1) & 1;
        size_t n = 1 + (size_t)(rnd() % 2000);
        random_points(p, n, ketama, crowded);
        CHECK(chash_r128_sort(p, n, ketama ? 0 : 32, NULL) == CHASH_OK);
        n = chash_r128_settle(p, n, ketama);
        int bits = chash_r128_index_bits(n);
        CHECK(bits >= 1 && bits <= 12 && ((size_t)1 << bits) >= n / 2);
        chash_r128_index(p, n, ketama, bits, index);
        CHECK(chash_r128_check(p, n, 7, ketama, index, bits) == CHASH_OK);
        for (int k = 0; k < 400; k++) {
            uint64_t hi, lo;
            if (k % 3 == 0) { /* exactly a point: its successor is past it */
                size_t at = (size_t)(rnd() % n);
                hi = p[at].hi;
                lo = p[at].lo;
            } else {
                hi = ketama ? rnd() & 0xffffffffu : rnd();
                lo = ketama ? 0 : rnd();
                if (crowded && !ketama)
                    lo &= 3;
            }
            size_t want = scan_successor(p, n, hi, lo);
            size_t b = chash_r128_bucket(hi, ketama, bits);
            CHECK(chash_r128_successor(p, n, 0, n, hi, lo) == want);
            CHECK(chash_r128_successor(p, n, index[b], index[b + 1], hi, lo) == want);
        }
    }
    /* The top: a key above every point wraps to the first. */
    pt two[2] = {{5, 0, 0, 0, 0}, {9, 0, 1, 1, 0}};
    CHECK(chash_r128_successor(two, 2, 0, 2, 9, 0) == 0);
    CHECK(chash_r128_successor(two, 2, 0, 2, 5, 0) == 1);
    CHECK(chash_r128_successor(two, 2, 0, 2, 4, UINT64_MAX) == 0);
}

static void test_node_points(void)
{
    pt out[8];
    uint64_t seq = 10;
    CHECK(chash_r128_node_points("node1-", 6, 2, 0, 1, 3, &seq, out) == CHASH_OK);
    CHECK(seq == 12);
    CHECK(out[0].hi == 0x3d168e48a30b4409u && out[0].lo == 0x62caba23bd3c2928u);
    CHECK(out[1].hi == 0x0faeefdba8e0016fu && out[1].lo == 0xfe408ce8fc522e94u);
    CHECK(out[0].seq == 10 && out[1].seq == 11 && out[0].owner == 3 && out[1].owner == 3);
    CHECK(chash_r128_node_points("node1-", 6, 1, 1, 4, 2, &seq, out) == CHASH_OK);
    CHECK(out[0].hi == 1217271357u && out[1].hi == 155454371u && out[2].hi == 599444066u
          && out[3].hi == 673791165u && out[3].lo == 0 && seq == 16);
    /* Names past one MD5 block take the one-lane path: same digits. */
    char longname[80];
    memset(longname, 'x', sizeof longname);
    longname[60] = '-';
    pt lanes[5];
    CHECK(chash_r128_node_points(longname, 61, 5, 0, 1, 0, &seq, lanes) == CHASH_OK);
    char text[80];
    memcpy(text, longname, 61);
    text[61] = '4';
    uint8_t dig[16];
    chash_md5(text, 62, dig);
    uint64_t hi, lo;
    chash_r128_key(dig, 0, &hi, &lo);
    CHECK(lanes[4].hi == hi && lanes[4].lo == lo);
    /* Sixteen at a time: the same points, for counts around each group's
     * edge, both kinds of point, and a name past one block. */
    for (size_t count = 0; count <= 40; count++) {
        for (int ketama = 0; ketama < 2; ketama++) {
            pt narrow[160], wide[160];
            uint64_t s1 = 5, s2 = 5;
            const char *name = count == 40 ? longname : "10.0.0.7:11211-";
            size_t len = count == 40 ? 61 : strlen(name);
            CHECK(chash_r128_node_points(name, len, count, ketama, 4, 7, &s1, narrow) == CHASH_OK);
            CHECK(chash_r128_node_points_wide(name, len, count, ketama, 4, 7, &s2, wide) == CHASH_OK);
            size_t n = count * (ketama ? 4 : 1);
            CHECK(s1 == s2 && memcmp(narrow, wide, n * sizeof *narrow) == 0);
        }
    }
    /* Out of memory: nothing counted. */
    uint64_t before = seq;
    fail_countdown = 0;
    CHECK(chash_r128_node_points("a-", 2, 3, 0, 1, 0, &seq, out) == CHASH_ENOMEM);
    fail_countdown = 0;
    CHECK(chash_r128_node_points_wide("a-", 2, 3, 0, 1, 0, &seq, out) == CHASH_ENOMEM);
    fail_countdown = -1;
    CHECK(seq == before);
}

/* The model of md5 mode: uhashring's dict, value -> (owner, seq). */
static size_t model_merge(const pt *pts, size_t n, const pt *add, size_t count, uint32_t owner, pt *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (pts[i].owner != owner)
            out[m++] = pts[i];
    for (size_t j = 0; j < count; j++) {
        size_t k;
        for (k = 0; k < m; k++)
            if (out[k].hi == add[j].hi && out[k].lo == add[j].lo)
                break;
        if (k < m)
            out[k].owner = owner;
        else
            out[m++] = add[j];
    }
    qsort(out, m, sizeof *out, by_value_seq);
    return m;
}

static void test_merge_drop_settle(void)
{
    static pt pts[600], add[200], got[800], want[800];
    for (int round = 0; round < 60; round++) {
        int crowded = round & 1;
        size_t n = (size_t)(rnd() % 600), count = (size_t)(rnd() % 200);
        random_points(pts, n, 0, crowded);
        CHECK(chash_r128_sort(pts, n, 32, NULL) == CHASH_OK);
        n = chash_r128_settle(pts, n, 0);
        random_points(add, count, 0, crowded);
        uint32_t owner = (uint32_t)(rnd() % 8);
        for (size_t j = 0; j < count; j++) {
            add[j].owner = owner;
            add[j].seq = 1000 + j;
        }
        CHECK(chash_r128_sort(add, count, 32, NULL) == CHASH_OK);
        size_t m = chash_r128_merge(pts, n, add, count, owner, got);
        size_t w = model_merge(pts, n, add, count, owner, want);
        CHECK(m == w && (m == 0 || memcmp(got, want, m * sizeof *got) == 0));
        CHECK(chash_r128_check(got, m, 8, 0, NULL, 0) == CHASH_OK);
        CHECK(chash_r128_unique(got, m) == m);
        /* Drop owner, renumbering slot 7 to it. */
        size_t left = chash_r128_drop(got, m, owner, 7);
        size_t expect = 0;
        for (size_t i = 0; i < m; i++)
            expect += want[i].owner != owner;
        CHECK(left == expect);
        for (size_t i = 0, k = 0; i < m; i++) {
            if (want[i].owner == owner)
                continue;
            uint32_t o = want[i].owner == 7 ? owner : want[i].owner;
            CHECK(got[k].hi == want[i].hi && got[k].lo == want[i].lo && got[k].owner == o);
            k++;
        }
    }
    /* settle: a repeated value is its last writer's, placed by its first. */
    pt run[4] = {{7, 1, 0, 2, 0}, {7, 1, 3, 5, 0}, {7, 1, 4, 1, 0}, {8, 0, 1, 0, 0}};
    pt copy[4];
    memcpy(copy, run, sizeof run);
    CHECK(chash_r128_settle(copy, 4, 0) == 2);
    CHECK(copy[0].seq == 0 && copy[0].owner == 1 && copy[1].hi == 8);
    memcpy(copy, run, sizeof run);
    CHECK(chash_r128_settle(copy, 4, 1) == 4);
    CHECK(copy[0].owner == 1 && copy[1].owner == 1 && copy[2].owner == 1 && copy[3].owner == 0);
    CHECK(chash_r128_unique(copy, 4) == 2);
}

static void test_check_refuses(void)
{
    pt p[3] = {{1, 0, 0, 0, 0}, {2, 0, 1, 1, 0}, {3, 0, 2, 0, 0}};
    int bits = chash_r128_index_bits(3);
    uint32_t full[5];
    chash_r128_index(p, 3, 1, bits, full);
    CHECK(chash_r128_check(p, 3, 2, 0, NULL, 0) == CHASH_OK);
    CHECK(chash_r128_check(p, 3, 2, 1, full, bits) == CHASH_OK);
    CHECK(chash_r128_check(p, 3, 1, 0, NULL, 0) == CHASH_ECORRUPT); /* an owner past the nodes */
    pt swapped[3] = {p[1], p[0], p[2]};
    CHECK(chash_r128_check(swapped, 3, 2, 0, NULL, 0) == CHASH_ECORRUPT);
    pt twice[2] = {{4, 4, 0, 0, 0}, {4, 4, 1, 0, 0}};
    CHECK(chash_r128_check(twice, 2, 1, 0, NULL, 0) == CHASH_ECORRUPT); /* md5: a value once */
    CHECK(chash_r128_check(twice, 2, 1, 1, NULL, 0) == CHASH_ECORRUPT); /* ketama: lo is 0 */
    pt wide[1] = {{(uint64_t)1 << 32, 0, 0, 0, 0}};
    CHECK(chash_r128_check(wide, 1, 1, 1, NULL, 0) == CHASH_ECORRUPT);
    full[bits > 1 ? 2 : 1] = 3; /* a bucket pointing past its points */
    full[(size_t)1 << bits] = 2;
    CHECK(chash_r128_check(p, 3, 2, 1, full, bits) == CHASH_ECORRUPT);
}

int main(void)
{
    test_sort();
    test_successor_and_index();
    test_node_points();
    test_merge_drop_settle();
    test_check_refuses();
    return check_report();
}
