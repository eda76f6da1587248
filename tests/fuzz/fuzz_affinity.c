/*
 * fuzz_affinity.c - libFuzzer target for prefix-cache affinity
 * (strategies/affinity.h): every entry point against a plain model (an
 * array a slot, most recent last, searched linearly).
 *
 * The input is read as a program: each operation byte picks a call, the
 * bytes after it are its arguments (reading past the end gives zeros).
 *
 *   ADD       chash_affinity_add: the lowest free slot, as the model says;
 *   REMOVE    a slot byte: CHASH_ENOENT exactly when the model has none;
 *   RECORD    a slot byte, a count byte, that many block bytes;
 *   CHOOSE    a count byte of candidates (slot, load, queued bytes each),
 *             weights and blocks: the choice must be the model's cheapest;
 *   TEXT      a length byte and that many bytes: the chained hashes of them
 *             as text, each block's hash the XXH64 of its bytes seeded by the
 *             one before, block boundaries at code points;
 *   TOKENS    a length byte and tokens: block counts and prefix equality;
 *   FAILNEXT  a byte: that many allocations succeed, then one fails; a
 *             call given CHASH_ENOMEM must leave the table as it was.
 *
 * After every step chash_affinity_check() must pass and every slot must
 * hold (match and size) what the model holds.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_NAME "fuzz_affinity"
#include "fuzz_support.h"

#define CHASH_MALLOC fz_malloc
#define CHASH_REALLOC fz_realloc
#define CHASH_FREE free
#include "strategies/affinity.c"
#include "strategies/mix.c"

#include "../c/affinity_model.h"

enum { OP_ADD, OP_REMOVE, OP_RECORD, OP_CHOOSE, OP_TEXT, OP_TOKENS, OP_FAILNEXT, OP_COUNT };
enum { MAX_SLOTS = 12, CAP = 6 };

typedef struct {
    const uint8_t *data;
    size_t size, at;
} reader;

static uint8_t next(reader *r)
{
    return r->at < r->size ? r->data[r->at++] : 0;
}

/* A slot's match: none for a slot not in use. */
static size_t slot_match(const model_lru *m, const uint64_t *blocks, size_t n)
{
    return m->used ? model_match(m, blocks, n) : 0;
}

static size_t read_blocks(reader *r, uint64_t *blocks)
{
    size_t n = next(r) % 9;
    for (size_t k = 0; k < n; k++)
        blocks[k] = next(r) % 16;
    return n;
}

static void op_choose(reader *r, chash_affinity *t, model_lru *model)
{
    chash_affinity_candidate cands[MAX_SLOTS];
    size_t count = next(r) % (MAX_SLOTS + 1);
    int valid = count > 0;
    for (size_t i = 0; i < count; i++) {
        cands[i].slot = next(r) % MAX_SLOTS;
        cands[i].load = next(r);
        uint8_t q = next(r);
        cands[i].queued = q == 255 ? -1.0 : q * 10.0;
        valid = valid && model[cands[i].slot].used && cands[i].queued >= 0;
    }
    chash_affinity_weights w = {next(r) * 10.0, next(r), next(r) % 5, next(r), next(r) % 4};
    uint64_t blocks[8];
    size_t n = read_blocks(r, blocks);
    size_t choice = 999;
    int status = chash_affinity_choose(t, cands, count, blocks, n, &w, &choice);
    FZ_ASSERT(status == (valid ? CHASH_OK : CHASH_EINVAL));
    if (!valid)
        return;
    double tokens = w.tokens > 0 ? w.tokens : (double)n * w.block_tokens;
    double best = INFINITY;
    size_t want = 0;
    for (size_t i = 0; i < count; i++) {
        size_t hits = slot_match(&model[cands[i].slot], blocks, n);
        double cost = cands[i].queued + w.miss_cost * fmax(0.0, tokens - (double)hits * w.block_tokens)
                      + (double)i * w.rank_cost + cands[i].load * w.load_cost;
        if (cost < best) {
            best = cost;
            want = i;
        }
    }
    FZ_ASSERT(choice == want);
}

