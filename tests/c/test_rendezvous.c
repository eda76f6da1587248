/*
 * test_rendezvous.c - the rendezvous node sets (strategies/rendezvous.h):
 * every layout's winner against its rule recomputed here from the hashes
 * (hrw's weight / -ln(u), pymemcache's murmur3_32 of "node-key", Caddy's
 * FNV-1a-32 of key and dial, Squid's carried CARP hash), the winner being
 * the rank's first, hrw's moves on a removal and on a weight change, order
 * (in)dependence, the resumed murmur3 against the one-shot one, every
 * argument check and every allocation failure.
 *
 * rendezvous.c is included directly so its allocator can be swapped for
 * one that fails on demand; the hashes are linked.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failing_alloc.h"
#include "../../csrc/strategies/mix.c"
#include "../../csrc/strategies/rendezvous.c"

#include "check.h"

#define MAXN 24
#define KEYS 400

typedef struct {
    const char *ids[MAXN];
    size_t lens[MAXN];
    double weights[MAXN];
    char store[MAXN][32];
    size_t n;
} nodes;

/* Fills *s in place: its ids point into its own store. */
static void make_nodes(nodes *s, size_t n, const char *fmt, const double *weights)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    for (size_t k = 0; k < n; k++) {
        snprintf(s->store[k], sizeof s->store[k], fmt, (unsigned)k);
        s->ids[k] = s->store[k];
        s->lens[k] = strlen(s->store[k]);
        s->weights[k] = weights ? weights[k] : 1.0;
    }
}

static chash_rdv_set *build(chash_rdv_layout layout, const nodes *s)
{
    chash_rdv_set *set = NULL;
    int status = chash_rdv_build(layout, s->n, s->ids, s->lens, s->ids, s->lens, s->weights, &set);
    CHECK(status == CHASH_OK);
    CHECK(set && chash_rdv_check(set) == CHASH_OK);
    return set;
}

static void key_of_index(unsigned i, char *buf, size_t size, size_t *len)
{
    snprintf(buf, size, "http://origin.test/k/%u", i * 2654435761u);
    *len = strlen(buf);
}

