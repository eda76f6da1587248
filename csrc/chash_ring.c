/*
 * chash_ring.c - the sorted ring of points behind chash.h.
 *
 * Layout: one array of (value, owner) pairs sorted by (value, owner id),
 * 8 bytes a point; a point's owner sits in the same cache line as its value,
 * so a lookup in a ring too big for the cache pays one miss, not two.  A bucket index over the top bits of the value (about one bucket
 * per four points) narrows every search to a handful of points, so lookup
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
 * The allocator can be replaced at compile time (CHASH_MALLOC, CHASH_REALLOC,
 * CHASH_FREE), which the C tests use to make allocations fail on purpose.
 */
#include "chash.h"
#include "chash_alloc.h"

#include <string.h>

typedef struct chash_pair {
    uint32_t value; /* the 32-bit ring position */
    uint32_t owner; /* index of the owning node */
} chash_pair;

/* Ids up to this long live inside their node entry (NUL-terminated), so
 * finding a node by id reads its entry and nothing else; longer ones get a
 * heap copy. */
#define INLINE_ID 31
/* Node entries are aligned to this (a cache line on common CPUs). */
#define NODE_ALIGN 64

/* A node entry, 64 bytes; a new per-node field goes here (chash_ring_node()
 * copies what callers see into a chash_node_view). */
typedef struct chash_node {
    uint64_t id_hash;    /* id_hash_of(id): where the id index looks first */
    size_t id_len;
    void *data;
    size_t npoints;
    union {
        char bytes[INLINE_ID + 1]; /* id_len <= INLINE_ID */
        char *heap;                /* id_len > INLINE_ID */
    } id;
} chash_node;

struct chash_ring {
    chash_pair *pt;      /* npoints points, sorted */
    size_t npoints;
    size_t point_cap;    /* entries allocated in pt */
    uint32_t *bucket;    /* (1 << bucket_bits) + 1 indices into pt */
    size_t bucket_cap;   /* entries allocated in bucket */
    unsigned bucket_bits;
    chash_node *nodes;   /* in insertion order, each entry one cache line */
    void *node_block;    /* the allocation nodes lies in (nodes is aligned up) */
    size_t nnodes;
    size_t node_cap;
    /* The id index: an open-addressing table (linear probing) of
     * slot_mask + 1 entries, a power of two at least twice the node count;
     * 0 is a free slot, k + 1 names node k.  slot_cap entries are
     * allocated (more than slot_mask + 1 after a shrink that could not
     * hand the block back). */
    uint32_t *slot;
    size_t slot_mask;
    size_t slot_cap;
    chash_ties ties;     /* how points of equal value are ordered */
};

/* The id bytes of a node, NUL-terminated. */
static const char *id_of(const chash_node *node)
{
    return node->id_len <= INLINE_ID ? node->id.bytes : node->id.heap;
}

/* Fills a node entry; heap is the id's copy when it is too long to sit
 * inline (from copy_id(), owned by the entry from now on), else NULL. */
static chash_node make_node(const char *id, size_t id_len, char *heap, void *data,
                            size_t npoints, uint64_t id_hash)
{
    chash_node node = {id_hash, id_len, data, npoints, {{0}}};
    if (heap)
        node.id.heap = heap;
    else if (id_len)
        memcpy(node.id.bytes, id, id_len);
    return node;
}

/* The heap copy of an id too long to sit inline, owned by nobody yet. */
static void free_node_id(chash_node *node)
{
    if (node->id_len > INLINE_ID)
        CHASH_FREE(node->id.heap);
}

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

/* After sorted points add[0..n) were merged in: each bucket starts later by
 * the number of added points in the buckets before it. */
static void shift_buckets_up(uint32_t *bucket, unsigned bits, const chash_pair *add, size_t n)
{
    size_t nb = (size_t)1 << bits;
    size_t j = 0;
    for (size_t b = 0; b <= nb; b++) {
        while (j < n && bucket_of(add[j].value, bits) < b)
            j++;
        bucket[b] += (uint32_t)j;
    }
}

/* Byte-wise order of ids; a proper prefix sorts first. */
static int compare_ids(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t common = alen < blen ? alen : blen;
    int c = common ? memcmp(a, b, common) : 0;
    if (c != 0)
        return c;
    return (alen > blen) - (alen < blen);
}

/* ------------------------------------------------------------------ */
/* The id index                                                       */

/* Smallest id index for this many nodes: a power of two, at least twice
 * as many slots as nodes (probe runs stay short), at least 8. */
static size_t index_size_for(size_t nnodes)
{
    size_t size = 8;
    while (size < 2 * nnodes)
        size *= 2;
    return size;
}

