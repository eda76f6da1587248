/*
 * fuzz_ring.c - libFuzzer target for the ring engine (engine/chash.h) and
 * the point schemes (engine/scheme.h).
 *
 * The input is read as a program.  Each operation byte picks an engine call
 * (add, add_many, remove, grow, shrink, lookup, preference, ownership, limit
 * probes, a fresh ring) or a scheme check; the bytes after it are its
 * arguments: node ids of any bytes (empty, NUL inside, prefixes of each
 * other, longer than the scheme's stack buffer), point arrays with many
 * values shared between nodes, hashes on and around ring points.  Reading
 * past the end gives zeros, so every input is a valid program.
 *
 * A brute-force model runs alongside: every node's id, data and points, in
 * insertion order.  Its ring is rebuilt from scratch (sorted by (value, id
 * bytes)) after every change; the successor is found by a linear scan, and
 * in rings set to the nearest rule (a third of them) the routed point by a
 * scan for the nearest points either way; in rings set to the varnish rule
 * (another third) by its documented outcome: the last point above every
 * point, the second of a ring of two, a point of the hash's own value on
 * an exact hit (which of a run is the bisection's, so only the value is
 * checked there, and the walks start where the engine routed), else the
 * successor.  The nghttpx layout's ids are checked against addresses the
 * target spells with snprintf and encodes itself.
 * After every step chash_ring_check() must pass and the engine must agree
 * with the model on every node, every point and a set of probe lookups and
 * preference lists.  Any disagreement aborts.
 *
 * Two builds:
 *   plain: link the ring's files (RING_SOURCES of csrc/sources.mk) as
 *     they are (the engine's own allocator);
 *   -DFUZZ_FAILING_ALLOC: this file includes the ring's files with an
 *     allocator that fails on demand (the FAILNEXT operation), so every
 *     mutation must leave the ring exactly as it was when it returns
 *     CHASH_ENOMEM, and remove must never allocate.  Do not link them a
 *     second time in this build.
 *
 * FUZZ_RING_TRACE=1 in the environment prints each operation to stderr.
 */
#include "engine/chash.h"
#include "engine/scheme.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef FUZZ_FAILING_ALLOC
#include <malloc.h> /* malloc_usable_size: glibc, as libFuzzer builds here are */
#endif

/* ------------------------------------------------------------------ */
/* Allocation failures on demand (FUZZ_FAILING_ALLOC builds only)     */

static long fz_countdown = -1;      /* allocations left before one fails; < 0 never */
static unsigned long fz_failures;   /* allocations made to fail so far */
static unsigned long fz_allocs;     /* engine allocations that asked for more memory */

#ifdef FUZZ_FAILING_ALLOC
/* Whether the next allocation may succeed: the countdown's last one fails
 * (once), the others pass. */
static int fz_allowed(void)
{
    if (fz_countdown == 0) {
        fz_countdown = -1;
        fz_failures++;
        return 0;
    }
    if (fz_countdown > 0)
        fz_countdown--;
    return 1;
}

static void *fz_malloc(size_t size)
{
    fz_allocs++;
    return fz_allowed() ? malloc(size) : NULL;
}

static void *fz_realloc(void *p, size_t size)
{
    /* Handing room back (a shrink) is not asking for memory: removals may
     * do it, and ignore its failure. */
    if (!p || size > malloc_usable_size(p))
        fz_allocs++;
    return fz_allowed() ? realloc(p, size) : NULL;
}

#define CHASH_MALLOC fz_malloc
#define CHASH_REALLOC fz_realloc
#define CHASH_FREE free
#include "engine/ring.c"
#include "engine/ring_bulk.c"
#include "engine/ring_index.c"
#include "engine/sort.c"
#endif

/* ------------------------------------------------------------------ */
/* Failing loudly                                                     */

static int fz_trace;

#define FZ_FAIL(...)                                                          \
    do {                                                                      \
        fprintf(stderr, "fuzz_ring: %s:%d: ", __FILE__, __LINE__);           \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        abort();                                                              \
    } while (0)

#define FZ_ASSERT(cond)                                                       \
    do {                                                                      \
        if (!(cond))                                                          \
            FZ_FAIL("assertion failed: %s", #cond);                           \
    } while (0)

/* A set of acceptable status codes, one bit each. */
#define FZ_ALLOW(status) (1u << (unsigned)-(status))

static void fz_expect(const char *what, int got, unsigned allowed)
{
    if (got > 0 || got < CHASH_ECORRUPT || !(allowed & FZ_ALLOW(got)))
        FZ_FAIL("%s returned %d (%s); allowed set %#x", what, got, chash_strerror(got), allowed);
}

static void *fz_xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        FZ_FAIL("harness out of memory (%zu bytes)", size);
    return p;
}

/* The model and the checks only compare; their loops would drown the
 * engine's comparisons in the fuzzer's feedback (and cost most of the
 * time), so they are not instrumented for coverage. */
#if defined(__clang__) && __clang_major__ >= 13
#define FZ_QUIET __attribute__((no_sanitize("coverage"), noinline))
#else
#define FZ_QUIET
#endif

/* ------------------------------------------------------------------ */
/* Reading the input                                                  */

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_in;

static unsigned fz_u8(fz_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static uint32_t fz_u16(fz_in *in)
{
    uint32_t lo = fz_u8(in);
    return lo | (uint32_t)fz_u8(in) << 8;
}

static uint32_t fz_u32(fz_in *in)
{
    uint32_t lo = fz_u16(in);
    return lo | fz_u16(in) << 16;
}

static uint64_t fz_u64(fz_in *in)
{
    uint64_t lo = fz_u32(in);
    return lo | (uint64_t)fz_u32(in) << 32;
}

/* ------------------------------------------------------------------ */
/* The model                                                          */

#define FZ_MAX_NODES 40
#define FZ_MAX_POINTS ((size_t)1 << 14)
#define FZ_MAX_ID 600

typedef struct {
    char *id; /* id_len bytes, never NULL */
    size_t id_len;
    void *data;
    uint32_t *pts; /* any order */
    size_t npts;
} fz_node;

typedef struct {
    uint32_t value;
    uint32_t owner;
} fz_point;

static fz_node m_nodes[FZ_MAX_NODES];
static size_t m_count, m_total;
static fz_point *m_ring; /* m_total points sorted by (value, owner id or owner's place) */
static int m_by_order;   /* the ring breaks ties by insertion order */
static int m_nearest;    /* the ring routes by the nearest rule */
static int m_varnish;    /* the ring routes by the varnish rule */
static int m_dirty;
static uintptr_t m_serial;

FZ_QUIET static int fz_cmp_ids(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t common = alen < blen ? alen : blen;
    for (size_t i = 0; i < common; i++)
        if (a[i] != b[i])
            return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
    return (alen > blen) - (alen < blen);
}

FZ_QUIET static int fz_cmp_points(const void *pa, const void *pb)
{
    const fz_point *a = pa, *b = pb;
    if (a->value != b->value)
        return a->value < b->value ? -1 : 1;
    if (m_by_order) /* m_nodes is in insertion order */
        return (a->owner > b->owner) - (a->owner < b->owner);
    const fz_node *na = &m_nodes[a->owner], *nb = &m_nodes[b->owner];
    return fz_cmp_ids(na->id, na->id_len, nb->id, nb->id_len);
}

FZ_QUIET static int fz_cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return (a > b) - (a < b);
}

/* The model's ring, rebuilt from the nodes when they changed. */
FZ_QUIET static const fz_point *m_points(void)
{
    if (!m_dirty)
        return m_ring;
    free(m_ring);
    m_ring = fz_xmalloc(m_total * sizeof *m_ring);
    size_t at = 0;
    for (size_t k = 0; k < m_count; k++)
        for (size_t i = 0; i < m_nodes[k].npts; i++)
            m_ring[at++] = (fz_point){m_nodes[k].pts[i], (uint32_t)k};
    FZ_ASSERT(at == m_total);
    qsort(m_ring, m_total, sizeof *m_ring, fz_cmp_points);
    m_dirty = 0;
    return m_ring;
}

FZ_QUIET static long m_find(const char *id, size_t id_len)
{
    for (size_t k = 0; k < m_count; k++)
        if (fz_cmp_ids(m_nodes[k].id, m_nodes[k].id_len, id ? id : "", id_len) == 0)
            return (long)k;
    return -1;
}

static void m_add(const char *id, size_t id_len, void *data, const uint32_t *pts, size_t n)
{
    FZ_ASSERT(m_count < FZ_MAX_NODES);
    fz_node *node = &m_nodes[m_count++];
    node->id = fz_xmalloc(id_len);
    if (id_len)
        memcpy(node->id, id, id_len);
    node->id_len = id_len;
    node->data = data;
    node->pts = fz_xmalloc(n * sizeof *pts);
    memcpy(node->pts, pts, n * sizeof *pts);
    node->npts = n;
    m_total += n;
    m_dirty = 1;
}

