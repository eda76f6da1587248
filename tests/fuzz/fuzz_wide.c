/*
 * fuzz_wide.c - libFuzzer target for the ring of 64-bit points
 * (engine/wide.h), Envoy's and gRPC's rules (engine/envoy.h) and Envoy's
 * Maglev (strategies/maglev.h: the permutation, the weighted fill, the
 * whole table build, the fast remainder): every entry point those files
 * added.
 *
 * The input is read as a program: each operation byte picks a call, the
 * bytes after it are its arguments (reading past the end gives zeros).
 *
 *   BUILD       a ring of up to 700 points over up to 16 nodes, with
 *               repeated values, 0 and 2**64 - 1, owners out of range now
 *               and then; the model keeps the (value, owner) pairs sorted;
 *   PROBE       successor, batch owners and preference against a linear
 *               scan of the model; ownership sums to 1;
 *   COUNTS      chash_envoy_counts on weights and sizes from the input: the
 *               status is the one its contract names, the total is within
 *               one point of the scale, equal weights differ by one at most;
 *   POINTS      chash_envoy_points against XXH64 / murmur2_64 of the key
 *               spelled here, ids of any bytes and lengths (heap buffers);
 *   MAGLEV      chash_envoy_maglev_entry of an id of any bytes (within the
 *               table), and chash_maglev_build_weighted with offsets, skips
 *               and weights from the input: every entry names a node, equal
 *               weights share the table evenly, bad arguments give
 *               CHASH_EINVAL;
 *   ENVOY_TABLE chash_maglev_envoy_table over up to 12 hosts of short keys
 *               (shared prefixes, repeats) and weights (0, huge) from the
 *               input: the status its contract names, counts that are the
 *               table's, and the table of an oracle that sorts the hosts
 *               itself and calls the permutation and the fill;
 *   MOD         chash_maglev_mod against % for any m >= 2 and hashes;
 *   JUMP        chash_jump_guava against Guava's arithmetic written out
 *               (Java's saturating (int) included), chash_jump_by for both
 *               rules and a bad one, chash_jump_preference against a plain
 *               list of the free buckets, any bucket counts and keys;
 *   LOADS       the live load table of bounded loads (strategies/bounded.h:
 *               chash_bounded_slots, chash_bounded_slots_real, chash_loads_create, _free, _size,
 *               _balance, _in_flight, _load, _bound, _admits, _pick, _take,
 *               _try_take, _put, _check) over up to 16 slots of whole weights (0
 *               included) or bad ones, balances below 1, NaN or huge, and
 *               takes, puts and picks from the input, against a model of
 *               the loads and of Envoy's weighted slots: the status each
 *               contract names, a failed call changing nothing, and with
 *               any weight > 0 some slot always admitting one more;
 *   FAILNEXT    the next allocation fails: a failed build must leave the
 *               ring exactly as it was.
 *
 * The files under test are included here, with an allocator that fails on
 * demand; the hash functions and the ring (which bounded.c reads) are
 * linked.  chash_wide_check() must pass after every step.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_NAME "fuzz_wide"
#include "fuzz_support.h"

#define CHASH_MALLOC fz_malloc
#define CHASH_FREE free
#include "engine/wide.c"
#include "engine/envoy.c"
#include "strategies/mix.c"
#include "strategies/jump.c"
#include "strategies/jumpback.c"
#include "strategies/rendezvous.c"
#include "strategies/maglev.c"
#include "strategies/bounded.c"

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_in;

static uint8_t fz_u8(fz_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static uint64_t fz_u64(fz_in *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | fz_u8(in);
    return v;
}

/* The model: the ring's (value, owner) pairs, sorted. */
#define MAX_POINTS 700
#define MAX_NODES 16
static wide_pair m_pt[MAX_POINTS];
static size_t m_n, m_nodes;

/* Point i of a build: the ends, a repeat of an earlier point, points
 * crowded into one bucket, or any value. */
