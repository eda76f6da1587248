/*
 * ring.c - the sorted ring of points behind chash.h.
 *
 * Layout: one array of (value, owner) pairs sorted by (value, owner id),
 * 8 bytes a point; a point's owner sits in the same cache line as its value,
 * so a lookup in a ring too big for the cache pays one miss, not two.
 * A bucket index over the top bits of the value (about one bucket per
 * eight points) narrows every search to a handful of points, so lookup
 * cost stays flat as the ring grows.
 *
 * Adding points first grows the arrays to their exact new size (realloc:
 * large blocks are remapped, not copied) and every other buffer the call
 * needs; only then, when nothing can fail any more, are the new points
 * merged in from the back and the bucket index shifted.  Removing points
 * compacts in place and never allocates.  Either way a failed call leaves
 * the ring as it was (at most with more room).  Room beyond a quarter of
 * the points is given back after removals.
 *
 * The id index lives in ring_index.c, the bulk path (adding many nodes,
 * recounting many) in ring_bulk.c, the radix sort in sort.c; ring_repr.h
 * holds the representation they share.  ring.c calls the index and the
 * sort, never the bulk path (which calls ring.c).
 *
 * The allocator can be replaced at compile time (CHASH_MALLOC, CHASH_REALLOC,
 * CHASH_FREE), which the C tests use to make allocations fail on purpose.
 */
#include "ring_repr.h"

/* About eight points a bucket: the index costs half a byte a point and stays
 * in the cache, and a search inside a bucket reads one or two lines. */
#define POINTS_PER_BUCKET 8
#define MAX_BUCKET_BITS 24

const char *chash_strerror(int status)
{
    switch (status) {
    case CHASH_OK: return "success";
    case CHASH_ENOMEM: return "out of memory";
    case CHASH_EINVAL: return "invalid argument";
    case CHASH_EEXIST: return "node already in the ring";
    case CHASH_ENOENT: return "node not in the ring";
    case CHASH_ERANGE: return "ring size limit exceeded";
    case CHASH_ECORRUPT: return "ring invariant broken";
    default: return "unknown status";
    }
}

static unsigned bucket_bits_for(size_t npoints)
{
    unsigned bits = 0;
    while (bits < MAX_BUCKET_BITS && ((size_t)1 << (bits + 1)) * POINTS_PER_BUCKET <= npoints)
        bits++;
    return bits;
}

static size_t bucket_of(uint32_t value, unsigned bits)
{
    /* Widened first: a shift by 32 (bits == 0) is undefined on uint32_t. */
    return (size_t)((uint64_t)value >> (32u - bits));
}

/* bucket[b] = first index whose value's top bits are >= b; bucket[nb] = n.
 * Counted, then summed: no data-dependent branch per bucket. */
static void build_buckets(uint32_t *bucket, unsigned bits, const chash_pair *pt, size_t n)
{
    size_t nb = (size_t)1 << bits;
    memset(bucket, 0, (nb + 1) * sizeof *bucket);
    for (size_t i = 0; i < n; i++)
        bucket[bucket_of(pt[i].value, bits) + 1]++;
    for (size_t b = 1; b <= nb; b++)
        bucket[b] += bucket[b - 1];
}

/* After sorted points add[0..n) were merged in and sorted points
 * drop[0..ndrop) taken out: each bucket starts later by the number of
 * added points in the buckets before it, earlier by the dropped ones. */
static void shift_buckets(uint32_t *bucket, unsigned bits, const chash_pair *add, size_t n,
                          const chash_pair *drop, size_t ndrop)
{
    size_t nb = (size_t)1 << bits;
    size_t j = 0, d = 0;
    for (size_t b = 0; b <= nb; b++) {
        while (j < n && bucket_of(add[j].value, bits) < b)
            j++;
        while (d < ndrop && bucket_of(drop[d].value, bits) < b)
            d++;
        bucket[b] = bucket[b] + (uint32_t)j - (uint32_t)d;
    }
}

/* Byte-wise order of ids; a proper prefix sorts first. */
CHASH_PRIVATE int chash_priv_compare_ids(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t common = alen < blen ? alen : blen;
    int c = common ? memcmp(a, b, common) : 0;
    if (c != 0)
        return c;
    return (alen > blen) - (alen < blen);
}


