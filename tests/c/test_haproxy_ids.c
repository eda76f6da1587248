/*
 * test_haproxy_ids.c - the haproxy layout's server ids (engine/haproxy_ids.h):
 * HAProxy's numbering of automatic and explicit ids, the counter at the
 * largest id, errors leaving the set unchanged, failing allocations, and a
 * random run against a plain model (a table of flags).
 *
 * haproxy_ids.c is included directly so its allocator can be swapped for
 * one that fails on demand (failing_alloc.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failing_alloc.h"
#include "../../csrc/engine/haproxy_ids.c"

#include "check.h"

#define MAX CHASH_HAPROXY_MAX_ID

/* Takes id (0: automatic) and returns the id taken, or 0 on error. */
static uint32_t take(chash_haproxy_ids *ids, uint32_t id)
{
    uint32_t taken = 12345;
    int status = chash_haproxy_ids_take(ids, id, &taken);
    CHECK((status == CHASH_OK) == (taken != 0));
    return taken;
}

/* 1 when a and b hold the same ids and counter. */
static int same(const chash_haproxy_ids *a, const chash_haproxy_ids *b)
{
    return a->count == b->count && a->next == b->next &&
           (a->count == 0 || memcmp(a->used, b->used, a->count * sizeof *a->used) == 0);
}

/* A copy of ids' ids and counter (malloc, not through the engine). */
static chash_haproxy_ids snapshot(const chash_haproxy_ids *ids)
{
    chash_haproxy_ids copy = *ids;
    copy.used = malloc((ids->count ? ids->count : 1) * sizeof *copy.used);
    if (ids->count)
        memcpy(copy.used, ids->used, ids->count * sizeof *copy.used);
    return copy;
}

static void test_numbering(void)
{
    chash_haproxy_ids ids;
    chash_haproxy_ids_init(&ids);
    CHECK(ids.count == 0 && ids.used == NULL && chash_haproxy_ids_next(&ids) == 1);
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_OK);
    /* HAProxy's example: servers without ids, one with id 3, then more
     * without: 1, 3, then the counter (3 after the explicit one's step)
     * finds 3 used and gives 4, then 5. */
    CHECK(take(&ids, 0) == 1 && ids.next == 2);
    CHECK(take(&ids, 3) == 3 && ids.next == 3);
    CHECK(take(&ids, 0) == 4 && ids.next == 5);
    CHECK(take(&ids, 0) == 5 && ids.next == 6);
    CHECK(chash_haproxy_ids_contains(&ids, 3) && !chash_haproxy_ids_contains(&ids, 2));
    CHECK(chash_haproxy_ids_first_free(&ids, 0) == 2 && chash_haproxy_ids_first_free(&ids, 3) == 6);
    /* An explicit id below the counter: the counter steps once anyway. */
    CHECK(take(&ids, 2) == 2 && ids.next == 7);
    CHECK(ids.count == 5 && chash_haproxy_ids_check(&ids) == CHASH_OK);
    for (size_t i = 0; i < ids.count; i++)
        CHECK(ids.used[i] == (uint32_t)i + 1);

    /* Errors change nothing and write 0. */
    chash_haproxy_ids before = snapshot(&ids);
    uint32_t taken = 99;
    CHECK(chash_haproxy_ids_take(&ids, 3, &taken) == CHASH_EEXIST && taken == 0);
    CHECK(chash_haproxy_ids_take(&ids, MAX + 1, &taken) == CHASH_EINVAL && taken == 0);
    CHECK(chash_haproxy_ids_take(&ids, UINT32_MAX, &taken) == CHASH_EINVAL);
    CHECK(chash_haproxy_ids_release(&ids, 6) == CHASH_ENOENT);
    CHECK(chash_haproxy_ids_release(&ids, 0) == CHASH_ENOENT);
    CHECK(same(&ids, &before));
    free(before.used);

    /* A release keeps the counter; the freed id is found again only from
     * below it. */
    CHECK(chash_haproxy_ids_release(&ids, 4) == CHASH_OK && ids.next == 7 && ids.count == 4);
    CHECK(!chash_haproxy_ids_contains(&ids, 4));
    CHECK(take(&ids, 0) == 7);
    CHECK(chash_haproxy_ids_first_free(&ids, 1) == 4);
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_OK);

    chash_haproxy_ids_free(&ids);
    CHECK(ids.used == NULL && ids.count == 0 && ids.cap == 0 && ids.next == 1);
    /* A zeroed set reads its counter as 1. */
    chash_haproxy_ids zeroed = {NULL, 0, 0, 0};
    CHECK(chash_haproxy_ids_check(&zeroed) == CHASH_OK && chash_haproxy_ids_next(&zeroed) == 1);
    CHECK(take(&zeroed, 0) == 1 && zeroed.next == 2);
    chash_haproxy_ids_free(&zeroed);
}

