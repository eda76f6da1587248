/*
 * fuzz_ring128.c - libFuzzer target for the sorted points of uhashring's
 * continuums (engine/ring128.h): chash_r128_node_points (and _wide), _sort, _merge,
 * _drop, _settle, _unique, _index_bits, _index, _key, _successor and
 * _check over any bytes, against a model of uhashring's dict.
 *
 * The first byte picks a mode (mod 2):
 *   0  md5 mode, a script of steps on one continuum of up to 8 nodes
 *      (nodes 0 and 4 share a name, so their points collide): set a node
 *      to a count of points (its old points go, a value another node holds
 *      becomes its own where it stands), remove a node, look a key up; a
 *      step may ask for a failed allocation, which must change nothing;
 *   1  ketama mode, one build of up to 6 nodes with counts and replicas
 *      (0 to 4), repeated values kept, each owned by its last writer.
 * After every step the points equal the model's (value, owner, seq),
 * chash_r128_check() passes, and every lookup through the bucket index
 * equals a scan for the first point strictly greater.  ring128.c is
 * included here with an allocator that fails on demand.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_NAME "fuzz_ring128"
#include "fuzz_support.h"

#define CHASH_MALLOC fz_malloc
#define CHASH_REALLOC fz_realloc
#define CHASH_FREE free
#include "engine/ring128.c"

#define NODES 8
#define MAXCOUNT 24
#define MAXPOINTS (NODES * MAXCOUNT * 4)

typedef chash_r128_point pt;

static const char *const names[NODES] = {"a-", "b-", "node-c-", "1-", "a-", "bb-", "x-y-", "10.0.0.1:8000-"};

/* The model: uhashring's dict, value -> owner, in insertion order (seq). */
typedef struct {
    pt p[MAXPOINTS];
    size_t n;
} model;

static int cmp(const void *a, const void *b)
{
    const pt *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static void model_set(model *m, uint32_t id, const pt *fresh, size_t count)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->p[i].owner != id)
            m->p[k++] = m->p[i];
    m->n = k;
    for (size_t j = 0; j < count; j++) {
        size_t i;
        for (i = 0; i < m->n; i++)
            if (m->p[i].hi == fresh[j].hi && m->p[i].lo == fresh[j].lo)
                break;
        if (i < m->n)
            m->p[i].owner = id;
        else
            m->p[m->n++] = fresh[j];
    }
    qsort(m->p, m->n, sizeof *m->p, cmp);
}

static void model_remove(model *m, uint32_t id)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->p[i].owner != id)
            m->p[k++] = m->p[i];
    m->n = k;
}

static size_t scan(const pt *p, size_t n, uint64_t hi, uint64_t lo)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].hi > hi || (p[i].hi == hi && p[i].lo > lo))
            return i;
    return 0;
}

/* Looks up a key through the index and checks it against a scan. */
static void lookup(const pt *p, size_t n, int ketama, const uint8_t *key, size_t len)
{
    static uint32_t index[(1 << 12) + 1];
    if (n == 0)
        return;
    int bits = chash_r128_index_bits(n);
    FZ_ASSERT(bits <= 12);
    chash_r128_index(p, n, ketama, bits, index);
    FZ_ASSERT(chash_r128_check(p, n, NODES, ketama, index, bits) == CHASH_OK);
    uint8_t dig[16];
    chash_md5(key, len, dig);
    uint64_t hi, lo;
    chash_r128_key(dig, ketama, &hi, &lo);
    size_t b = chash_r128_bucket(hi, ketama, bits);
    size_t got = chash_r128_successor(p, n, index[b], index[b + 1], hi, lo);
    FZ_ASSERT(got == scan(p, n, hi, lo));
    /* A key exactly on a point goes past it. */
    size_t at = (size_t)key[0] % n;
    FZ_ASSERT(chash_r128_successor(p, n, 0, n, p[at].hi, p[at].lo) == scan(p, n, p[at].hi, p[at].lo));
}