chash_ring *chash_ring_new(void)
{
    chash_ring *ring = CHASH_MALLOC(sizeof *ring);
    if (!ring)
        return NULL;
    memset(ring, 0, sizeof *ring);
    ring->bucket = CHASH_MALLOC(2 * sizeof *ring->bucket);
    if (!ring->bucket) {
        CHASH_FREE(ring);
        return NULL;
    }
    ring->bucket_cap = 2;
    build_buckets(ring->bucket, 0, NULL, 0);
    ring->slot_cap = chash_priv_index_size_for(0);
    ring->slot = CHASH_MALLOC(ring->slot_cap * sizeof *ring->slot);
    if (!ring->slot) {
        CHASH_FREE(ring->bucket);
        CHASH_FREE(ring);
        return NULL;
    }
    chash_priv_index_rebuild(ring, ring->slot_cap);
    return ring;
}

int chash_ring_set_ties(chash_ring *ring, chash_ties ties)
{
    if (ring->nnodes || (ties != CHASH_TIES_BY_ID && ties != CHASH_TIES_BY_ORDER))
        return CHASH_EINVAL;
    ring->ties = ties;
    return CHASH_OK;
}

chash_ties chash_ring_ties(const chash_ring *ring) { return ring->ties; }

int chash_ring_set_rule(chash_ring *ring, chash_rule rule)
{
    if (ring->nnodes
        || (rule != CHASH_RULE_SUCCESSOR && rule != CHASH_RULE_NEAREST && rule != CHASH_RULE_VARNISH))
        return CHASH_EINVAL;
    ring->rule = rule;
    return CHASH_OK;
}

chash_rule chash_ring_rule(const chash_ring *ring) { return ring->rule; }

void chash_ring_free(chash_ring *ring)
{
    if (!ring)
        return;
    for (size_t i = 0; i < ring->nnodes; i++)
        free_node_id(&ring->nodes[i]);
    CHASH_FREE(ring->node_block);
    CHASH_FREE(ring->pt);
    CHASH_FREE(ring->bucket);
    CHASH_FREE(ring->slot);
    CHASH_FREE(ring);
}

size_t chash_ring_node_count(const chash_ring *ring) { return ring->nnodes; }
size_t chash_ring_point_count(const chash_ring *ring) { return ring->npoints; }

size_t chash_ring_memory(const chash_ring *ring)
{
    size_t bytes = sizeof *ring
        + ring->point_cap * sizeof *ring->pt
        + ring->bucket_cap * sizeof *ring->bucket
        + (ring->node_block ? ring->node_cap * sizeof *ring->nodes + NODE_ALIGN - 1 : 0)
        + ring->slot_cap * sizeof *ring->slot;
    for (size_t i = 0; i < ring->nnodes; i++)
        bytes += ring->nodes[i].id_len > INLINE_ID ? ring->nodes[i].id_len + 1 : 0;
    return bytes;
}

int chash_ring_find(const chash_ring *ring, const char *id, size_t id_len, size_t *index)
{
    if (!id && id_len)
        return CHASH_ENOENT;
    uint32_t e = ring->slot[chash_priv_index_probe(ring, id, id_len, chash_priv_id_hash_of(id, id_len))];
    if (e == 0)
        return CHASH_ENOENT;
    if (index)
        *index = e - 1;
    return CHASH_OK;
}

/* 1 when a node with this id is in the ring. */
CHASH_PRIVATE int chash_priv_has_node(const chash_ring *ring, const char *id, size_t id_len)
{
    return chash_ring_find(ring, id, id_len, NULL) == CHASH_OK;
}

chash_node_view chash_ring_node(const chash_ring *ring, size_t index)
{
    const chash_node *node = &ring->nodes[index];
    chash_node_view view = {id_of(node), node->id_len, node->data, node->npoints};
    return view;
}

uint32_t chash_ring_point(const chash_ring *ring, size_t i) { return ring->pt[i].value; }
size_t chash_ring_point_owner(const chash_ring *ring, size_t i) { return ring->pt[i].owner; }

/* True when point (value, owner a) sorts before point (value, owner b).
 * Nodes stay in insertion order in the table (removal closes the gap
 * without reordering), so the index is the place in insertion order. */
