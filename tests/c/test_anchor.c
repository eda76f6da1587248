/*
 * test_anchor.c - JumpBackHash (strategies/jumpback.h) and JumpBackAnchor
 * (strategies/anchor.h) against the answers hash4j itself recorded
 * (tests/vectors/hash4j/, see its README.md): every (hash, n, bucket)
 * triple; every step of every scripted history (the id each add returns,
 * each removal accepted or refused, a digest of the buckets of the probe
 * hashes after the step), the full answers and the state bytes at each
 * checkpoint; hash4j's own stability test replayed with its random stream.
 * Then invariants: jump's contract for JumpBackHash, minimal movement on
 * every add and remove, preference lists equal to removing in turn, chash_anchor_check() throughout, malformed states
 * refused with the set unchanged, failed allocations changing nothing.
 * anchor.c is included here so that allocations can fail on demand.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "failing_alloc.h"
#include "strategies/anchor.c"
#include "strategies/jumpback.h"

#ifndef VECTORS_DIR
#define VECTORS_DIR "../vectors/hash4j"
#endif

/* ------------------------------------------------------------------ */
/* The vector files: little-endian integers read in order.            */

typedef struct {
    uint8_t *data;
    size_t size, at;
    int short_read; /* set when a read ran past the end */
} blob;

