/*
 * affinity.c - prefix-cache affinity (affinity.h): chained block hashes,
 * a bounded LRU of block hashes a node, and the choice along a preference
 * order.
 *
 * A slot's LRU is one array of `capacity` entries and a power-of-two array
 * of bucket heads, both allocated when the slot is added: an entry is on a
 * bucket's chain (by its key's top bits after a mix) and on the recency
 * list (doubly linked, head the most recent), or on the free list.  Indexes
 * are 32-bit with NIL for none, so an entry is 24 bytes.
 */
#include "affinity.h"

#include "engine/alloc.h"
#include "engine/chash.h"
#include "hash/hash.h"
#include "mix.h"

#include <math.h>
#include <string.h>

#define NIL UINT32_MAX

typedef struct {
    uint64_t key;
    uint32_t chain; /* next entry in the bucket, or NIL */
    uint32_t newer; /* towards the head of the recency list, or NIL */
    uint32_t older; /* towards the tail, or NIL; the free list's next */
} lru_entry;

typedef struct {
    uint32_t size;
    uint32_t head; /* most recent, or NIL */
    uint32_t tail; /* least recent, or NIL */
    uint32_t free; /* first unused entry, or NIL */
    unsigned shift; /* 64 - log2(buckets) */
    uint32_t *buckets;
    lru_entry *entries;
} lru;

struct chash_affinity {
    uint32_t capacity;
    size_t slots;  /* slots allocated in `nodes` */
    lru **nodes;   /* NULL: a free slot */
};

/* -- chained block hashes -------------------------------------------- */

int chash_prefix_blocks_utf8(const char *text, size_t len, size_t block, size_t limit,
                             uint64_t *out, size_t *count)
{
    if (block == 0)
        return CHASH_EINVAL;
    uint64_t h = CHASH_PREFIX_TEXT_SEED;
    size_t made = 0, start = 0, i = 0;
    while (start < len && made < limit) {
        /* Step over `block` code points: a byte 10xxxxxx continues one. */
        size_t points = 0;
        i = start;
        while (i < len) {
            if (((unsigned char)text[i] & 0xC0) != 0x80) {
                if (points == block)
                    break;
                points++;
            }
            i++;
        }
        h = chash_xxh64(text + start, i - start, h);
        out[made++] = h;
        start = i;
    }
    *count = made;
    return CHASH_OK;
}

int chash_prefix_blocks_tokens(const uint64_t *tokens, size_t n, size_t block, size_t limit,
                               uint64_t *out, size_t *count)
{
    if (block == 0)
        return CHASH_EINVAL;
    uint64_t h = CHASH_PREFIX_TOKEN_SEED;
    size_t made = 0;
    for (size_t start = 0; start < n && made < limit; start += block) {
        size_t end = n - start < block ? n : start + block;
        /* Each token folded through the mixer (a bijection), then the
         * block's length, so a partial block differs from a full one. */
        uint64_t acc = h;
        for (size_t i = start; i < end; i++)
            acc = chash_mix64(acc ^ tokens[i]) + 0x9E3779B97F4A7C15ULL;
        h = chash_mix64(acc ^ (uint64_t)(end - start));
        out[made++] = h;
    }
    *count = made;
    return CHASH_OK;
}

/* -- one slot's LRU ---------------------------------------------------- */

static uint32_t bucket_of(const lru *l, uint64_t key)
{
    return (uint32_t)(chash_mix64(key) >> l->shift);
}

static lru *lru_new(uint32_t capacity)
{
    unsigned bits = 1;
    while (bits < 31 && (1u << bits) < capacity)
        bits++;
    lru *l = CHASH_MALLOC(sizeof *l);
    if (!l)
        return NULL;
    size_t nbuckets = (size_t)1 << bits;
    l->buckets = CHASH_MALLOC(nbuckets * sizeof *l->buckets);
    l->entries = CHASH_MALLOC((size_t)capacity * sizeof *l->entries);
    if (!l->buckets || !l->entries) {
        CHASH_FREE(l->buckets);
        CHASH_FREE(l->entries);
        CHASH_FREE(l);
        return NULL;
    }
    l->shift = 64u - bits;
    for (size_t b = 0; b < nbuckets; b++)
        l->buckets[b] = NIL;
    for (uint32_t e = 0; e < capacity; e++)
        l->entries[e].older = e + 1 < capacity ? e + 1 : NIL;
    l->free = 0;
    l->size = 0;
    l->head = l->tail = NIL;
    return l;
}