CHASH_PRIVATE int chash_priv_owner_before(const chash_ring *ring, size_t a, size_t b)
{
    if (ring->ties == CHASH_TIES_BY_ORDER)
        return a < b;
    const chash_node *na = &ring->nodes[a], *nb = &ring->nodes[b];
    return chash_priv_compare_ids(id_of(na), na->id_len, id_of(nb), nb->id_len) < 0;
}

/* Room for the index of a ring of n points; 0 or CHASH_ENOMEM. */
CHASH_PRIVATE int chash_priv_reserve_buckets(const chash_ring *ring, size_t n, uint32_t **fresh)
{
    size_t need = ((size_t)1 << bucket_bits_for(n)) + 1;
    *fresh = NULL;
    if (need <= ring->bucket_cap)
        return CHASH_OK;
    *fresh = CHASH_MALLOC(need * sizeof **fresh);
    return *fresh ? CHASH_OK : CHASH_ENOMEM;
}

/* Room for total points; on failure the ring is untouched. */
CHASH_PRIVATE int chash_priv_reserve_points(chash_ring *ring, size_t total)
{
    if (total <= ring->point_cap)
        return CHASH_OK;
    chash_pair *pt = CHASH_REALLOC(ring->pt, total * sizeof *pt);
    if (!pt)
        return CHASH_ENOMEM;
    ring->pt = pt;
    ring->point_cap = total;
    return CHASH_OK;
}

/* Installs the index for the current points, which differ from the indexed
 * ones by add[0..n) and drop[0..ndrop) (both sorted by value; NULL when not
 * known): shifted in place when its size stays, else rebuilt (into fresh
 * when the caller had to allocate one). */
CHASH_PRIVATE void chash_priv_update_buckets(chash_ring *ring, uint32_t *fresh, const chash_pair *add, size_t n,
                           const chash_pair *drop, size_t ndrop)
{
    unsigned bits = bucket_bits_for(ring->npoints);
    if (fresh) {
        CHASH_FREE(ring->bucket);
        ring->bucket = fresh;
        ring->bucket_cap = ((size_t)1 << bits) + 1;
    }
    if (bits == ring->bucket_bits && (add || drop) && !fresh) {
        shift_buckets(ring->bucket, bits, add, n, drop, ndrop);
        return;
    }
    ring->bucket_bits = bits;
    build_buckets(ring->bucket, bits, ring->pt, ring->npoints);
}

/*
 * Merges the points add[0..n), sorted by (value, owner id), into the ring
 * from the back, in place: the arrays must already hold room for them (no
 * failure is possible here).  Their owners must be registered
 * (owner_before reads their ids).  A few points into a big ring are placed
 * by binary search and block moves; more, by one merging pass.
 */
CHASH_PRIVATE void chash_priv_merge_sorted(chash_ring *ring, const chash_pair *add, size_t n)
{
    chash_pair *pt = ring->pt;
    size_t i = ring->npoints; /* pt[0..i) has not moved yet */
    if (n >= i / 16) {
        /* Many points for the ring's size: one backward pass, each point
         * moving once (old ones sort after a new one of equal value when
         * their owner's id sorts after its owner's). */
        for (size_t j = n; j > 0; j--) {
            chash_pair x = add[j - 1];
            while (i > 0 && (pt[i - 1].value > x.value
                             || (pt[i - 1].value == x.value && chash_priv_owner_before(ring, x.owner, pt[i - 1].owner)))) {
                pt[i + j - 1] = pt[i - 1];
                i--;
            }
            pt[i + j - 1] = x;
        }
        ring->npoints += n;
        return;
    }
    for (size_t j = n; j > 0; j--) {
        uint32_t v = add[j - 1].value;
        uint32_t o = add[j - 1].owner;
        /* Where the new point goes: after every point with a smaller value
         * and after those of equal value whose owner's id sorts first. */
        size_t lo = 0, hi = i;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (pt[mid].value < v)
                lo = mid + 1;
            else
                hi = mid;
        }
        while (lo < i && pt[lo].value == v && chash_priv_owner_before(ring, pt[lo].owner, o))
            lo++;
        /* The run after it moves up by the j points still to place: one
         * block move per new point instead of one step per old point. */
        if (lo < i)
            memmove(&pt[lo + j], &pt[lo], (i - lo) * sizeof *pt);
        pt[lo + j - 1] = add[j - 1];
        i = lo;
    }
    ring->npoints += n;
}

