/*
 * test_haproxy.c - HAProxy's consistent hashing in the engine: its key
 * hashes (sdbm, djb2, wt6, crc32, full_hash) against known answers, the
 * points of a puid, and the nearest-point lookup rule, wrap-around, ties,
 * exact hits, equal points, the batch form, preference walks and ownership.
 *
 * The known answers were read off HAProxy 2.6.12 itself: its sdbm, djb2,
 * wt6 and crc32 converters (an argument of 1 applies full_hash, the
 * avalanche), e.g. %[req.hdr(x),sdbm(1)] for the header value.
 */
#include "engine/chash.h"
#include "engine/scheme.h"
#include "hash/hash.h"

#include "check.h"

#include <string.h>

struct kat {
    const char *data;
    uint32_t sdbm, djb2, wt6, crc32, sdbm_aval, djb2_aval, wt6_aval, crc32_aval;
};

static const struct kat kats[] = {
    {"a", 97u, 177670u, 1900802597u, 3904355907u, 1830748055u, 3548763807u, 1986649387u, 1288200982u},
    {"hello", 684824882u, 261238937u, 3538347703u, 907060870u, 2061535398u, 1119739105u, 140457739u,
     3902247103u},
    {"user:1234", 2123867377u, 3177850952u, 72958908u, 2964345943u, 1020526326u, 3785119323u,
     3846189142u, 1371245882u},
};

static void test_hash_kats(void)
{
    for (size_t i = 0; i < sizeof kats / sizeof kats[0]; i++) {
        const struct kat *k = &kats[i];
        size_t n = strlen(k->data);
        CHECK(chash_sdbm(k->data, n) == k->sdbm);
        CHECK(chash_djb2(k->data, n) == k->djb2);
        CHECK(chash_wt6(k->data, n) == k->wt6);
        CHECK(chash_crc32(k->data, n) == k->crc32);
        CHECK(chash_full_hash(k->sdbm) == k->sdbm_aval);
        CHECK(chash_full_hash(k->djb2) == k->djb2_aval);
        CHECK(chash_full_hash(k->wt6) == k->wt6_aval);
        CHECK(chash_full_hash(k->crc32) == k->crc32_aval);
        /* The scheme's key hashes are the same values. */
        chash_scheme s;
        CHECK(chash_scheme_init(&s, CHASH_LAYOUT_HAPROXY, CHASH_HASH_SDBM_AVALANCHE) == CHASH_OK);
        CHECK(chash_scheme_key_hash(&s, k->data, n) == k->sdbm_aval);
        CHECK(chash_scheme_init(&s, CHASH_LAYOUT_HAPROXY, CHASH_HASH_WT6) == CHASH_OK);
        CHECK(chash_scheme_key_hash(&s, k->data, n) == k->wt6);
    }
    /* The empty string: the starting values (wt6: h0 ^ h1 unchanged). */
    CHECK(chash_sdbm(NULL, 0) == 0 && chash_djb2(NULL, 0) == 5381u);
    CHECK(chash_wt6(NULL, 0) == (0xa53c965au ^ 0x5ca6953au));
    CHECK(chash_full_hash(0) == 2874071335u); /* = sdbm_avalanche of "" */
    /* Bytes are unsigned: 0xff adds 255. */
    CHECK(chash_sdbm("\xff", 1) == 255u && chash_djb2("\xff", 1) == 5381u * 33u + 255u);
}

static void test_layout(void)
{
    chash_scheme s;
    CHECK(chash_layout_default_hash(CHASH_LAYOUT_HAPROXY) == CHASH_HASH_SDBM_AVALANCHE);
    CHECK(chash_layout_default_points(CHASH_LAYOUT_HAPROXY) == 16);
    CHECK(chash_layout_ties(CHASH_LAYOUT_HAPROXY));
    CHECK(chash_layout_rule(CHASH_LAYOUT_HAPROXY) == CHASH_RULE_NEAREST);
    CHECK(chash_layout_rule(CHASH_LAYOUT_PYTHON) == CHASH_RULE_SUCCESSOR);
    CHECK(chash_scheme_init(&s, CHASH_LAYOUT_HAPROXY, CHASH_HASH_MD5) == CHASH_EINVAL);
    CHECK(chash_scheme_init(&s, CHASH_LAYOUT_HAPROXY, CHASH_HASH_CRC32) == CHASH_OK);
    CHECK(chash_scheme_init(&s, CHASH_LAYOUT_HAPROXY, CHASH_HASH_CRC32_AVALANCHE) == CHASH_OK);
    chash_hash_id h;
    CHECK(chash_hash_by_name("wt6_avalanche", &h) == CHASH_OK && h == CHASH_HASH_WT6_AVALANCHE);
    chash_layout_id l;
    CHECK(chash_layout_by_name("haproxy", &l) == CHASH_OK && l == CHASH_LAYOUT_HAPROXY);

    /* Points: full_hash(puid * 4096 + j), unsigned arithmetic. */
    uint32_t p[32];
    CHECK(chash_haproxy_points(1, 0, 16, p) == CHASH_OK);
    for (uint32_t j = 0; j < 16; j++)
        CHECK(p[j] == chash_full_hash(4096u + j));
    CHECK(chash_haproxy_points(3, 10, 2, p) == CHASH_OK && p[1] == chash_full_hash(3u * 4096u + 11u));
    CHECK(chash_haproxy_points(1048577u, 0, 1, p) == CHASH_OK && p[0] == chash_full_hash(4096u));
    CHECK(chash_haproxy_points(0, 0, 1, p) == CHASH_EINVAL);
    CHECK(chash_haproxy_points(1, 4095, 1, p) == CHASH_OK);
    CHECK(chash_haproxy_points(1, 4095, 2, p) == CHASH_EINVAL);
    CHECK(chash_scheme_points(&s, "a", 1, 0, 1, p) == CHASH_EINVAL);
}