static void m_remove(size_t k)
{
    m_total -= m_nodes[k].npts;
    free(m_nodes[k].id);
    free(m_nodes[k].pts);
    memmove(&m_nodes[k], &m_nodes[k + 1], (m_count - k - 1) * sizeof *m_nodes);
    m_count--;
    m_dirty = 1;
}

static void m_clear(void)
{
    while (m_count)
        m_remove(m_count - 1);
    free(m_ring);
    m_ring = NULL;
    m_dirty = 1;
}

static void *m_token(void)
{
    return (void *)(uintptr_t)(0x10000u + 16u * ++m_serial);
}

/* Index of the first model point >= hash, wrapping to 0 (linear scan). */
FZ_QUIET static size_t m_successor(uint32_t hash)
{
    const fz_point *ring = m_points();
    for (size_t i = 0; i < m_total; i++)
        if (ring[i].value >= hash)
            return i;
    return 0;
}

/*
 * The routed point under the ring's rule, by brute force.  Nearest rule:
 * the point ahead is the one at the least distance v - hash (mod 2**32),
 * the first such; the point behind is the one at the least distance
 * hash - v - 1 (mod 2**32: a point at hash itself is behind only when
 * nothing else is), the last such; the one behind wins when
 * hash - behind <= ahead - hash.
 */
FZ_QUIET static size_t m_nearest_of(uint32_t hash)
{
    const fz_point *ring = m_points();
    size_t ahead = 0, behind = 0;
    uint32_t best_ahead = UINT32_MAX, best_behind = UINT32_MAX;
    int any_ahead = 0, any_behind = 0;
    for (size_t i = 0; i < m_total; i++) {
        uint32_t da = ring[i].value - hash, db = hash - ring[i].value - 1u;
        if (!any_ahead || da < best_ahead) {
            ahead = i;
            best_ahead = da;
            any_ahead = 1;
        }
        if (!any_behind || db <= best_behind) {
            behind = i;
            best_behind = db;
            any_behind = 1;
        }
    }
    uint32_t dp = hash - ring[behind].value, dn = ring[ahead].value - hash;
    return dp <= dn ? behind : ahead;
}

/*
 * The varnish rule's routed point where it is one point (see the header):
 * the last above every point, the second of two, the successor when no
 * point has the hash's value; SIZE_MAX for an exact hit.
 */
FZ_QUIET static size_t m_varnish_of(uint32_t hash)
{
    const fz_point *ring = m_points();
    if (m_total == 2)
        return 1;
    if (hash > ring[m_total - 1].value)
        return m_total - 1;
    for (size_t i = 0; i < m_total; i++)
        if (ring[i].value == hash)
            return SIZE_MAX;
    return m_successor(hash);
}

/* The routed point under the model ring's rule (an exact hit of the
 * varnish rule: the engine's, once checked to be of the hash's value). */
FZ_QUIET static size_t m_route_of(const chash_ring *ring, uint32_t hash)
{
    if (!m_varnish)
        return m_nearest ? m_nearest_of(hash) : m_successor(hash);
    size_t want = m_varnish_of(hash);
    if (want != SIZE_MAX)
        return want;
    size_t got = chash_ring_varnish(ring, hash);
    if (got >= m_total || m_points()[got].value != hash)
        FZ_FAIL("varnish exact hit of %#x: index %zu", hash, got);
    return got;
}

/* Is the multiset sub (n) contained in the multiset of (m)? */
FZ_QUIET static int fz_contains(const uint32_t *of, size_t m, const uint32_t *sub, size_t n)
{
    uint32_t *a = fz_xmalloc(m * sizeof *a), *b = fz_xmalloc(n * sizeof *b);
    memcpy(a, of, m * sizeof *a);
    memcpy(b, sub, n * sizeof *b);
    qsort(a, m, sizeof *a, fz_cmp_u32);
    qsort(b, n, sizeof *b, fz_cmp_u32);
    size_t i = 0, j = 0;
    while (j < n && i < m) {
        if (a[i] == b[j])
            j++;
        else if (a[i] > b[j])
            break;
        i++;
    }
    free(a);
    free(b);
    return j == n;
}

/* Takes the multiset sub away from node k's points (it must be contained). */
FZ_QUIET static void m_take(size_t k, const uint32_t *sub, size_t n)
{
    fz_node *node = &m_nodes[k];
    for (size_t j = 0; j < n; j++) {
        size_t i = 0;
        while (i < node->npts && node->pts[i] != sub[j])
            i++;
        FZ_ASSERT(i < node->npts);
        node->pts[i] = node->pts[--node->npts];
    }
    m_total -= n;
    m_dirty = 1;
}

/* ------------------------------------------------------------------ */
/* Allocation failure bracket                                         */

static unsigned long fz_failures_before, fz_allocs_before;

static void fz_begin(void)
{
    fz_failures_before = fz_failures;
    fz_allocs_before = fz_allocs;
}

/* CHASH_ENOMEM is acceptable only when an allocation was made to fail. */
static unsigned fz_end(void)
{
    fz_countdown = -1;
    return fz_failures != fz_failures_before ? FZ_ALLOW(CHASH_ENOMEM) : 0;
}

/* ------------------------------------------------------------------ */
/* Checking the engine against the model                              */

FZ_QUIET static void fz_check_lookup(const chash_ring *ring, uint32_t hash)
{
    if (m_total == 0) {
        void *none = &none;
        FZ_ASSERT(chash_ring_lookup(ring, hash, &none) == CHASH_ENOENT && none == &none);
        return;
    }
    const fz_point *points = m_points();
    size_t want = m_successor(hash);
    size_t got = chash_ring_successor(ring, hash);
    if (got != want)
        FZ_FAIL("successor of %#x: got index %zu, expected %zu", hash, got, want);
    /* The nearest rule is asked of every ring, whatever its own rule. */
    size_t near = m_nearest_of(hash), got_near = chash_ring_nearest(ring, hash);
    if (got_near != near)
        FZ_FAIL("nearest of %#x: got index %zu, expected %zu", hash, got_near, near);
    want = m_route_of(ring, hash);
    if (chash_ring_route(ring, hash) != want)
        FZ_FAIL("route of %#x: got index %zu, expected %zu", hash, chash_ring_route(ring, hash), want);
    void *data = NULL;
    FZ_ASSERT(chash_ring_lookup(ring, hash, &data) == CHASH_OK);
    if (data != m_nodes[points[want].owner].data)
        FZ_FAIL("lookup of %#x: wrong node", hash);
}

FZ_QUIET static void fz_check_preference(const chash_ring *ring, uint32_t hash, size_t n)
{
    size_t *out = fz_xmalloc(n * sizeof *out);
    fz_begin();
    size_t got = n + 1;
    int status = chash_ring_preference(ring, hash, n, out, &got);
    unsigned enomem = fz_end();
    if (status == CHASH_ENOMEM && enomem) {
        FZ_ASSERT(got == 0);
        free(out);
        return;
    }
    fz_expect("chash_ring_preference", status, FZ_ALLOW(CHASH_OK));
    size_t want_n = n < m_count ? n : m_count;
    if (m_total == 0)
        want_n = 0;
    if (got != want_n)
        FZ_FAIL("preference of %#x, n=%zu: got %zu nodes, expected %zu", hash, n, got, want_n);
    /* Walk the model clockwise from the routed point, first meetings only. */
    unsigned char seen[FZ_MAX_NODES] = {0};
    size_t found = 0;
    if (m_total) {
        const fz_point *points = m_points();
        size_t i = m_route_of(ring, hash);
        for (size_t steps = 0; steps < m_total && found < want_n; steps++) {
            uint32_t o = points[i].owner;
            if (!seen[o]) {
                seen[o] = 1;
                if (out[found] != o)
                    FZ_FAIL("preference of %#x: entry %zu is node %zu, expected %u", hash,
                            found, out[found], o);
                found++;
            }
            if (++i == m_total)
                i = 0;
        }
    }
    FZ_ASSERT(found == want_n);
    free(out);
}