static void merge_points(chash_ring *ring, const chash_pair *add, size_t n, uint32_t *fresh)
{
    chash_priv_merge_sorted(ring, add, n);
    chash_priv_update_buckets(ring, fresh, add, n, NULL, 0);
}

/* Everything merge_points needs for n more points; 0 or CHASH_ENOMEM. */
CHASH_PRIVATE int chash_priv_reserve_merge(chash_ring *ring, size_t n, uint32_t **fresh)
{
    int status = chash_priv_reserve_points(ring, ring->npoints + n);
    if (status == CHASH_OK)
        status = chash_priv_reserve_buckets(ring, ring->npoints + n, fresh);
    return status;
}


CHASH_PRIVATE int chash_priv_check_growth(const chash_ring *ring, size_t already, size_t n)
{
    if (n == 0 || n > CHASH_MAX_NODE_POINTS || already > CHASH_MAX_NODE_POINTS - n)
        return CHASH_EINVAL;
    if (ring->npoints + n > CHASH_MAX_POINTS)
        return CHASH_ERANGE;
    return CHASH_OK;
}

/* Room for count more nodes; harmless on failure (same nodes, more room). */
CHASH_PRIVATE int chash_priv_reserve_nodes(chash_ring *ring, size_t count)
{
    if (ring->nnodes + count <= ring->node_cap)
        return CHASH_OK;
    size_t cap = ring->node_cap ? ring->node_cap : 8;
    while (cap < ring->nnodes + count)
        cap *= 2;
    /* Entries start on a cache line: finding a node by id reads one line. */
    void *block = CHASH_MALLOC(cap * sizeof(chash_node) + NODE_ALIGN - 1);
    if (!block)
        return CHASH_ENOMEM;
    chash_node *nodes = (chash_node *)(void *)((char *)block
        + (NODE_ALIGN - (uintptr_t)block % NODE_ALIGN) % NODE_ALIGN);
    if (ring->nnodes)
        memcpy(nodes, ring->nodes, ring->nnodes * sizeof *nodes);
    CHASH_FREE(ring->node_block);
    ring->node_block = block;
    ring->nodes = nodes;
    ring->node_cap = cap;
    return CHASH_OK;
}

/* A NUL-terminated private copy of an id, or NULL when out of memory. */
CHASH_PRIVATE char *chash_priv_copy_id(const char *id, size_t id_len)
{
    char *copy = CHASH_MALLOC(id_len + 1);
    if (!copy)
        return NULL;
    if (id_len)
        memcpy(copy, id, id_len);
    copy[id_len] = '\0';
    return copy;
}

int chash_ring_add(chash_ring *ring, const char *id, size_t id_len, void *data,
                   const uint32_t *points, size_t npoints)
{
    if (!id && id_len)
        return CHASH_EINVAL;
    int status = chash_priv_check_growth(ring, 0, npoints);
    if (status != CHASH_OK)
        return status;
    uint64_t h = chash_priv_id_hash_of(id, id_len);
    if (ring->slot[chash_priv_index_probe(ring, id, id_len, h)] != 0)
        return CHASH_EEXIST;
    if (ring->nnodes >= CHASH_MAX_NODES)
        return CHASH_ERANGE;

    /* Growing the node table first is harmless: a bigger table holding the
     * same nodes is the same ring. */
    if (chash_priv_reserve_nodes(ring, 1) != CHASH_OK)
        return CHASH_ENOMEM;
    char *copy = id_len > INLINE_ID ? chash_priv_copy_id(id, id_len) : NULL;
    chash_pair *sorted = chash_priv_sorted_pairs(points, npoints, ring->nnodes);
    uint32_t *fresh = NULL, *fresh_index = NULL;
    if ((id_len > INLINE_ID && !copy) || !sorted || chash_priv_reserve_merge(ring, npoints, &fresh) != CHASH_OK
        || chash_priv_reserve_index(ring, 1, &fresh_index) != CHASH_OK) {
        CHASH_FREE(copy);
        CHASH_FREE(sorted);
        CHASH_FREE(fresh);
        return CHASH_ENOMEM;
    }
    size_t k = ring->nnodes;
    ring->nodes[k] = make_node(id, id_len, copy, data, npoints, h);
    ring->nnodes++;
    chash_priv_index_commit(ring, fresh_index, k);
    merge_points(ring, sorted, npoints, fresh);
    CHASH_FREE(sorted);
    return CHASH_OK;
}