/* A ring of nodes "a", "b", "c"... holding the given points, one node a
 * point, routing by rule. */
static chash_ring *ring_of(const uint32_t *values, size_t n, chash_rule rule)
{
    chash_ring *ring = chash_ring_new();
    CHECK(ring != NULL);
    CHECK(chash_ring_set_ties(ring, CHASH_TIES_BY_ORDER) == CHASH_OK);
    CHECK(chash_ring_set_rule(ring, rule) == CHASH_OK);
    for (size_t i = 0; i < n; i++) {
        char id[2] = {(char)('a' + i), 0};
        CHECK(chash_ring_add(ring, id, 1, NULL, &values[i], 1) == CHASH_OK);
    }
    return ring;
}

static size_t owner_of(const chash_ring *ring, uint32_t hash)
{
    return chash_ring_point_owner(ring, chash_ring_route(ring, hash));
}

static void test_nearest(void)
{
    const uint32_t v[3] = {100, 200, 0xFFFFFF00u};
    chash_ring *ring = ring_of(v, 3, CHASH_RULE_NEAREST);
    CHECK(chash_ring_rule(ring) == CHASH_RULE_NEAREST);
    uint32_t one = 5;
    CHECK(chash_ring_set_rule(ring, CHASH_RULE_SUCCESSOR) == CHASH_EINVAL); /* not empty */
    CHECK(chash_ring_add(ring, "z", 1, NULL, &one, 0) == CHASH_EINVAL);
    CHECK(owner_of(ring, 100) == 0);     /* exact hit */
    CHECK(owner_of(ring, 149) == 0);     /* nearer the one before */
    CHECK(owner_of(ring, 150) == 0);     /* tie: the one before */
    CHECK(owner_of(ring, 151) == 1);     /* nearer the one after */
    CHECK(owner_of(ring, 200) == 1);
    CHECK(owner_of(ring, 201) == 1);     /* successor wraps to 100, but 200 is nearer */
    /* Between 0xFFFFFF00 and 100 (wrapping): the gap is 356, middle 178. */
    CHECK(owner_of(ring, 0xFFFFFF00u + 177u) == 2);
    CHECK(owner_of(ring, 0xFFFFFF00u + 178u) == 2); /* 178 either way: a tie */
    CHECK(owner_of(ring, 0xFFFFFF00u + 179u) == 0);
    CHECK(owner_of(ring, 0) == 0);       /* 0 is 100 from 100, 256 from the last */
    CHECK(owner_of(ring, 0xFFFFFFB0u) == 2);
    CHECK(owner_of(ring, 0xFFFFFFFFu) == 0); /* 101 from 100 across the end, 255 from the last */
    CHECK(chash_ring_nearest(ring, 150) == 0 && chash_ring_successor(ring, 150) == 1);
    /* The batch form agrees one by one. */
    uint32_t hashes[6] = {0, 149, 150, 151, 0xFFFFFF00u + 178u, 0xFFFFFF00u + 179u}, owners[6];
    chash_ring_owners(ring, hashes, 6, owners);
    for (size_t i = 0; i < 6; i++)
        CHECK(owners[i] == owner_of(ring, hashes[i]));
    /* lookup gives the routed owner's data, preference walks on from it. */
    size_t out[3], found = 0;
    CHECK(chash_ring_preference(ring, 150, 3, out, &found) == CHASH_OK && found == 3);
    CHECK(out[0] == 0 && out[1] == 1 && out[2] == 2);
    CHECK(chash_ring_preference(ring, 0xFFFFFF10u, 2, out, &found) == CHASH_OK && found == 2);
    CHECK(out[0] == 2 && out[1] == 0);
    /* Ownership: gaps 100 (100..200), 0xFFFFFE00 - 200 ... split at their middles. */
    double share[3];
    chash_ring_ownership(ring, share);
    double g1 = 100, g2 = (double)(0xFFFFFF00u - 200u), g3 = 356;
    CHECK(share[0] * 4294967296.0 == g1 / 2 + (g3 - 178)); /* 101..150 and 0xFFFFFF00+179..100 */
    CHECK(share[1] * 4294967296.0 == g1 / 2 + (double)((0xFFFFFF00u - 200u) / 2));
    CHECK(share[2] * 4294967296.0 == (g2 - (double)((0xFFFFFF00u - 200u) / 2)) + 178);
    CHECK(chash_ring_check(ring) == CHASH_OK);
    chash_ring_free(ring);

    /* The successor rule is untouched by default. */
    ring = ring_of(v, 3, CHASH_RULE_SUCCESSOR);
    CHECK(owner_of(ring, 101) == 1 && owner_of(ring, 0xFFFFFFFFu) == 0);
    chash_ring_free(ring);
}

