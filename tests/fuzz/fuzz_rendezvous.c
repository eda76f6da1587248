/*
 * fuzz_rendezvous.c - libFuzzer target for the rendezvous node sets
 * (strategies/rendezvous.h): every entry point (chash_rdv_build, _free,
 * _size, _layout_of, _lookup, _lookup_hash, _rank, _share, _check,
 * _carp_hash, _murmur3_32) over any bytes.
 *
 * The input: a layout byte (mod 4), a failing-allocation byte (0: none;
 * b: allocation b - 1 of the build fails), a node count byte (mod 25),
 * then per node a length byte (mod 16), its bytes and a weight byte (hrw
 * (b + 1) / 8, squid 1 + b, the others 1; 0xFF asks for a weight the
 * layout refuses, which must give CHASH_EINVAL); the rest is keys, each a
 * length byte (mod 64) and its bytes (reading past the end gives zeros).
 * Names may repeat: the set must stay memory-safe, though the router never
 * builds one so.
 *
 * For every key: the lookup's winner is the rank's first, the rank is a
 * permutation, hrw's lookup by the key's XXH64 agrees; a lookup never
 * fails on a set with nodes except where caddy and squid pick none.  The
 * shares sum to 1, chash_rdv_check() passes, the resumed murmur3 equals
 * the one-shot one on every split of the key.  rendezvous.c is included
 * here with an allocator that fails on demand.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_NAME "fuzz_rendezvous"
#include "fuzz_support.h"

#define CHASH_MALLOC fz_malloc
#define CHASH_FREE free
#include "strategies/mix.c"
#include "strategies/rendezvous.c"

#define MAXN 24

typedef struct {
    const uint8_t *data;
    size_t size, at;
} reader;

static uint8_t next(reader *r)
{
    return r->at < r->size ? r->data[r->at++] : 0;
}

/* Up to n bytes into out (zeros past the end); how many were wanted. */
static size_t take(reader *r, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = next(r);
    return n;
}

static double weight_of(chash_rdv_layout layout, uint8_t b, int *refused)
{
    if (b == 0xFF) {
        *refused = 1;
        return layout == CHASH_RDV_SQUID ? 0.5 : layout == CHASH_RDV_HRW ? -1.0 : 2.0;
    }
    if (layout == CHASH_RDV_HRW)
        return (double)(b + 1) / 8.0;
    if (layout == CHASH_RDV_SQUID)
        return 1.0 + (double)b;
    return 1.0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size, 0};
    chash_rdv_layout layout = (chash_rdv_layout)(next(&r) % CHASH_RDV_LAYOUT_COUNT);
    uint8_t fail = next(&r);
    size_t n = next(&r) % (MAXN + 1);
    uint8_t names[MAXN][16];
    const char *ids[MAXN];
    size_t lens[MAXN];
    double weights[MAXN];
    int refused = 0;
    for (size_t k = 0; k < n; k++) {
        lens[k] = take(&r, names[k], next(&r) % 16);
        ids[k] = (const char *)names[k];
        weights[k] = weight_of(layout, next(&r), &refused);
    }
    chash_rdv_set *set = NULL;
    fz_countdown = fail ? fail - 1 : -1;
    int status = chash_rdv_build(layout, n, ids, lens, ids, lens, weights, &set);
    fz_countdown = -1;
    if (refused) {
        FZ_ASSERT(status == CHASH_EINVAL && set == NULL);
        return 0;
    }
    if (status == CHASH_ENOMEM) {
        FZ_ASSERT(set == NULL && fail);
        return 0;
    }
    FZ_ASSERT(status == CHASH_OK && set);
    FZ_ASSERT(chash_rdv_size(set) == n && chash_rdv_layout_of(set) == layout);
    FZ_ASSERT(chash_rdv_check(set) == CHASH_OK);
    double sum = 0.0;
    for (size_t k = 0; k <= n; k++)
        sum += chash_rdv_share(set, k);
    FZ_ASSERT(n == 0 || fabs(sum - 1.0) < 1e-9);
    for (int keys = 0; keys < 64 && r.at < r.size; keys++) {
        uint8_t key[64];
        size_t len = take(&r, key, next(&r) % 64);
        uint32_t winner = UINT32_MAX, order[MAXN];
        int found = chash_rdv_lookup(set, key, len, &winner);
        int ranked = chash_rdv_rank(set, key, len, order);
        if (n == 0) {
            FZ_ASSERT(found == CHASH_ENOENT && ranked == CHASH_ENOENT);
            continue;
        }
        FZ_ASSERT(ranked == CHASH_OK);
        if (layout == CHASH_RDV_HRW || layout == CHASH_RDV_PYMEMCACHE)
            FZ_ASSERT(found == CHASH_OK);
        else
            FZ_ASSERT(found == CHASH_OK || found == CHASH_ENOENT);
        if (found == CHASH_OK)
            FZ_ASSERT(winner < n && order[0] == winner);
        uint8_t seen[MAXN] = {0};
        for (size_t i = 0; i < n; i++) {
            FZ_ASSERT(order[i] < n && !seen[order[i]]);
            seen[order[i]] = 1;
        }
        uint32_t by_hash;
        int hashed = chash_rdv_lookup_hash(set, chash_xxh64(key, len, 0), &by_hash);
        if (layout == CHASH_RDV_HRW)
            FZ_ASSERT(hashed == CHASH_OK && by_hash == winner);
        else
            FZ_ASSERT(hashed == CHASH_EINVAL);
        uint32_t whole = chash_murmur3_32(key, len, 0);
        for (size_t cut = 0; cut <= len; cut++)
            FZ_ASSERT(chash_rdv_murmur3_32(key, cut, key + cut, len - cut) == whole);
        (void)chash_rdv_carp_hash(key, len);
    }
    /* The check's own allocations failing. */
    fz_countdown = 0;
    int checked = chash_rdv_check(set);
    fz_countdown = -1;
    FZ_ASSERT(checked == CHASH_ENOMEM);
    chash_rdv_free(set);
    return 0;
}
