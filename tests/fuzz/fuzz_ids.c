/*
 * fuzz_ids.c - libFuzzer target for the haproxy layout's server ids
 * (engine/haproxy_ids.h): every entry point, against a plain model (an
 * unsorted list of ids and the counter, searched linearly).
 *
 * The input is read as a program: each operation byte picks a call, the
 * bytes after it are its arguments (reading past the end gives zeros).  An
 * id byte b names id b below 0xC0 (0: automatic, for a take) and
 * CHASH_HAPROXY_MAX_ID - (b - 0xC0) above, so runs meet both ends.
 *
 *   TAKE       an id byte: chash_haproxy_ids_take, the status and the id
 *              the model's numbering gives (HAProxy's rule);
 *   TAKE32     the same with four bytes of id, above the largest too;
 *   RELEASE    an id byte: CHASH_ENOENT exactly when the model lacks it;
 *   RESERVE    a count byte (0xFF: SIZE_MAX, refused);
 *   FREE_FROM  an id byte: chash_haproxy_ids_first_free against the model;
 *   SET_NEXT   an id byte: the counter restored, as a pickle does;
 *   FAILNEXT   a byte: that many allocations succeed, then one fails; a
 *              call given CHASH_ENOMEM must leave the set as it was.
 *
 * After every step chash_haproxy_ids_check() must pass and the set must
 * hold the model's ids and counter; contains is asked for each of them.
 * haproxy_ids.c is included here with an allocator that fails on demand.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_NAME "fuzz_ids"
#include "fuzz_support.h"

#define CHASH_REALLOC fz_realloc
#define CHASH_FREE free
#include "engine/haproxy_ids.c"

enum { OP_TAKE, OP_TAKE32, OP_RELEASE, OP_RESERVE, OP_FREE_FROM, OP_SET_NEXT, OP_FAILNEXT, OP_COUNT };

typedef struct {
    const uint8_t *data;
    size_t size, at;
} reader;

static uint8_t byte(reader *r) { return r->at < r->size ? r->data[r->at++] : 0; }

static uint32_t id_byte(reader *r)
{
    uint8_t b = byte(r);
    return b < 0xC0 ? b : CHASH_HAPROXY_MAX_ID - (uint32_t)(b - 0xC0);
}

/* The model: ids in any order, and HAProxy's counter (0 read as 1). */
#define MODEL_MAX 4096
static uint32_t model[MODEL_MAX];
static size_t model_count;
static uint32_t model_next;

static int model_has(uint32_t id)
{
    for (size_t i = 0; i < model_count; i++)
        if (model[i] == id)
            return 1;
    return 0;
}

static uint32_t model_first_free(uint32_t from)
{
    if (from == 0)
        from = 1;
    if (from > CHASH_HAPROXY_MAX_ID)
        return 0;
    while (model_has(from)) {
        if (from == CHASH_HAPROXY_MAX_ID)
            return 0;
        from++;
    }
    return from;
}

static void take(chash_haproxy_ids *ids, uint32_t id, int armed)
{
    uint32_t next = model_next ? model_next : 1;
    uint32_t taken = 7;
    int status = chash_haproxy_ids_take(ids, id, &taken);
    int want;
    uint32_t chosen = 0;
    if (id > CHASH_HAPROXY_MAX_ID)
        want = CHASH_EINVAL;
    else if (id && model_has(id))
        want = CHASH_EEXIST;
    else if ((chosen = id ? id : model_first_free(next)) == 0)
        want = CHASH_ERANGE;
    else
        want = CHASH_OK;
    if (status == CHASH_ENOMEM && want == CHASH_OK && armed) {
        FZ_ASSERT(taken == 0);
        return;
    }
    FZ_ASSERT(status == want);
    if (status != CHASH_OK) {
        FZ_ASSERT(taken == 0);
        return;
    }
    FZ_ASSERT(taken == chosen && model_count < MODEL_MAX);
    model[model_count++] = chosen;
    uint32_t from = id ? next : chosen;
    model_next = from < CHASH_HAPROXY_MAX_ID ? from + 1 : CHASH_HAPROXY_MAX_ID;
}

static void compare(const chash_haproxy_ids *ids)
{
    FZ_ASSERT(chash_haproxy_ids_check(ids) == CHASH_OK);
    FZ_ASSERT(ids->count == model_count);
    FZ_ASSERT(chash_haproxy_ids_next(ids) == (model_next ? model_next : 1));
    for (size_t i = 0; i < model_count; i++)
        FZ_ASSERT(chash_haproxy_ids_contains(ids, model[i]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size, 0};
    chash_haproxy_ids ids;
    chash_haproxy_ids_init(&ids);
    model_count = 0;
    model_next = 1;
    fz_countdown = -1;
    while (r.at < r.size && model_count < MODEL_MAX) {
        int armed = fz_countdown >= 0;
        switch (byte(&r) % OP_COUNT) {
        case OP_TAKE:
            take(&ids, id_byte(&r), armed);
            break;
        case OP_TAKE32: {
            uint32_t id = 0;
            for (int i = 0; i < 4; i++)
                id = id << 8 | byte(&r);
            take(&ids, id, armed);
            break;
        }
        case OP_RELEASE: {
            uint32_t id = id_byte(&r);
            int had = model_has(id);
            FZ_ASSERT(chash_haproxy_ids_release(&ids, id) == (had ? CHASH_OK : CHASH_ENOENT));
            for (size_t i = 0; had && i < model_count; i++)
                if (model[i] == id)
                    model[i] = model[--model_count];
            break;
        }
        case OP_RESERVE: {
            uint8_t b = byte(&r);
            size_t n = b == 0xFF ? SIZE_MAX : b;
            size_t cap = ids.cap;
            int status = chash_haproxy_ids_reserve(&ids, n);
            if (b == 0xFF)
                FZ_ASSERT(status == CHASH_ENOMEM && ids.cap == cap);
            else if (status == CHASH_OK)
                FZ_ASSERT(ids.cap - ids.count >= n);
            else
                FZ_ASSERT(status == CHASH_ENOMEM && armed && ids.cap == cap);
            break;
        }
        case OP_FREE_FROM: {
            uint32_t from = id_byte(&r);
            FZ_ASSERT(chash_haproxy_ids_first_free(&ids, from) == model_first_free(from));
            break;
        }
        case OP_SET_NEXT:
            ids.next = model_next = id_byte(&r);
            break;
        case OP_FAILNEXT:
            fz_countdown = byte(&r);
            break;
        }
        compare(&ids);
    }
    chash_haproxy_ids_free(&ids);
    FZ_ASSERT(ids.used == NULL && ids.count == 0 && ids.next == 1);
    return 0;
}