static void test_nearest_edges(void)
{
    /* One point: every hash goes to it; its share is everything. */
    uint32_t only = 7;
    chash_ring *ring = ring_of(&only, 1, CHASH_RULE_NEAREST);
    CHECK(owner_of(ring, 0) == 0 && owner_of(ring, 7) == 0 && owner_of(ring, 0x80000007u) == 0);
    double share[3];
    chash_ring_ownership(ring, share);
    CHECK(share[0] == 1.0);
    chash_ring_free(ring);

    /* Two points of one value (ties by order: "a" first, "b" last).  An exact
     * hit is a tie at distance 0 between the run's first (ahead) and its last
     * (behind): the last; so is the far side's exact middle. */
    uint32_t same[2] = {1000, 1000};
    ring = ring_of(same, 2, CHASH_RULE_NEAREST);
    CHECK(owner_of(ring, 1000) == 1);
    CHECK(owner_of(ring, 1001) == 1);                 /* behind is b, at 1 */
    CHECK(owner_of(ring, 999) == 0);                  /* ahead is a, at 1 */
    CHECK(owner_of(ring, 1000u + 0x80000000u) == 1);  /* 2**31 either way: behind */
    CHECK(owner_of(ring, 1001u + 0x80000000u) == 0);
    chash_ring_ownership(ring, share);
    CHECK(share[1] * 4294967296.0 == 2147483649.0 && share[0] * 4294967296.0 == 2147483647.0);
    chash_ring_free(ring);

    /* Equal points among others: ahead is the run's first, behind its last. */
    uint32_t mixed[4] = {500, 500, 100, 900};
    ring = ring_of(mixed, 4, CHASH_RULE_NEAREST);
    CHECK(owner_of(ring, 500) == 0);  /* exact hit: the first of the run, "a" */
    CHECK(owner_of(ring, 499) == 0);
    CHECK(owner_of(ring, 501) == 1);  /* behind: the last of the run, "b" */
    CHECK(owner_of(ring, 700) == 1);  /* a tie between 500 and 900: behind */
    CHECK(owner_of(ring, 701) == 3);
    CHECK(owner_of(ring, 300) == 2);  /* a tie between 100 and 500: behind */
    double sum = 0;
    double all[4];
    chash_ring_ownership(ring, all);
    for (int i = 0; i < 4; i++)
        sum += all[i];
    CHECK(sum > 1.0 - 1e-12 && sum < 1.0 + 1e-12);
    CHECK(all[0] * 4294967296.0 == 200.0 && all[1] * 4294967296.0 == 200.0);
    CHECK(chash_ring_check(ring) == CHASH_OK);
    chash_ring_free(ring);

    /* An empty ring: no lookup; an unknown rule is refused. */
    ring = chash_ring_new();
    void *data = &data;
    CHECK(chash_ring_set_rule(ring, CHASH_RULE_NEAREST) == CHASH_OK);
    CHECK(chash_ring_lookup(ring, 1, &data) == CHASH_ENOENT && data == &data);
    CHECK(chash_ring_set_rule(ring, (chash_rule)7) == CHASH_EINVAL);
    CHECK(chash_ring_rule(ring) == CHASH_RULE_NEAREST);
    chash_ring_free(ring);
}

int main(void)
{
    test_hash_kats();
    test_layout();
    test_nearest();
    test_nearest_edges();
    return check_report();
}
