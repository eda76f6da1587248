/*
 * rendezvous.c - highest random weight over node hashes, and the node sets
 * of chash.RendezvousRouter in its four layouts (rendezvous.h).
 *
 * A set keeps, per node, the bytes it is hashed from and told apart by and
 * what depends on the node alone (its hash, its murmur3 state after
 * "node-", its CARP multiplier), so a lookup only hashes the key and scores
 * every node.  Sets never change after chash_rdv_build.
 */
#include "rendezvous.h"

#include <math.h>
#include <string.h>

#include "engine/alloc.h"
#include "hash/hash.h"
#include "mix.h"

uint64_t chash_rendezvous_score(uint64_t key, uint64_t node)
{
    return chash_mix64(key ^ node);
}

int chash_rendezvous_assign(const uint64_t *keys, size_t nkeys, const uint64_t *nodes,
                            size_t nnodes, uint32_t *out)
{
    if (nnodes == 0 || nnodes > UINT32_MAX)
        return CHASH_EINVAL;
    for (size_t i = 0; i < nkeys; i++) {
        size_t best = 0;
        uint64_t best_score = chash_rendezvous_score(keys[i], nodes[0]);
        for (size_t k = 1; k < nnodes; k++) {
            uint64_t score = chash_rendezvous_score(keys[i], nodes[k]);
            /* Ties go to the smaller node hash so that listing order never
             * matters; strict comparisons keep the smaller index last. */
            if (score > best_score || (score == best_score && nodes[k] < nodes[best])) {
                best = k;
                best_score = score;
            }
        }
        out[i] = (uint32_t)best;
    }
    return CHASH_OK;
}

/* ------------------------------------------------------------------ */
/* The layouts' hashes                                                */

static inline uint32_t rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32 - r));
}

/* MurmurHash3_x86_32 as a stream: h over the whole 4-byte blocks seen,
 * the bytes of an unfinished block, the length so far. */
typedef struct {
    uint32_t h;
    uint32_t tail;
    unsigned ntail;
    size_t len;
} murmur3_state;

static inline uint32_t murmur3_k(uint32_t k)
{
    k *= 0xcc9e2d51u;
    k = rotl32(k, 15);
    return k * 0x1b873593u;
}

static inline void murmur3_block(murmur3_state *s, uint32_t k)
{
    s->h ^= murmur3_k(k);
    s->h = rotl32(s->h, 13) * 5 + 0xe6546b64u;
}

/* Bytes into the unfinished block until it is whole, then whole blocks
 * read little-endian, then the rest into the unfinished block. */
static void murmur3_feed(murmur3_state *s, const unsigned char *p, size_t n)
{
    size_t i = 0;
    s->len += n;
    for (; s->ntail && i < n; i++) {
        s->tail |= (uint32_t)p[i] << (8 * s->ntail);
        if (++s->ntail == 4) {
            murmur3_block(s, s->tail);
            s->tail = 0;
            s->ntail = 0;
        }
    }
    for (; i + 4 <= n; i += 4)
        murmur3_block(s, (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16
                             | (uint32_t)p[i + 3] << 24);
    for (; i < n; i++)
        s->tail |= (uint32_t)p[i] << (8 * s->ntail++);
}

static uint32_t murmur3_final(murmur3_state s)
{
    if (s.ntail)
        s.h ^= murmur3_k(s.tail);
    s.h ^= (uint32_t)s.len;
    s.h ^= s.h >> 16;
    s.h *= 0x85ebca6bu;
    s.h ^= s.h >> 13;
    s.h *= 0xc2b2ae35u;
    s.h ^= s.h >> 16;
    return s.h;
}

uint32_t chash_rdv_murmur3_32(const void *a, size_t alen, const void *b, size_t blen)
{
    murmur3_state s = {0, 0, 0, 0};
    murmur3_feed(&s, a, alen);
    murmur3_feed(&s, b, blen);
    return murmur3_final(s);
}

/* Squid's loops add each byte as a (signed, on amd64) char. */
static inline uint32_t carp_byte(unsigned char c)
{
    return (uint32_t)(int32_t)(signed char)c;
}

static inline uint32_t carp_mix(uint32_t h)
{
    h += h * 0x62531965u;
    return rotl32(h, 21);
}

uint32_t chash_rdv_carp_hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t h = 0;
    for (size_t i = 0; i < len; i++)
        h += rotl32(h, 19) + carp_byte(p[i]);
    return carp_mix(h);
}