FZ_QUIET static void fz_check_ownership(const chash_ring *ring)
{
    double *share = fz_xmalloc(m_count * sizeof *share);
    double want[FZ_MAX_NODES] = {0};
    chash_ring_ownership(ring, share);
    const fz_point *points = m_points();
    for (size_t i = 0; i < m_total && !m_nearest && !(m_varnish && m_total == 2); i++) {
        uint64_t prev = i ? points[i - 1].value : (uint64_t)points[m_total - 1].value;
        uint64_t cur = points[i].value + (i ? 0 : (uint64_t)1 << 32);
        if (i == 0 && m_varnish) {
            /* No wrap: the values above the last point are the last's. */
            uint64_t above = 4294967295u - prev;
            want[points[m_total - 1].owner] += (double)above / 4294967296.0;
            prev += above;
        }
        want[points[i].owner] += (double)(cur - prev) / 4294967296.0;
    }
    if (m_varnish && m_total == 2)
        want[points[1].owner] = 1.0;
    if (m_nearest && m_total) {
        /* Each value's run of points: the first takes the values from the
         * middle of the gap before up to the value itself, the last the
         * values up to the middle of the gap after (ties behind). */
        size_t distinct = 1;
        for (size_t i = 1; i < m_total; i++)
            distinct += points[i].value != points[i - 1].value;
        if (distinct == 1) {
            want[points[m_total - 1].owner] += (2147483648.0 + 1.0) / 4294967296.0;
            want[points[0].owner] += (2147483648.0 - 1.0) / 4294967296.0;
        } else {
            for (size_t first = 0; first < m_total;) {
                size_t last = first;
                while (last + 1 < m_total && points[last + 1].value == points[first].value)
                    last++;
                uint32_t before = points[first ? first - 1 : m_total - 1].value;
                uint32_t after = points[last + 1 < m_total ? last + 1 : 0].value;
                uint64_t gap_before = (uint32_t)(points[first].value - before);
                uint64_t gap_after = (uint32_t)(after - points[last].value);
                want[points[first].owner] += (double)(gap_before - gap_before / 2) / 4294967296.0;
                want[points[last].owner] += (double)(gap_after / 2) / 4294967296.0;
                first = last + 1;
            }
        }
    }
    double sum = 0.0;
    for (size_t k = 0; k < m_count; k++) {
        if (!(share[k] >= 0.0 && share[k] <= 1.0) || fabs(share[k] - want[k]) > 1e-9)
            FZ_FAIL("ownership of node %zu: got %.17g, expected %.17g", k, share[k], want[k]);
        sum += share[k];
    }
    if (m_total && fabs(sum - 1.0) > 1e-9)
        FZ_FAIL("ownership sums to %.17g", sum);
    free(share);
}

/* Every node (id, data, point count, place) and every point the model's. */
FZ_QUIET static void fz_compare_all(const chash_ring *ring)
{
    size_t id_bytes = 0;
    for (size_t k = 0; k < m_count; k++) {
        chash_node_view view = chash_ring_node(ring, k);
        const fz_node *node = &m_nodes[k];
        if (view.id_len != node->id_len || (node->id_len && memcmp(view.id, node->id, node->id_len)))
            FZ_FAIL("node %zu has the wrong id", k);
        FZ_ASSERT(view.data == node->data);
        FZ_ASSERT(view.npoints == node->npts);
        size_t at = k + 1;
        FZ_ASSERT(chash_ring_find(ring, node->id, node->id_len, &at) == CHASH_OK && at == k);
        id_bytes += node->id_len;
    }
    FZ_ASSERT(chash_ring_memory(ring) >= m_total * 2 * sizeof(uint32_t) + id_bytes);
    const fz_point *points = m_points();
    for (size_t i = 0; i < m_total; i++) {
        uint32_t value = chash_ring_point(ring, i);
        size_t owner = chash_ring_point_owner(ring, i);
        if (value != points[i].value || owner != points[i].owner)
            FZ_FAIL("point %zu is (%#x, node %zu), expected (%#x, node %u)", i, value, owner,
                    points[i].value, points[i].owner);
    }
}

/* The engine must pass its own check and agree with the model on probes;
 * after a call that may have changed it (full), on every node and point. */
FZ_QUIET static void fz_verify(const chash_ring *ring, uint32_t salt, int full)
{
    long armed = fz_countdown; /* an armed failure is for the next step */
    fz_countdown = -1;
    int status = chash_ring_check(ring);
    if (status != CHASH_OK)
        FZ_FAIL("chash_ring_check: %s", chash_strerror(status));
    FZ_ASSERT(chash_ring_node_count(ring) == m_count);
    FZ_ASSERT(chash_ring_point_count(ring) == m_total);
    if (full)
        fz_compare_all(ring);
    const fz_point *points = m_points();
    /* Probes: the ends of the hash space, and on and around a few points. */
    fz_check_lookup(ring, 0);
    fz_check_lookup(ring, UINT32_MAX);
    fz_check_lookup(ring, salt);
    if (m_total) {
        size_t picks[3] = {0, m_total - 1, salt % m_total};
        for (int p = 0; p < 3; p++) {
            uint32_t v = points[picks[p]].value;
            fz_check_lookup(ring, v - 1);
            fz_check_lookup(ring, v);
            fz_check_lookup(ring, v + 1);
        }
    }
    fz_check_preference(ring, salt, m_count);
    fz_countdown = armed;
}

/* ------------------------------------------------------------------ */
/* Generating arguments                                               */

/* An id: bytes in an exactly sized heap block (NULL or a block for empty). */
typedef struct {
    char *buf;
    size_t len;
} fz_id;

static const struct {
    const char *s;
    size_t n;
} fz_pool_ids[] = {
    {"", 0}, {"\0", 1}, {"a", 1}, {"a\0", 2}, {"ab", 2}, {"b", 1},
    {"\xff", 1}, {"\0\0", 2}, {"a\xff", 2}, {"node-1", 6}, {"node-10", 7}, {"\xc3\xa9", 2},
};
#define FZ_POOL_IDS (sizeof fz_pool_ids / sizeof fz_pool_ids[0])

static fz_id fz_make_id(fz_in *in, const char *bytes, size_t len)
{
    fz_id id = {NULL, len};
    if (len == 0) {
        /* An empty id may come as NULL or as a real pointer. */
        if (fz_u8(in) & 1)
            id.buf = fz_xmalloc(1);
        return id;
    }
    id.buf = fz_xmalloc(len);
    memcpy(id.buf, bytes, len);
    return id;
}

static fz_id fz_gen_id(fz_in *in)
{
    char tmp[FZ_MAX_ID];
    size_t len = 0;
    unsigned mode = fz_u8(in) % 6;
    if ((mode == 0 || mode == 2) && m_count == 0)
        mode = 1;
    switch (mode) {
    case 0: { /* a node in the ring */
        const fz_node *node = &m_nodes[fz_u8(in) % m_count];
        len = node->id_len;
        memcpy(tmp, node->id, len);
        break;
    }
    case 1: /* raw bytes */
        len = fz_u8(in) % 17;
        for (size_t i = 0; i < len; i++)
            tmp[i] = (char)fz_u8(in);
        break;
    case 2: { /* a near miss of a node in the ring: prefix, extension, neighbour */
        const fz_node *node = &m_nodes[fz_u8(in) % m_count];
        len = node->id_len;
        memcpy(tmp, node->id, len);
        unsigned how = fz_u8(in) % 3;
        if (how == 0 && len > 0)
            len -= 1 + fz_u8(in) % len;
        else if (how == 1 && len < FZ_MAX_ID)
            tmp[len++] = (char)fz_u8(in);
        else if (len > 0)
            tmp[len - 1] = (char)(tmp[len - 1] + ((fz_u8(in) & 1) ? 1 : -1));
        break;
    }
    case 3: { /* prefixes, NULs, empty */
        unsigned pick = fz_u8(in) % FZ_POOL_IDS;
        len = fz_pool_ids[pick].n;
        memcpy(tmp, fz_pool_ids[pick].s, len);
        break;
    }
    case 4: { /* long: past the scheme's stack buffer */
        len = 64 + 2 * (size_t)fz_u8(in);
        unsigned a = fz_u8(in), b = fz_u8(in);
        for (size_t i = 0; i < len; i++)
            tmp[i] = (char)(a + i * b);
        break;
    }
    default: /* empty */
        len = 0;
        break;
    }
    return fz_make_id(in, tmp, len);
}

static void fz_free_id(fz_id *id)
{
    free(id->buf);
    id->buf = NULL;
}

/* Values where the bucket index and the wrap-around change. */
static const uint32_t fz_edges[] = {
    0u, 1u, 2u, 0x00ffffffu, 0x01000000u, 0x3fffffffu, 0x40000000u, 0x7fffffffu,
    0x80000000u, 0xbfffffffu, 0xc0000000u, 0xfffffffeu, 0xffffffffu, 0x0000ffffu, 0x00010000u,
    0xffff0000u,
};
#define FZ_EDGES (sizeof fz_edges / sizeof fz_edges[0])

static uint32_t fz_gen_value(fz_in *in)
{
    unsigned mode = fz_u8(in);
    switch (mode & 3) {
    case 0:
        return fz_u32(in);
    case 1:
        return fz_edges[(mode >> 2) % FZ_EDGES];
    case 2:
        if (m_total) {
            const fz_point *points = m_points();
            uint32_t v = points[fz_u16(in) % m_total].value;
            return v + (uint32_t)((mode >> 2) % 3) - 1u;
        }
        return mode >> 2;
    default:
        return mode >> 2; /* 0..63: values shared between nodes */
    }
}

static const uint32_t fz_masks[] = {
    0xffffffffu, 0x0000003fu, 0x000003ffu, 0xffff0000u, 0xf000000fu, 0x00ffffffu, 0x80000001u, 0x0fffffffu,
};

/*
 * A point array in an exactly sized heap block: explicit values, or (one
 * time in eight) many pseudo-random ones, masked to crowd them; one such
 * array in four is up to 12,288 points, so that batches cross the engine's
 * switch from a comparison sort to a radix sort (rarely: every step costs
 * time in proportion to the ring).  At most room points.
 */