static uint64_t fz_value(fz_in *in, const uint64_t *points, size_t i)
{
    switch (fz_u8(in) % 6) {
    case 0: return 0;
    case 1: return UINT64_MAX;
    case 2: return i ? points[fz_u8(in) % i] : 7; /* repeats */
    case 3: return (uint64_t)fz_u8(in) << 56;       /* one bucket */
    default: return fz_u64(in);
    }
}

static void op_build(chash_wide *ring, fz_in *in)
{
    size_t n = (size_t)(fz_u8(in) | fz_u8(in) << 8) % (MAX_POINTS + 1);
    size_t nodes = fz_u8(in) % (MAX_NODES + 1);
    int bad = nodes == 0 ? n > 0 : (fz_u8(in) % 16 == 0 && n > 0);
    static uint64_t points[MAX_POINTS];
    static uint32_t owners[MAX_POINTS];
    static wide_pair fresh[MAX_POINTS];
    for (size_t i = 0; i < n; i++) {
        points[i] = fz_value(in, points, i);
        owners[i] = nodes ? (uint32_t)(fz_u8(in) % nodes) : 0;
        fresh[i] = (wide_pair){points[i], owners[i]};
    }
    if (bad)
        owners[fz_u8(in) % (n ? n : 1)] = (uint32_t)(nodes + fz_u8(in) % 3);
    size_t before_n = chash_wide_count(ring), before_nodes = chash_wide_nodes(ring);
    uint64_t before_first = before_n ? chash_wide_point(ring, 0) : 0;
    int status = chash_wide_build(ring, points, owners, n, nodes);
    if (bad) {
        FZ_ASSERT(status == CHASH_EINVAL);
    } else {
        FZ_ASSERT(status == CHASH_OK || status == CHASH_ENOMEM);
    }
    if (status != CHASH_OK) {
        /* All-or-nothing: the ring is the one the model holds. */
        FZ_ASSERT(chash_wide_count(ring) == before_n && chash_wide_nodes(ring) == before_nodes);
        FZ_ASSERT(!before_n || chash_wide_point(ring, 0) == before_first);
        return;
    }
    qsort(fresh, n, sizeof *fresh, compare_pairs);
    memcpy(m_pt, fresh, n * sizeof *fresh);
    m_n = n;
    m_nodes = nodes;
}

static size_t model_successor(uint64_t h)
{
    for (size_t i = 0; i < m_n; i++)
        if (m_pt[i].value >= h)
            return i;
    return 0;
}

static void op_probe(const chash_wide *ring, fz_in *in)
{
    FZ_ASSERT(chash_wide_count(ring) == m_n);
    for (size_t i = 0; i < m_n; i++)
        FZ_ASSERT(chash_wide_point(ring, i) == m_pt[i].value && chash_wide_owner(ring, i) == m_pt[i].owner);
    if (m_n == 0) {
        uint32_t out[4];
        size_t found = 1;
        FZ_ASSERT(chash_wide_preference(ring, 1, 4, out, &found) == CHASH_OK && found == 0);
        return;
    }
    uint64_t hashes[8];
    uint32_t owners[8];
    for (int k = 0; k < 8; k++) {
        uint64_t base = m_pt[fz_u8(in) % m_n].value;
        switch (fz_u8(in) % 4) {
        case 0: hashes[k] = base; break;
        case 1: hashes[k] = base + 1; break;
        case 2: hashes[k] = base - 1; break;
        default: hashes[k] = fz_u64(in); break;
        }
        FZ_ASSERT(chash_wide_successor(ring, hashes[k]) == model_successor(hashes[k]));
    }
    chash_wide_owners(ring, hashes, 8, owners);
    for (int k = 0; k < 8; k++)
        FZ_ASSERT(owners[k] == m_pt[model_successor(hashes[k])].owner);
    uint32_t pref[MAX_NODES];
    size_t want = fz_u8(in) % (MAX_NODES + 2), found;
    int status = chash_wide_preference(ring, hashes[0], want, pref, &found);
    FZ_ASSERT(status == CHASH_OK || status == CHASH_ENOMEM);
    if (status == CHASH_OK) {
        /* The model's walk: distinct owners clockwise. */
        unsigned char seen[MAX_NODES] = {0};
        size_t got = 0, limit = want < m_nodes ? want : m_nodes;
        for (size_t s = 0, i = model_successor(hashes[0]); s < m_n && got < limit; s++, i = (i + 1) % m_n) {
            if (!seen[m_pt[i].owner]) {
                seen[m_pt[i].owner] = 1;
                FZ_ASSERT(pref[got] == m_pt[i].owner);
                got++;
            }
        }
        FZ_ASSERT(found == got);
    }
    double share[MAX_NODES], sum = 0.0;
    chash_wide_ownership(ring, share);
    for (size_t k = 0; k < m_nodes; k++) {
        FZ_ASSERT(share[k] >= 0.0);
        sum += share[k];
    }
    FZ_ASSERT(fabs(sum - 1.0) < 1e-9);
}