int chash_ring_grow(chash_ring *ring, const char *id, size_t id_len,
                    const uint32_t *points, size_t npoints)
{
    size_t k;
    if (chash_ring_find(ring, id, id_len, &k) != CHASH_OK)
        return CHASH_ENOENT;
    chash_node *node = &ring->nodes[k];
    int status = chash_priv_check_growth(ring, node->npoints, npoints);
    if (status != CHASH_OK)
        return status;
    chash_pair *sorted = chash_priv_sorted_pairs(points, npoints, k);
    uint32_t *fresh = NULL;
    if (!sorted || chash_priv_reserve_merge(ring, npoints, &fresh) != CHASH_OK) {
        CHASH_FREE(sorted);
        return CHASH_ENOMEM;
    }
    merge_points(ring, sorted, npoints, fresh);
    node->npoints += npoints;
    CHASH_FREE(sorted);
    return CHASH_OK;
}

/* Gives back point room once over a quarter of it is unused.  A failed
 * shrink leaves the larger block in place, which is as good a ring. */
CHASH_PRIVATE void chash_priv_release_slack(chash_ring *ring)
{
    if (ring->point_cap - ring->npoints > ring->point_cap / 4 && ring->npoints > 0) {
        chash_pair *pt = CHASH_REALLOC(ring->pt, ring->npoints * sizeof *pt);
        if (pt) {
            ring->pt = pt;
            ring->point_cap = ring->npoints;
        }
    }
    size_t need = ((size_t)1 << ring->bucket_bits) + 1;
    if (ring->bucket_cap > 2 * need) {
        uint32_t *bucket = CHASH_REALLOC(ring->bucket, need * sizeof *bucket);
        if (bucket) {
            ring->bucket = bucket;
            ring->bucket_cap = need;
        }
    }
    /* The id index is refilled at its smaller size inside its own block
     * first, so a failed shrink of the block still leaves a valid index. */
    size_t slots = chash_priv_index_size_for(ring->nnodes);
    if (ring->slot_mask + 1 > 4 * slots) {
        chash_priv_index_rebuild(ring, slots);
        uint32_t *slot = CHASH_REALLOC(ring->slot, slots * sizeof *slot);
        if (slot) {
            ring->slot = slot;
            ring->slot_cap = slots;
        }
    }
}

int chash_ring_shrink(chash_ring *ring, const char *id, size_t id_len,
                      const uint32_t *points, size_t npoints)
{
    size_t k;
    if (chash_ring_find(ring, id, id_len, &k) != CHASH_OK)
        return CHASH_ENOENT;
    if (npoints == 0)
        return CHASH_OK;
    if (npoints >= ring->nodes[k].npoints)
        return CHASH_EINVAL;
    chash_pair *drop = chash_priv_sorted_pairs(points, npoints, k);
    if (!drop)
        return CHASH_ENOMEM;

    /* First pass: every point to drop must be there, or nothing changes.
     * The node's own points appear in increasing value order, as drop does. */
    size_t j = 0;
    for (size_t i = 0; i < ring->npoints && j < npoints; i++) {
        if (ring->pt[i].owner != k)
            continue;
        if (drop[j].value < ring->pt[i].value)
            break;
        if (drop[j].value == ring->pt[i].value)
            j++;
    }
    if (j != npoints) {
        CHASH_FREE(drop);
        return CHASH_ENOENT;
    }
    /* Second pass: compact in place; cannot fail. */
    size_t out = 0;
    j = 0;
    for (size_t i = 0; i < ring->npoints; i++) {
        if (ring->pt[i].owner == k && j < npoints && drop[j].value == ring->pt[i].value) {
            j++;
            continue;
        }
        ring->pt[out++] = ring->pt[i];
    }
    CHASH_FREE(drop);
    ring->npoints = out;
    ring->nodes[k].npoints -= npoints;
    chash_priv_update_buckets(ring, NULL, NULL, 0, NULL, 0);
    chash_priv_release_slack(ring);
    return CHASH_OK;
}