static void op_text(reader *r)
{
    char text[64];
    size_t len = next(r) % 64, block = next(r) % 5, limit = next(r) % 10;
    for (size_t i = 0; i < len; i++)
        text[i] = (char)next(r);
    uint64_t out[64];
    size_t count = 0;
    int status = chash_prefix_blocks_utf8(text, len, block, limit, out, &count);
    FZ_ASSERT(status == (block ? CHASH_OK : CHASH_EINVAL));
    if (!block)
        return;
    /* Rebuild the boundaries: a block ends before the code point that
     * would be its block+1-th. */
    uint64_t h = CHASH_PREFIX_TEXT_SEED;
    size_t start = 0, made = 0;
    while (start < len && made < limit) {
        size_t end = start, points = 0;
        while (end < len && !(((unsigned char)text[end] & 0xC0) != 0x80 && points == block)) {
            if (((unsigned char)text[end] & 0xC0) != 0x80)
                points++;
            end++;
        }
        h = chash_xxh64(text + start, end - start, h);
        FZ_ASSERT(made < count && out[made] == h);
        made++;
        start = end;
    }
    FZ_ASSERT(made == count);
}

static void op_tokens(reader *r)
{
    uint64_t a[32], b[32], ha[40], hb[40];
    size_t n = next(r) % 32, block = next(r) % 6 + 1, cut = next(r) % 33;
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = next(r) % 4;
    if (cut < n)
        b[cut] ^= 1; /* the prefixes agree before cut's block */
    size_t na, nb;
    FZ_ASSERT(chash_prefix_blocks_tokens(a, n, block, 40, ha, &na) == CHASH_OK);
    FZ_ASSERT(chash_prefix_blocks_tokens(b, n, block, 40, hb, &nb) == CHASH_OK);
    FZ_ASSERT(na == (n + block - 1) / block && nb == na);
    for (size_t k = 0; k < na; k++)
        FZ_ASSERT((ha[k] == hb[k]) == (cut >= n || k < cut / block));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size, 0};
    chash_affinity *t = chash_affinity_new(CAP);
    if (!t)
        return 0;
    model_lru model[MAX_SLOTS];
    memset(model, 0, sizeof model);
    uint64_t blocks[8];
    while (r.at < r.size) {
        switch (next(&r) % OP_COUNT) {
        case OP_ADD: {
            size_t want = 0;
            while (want < MAX_SLOTS && model[want].used)
                want++;
            if (want == MAX_SLOTS)
                break;
            size_t slot = 999;
            int status = chash_affinity_add(t, &slot);
            FZ_ASSERT(status == CHASH_OK || status == CHASH_ENOMEM);
            if (status == CHASH_OK) {
                FZ_ASSERT(slot == want);
                model[want].used = 1;
                model[want].n = 0;
            }
            break;
        }
        case OP_REMOVE: {
            size_t slot = next(&r) % (MAX_SLOTS + 2);
            int used = slot < MAX_SLOTS && model[slot].used;
            FZ_ASSERT(chash_affinity_remove(t, slot) == (used ? CHASH_OK : CHASH_ENOENT));
            if (used)
                model[slot].used = 0;
            break;
        }
        case OP_RECORD: {
            size_t slot = next(&r) % (MAX_SLOTS + 2);
            size_t n = read_blocks(&r, blocks);
            int used = slot < MAX_SLOTS && model[slot].used;
            FZ_ASSERT(chash_affinity_record(t, slot, blocks, n) == (used ? CHASH_OK : CHASH_ENOENT));
            for (size_t k = 0; used && k < n; k++)
                model_touch(&model[slot], blocks[k], CAP);
            break;
        }
        case OP_CHOOSE:
            op_choose(&r, t, model);
            break;
        case OP_TEXT:
            op_text(&r);
            break;
        case OP_TOKENS:
            op_tokens(&r);
            break;
        default:
            fz_countdown = next(&r) % 4;
            break;
        }
        FZ_ASSERT(chash_affinity_check(t) == CHASH_OK);
        size_t n = read_blocks(&r, blocks);
        for (size_t s = 0; s < MAX_SLOTS; s++) {
            FZ_ASSERT(chash_affinity_held(t, s) == (model[s].used ? model[s].n : 0));
            FZ_ASSERT(chash_affinity_match(t, s, blocks, n) == slot_match(&model[s], blocks, n));
        }
    }
    fz_countdown = -1;
    chash_affinity_free(t);
    return 0;
}