static void op_counts(fz_in *in)
{
    size_t n = fz_u8(in) % 9;
    uint64_t weights[8];
    int same = 1, zero = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t kind = fz_u8(in);
        weights[i] = kind % 7 == 0 ? fz_u64(in) : (uint64_t)(kind % 5);
        zero |= weights[i] == 0;
        same &= weights[i] == weights[0];
    }
    uint64_t lo = (uint64_t)(fz_u8(in) | fz_u8(in) << 8) % 9000;
    uint64_t hi = fz_u8(in) % 4 == 0 ? lo : (uint64_t)(fz_u8(in) | fz_u8(in) << 8 | fz_u8(in) << 16);
    size_t counts[8], total = 99;
    int status = chash_envoy_counts(weights, n, lo, hi, counts, &total);
    if (lo == 0 || hi == 0 || lo > hi || zero) {
        FZ_ASSERT(status == CHASH_EINVAL && total == 0);
        return;
    }
    FZ_ASSERT(status == CHASH_OK || status == CHASH_EINVAL || status == CHASH_ERANGE);
    if (status != CHASH_OK || n == 0)
        return;
    size_t sum = 0, least = SIZE_MAX, most = 0;
    for (size_t i = 0; i < n; i++) {
        sum += counts[i];
        least = counts[i] < least ? counts[i] : least;
        most = counts[i] > most ? counts[i] : most;
    }
    FZ_ASSERT(sum == total && total <= hi + 1 && total >= 1);
    if (same)
        FZ_ASSERT(most - least <= 1);
}

static void op_points(fz_in *in)
{
    size_t len = fz_u8(in) % 4 == 0 ? 200 + fz_u8(in) * 2u : fz_u8(in) % 24;
    char id[720];
    for (size_t i = 0; i < len; i++)
        id[i] = (char)fz_u8(in);
    size_t count = fz_u8(in) % 12;
    chash_point_hash kind = fz_u8(in) & 1 ? CHASH_POINT_MURMUR2_64 : CHASH_POINT_XXH64;
    uint64_t out[12];
    int status = chash_envoy_points(kind, id, len, count, out);
    FZ_ASSERT(status == CHASH_OK || (status == CHASH_ENOMEM && len + 21 > 256));
    if (status != CHASH_OK)
        return;
    char key[760];
    for (size_t j = 0; j < count; j++) {
        memcpy(key, id, len);
        int digits = snprintf(key + len, 32, "_%zu", j);
        uint64_t want = kind == CHASH_POINT_MURMUR2_64
                            ? chash_murmur2_64(key, len + (size_t)digits, CHASH_ENVOY_MURMUR_SEED)
                            : chash_xxh64(key, len + (size_t)digits, 0);
        FZ_ASSERT(out[j] == want);
    }
}