static int load(blob *b, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", VECTORS_DIR, name);
    memset(b, 0, sizeof *b);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("FAIL cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    b->data = malloc(size > 0 ? (size_t)size : 1);
    b->size = size > 0 ? (size_t)size : 0;
    size_t got = b->data ? fread(b->data, 1, b->size, f) : 0;
    fclose(f);
    if (!b->data || got != b->size) {
        printf("FAIL cannot read %s\n", path);
        free(b->data);
        return -1;
    }
    return 0;
}

static uint64_t rd(blob *b, unsigned nbytes)
{
    uint64_t v = 0;
    if (b->at + nbytes > b->size) {
        b->short_read = 1;
        return 0;
    }
    for (unsigned i = 0; i < nbytes; i++)
        v |= (uint64_t)b->data[b->at + i] << (8 * i);
    b->at += nbytes;
    return v;
}
#define rd8(b) ((uint8_t)rd((b), 1))
#define rd32(b) ((uint32_t)rd((b), 4))
#define rd64(b) rd((b), 8)

/* The per-step digest of the README: FNV-1a's constants over 32-bit words. */
#define DIGEST_START UINT64_C(0xcbf29ce484222325)
static uint64_t digest_add(uint64_t d, uint32_t bucket)
{
    return (d ^ bucket) * UINT64_C(0x100000001b3);
}

/* ------------------------------------------------------------------ */
/* JumpBackHash                                                        */

static void test_jumpback_vectors(void)
{
    blob f;
    if (load(&f, "jumpback.bin") != 0) {
        CHECK(0);
        return;
    }
    CHECK(rd64(&f) == UINT64_C(0x314b4341424a4843)); /* "CHJBACK1" */
    uint32_t nh = rd32(&f), nn = rd32(&f);
    CHECK(nh >= 512 && nn >= 100);
    uint64_t *hashes = malloc(nh * sizeof *hashes);
    uint32_t *ns = malloc(nn * sizeof *ns);
    for (uint32_t i = 0; i < nh; i++)
        hashes[i] = rd64(&f);
    for (uint32_t k = 0; k < nn; k++)
        ns[k] = rd32(&f);
    CHECK(ns[0] == 1 && ns[nn - 1] == 1000000);
    size_t triples = 0, wrong = 0;
    for (uint32_t k = 0; k < nn; k++)
        for (uint32_t i = 0; i < nh; i++) {
            uint32_t want = rd32(&f);
            uint32_t got = chash_jumpback(hashes[i], ns[k]);
            triples++;
            if (got != want && wrong++ < 5)
                printf("FAIL jumpback(%#llx, %u) = %u, hash4j %u\n", (unsigned long long)hashes[i],
                       ns[k], got, want);
        }
    CHECK(!f.short_read && f.at == f.size);
    CHECK(triples >= 100000);
    CHECK(wrong == 0);
    printf("jumpback: %zu hash4j triples, %zu wrong\n", triples, wrong);
    /* The bulk form agrees with the single one. */
    uint32_t *out = malloc(nh * sizeof *out);
    CHECK(chash_jumpback_assign(hashes, nh, 1000, out) == CHASH_OK);
    int same = 1;
    for (uint32_t i = 0; i < nh; i++)
        same &= out[i] == chash_jumpback(hashes[i], 1000);
    CHECK(same);
    CHECK(chash_jumpback_assign(hashes, nh, 0, out) == CHASH_EINVAL);
    CHECK(chash_jumpback_assign(hashes, nh, (size_t)CHASH_JUMPBACK_MAX_BUCKETS + 1, out) == CHASH_EINVAL);
    CHECK(chash_jumpback(5, 0) == 0);
    free(out);
    free(hashes);
    free(ns);
    free(f.data);
}

/* Jump's contract: with n + 1 buckets a key stays where it was with n, or
 * moves to the new bucket n; every answer is below n; the new bucket takes
 * about 1/(n + 1) of the keys. */
static void test_jumpback_contract(void)
{
    chash_splitmix64 g = {42};
    int stays = 1, below = 1;
    for (int i = 0; i < 300; i++) {
        uint64_t h = chash_splitmix64_next(&g);
        uint32_t prev = chash_jumpback(h, 1);
        below &= prev == 0;
        for (uint32_t n = 2; n <= 3000; n++) {
            uint32_t b = chash_jumpback(h, n);
            below &= b < n;
            stays &= b == prev || b == n - 1;
            prev = b;
        }
    }
    CHECK(stays);
    CHECK(below);
    /* Balance at 10 buckets over 100,000 keys: each within 5% of 10,000. */
    uint32_t counts[10] = {0};
    for (int i = 0; i < 100000; i++)
        counts[chash_jumpback(chash_splitmix64_next(&g), 10)]++;
    int fair = 1;
    for (int b = 0; b < 10; b++)
        fair &= counts[b] > 9500 && counts[b] < 10500;
    CHECK(fair);
    /* The largest count walks too. */
    CHECK(chash_jumpback(UINT64_MAX, CHASH_JUMPBACK_MAX_BUCKETS) < CHASH_JUMPBACK_MAX_BUCKETS);
}

/* ------------------------------------------------------------------ */
/* java.util.SplittableRandom (its documented SplitMix algorithm), for   */
/* replaying hash4j's stability test, which draws from it.               */

typedef struct {
    uint64_t seed;
} jrandom;

static uint64_t j_next_seed(jrandom *r)
{
    return r->seed += UINT64_C(0x9e3779b97f4a7c15);
}

static uint64_t j_next_long(jrandom *r)
{
    uint64_t z = j_next_seed(r);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int32_t j_next_int(jrandom *r)
{
    uint64_t z = j_next_seed(r);
    z = (z ^ (z >> 33)) * UINT64_C(0x62a9d9ed799705f5);
    return (int32_t)(uint32_t)(((z ^ (z >> 28)) * UINT64_C(0xcb24d0a5c88c35b3)) >> 32);
}

static double j_next_double(jrandom *r)
{
    return (double)(j_next_long(r) >> 11) * 0x1.0p-53;
}

/* nextInt(bound), bound >= 1: a power of two masks, anything else rejects
 * the top of the range (Java's int arithmetic, overflow included). */
static int32_t j_next_int_below(jrandom *r, int32_t bound)
{
    int32_t m = bound - 1;
    uint32_t x = (uint32_t)j_next_int(r);
    if ((bound & m) == 0)
        return (int32_t)(x & (uint32_t)m);
    for (uint32_t u = x >> 1;; u = (uint32_t)j_next_int(r) >> 1) {
        int32_t res = (int32_t)(u % (uint32_t)bound);
        /* Java: u + m - res < 0 in int, i.e. the sum wraps past 2^31 - 1 */
        if ((int64_t)u + m - res <= INT32_MAX)
            return res;
    }
}

/* ------------------------------------------------------------------ */
/* JumpBackAnchor                                                       */

static uint64_t *probes;
static uint32_t nprobes;

static uint64_t probe_digest(const chash_anchor *a, uint32_t *answers)
{
    if (chash_anchor_size(a) == 0)
        return 0;
    uint64_t d = DIGEST_START;
    for (uint32_t i = 0; i < nprobes; i++) {
        uint32_t b = 0;
        if (chash_anchor_lookup(a, probes[i], &b) != CHASH_OK)
            b = UINT32_MAX;
        answers[i] = b;
        d = digest_add(d, b);
    }
    return d;
}

/* The preference list equals the buckets a copy of the set gives while
 * each is removed in turn; the set itself does not change. */
static int preference_matches(const chash_anchor *a, uint64_t hash, size_t want)
{
    size_t len = chash_anchor_state_size(a), found = 0;
    uint8_t *st = malloc(len);
    uint32_t *pref = malloc((want + 1) * sizeof *pref);
    chash_anchor *c = chash_anchor_new();
    int ok = st && pref && c && chash_anchor_state(a, st, len) == CHASH_OK
             && chash_anchor_set_state(c, st, len) == CHASH_OK
             && chash_anchor_preference(a, hash, want, pref, &found) == CHASH_OK;
    size_t expect = want < chash_anchor_size(a) ? want : chash_anchor_size(a);
    ok = ok && found == expect;
    for (size_t k = 0; ok && k < found; k++) {
        uint32_t b = UINT32_MAX;
        ok = chash_anchor_lookup(c, hash, &b) == CHASH_OK && b == pref[k]
             && chash_anchor_remove(c, b) == CHASH_OK;
    }
    uint8_t *again = malloc(len);
    ok = ok && again && chash_anchor_state(a, again, len) == CHASH_OK && memcmp(again, st, len) == 0;
    free(again);
    free(st);
    free(pref);
    chash_anchor_free(c);
    return ok;
}

static size_t mismatches, checkpoints, steps_total;

static void miss(const char *what, uint32_t hist, uint32_t step)
{
    if (mismatches++ < 8)
        printf("FAIL history %u step %u: %s\n", hist, step, what);
}

/* The checkpoint record: live count, probe answers, the state bytes; the
 * state parsed back gives the same state and the same answers. */
static void checkpoint(blob *f, const chash_anchor *a, uint32_t hist, uint32_t step)
{
    checkpoints++;
    uint32_t live = rd32(f);
    if (live != chash_anchor_size(a))
        miss("live count", hist, step);
    if (live > 0)
        for (uint32_t i = 0; i < nprobes; i++) {
            uint32_t want = rd32(f), got = UINT32_MAX;
            if (chash_anchor_lookup(a, probes[i], &got) != CHASH_OK || got != want)
                miss("checkpoint answer", hist, step);
        }
    uint32_t len = rd32(f);
    if (f->at + len > f->size) {
        f->short_read = 1;
        return;
    }
    const uint8_t *want = f->data + f->at;
    f->at += len;
    size_t size = chash_anchor_state_size(a);
    uint8_t *mine = malloc(size);
    if (size != len || chash_anchor_state(a, mine, size) != CHASH_OK || memcmp(mine, want, len) != 0)
        miss("state bytes", hist, step);
    chash_anchor *b = chash_anchor_new();
    if (chash_anchor_set_state(b, want, len) != CHASH_OK || chash_anchor_check(b) != CHASH_OK)
        miss("state parse", hist, step);
    uint8_t *again = malloc(size);
    if (chash_anchor_state_size(b) != size || chash_anchor_state(b, again, size) != CHASH_OK
        || memcmp(again, want, len) != 0)
        miss("state round trip", hist, step);
    for (uint32_t i = 0; i < nprobes && live > 0; i++) {
        uint32_t x = 0, y = 1;
        chash_anchor_lookup(a, probes[i], &x);
        chash_anchor_lookup(b, probes[i], &y);
        if (x != y)
            miss("parsed state answers", hist, step);
    }
    for (uint32_t i = 0; i < 8 && live > 0; i++)
        if (!preference_matches(a, probes[i], i < 2 && live < 64 ? live : 2 + 3 * i))
            miss("preference list", hist, step);
    free(mine);
    free(again);
    chash_anchor_free(b);
}

/* Minimal movement: after removing b only b's keys moved; after adding b
 * keys moved only to b. */
static int moved_minimally(int op, uint32_t arg, const uint32_t *before, const uint32_t *after,
                           uint32_t nbefore, uint32_t nafter)
{
    if (nbefore == 0 || nafter == 0)
        return 1;
    for (uint32_t i = 0; i < nprobes; i++) {
        if (op == 0 && after[i] != before[i] && after[i] != arg)
            return 0;
        if (op == 1 && before[i] != arg && after[i] != before[i])
            return 0;
        if (op == 1 && after[i] == arg)
            return 0;
        if (op >= 2 && after[i] != before[i])
            return 0;
    }
    return 1;
}

/* hash4j's testStability: the operation it picks at each step from
 * SplittableRandom(seed), with the live-bucket list it keeps; the digest
 * over its 100 probes of the step. */
typedef struct {
    jrandom rnd;
    uint32_t *list;
    size_t n;
} stability;

static void test_anchor_vectors(void)
{
    blob f;
    if (load(&f, "anchor.bin") != 0) {
        CHECK(0);
        return;
    }
    CHECK(rd64(&f) == UINT64_C(0x3152484343414843)); /* "CHACHHR1" */
    nprobes = rd32(&f);
    CHECK(nprobes == 64);
    probes = malloc(nprobes * sizeof *probes);
    for (uint32_t i = 0; i < nprobes; i++)
        probes[i] = rd64(&f);
    uint32_t nhist = rd32(&f);
    CHECK(nhist >= 5);
    uint32_t *before = malloc(nprobes * sizeof *before), *after = malloc(nprobes * sizeof *after);
    int stability_seen = 0, minimal = 1, checked = 1;
    for (uint32_t h = 0; h < nhist && !f.short_read; h++) {
        uint32_t kind = rd32(&f);
        uint64_t seed = rd64(&f);
        uint64_t checksum = rd64(&f);
        uint32_t nsteps = rd32(&f);
        chash_anchor *a = chash_anchor_new();
        stability st = {{seed}, NULL, 0};
        if (kind == 1) {
            stability_seen = 1;
            CHECK(seed == UINT64_C(0xea29dbd906636eb9));
            CHECK(checksum == UINT64_C(0xeb47923b33bd1ace)); /* hash4j's own, in its test */
            CHECK(nsteps == 10000);
            st.list = malloc(nsteps * sizeof *st.list);
        }
        uint32_t nbefore = 0;
        probe_digest(a, before);
        for (uint32_t s = 0; s < nsteps && !f.short_read; s++) {
            steps_total++;
            uint8_t op = rd8(&f);
            uint32_t arg = rd32(&f);
            uint64_t digest = rd64(&f);
            if (kind == 1) {
                /* the test's own choice, which the record must agree with */
                int removing = j_next_double(&st.rnd) < 0.5;
                if (removing && st.n > 0) {
                    size_t idx = (size_t)j_next_int_below(&st.rnd, (int32_t)st.n);
                    uint32_t bucket = st.list[idx];
                    st.list[idx] = st.list[--st.n];
                    if (op != 1 || arg != bucket)
                        miss("stability test's removal", h, s);
                } else if (removing) {
                    if (op != 3)
                        miss("stability test's empty step", h, s);
                } else if (op != 0) {
                    miss("stability test's add", h, s);
                }
            }
            uint32_t got = 0;
            int rc;
            switch (op) {
            case 0:
                rc = chash_anchor_add(a, &got);
                if (rc != CHASH_OK || got != arg)
                    miss("added id", h, s);
                if (kind == 1)
                    st.list[st.n++] = got;
                break;
            case 1:
                if (chash_anchor_remove(a, arg) != CHASH_OK)
                    miss("removal", h, s);
                break;
            case 2:
                if (chash_anchor_remove(a, arg) != CHASH_ENOENT)
                    miss("refused removal", h, s);
                break;
            case 3:
                break;
            default:
                miss("unknown op", h, s);
            }
            uint64_t mine;
            if (kind == 1) {
                mine = 0;
                if (chash_anchor_size(a) > 0) {
                    mine = DIGEST_START;
                    for (int k = 0; k < 100; k++) {
                        uint32_t b = UINT32_MAX;
                        chash_anchor_lookup(a, j_next_long(&st.rnd), &b);
                        mine = digest_add(mine, b);
                    }
                }
            } else {
                mine = probe_digest(a, after);
                minimal &= moved_minimally(op, arg, before, after, nbefore, chash_anchor_size(a));
                memcpy(before, after, nprobes * sizeof *before);
                nbefore = chash_anchor_size(a);
            }
            if (mine != digest)
                miss("probe digest", h, s);
            if (chash_anchor_high(a) < 600 || s % 97 == 0)
                checked &= chash_anchor_check(a) == CHASH_OK;
            if (rd8(&f))
                checkpoint(&f, a, h, s);
        }
        checkpoint(&f, a, h, nsteps); /* the final state */
        free(st.list);
        chash_anchor_free(a);
    }
    CHECK(stability_seen);
    CHECK(!f.short_read && f.at == f.size);
    CHECK(minimal);
    CHECK(checked);
    CHECK(steps_total >= 10000);
    CHECK(mismatches == 0);
    printf("anchor: %u histories, %zu steps, %zu checkpoints, %zu mismatches\n", nhist, steps_total,
           checkpoints, mismatches);
    free(before);
    free(after);
    free(f.data);
}

/* ------------------------------------------------------------------ */
/* States refused, failures that change nothing                         */

static int same_state(const chash_anchor *a, const uint8_t *state, size_t len)
{
    uint8_t buf[64];
    return chash_anchor_state_size(a) == len && len <= sizeof buf
           && chash_anchor_state(a, buf, sizeof buf) == CHASH_OK && memcmp(buf, state, len) == 0;
}

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_anchor_refusals(void)
{
    chash_anchor *a = chash_anchor_new();
    uint32_t b;
    for (int i = 0; i < 10; i++)
        CHECK(chash_anchor_add(a, &b) == CHASH_OK && b == (uint32_t)i);
    CHECK(chash_anchor_remove(a, 3) == CHASH_OK);
    CHECK(chash_anchor_remove(a, 7) == CHASH_OK);
    CHECK(chash_anchor_remove(a, 3) == CHASH_ENOENT);  /* already removed */
    CHECK(chash_anchor_remove(a, 10) == CHASH_ENOENT); /* never added */
    CHECK(chash_anchor_remove(a, UINT32_MAX) == CHASH_ENOENT);
    uint8_t keep[12];
    CHECK(chash_anchor_state_size(a) == 12 && chash_anchor_state(a, keep, 12) == CHASH_OK);
    CHECK(keep[0] == 10 && keep[4] == 3 && keep[8] == 7);
    CHECK(chash_anchor_state(a, keep, 11) == CHASH_EINVAL);

    uint8_t s[16];
    /* lengths */
    CHECK(chash_anchor_set_state(a, s, 0) == CHASH_EINVAL);
    le32(s, 5);
    CHECK(chash_anchor_set_state(a, s, 3) == CHASH_EINVAL);
    CHECK(chash_anchor_set_state(a, s, 5) == CHASH_EINVAL);
    /* high negative as a Java int, above the limit */
    le32(s, 0x80000000u);
    CHECK(chash_anchor_set_state(a, s, 4) == CHASH_EINVAL);
    le32(s, CHASH_ANCHOR_MAX_BUCKETS + 1);
    CHECK(chash_anchor_set_state(a, s, 4) == CHASH_ERANGE);
    /* an id not below high */
    le32(s, 5);
    le32(s + 4, 5);
    CHECK(chash_anchor_set_state(a, s, 8) == CHASH_EINVAL);
    /* an id twice */
    le32(s + 4, 2);
    le32(s + 8, 2);
    CHECK(chash_anchor_set_state(a, s, 12) == CHASH_EINVAL);
    /* every id removed */
    le32(s, 2);
    le32(s + 4, 0);
    le32(s + 8, 1);
    CHECK(chash_anchor_set_state(a, s, 12) == CHASH_EINVAL);
    le32(s, 0);
    CHECK(chash_anchor_set_state(a, s, 8) == CHASH_EINVAL);
    CHECK(same_state(a, keep, 12));
    CHECK(chash_anchor_check(a) == CHASH_OK);

    /* Failed allocations change nothing. */
    fail_countdown = 0;
    le32(s, 5);
    le32(s + 4, 1);
    CHECK(chash_anchor_set_state(a, s, 8) == CHASH_ENOMEM);
    fail_countdown = 1; /* the second of its two allocations */
    CHECK(chash_anchor_set_state(a, s, 8) == CHASH_ENOMEM);
    fail_countdown = -1;
    CHECK(same_state(a, keep, 12));
    chash_anchor *big = chash_anchor_new();
    for (int i = 0; i < 100; i++)
        chash_anchor_add(big, &b);
    fail_countdown = 0;
    CHECK(chash_anchor_remove(big, 50) == CHASH_ENOMEM);
    fail_countdown = 1; /* the stack grew, the slots did not */
    CHECK(chash_anchor_remove(big, 50) == CHASH_ENOMEM);
    fail_countdown = -1;
    CHECK(chash_anchor_contains(big, 50) && chash_anchor_size(big) == 100);
    CHECK(chash_anchor_check(big) == CHASH_OK);
    CHECK(chash_anchor_remove(big, 50) == CHASH_OK);
    CHECK(!chash_anchor_contains(big, 50) && chash_anchor_size(big) == 99);
    chash_anchor_free(big);
    fail_countdown = 0;
    CHECK(chash_anchor_new() == NULL);
    fail_countdown = -1;
    CHECK(chash_anchor_check(a) == CHASH_OK);

    /* Preference lists: the whole set, a failed scratch allocation. */
    CHECK(preference_matches(a, 99, 100));
    uint32_t pref[8];
    size_t found = 5;
    fail_countdown = 0;
    CHECK(chash_anchor_preference(a, 99, 3, pref, &found) == CHASH_ENOMEM && found == 0);
    fail_countdown = -1;
    CHECK(chash_anchor_preference(a, 99, 1, pref, &found) == CHASH_OK && found == 1);
    CHECK(chash_anchor_lookup(a, 99, &b) == CHASH_OK && b == pref[0]);
    CHECK(chash_anchor_preference(a, 99, 0, pref, &found) == CHASH_OK && found == 0);
    /* Nothing removed and the key in the top bucket: the first removal
     * lowers high instead of stacking the id, as chash_anchor_remove(). */
    chash_anchor *t = chash_anchor_new();
    for (int i = 0; i < 20; i++)
        chash_anchor_add(t, &b);
    int top_seen = 0, all_match = 1;
    for (uint64_t h = 0; h < 400; h++) {
        CHECK(chash_anchor_lookup(t, h, &b) == CHASH_OK);
        top_seen += b == 19;
        all_match &= preference_matches(t, h, h % 7 ? 6 : 20);
    }
    CHECK(top_seen > 0);
    CHECK(all_match);
    chash_anchor_free(t);

    /* The empty set: no bucket to give; a state of four zero bytes. */
    chash_anchor *e = chash_anchor_new();
    CHECK(chash_anchor_lookup(e, 1, &b) == CHASH_ENOENT);
    CHECK(chash_anchor_preference(e, 1, 2, pref, &found) == CHASH_ENOENT && found == 0);
    uint8_t z[4] = {1, 1, 1, 1};
    CHECK(chash_anchor_state(e, z, 4) == CHASH_OK && z[0] == 0 && z[3] == 0);
    CHECK(chash_anchor_set_state(a, z, 4) == CHASH_OK && chash_anchor_size(a) == 0);
    CHECK(chash_anchor_check(a) == CHASH_OK);
    chash_anchor_free(e);
    chash_anchor_free(a);
    chash_anchor_free(NULL);
}

/* The limit on ids: an add past it is refused. */
static void test_anchor_limit(void)
{
    chash_anchor *a = chash_anchor_new();
    uint8_t s[4];
    le32(s, CHASH_ANCHOR_MAX_BUCKETS);
    CHECK(chash_anchor_set_state(a, s, 4) == CHASH_OK);
    uint32_t b = 7;
    CHECK(chash_anchor_add(a, &b) == CHASH_ERANGE && b == 7);
    CHECK(chash_anchor_size(a) == CHASH_ANCHOR_MAX_BUCKETS);
    CHECK(chash_anchor_remove(a, 0) == CHASH_OK);
    CHECK(chash_anchor_add(a, &b) == CHASH_OK && b == 0);
    chash_anchor_free(a);
}

int main(void)
{
    test_jumpback_vectors();
    test_jumpback_contract();
    test_anchor_vectors();
    test_anchor_refusals();
    test_anchor_limit();
    free(probes);
    return check_report();
}