/* FNV-1a-32 resumed from h. */
static inline uint32_t fnv1a_feed(uint32_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* ------------------------------------------------------------------ */
/* The set                                                            */

typedef struct {
    const unsigned char *id; /* hashed bytes (inside the set's block) */
    size_t id_len;
    const unsigned char *name; /* tie bytes */
    size_t name_len;
    double weight;
    uint64_t hash;        /* hrw: XXH64(id); squid: the CARP peer hash */
    double factor;        /* squid: the load multiplier; hrw: the weight */
    murmur3_state prefix; /* pymemcache: the state after id "-" */
} rdv_node;

struct chash_rdv_set {
    chash_rdv_layout layout;
    size_t n;
    int uniform;      /* hrw: every weight equal, so the mix alone decides */
    double total;     /* the sum of the weights */
    rdv_node *nodes;  /* in add order */
    uint32_t *scan;   /* the order the program scans nodes in (squid: by weight) */
    unsigned char *bytes;
};

void chash_rdv_free(chash_rdv_set *set)
{
    if (!set)
        return;
    CHASH_FREE(set->nodes);
    CHASH_FREE(set->scan);
    CHASH_FREE(set->bytes);
    CHASH_FREE(set);
}

size_t chash_rdv_size(const chash_rdv_set *set)
{
    return set->n;
}

chash_rdv_layout chash_rdv_layout_of(const chash_rdv_set *set)
{
    return set->layout;
}

static int weight_ok(chash_rdv_layout layout, double w)
{
    switch (layout) {
    case CHASH_RDV_HRW:
        return w > 0.0 && isfinite(w);
    case CHASH_RDV_PYMEMCACHE:
    case CHASH_RDV_CADDY:
        return w == 1.0;
    case CHASH_RDV_SQUID:
        return w >= 1.0 && w <= (double)CHASH_RDV_SQUID_MAX_TOTAL && w == floor(w);
    default:
        return 0;
    }
}

/* Squid's scan order: positions stably sorted by weight (insertion sort:
 * stable, and glibc's qsort of carpInit is a stable merge sort). */
static void scan_order(chash_rdv_set *set)
{
    for (size_t k = 0; k < set->n; k++)
        set->scan[k] = (uint32_t)k;
    if (set->layout != CHASH_RDV_SQUID)
        return;
    for (size_t i = 1; i < set->n; i++) {
        uint32_t at = set->scan[i];
        size_t j = i;
        while (j > 0 && set->nodes[set->scan[j - 1]].weight > set->nodes[at].weight) {
            set->scan[j] = set->scan[j - 1];
            j--;
        }
        set->scan[j] = at;
    }
}

/* carpInit's load factors and multipliers, over the scan order, with its
 * arithmetic (doubles, pow) step for step. */
static void carp_multipliers(const chash_rdv_set *set, double *out)
{
    double p_last = 0.0, x_last = 0.0, xn = 1.0;
    size_t n = set->n;
    for (size_t k = 1; k <= n; k++) {
        const rdv_node *p = &set->nodes[set->scan[k - 1]];
        double kk1 = (double)(n - k + 1);
        double factor = p->weight / set->total;
        if (floor(factor * 1000.0) == 0.0)
            factor = 0.0;
        double m = (kk1 * (factor - p_last)) / xn;
        m += pow(x_last, kk1);
        m = pow(m, 1.0 / kk1);
        xn *= m;
        x_last = m;
        p_last = factor;
        out[set->scan[k - 1]] = m;
    }
}

/* What depends on node k alone, from its bytes and the set's weights. */
static void node_derive(const chash_rdv_set *set, size_t k, rdv_node *into)
{
    const rdv_node *node = &set->nodes[k];
    into->hash = 0;
    into->prefix = (murmur3_state){0, 0, 0, 0};
    switch (set->layout) {
    case CHASH_RDV_HRW:
        into->hash = chash_xxh64(node->id, node->id_len, 0);
        break;
    case CHASH_RDV_PYMEMCACHE:
        murmur3_feed(&into->prefix, node->id, node->id_len);
        murmur3_feed(&into->prefix, (const unsigned char *)"-", 1);
        break;
    case CHASH_RDV_SQUID:
        into->hash = chash_rdv_carp_hash(node->id, node->id_len);
        break;
    default:
        break;
    }
}

int chash_rdv_build(chash_rdv_layout layout, size_t n, const char *const *ids,
                    const size_t *id_lens, const char *const *names, const size_t *name_lens,
                    const double *weights, chash_rdv_set **out)
{
    if ((unsigned)layout >= CHASH_RDV_LAYOUT_COUNT || n > CHASH_RDV_MAX_NODES)
        return CHASH_EINVAL;
    size_t total_bytes = 1;
    double total = 0.0;
    for (size_t k = 0; k < n; k++) {
        if (!weight_ok(layout, weights[k]))
            return CHASH_EINVAL;
        total += weights[k];
        total_bytes += id_lens[k] + name_lens[k];
    }
    if (layout == CHASH_RDV_SQUID && total > (double)CHASH_RDV_SQUID_MAX_TOTAL)
        return CHASH_EINVAL;
    if (!isfinite(total))
        return CHASH_EINVAL;
    chash_rdv_set *set = CHASH_MALLOC(sizeof *set);
    if (!set)
        return CHASH_ENOMEM;
    set->layout = layout;
    set->n = n;
    set->total = total;
    set->uniform = 1;
    set->nodes = CHASH_MALLOC((n ? n : 1) * sizeof *set->nodes);
    set->scan = CHASH_MALLOC((n ? n : 1) * sizeof *set->scan);
    set->bytes = CHASH_MALLOC(total_bytes);
    double *multipliers = layout == CHASH_RDV_SQUID ? CHASH_MALLOC((n ? n : 1) * sizeof(double))
                                                    : NULL;
    if (!set->nodes || !set->scan || !set->bytes || (layout == CHASH_RDV_SQUID && !multipliers)) {
        CHASH_FREE(multipliers);
        chash_rdv_free(set);
        return CHASH_ENOMEM;
    }
    unsigned char *at = set->bytes;
    for (size_t k = 0; k < n; k++) {
        rdv_node *node = &set->nodes[k];
        if (id_lens[k])
            memcpy(at, ids[k], id_lens[k]);
        node->id = at;
        node->id_len = id_lens[k];
        at += id_lens[k];
        if (name_lens[k])
            memcpy(at, names[k], name_lens[k]);
        node->name = at;
        node->name_len = name_lens[k];
        at += name_lens[k];
        node->weight = weights[k];
        node->factor = weights[k];
        if (weights[k] != weights[0])
            set->uniform = 0;
        node_derive(set, k, node);
    }
    scan_order(set);
    if (multipliers) {
        carp_multipliers(set, multipliers);
        for (size_t k = 0; k < n; k++)
            set->nodes[k].factor = multipliers[k];
        CHASH_FREE(multipliers);
    }
    *out = set;
    return CHASH_OK;
}

/* ------------------------------------------------------------------ */
/* Scores and their order                                             */

/* A node's score for one key: primary first, then (hrw) the mix. */
typedef struct {
    double primary;
    uint64_t mix;
} rdv_score;

/* Name order: unsigned bytes, a prefix first. */
static int name_cmp(const rdv_node *a, const rdv_node *b)
{
    size_t len = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = len ? memcmp(a->name, b->name, len) : 0;
    if (c)
        return c;
    return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

/* u in (0, 1) from the top 52 bits of the mix: ((m >> 12) + 1/2) / 2**52,
 * exact in a double, never 0 or 1. */
static inline double hrw_score(uint64_t mix, double weight)
{
    double u = ((double)(mix >> 12) + 0.5) * 0x1p-52;
    return weight / -log(u);
}

/*
 * 1 when node a (at scan position pa) ranks before node b (at pb).
 * hrw: higher score, then higher mix, then the smaller name; pymemcache:
 * higher score, then the larger name; caddy and squid: higher score, then
 * the earlier scan position.
 */
static int ranks_before(const chash_rdv_set *set, const rdv_score *sa, size_t a, size_t pa,
                        const rdv_score *sb, size_t b, size_t pb)
{
    if (sa->primary != sb->primary)
        return sa->primary > sb->primary;
    switch (set->layout) {
    case CHASH_RDV_HRW:
        if (sa->mix != sb->mix)
            return sa->mix > sb->mix;
        return name_cmp(&set->nodes[a], &set->nodes[b]) < 0;
    case CHASH_RDV_PYMEMCACHE:
        return name_cmp(&set->nodes[a], &set->nodes[b]) > 0;
    default:
        return pa < pb;
    }
}

/* The key's scores on every node, in scan order: scores[i] is the score of
 * node scan[i].  The key walk that squid carries on from peer to peer is
 * why this goes in scan order. */
typedef struct {
    uint64_t h;        /* hrw: XXH64 of the key */
    uint32_t fnv;      /* caddy: FNV-1a-32 state after the key */
    uint32_t carp;     /* squid: the key hash carried along the scan */
    const unsigned char *key;
    size_t len;
} rdv_key;

static rdv_key key_of(const chash_rdv_set *set, const void *key, size_t len, uint64_t h)
{
    rdv_key k = {h, 2166136261u, 0, key, len};
    if (set->layout == CHASH_RDV_CADDY)
        k.fnv = fnv1a_feed(k.fnv, key, len);
    return k;
}

static rdv_score score_at(const chash_rdv_set *set, rdv_key *key, size_t k)
{
    const rdv_node *node = &set->nodes[k];
    rdv_score s = {0.0, 0};
    switch (set->layout) {
    case CHASH_RDV_HRW:
        s.mix = chash_mix64(key->h ^ node->hash);
        s.primary = set->uniform ? 0.0 : hrw_score(s.mix, node->factor);
        break;
    case CHASH_RDV_PYMEMCACHE: {
        murmur3_state st = node->prefix;
        murmur3_feed(&st, key->key, key->len);
        s.primary = (double)murmur3_final(st);
        break;
    }
    case CHASH_RDV_CADDY:
        s.primary = (double)fnv1a_feed(key->fnv, node->id, node->id_len);
        break;
    case CHASH_RDV_SQUID: {
        for (size_t i = 0; i < key->len; i++)
            key->carp += rotl32(key->carp, 19) + carp_byte(key->key[i]);
        uint32_t combined = carp_mix(key->carp ^ (uint32_t)node->hash);
        s.primary = (double)combined * node->factor;
        /* A peer whose load factor carpInit rounds to 0 after another's
         * can get a NaN multiplier: Squid's `score > high_score` is then
         * never true, so it never wins; -1 ranks it last, the same way. */
        if (isnan(s.primary))
            s.primary = -1.0;
        break;
    }
    default:
        break;
    }
    return s;
}

static int winner_of(const chash_rdv_set *set, rdv_key key, uint32_t *winner)
{
    if (set->n == 0)
        return CHASH_ENOENT;
    size_t best = SIZE_MAX, best_pos = 0;
    rdv_score top = {0.0, 0};
    for (size_t i = 0; i < set->n; i++) {
        size_t k = set->scan[i];
        rdv_score s = score_at(set, &key, k);
        if (best == SIZE_MAX) {
            /* hrw and pymemcache take the first node whatever its score;
             * caddy and squid need one strictly above 0. */
            int takes = set->layout == CHASH_RDV_HRW || set->layout == CHASH_RDV_PYMEMCACHE
                        || s.primary > 0.0;
            if (!takes)
                continue;
        } else if (!ranks_before(set, &s, k, i, &top, best, best_pos)) {
            continue;
        }
        best = k;
        best_pos = i;
        top = s;
    }
    if (best == SIZE_MAX)
        return CHASH_ENOENT;
    *winner = (uint32_t)best;
    return CHASH_OK;
}

int chash_rdv_lookup(const chash_rdv_set *set, const void *key, size_t len, uint32_t *winner)
{
    uint64_t h = set->layout == CHASH_RDV_HRW ? chash_xxh64(key, len, 0) : 0;
    return winner_of(set, key_of(set, key, len, h), winner);
}

int chash_rdv_lookup_hash(const chash_rdv_set *set, uint64_t h, uint32_t *winner)
{
    if (set->layout != CHASH_RDV_HRW)
        return CHASH_EINVAL;
    return winner_of(set, key_of(set, "", 0, h), winner);
}

/* Merge sort of scan positions by ranks_before (stable, no recursion). */
static void sort_positions(const chash_rdv_set *set, const rdv_score *scores, uint32_t *pos,
                           uint32_t *tmp, size_t n)
{
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                uint32_t a = pos[i], b = pos[j];
                /* b first only when it strictly ranks before a: stable. */
                if (ranks_before(set, &scores[b], set->scan[b], b, &scores[a], set->scan[a], a))
                    tmp[o++] = pos[j++];
                else
                    tmp[o++] = pos[i++];
            }
            while (i < mid)
                tmp[o++] = pos[i++];
            while (j < hi)
                tmp[o++] = pos[j++];
        }
        memcpy(pos, tmp, n * sizeof *pos);
    }
}