static void op_maglev(fz_in *in)
{
    static const size_t primes[] = {2, 3, 7, 17, 101, 251, 1009};
    size_t m = fz_u8(in) % 9 == 0 ? 8 : primes[fz_u8(in) % 7];
    size_t n = fz_u8(in) % 12;
    uint64_t offsets[12], skips[12];
    double weights[12];
    int bad = n == 0 || m == 8, same = 1;
    for (size_t k = 0; k < n; k++) {
        offsets[k] = fz_u8(in) % 20 == 0 ? m : fz_u64(in) % m;
        skips[k] = fz_u8(in) % 20 == 0 ? 0 : fz_u64(in) % (m - 1 ? m - 1 : 1) + 1;
        uint8_t w = fz_u8(in);
        weights[k] = w % 31 == 0 ? 0.0 : (double)(w % 4 + 1);
        bad |= offsets[k] >= m || skips[k] == 0 || skips[k] >= m || weights[k] == 0.0;
        same &= weights[k] == weights[0];
    }
    if (m != 8) {
        /* Envoy's entry of an id of any bytes: within the table. */
        char id[40];
        size_t len = fz_u8(in) % sizeof id;
        for (size_t i = 0; i < len; i++)
            id[i] = (char)fz_u8(in);
        uint64_t offset, skip;
        chash_envoy_maglev_entry(id, len, m, &offset, &skip);
        FZ_ASSERT(offset < m && skip >= 1 && skip < m);
        FZ_ASSERT(offset == chash_xxh64(id, len, 0) % m);
    }
    uint32_t table[1009];
    int status = chash_maglev_build_weighted(offsets, skips, weights, n, table, m);
    if (bad) {
        FZ_ASSERT(status == CHASH_EINVAL);
        return;
    }
    FZ_ASSERT(status == CHASH_OK || status == CHASH_ENOMEM);
    if (status != CHASH_OK)
        return;
    size_t counts[12] = {0};
    for (size_t e = 0; e < m; e++) {
        FZ_ASSERT(table[e] < n);
        counts[table[e]]++;
    }
    if (same && m >= n) {
        size_t least = SIZE_MAX, most = 0;
        for (size_t k = 0; k < n; k++) {
            least = counts[k] < least ? counts[k] : least;
            most = counts[k] > most ? counts[k] : most;
        }
        FZ_ASSERT(most - least <= 1);
    }
}

/* Hosts sorted by key bytes, a prefix first: the oracle's own sort. */
static int key_before(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t common = alen < blen ? alen : blen;
    int c = common ? memcmp(a, b, common) : 0;
    return c ? c < 0 : alen < blen;
}

static void op_envoy_table(fz_in *in)
{
    static const size_t sizes[] = {2, 3, 7, 17, 101, 251, 1009, 0, 1, 8};
    size_t m = sizes[fz_u8(in) % 10];
    size_t n = fz_u8(in) % 13;
    char keys[12][6];
    const char *ids[12];
    size_t lens[12];
    uint64_t weights[12];
    int bad = m < 2 || m == 8, dup = 0;
    for (size_t k = 0; k < n; k++) {
        lens[k] = fz_u8(in) % 7;
        for (size_t i = 0; i < lens[k]; i++)
            keys[k][i] = (char)(fz_u8(in) % 4 + 'a' - 1); /* few letters: shared prefixes, repeats */
        ids[k] = keys[k];
        uint8_t w = fz_u8(in);
        weights[k] = w % 23 == 0 ? 0 : w % 17 == 0 ? UINT64_MAX - w : (uint64_t)(w % 5 + 1);
        bad |= weights[k] == 0;
        for (size_t j = 0; j < k; j++)
            dup |= lens[j] == lens[k] && memcmp(keys[j], keys[k], lens[k]) == 0;
    }
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        bad |= weights[k] > UINT64_MAX - sum;
        sum += weights[k] > UINT64_MAX - sum ? 0 : weights[k];
    }
    int armed = fz_countdown >= 0;
    uint32_t table[1009];
    size_t counts[12];
    int status = chash_maglev_envoy_table(ids, lens, weights, n, m, table, counts);
    fz_countdown = -1;
    if (n == 0) {
        FZ_ASSERT(status == CHASH_OK);
        return;
    }
    if (bad) {
        FZ_ASSERT(status == CHASH_EINVAL);
        return;
    }
    if (armed && status == CHASH_ENOMEM)
        return;
    FZ_ASSERT(status == (dup ? CHASH_EEXIST : CHASH_OK));
    if (dup)
        return;
    /* The counts are the table's; entries name the given positions. */
    size_t seen[12] = {0}, total = 0;
    for (size_t e = 0; e < m; e++) {
        FZ_ASSERT(table[e] < n);
        seen[table[e]]++;
    }
    for (size_t k = 0; k < n; k++) {
        FZ_ASSERT(seen[k] == counts[k]);
        total += counts[k];
    }
    FZ_ASSERT(total == m);
    /* The oracle: the hosts sorted here, Envoy's entries, the fill. */
    size_t order[12];
    for (size_t k = 0; k < n; k++) {
        size_t j = k;
        for (; j > 0 && key_before(ids[k], lens[k], ids[order[j - 1]], lens[order[j - 1]]); j--)
            order[j] = order[j - 1];
        order[j] = k;
    }
    uint64_t offsets[12], skips[12];
    double norm[12];
    for (size_t i = 0; i < n; i++) {
        chash_envoy_maglev_entry(ids[order[i]], lens[order[i]], m, &offsets[i], &skips[i]);
        norm[i] = (double)weights[order[i]] / (double)sum;
    }
    uint32_t want[1009];
    FZ_ASSERT(chash_maglev_build_weighted(offsets, skips, norm, n, want, m) == CHASH_OK);
    for (size_t e = 0; e < m; e++)
        FZ_ASSERT(table[e] == order[want[e]]);
}

