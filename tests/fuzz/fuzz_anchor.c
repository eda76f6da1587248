/*
 * fuzz_anchor.c - libFuzzer target for JumpBackHash and JumpBackAnchor
 * (strategies/jumpback.h, strategies/anchor.h): every entry point
 * (chash_jumpback, _assign, _walk; chash_anchor_new, _free, _add, _remove,
 * _lookup, _size, _high, _contains, _buckets, _state_size, _state,
 * _set_state, _check) over any bytes.
 *
 * The first byte picks a mode (mod 3):
 *   0  the rest is a state, parsed as it is (arbitrary bytes);
 *   1  the rest is a state with ids folded below a small high (byte 1 mod
 *      64), so that parses mostly succeed;
 *   2  the rest is a script of operations on one set, checked against a
 *      model (the live ids, the stack of removed ids, what add returns).
 * Whatever parses is then checked: chash_anchor_check() passes, its state
 * reads back to the same bytes, every lookup is a live bucket; a refused
 * parse leaves the set exactly as it was.  A script's removal moves only
 * the removed bucket's probe keys, an add moves keys only to the new
 * bucket; a failed allocation (the script can ask for one) changes
 * nothing.  JumpBackHash of each probe stays below n and keeps jump's
 * contract from n to n + 1.  anchor.c is included here with an allocator
 * that fails on demand.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_NAME "fuzz_anchor"
#include "fuzz_support.h"

#define CHASH_MALLOC fz_malloc
#define CHASH_REALLOC fz_realloc
#define CHASH_FREE free
#include "strategies/anchor.c"
#include "strategies/jumpback.c"

#define NPROBES 16
#define MAXIDS 96

static uint64_t probe(int i)
{
    chash_splitmix64 g = {(uint64_t)i * 0x51ed2701u};
    return chash_splitmix64_next(&g);
}

/* The state as bytes (malloc'd), its length in *len. */
static uint8_t *state_of(const chash_anchor *a, size_t *len)
{
    *len = chash_anchor_state_size(a);
    uint8_t *s = malloc(*len);
    FZ_ASSERT(s && chash_anchor_state(a, s, *len) == CHASH_OK);
    if (*len > 0)
        FZ_ASSERT(chash_anchor_state(a, s, *len - 1) == CHASH_EINVAL);
    return s;
}

/* Everything a well-formed set promises. */
static void check_set(const chash_anchor *a)
{
    FZ_ASSERT(chash_anchor_check(a) == CHASH_OK);
    uint32_t n = chash_anchor_size(a);
    FZ_ASSERT(n <= chash_anchor_high(a));
    for (int i = 0; i < NPROBES; i++) {
        uint32_t b = UINT32_MAX;
        int rc = chash_anchor_lookup(a, probe(i), &b);
        if (n == 0) {
            FZ_ASSERT(rc == CHASH_ENOENT);
        } else {
            FZ_ASSERT(rc == CHASH_OK && chash_anchor_contains(a, b));
        }
    }
    if (chash_anchor_high(a) <= 4096) {
        uint32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
        FZ_ASSERT(ids);
        chash_anchor_buckets(a, ids);
        for (uint32_t k = 0; k < n; k++) {
            FZ_ASSERT(chash_anchor_contains(a, ids[k]));
            FZ_ASSERT(k == 0 || ids[k - 1] < ids[k]);
        }
        free(ids);
    }
    /* The state reads back to itself. */
    size_t len;
    uint8_t *s = state_of(a, &len);
    chash_anchor *b = chash_anchor_new();
    FZ_ASSERT(b && chash_anchor_set_state(b, s, len) == CHASH_OK);
    size_t len2;
    uint8_t *s2 = state_of(b, &len2);
    FZ_ASSERT(len2 == len && memcmp(s, s2, len) == 0);
    /* A probe's preference list is what removing each bucket in turn from
     * the copy gives, and leaves the set as it was. */
    uint32_t pref[6];
    size_t found = 0;
    int rc = chash_anchor_preference(a, probe(3), 6, pref, &found);
    FZ_ASSERT(rc == (n ? CHASH_OK : CHASH_ENOENT));
    FZ_ASSERT(found == (n < 6 ? n : 6));
    for (size_t k = 0; k < found; k++) {
        uint32_t got = UINT32_MAX;
        FZ_ASSERT(chash_anchor_lookup(b, probe(3), &got) == CHASH_OK && got == pref[k]);
        FZ_ASSERT(chash_anchor_remove(b, got) == CHASH_OK);
    }
    uint8_t *s3 = state_of(a, &len2);
    FZ_ASSERT(len2 == len && memcmp(s, s3, len) == 0);
    free(s3);
    free(s2);
    free(s);
    chash_anchor_free(b);
}

/* A parse of any bytes: refused with the set unchanged, or accepted and
 * well formed. */
static void parse(const uint8_t *data, size_t size)
{
    chash_anchor *a = chash_anchor_new();
    FZ_ASSERT(a);
    uint32_t b;
    for (int i = 0; i < 5; i++)
        FZ_ASSERT(chash_anchor_add(a, &b) == CHASH_OK);
    FZ_ASSERT(chash_anchor_remove(a, 2) == CHASH_OK);
    size_t len0;
    uint8_t *before = state_of(a, &len0);
    int rc = chash_anchor_set_state(a, data, size);
    if (rc == CHASH_OK) {
        size_t len;
        uint8_t *s = state_of(a, &len);
        FZ_ASSERT(len == size && memcmp(s, data, size) == 0);
        free(s);
        check_set(a);
    } else {
        FZ_ASSERT(rc == CHASH_EINVAL || rc == CHASH_ERANGE);
        size_t len;
        uint8_t *s = state_of(a, &len);
        FZ_ASSERT(len == len0 && memcmp(s, before, len) == 0);
        free(s);
    }
    free(before);
    chash_anchor_free(a);
}

