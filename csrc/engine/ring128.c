/*
 * ring128.c - the sorted points of uhashring's continuums: sort, the
 * successor rule, the bucket index, a node's points, the md5 mode's merge
 * and drop, a build's settling, the invariant check.  See ring128.h.
 */
#include "ring128.h"

#include <string.h>

#include "alloc.h"
#include "hash/hash.h"

static int less(const chash_r128_point *a, const chash_r128_point *b)
{
    if (a->hi != b->hi)
        return a->hi < b->hi;
    if (a->lo != b->lo)
        return a->lo < b->lo;
    return a->seq < b->seq;
}

static int same_value(const chash_r128_point *a, const chash_r128_point *b)
{
    return a->hi == b->hi && a->lo == b->lo;
}

int chash_r128_sort(chash_r128_point *p, size_t n, int shift, chash_r128_point *scratch)
{
    if (n < 2)
        return CHASH_OK;
    chash_r128_point *tmp = scratch ? scratch : CHASH_MALLOC(n * sizeof *tmp);
    if (!tmp)
        return CHASH_ENOMEM;
    chash_r128_point *src = p, *dst = tmp;
    for (int pass = 0; pass < 4; pass++) {
        size_t count[257] = {0};
        int s = shift + 8 * pass;
        for (size_t i = 0; i < n; i++)
            count[((src[i].hi >> s) & 0xffu) + 1]++;
        for (size_t b = 1; b < 257; b++)
            count[b] += count[b - 1];
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].hi >> s) & 0xffu]++] = src[i];
        chash_r128_point *t = src;
        src = dst;
        dst = t;
    }
    /* Four passes: the result is back in p. */
    if (!scratch)
        CHASH_FREE(tmp);
    for (size_t i = 1; i < n; i++) {
        chash_r128_point v = p[i];
        size_t j = i;
        while (j > 0 && less(&v, &p[j - 1])) {
            p[j] = p[j - 1];
            j--;
        }
        p[j] = v;
    }
    return CHASH_OK;
}

size_t chash_r128_successor(const chash_r128_point *p, size_t n, size_t from, size_t to, uint64_t hi,
                            uint64_t lo)
{
    size_t lo_i = from, hi_i = to;
    while (lo_i < hi_i) {
        size_t mid = lo_i + (hi_i - lo_i) / 2;
        if (p[mid].hi > hi || (p[mid].hi == hi && p[mid].lo > lo))
            hi_i = mid;
        else
            lo_i = mid + 1;
    }
    return lo_i == n ? 0 : lo_i;
}

static uint64_t be64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | b[i];
    return v;
}

static uint64_t le32(const uint8_t *b)
{
    return (uint64_t)b[0] | ((uint64_t)b[1] << 8) | ((uint64_t)b[2] << 16) | ((uint64_t)b[3] << 24);
}

void chash_r128_key(const uint8_t digest[16], int ketama, uint64_t *hi, uint64_t *lo)
{
    *hi = ketama ? le32(digest) : be64(digest);
    *lo = ketama ? 0 : be64(digest + 8);
}

int chash_r128_index_bits(size_t n)
{
    int b = 1;
    while (b < 24 && ((size_t)1 << b) < n)
        b++;
    return b;
}

/* Written, not searched: the last point of each bucket b sets index[b + 1]
 * to the points up to it (the points are sorted, so that is how many lie
 * in buckets up to b), then a running maximum carries each count over the
 * empty buckets after it.  No pass branches on the data (stepping bucket
 * by bucket beside the points mispredicts at about every point, a bucket
 * holding 0, 1 or 2 of them at random), and none reads what it just
 * wrote (a histogram's increments wait on each other through memory). */
void chash_r128_index(const chash_r128_point *p, size_t n, int ketama, int bits, uint32_t *index)
{
    size_t buckets = (size_t)1 << bits;
    memset(index, 0, (buckets + 1) * sizeof *index);
    for (size_t i = 0; i < n; i++)
        index[chash_r128_bucket(p[i].hi, ketama, bits) + 1] = (uint32_t)(i + 1);
    /* The running maximum in blocks of eight: each block's own first
     * (chains the CPU runs side by side), then the carry from the blocks
     * before it; buckets is a power of two, at least 2. */
    uint32_t carry = 0;
    size_t b = 1;
    for (; b + 8 <= buckets + 1; b += 8) {
        uint32_t *v = index + b;
        for (int k = 1; k < 8; k++)
            v[k] = v[k] > v[k - 1] ? v[k] : v[k - 1];
        for (int k = 0; k < 8; k++)
            v[k] = v[k] > carry ? v[k] : carry;
        carry = v[7];
    }
    for (; b <= buckets; b++) {
        carry = index[b] > carry ? index[b] : carry;
        index[b] = carry;
    }
}

/* At most sixteen points hashed at once; the unused lanes of the last
 * group hash a copy of its first. */
#define POINT_LANES 16