int chash_ring_remove(chash_ring *ring, const char *id, size_t id_len, void **data_out)
{
    size_t k;
    if (chash_ring_find(ring, id, id_len, &k) != CHASH_OK)
        return CHASH_ENOENT;
    unsigned bits = ring->bucket_bits;
    int same_index = bucket_bits_for(ring->npoints - ring->nodes[k].npoints) == bits;
    /* Compact; at each dropped point, the buckets up to its own start one
     * point earlier from then on (runs of buckets, not a branch per bucket). */
    /* One pass over the points: owners after k move down one (nodes stay
     * dense and in insertion order) as the points are compacted. */
    chash_pair *pt = ring->pt;
    uint32_t *bucket = ring->bucket;
    size_t out = 0, n = ring->npoints, b = 0;
    uint32_t dropped = 0, limit = (uint32_t)k;
    for (size_t i = 0; i < n; i++) {
        chash_pair p = pt[i];
        if (p.owner == limit) {
            if (same_index) {
                size_t here = bucket_of(p.value, bits);
                for (; b <= here; b++)
                    bucket[b] -= dropped;
            }
            dropped++;
            continue;
        }
        p.owner -= p.owner > limit;
        pt[out++] = p;
    }
    ring->npoints = out;
    if (same_index)
        for (; b <= ((size_t)1 << bits); b++)
            bucket[b] -= dropped;
    else
        chash_priv_update_buckets(ring, NULL, NULL, 0, NULL, 0);
    chash_priv_index_remove(ring, k);
    if (data_out)
        *data_out = ring->nodes[k].data;
    free_node_id(&ring->nodes[k]);
    memmove(&ring->nodes[k], &ring->nodes[k + 1], (ring->nnodes - k - 1) * sizeof *ring->nodes);
    ring->nnodes--;
    chash_priv_release_slack(ring);
    return CHASH_OK;
}

size_t chash_ring_successor(const chash_ring *ring, uint32_t hash)
{
    size_t b = bucket_of(hash, ring->bucket_bits);
    size_t lo = ring->bucket[b], len = ring->bucket[b + 1] - lo;
    /* Every point before lo is < hash and every point from lo + len on is
     * >= hash (it lies in a later bucket), so the answer is in
     * [first, first + len].  Halving without a branch on the data: the
     * comparison becomes a conditional move, never a misprediction. */
    const chash_pair *first = ring->pt + lo;
    while (len > 1) {
        size_t half = len / 2;
        first = first[half].value < hash ? first + half : first;
        len -= half;
    }
    size_t at = (size_t)(first - ring->pt) + (len == 1 && first->value < hash);
    return at == ring->npoints ? 0 : at;
}

size_t chash_ring_nearest(const chash_ring *ring, uint32_t hash)
{
    size_t next = chash_ring_successor(ring, hash);
    size_t prev = next ? next - 1 : ring->npoints - 1;
    /* Unsigned differences: distances that wrap past 2**32 come out right,
     * as in HAProxy's "dp = hash - prev->key; dn = next->key - hash". */
    uint32_t dp = hash - ring->pt[prev].value;
    uint32_t dn = ring->pt[next].value - hash;
    return dp <= dn ? prev : next;
}

size_t chash_ring_varnish(const chash_ring *ring, uint32_t hash)
{
    const chash_pair *pt = ring->pt;
    size_t n = ring->npoints, lo = 0, hi = n;
    /* Varnish's own bisection, step for step: its stops decide which of
     * several equal points an exact hit starts from.  Each turn either
     * stops or strictly narrows [lo, hi) around the answer (lo only moves
     * to a point < hash whose next point is < hash too, hi only to a
     * point > hash), so it ends within log2(n) + 1 turns. */
    for (;;) {
        size_t i = lo + (hi - lo) / 2;
        if (pt[i].value == hash)
            return i;
        if (i == n - 1)
            return n - 1; /* above every point: the last one, no wrap */
        if (pt[i].value < hash && pt[i + 1].value >= hash)
            return i + 1;
        if (pt[i].value > hash) {
            if (i == 0)
                return 0;
            hi = i;
        } else {
            lo = i;
        }
    }
}

