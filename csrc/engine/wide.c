/*
 * wide.c - the ring of 64-bit points built whole (wide.h): its build, the
 * successor rule and the lookups over it, the check.
 *
 * Values and owners live in two arrays, so the search reads 8 bytes a step
 * and the owner only once at the end; a bucket index over the top bits of
 * a value narrows the search to a few points, as in the 32-bit ring.
 */
#include "wide.h"

#include "alloc.h"

#include <stdlib.h>
#include <string.h>

/* About this many points per bucket of the index, at most 2**24 buckets. */
#define POINTS_PER_BUCKET 8
#define MAX_BUCKET_BITS 24

struct chash_wide {
    uint64_t *value;  /* n values, sorted by (value, owner) */
    uint32_t *owner;  /* owner[i] owns value[i] */
    uint32_t *bucket; /* (1 << bits) + 1 indices into value */
    size_t n;
    size_t nnodes;
    unsigned bits;
};

chash_wide *chash_wide_new(void)
{
    chash_wide *ring = CHASH_MALLOC(sizeof *ring);
    if (!ring)
        return NULL;
    *ring = (chash_wide){NULL, NULL, NULL, 0, 0, 0};
    return ring;
}

void chash_wide_free(chash_wide *ring)
{
    if (!ring)
        return;
    CHASH_FREE(ring->value);
    CHASH_FREE(ring->owner);
    CHASH_FREE(ring->bucket);
    CHASH_FREE(ring);
}

size_t chash_wide_count(const chash_wide *ring) { return ring->n; }
size_t chash_wide_nodes(const chash_wide *ring) { return ring->nnodes; }
uint64_t chash_wide_point(const chash_wide *ring, size_t i) { return ring->value[i]; }
uint32_t chash_wide_owner(const chash_wide *ring, size_t i) { return ring->owner[i]; }

size_t chash_wide_memory(const chash_wide *ring)
{
    size_t buckets = ring->bucket ? ((size_t)1 << ring->bits) + 1 : 0;
    return sizeof *ring + ring->n * (sizeof *ring->value + sizeof *ring->owner)
           + buckets * sizeof *ring->bucket;
}

static unsigned bucket_bits_for(size_t n)
{
    unsigned bits = 0;
    while (bits < MAX_BUCKET_BITS && ((size_t)1 << (bits + 1)) * POINTS_PER_BUCKET <= n)
        bits++;
    return bits;
}

static size_t bucket_of(uint64_t value, unsigned bits)
{
    /* A shift by 64 (bits == 0) is undefined: bucket 0 holds everything. */
    return bits ? (size_t)(value >> (64u - bits)) : 0;
}

typedef struct {
    uint64_t value;
    uint32_t owner;
} wide_pair;

static int compare_pairs(const void *pa, const void *pb)
{
    const wide_pair *a = pa, *b = pb;
    if (a->value != b->value)
        return a->value < b->value ? -1 : 1;
    return (a->owner > b->owner) - (a->owner < b->owner);
}