/* A 64-bit hash of id bytes for the index: eight bytes a multiply, then a
 * final avalanche.  Only the index's slot order depends on it, never a
 * route, so it need not match any published hash. */
static uint64_t id_hash_of(const char *id, size_t len)
{
    const uint64_t mul = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t h = (uint64_t)len * mul;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t word;
        memcpy(&word, id + i, 8);
        h = (h ^ word) * mul;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    for (unsigned shift = 0; i < len; i++, shift += 8)
        tail |= (uint64_t)(unsigned char)id[i] << shift;
    h = (h ^ tail) * UINT64_C(0xD6E8FEB86659FD93);
    h ^= h >> 32;
    h *= UINT64_C(0xD6E8FEB86659FD93);
    return h ^ (h >> 32);
}

/* The slot holding the node with this id, or the free slot that ends its
 * probe run.  The table always has a free slot (it is at most half full). */
static size_t index_probe(const chash_ring *ring, const char *id, size_t id_len, uint64_t h)
{
    size_t mask = ring->slot_mask;
    for (size_t s = (size_t)h & mask;; s = (s + 1) & mask) {
        uint32_t e = ring->slot[s];
        if (e == 0)
            return s;
        const chash_node *node = &ring->nodes[e - 1];
        if (node->id_hash == h && node->id_len == id_len
            && (id_len == 0 || memcmp(id_of(node), id, id_len) == 0))
            return s;
    }
}

/* Enters node k (registered, id not yet in the index); cannot fail. */
static void index_insert(chash_ring *ring, size_t k)
{
    const chash_node *node = &ring->nodes[k];
    size_t s = index_probe(ring, id_of(node), node->id_len, node->id_hash);
    ring->slot[s] = (uint32_t)(k + 1);
}

/* Refills the index (size slots, already allocated) from the node table. */
static void index_rebuild(chash_ring *ring, size_t size)
{
    ring->slot_mask = size - 1;
    memset(ring->slot, 0, size * sizeof *ring->slot);
    for (size_t k = 0; k < ring->nnodes; k++)
        index_insert(ring, k);
}

/* Room in the index for count more nodes: *fresh receives a new table when
 * the current one would be over half full (NULL otherwise); 0 or
 * CHASH_ENOMEM, and the ring is untouched either way. */
static int reserve_index(const chash_ring *ring, size_t count, uint32_t **fresh)
{
    size_t size = index_size_for(ring->nnodes + count);
    *fresh = NULL;
    if (size <= ring->slot_mask + 1)
        return CHASH_OK;
    *fresh = CHASH_MALLOC(size * sizeof **fresh);
    return *fresh ? CHASH_OK : CHASH_ENOMEM;
}

/* Enters nodes [first, nnodes), into fresh (from reserve_index) if given. */
static void index_commit(chash_ring *ring, uint32_t *fresh, size_t first)
{
    if (fresh) {
        CHASH_FREE(ring->slot);
        ring->slot = fresh;
        ring->slot_cap = index_size_for(ring->nnodes);
        index_rebuild(ring, ring->slot_cap);
        return;
    }
    for (size_t k = first; k < ring->nnodes; k++)
        index_insert(ring, k);
}

/* Takes node k out of the index (before the node table closes the gap)
 * and renumbers the nodes after it, k + 1 .. n - 1, one lower.  Backward
 * shift: every entry after the hole in the probe run moves into it when
 * its home slot does not lie between the hole and itself, so no probe run
 * is ever broken and no tombstone is needed. */
static void index_remove(chash_ring *ring, size_t k)
{
    const chash_node *node = &ring->nodes[k];
    size_t mask = ring->slot_mask;
    size_t hole = index_probe(ring, id_of(node), node->id_len, node->id_hash);
    for (size_t j = (hole + 1) & mask; ring->slot[j] != 0; j = (j + 1) & mask) {
        size_t home = (size_t)ring->nodes[ring->slot[j] - 1].id_hash & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            ring->slot[hole] = ring->slot[j];
            hole = j;
        }
    }
    ring->slot[hole] = 0;
    uint32_t limit = (uint32_t)(k + 1);
    for (size_t s = 0; s <= mask; s++)
        ring->slot[s] -= ring->slot[s] > limit;
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
    ring->slot_cap = index_size_for(0);
    ring->slot = CHASH_MALLOC(ring->slot_cap * sizeof *ring->slot);
    if (!ring->slot) {
        CHASH_FREE(ring->bucket);
        CHASH_FREE(ring);
        return NULL;
    }
    index_rebuild(ring, ring->slot_cap);
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
    uint32_t e = ring->slot[index_probe(ring, id, id_len, id_hash_of(id, id_len))];
    if (e == 0)
        return CHASH_ENOENT;
    if (index)
        *index = e - 1;
    return CHASH_OK;
}