/* chash_r128_node_points, lanes (4 or 16) at a time. */
static int node_points(const char *prefix, size_t plen, size_t count, int ketama, int replicas,
                       uint32_t owner, uint64_t *seq, chash_r128_point *out, size_t group)
{
    size_t cap = plen + 24;
    char *buf = CHASH_MALLOC(POINT_LANES * cap);
    if (!buf)
        return CHASH_ENOMEM;
    for (size_t lane = 0; lane < POINT_LANES; lane++)
        memcpy(buf + lane * cap, prefix, plen);
    size_t per = ketama ? (size_t)replicas : 1;
    uint64_t next = *seq;
    for (size_t i = 0; i < count; i += group) {
        const void *data[POINT_LANES];
        size_t len[POINT_LANES];
        uint8_t dig[POINT_LANES][CHASH_MD5_DIGEST_SIZE];
        size_t lanes = count - i < group ? count - i : group;
        int short_ones = 1;
        for (size_t lane = 0; lane < group; lane++) {
            char *s = buf + lane * cap;
            size_t v = i + (lane < lanes ? lane : 0), d = 0;
            char digits[24];
            do {
                digits[d++] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            for (size_t k = 0; k < d; k++)
                s[plen + k] = digits[d - 1 - k];
            data[lane] = s;
            len[lane] = plen + d;
            short_ones = short_ones && len[lane] <= 55;
        }
        if (short_ones && group == 16) {
            chash_md5_x16(data, len, dig);
        } else if (short_ones) {
            chash_md5_x4(data, len, dig);
        } else {
            for (size_t lane = 0; lane < lanes; lane++)
                chash_md5(data[lane], len[lane], dig[lane]);
        }
        for (size_t lane = 0; lane < lanes; lane++) {
            for (size_t r = 0; r < per; r++) {
                chash_r128_point *p = &out[(i + lane) * per + r];
                if (ketama) {
                    p->hi = le32(dig[lane] + 4 * r);
                    p->lo = 0;
                } else {
                    p->hi = be64(dig[lane]);
                    p->lo = be64(dig[lane] + 8);
                }
                p->seq = next++;
                p->owner = owner;
                p->spare = 0;
            }
        }
    }
    CHASH_FREE(buf);
    *seq = next;
    return CHASH_OK;
}

int chash_r128_node_points(const char *prefix, size_t plen, size_t count, int ketama, int replicas,
                           uint32_t owner, uint64_t *seq, chash_r128_point *out)
{
    return node_points(prefix, plen, count, ketama, replicas, owner, seq, out, 4);
}

int chash_r128_node_points_wide(const char *prefix, size_t plen, size_t count, int ketama,
                                int replicas, uint32_t owner, uint64_t *seq, chash_r128_point *out)
{
    return node_points(prefix, plen, count, ketama, replicas, owner, seq, out, POINT_LANES);
}

/* Whether a's value is below b's. */
static int below(const chash_r128_point *a, const chash_r128_point *b)
{
    return a->hi < b->hi || (a->hi == b->hi && a->lo < b->lo);
}

/* Run by run: the old points below each new one are copied in one tight
 * loop (its exit the one branch a run mispredicts), then the new point. */
size_t chash_r128_merge(const chash_r128_point *pts, size_t n, const chash_r128_point *add, size_t count,
                        uint32_t owner, chash_r128_point *out)
{
    size_t i = 0, m = 0;
    for (size_t j = 0; j < count; j++) {
        const chash_r128_point *a = &add[j];
        if (j > 0 && same_value(a, &add[j - 1]))
            continue; /* the node's own repeat: one value, one point */
        for (; i < n && below(&pts[i], a); i++) {
            if (pts[i].owner != owner) /* the node's old points go */
                out[m++] = pts[i];
        }
        if (i < n && same_value(&pts[i], a) && pts[i].owner != owner) {
            out[m] = pts[i++]; /* written again: this node's now, where it was */
            out[m++].owner = owner;
            continue;
        }
        if (i < n && same_value(&pts[i], a))
            i++; /* the node's own old point: its new one replaces it */
        out[m++] = *a;
    }
    for (; i < n; i++) {
        if (pts[i].owner != owner)
            out[m++] = pts[i];
    }
    return m;
}

size_t chash_r128_drop(chash_r128_point *pts, size_t n, uint32_t owner, uint32_t last)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        chash_r128_point p = pts[i];
        if (p.owner == owner)
            continue;
        if (p.owner == last)
            p.owner = owner;
        pts[m++] = p;
    }
    return m;
}

size_t chash_r128_settle(chash_r128_point *pts, size_t n, int ketama)
{
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t end = i + 1;
        while (end < n && same_value(&pts[end], &pts[i]))
            end++;
        uint32_t owner = pts[end - 1].owner;
        size_t keep = ketama ? end - i : 1;
        for (size_t k = 0; k < keep; k++) {
            pts[m] = pts[i + k];
            pts[m++].owner = owner;
        }
        i = end;
    }
    return m;
}

size_t chash_r128_unique(const chash_r128_point *p, size_t n)
{
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || !same_value(&p[i], &p[i - 1]))
            u++;
    return u;
}

int chash_r128_check(const chash_r128_point *p, size_t n, size_t nnodes, int ketama, const uint32_t *index,
                     int bits)
{
    for (size_t i = 0; i < n; i++) {
        int bad = p[i].owner >= nnodes || (i > 0 && less(&p[i], &p[i - 1]));
        if (i > 0 && same_value(&p[i], &p[i - 1]))
            bad |= !ketama || p[i].owner != p[i - 1].owner;
        if (ketama)
            bad |= p[i].hi > UINT32_MAX || p[i].lo != 0;
        if (bad)
            return CHASH_ECORRUPT;
    }
    if (!index || n == 0)
        return CHASH_OK;
    size_t buckets = (size_t)1 << bits;
    if (index[buckets] != n)
        return CHASH_ECORRUPT;
    for (size_t k = 0; k < buckets; k++) {
        size_t first = index[k], next = index[k + 1];
        int bad = first > next;
        if (!bad && first < n)
            bad = chash_r128_bucket(p[first].hi, ketama, bits) < k;
        if (!bad && first > 0)
            bad = chash_r128_bucket(p[first - 1].hi, ketama, bits) >= k;
        if (bad)
            return CHASH_ECORRUPT;
    }
    return CHASH_OK;
}