/* The fast remainder against the division, for any m >= 2 and hashes. */
static void op_mod(fz_in *in)
{
    uint64_t m = fz_u64(in), magic[2];
    m = m < 2 ? 2 + m : m;
    chash_maglev_mod_magic(m, magic);
    size_t n = fz_u8(in) % 8;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = fz_u64(in);
        FZ_ASSERT(chash_maglev_mod(magic, m, h) == h % m);
        FZ_ASSERT(chash_maglev_mod(magic, m, h / m * m) == 0);
    }
    FZ_ASSERT(chash_maglev_mod(magic, m, UINT64_MAX) == UINT64_MAX % m);
}

/* Guava's consistentHash as its Java reads: doubles, and (int) of a
 * double saturating at 2**31 - 1. */
static uint32_t m_guava(uint64_t state, size_t buckets)
{
    int64_t candidate = 0;
    for (;;) {
        state = state * UINT64_C(2862933555777941757) + 1;
        int32_t top = (int32_t)(state >> 33);
        /* Java's int sum top + 1, wrapping at 2**31 - 1. */
        int32_t sum = top == INT32_MAX ? INT32_MIN : top + 1;
        double r = (double)sum / 2147483648.0;
        double q = (double)(candidate + 1) / r;
        int64_t next = q >= 2147483647.0 ? INT32_MAX : q <= -2147483648.0 ? INT32_MIN : (int64_t)q;
        if (next >= 0 && (uint64_t)next < buckets)
            candidate = next;
        else
            return (uint32_t)candidate;
    }
}