int chash_rdv_rank(const chash_rdv_set *set, const void *key, size_t len, uint32_t *order)
{
    size_t n = set->n;
    if (n == 0)
        return CHASH_ENOENT;
    rdv_score *scores = CHASH_MALLOC(n * sizeof *scores);
    uint32_t *tmp = CHASH_MALLOC(n * sizeof *tmp);
    if (!scores || !tmp) {
        CHASH_FREE(scores);
        CHASH_FREE(tmp);
        return CHASH_ENOMEM;
    }
    uint64_t h = set->layout == CHASH_RDV_HRW ? chash_xxh64(key, len, 0) : 0;
    rdv_key k = key_of(set, key, len, h);
    for (size_t i = 0; i < n; i++) {
        scores[i] = score_at(set, &k, set->scan[i]);
        order[i] = (uint32_t)i;
    }
    sort_positions(set, scores, order, tmp, n);
    for (size_t i = 0; i < n; i++)
        order[i] = set->scan[order[i]];
    CHASH_FREE(scores);
    CHASH_FREE(tmp);
    return CHASH_OK;
}

double chash_rdv_share(const chash_rdv_set *set, size_t k)
{
    if (k >= set->n)
        return 0.0;
    if (set->layout == CHASH_RDV_HRW || set->layout == CHASH_RDV_SQUID)
        return set->nodes[k].weight / set->total;
    return 1.0 / (double)set->n;
}

