/*
 * haproxy_ids.c - the haproxy layout's server ids and HAProxy's numbering
 * (haproxy_ids.h): a sorted array of the ids in use and the counter.
 */
#include "haproxy_ids.h"

#include "alloc.h"
#include "chash.h"

#include <string.h>

void chash_haproxy_ids_init(chash_haproxy_ids *ids)
{
    ids->used = NULL;
    ids->count = ids->cap = 0;
    ids->next = 1;
}

void chash_haproxy_ids_free(chash_haproxy_ids *ids)
{
    CHASH_FREE(ids->used);
    chash_haproxy_ids_init(ids);
}

uint32_t chash_haproxy_ids_next(const chash_haproxy_ids *ids)
{
    return ids->next ? ids->next : 1;
}

/* Index of the first used id >= id. */
static size_t lower_bound(const chash_haproxy_ids *ids, uint32_t id)
{
    size_t lo = 0, hi = ids->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids->used[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int chash_haproxy_ids_contains(const chash_haproxy_ids *ids, uint32_t id)
{
    size_t at = lower_bound(ids, id);
    return at < ids->count && ids->used[at] == id;
}

uint32_t chash_haproxy_ids_first_free(const chash_haproxy_ids *ids, uint32_t from)
{
    if (from == 0)
        from = 1;
    if (from > CHASH_HAPROXY_MAX_ID)
        return 0;
    /* The used ids from `from` on are consecutive up to the first gap. */
    size_t at = lower_bound(ids, from);
    while (at < ids->count && ids->used[at] == from) {
        if (from == CHASH_HAPROXY_MAX_ID)
            return 0;
        from++;
        at++;
    }
    return from;
}

int chash_haproxy_ids_reserve(chash_haproxy_ids *ids, size_t n)
{
    if (ids->cap - ids->count >= n)
        return CHASH_OK;
    /* At most CHASH_HAPROXY_MAX_ID ids exist; a larger request is refused
     * before its size can overflow. */
    if (n > (size_t)CHASH_HAPROXY_MAX_ID - ids->count)
        return CHASH_ENOMEM;
    size_t cap = ids->cap ? 2 * ids->cap : 8;
    while (cap - ids->count < n)
        cap *= 2;
    if (cap > SIZE_MAX / sizeof *ids->used)
        return CHASH_ENOMEM;
    uint32_t *grown = CHASH_REALLOC(ids->used, cap * sizeof *grown);
    if (!grown)
        return CHASH_ENOMEM;
    ids->used = grown;
    ids->cap = cap;
    return CHASH_OK;
}

int chash_haproxy_ids_take(chash_haproxy_ids *ids, uint32_t id, uint32_t *taken)
{
    *taken = 0;
    uint32_t next = chash_haproxy_ids_next(ids);
    if (id > CHASH_HAPROXY_MAX_ID)
        return CHASH_EINVAL;
    if (id && chash_haproxy_ids_contains(ids, id))
        return CHASH_EEXIST;
    uint32_t chosen = id ? id : chash_haproxy_ids_first_free(ids, next);
    if (chosen == 0)
        return CHASH_ERANGE;
    int status = chash_haproxy_ids_reserve(ids, 1);
    if (status != CHASH_OK)
        return status;
    size_t at = lower_bound(ids, chosen);
    memmove(ids->used + at + 1, ids->used + at, (ids->count - at) * sizeof *ids->used);
    ids->used[at] = chosen;
    ids->count++;
    /* HAProxy's next_id++: one past the id taken, or one step for an
     * explicit id; it never passes the largest id. */
    uint32_t from = id ? next : chosen;
    ids->next = from < CHASH_HAPROXY_MAX_ID ? from + 1 : CHASH_HAPROXY_MAX_ID;
    *taken = chosen;
    return CHASH_OK;
}

int chash_haproxy_ids_release(chash_haproxy_ids *ids, uint32_t id)
{
    size_t at = lower_bound(ids, id);
    if (at == ids->count || ids->used[at] != id)
        return CHASH_ENOENT;
    memmove(ids->used + at, ids->used + at + 1, (ids->count - at - 1) * sizeof *ids->used);
    ids->count--;
    return CHASH_OK;
}

int chash_haproxy_ids_check(const chash_haproxy_ids *ids)
{
    if (ids->count > ids->cap || (ids->cap == 0) != (ids->used == NULL))
        return CHASH_ECORRUPT;
    if (ids->next > CHASH_HAPROXY_MAX_ID)
        return CHASH_ECORRUPT;
    for (size_t i = 0; i < ids->count; i++) {
        uint32_t id = ids->used[i];
        if (id == 0 || id > CHASH_HAPROXY_MAX_ID || (i > 0 && ids->used[i - 1] >= id))
            return CHASH_ECORRUPT;
    }
    return CHASH_OK;
}