/* The winner of each layout's rule, recomputed from the one-shot hashes. */
static size_t expected(chash_rdv_layout layout, const nodes *s, const char *key, size_t len)
{
    size_t best = SIZE_MAX;
    double top = 0.0;
    uint64_t top_mix = 0;
    if (layout == CHASH_RDV_SQUID) {
        /* Scan by weight (stable), the key hash carried along. */
        size_t order[MAXN];
        for (size_t k = 0; k < s->n; k++)
            order[k] = k;
        for (size_t i = 1; i < s->n; i++)
            for (size_t j = i; j > 0 && s->weights[order[j - 1]] > s->weights[order[j]]; j--) {
                size_t t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        double total = 0.0, mult[MAXN], p_last = 0.0, x_last = 0.0, xn = 1.0;
        for (size_t k = 0; k < s->n; k++)
            total += s->weights[k];
        for (size_t k = 1; k <= s->n; k++) {
            double kk1 = (double)(s->n - k + 1), f = s->weights[order[k - 1]] / total;
            if (floor(f * 1000.0) == 0.0)
                f = 0.0;
            double m = pow((kk1 * (f - p_last)) / xn + pow(x_last, kk1), 1.0 / kk1);
            xn *= m;
            x_last = m;
            p_last = f;
            mult[order[k - 1]] = m;
        }
        uint32_t user = 0;
        for (size_t i = 0; i < s->n; i++) {
            size_t k = order[i];
            for (size_t b = 0; b < len; b++)
                user += rotl32(user, 19) + carp_byte((unsigned char)key[b]);
            uint32_t c = user ^ chash_rdv_carp_hash(s->ids[k], s->lens[k]);
            c += c * 0x62531965u;
            c = rotl32(c, 21);
            double score = (double)c * mult[k];
            if (score > top) {
                top = score;
                best = k;
            }
        }
        return best;
    }
    for (size_t k = 0; k < s->n; k++) {
        char buf[128];
        double score;
        uint64_t mix = 0;
        if (layout == CHASH_RDV_HRW) {
            mix = chash_mix64(chash_xxh64(key, len, 0) ^ chash_xxh64(s->ids[k], s->lens[k], 0));
            score = s->weights[k] / -log(((double)(mix >> 12) + 0.5) * 0x1p-52);
        } else if (layout == CHASH_RDV_PYMEMCACHE) {
            int w = snprintf(buf, sizeof buf, "%s-%.*s", s->ids[k], (int)len, key);
            score = (double)chash_murmur3_32(buf, (size_t)w, 0);
        } else {
            int w = snprintf(buf, sizeof buf, "%.*s%s", (int)len, key, s->ids[k]);
            score = (double)chash_fnv1a_32(buf, (size_t)w);
        }
        int wins;
        if (best == SIZE_MAX)
            wins = layout == CHASH_RDV_CADDY ? score > 0.0 : 1;
        else if (layout == CHASH_RDV_HRW)
            wins = score > top || (score == top && mix > top_mix);
        else if (layout == CHASH_RDV_PYMEMCACHE)
            wins = score > top || (score == top && strcmp(s->ids[k], s->ids[best]) > 0);
        else
            wins = score > top;
        if (wins) {
            best = k;
            top = score;
            top_mix = mix;
        }
    }
    return best;
}

static void test_rules(void)
{
    static const double w[MAXN] = {1, 3, 1, 2, 5, 1, 1, 4, 2, 1, 1, 1, 7, 1, 1, 2};
    for (int layout = 0; layout < CHASH_RDV_LAYOUT_COUNT; layout++) {
        int weighted = layout == CHASH_RDV_HRW || layout == CHASH_RDV_SQUID;
        for (size_t n = 1; n <= 16; n += 5) {
            nodes s;
            make_nodes(&s, n, "127.0.0.1:%u", weighted ? w : NULL);
            chash_rdv_set *set = build((chash_rdv_layout)layout, &s);
            uint32_t order[MAXN];
            int agree = 1, first = 1;
            for (unsigned i = 0; i < KEYS; i++) {
                char key[64];
                size_t len;
                key_of_index(i, key, sizeof key, &len);
                uint32_t got;
                int status = chash_rdv_lookup(set, key, len, &got);
                size_t want = expected((chash_rdv_layout)layout, &s, key, len);
                agree &= want == SIZE_MAX ? status == CHASH_ENOENT : status == CHASH_OK && got == want;
                CHECK(chash_rdv_rank(set, key, len, order) == CHASH_OK);
                first &= status != CHASH_OK || order[0] == got;
            }
            CHECK(agree);
            CHECK(first);
            double sum = 0.0;
            for (size_t k = 0; k < n; k++)
                sum += chash_rdv_share(set, k);
            CHECK(fabs(sum - 1.0) < 1e-9);
            CHECK(chash_rdv_share(set, n) == 0.0);
            chash_rdv_free(set);
        }
    }
}

static void test_hrw_moves(void)
{
    static const double w[8] = {1, 2, 0.5, 3, 1, 1, 7, 0.25};
    nodes all;
    make_nodes(&all, 8, "node-%u", w);
    chash_rdv_set *set = build(CHASH_RDV_HRW, &all);
    nodes fewer = all, heavier = all;
    fewer.n = 7; /* node 7 removed */
    heavier.weights[3] = 9.0;
    chash_rdv_set *less = build(CHASH_RDV_HRW, &fewer);
    chash_rdv_set *more = build(CHASH_RDV_HRW, &heavier);
    int removal_ok = 1, weight_ok_ = 1;
    for (unsigned i = 0; i < 2000; i++) {
        char key[64];
        size_t len;
        key_of_index(i, key, sizeof key, &len);
        uint32_t a, b, c;
        chash_rdv_lookup(set, key, len, &a);
        chash_rdv_lookup(less, key, len, &b);
        chash_rdv_lookup(more, key, len, &c);
        removal_ok &= a == b || a == 7;
        weight_ok_ &= a == c || c == 3;
        uint64_t h = chash_xxh64(key, len, 0);
        uint32_t by_hash;
        CHECK(chash_rdv_lookup_hash(set, h, &by_hash) == CHASH_OK && by_hash == a);
    }
    CHECK(removal_ok);
    CHECK(weight_ok_);
    chash_rdv_free(set);
    chash_rdv_free(less);
    chash_rdv_free(more);
}

static void test_order(void)
{
    nodes s;
    make_nodes(&s, 6, "10.0.0.%u:80", NULL);
    nodes r = s;
    for (size_t k = 0; k < 6; k++) {
        r.ids[k] = s.ids[5 - k];
        r.lens[k] = s.lens[5 - k];
    }
    for (int layout = 0; layout < CHASH_RDV_LAYOUT_COUNT; layout++) {
        chash_rdv_set *a = build((chash_rdv_layout)layout, &s);
        chash_rdv_set *b = build((chash_rdv_layout)layout, &r);
        int same = 1;
        for (unsigned i = 0; i < 300; i++) {
            char key[64];
            size_t len;
            key_of_index(i, key, sizeof key, &len);
            uint32_t x = 0, y = 0;
            chash_rdv_lookup(a, key, len, &x);
            chash_rdv_lookup(b, key, len, &y);
            same &= x == 5 - y;
        }
        /* hrw, pymemcache and caddy (no tie met) do not depend on the
         * order; squid carries its key hash along the scan, so it does. */
        CHECK(same == (layout != CHASH_RDV_SQUID));
        chash_rdv_free(a);
        chash_rdv_free(b);
    }
}

static void test_hashes(void)
{
    const char text[] = "127.0.0.1:11211-some/key/é";
    size_t len = sizeof text - 1;
    for (size_t cut = 0; cut <= len; cut++)
        CHECK(chash_rdv_murmur3_32(text, cut, text + cut, len - cut) == chash_murmur3_32(text, len, 0));
    CHECK(chash_rdv_carp_hash("", 0) == 0);
    /* One byte b: h = b, then h += h * 0x62531965, rotated left by 21. */
    uint32_t h = (uint32_t)'a';
    h += h * 0x62531965u;
    CHECK(chash_rdv_carp_hash("a", 1) == rotl32(h, 21));
    h = 0xFFFFFF80u; /* 0x80 read as a signed char */
    h += h * 0x62531965u;
    CHECK(chash_rdv_carp_hash("\x80", 1) == rotl32(h, 21));
}

static void test_arguments(void)
{
    nodes s;
    make_nodes(&s, 3, "n%u", NULL);
    chash_rdv_set *set = NULL;
    CHECK(chash_rdv_build((chash_rdv_layout)9, 3, s.ids, s.lens, s.ids, s.lens, s.weights, &set)
          == CHASH_EINVAL);
    double bad[][3] = {{0, 1, 1}, {-1, 1, 1}, {NAN, 1, 1}, {INFINITY, 1, 1}};
    for (size_t i = 0; i < 4; i++)
        CHECK(chash_rdv_build(CHASH_RDV_HRW, 3, s.ids, s.lens, s.ids, s.lens, bad[i], &set)
              == CHASH_EINVAL);
    double two[3] = {2, 1, 1}, half[3] = {1.5, 1, 1}, huge[3] = {2147483647.0, 1, 1};
    CHECK(chash_rdv_build(CHASH_RDV_CADDY, 3, s.ids, s.lens, s.ids, s.lens, two, &set) == CHASH_EINVAL);
    CHECK(chash_rdv_build(CHASH_RDV_PYMEMCACHE, 3, s.ids, s.lens, s.ids, s.lens, two, &set)
          == CHASH_EINVAL);
    CHECK(chash_rdv_build(CHASH_RDV_SQUID, 3, s.ids, s.lens, s.ids, s.lens, half, &set) == CHASH_EINVAL);
    CHECK(chash_rdv_build(CHASH_RDV_SQUID, 3, s.ids, s.lens, s.ids, s.lens, huge, &set) == CHASH_EINVAL);
    CHECK(set == NULL);
    CHECK(chash_rdv_build(CHASH_RDV_SQUID, 3, s.ids, s.lens, s.ids, s.lens, two, &set) == CHASH_OK);
    CHECK(chash_rdv_lookup_hash(set, 1, &(uint32_t){0}) == CHASH_EINVAL);
    chash_rdv_free(set);
    CHECK(chash_rdv_build(CHASH_RDV_HRW, 0, NULL, NULL, NULL, NULL, NULL, &set) == CHASH_OK);
    uint32_t w, order[1];
    CHECK(chash_rdv_lookup(set, "k", 1, &w) == CHASH_ENOENT);
    CHECK(chash_rdv_rank(set, "k", 1, order) == CHASH_ENOENT);
    CHECK(chash_rdv_check(set) == CHASH_OK);
    chash_rdv_free(set);
    chash_rdv_free(NULL);
}

static void test_allocation_failures(void)
{
    nodes s;
    make_nodes(&s, 5, "n%u", NULL);
    for (int layout = 0; layout < CHASH_RDV_LAYOUT_COUNT; layout++) {
        int failures = 0;
        for (long countdown = 0; countdown < 12; countdown++) {
            chash_rdv_set *set = NULL;
            fail_countdown = countdown;
            int status = chash_rdv_build((chash_rdv_layout)layout, 5, s.ids, s.lens, s.ids, s.lens,
                                         s.weights, &set);
            fail_countdown = -1;
            if (status == CHASH_ENOMEM) {
                failures++;
                CHECK(set == NULL);
                continue;
            }
            CHECK(status == CHASH_OK);
            uint32_t order[5];
            fail_countdown = 0;
            CHECK(chash_rdv_rank(set, "k", 1, order) == CHASH_ENOMEM);
            CHECK(chash_rdv_check(set) == CHASH_ENOMEM);
            fail_countdown = 1;
            CHECK(chash_rdv_rank(set, "k", 1, order) == CHASH_ENOMEM);
            fail_countdown = -1;
            CHECK(chash_rdv_rank(set, "k", 1, order) == CHASH_OK);
            chash_rdv_free(set);
        }
        CHECK(failures >= 4);
    }
}

int main(void)
{
    test_rules();
    test_hrw_moves();
    test_order();
    test_hashes();
    test_arguments();
    test_allocation_failures();
    return check_report();
}
