/*
 * test_affinity.c - prefix-cache affinity (strategies/affinity.h): chained
 * block hashes of text and tokens, the LRU a slot, slots added and removed,
 * the choice along a preference order, failed allocations, and a long
 * random run against a plain model with chash_affinity_check() after each
 * step.  affinity.c is included here with an allocator that fails on
 * demand; the hashes and the mixer are linked.
 */
#include "affinity_model.h"
#include "check.h"
#include "failing_alloc.h"

#include "strategies/affinity.c"

#include <string.h>

static void test_text_blocks(void)
{
    uint64_t a[8], b[8];
    size_t na = 99, nb = 99;
    CHECK(chash_prefix_blocks_utf8("abc", 3, 0, 8, a, &na) == CHASH_EINVAL);
    CHECK(chash_prefix_blocks_utf8("", 0, 4, 8, a, &na) == CHASH_OK && na == 0);
    CHECK(chash_prefix_blocks_utf8("abcdefg", 7, 2, 8, a, &na) == CHASH_OK && na == 4);
    /* chained: block 0 from the seed, block 1 from block 0 */
    CHECK(a[0] == chash_xxh64("ab", 2, CHASH_PREFIX_TEXT_SEED));
    CHECK(a[1] == chash_xxh64("cd", 2, a[0]));
    CHECK(a[3] == chash_xxh64("g", 1, a[2]));
    CHECK(chash_prefix_blocks_utf8("abcdXfg", 7, 2, 8, b, &nb) == CHASH_OK && nb == 4);
    CHECK(a[0] == b[0] && a[1] == b[1] && a[2] != b[2] && a[3] != b[3]);
    /* the same block after a different prefix hashes differently */
    CHECK(chash_prefix_blocks_utf8("xxcd", 4, 2, 8, b, &nb) == CHASH_OK && b[1] != a[1]);
    /* limit */
    CHECK(chash_prefix_blocks_utf8("abcdefg", 7, 2, 2, b, &nb) == CHASH_OK && nb == 2 && b[1] == a[1]);
    /* code points, not bytes: "é" is two bytes, one character */
    const char *accented = "\xc3\xa9" "a\xc3\xa9" "b";
    CHECK(chash_prefix_blocks_utf8(accented, 6, 2, 8, a, &na) == CHASH_OK && na == 2);
    CHECK(a[0] == chash_xxh64("\xc3\xa9" "a", 3, CHASH_PREFIX_TEXT_SEED));
    CHECK(a[1] == chash_xxh64("\xc3\xa9" "b", 3, a[0]));
}

static void test_token_blocks(void)
{
    uint64_t t[7] = {1, 2, 3, 4, 5, 6, 7}, u[7] = {1, 2, 3, 4, 5, 6, 8};
    uint64_t a[8], b[8];
    size_t na, nb;
    CHECK(chash_prefix_blocks_tokens(t, 7, 0, 8, a, &na) == CHASH_EINVAL);
    CHECK(chash_prefix_blocks_tokens(t, 0, 3, 8, a, &na) == CHASH_OK && na == 0);
    CHECK(chash_prefix_blocks_tokens(t, 7, 3, 8, a, &na) == CHASH_OK && na == 3);
    CHECK(chash_prefix_blocks_tokens(u, 7, 3, 8, b, &nb) == CHASH_OK && nb == 3);
    CHECK(a[0] == b[0] && a[1] == b[1] && a[2] != b[2]);
    /* a partial block differs from the full one it begins */
    CHECK(chash_prefix_blocks_tokens(t, 5, 3, 8, b, &nb) == CHASH_OK && nb == 2);
    CHECK(b[0] == a[0] && b[1] != a[1]);
    /* order inside a block matters */
    uint64_t swapped[3] = {2, 1, 3};
    CHECK(chash_prefix_blocks_tokens(swapped, 3, 3, 8, b, &nb) == CHASH_OK && b[0] != a[0]);
    CHECK(chash_prefix_blocks_tokens(t, 7, 3, 1, b, &nb) == CHASH_OK && nb == 1 && b[0] == a[0]);
}