static void md5_script(const uint8_t *d, size_t size)
{
    static pt pts[MAXPOINTS], out[MAXPOINTS], add[MAXCOUNT];
    static model m;
    size_t n = 0;
    uint64_t seq = 0;
    m.n = 0;
    for (size_t at = 0; at + 3 <= size; at += 3) {
        uint32_t id = (uint32_t)(d[at + 1] % NODES);
        int fail = (d[at] >> 4) & 1;
        switch (d[at] % 3) {
        case 0: {
            size_t count = d[at + 2] % (MAXCOUNT + 1);
            uint64_t before = seq;
            if (fail)
                fz_countdown = d[at + 2] & 1;
            int status = chash_r128_node_points(names[id], strlen(names[id]), count, 0, 1, id, &seq, add);
            if (status == CHASH_OK)
                status = chash_r128_sort(add, count, 32, NULL);
            fz_countdown = -1;
            if (status != CHASH_OK) {
                FZ_ASSERT(status == CHASH_ENOMEM && fail);
                seq = before; /* the caller drops the points it made */
                break;
            }
            size_t k = chash_r128_merge(pts, n, add, count, id, out);
            memcpy(pts, out, k * sizeof *pts);
            n = k;
            model_set(&m, id, add, count);
            break;
        }
        case 1:
            n = chash_r128_drop(pts, n, id, id);
            model_remove(&m, id);
            break;
        default:
            lookup(pts, n, 0, d + at, 3);
            break;
        }
        FZ_ASSERT(n == m.n);
        for (size_t i = 0; i < n; i++)
            FZ_ASSERT(pts[i].hi == m.p[i].hi && pts[i].lo == m.p[i].lo && pts[i].owner == m.p[i].owner
                      && pts[i].seq == m.p[i].seq);
        FZ_ASSERT(chash_r128_check(pts, n, NODES, 0, NULL, 0) == CHASH_OK);
        FZ_ASSERT(chash_r128_unique(pts, n) == n);
    }
}

static void ketama_build(const uint8_t *d, size_t size)
{
    static pt pts[MAXPOINTS], want[MAXPOINTS];
    if (size < 2)
        return;
    size_t nodes = 1 + d[0] % 6;
    int replicas = d[1] % 5;
    size_t total = 0;
    uint64_t seq = 0;
    for (size_t k = 0; k < nodes; k++) {
        size_t count = 2 + k < size ? d[2 + k] % (MAXCOUNT + 1) : 3;
        /* Four and sixteen at a time give the same points and numbers. */
        static pt wide[MAXCOUNT * 4];
        uint64_t wide_seq = seq;
        FZ_ASSERT(chash_r128_node_points(names[k], strlen(names[k]), count, 1, replicas, (uint32_t)k,
                                         &seq, pts + total) == CHASH_OK);
        FZ_ASSERT(chash_r128_node_points_wide(names[k], strlen(names[k]), count, 1, replicas,
                                              (uint32_t)k, &wide_seq, wide) == CHASH_OK);
        FZ_ASSERT(wide_seq == seq
                  && memcmp(wide, pts + total, count * (size_t)replicas * sizeof *wide) == 0);
        total += count * (size_t)replicas;
    }
    /* The model: every value kept, sorted by (value, seq); a value's
     * owner is its last writer's. */
    memcpy(want, pts, total * sizeof *pts);
    qsort(want, total, sizeof *want, cmp);
    for (size_t i = 0; i < total; i++) {
        size_t j = i;
        while (j + 1 < total && want[j + 1].hi == want[i].hi)
            j++;
        for (size_t k = i; k <= j; k++)
            want[k].owner = want[j].owner;
        i = j;
    }
    FZ_ASSERT(chash_r128_sort(pts, total, 0, NULL) == CHASH_OK);
    FZ_ASSERT(chash_r128_settle(pts, total, 1) == total);
    for (size_t i = 0; i < total; i++)
        FZ_ASSERT(pts[i].hi == want[i].hi && pts[i].lo == 0 && pts[i].owner == want[i].owner
                  && pts[i].seq == want[i].seq);
    FZ_ASSERT(chash_r128_check(pts, total, NODES, 1, NULL, 0) == CHASH_OK);
    for (size_t at = 2 + nodes; at + 2 <= size; at += 2)
        lookup(pts, total, 1, d + at, 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % 2 == 0)
        md5_script(data + 1, size - 1);
    else
        ketama_build(data + 1, size - 1);
    return 0;
}
