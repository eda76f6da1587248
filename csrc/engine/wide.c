/*
 * wide.c - the ring of 64-bit points built whole (wide.h): its build, the
 * successor rule and the lookups over it, the check.
 *
 * Each point is a 16-byte (value, owner) pair, so the owner lies in the
 * cache line the search ends on; a bucket index over the top bits of a
 * value, one entry for about two points, narrows the search to about one
 * cache line of pairs.  (Values and owners in two arrays cost a cache miss
 * more a lookup on rings bigger than the cache, measured.)
 */
#include "wide.h"

#include "alloc.h"

#include <stdlib.h>
#include <string.h>

/* About this many points per bucket of the index, at most 2**24 buckets. */
#define POINTS_PER_BUCKET 2
#define MAX_BUCKET_BITS 24

typedef struct {
    uint64_t value;
    uint32_t owner;
} wide_pair;

struct chash_wide {
    wide_pair *pt;    /* n points, sorted by (value, owner) */
    uint32_t *bucket; /* (1 << bits) + 1 indices into pt */
    size_t n;
    size_t nnodes;
    unsigned bits;
};

chash_wide *chash_wide_new(void)
{
    chash_wide *ring = CHASH_MALLOC(sizeof *ring);
    if (!ring)
        return NULL;
    *ring = (chash_wide){NULL, NULL, 0, 0, 0};
    return ring;
}

void chash_wide_free(chash_wide *ring)
{
    if (!ring)
        return;
    CHASH_FREE(ring->pt);
    CHASH_FREE(ring->bucket);
    CHASH_FREE(ring);
}

size_t chash_wide_count(const chash_wide *ring) { return ring->n; }
size_t chash_wide_nodes(const chash_wide *ring) { return ring->nnodes; }
uint64_t chash_wide_point(const chash_wide *ring, size_t i) { return ring->pt[i].value; }
uint32_t chash_wide_owner(const chash_wide *ring, size_t i) { return ring->pt[i].owner; }

size_t chash_wide_memory(const chash_wide *ring)
{
    size_t buckets = ring->bucket ? ((size_t)1 << ring->bits) + 1 : 0;
    return sizeof *ring + ring->n * sizeof *ring->pt + buckets * sizeof *ring->bucket;
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
    wide_pair *pt = CHASH_MALLOC((n ? n : 1) * sizeof *pt);
    uint32_t *bucket = CHASH_MALLOC((nb + 1) * sizeof *bucket);
    if (!pt || !bucket) {
        CHASH_FREE(pt);
        CHASH_FREE(bucket);
        return CHASH_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        pt[i] = (wide_pair){points[i], owners[i]};
    if (n > 1)
        qsort(pt, n, sizeof *pt, compare_pairs);
    memset(bucket, 0, (nb + 1) * sizeof *bucket);
    for (size_t i = 0; i < n; i++)
        bucket[bucket_of(pt[i].value, bits) + 1]++;
    for (size_t b = 1; b <= nb; b++)
        bucket[b] += bucket[b - 1];
    /* Nothing can fail from here: swap the new table in. */
    CHASH_FREE(ring->pt);
    CHASH_FREE(ring->bucket);
    *ring = (chash_wide){pt, bucket, n, nnodes, bits};
    return CHASH_OK;
}

size_t chash_wide_successor(const chash_wide *ring, uint64_t hash)
{
    size_t b = bucket_of(hash, ring->bits);
    size_t lo = ring->bucket[b], len = ring->bucket[b + 1] - lo;
    /* Points before lo are < hash, points from lo + len on lie in later
     * buckets and are >= hash: the answer is in [lo, lo + len].  The halving
     * compiles to conditional moves. */
    const wide_pair *first = ring->pt + lo;
    while (len > 1) {
        size_t half = len / 2;
        first = first[half].value < hash ? first + half : first;
        len -= half;
    }
    size_t at = (size_t)(first - ring->pt) + (len == 1 && first->value < hash);
    return at == ring->n ? 0 : at;
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(addr) __builtin_prefetch(addr)
#else
#define PREFETCH(addr) ((void)(addr))
#endif

/* How far ahead the batch lookup starts reading: the index entry of key
 * i + 2 * LOOKAHEAD and the points of key i + LOOKAHEAD. */
#define LOOKAHEAD 8

void chash_wide_owners(const chash_wide *ring, const uint64_t *hashes, size_t n, uint32_t *owners)
{
    unsigned bits = ring->bits;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 * LOOKAHEAD < n)
            PREFETCH(&ring->bucket[bucket_of(hashes[i + 2 * LOOKAHEAD], bits)]);
        if (i + LOOKAHEAD < n)
            PREFETCH(&ring->pt[ring->bucket[bucket_of(hashes[i + LOOKAHEAD], bits)]]);
        owners[i] = ring->pt[chash_wide_successor(ring, hashes[i])].owner;
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
        uint32_t k = ring->pt[i].owner;
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
        share[ring->pt[i].owner] += (double)(ring->pt[i].value - ring->pt[i - 1].value) * scale;
    share[ring->pt[0].owner] += 1.0 - (double)(ring->pt[ring->n - 1].value - ring->pt[0].value) * scale;
}

int chash_wide_check(const chash_wide *ring)
{
    if (ring->n && (!ring->pt || !ring->bucket))
        return CHASH_ECORRUPT;
    if (ring->n == 0)
        return CHASH_OK;
    for (size_t i = 0; i < ring->n; i++) {
        if (ring->pt[i].owner >= ring->nnodes)
            return CHASH_ECORRUPT;
        if (i && compare_pairs(&ring->pt[i - 1], &ring->pt[i]) > 0)
            return CHASH_ECORRUPT;
    }
    size_t nb = (size_t)1 << ring->bits;
    size_t i = 0;
    for (size_t b = 0; b <= nb; b++) {
        while (i < ring->n && bucket_of(ring->pt[i].value, ring->bits) < b)
            i++;
        if (ring->bucket[b] != i)
            return CHASH_ECORRUPT;
    }
    return CHASH_OK;
}
