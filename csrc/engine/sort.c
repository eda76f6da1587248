/*
 * sort.c - the in-place radix sort of the ring's points (sort.h).
 *
 * A leaf of the engine: it calls no function of the ring, only the
 * allocator (alloc.h), so every file of the ring may sort through it.
 */
#include "sort.h"
#include "alloc.h"

/* The sort key of a point: value first, then owner. */
static uint64_t pair_key(chash_pair p)
{
    return (uint64_t)p.value << 32 | p.owner;
}

/* Below this many points a run is finished by insertion sort. */
#define FLAG_SORT_SMALL 32

/*
 * Sorts p[0..n) by (value, owner) in place, with no scratch memory (a build
 * leaves no freed buffer behind in the heap): an MSD radix sort over the
 * 64-bit key, 8 bits a level from bit shift down (American flag sort:
 * count the digits, then cycle each point to its digit's next free place),
 * insertion sort for short runs.  At most 8 levels of 2 KiB of counters.
 */
static void flag_sort(chash_pair *p, size_t n, unsigned shift)
{
    if (n < FLAG_SORT_SMALL) {
        for (size_t i = 1; i < n; i++) {
            chash_pair x = p[i];
            uint64_t key = pair_key(x);
            size_t j = i;
            for (; j > 0 && pair_key(p[j - 1]) > key; j--)
                p[j] = p[j - 1];
            p[j] = x;
        }
        return;
    }
    uint32_t end[256] = {0}, next[256];
    for (size_t i = 0; i < n; i++)
        end[(pair_key(p[i]) >> shift) & 0xFF]++;
    uint32_t at = 0;
    for (unsigned d = 0; d < 256; d++) {
        next[d] = at;
        at += end[d];
        end[d] = at;
    }
    for (unsigned d = 0; d < 256; d++) {
        while (next[d] < end[d]) {
            /* Carry the point at next[d] to its own digit's next place,
             * and the one found there onwards, until one belongs to d. */
            chash_pair x = p[next[d]];
            unsigned e = (unsigned)(pair_key(x) >> shift) & 0xFF;
            while (e != d) {
                chash_pair y = p[next[e]];
                p[next[e]++] = x;
                x = y;
                e = (unsigned)(pair_key(x) >> shift) & 0xFF;
            }
            p[next[d]++] = x;
        }
    }
    if (shift == 0)
        return;
    for (unsigned d = 0, from = 0; d < 256; from = end[d], d++)
        if (end[d] - from > 1)
            flag_sort(p + from, end[d] - from, shift - 8);
}

CHASH_PRIVATE void chash_priv_sort_pairs(chash_pair *p, size_t n)
{
    flag_sort(p, n, 56);
}

CHASH_PRIVATE chash_pair *chash_priv_sorted_pairs(const uint32_t *points, size_t n, size_t k)
{
    chash_pair *pairs = CHASH_MALLOC(n * sizeof *pairs);
    if (!pairs)
        return NULL;
    for (size_t i = 0; i < n; i++)
        pairs[i] = (chash_pair){points[i], (uint32_t)k};
    flag_sort(pairs, n, 56);
    return pairs;
}