static void lru_free(lru *l)
{
    if (l) {
        CHASH_FREE(l->buckets);
        CHASH_FREE(l->entries);
        CHASH_FREE(l);
    }
}

static uint32_t lru_find(const lru *l, uint64_t key)
{
    uint32_t e = l->buckets[bucket_of(l, key)];
    while (e != NIL && l->entries[e].key != key)
        e = l->entries[e].chain;
    return e;
}

static void unlink_recency(lru *l, uint32_t e)
{
    lru_entry *x = &l->entries[e];
    if (x->newer != NIL)
        l->entries[x->newer].older = x->older;
    else
        l->head = x->older;
    if (x->older != NIL)
        l->entries[x->older].newer = x->newer;
    else
        l->tail = x->newer;
}

static void push_head(lru *l, uint32_t e)
{
    lru_entry *x = &l->entries[e];
    x->newer = NIL;
    x->older = l->head;
    if (l->head != NIL)
        l->entries[l->head].newer = e;
    else
        l->tail = e;
    l->head = e;
}

/* The least recent entry taken off its chain and the recency list. */
static uint32_t evict(lru *l)
{
    uint32_t e = l->tail;
    unlink_recency(l, e);
    uint32_t *link = &l->buckets[bucket_of(l, l->entries[e].key)];
    while (*link != e)
        link = &l->entries[*link].chain;
    *link = l->entries[e].chain;
    l->size--;
    return e;
}

static void lru_touch(lru *l, uint32_t capacity, uint64_t key)
{
    uint32_t e = lru_find(l, key);
    if (e != NIL) {
        if (l->head != e) {
            unlink_recency(l, e);
            push_head(l, e);
        }
        return;
    }
    if (l->size == capacity) {
        e = evict(l);
    } else {
        e = l->free;
        l->free = l->entries[e].older;
    }
    uint32_t b = bucket_of(l, key);
    l->entries[e].key = key;
    l->entries[e].chain = l->buckets[b];
    l->buckets[b] = e;
    push_head(l, e);
    l->size++;
}

/* -- the table ------------------------------------------------------- */

chash_affinity *chash_affinity_new(size_t capacity)
{
    if (capacity == 0 || capacity > CHASH_AFFINITY_MAX_CAPACITY)
        return NULL;
    chash_affinity *t = CHASH_MALLOC(sizeof *t);
    if (!t)
        return NULL;
    t->capacity = (uint32_t)capacity;
    t->slots = 0;
    t->nodes = NULL;
    return t;
}

void chash_affinity_free(chash_affinity *table)
{
    if (!table)
        return;
    for (size_t s = 0; s < table->slots; s++)
        lru_free(table->nodes[s]);
    CHASH_FREE(table->nodes);
    CHASH_FREE(table);
}

size_t chash_affinity_capacity(const chash_affinity *table)
{
    return table->capacity;
}

int chash_affinity_add(chash_affinity *table, size_t *slot)
{
    size_t s = 0;
    while (s < table->slots && table->nodes[s])
        s++;
    lru *l = lru_new(table->capacity);
    if (!l)
        return CHASH_ENOMEM;
    if (s == table->slots) {
        size_t grown = table->slots ? 2 * table->slots : 8;
        lru **nodes = CHASH_REALLOC(table->nodes, grown * sizeof *nodes);
        if (!nodes) {
            lru_free(l);
            return CHASH_ENOMEM; /* the table as it was: realloc kept the old array */
        }
        for (size_t k = table->slots; k < grown; k++)
            nodes[k] = NULL;
        table->nodes = nodes;
        table->slots = grown;
    }
    table->nodes[s] = l;
    *slot = s;
    return CHASH_OK;
}

static const lru *slot_lru(const chash_affinity *table, size_t slot)
{
    return slot < table->slots ? table->nodes[slot] : NULL;
}

int chash_affinity_remove(chash_affinity *table, size_t slot)
{
    if (!slot_lru(table, slot))
        return CHASH_ENOENT;
    lru_free(table->nodes[slot]);
    table->nodes[slot] = NULL;
    return CHASH_OK;
}

