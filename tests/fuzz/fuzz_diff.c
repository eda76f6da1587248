/*
 * fuzz_diff.c - libFuzzer target for the ring diff (engine/diff.h).
 *
 * The input describes two small 32-bit rings: a byte for the tie rule
 * and the lookup rule (successor, HAProxy's nearest point or Varnish's
 * shard lookup),
 * then for each ring up to six nodes (a presence byte, a point count, the
 * points: one byte picks a narrow value near 0, one near the top, or four
 * bytes of a full value, so rings share and collide points often).  The
 * diff of the two rings, both ways, must have the shape diff.h promises
 * and agree with routing both rings at every place their routing can
 * change, one either side of it and 0 and the top (diff_check.h): every
 * hash of these rings, in effect.  A byte may make one allocation of the
 * diff fail: the call must then return CHASH_ENOMEM and nothing.  The
 * bytes left describe two lookup tables (Maglev's: a size, node counts,
 * the same[] map and each entry's node), whose chash_table_diff must have
 * the same shape and agree with comparing every entry.
 *
 * diff.c is included here with an allocator that fails on demand; the
 * ring is linked.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_NAME "fuzz_diff"
#include "fuzz_support.h"

#define CHASH_MALLOC fz_malloc
#define CHASH_REALLOC fz_realloc
#define CHASH_FREE free
#include "engine/diff.c"

#include "../c/diff_check.h"

typedef struct {
    const uint8_t *d;
    size_t n, at;
} reader;

static uint8_t byte(reader *r) { return r->at < r->n ? r->d[r->at++] : 0; }

static uint32_t point(reader *r)
{
    uint8_t kind = byte(r);
    switch (kind % 4) {
    case 0: return byte(r) % 32u;
    case 1: return UINT32_MAX - byte(r) % 32u;
    case 2: return (uint32_t)byte(r) << 24;
    default: {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++)
            v = v << 8 | byte(r);
        return v;
    }
    }
}

static chash_ring *read_ring(reader *r, chash_ties ties, chash_rule rule)
{
    static const char *ids[] = {"a", "b", "c", "d", "e", "f"};
    chash_ring *ring = chash_ring_new();
    FZ_ASSERT(ring && chash_ring_set_ties(ring, ties) == CHASH_OK);
    FZ_ASSERT(chash_ring_set_rule(ring, rule) == CHASH_OK);
    for (int k = 0; k < 6; k++) {
        if (byte(r) % 2 == 0)
            continue;
        uint32_t pts[16];
        size_t np = 1 + byte(r) % 16u;
        for (size_t i = 0; i < np; i++)
            pts[i] = point(r);
        FZ_ASSERT(chash_ring_add(ring, ids[k], 1, NULL, pts, np) == CHASH_OK);
    }
    return ring;
}

static void check_pair(const chash_ring *from, const chash_ring *to, long fail_at)
{
    chash_move *moves;
    size_t n;
    fz_countdown = fail_at;
    int status = chash_ring_diff(from, to, &moves, &n);
    fz_countdown = -1;
    int empty_a = chash_ring_point_count(from) == 0, empty_b = chash_ring_point_count(to) == 0;
    if (empty_a || empty_b) {
        FZ_ASSERT(status == (empty_a == empty_b ? CHASH_OK : CHASH_EINVAL) && n == 0 && !moves);
        return;
    }
    if (status == CHASH_ENOMEM) {
        FZ_ASSERT(fail_at >= 0 && moves == NULL && n == 0);
        return;
    }
    FZ_ASSERT(status == CHASH_OK);
    FZ_ASSERT(diff_shape_ok(moves, n, UINT32_MAX));
    size_t na, nb;
    uint64_t *pa = diff_ring_probes(from, &na), *pb = diff_ring_probes(to, &nb);
    FZ_ASSERT(pa && pb);
    FZ_ASSERT(diff_ring_mismatches(from, to, moves, n, pa, na) == 0);
    FZ_ASSERT(diff_ring_mismatches(from, to, moves, n, pb, nb) == 0);
    free(pa);
    free(pb);
    chash_moves_free(moves);
}

static void check_tables(reader *r, long fail_at)
{
    uint32_t a[96], b[96], same[8];
    size_t size = 1 + byte(r) % 96u, na = 1 + byte(r) % 8u, nb = 1 + byte(r) % 8u;
    for (size_t k = 0; k < na; k++) {
        uint8_t v = byte(r);
        same[k] = v % 4 == 3 ? CHASH_DIFF_NONE : (uint32_t)(v % nb);
    }
    for (size_t e = 0; e < size; e++) {
        a[e] = (uint32_t)(byte(r) % na);
        uint8_t v = byte(r);
        /* Even bytes keep the entry's node (when other holds it). */
        b[e] = v % 2 == 0 && same[a[e]] != CHASH_DIFF_NONE ? same[a[e]] : (uint32_t)(v % nb);
    }
    chash_move *moves;
    size_t n;
    fz_countdown = fail_at;
    int status = chash_table_diff(a, b, size, same, na, nb, &moves, &n);
    fz_countdown = -1;
    if (status == CHASH_ENOMEM) {
        FZ_ASSERT(fail_at >= 0 && moves == NULL && n == 0);
        return;
    }
    FZ_ASSERT(status == CHASH_OK);
    FZ_ASSERT(diff_shape_ok(moves, n, size - 1));
    FZ_ASSERT(diff_table_mismatches(a, b, size, same, moves, n) == 0);
    chash_moves_free(moves);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size, 0};
    uint8_t mode = byte(&r);
    chash_ties ties = (chash_ties)(mode & 1);
    long fail_at = (mode & 2) ? (long)(mode >> 2) % 4 : -1;
    chash_rule rule = (mode & 16)   ? CHASH_RULE_NEAREST
                      : (mode & 32) ? CHASH_RULE_VARNISH
                                    : CHASH_RULE_SUCCESSOR;
    chash_ring *a = read_ring(&r, ties, rule), *b = read_ring(&r, ties, rule);
    check_pair(a, b, fail_at);
    check_pair(b, a, -1);
    check_pair(a, a, -1);
    chash_ring_free(a);
    chash_ring_free(b);
    check_tables(&r, fail_at);
    return 0;
}