static uint32_t *fz_gen_points(fz_in *in, size_t room, size_t *count)
{
    unsigned head = fz_u8(in);
    size_t n;
    uint32_t *pts;
    if ((head & 0xe0) == 0xe0) {
        n = 1 + fz_u16(in) % ((head & 0x18) == 0x18 ? 12288 : 1024);
        uint32_t x = fz_u32(in) | 1u, base = fz_u32(in);
        uint32_t mask = fz_masks[head % (sizeof fz_masks / sizeof fz_masks[0])];
        if (n > room)
            n = room;
        pts = fz_xmalloc(n * sizeof *pts);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13; /* xorshift32 */
            x ^= x >> 17;
            x ^= x << 5;
            pts[i] = base + (x & mask);
        }
    } else {
        n = head % 40;
        if (n > room)
            n = room;
        pts = fz_xmalloc(n * sizeof *pts);
        for (size_t i = 0; i < n; i++)
            pts[i] = fz_gen_value(in);
    }
    *count = n;
    return pts;
}

/* ------------------------------------------------------------------ */
/* Ring operations                                                    */

static void fz_op_add(chash_ring *ring, fz_in *in)
{
    fz_id id = fz_gen_id(in);
    size_t n;
    uint32_t *pts = fz_gen_points(in, FZ_MAX_POINTS - m_total, &n);
    if (m_count < FZ_MAX_NODES) {
        void *data = m_token();
        unsigned allowed = 0;
        if (n == 0)
            allowed |= FZ_ALLOW(CHASH_EINVAL);
        if (m_find(id.buf, id.len) >= 0)
            allowed |= FZ_ALLOW(CHASH_EEXIST);
        if (!allowed)
            allowed = FZ_ALLOW(CHASH_OK);
        fz_begin();
        int status = chash_ring_add(ring, id.buf, id.len, data, pts, n);
        allowed |= fz_end();
        fz_expect("chash_ring_add", status, allowed);
        if (status == CHASH_OK)
            m_add(id.buf, id.len, data, pts, n);
    }
    free(pts);
    fz_free_id(&id);
}

#define FZ_MANY 8

static void fz_op_add_many(chash_ring *ring, fz_in *in)
{
    size_t count = fz_u8(in) % (FZ_MANY + 1);
    fz_id ids[FZ_MANY];
    uint32_t *pts[FZ_MANY];
    chash_node_spec specs[FZ_MANY];
    size_t room = FZ_MAX_POINTS - m_total;
    unsigned allowed = 0;
    for (size_t s = 0; s < count; s++) {
        size_t n;
        ids[s] = fz_gen_id(in);
        pts[s] = fz_gen_points(in, room, &n);
        room -= n;
        specs[s] = (chash_node_spec){ids[s].buf, ids[s].len, m_token(), pts[s], n};
        if (n == 0)
            allowed |= FZ_ALLOW(CHASH_EINVAL);
        if (m_find(ids[s].buf, ids[s].len) >= 0)
            allowed |= FZ_ALLOW(CHASH_EEXIST);
        for (size_t t = 0; t < s; t++)
            if (fz_cmp_ids(ids[s].buf ? ids[s].buf : "", ids[s].len,
                           ids[t].buf ? ids[t].buf : "", ids[t].len) == 0)
                allowed |= FZ_ALLOW(CHASH_EEXIST);
    }
    if (m_count + count <= FZ_MAX_NODES) {
        if (!allowed)
            allowed = FZ_ALLOW(CHASH_OK);
        fz_begin();
        int status = chash_ring_add_many(ring, count ? specs : NULL, count);
        allowed |= fz_end();
        fz_expect("chash_ring_add_many", status, allowed);
        if (status == CHASH_OK)
            for (size_t s = 0; s < count; s++)
                m_add(specs[s].id, specs[s].id_len, specs[s].data, specs[s].points, specs[s].npoints);
    }
    for (size_t s = 0; s < count; s++) {
        free(pts[s]);
        fz_free_id(&ids[s]);
    }
}

static void fz_op_remove(chash_ring *ring, fz_in *in)
{
    fz_id id = fz_gen_id(in);
    int want_data = fz_u8(in) & 1;
    long k = m_find(id.buf, id.len);
    void *data = NULL;
    fz_begin();
    int status = chash_ring_remove(ring, id.buf, id.len, want_data ? &data : NULL);
    fz_end();
    if (fz_allocs != fz_allocs_before)
        FZ_FAIL("chash_ring_remove asked for memory");
    fz_expect("chash_ring_remove", status, FZ_ALLOW(k >= 0 ? CHASH_OK : CHASH_ENOENT));
    if (status == CHASH_OK) {
        if (want_data && data != m_nodes[k].data)
            FZ_FAIL("chash_ring_remove handed back the wrong data");
        m_remove((size_t)k);
    }
    fz_free_id(&id);
}

static void fz_op_grow(chash_ring *ring, fz_in *in)
{
    fz_id id = fz_gen_id(in);
    size_t n;
    uint32_t *pts = fz_gen_points(in, FZ_MAX_POINTS - m_total, &n);
    long k = m_find(id.buf, id.len);
    unsigned allowed = 0;
    if (k < 0)
        allowed |= FZ_ALLOW(CHASH_ENOENT);
    if (n == 0)
        allowed |= FZ_ALLOW(CHASH_EINVAL);
    if (!allowed)
        allowed = FZ_ALLOW(CHASH_OK);
    fz_begin();
    int status = chash_ring_grow(ring, id.buf, id.len, pts, n);
    allowed |= fz_end();
    fz_expect("chash_ring_grow", status, allowed);
    if (status == CHASH_OK) {
        fz_node *node = &m_nodes[k];
        uint32_t *all = fz_xmalloc((node->npts + n) * sizeof *all);
        memcpy(all, node->pts, node->npts * sizeof *all);
        memcpy(all + node->npts, pts, n * sizeof *all);
        free(node->pts);
        node->pts = all;
        node->npts += n;
        m_total += n;
        m_dirty = 1;
    }
    free(pts);
    fz_free_id(&id);
}

static void fz_op_shrink(chash_ring *ring, fz_in *in)
{
    unsigned mode = fz_u8(in) % 5;
    fz_id id;
    long k = -1;
    if (mode < 4 && m_count) {
        k = (long)(fz_u8(in) % m_count);
        id = fz_make_id(in, m_nodes[k].id, m_nodes[k].id_len);
    } else {
        id = fz_gen_id(in);
        k = m_find(id.buf, id.len);
        mode = 4;
    }
    size_t n = 0;
    uint32_t *pts = NULL;
    if (mode == 4) { /* anything */
        pts = fz_gen_points(in, FZ_MAX_POINTS, &n);
    } else {
        /* Points of the node: a stride through them, all of them, or some
         * plus one that may be absent. */
        const fz_node *node = &m_nodes[k];
        size_t start = fz_u16(in) % node->npts, stride = 1 + fz_u8(in) % 7;
        n = mode == 1 ? node->npts : 1 + fz_u8(in) % (node->npts < 64 ? node->npts : 64);
        pts = fz_xmalloc((n + 1) * sizeof *pts);
        for (size_t i = 0; i < n; i++)
            pts[i] = node->pts[mode == 1 ? i : (start + i * stride) % node->npts];
        if (mode == 3)
            pts[n++] = fz_gen_value(in);
        if (mode == 2) /* reversed order */
            for (size_t i = 0; i < n / 2; i++) {
                uint32_t t = pts[i];
                pts[i] = pts[n - 1 - i];
                pts[n - 1 - i] = t;
            }
    }
    unsigned allowed;
    if (k < 0) {
        allowed = FZ_ALLOW(CHASH_ENOENT);
    } else if (n == 0) {
        allowed = FZ_ALLOW(CHASH_OK);
    } else {
        int contained = fz_contains(m_nodes[k].pts, m_nodes[k].npts, pts, n);
        if (n >= m_nodes[k].npts)
            allowed = FZ_ALLOW(CHASH_EINVAL) | (contained ? 0 : FZ_ALLOW(CHASH_ENOENT));
        else
            allowed = FZ_ALLOW(contained ? CHASH_OK : CHASH_ENOENT);
    }
    fz_begin();
    int status = chash_ring_shrink(ring, id.buf, id.len, pts, n);
    allowed |= fz_end();
    fz_expect("chash_ring_shrink", status, allowed);
    if (status == CHASH_OK && n)
        m_take((size_t)k, pts, n);
    free(pts);
    fz_free_id(&id);
}

/* One 64 MiB block of zeros, so that even an engine that read points
 * before checking the limits would read memory it may read. */
static uint32_t *fz_big(void)
{
    static uint32_t *big;
    if (!big) {
        big = calloc(CHASH_MAX_NODE_POINTS + 1, sizeof *big);
        FZ_ASSERT(big);
    }
    return big;
}