/* 1 when a node with this id is in the ring. */
static int has_node(const chash_ring *ring, const char *id, size_t id_len)
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
static int owner_before(const chash_ring *ring, size_t a, size_t b)
{
    if (ring->ties == CHASH_TIES_BY_ORDER)
        return a < b;
    const chash_node *na = &ring->nodes[a], *nb = &ring->nodes[b];
    return compare_ids(id_of(na), na->id_len, id_of(nb), nb->id_len) < 0;
}

/* Room for the index of a ring of n points; 0 or CHASH_ENOMEM. */
static int reserve_buckets(const chash_ring *ring, size_t n, uint32_t **fresh)
{
    size_t need = ((size_t)1 << bucket_bits_for(n)) + 1;
    *fresh = NULL;
    if (need <= ring->bucket_cap)
        return CHASH_OK;
    *fresh = CHASH_MALLOC(need * sizeof **fresh);
    return *fresh ? CHASH_OK : CHASH_ENOMEM;
}

/* Room for total points; on failure the ring is untouched. */
static int reserve_points(chash_ring *ring, size_t total)
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

/* Installs the index for the current points: shifted in place when its size
 * stays, else rebuilt (into fresh when the caller had to allocate one). */
static void update_buckets(chash_ring *ring, uint32_t *fresh, const chash_pair *add, size_t n)
{
    unsigned bits = bucket_bits_for(ring->npoints);
    if (fresh) {
        CHASH_FREE(ring->bucket);
        ring->bucket = fresh;
        ring->bucket_cap = ((size_t)1 << bits) + 1;
    }
    if (bits == ring->bucket_bits && add && !fresh) {
        shift_buckets_up(ring->bucket, bits, add, n);
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
static void merge_sorted(chash_ring *ring, const chash_pair *add, size_t n)
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
                             || (pt[i - 1].value == x.value && owner_before(ring, x.owner, pt[i - 1].owner)))) {
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
        while (lo < i && pt[lo].value == v && owner_before(ring, pt[lo].owner, o))
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
    merge_sorted(ring, add, n);
    update_buckets(ring, fresh, add, n);
}

/* Everything merge_points needs for n more points; 0 or CHASH_ENOMEM. */
static int reserve_merge(chash_ring *ring, size_t n, uint32_t **fresh)
{
    int status = reserve_points(ring, ring->npoints + n);
    if (status == CHASH_OK)
        status = reserve_buckets(ring, ring->npoints + n, fresh);
    return status;
}

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

/* The points of node k as ring points sorted by value (CHASH_FREE them),
 * or NULL when out of memory. */
static chash_pair *sorted_pairs(const uint32_t *points, size_t n, size_t k)
{
    chash_pair *pairs = CHASH_MALLOC(n * sizeof *pairs);
    if (!pairs)
        return NULL;
    for (size_t i = 0; i < n; i++)
        pairs[i] = (chash_pair){points[i], (uint32_t)k};
    flag_sort(pairs, n, 56);
    return pairs;
}

static int check_growth(const chash_ring *ring, size_t already, size_t n)
{
    if (n == 0 || n > CHASH_MAX_NODE_POINTS || already > CHASH_MAX_NODE_POINTS - n)
        return CHASH_EINVAL;
    if (ring->npoints + n > CHASH_MAX_POINTS)
        return CHASH_ERANGE;
    return CHASH_OK;
}

/* Room for count more nodes; harmless on failure (same nodes, more room). */
static int reserve_nodes(chash_ring *ring, size_t count)
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
static char *copy_id(const char *id, size_t id_len)
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
    int status = check_growth(ring, 0, npoints);
    if (status != CHASH_OK)
        return status;
    uint64_t h = id_hash_of(id, id_len);
    if (ring->slot[index_probe(ring, id, id_len, h)] != 0)
        return CHASH_EEXIST;
    if (ring->nnodes >= CHASH_MAX_NODES)
        return CHASH_ERANGE;

    /* Growing the node table first is harmless: a bigger table holding the
     * same nodes is the same ring. */
    if (reserve_nodes(ring, 1) != CHASH_OK)
        return CHASH_ENOMEM;
    char *copy = id_len > INLINE_ID ? copy_id(id, id_len) : NULL;
    chash_pair *sorted = sorted_pairs(points, npoints, ring->nnodes);
    uint32_t *fresh = NULL, *fresh_index = NULL;
    if ((id_len > INLINE_ID && !copy) || !sorted || reserve_merge(ring, npoints, &fresh) != CHASH_OK
        || reserve_index(ring, 1, &fresh_index) != CHASH_OK) {
        CHASH_FREE(copy);
        CHASH_FREE(sorted);
        CHASH_FREE(fresh);
        return CHASH_ENOMEM;
    }
    size_t k = ring->nnodes;
    ring->nodes[k] = make_node(id, id_len, copy, data, npoints, h);
    ring->nnodes++;
    index_commit(ring, fresh_index, k);
    merge_points(ring, sorted, npoints, fresh);
    CHASH_FREE(sorted);
    return CHASH_OK;
}