size_t chash_affinity_match(const chash_affinity *table, size_t slot, const uint64_t *blocks,
                            size_t n)
{
    const lru *l = slot_lru(table, slot);
    if (!l || l->size == 0)
        return 0;
    size_t k = 0;
    while (k < n && lru_find(l, blocks[k]) != NIL)
        k++;
    return k;
}

size_t chash_affinity_held(const chash_affinity *table, size_t slot)
{
    const lru *l = slot_lru(table, slot);
    return l ? l->size : 0;
}

int chash_affinity_record(chash_affinity *table, size_t slot, const uint64_t *blocks, size_t n)
{
    if (!slot_lru(table, slot))
        return CHASH_ENOENT;
    lru *l = table->nodes[slot];
    for (size_t k = 0; k < n; k++)
        lru_touch(l, table->capacity, blocks[k]);
    return CHASH_OK;
}

static int usable(double x)
{
    return isfinite(x) && x >= 0.0;
}

int chash_affinity_choose(const chash_affinity *table, const chash_affinity_candidate *candidates,
                          size_t count, const uint64_t *blocks, size_t n,
                          const chash_affinity_weights *weights, size_t *choice)
{
    if (count == 0 || !usable(weights->tokens) || !usable(weights->block_tokens)
        || !usable(weights->miss_cost) || !usable(weights->rank_cost) || !usable(weights->load_cost))
        return CHASH_EINVAL;
    for (size_t r = 0; r < count; r++)
        if (!slot_lru(table, candidates[r].slot) || !usable(candidates[r].load)
            || !usable(candidates[r].queued))
            return CHASH_EINVAL;
    double tokens = weights->tokens > 0.0 ? weights->tokens : (double)n * weights->block_tokens;
    /* What a node holding every block would still prefill. */
    double floor_miss = weights->miss_cost * fmax(0.0, tokens - (double)n * weights->block_tokens);
    size_t best = 0;
    double best_cost = INFINITY;
    for (size_t r = 0; r < count; r++) {
        const chash_affinity_candidate *c = &candidates[r];
        double fixed = c->queued + (double)r * weights->rank_cost + c->load * weights->load_cost;
        if (fixed + floor_miss >= best_cost)
            continue; /* cannot win even with every block cached: skip the match */
        size_t hits = chash_affinity_match(table, c->slot, blocks, n);
        double cost = fixed
                      + weights->miss_cost * fmax(0.0, tokens - (double)hits * weights->block_tokens);
        if (cost < best_cost) {
            best_cost = cost;
            best = r;
        }
    }
    *choice = best;
    return CHASH_OK;
}

static int lru_check(const lru *l, uint32_t capacity)
{
    if (l->size > capacity)
        return CHASH_ECORRUPT;
    /* Walk the recency list: each entry found by its key, links consistent. */
    uint32_t seen = 0, prev = NIL;
    for (uint32_t e = l->head; e != NIL; e = l->entries[e].older) {
        if (e >= capacity || ++seen > l->size || l->entries[e].newer != prev
            || lru_find(l, l->entries[e].key) != e)
            return CHASH_ECORRUPT;
        prev = e;
    }
    if (seen != l->size || l->tail != prev)
        return CHASH_ECORRUPT;
    /* The chains hold exactly size entries. */
    uint32_t chained = 0;
    size_t nbuckets = (size_t)1 << (64u - l->shift);
    for (size_t b = 0; b < nbuckets; b++)
        for (uint32_t e = l->buckets[b]; e != NIL; e = l->entries[e].chain) {
            if (e >= capacity || ++chained > l->size || bucket_of(l, l->entries[e].key) != b)
                return CHASH_ECORRUPT;
        }
    if (chained != l->size)
        return CHASH_ECORRUPT;
    uint32_t unused = 0;
    for (uint32_t e = l->free; e != NIL; e = l->entries[e].older)
        if (e >= capacity || ++unused > capacity - l->size)
            return CHASH_ECORRUPT;
    return unused == capacity - l->size ? CHASH_OK : CHASH_ECORRUPT;
}

int chash_affinity_check(const chash_affinity *table)
{
    if (table->capacity == 0 || table->capacity > CHASH_AFFINITY_MAX_CAPACITY)
        return CHASH_ECORRUPT;
    for (size_t s = 0; s < table->slots; s++)
        if (table->nodes[s] && lru_check(table->nodes[s], table->capacity) != CHASH_OK)
            return CHASH_ECORRUPT;
    return CHASH_OK;
}