int chash_rdv_check(const chash_rdv_set *set)
{
    size_t n = set->n;
    if ((unsigned)set->layout >= CHASH_RDV_LAYOUT_COUNT || n > CHASH_RDV_MAX_NODES)
        return CHASH_ECORRUPT;
    unsigned char *seen = CHASH_MALLOC(n ? n : 1);
    double *multipliers = CHASH_MALLOC((n ? n : 1) * sizeof(double));
    if (!seen || !multipliers) {
        CHASH_FREE(seen);
        CHASH_FREE(multipliers);
        return CHASH_ENOMEM;
    }
    memset(seen, 0, n ? n : 1);
    int ok = 1;
    double total = 0.0;
    int uniform = 1;
    for (size_t i = 0; ok && i < n; i++) {
        const rdv_node *node = &set->nodes[i];
        ok = set->scan[i] < n && !seen[set->scan[i]] && weight_ok(set->layout, node->weight);
        if (ok)
            seen[set->scan[i]] = 1;
        total += node->weight;
        uniform = uniform && node->weight == set->nodes[0].weight;
        rdv_node again = *node;
        node_derive(set, i, &again);
        ok = ok && again.hash == node->hash && again.prefix.h == node->prefix.h
             && again.prefix.tail == node->prefix.tail && again.prefix.ntail == node->prefix.ntail
             && again.prefix.len == node->prefix.len;
        if (ok && i > 0 && set->layout == CHASH_RDV_SQUID) {
            /* Scan order: by weight, add order among equals. */
            const rdv_node *prev = &set->nodes[set->scan[i - 1]];
            const rdv_node *here = &set->nodes[set->scan[i]];
            ok = prev->weight < here->weight
                 || (prev->weight == here->weight && set->scan[i - 1] < set->scan[i]);
        } else if (ok && set->layout != CHASH_RDV_SQUID) {
            ok = set->scan[i] == i;
        }
    }
    ok = ok && total == set->total && uniform == set->uniform;
    if (ok && set->layout == CHASH_RDV_SQUID) {
        carp_multipliers(set, multipliers);
        for (size_t k = 0; ok && k < n; k++)
            ok = multipliers[k] == set->nodes[k].factor
                 || (isnan(multipliers[k]) && isnan(set->nodes[k].factor));
    } else {
        for (size_t k = 0; ok && k < n; k++)
            ok = set->nodes[k].factor == set->nodes[k].weight;
    }
    CHASH_FREE(seen);
    CHASH_FREE(multipliers);
    return ok ? CHASH_OK : CHASH_ECORRUPT;
}