/* Requests past the documented limits fail cleanly, changing nothing. */
static void fz_op_limits(chash_ring *ring, fz_in *in)
{
    unsigned what = fz_u8(in) % 5;
    int status;
    fz_id id = fz_gen_id(in);
    long k = m_find(id.buf, id.len);
    switch (what) {
    case 0: /* one node with one point too many */
        status = chash_ring_add(ring, id.buf, id.len, m_token(), fz_big(), CHASH_MAX_NODE_POINTS + 1);
        fz_expect("add over CHASH_MAX_NODE_POINTS", status,
                  FZ_ALLOW(CHASH_EINVAL) | (k >= 0 ? FZ_ALLOW(CHASH_EEXIST) : 0));
        break;
    case 1: /* growing a node past its limit */
        if (k >= 0) {
            size_t over = CHASH_MAX_NODE_POINTS - m_nodes[k].npts + 1 + fz_u8(in) % 4;
            over = over > CHASH_MAX_NODE_POINTS + 1 ? CHASH_MAX_NODE_POINTS + 1 : over;
            status = chash_ring_grow(ring, id.buf, id.len, fz_big(), over);
            fz_expect("grow over CHASH_MAX_NODE_POINTS", status, FZ_ALLOW(CHASH_EINVAL));
        }
        break;
    case 2: { /* nodes within their limit, the ring past its own */
        enum { N = (int)(CHASH_MAX_POINTS / CHASH_MAX_NODE_POINTS) + 1 };
        chash_node_spec specs[N];
        char names[N][3];
        unsigned allowed = FZ_ALLOW(CHASH_ERANGE);
        for (int s = 0; s < N; s++) {
            names[s][0] = (char)0xfe;
            names[s][1] = (char)0xfd;
            names[s][2] = (char)s;
            specs[s] = (chash_node_spec){names[s], 3, m_token(), fz_big(), CHASH_MAX_NODE_POINTS};
            if (m_find(names[s], 3) >= 0)
                allowed |= FZ_ALLOW(CHASH_EEXIST);
        }
        status = chash_ring_add_many(ring, specs, N);
        fz_expect("add_many over CHASH_MAX_POINTS", status, allowed);
        break;
    }
    case 3: { /* a NULL id with a length, alone or in a batch */
        uint32_t one = fz_gen_value(in);
        status = chash_ring_add(ring, NULL, 1 + fz_u8(in) % 8, m_token(), &one, 1);
        fz_expect("add of a NULL id", status, FZ_ALLOW(CHASH_EINVAL));
        chash_node_spec specs[2] = {
            {"\xfe\xfd", 2, m_token(), &one, 1},
            {NULL, 3, m_token(), &one, 1},
        };
        status = chash_ring_add_many(ring, specs, 2);
        fz_expect("add_many with a NULL id", status,
                  FZ_ALLOW(CHASH_EINVAL) | (m_find("\xfe\xfd", 2) >= 0 ? FZ_ALLOW(CHASH_EEXIST) : 0));
        break;
    }
    default: /* zero points: add, grow, batch */
        status = chash_ring_add(ring, id.buf, id.len, m_token(), fz_big(), 0);
        fz_expect("add of no point", status,
                  FZ_ALLOW(CHASH_EINVAL) | (k >= 0 ? FZ_ALLOW(CHASH_EEXIST) : 0));
        status = chash_ring_grow(ring, id.buf, id.len, fz_big(), 0);
        fz_expect("grow by no point", status, FZ_ALLOW(k >= 0 ? CHASH_EINVAL : CHASH_ENOENT));
        break;
    }
    fz_free_id(&id);
}

static void fz_op_lookup(chash_ring *ring, fz_in *in)
{
    fz_check_lookup(ring, fz_gen_value(in));
}

static void fz_op_preference(chash_ring *ring, fz_in *in)
{
    uint32_t hash = fz_gen_value(in);
    fz_check_preference(ring, hash, fz_u8(in) % (m_count + 3));
}

/* The batch lookup, into its own array or over the hashes themselves. */
static void fz_op_owners(const chash_ring *ring, fz_in *in)
{
    size_t n = fz_u8(in) % 64;
    int in_place = fz_u8(in) & 1;
    uint32_t *hashes = fz_xmalloc(n * sizeof *hashes);
    uint32_t *want = fz_xmalloc(n * sizeof *want);
    uint32_t *owners = in_place ? hashes : fz_xmalloc(n * sizeof *owners);
    for (size_t i = 0; i < n; i++)
        hashes[i] = fz_gen_value(in);
    if (m_total) { /* the ring must not be empty */
        for (size_t i = 0; i < n; i++)
            want[i] = m_points()[m_route_of(ring, hashes[i])].owner;
        chash_ring_owners(ring, hashes, n, owners);
        for (size_t i = 0; i < n; i++)
            if (owners[i] != want[i])
                FZ_FAIL("chash_ring_owners%s: key %zu of %zu got node %u, expected %u",
                        in_place ? " in place" : "", i, n, owners[i], want[i]);
    }
    if (!in_place)
        free(owners);
    free(hashes);
    free(want);
}

/* ------------------------------------------------------------------ */
/* Schemes                                                            */

static const char *const fz_infix[CHASH_LAYOUT_COUNT] = {"_virtual_", "#vnode", "-", "", "-", "",
                                                         "", ""};
static const size_t fz_digest_size[CHASH_HASH_COUNT] = {16, 20, 4, 4, 4, 8, 8, 4, 4, 4,
                                                        4, 4, 4, 4, 4, 4, 4, 32, 16};

static uint32_t fz_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t fz_le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The scheme's cut of a digest, written from engine/scheme.h's table. */
static uint32_t fz_cut(const chash_scheme *scheme, const uint8_t *digest, size_t size, size_t group)
{
    if (scheme->layout == CHASH_LAYOUT_NODE || scheme->layout == CHASH_LAYOUT_NGHTTPX)
        return fz_be32(digest);
    if (scheme->layout == CHASH_LAYOUT_VARNISH)
        return fz_le32(digest + size - 4);
    if (scheme->layout == CHASH_LAYOUT_KETAMA)
        return fz_le32(digest + 4 * group);
    if (scheme->layout == CHASH_LAYOUT_LIBMEMCACHED && scheme->hash == CHASH_HASH_MD5)
        return fz_le32(digest);
    return fz_be32(digest + size - 4);
}

/* nginx's point index: crc32(host "\0" port prev) chained from prev = 0,
 * the address split as engine/scheme.h says (a plain reading of it). */
static uint32_t fz_nginx_point(const fz_id *id, size_t index)
{
    const char *a = id->buf;
    size_t n = id->len, host_at = 0, host_len = n, port_at = n, port_len = 0;
    int is_unix = n >= 5;
    for (size_t i = 0; is_unix && i < 4; i++) /* "unix" in any case, then ':' */
        is_unix = a[i] == "unix"[i] || a[i] == "UNIX"[i];
    is_unix = is_unix && a[4] == ':';
    if (is_unix) {
        host_at = 5;
        host_len = n - 5;
    } else {
        size_t digits = 0;
        while (digits < n && a[n - 1 - digits] >= '0' && a[n - 1 - digits] <= '9')
            digits++;
        if (digits < n && a[n - 1 - digits] == ':') {
            host_len = n - 1 - digits;
            port_at = n - digits;
            port_len = digits;
        }
    }
    char buf[FZ_MAX_ID + 8];
    if (host_len) /* an empty id may come with a NULL buffer */
        memcpy(buf, a + host_at, host_len);
    buf[host_len] = 0;
    if (port_len)
        memcpy(buf + host_len + 1, a + port_at, port_len);
    size_t head = host_len + 1 + port_len;
    uint32_t prev = 0;
    for (size_t i = 0; i <= index; i++) {
        for (int b = 0; b < 4; b++)
            buf[head + (size_t)b] = (char)(uint8_t)(prev >> (8 * b));
        uint8_t digest[CHASH_MAX_DIGEST];
        chash_digest(CHASH_HASH_CRC32, buf, head + 4, 0, digest);
        prev = fz_be32(digest);
    }
    return prev;
}

/* The virtual key of point index, spelled with snprintf. */
static size_t fz_vkey(chash_layout_id layout, const fz_id *id, size_t index, char *out)
{
    if (layout == CHASH_LAYOUT_NGINX)
        return 0; /* chained points: no virtual keys */
    char tail[64];
    size_t shown = layout == CHASH_LAYOUT_KETAMA ? index / 4 : index;
    int n = snprintf(tail, sizeof tail, "%s%zu", fz_infix[layout], shown);
    FZ_ASSERT(n > 0 && (size_t)n < sizeof tail);
    if (id->len)
        memcpy(out, id->buf, id->len);
    memcpy(out + id->len, tail, (size_t)n);
    return id->len + (size_t)n;
}

