/*
 * affinity_model.h - a plain model of one slot's LRU (strategies/affinity.h)
 * for test_affinity.c and tests/fuzz/fuzz_affinity.c: an array, most recent
 * last, searched linearly.  Holds at most AFFINITY_MODEL_MAX keys.
 */
#ifndef CHASH_TEST_AFFINITY_MODEL_H
#define CHASH_TEST_AFFINITY_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define AFFINITY_MODEL_MAX 8

typedef struct {
    int used;
    uint64_t keys[AFFINITY_MODEL_MAX];
    size_t n;
} model_lru;

/* key made most recent; the least recent dropped beyond cap (<= the max). */
static inline void model_touch(model_lru *m, uint64_t key, size_t cap)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->keys[i] == key) {
            memmove(&m->keys[i], &m->keys[i + 1], (m->n - i - 1) * sizeof key);
            m->n--;
            break;
        }
    if (m->n == cap) {
        memmove(&m->keys[0], &m->keys[1], (m->n - 1) * sizeof key);
        m->n--;
    }
    m->keys[m->n++] = key;
}

/* How many of blocks[0..n), from the first, m holds. */
static inline size_t model_match(const model_lru *m, const uint64_t *blocks, size_t n)
{
    size_t k = 0;
    for (; k < n; k++) {
        size_t i = 0;
        while (i < m->n && m->keys[i] != blocks[k])
            i++;
        if (i == m->n)
            break;
    }
    return k;
}

#endif /* CHASH_TEST_AFFINITY_MODEL_H */