static void op_jump(fz_in *in)
{
    uint64_t key = fz_u64(in);
    size_t buckets;
    switch (fz_u8(in) % 4) {
    case 0: buckets = fz_u8(in); break; /* 0 and small counts */
    case 1: buckets = (size_t)(fz_u64(in) % ((uint64_t)CHASH_JUMP_MAX_BUCKETS + 2)); break;
    case 2: buckets = CHASH_JUMP_MAX_BUCKETS - fz_u8(in) % 2 + fz_u8(in) % 2; break;
    default: buckets = 1 + fz_u8(in) % 64; break;
    }
    int valid = buckets >= 1 && buckets <= CHASH_JUMP_MAX_BUCKETS;
    uint32_t g = chash_jump_guava(key, buckets), j = chash_jump(key, buckets);
    FZ_ASSERT(valid ? g < buckets && g == m_guava(key, buckets) : g == 0);
    FZ_ASSERT(valid ? j < buckets : j == 0);
    FZ_ASSERT(chash_jump_by(CHASH_JUMP_GUAVA, key, buckets) == g);
    FZ_ASSERT(chash_jump_by(CHASH_JUMP_LAMPING, key, buckets) == j);
    FZ_ASSERT(chash_jump_by(CHASH_JUMP_BACK, key, buckets)
              == (buckets <= CHASH_JUMP_MAX_BUCKETS ? chash_jumpback(key, (uint32_t)buckets) : 0));
    FZ_ASSERT(chash_jump_by((chash_jump_rule)(3 + fz_u8(in) % 3), key, buckets) == 0);

    /* Preference lists over small counts: the free list by hand. */
    chash_jump_rule rule = (chash_jump_rule)(fz_u8(in) % 3);
    size_t n = buckets <= 64 ? buckets : 1 + buckets % 64, want = fz_u8(in) % 70;
    uint32_t out[70], free_list[64];
    size_t found = 1000;
    int status = chash_jump_preference(rule, key, n, want, out, &found);
    FZ_ASSERT(status == (n ? CHASH_OK : CHASH_EINVAL));
    if (status != CHASH_OK)
        return;
    FZ_ASSERT(found == (want < n ? want : n));
    for (size_t b = 0; b < n; b++)
        free_list[b] = (uint32_t)b;
    size_t nfree = n;
    for (size_t k = 0; k < found; k++) {
        uint64_t h = k ? chash_mix64(key + k) : key;
        size_t at = chash_jump_by(rule, h, nfree);
        FZ_ASSERT(at < nfree && out[k] == free_list[at]);
        memmove(free_list + at, free_list + at + 1, (nfree - at - 1) * sizeof *free_list);
        nfree--;
    }
    FZ_ASSERT(chash_jump_preference((chash_jump_rule)3, key, n, want, out, &found) == CHASH_EINVAL);
}

/* The slots Envoy's rule gives, written out here (bounded.h): whole
 * weights, so the arithmetic is exact. */
static uint64_t model_slots(double balance, uint64_t in_flight, uint64_t w, uint64_t total)
{
    if (w == 0 || total == 0)
        return 0;
    double t = ceil(balance * ((double)in_flight + 1.0));
    double s = w >= total ? t : ceil(t * (double)w / (double)total);
    if (s >= 18446744073709551616.0)
        return UINT64_MAX;
    return s < 1.0 ? 1 : (uint64_t)s;
}