static void test_largest_id(void)
{
    chash_haproxy_ids ids;
    chash_haproxy_ids_init(&ids);
    ids.next = MAX - 1;
    CHECK(take(&ids, 0) == MAX - 1 && ids.next == MAX);
    CHECK(take(&ids, 0) == MAX && ids.next == MAX); /* never past the largest */
    CHECK(chash_haproxy_ids_first_free(&ids, MAX - 1) == 0);
    CHECK(chash_haproxy_ids_first_free(&ids, MAX) == 0);
    CHECK(chash_haproxy_ids_first_free(&ids, MAX + 1) == 0);
    uint32_t taken = 1;
    CHECK(chash_haproxy_ids_take(&ids, 0, &taken) == CHASH_ERANGE && taken == 0);
    CHECK(ids.count == 2 && ids.next == MAX);
    /* An explicit id still fits below. */
    CHECK(take(&ids, 1) == 1 && ids.next == MAX);
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_OK);
    chash_haproxy_ids_free(&ids);
}

static void test_allocation(void)
{
    chash_haproxy_ids ids;
    chash_haproxy_ids_init(&ids);
    uint32_t taken = 5;
    fail_countdown = 0;
    CHECK(chash_haproxy_ids_take(&ids, 0, &taken) == CHASH_ENOMEM && taken == 0);
    CHECK(ids.count == 0 && ids.used == NULL && ids.next == 1);
    fail_countdown = -1;
    /* Room reserved: the takes that follow allocate nothing. */
    CHECK(chash_haproxy_ids_reserve(&ids, 100) == CHASH_OK && ids.cap >= 100);
    fail_countdown = 0;
    for (uint32_t i = 1; i <= 100; i++)
        CHECK(take(&ids, 0) == i);
    while (ids.count < ids.cap) { /* the rest of the block's room */
        uint32_t got = take(&ids, 0);
        CHECK(got == ids.count);
    }
    CHECK(chash_haproxy_ids_take(&ids, 0, &taken) == CHASH_ENOMEM && taken == 0);
    fail_countdown = -1;
    chash_haproxy_ids before = snapshot(&ids);
    /* A growth that fails, or cannot be counted, leaves the set alone. */
    fail_countdown = 0;
    CHECK(chash_haproxy_ids_reserve(&ids, ids.cap) == CHASH_ENOMEM);
    fail_countdown = -1;
    CHECK(chash_haproxy_ids_reserve(&ids, SIZE_MAX) == CHASH_ENOMEM);
    CHECK(chash_haproxy_ids_reserve(&ids, (size_t)MAX) == CHASH_ENOMEM);
    CHECK(chash_haproxy_ids_reserve(&ids, 0) == CHASH_OK);
    CHECK(same(&ids, &before) && chash_haproxy_ids_check(&ids) == CHASH_OK);
    free(before.used);
    chash_haproxy_ids_free(&ids);
}

static void test_check(void)
{
    uint32_t bad[3] = {1, 3, 2};
    chash_haproxy_ids ids = {bad, 3, 3, 1};
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_ECORRUPT);
    bad[2] = 3; /* a repeat */
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_ECORRUPT);
    bad[0] = 0, bad[1] = 1, bad[2] = 2; /* id 0 */
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_ECORRUPT);
    bad[0] = 1, bad[1] = 2, bad[2] = MAX + 1;
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_ECORRUPT);
    bad[2] = MAX;
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_OK);
    ids.next = MAX + 1;
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_ECORRUPT);
    ids.next = 1, ids.count = 4;
    CHECK(chash_haproxy_ids_check(&ids) == CHASH_ECORRUPT);
    chash_haproxy_ids empty_block = {NULL, 0, 4, 1};
    CHECK(chash_haproxy_ids_check(&empty_block) == CHASH_ECORRUPT);
}

/* A random run of takes and releases over ids 1..WINDOW against flags. */
#define WINDOW 64
static void test_model(void)
{
    chash_haproxy_ids ids;
    chash_haproxy_ids_init(&ids);
    unsigned char used[WINDOW + 2] = {0};
    uint32_t next = 1;
    uint64_t state = 0x9E3779B97F4A7C15u;
    for (int step = 0; step < 20000; step++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        unsigned r = (unsigned)(state >> 33);
        uint32_t id = 1 + r % WINDOW;
        if (r % 5 < 2) { /* release */
            int status = chash_haproxy_ids_release(&ids, id);
            CHECK(status == (used[id] ? CHASH_OK : CHASH_ENOENT));
            used[id] = 0;
        } else if (r % 5 == 2) { /* explicit */
            uint32_t taken;
            int status = chash_haproxy_ids_take(&ids, id, &taken);
            CHECK(status == (used[id] ? CHASH_EEXIST : CHASH_OK));
            if (!used[id])
                next = next + 1, used[id] = 1;
        } else { /* automatic, while the window has room */
            uint32_t want = next;
            while (want <= WINDOW && used[want])
                want++;
            if (want > WINDOW)
                continue;
            CHECK(chash_haproxy_ids_first_free(&ids, next) == want);
            CHECK(take(&ids, 0) == want);
            used[want] = 1;
            next = want + 1;
        }
        if (next > WINDOW) /* back into the window, as a pickle restores a counter */
            next = 1 + r % 7;
        ids.next = next;
        size_t count = 0;
        for (uint32_t k = 1; k <= WINDOW; k++)
            count += used[k];
        if (ids.count != count || chash_haproxy_ids_check(&ids) != CHASH_OK) {
            CHECK(0);
            break;
        }
    }
    chash_haproxy_ids_free(&ids);
}

int main(void)
{
    test_numbering();
    test_largest_id();
    test_allocation();
    test_check();
    test_model();
    return check_report();
}