size_t chash_ring_route(const chash_ring *ring, uint32_t hash)
{
    switch (ring->rule) {
    case CHASH_RULE_NEAREST: return chash_ring_nearest(ring, hash);
    case CHASH_RULE_VARNISH: return chash_ring_varnish(ring, hash);
    default: return chash_ring_successor(ring, hash);
    }
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(addr) __builtin_prefetch(addr)
#else
#define PREFETCH(addr) ((void)(addr))
#endif

/* How far ahead the batch lookup starts reading: the index entry of key
 * i + 2 * LOOKAHEAD and the points of key i + LOOKAHEAD. */
#define LOOKAHEAD 8

void chash_ring_owners(const chash_ring *ring, const uint32_t *hashes, size_t n, uint32_t *owners)
{
    unsigned bits = ring->bucket_bits;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 * LOOKAHEAD < n)
            PREFETCH(&ring->bucket[bucket_of(hashes[i + 2 * LOOKAHEAD], bits)]);
        if (i + LOOKAHEAD < n)
            PREFETCH(&ring->pt[ring->bucket[bucket_of(hashes[i + LOOKAHEAD], bits)]]);
        owners[i] = ring->pt[chash_ring_route(ring, hashes[i])].owner;
    }
}

int chash_ring_lookup(const chash_ring *ring, uint32_t hash, void **data)
{
    if (ring->npoints == 0)
        return CHASH_ENOENT;
    *data = ring->nodes[ring->pt[chash_ring_route(ring, hash)].owner].data;
    return CHASH_OK;
}

int chash_ring_preference(const chash_ring *ring, uint32_t hash, size_t n, size_t *out,
                          size_t *found_out)
{
    *found_out = 0;
    if (n > ring->nnodes)
        n = ring->nnodes;
    if (n == 0 || ring->npoints == 0)
        return CHASH_OK;
    unsigned char *seen = CHASH_MALLOC(ring->nnodes);
    if (!seen)
        return CHASH_ENOMEM;
    memset(seen, 0, ring->nnodes);
    size_t found = 0;
    size_t i = chash_ring_route(ring, hash);
    for (size_t steps = 0; steps < ring->npoints && found < n; steps++) {
        uint32_t o = ring->pt[i].owner;
        if (!seen[o]) {
            seen[o] = 1;
            out[found++] = o;
        }
        if (++i == ring->npoints)
            i = 0;
    }
    CHASH_FREE(seen);
    *found_out = found;
    return CHASH_OK;
}

/*
 * Ownership under the nearest rule.  Between the last point a of one value
 * and the first point b of the next (cyclically) lies a gap of g values
 * (b - a modulo 2**32, 2**32 when the ring holds one value only): values
 * a + 1 .. a + g/2 (rounded down) are nearer a or tied, and go to a's
 * owner; the other g - g/2, b included, go to b's.  With one value only,
 * hash == that value is a tie at distance 0 and goes to a, the last point.
 */
static void nearest_ownership(const chash_ring *ring, double *share)
{
    size_t n = ring->npoints;
    const double full = 4294967296.0;
    size_t b = 0;
    /* b: the first point of each run of equal values; a: the run before's last. */
    while (b < n) {
        size_t a = b ? b - 1 : n - 1;
        uint64_t gap = (uint32_t)(ring->pt[b].value - ring->pt[a].value);
        if (gap == 0) { /* one value only: a is b's run's own last point */
            share[ring->pt[a].owner] += ((double)((uint64_t)1 << 31) + 1.0) / full;
            share[ring->pt[b].owner] += ((double)((uint64_t)1 << 31) - 1.0) / full;
            if (a == b) /* a single point: both halves went to its owner */
                share[ring->pt[a].owner] = 1.0;
            return;
        }
        share[ring->pt[a].owner] += (double)(gap / 2) / full;
        share[ring->pt[b].owner] += (double)(gap - gap / 2) / full;
        size_t next = b + 1;
        while (next < n && ring->pt[next].value == ring->pt[b].value)
            next++;
        b = next;
    }
}

void chash_ring_ownership(const chash_ring *ring, double *share)
{
    for (size_t k = 0; k < ring->nnodes; k++)
        share[k] = 0.0;
    size_t n = ring->npoints;
    if (n && ring->rule == CHASH_RULE_NEAREST) {
        nearest_ownership(ring, share);
        return;
    }
    if (n == 2 && ring->rule == CHASH_RULE_VARNISH) {
        share[ring->pt[1].owner] = 1.0; /* chash_ring_varnish(): every hash */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* Arc (previous point, this point]; the first point's arc wraps. */
        uint64_t prev = i ? ring->pt[i - 1].value : (uint64_t)ring->pt[n - 1].value;
        uint64_t arc = i ? ring->pt[i].value - prev : ring->pt[0].value + ((uint64_t)1 << 32) - prev;
        if (i == 0 && ring->rule == CHASH_RULE_VARNISH) {
            /* [0, first] to the first point, (last, 2**32) to the last. */
            uint64_t above = UINT32_MAX - prev;
            share[ring->pt[n - 1].owner] += (double)above / 4294967296.0;
            arc -= above;
        }
        share[ring->pt[i].owner] += (double)arc / 4294967296.0;
    }
}