static void op_loads(fz_in *in)
{
    enum { SLOTS = 16 };
    uint8_t shape = fz_u8(in);
    size_t n = shape % (SLOTS + 1);
    static const double balances[] = {1.0, 1.25, 2.0, 0.5, NAN, 1e300, INFINITY, 1.0000001};
    double balance = balances[(shape >> 5) % 8];
    double weights[SLOTS];
    uint64_t whole[SLOTS], total = 0;
    int bad = !isfinite(balance) || balance < 1.0;
    for (size_t k = 0; k < n; k++) {
        uint8_t b = fz_u8(in);
        whole[k] = b == 0xFF ? 0 : b % 8 == 7 ? 0 : b;
        weights[k] = b == 0xFF ? -1.0 : (double)whole[k];
        bad |= b == 0xFF;
        total += whole[k];
    }
    chash_loads *t = NULL;
    int status = chash_loads_create(&t, balance, n, weights, NULL);
    if (bad) {
        FZ_ASSERT(status == CHASH_EINVAL && t == NULL);
        return;
    }
    if (status == CHASH_ENOMEM) {
        FZ_ASSERT(t == NULL);
        return;
    }
    FZ_ASSERT(status == CHASH_OK && chash_loads_size(t) == n);
    FZ_ASSERT(chash_loads_balance(t) == balance);
    uint64_t load[SLOTS] = {0}, flight = 0;
    for (uint8_t steps = fz_u8(in) % 64; steps; steps--) {
        uint8_t op = fz_u8(in);
        size_t slot = (size_t)(op >> 2) % (SLOTS + 2); /* now and then out of range */
        if (op % 4 == 0) {
            status = chash_loads_take(t, slot);
            FZ_ASSERT(status == (slot < n ? CHASH_OK : CHASH_EINVAL));
            if (status == CHASH_OK) {
                load[slot]++;
                flight++;
            }
        } else if (op % 4 == 1) {
            status = chash_loads_put(t, slot);
            FZ_ASSERT(status == (slot >= n ? CHASH_EINVAL : load[slot] ? CHASH_OK : CHASH_ENOENT));
            if (status == CHASH_OK) {
                load[slot]--;
                flight--;
            }
        } else if (op % 8 == 3) {
            /* Admit-and-take in one call: taken exactly when admitted. */
            int admitted = slot < n && load[slot] < model_slots(balance, flight, whole[slot], total);
            status = chash_loads_try_take(t, slot);
            FZ_ASSERT(status == (slot >= n ? CHASH_EINVAL : admitted));
            if (status == 1) {
                load[slot]++;
                flight++;
            }
        } else {
            /* A walk over an order from the input, out-of-range entries too. */
            uint32_t order[SLOTS + 2];
            size_t len = fz_u8(in) % (SLOTS + 3);
            for (size_t i = 0; i < len; i++)
                order[i] = fz_u8(in) % (SLOTS + 2);
            size_t pick = chash_loads_pick(t, order, len), want = len;
            for (size_t i = 0; i < len && want == len; i++)
                if (order[i] < n && load[order[i]] < model_slots(balance, flight, whole[order[i]], total))
                    want = i;
            FZ_ASSERT(pick == want);
        }
        FZ_ASSERT(chash_loads_in_flight(t) == flight);
        int any = 0;
        for (size_t k = 0; k < SLOTS + 2; k++) {
            uint64_t bound = chash_loads_bound(t, k);
            FZ_ASSERT(chash_loads_load(t, k) == (k < n ? load[k] : 0));
            FZ_ASSERT(bound == (k < n ? model_slots(balance, flight, whole[k], total) : 0));
            FZ_ASSERT(bound == (k < n ? chash_bounded_slots(balance, flight, weights[k], (double)total) : 0));
            /* The real-load rule is the same rule, saturated at 2**64 here. */
            FZ_ASSERT(k >= n || (double)bound == fmin(chash_bounded_slots_real(balance, (double)flight, weights[k], (double)total),
                                                      18446744073709551616.0));
            FZ_ASSERT(chash_loads_admits(t, k) == (k < n && load[k] < bound));
            any |= chash_loads_admits(t, k);
        }
        /* The guarantee: the slots of the weighted nodes sum to at least
         * T > in_flight, so one of them is below its bound. */
        FZ_ASSERT(any || total == 0);
        FZ_ASSERT(chash_loads_check(t) == CHASH_OK);
    }
    chash_loads_free(t);
}

enum { OP_BUILD, OP_PROBE, OP_COUNTS, OP_POINTS, OP_MAGLEV, OP_FAILNEXT, OP_ENVOY_TABLE, OP_MOD,
       OP_JUMP, OP_LOADS, OP_COUNT };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    fz_countdown = -1;
    m_n = 0;
    m_nodes = 0;
    chash_wide *ring = chash_wide_new();
    if (!ring)
        return 0;
    while (in.n) {
        switch (fz_u8(&in) % OP_COUNT) {
        case OP_BUILD: op_build(ring, &in); break;
        case OP_PROBE: op_probe(ring, &in); break;
        case OP_COUNTS: op_counts(&in); break;
        case OP_POINTS: op_points(&in); break;
        case OP_MAGLEV: op_maglev(&in); break;
        case OP_ENVOY_TABLE: op_envoy_table(&in); break;
        case OP_MOD: op_mod(&in); break;
        case OP_JUMP: op_jump(&in); break;
        case OP_LOADS: op_loads(&in); break;
        default: fz_countdown = fz_u8(&in) % 5; break; /* FAILNEXT */
        }
        FZ_ASSERT(chash_wide_check(ring) == CHASH_OK);
        FZ_ASSERT(chash_wide_memory(ring) >= chash_wide_count(ring) * 12);
    }
    chash_wide_free(ring);
    return 0;
}