static uint32_t fz_ref_point(const chash_scheme *scheme, const fz_id *id, size_t index)
{
    if (scheme->layout == CHASH_LAYOUT_NGINX)
        return fz_nginx_point(id, index);
    char vkey[FZ_MAX_ID + 64];
    size_t len = fz_vkey(scheme->layout, id, index, vkey);
    uint8_t digest[CHASH_MAX_DIGEST];
    size_t size = chash_digest(scheme->hash, vkey, len, 0, digest);
    FZ_ASSERT(size == fz_digest_size[scheme->hash]);
    return fz_cut(scheme, digest, size, scheme->layout == CHASH_LAYOUT_KETAMA ? index % 4 : 0);
}

/* Lengths around MD5's and SHA-1's 64-byte blocks and their padding. */
static const size_t fz_key_lens[] = {0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 200};

static fz_id fz_gen_key(fz_in *in)
{
    char tmp[8 * 255 + 1];
    unsigned mode = fz_u8(in) % 4;
    size_t len;
    if (mode == 0)
        len = fz_u8(in) % 12;
    else if (mode == 1)
        len = fz_key_lens[fz_u8(in) % (sizeof fz_key_lens / sizeof fz_key_lens[0])];
    else if (mode == 2) /* past xxh3's 1,024-byte blocks too */
        len = 8 * (size_t)fz_u8(in);
    else
        len = 0;
    unsigned a = fz_u8(in), b = fz_u8(in);
    for (size_t i = 0; i < len; i++)
        tmp[i] = (char)(a + i * b + (i >> 3));
    if (len && mode == 0)
        for (size_t i = 0; i < len; i++)
            tmp[i] = (char)fz_u8(in);
    return fz_make_id(in, tmp, len);
}

/* A node's points and virtual keys under a scheme of named nodes. */
static void fz_scheme_points(const chash_scheme *scheme_in, fz_in *in)
{
    chash_scheme scheme = *scheme_in;
    /* Points: each the reference's, and independent of the range asked. */
    fz_id id = fz_gen_id(in);
    size_t first;
    switch (fz_u8(in) % 4) {
    case 0: first = fz_u8(in); break;
    case 1: first = fz_u32(in); break;
    case 2: first = SIZE_MAX - 64 - fz_u8(in); break;
    default:
        first = (size_t)fz_u64(in);
        first >>= fz_u8(in) % 64;
        break;
    }
    if (first > SIZE_MAX - 64)
        first = SIZE_MAX - 64;
    if (scheme.layout == CHASH_LAYOUT_NGINX) {
        /* Chained from point 0: past the engine's bound it refuses. */
        uint32_t none[1];
        if (first > CHASH_MAX_NODE_POINTS)
            fz_expect("chash_scheme_points", chash_scheme_points(&scheme, id.buf, id.len, first,
                                                                 1, none), FZ_ALLOW(CHASH_EINVAL));
        first %= 300;
    }
    size_t count = fz_u8(in) % 41, split = fz_u8(in) % (count + 1);
    uint32_t *all = fz_xmalloc(count * sizeof *all);
    uint32_t *part = fz_xmalloc(count * sizeof *part);
    fz_expect("chash_scheme_points", chash_scheme_points(&scheme, id.buf, id.len, first, count, all),
              FZ_ALLOW(CHASH_OK));
    fz_expect("chash_scheme_points", chash_scheme_points(&scheme, id.buf, id.len, first, split, part),
              FZ_ALLOW(CHASH_OK));
    fz_expect("chash_scheme_points", chash_scheme_points(&scheme, id.buf, id.len, first + split,
                                                         count - split, part + split),
              FZ_ALLOW(CHASH_OK));
    for (size_t k = 0; k < count; k++) {
        uint32_t want = fz_ref_point(&scheme, &id, first + k);
        if (all[k] != want || part[k] != want)
            FZ_FAIL("%s/%s point %zu of a %zu-byte id: got %#x (split at %zu: %#x), expected %#x",
                    chash_layout_name(scheme.layout), chash_hash_name(scheme.hash), first + k,
                    id.len, all[k], split, part[k], want);
    }
    free(all);
    free(part);

    /* The virtual key: spelled as documented, nothing written when short. */
    char want_key[FZ_MAX_ID + 64];
    size_t want_len = fz_vkey(scheme.layout, &id, first, want_key);
    size_t cap = fz_u8(in) & 1 ? want_len : (size_t)fz_u8(in) % (want_len + 1);
    char *buf = fz_xmalloc(cap);
    size_t got_len = chash_scheme_vkey(&scheme, id.buf, id.len, first, cap ? buf : NULL, cap);
    FZ_ASSERT(got_len == want_len);
    if (cap >= want_len && memcmp(buf, want_key, want_len) != 0)
        FZ_FAIL("virtual key %zu of a %zu-byte id spelled wrong", first, id.len);
    free(buf);
    fz_free_id(&id);
}

/* HAProxy's full_hash, as its definition reads (the model's own copy). */
static uint32_t fz_full_hash(uint32_t a)
{
    a = (a + 0x7ed55d16u) + (a << 12);
    a = (a ^ 0xc761c23cu) ^ (a >> 19);
    a = (a + 0x165667b1u) + (a << 5);
    a = (a + 0xd3a2646cu) ^ (a << 9);
    a = (a + 0xfd7046c5u) + (a << 3);
    a = (a ^ 0xb55a4f09u) ^ (a >> 16);
    return a * 3221225473u;
}

/* The haproxy layout: no points of a name, points of a puid in range. */
static void fz_haproxy_points(const chash_scheme *scheme, fz_in *in)
{
    uint32_t none[1], got[48];
    fz_expect("chash_scheme_points (haproxy)", chash_scheme_points(scheme, "a", 1, 0, 1, none),
              FZ_ALLOW(CHASH_EINVAL));
    char key[8];
    FZ_ASSERT(chash_scheme_vkey(scheme, "a", 1, 0, key, sizeof key) == 0);
    uint32_t puid = fz_u8(in) & 1 ? fz_u32(in) : fz_u8(in);
    size_t first = fz_u16(in) % 4200, count = fz_u8(in) % 48;
    int ok = puid != 0 && first + count <= 4096;
    fz_expect("chash_haproxy_points", chash_haproxy_points(puid, first, count, got),
              FZ_ALLOW(ok ? CHASH_OK : CHASH_EINVAL));
    for (size_t j = 0; ok && j < count; j++)
        if (got[j] != fz_full_hash(puid * 4096u + (uint32_t)(first + j)))
            FZ_FAIL("haproxy point %zu of puid %u: got %#x", first + j, puid, got[j]);
}

/* nghttpx's address bytes, built here: family (host order, little-endian),
 * port (network order), address, zeros. */
static size_t fz_sockaddr(int v6, const uint8_t *addr, unsigned port, uint8_t *out)
{
    size_t n = v6 ? 28 : 16;
    memset(out, 0, n);
    out[0] = v6 ? 10 : 2;
    out[2] = (uint8_t)(port >> 8);
    out[3] = (uint8_t)port;
    memcpy(out + (v6 ? 8 : 4), addr, v6 ? 16 : 4);
    return n;
}

/* The nghttpx layout: ids spelled here from random addresses (IPv4, IPv6
 * in full, with "::" or an embedded quad, ";dns"), their points against
 * SHA-256 of the bytes built here; any bytes as an id: refused or taken,
 * never more, and when taken their points are the key's. */