static int compare_spec_ids(const void *pa, const void *pb)
{
    const chash_node_spec *a = *(const chash_node_spec *const *)pa;
    const chash_node_spec *b = *(const chash_node_spec *const *)pb;
    return compare_ids(a->id, a->id_len, b->id, b->id_len);
}

int chash_ring_add_many(chash_ring *ring, const chash_node_spec *nodes, size_t count)
{
    size_t total = 0;
    for (size_t s = 0; s < count; s++) {
        int status = check_growth(ring, 0, nodes[s].npoints);
        if (status != CHASH_OK)
            return status;
        if (!nodes[s].id && nodes[s].id_len)
            return CHASH_EINVAL;
        if (has_node(ring, nodes[s].id, nodes[s].id_len))
            return CHASH_EEXIST;
        total += nodes[s].npoints;
        if (total > CHASH_MAX_POINTS)
            return CHASH_ERANGE;
    }
    if (count == 0)
        return CHASH_OK;
    if (ring->npoints + total > CHASH_MAX_POINTS)
        return CHASH_ERANGE;
    if (ring->nnodes + count > CHASH_MAX_NODES)
        return CHASH_ERANGE;

    /* The new nodes in id order: the points are laid out in it below, and
     * an id given twice shows as two neighbours. */
    const chash_node_spec **order = CHASH_MALLOC(count * sizeof *order);
    if (!order)
        return CHASH_ENOMEM;
    for (size_t s = 0; s < count; s++)
        order[s] = &nodes[s];
    qsort(order, count, sizeof *order, compare_spec_ids);
    for (size_t r = 1; r < count; r++) {
        if (compare_spec_ids(&order[r - 1], &order[r]) == 0) {
            CHASH_FREE(order);
            return CHASH_EEXIST;
        }
    }
    /* Ties by insertion order: the points are laid out in the given order
     * instead, so equal values end up with the node given first. */
    if (ring->ties == CHASH_TIES_BY_ORDER)
        for (size_t r = 0; r < count; r++)
            order[r] = &nodes[r];

    /* Every allocation first; nothing below them can fail. */
    /* On an empty ring the points are sorted in the ring's own array; else
     * in a buffer of their own, then merged in. */
    int direct = ring->npoints == 0;
    char **ids = NULL;
    chash_pair *buf = NULL;
    uint32_t *fresh = NULL, *fresh_index = NULL;
    int status = reserve_nodes(ring, count);
    if (status == CHASH_OK) {
        ids = CHASH_MALLOC(count * sizeof *ids);
        buf = direct ? NULL : CHASH_MALLOC(total * sizeof *buf);
        status = ids && (buf || direct) ? reserve_merge(ring, total, &fresh) : CHASH_ENOMEM;
    }
    if (status == CHASH_OK)
        status = reserve_index(ring, count, &fresh_index);
    size_t copied = 0;
    while (status == CHASH_OK && copied < count) {
        size_t len = nodes[copied].id_len;
        ids[copied] = len > INLINE_ID ? copy_id(nodes[copied].id, len) : NULL;
        if (len > INLINE_ID && !ids[copied])
            status = CHASH_ENOMEM;
        else
            copied++;
    }
    if (status != CHASH_OK) {
        for (size_t s = 0; s < copied; s++)
            CHASH_FREE(ids[s]);
        CHASH_FREE(fresh);
        CHASH_FREE(fresh_index);
        CHASH_FREE(ids);
        CHASH_FREE(order);
        CHASH_FREE(buf);
        return CHASH_ENOMEM;
    }
    size_t base = ring->nnodes;
    for (size_t s = 0; s < count; s++)
        ring->nodes[base + s] = make_node(nodes[s].id, nodes[s].id_len, ids[s], nodes[s].data,
                                          nodes[s].npoints, id_hash_of(nodes[s].id, nodes[s].id_len));
    ring->nnodes += count;
    CHASH_FREE(ids);
    index_commit(ring, fresh_index, base);
    /* Points sorted by (value, rank of their owner's id, or of its place
     * for CHASH_TIES_BY_ORDER), so equal values end up in the order the
     * ring wants; then the ranks become node indices. */
    chash_pair *add = direct ? ring->pt : buf;
    size_t at = 0;
    for (size_t r = 0; r < count; r++)
        for (size_t p = 0; p < order[r]->npoints; p++)
            add[at++] = (chash_pair){order[r]->points[p], (uint32_t)r};
    flag_sort(add, total, 56);
    for (size_t i = 0; i < total; i++)
        add[i].owner = (uint32_t)(base + (size_t)(order[add[i].owner] - nodes));
    CHASH_FREE(order);
    if (direct)
        ring->npoints = total;
    else
        merge_sorted(ring, add, total);
    update_buckets(ring, fresh, NULL, 0); /* many points at once: rebuilt */
    CHASH_FREE(buf);
    return CHASH_OK;
}