static void test_lru_and_slots(void)
{
    CHECK(chash_affinity_new(0) == NULL);
    CHECK(chash_affinity_new((size_t)CHASH_AFFINITY_MAX_CAPACITY + 1) == NULL);
    chash_affinity *t = chash_affinity_new(3);
    CHECK(t != NULL && chash_affinity_capacity(t) == 3);
    size_t s0, s1;
    CHECK(chash_affinity_add(t, &s0) == CHASH_OK && s0 == 0);
    CHECK(chash_affinity_add(t, &s1) == CHASH_OK && s1 == 1);
    uint64_t first[3] = {1, 2, 3}, second[2] = {1, 4};
    CHECK(chash_affinity_record(t, s0, first, 3) == CHASH_OK);
    CHECK(chash_affinity_match(t, s0, first, 3) == 3 && chash_affinity_held(t, s0) == 3);
    CHECK(chash_affinity_record(t, s0, second, 2) == CHASH_OK); /* 1 refreshed, 2 evicted */
    uint64_t probe[3] = {3, 1, 4}, gone[2] = {2, 3};
    CHECK(chash_affinity_match(t, s0, probe, 3) == 3);
    CHECK(chash_affinity_match(t, s0, gone, 2) == 0);
    CHECK(chash_affinity_held(t, s0) == 3 && chash_affinity_held(t, s1) == 0);
    CHECK(chash_affinity_match(t, s1, probe, 3) == 0);
    CHECK(chash_affinity_check(t) == CHASH_OK);
    CHECK(chash_affinity_record(t, 7, first, 3) == CHASH_ENOENT);
    CHECK(chash_affinity_remove(t, 7) == CHASH_ENOENT);
    CHECK(chash_affinity_remove(t, s0) == CHASH_OK && chash_affinity_remove(t, s0) == CHASH_ENOENT);
    CHECK(chash_affinity_held(t, s0) == 0 && chash_affinity_match(t, s0, probe, 3) == 0);
    size_t again;
    CHECK(chash_affinity_add(t, &again) == CHASH_OK && again == s0);
    CHECK(chash_affinity_held(t, again) == 0);
    /* more slots than the first array holds */
    for (int k = 0; k < 20; k++) {
        size_t s;
        CHECK(chash_affinity_add(t, &s) == CHASH_OK && s == (size_t)k + 2);
        CHECK(chash_affinity_record(t, s, first, 3) == CHASH_OK);
    }
    CHECK(chash_affinity_check(t) == CHASH_OK);
    chash_affinity_free(t);
    chash_affinity_free(NULL);
}