static void fz_nghttpx_points(const chash_scheme *scheme, fz_in *in)
{
    char id[FZ_MAX_ID + 80];
    uint8_t want_key[CHASH_NGHTTPX_KEY_MAX + 80], addr[16];
    size_t want_len = 0;
    int n = 0;
    unsigned port = fz_u32(in) % 65536, mode = fz_u8(in) % 5;
    for (int i = 0; i < 16; i++)
        addr[i] = fz_u8(in);
    if (mode == 0) {
        n = snprintf(id, sizeof id, "%u.%u.%u.%u:%u", addr[0], addr[1], addr[2], addr[3], port);
        want_len = fz_sockaddr(0, addr, port, want_key);
    } else if (mode == 1 || mode == 2) {
        /* Full form, or with the longest zero run (if any) as "::". */
        unsigned g[8];
        for (int i = 0; i < 8; i++)
            g[i] = (unsigned)addr[2 * i] << 8 | addr[2 * i + 1];
        if (mode == 2)
            for (int i = 2; i < 6; i++) {
                g[i] = 0;
                addr[2 * i] = addr[2 * i + 1] = 0;
            }
        if (mode == 1)
            n = snprintf(id, sizeof id, "[%x:%x:%x:%x:%x:%x:%x:%x]:%u", g[0], g[1], g[2], g[3],
                         g[4], g[5], g[6], g[7], port);
        else
            n = snprintf(id, sizeof id, "[%x:%x::%x:%x]:%u", g[0], g[1], g[6], g[7], port);
        want_len = fz_sockaddr(1, addr, port, want_key);
    } else if (mode == 3) {
        memset(addr, 0, 10);
        addr[10] = addr[11] = 0xff;
        n = snprintf(id, sizeof id, "[::ffff:%u.%u.%u.%u]:%u", addr[12], addr[13], addr[14],
                     addr[15], port);
        want_len = fz_sockaddr(1, addr, port, want_key);
    } else {
        /* ";dns": the text before it, whatever host name. */
        size_t host = 1 + fz_u8(in) % 40;
        for (size_t i = 0; i < host; i++)
            id[i] = (char)('a' + fz_u8(in) % 26);
        n = (int)host + snprintf(id + host, sizeof id - host, ":%u;dns", port);
        want_len = (size_t)n - 4;
        memcpy(want_key, id, want_len);
    }
    FZ_ASSERT(n > 0 && (size_t)n < sizeof id);
    uint8_t got_key[CHASH_NGHTTPX_KEY_MAX + 80];
    size_t got_len = 0;
    fz_expect("chash_nghttpx_key", chash_nghttpx_key(id, (size_t)n, got_key, &got_len),
              FZ_ALLOW(CHASH_OK));
    if (got_len != want_len || memcmp(got_key, want_key, want_len) != 0)
        FZ_FAIL("nghttpx key of %.*s: %zu bytes, expected %zu", n, id, got_len, want_len);
    size_t first = fz_u8(in) % 170, count = fz_u8(in) % 170;
    uint32_t got[340];
    int status = chash_scheme_points(scheme, id, (size_t)n, first, count, got);
    int fits = first + count <= CHASH_NGHTTPX_POINTS;
    fz_expect("chash_scheme_points", status, FZ_ALLOW(fits ? CHASH_OK : CHASH_EINVAL));
    for (size_t k = 0; fits && k < count; k++) {
        uint8_t buf[CHASH_NGHTTPX_KEY_MAX + 81], digest[CHASH_MAX_DIGEST];
        memcpy(buf, want_key, want_len);
        buf[want_len] = (uint8_t)((first + k) / 8);
        chash_digest(CHASH_HASH_SHA256, buf, want_len + 1, 0, digest);
        if (got[k] != fz_be32(digest + 4 * ((first + k) % 8)))
            FZ_FAIL("nghttpx point %zu of %.*s: got %#x", first + k, n, id, got[k]);
    }
    /* Any bytes: refused, or a key whose points are those of its bytes. */
    fz_id raw = fz_gen_id(in);
    size_t raw_len = 0;
    status = chash_nghttpx_key(raw.buf, raw.len, NULL, &raw_len);
    fz_expect("chash_nghttpx_key", status, FZ_ALLOW(CHASH_OK) | FZ_ALLOW(CHASH_EINVAL));
    uint32_t one[1];
    fz_expect("chash_nghttpx_points", chash_nghttpx_points(raw.buf, raw.len, 0, 1, one),
              FZ_ALLOW(status == CHASH_OK ? CHASH_OK : CHASH_EINVAL) | FZ_ALLOW(CHASH_ENOMEM));
    FZ_ASSERT(chash_scheme_vkey(scheme, raw.buf, raw.len, 0, NULL, 0) == 0);
    fz_free_id(&raw);
}

static void fz_op_scheme(fz_in *in)
{
    unsigned layout = fz_u8(in) % (CHASH_LAYOUT_COUNT + 1);
    unsigned hash = fz_u8(in) % (CHASH_HASH_COUNT + 1);
    chash_scheme scheme;
    int status = chash_scheme_init(&scheme, (chash_layout_id)layout, (chash_hash_id)hash);
    int valid = layout < CHASH_LAYOUT_COUNT && hash < CHASH_HASH_COUNT
        && (layout != CHASH_LAYOUT_KETAMA || hash == CHASH_HASH_MD5)
        && (layout != CHASH_LAYOUT_NGINX || hash == CHASH_HASH_CRC32)
        && (layout != CHASH_LAYOUT_LIBMEMCACHED || hash == CHASH_HASH_ONE_AT_A_TIME
            || hash == CHASH_HASH_MD5)
        && (layout != CHASH_LAYOUT_HAPROXY || hash == CHASH_HASH_CRC32
            || (hash >= CHASH_HASH_SDBM && hash <= CHASH_HASH_CRC32_AVALANCHE))
        && ((layout != CHASH_LAYOUT_VARNISH && layout != CHASH_LAYOUT_NGHTTPX)
            || hash == CHASH_HASH_SHA256);
    fz_expect("chash_scheme_init", status, FZ_ALLOW(valid ? CHASH_OK : CHASH_EINVAL));
    if (!valid)
        return;

    if (scheme.layout == CHASH_LAYOUT_HAPROXY)
        fz_haproxy_points(&scheme, in);
    else if (scheme.layout == CHASH_LAYOUT_NGHTTPX)
        fz_nghttpx_points(&scheme, in);
    else
        fz_scheme_points(&scheme, in);

    /* Key hashes: the layout's cut of the digest; four at once the same. */
    fz_id keys[4];
    const void *ptrs[4];
    size_t lens[4];
    uint32_t x4[4] = {0, 0, 0, 0};
    for (int l = 0; l < 4; l++) {
        keys[l] = fz_gen_key(in);
        ptrs[l] = keys[l].buf;
        lens[l] = keys[l].len;
    }
    chash_scheme_key_hash_x4(&scheme, ptrs, lens, x4);
    for (int l = 0; l < 4; l++) {
        uint8_t digest[CHASH_MAX_DIGEST];
        size_t size = chash_digest(scheme.hash, keys[l].buf, keys[l].len, 0, digest);
        uint32_t want = fz_cut(&scheme, digest, size, 0);
        uint32_t one = chash_scheme_key_hash(&scheme, keys[l].buf, keys[l].len);
        if (one != want || x4[l] != want)
            FZ_FAIL("%s/%s key hash of %zu bytes (lane %d): scalar %#x, x4 %#x, expected %#x",
                    chash_layout_name(scheme.layout), chash_hash_name(scheme.hash), keys[l].len,
                    l, one, x4[l], want);
    }

    /* Seeds: cut to 32 bits by the 32-bit seeded hashes, ignored by the
     * unseeded ones.  A caller's own hash value: its low 32 bits. */
    uint64_t seed = fz_u64(in);
    FZ_ASSERT(chash_scheme_cut_int(seed) == (uint32_t)seed);
    uint8_t a[CHASH_MAX_DIGEST], b[CHASH_MAX_DIGEST];
    size_t na = chash_digest(scheme.hash, keys[0].buf, keys[0].len, seed, a);
    FZ_ASSERT(na == fz_digest_size[scheme.hash]);
    int seeded32 = scheme.hash == CHASH_HASH_MURMUR2 || scheme.hash == CHASH_HASH_MURMUR3
        || scheme.hash == CHASH_HASH_XXH32 || scheme.hash == CHASH_HASH_MURMUR3_128;
    int unseeded = scheme.hash == CHASH_HASH_MD5 || scheme.hash == CHASH_HASH_SHA1
        || scheme.hash == CHASH_HASH_SHA256
        || scheme.hash == CHASH_HASH_FNV1A || scheme.hash == CHASH_HASH_CRC32
        || scheme.hash == CHASH_HASH_ONE_AT_A_TIME
        || (scheme.hash >= CHASH_HASH_SDBM && scheme.hash <= CHASH_HASH_CRC32_AVALANCHE);
    if (seeded32 || unseeded) {
        size_t nb = chash_digest(scheme.hash, keys[0].buf, keys[0].len,
                                 unseeded ? 0 : (uint32_t)seed, b);
        FZ_ASSERT(nb == na && memcmp(a, b, na) == 0);
    }
    /* The 64-bit key hash of the jump routers: a byte digest's first 8
     * bytes little-endian, an integer result as itself. */
    size_t n0 = chash_digest(scheme.hash, keys[0].buf, keys[0].len, 0, a);
    int bytes = chash_hash_is_bytes(scheme.hash);
    FZ_ASSERT(bytes == (n0 >= 16));
    uint64_t want64 = 0;
    if (bytes)
        for (size_t i = 8; i-- > 0;)
            want64 = want64 << 8 | a[i];
    else
        for (size_t i = 0; i < n0; i++)
            want64 = want64 << 8 | a[i];
    FZ_ASSERT(chash_hash64(scheme.hash, keys[0].buf, keys[0].len) == want64);
    for (int l = 0; l < 4; l++)
        fz_free_id(&keys[l]);
}

/* ------------------------------------------------------------------ */
/* Weights and names                                                  */

static double fz_gen_weight(fz_in *in)
{
    static const double pool[] = {
        1.0, 0.5, 1.5, 2.5, 0.005, 0.015, 0.0049999999999999999, 1e-300, 4.9e-324,
        0.0, 1e300, DBL_MAX, 1.8446744073709552e19, 16777216.0, 16777216.5, 0.25,
    };
    unsigned mode = fz_u8(in) % 5;
    if (mode == 0) {
        uint64_t bits = fz_u64(in);
        double w;
        memcpy(&w, &bits, sizeof w);
        return w;
    }
    if (mode == 1) {
        double num = fz_u16(in);
        return num / (double)(1 + fz_u16(in));
    }
    if (mode == 2) {
        double sign = fz_u8(in) & 1 ? -1.0 : 1.0;
        return sign * (fz_u8(in) & 1 ? INFINITY : NAN);
    }
    if (mode == 3)
        return -pool[fz_u8(in) % (sizeof pool / sizeof pool[0])];
    return pool[fz_u8(in) % (sizeof pool / sizeof pool[0])];
}