int chash_ring_grow(chash_ring *ring, const char *id, size_t id_len,
                    const uint32_t *points, size_t npoints)
{
    size_t k;
    if (chash_ring_find(ring, id, id_len, &k) != CHASH_OK)
        return CHASH_ENOENT;
    chash_node *node = &ring->nodes[k];
    int status = check_growth(ring, node->npoints, npoints);
    if (status != CHASH_OK)
        return status;
    chash_pair *sorted = sorted_pairs(points, npoints, k);
    uint32_t *fresh = NULL;
    if (!sorted || reserve_merge(ring, npoints, &fresh) != CHASH_OK) {
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
static void release_slack(chash_ring *ring)
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
    size_t slots = index_size_for(ring->nnodes);
    if (ring->slot_mask + 1 > 4 * slots) {
        index_rebuild(ring, slots);
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
    chash_pair *drop = sorted_pairs(points, npoints, k);
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
    update_buckets(ring, NULL, NULL, 0);
    release_slack(ring);
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
        update_buckets(ring, NULL, NULL, 0);
    index_remove(ring, k);
    if (data_out)
        *data_out = ring->nodes[k].data;
    free_node_id(&ring->nodes[k]);
    memmove(&ring->nodes[k], &ring->nodes[k + 1], (ring->nnodes - k - 1) * sizeof *ring->nodes);
    ring->nnodes--;
    release_slack(ring);
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
        owners[i] = ring->pt[chash_ring_successor(ring, hashes[i])].owner;
    }
}

int chash_ring_lookup(const chash_ring *ring, uint32_t hash, void **data)
{
    if (ring->npoints == 0)
        return CHASH_ENOENT;
    *data = ring->nodes[ring->pt[chash_ring_successor(ring, hash)].owner].data;
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
    size_t i = chash_ring_successor(ring, hash);
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

void chash_ring_ownership(const chash_ring *ring, double *share)
{
    for (size_t k = 0; k < ring->nnodes; k++)
        share[k] = 0.0;
    size_t n = ring->npoints;
    for (size_t i = 0; i < n; i++) {
        /* Arc (previous point, this point]; the first point's arc wraps. */
        uint64_t prev = i ? ring->pt[i - 1].value : (uint64_t)ring->pt[n - 1].value;
        uint64_t arc = i ? ring->pt[i].value - prev : ring->pt[0].value + ((uint64_t)1 << 32) - prev;
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
    if (ring->slot_mask + 1 < index_size_for(ring->nnodes) || ring->slot_mask + 1 > ring->slot_cap
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
            || node->id_hash != id_hash_of(id, node->id_len))
            status = CHASH_ECORRUPT;
        /* Found by the index at its own position: with the slot count
         * below, this also proves the ids distinct (a second node with an
         * equal id would be found at the first one's position). */
        else if (ring->slot[index_probe(ring, id, node->id_len, node->id_hash)] != k + 1)
            status = CHASH_ECORRUPT;
    }
    if (declared != ring->npoints || ring->nnodes > ring->node_cap || ring->npoints > ring->point_cap
        || (ring->ties != CHASH_TIES_BY_ID && ring->ties != CHASH_TIES_BY_ORDER))
        status = CHASH_ECORRUPT;
    for (size_t i = 0; i < ring->npoints && status == CHASH_OK; i++) {
        if (ring->pt[i].owner >= ring->nnodes) {
            status = CHASH_ECORRUPT;
            break;
        }
        counted[ring->pt[i].owner]++;
        if (i && (ring->pt[i - 1].value > ring->pt[i].value
                  || (ring->pt[i - 1].value == ring->pt[i].value
                      && owner_before(ring, ring->pt[i].owner, ring->pt[i - 1].owner))))
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