int chash_ring_check(const chash_ring *ring)
{
    size_t *counted = NULL;
    if (ring->nnodes) {
        counted = CHASH_MALLOC(ring->nnodes * sizeof *counted);
        if (!counted)
            return CHASH_ENOMEM;
        memset(counted, 0, ring->nnodes * sizeof *counted);
    }
    /* The index's shape first: the probes below need a free slot and
     * entries that name nodes. */
    int status = CHASH_OK;
    size_t used = 0;
    if (ring->slot_mask + 1 < chash_priv_index_size_for(ring->nnodes) || ring->slot_mask + 1 > ring->slot_cap
        || ((ring->slot_mask + 1) & ring->slot_mask) != 0)
        status = CHASH_ECORRUPT;
    for (size_t s = 0; s <= ring->slot_mask && status == CHASH_OK; s++) {
        if (ring->slot[s] > ring->nnodes)
            status = CHASH_ECORRUPT;
        used += ring->slot[s] != 0;
    }
    if (used != ring->nnodes)
        status = CHASH_ECORRUPT;
    size_t declared = 0;
    for (size_t k = 0; k < ring->nnodes && status == CHASH_OK; k++) {
        const chash_node *node = &ring->nodes[k];
        declared += node->npoints;
        const char *id = id_of(node);
        if (!id || node->npoints == 0 || id[node->id_len] != '\0'
            || node->id_hash != chash_priv_id_hash_of(id, node->id_len))
            status = CHASH_ECORRUPT;
        /* Found by the index at its own position: with the slot count
         * below, this also proves the ids distinct (a second node with an
         * equal id would be found at the first one's position). */
        else if (ring->slot[chash_priv_index_probe(ring, id, node->id_len, node->id_hash)] != k + 1)
            status = CHASH_ECORRUPT;
    }
    if (declared != ring->npoints || ring->nnodes > ring->node_cap || ring->npoints > ring->point_cap
        || (ring->ties != CHASH_TIES_BY_ID && ring->ties != CHASH_TIES_BY_ORDER)
        || (ring->rule != CHASH_RULE_SUCCESSOR && ring->rule != CHASH_RULE_NEAREST
            && ring->rule != CHASH_RULE_VARNISH))
        status = CHASH_ECORRUPT;
    for (size_t i = 0; i < ring->npoints && status == CHASH_OK; i++) {
        if (ring->pt[i].owner >= ring->nnodes) {
            status = CHASH_ECORRUPT;
            break;
        }
        counted[ring->pt[i].owner]++;
        if (i && (ring->pt[i - 1].value > ring->pt[i].value
                  || (ring->pt[i - 1].value == ring->pt[i].value
                      && chash_priv_owner_before(ring, ring->pt[i].owner, ring->pt[i - 1].owner))))
            status = CHASH_ECORRUPT;
    }
    for (size_t k = 0; k < ring->nnodes && status == CHASH_OK; k++)
        if (counted[k] != ring->nodes[k].npoints)
            status = CHASH_ECORRUPT;
    if (status == CHASH_OK) {
        unsigned bits = ring->bucket_bits;
        size_t nb = (size_t)1 << bits;
        if (bits != bucket_bits_for(ring->npoints) || nb + 1 > ring->bucket_cap
            || ring->bucket[0] != 0 || ring->bucket[nb] != ring->npoints)
            status = CHASH_ECORRUPT;
        for (size_t b = 0; b < nb && status == CHASH_OK; b++) {
            if (ring->bucket[b] > ring->bucket[b + 1])
                status = CHASH_ECORRUPT;
            for (size_t i = ring->bucket[b]; i < ring->bucket[b + 1] && status == CHASH_OK; i++)
                if (bucket_of(ring->pt[i].value, bits) != b)
                    status = CHASH_ECORRUPT;
        }
    }
    CHASH_FREE(counted);
    return status;
}