static void jumpback_probe(uint64_t h, uint32_t n)
{
    uint32_t b = chash_jumpback(h, n);
    FZ_ASSERT(b < n);
    if (n < CHASH_JUMPBACK_MAX_BUCKETS) {
        uint32_t c = chash_jumpback(h, n + 1);
        FZ_ASSERT(c == b || c == n);
    }
    uint32_t out = UINT32_MAX;
    FZ_ASSERT(chash_jumpback_assign(&h, 1, n, &out) == CHASH_OK && out == b);
}

/* A script against a model: each op byte's low two bits pick add, remove
 * (the next byte names the id: mod MAXIDS, 0xFF an id never used), a
 * failed allocation armed for the next op, or a round trip through the
 * state. */
static void script(const uint8_t *data, size_t size)
{
    chash_anchor *a = chash_anchor_new();
    FZ_ASSERT(a);
    uint8_t live[MAXIDS + 1] = {0};
    uint32_t stack[MAXIDS], depth = 0, high = 0, nlive = 0;
    uint32_t before[NPROBES], after[NPROBES];
    size_t at = 0;
    while (at < size) {
        uint8_t op = data[at++];
        uint8_t arg = at < size ? data[at] : 0;
        for (int i = 0; i < NPROBES; i++)
            if (chash_anchor_lookup(a, probe(i), &before[i]) != CHASH_OK)
                before[i] = UINT32_MAX;
        int kind = op & 3;
        uint32_t b = UINT32_MAX;
        if (kind == 0) {
            if (nlive >= MAXIDS)
                continue;
            FZ_ASSERT(chash_anchor_add(a, &b) == CHASH_OK);
            /* hash4j's rule: the last removed id, else high */
            uint32_t want = depth > 0 ? stack[--depth] : high++;
            FZ_ASSERT(b == want);
            live[b] = 1;
            nlive++;
        } else if (kind == 1) {
            at++;
            b = arg == 0xFF ? UINT32_MAX - 1 : arg % MAXIDS;
            int rc = chash_anchor_remove(a, b);
            if (b >= high || !live[b]) {
                FZ_ASSERT(rc == CHASH_ENOENT);
                continue;
            }
            if (rc == CHASH_ENOMEM) {
                FZ_ASSERT(chash_anchor_contains(a, b));
                check_set(a);
                continue;
            }
            FZ_ASSERT(rc == CHASH_OK);
            live[b] = 0;
            nlive--;
            if (nlive == 0) {
                high = depth = 0;
            } else if (b == high - 1 && depth == 0) {
                high--;
            } else {
                stack[depth++] = b;
            }
        } else if (kind == 2) {
            fz_countdown = (long)(op >> 2) % 3;
            continue;
        } else {
            size_t len;
            uint8_t *s = state_of(a, &len);
            chash_anchor *c = chash_anchor_new();
            if (!c) {
                free(s);
                continue;
            }
            int rc = chash_anchor_set_state(c, s, len);
            FZ_ASSERT(rc == CHASH_OK || rc == CHASH_ENOMEM);
            if (rc == CHASH_OK) {
                chash_anchor_free(a);
                a = c;
            } else {
                chash_anchor_free(c);
            }
            free(s);
        }
        fz_countdown = -1;
        FZ_ASSERT(chash_anchor_size(a) == nlive && chash_anchor_high(a) == high);
        FZ_ASSERT(chash_anchor_state_size(a) == 4 + 4 * (size_t)depth);
        for (uint32_t id = 0; id < MAXIDS; id++)
            FZ_ASSERT(chash_anchor_contains(a, id) == (id < high && live[id]));
        check_set(a);
        for (int i = 0; i < NPROBES; i++) {
            if (chash_anchor_lookup(a, probe(i), &after[i]) != CHASH_OK)
                after[i] = UINT32_MAX;
            if (before[i] == UINT32_MAX || after[i] == UINT32_MAX)
                continue;
            if (kind == 0)
                FZ_ASSERT(after[i] == before[i] || after[i] == b);
            else if (kind == 1)
                FZ_ASSERT(before[i] == b ? after[i] != b : after[i] == before[i]);
            else
                FZ_ASSERT(after[i] == before[i]);
        }
        if (nlive > 0)
            jumpback_probe(probe(op), nlive);
    }
    fz_countdown = -1;
    chash_anchor_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    fz_countdown = -1;
    uint8_t mode = data[0] % 3;
    data++;
    size--;
    if (mode == 0) {
        parse(data, size);
        if (size >= 12) {
            uint64_t h;
            uint32_t n;
            memcpy(&h, data, 8);
            memcpy(&n, data + 8, 4);
            n = n % CHASH_JUMPBACK_MAX_BUCKETS + 1;
            jumpback_probe(h, n);
        }
    } else if (mode == 1) {
        if (size < 1)
            return 0;
        uint32_t high = data[0] % 64;
        size_t n = (size - 1) / 4;
        uint8_t *s = malloc(4 + 4 * n);
        FZ_ASSERT(s);
        put_le32(s, high);
        for (size_t r = 0; r < n; r++)
            put_le32(s + 4 + 4 * r, high ? get_le32(data + 1 + 4 * r) % (high + 1) : 0);
        parse(s, 4 + 4 * n);
        free(s);
    } else {
        script(data, size);
    }
    return 0;
}