static void test_choose(void)
{
    chash_affinity *t = chash_affinity_new(100);
    size_t a, b, c, choice = 99;
    chash_affinity_add(t, &a);
    chash_affinity_add(t, &b);
    chash_affinity_add(t, &c);
    uint64_t blocks[4] = {10, 11, 12, 13};
    chash_affinity_record(t, b, blocks, 3);
    chash_affinity_weights w = {.tokens = 0, .block_tokens = 100, .miss_cost = 1, .rank_cost = 50,
                                .load_cost = 0};
    chash_affinity_candidate cands[3] = {{a, 0, 0}, {b, 0, 0}, {c, 0, 0}};
    /* a: 400 to prefill; b: 100 + rank 50 */
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 1);
    cands[1].queued = 260; /* b: 410 > a: 400 */
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 0);
    cands[1].queued = 250; /* b: 400 == a: 400, ties to the earlier */
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 0);
    cands[1].queued = 0;
    w.load_cost = 100;
    cands[1].load = 3; /* b: 150 + 300 = 450 > a */
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 0);
    cands[0].load = 5; /* a: 900; c: 400 + 100 = 500; b: 450 */
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 1);
    /* the prompt's own length bounds what hits save */
    w = (chash_affinity_weights){.tokens = 120, .block_tokens = 100, .miss_cost = 1, .rank_cost = 50};
    cands[0].load = cands[1].load = 0;
    cands[1].queued = 80; /* a: 120; b: 80 + 0 + 50 = 130 */
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 0);
    w.tokens = 0; /* 4 blocks of 100: a 400, b 130 */
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 1);
    /* misses weighed 3 to 1 against queued work: a: 3 x 400 = 1200; b with
     * 600 queued: 600 + 3 x 100 + 50 = 950 */
    w.miss_cost = 3;
    cands[1].queued = 600;
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 1);
    w.miss_cost = 1; /* a: 400 < b: 750 */
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_OK && choice == 0);
    cands[1].queued = 0;
    /* refusals */
    CHECK(chash_affinity_choose(t, cands, 0, blocks, 4, &w, &choice) == CHASH_EINVAL);
    cands[2].queued = -1;
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_EINVAL);
    cands[2].queued = INFINITY;
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_EINVAL);
    cands[2].queued = 0;
    w.rank_cost = NAN;
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_EINVAL);
    w.rank_cost = 0;
    w.miss_cost = -1;
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_EINVAL);
    w.miss_cost = 1;
    cands[2].slot = 42;
    CHECK(chash_affinity_choose(t, cands, 3, blocks, 4, &w, &choice) == CHASH_EINVAL);
    chash_affinity_free(t);
}

static void test_failed_allocations(void)
{
    fail_countdown = 0;
    CHECK(chash_affinity_new(16) == NULL);
    fail_countdown = -1;
    chash_affinity *t = chash_affinity_new(16);
    size_t s;
    for (long k = 0; k < 4; k++) {
        fail_countdown = k; /* the LRU (3 allocations) or the slot array fails */
        int status = chash_affinity_add(t, &s);
        fail_countdown = -1;
        CHECK(status == CHASH_ENOMEM || k == 3);
        CHECK(status != CHASH_OK || s == 0);
        if (status == CHASH_OK)
            CHECK(chash_affinity_remove(t, s) == CHASH_OK);
        CHECK(chash_affinity_check(t) == CHASH_OK);
    }
    fail_countdown = -1;
    chash_affinity_free(t);
}

static void test_random_against_model(void)
{
    enum { SLOTS = 4, CAP = 5, STEPS = 20000 };
    chash_affinity *t = chash_affinity_new(CAP);
    model_lru model[SLOTS];
    memset(model, 0, sizeof model);
    for (int s = 0; s < SLOTS; s++) {
        size_t slot;
        chash_affinity_add(t, &slot);
    }
    uint64_t x = 12345;
    int mismatches = 0, broken = 0;
    for (int step = 0; step < STEPS; step++) {
        x = chash_mix64(x + 1);
        size_t slot = x % SLOTS, n = (x >> 8) % 5;
        uint64_t blocks[4];
        for (size_t k = 0; k < n; k++)
            blocks[k] = (x >> (16 + 4 * k)) % 9;
        if ((x >> 40) % 3 == 0) {
            chash_affinity_record(t, slot, blocks, n);
            for (size_t k = 0; k < n; k++)
                model_touch(&model[slot], blocks[k], CAP);
        } else if ((x >> 40) % 97 == 1) {
            chash_affinity_remove(t, slot);
            size_t again;
            chash_affinity_add(t, &again);
            mismatches += again != slot;
            model[slot].n = 0;
        }
        for (size_t s = 0; s < SLOTS; s++) {
            mismatches += chash_affinity_match(t, s, blocks, n) != model_match(&model[s], blocks, n);
            mismatches += chash_affinity_held(t, s) != model[s].n;
        }
        broken += chash_affinity_check(t) != CHASH_OK;
    }
    CHECK(mismatches == 0);
    CHECK(broken == 0);
    chash_affinity_free(t);
}

int main(void)
{
    test_text_blocks();
    test_token_blocks();
    test_lru_and_slots();
    test_choose();
    test_failed_allocations();
    test_random_against_model();
    return check_report();
}