int chash_wide_build(chash_wide *ring, const uint64_t *points, const uint32_t *owners, size_t n,
                     size_t nnodes)
{
    if (nnodes > CHASH_MAX_NODES)
        return CHASH_EINVAL;
    if (n > CHASH_WIDE_MAX_POINTS)
        return CHASH_ERANGE;
    for (size_t i = 0; i < n; i++)
        if (owners[i] >= nnodes)
            return CHASH_EINVAL;
    unsigned bits = bucket_bits_for(n);
    size_t nb = (size_t)1 << bits;
    wide_pair *pairs = CHASH_MALLOC((n ? n : 1) * sizeof *pairs);
    uint64_t *value = CHASH_MALLOC((n ? n : 1) * sizeof *value);
    uint32_t *owner = CHASH_MALLOC((n ? n : 1) * sizeof *owner);
    uint32_t *bucket = CHASH_MALLOC((nb + 1) * sizeof *bucket);
    if (!pairs || !value || !owner || !bucket) {
        CHASH_FREE(pairs);
        CHASH_FREE(value);
        CHASH_FREE(owner);
        CHASH_FREE(bucket);
        return CHASH_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        pairs[i] = (wide_pair){points[i], owners[i]};
    if (n > 1)
        qsort(pairs, n, sizeof *pairs, compare_pairs);
    memset(bucket, 0, (nb + 1) * sizeof *bucket);
    for (size_t i = 0; i < n; i++) {
        value[i] = pairs[i].value;
        owner[i] = pairs[i].owner;
        bucket[bucket_of(value[i], bits) + 1]++;
    }
    for (size_t b = 1; b <= nb; b++)
        bucket[b] += bucket[b - 1];
    CHASH_FREE(pairs);
    /* Nothing can fail from here: swap the new table in. */
    CHASH_FREE(ring->value);
    CHASH_FREE(ring->owner);
    CHASH_FREE(ring->bucket);
    *ring = (chash_wide){value, owner, bucket, n, nnodes, bits};
    return CHASH_OK;
}

size_t chash_wide_successor(const chash_wide *ring, uint64_t hash)
{
    size_t b = bucket_of(hash, ring->bits);
    size_t lo = ring->bucket[b], len = ring->bucket[b + 1] - lo;
    /* Points before lo are < hash, points from lo + len on lie in later
     * buckets and are >= hash: the answer is in [lo, lo + len].  The halving
     * compiles to conditional moves. */
    const uint64_t *first = ring->value + lo;
    while (len > 1) {
        size_t half = len / 2;
        first = first[half] < hash ? first + half : first;
        len -= half;
    }
    size_t at = (size_t)(first - ring->value) + (len == 1 && *first < hash);
    return at == ring->n ? 0 : at;
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(addr) __builtin_prefetch(addr)
#else
#define PREFETCH(addr) ((void)(addr))
#endif

/* How far ahead the batch lookup starts reading. */
#define LOOKAHEAD 8

void chash_wide_owners(const chash_wide *ring, const uint64_t *hashes, size_t n, uint32_t *owners)
{
    for (size_t i = 0; i < n; i++) {
        if (i + LOOKAHEAD < n)
            PREFETCH(&ring->value[ring->bucket[bucket_of(hashes[i + LOOKAHEAD], ring->bits)]]);
        owners[i] = ring->owner[chash_wide_successor(ring, hashes[i])];
    }
}

int chash_wide_preference(const chash_wide *ring, uint64_t hash, size_t n, uint32_t *out,
                          size_t *found)
{
    *found = 0;
    if (n > ring->nnodes)
        n = ring->nnodes;
    if (n == 0 || ring->n == 0)
        return CHASH_OK;
    unsigned char *seen = CHASH_MALLOC(ring->nnodes);
    if (!seen)
        return CHASH_ENOMEM;
    memset(seen, 0, ring->nnodes);
    size_t got = 0;
    for (size_t step = 0, i = chash_wide_successor(ring, hash); step < ring->n && got < n; step++) {
        uint32_t k = ring->owner[i];
        if (!seen[k]) {
            seen[k] = 1;
            out[got++] = k;
        }
        if (++i == ring->n)
            i = 0;
    }
    CHASH_FREE(seen);
    *found = got;
    return CHASH_OK;
}

void chash_wide_ownership(const chash_wide *ring, double *share)
{
    for (size_t k = 0; k < ring->nnodes; k++)
        share[k] = 0.0;
    if (ring->n == 0)
        return;
    const double scale = 1.0 / 18446744073709551616.0; /* 2**-64 */
    /* Point i owns (value[i - 1], value[i]]; point 0 also owns the wrap,
     * (value[n - 1], 2**64) and [0, value[0]]: 2**64 - (last - first). */
    for (size_t i = 1; i < ring->n; i++)
        share[ring->owner[i]] += (double)(ring->value[i] - ring->value[i - 1]) * scale;
    share[ring->owner[0]] += 1.0 - (double)(ring->value[ring->n - 1] - ring->value[0]) * scale;
}

int chash_wide_check(const chash_wide *ring)
{
    if (ring->n && (!ring->value || !ring->owner || !ring->bucket))
        return CHASH_ECORRUPT;
    if (ring->n == 0)
        return CHASH_OK;
    for (size_t i = 0; i < ring->n; i++) {
        if (ring->owner[i] >= ring->nnodes)
            return CHASH_ECORRUPT;
        if (i && (ring->value[i - 1] > ring->value[i]
                  || (ring->value[i - 1] == ring->value[i] && ring->owner[i - 1] > ring->owner[i])))
            return CHASH_ECORRUPT;
    }
    size_t nb = (size_t)1 << ring->bits;
    size_t i = 0;
    for (size_t b = 0; b <= nb; b++) {
        while (i < ring->n && bucket_of(ring->value[i], ring->bits) < b)
            i++;
        if (ring->bucket[b] != i)
            return CHASH_ECORRUPT;
    }
    return CHASH_OK;
}