static void fz_op_weight(fz_in *in)
{
    static const size_t bases[] = {0, 1, 100, 150, 160, 1000000, 3, 7};
    static const size_t maxes[] = {1, 100, CHASH_MAX_NODE_POINTS, (size_t)1 << 53, 160, 0, SIZE_MAX};
    size_t base = fz_u8(in) & 1 ? bases[fz_u8(in) % 8] : fz_u32(in);
    double weight = fz_gen_weight(in);
    size_t max_points = maxes[fz_u8(in) % 7];
    size_t out = 0xdeadbeef;
    /* Varnish's count: trunc(base * weight) for a finite weight >= 1. */
    size_t vout = 0xdeadbeef;
    int vstatus = chash_varnish_points_for_weight(base, weight, max_points, &vout);
    if (!(weight >= 1.0) || !isfinite(weight)) {
        fz_expect("chash_varnish_points_for_weight", vstatus, FZ_ALLOW(CHASH_EINVAL));
    } else {
        double whole = trunc((double)base * weight);
        int vfits = whole < 18446744073709551616.0 && (size_t)whole <= max_points;
        fz_expect("chash_varnish_points_for_weight", vstatus,
                  FZ_ALLOW(vfits ? CHASH_OK : CHASH_EINVAL));
        if (vstatus == CHASH_OK && ((double)vout != whole || vout > max_points))
            FZ_FAIL("chash_varnish_points_for_weight(%zu, %.17g, %zu) gave %zu", base, weight,
                    max_points, vout);
    }
    int status = chash_points_for_weight(base, weight, max_points, &out);
    if (!(weight > 0.0) || !isfinite(weight)) {
        fz_expect("chash_points_for_weight", status, FZ_ALLOW(CHASH_EINVAL));
        return;
    }
    /* round-half-even(base * weight), at least 1, at most max_points. */
    double exact = (double)base * weight;
    double rounded = nearbyint(exact);
    double count = rounded < 1.0 ? 1.0 : rounded;
    int fits = count < 18446744073709551616.0 && (size_t)count <= max_points;
    fz_expect("chash_points_for_weight", status, FZ_ALLOW(fits ? CHASH_OK : CHASH_EINVAL));
    if (status == CHASH_OK && ((double)out != count || out < 1 || out > max_points))
        FZ_FAIL("chash_points_for_weight(%zu, %.17g, %zu) gave %zu", base, weight, max_points, out);
}

static void fz_op_names(fz_in *in)
{
    char name[17];
    size_t len = fz_u8(in) % 17;
    for (size_t i = 0; i < len; i++)
        name[i] = (char)fz_u8(in);
    name[len] = '\0';
    chash_hash_id hash;
    if (chash_hash_by_name(name, &hash) == CHASH_OK)
        FZ_ASSERT(hash < CHASH_HASH_COUNT && strcmp(chash_hash_name(hash), name) == 0);
    chash_layout_id layout;
    if (chash_layout_by_name(name, &layout) == CHASH_OK)
        FZ_ASSERT(layout < CHASH_LAYOUT_COUNT && strcmp(chash_layout_name(layout), name) == 0);
    for (int h = 0; h < CHASH_HASH_COUNT; h++)
        FZ_ASSERT(chash_hash_by_name(chash_hash_name((chash_hash_id)h), &hash) == CHASH_OK
                  && hash == (chash_hash_id)h);
    for (int l = 0; l < CHASH_LAYOUT_COUNT; l++)
        FZ_ASSERT(chash_layout_by_name(chash_layout_name((chash_layout_id)l), &layout) == CHASH_OK
                  && layout == (chash_layout_id)l && chash_layout_default_points((chash_layout_id)l) > 0);
    unsigned bad = CHASH_HASH_COUNT + fz_u8(in);
    FZ_ASSERT(chash_hash_name((chash_hash_id)bad) == NULL);
    FZ_ASSERT(chash_layout_name((chash_layout_id)(CHASH_LAYOUT_COUNT + bad)) == NULL);
    FZ_ASSERT(chash_layout_default_points((chash_layout_id)(CHASH_LAYOUT_COUNT + bad)) == 0);
    FZ_ASSERT(chash_strerror((int)fz_u32(in)) != NULL);
    for (int a = CHASH_ECORRUPT; a <= CHASH_OK; a++)
        for (int b = CHASH_ECORRUPT; b < a; b++)
            FZ_ASSERT(strcmp(chash_strerror(a), chash_strerror(b)) != 0);
}

/* ------------------------------------------------------------------ */
/* The program                                                        */

enum {
    OP_ADD,
    OP_ADD_MANY,
    OP_REMOVE,
    OP_GROW,
    OP_SHRINK,
    OP_LOOKUP,
    OP_PREFERENCE,
    OP_OWNERSHIP,
    OP_LIMITS,
    OP_SCHEME,
    OP_WEIGHT,
    OP_NAMES,
    OP_RESET,
    OP_FAILNEXT,
    OP_OWNERS,
    OP_COUNT
};

static const char *const fz_op_names_[OP_COUNT] = {
    "add", "add_many", "remove", "grow", "shrink", "lookup", "preference",
    "ownership", "limits", "scheme", "weight", "names", "reset", "failnext", "owners",
};

/* A new ring breaking ties by id, or by insertion order when by_order,
 * and routing by the nearest rule when nearest (no input byte is spent on
 * either, so the corpus decodes as before); NULL is allowed only for an
 * allocation made to fail. */
static chash_ring *fz_new_ring(int by_order, int rule)
{
    fz_begin();
    chash_ring *ring = chash_ring_new();
    unsigned enomem = fz_end();
    if (!ring) {
        FZ_ASSERT(enomem);
        ring = chash_ring_new();
        FZ_ASSERT(ring);
    }
    m_by_order = by_order;
    m_dirty = 1;
    if (by_order)
        fz_expect("chash_ring_set_ties", chash_ring_set_ties(ring, CHASH_TIES_BY_ORDER),
                  FZ_ALLOW(CHASH_OK));
    FZ_ASSERT(chash_ring_ties(ring) == (by_order ? CHASH_TIES_BY_ORDER : CHASH_TIES_BY_ID));
    m_nearest = rule == CHASH_RULE_NEAREST;
    m_varnish = rule == CHASH_RULE_VARNISH;
    if (rule)
        fz_expect("chash_ring_set_rule", chash_ring_set_rule(ring, (chash_rule)rule),
                  FZ_ALLOW(CHASH_OK));
    FZ_ASSERT(chash_ring_rule(ring) == (chash_rule)rule);
    FZ_ASSERT(chash_ring_set_rule(ring, (chash_rule)3) == CHASH_EINVAL);
    return ring;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *trace = getenv("FUZZ_RING_TRACE");
    fz_trace = trace && *trace && strcmp(trace, "0") != 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    fz_countdown = -1;
    m_clear();
    chash_ring *ring = fz_new_ring((int)(size & 1), (int)((size >> 1) % 3));
    uint32_t step = 0;
    while (in.n) {
        unsigned op = fz_u8(&in) % OP_COUNT;
        if (fz_trace)
            fprintf(stderr, "step %u: %s (nodes %zu, points %zu)\n", step, fz_op_names_[op],
                    m_count, m_total);
        switch (op) {
        case OP_ADD: fz_op_add(ring, &in); break;
        case OP_ADD_MANY: fz_op_add_many(ring, &in); break;
        case OP_REMOVE: fz_op_remove(ring, &in); break;
        case OP_GROW: fz_op_grow(ring, &in); break;
        case OP_SHRINK: fz_op_shrink(ring, &in); break;
        case OP_LOOKUP: fz_op_lookup(ring, &in); break;
        case OP_PREFERENCE: fz_op_preference(ring, &in); break;
        case OP_OWNERSHIP: fz_check_ownership(ring); break;
        case OP_LIMITS: fz_op_limits(ring, &in); break;
        case OP_SCHEME: fz_op_scheme(&in); break;
        case OP_WEIGHT: fz_op_weight(&in); break;
        case OP_NAMES: fz_op_names(&in); break;
        case OP_RESET:
            chash_ring_free(ring);
            m_clear();
            ring = fz_new_ring((int)((size + step) & 1), (int)(((size + step) >> 1) % 3));
            break;
        case OP_OWNERS: fz_op_owners(ring, &in); break;
        default: /* OP_FAILNEXT: the n-th engine allocation of the next step fails */
            fz_countdown = (long)(fz_u8(&in) % 8);
            break;
        }
        if (op != OP_FAILNEXT)
            fz_countdown = -1;
        /* Only these take the ring to change (lookups get a const ring). */
        int mutating = op <= OP_SHRINK || op == OP_LIMITS || op == OP_RESET;
        fz_verify(ring, step * 2654435761u, mutating);
        step++;
    }
    chash_ring_free(ring);
    m_clear();
    return 0;
}
