/*
 * ring_bulk.c - the ring's bulk path: adding many nodes in one sort and
 * one merge, and recounting many nodes' points in one compacting pass and
 * one merge.  Every call is all-or-nothing: all memory is asked for before
 * the ring changes.  Representation in ring_repr.h; the sort is sort.c's.
 * Above the ring: it calls ring.c, ring_index.c and sort.c, and none of
 * them calls it.
 */
#include "ring_repr.h"

static int compare_spec_ids(const void *pa, const void *pb)
{
    const chash_node_spec *a = *(const chash_node_spec *const *)pa;
    const chash_node_spec *b = *(const chash_node_spec *const *)pb;
    return chash_priv_compare_ids(a->id, a->id_len, b->id, b->id_len);
}

/* Checks what chash_ring_add_many is given, before anything is asked of
 * the allocator: each node's point count and id, none already present, the
 * limits; sums their points into *total.  0 or the call's error status. */
static int check_new_nodes(const chash_ring *ring, const chash_node_spec *nodes, size_t count,
                           size_t *total)
{
    *total = 0;
    for (size_t s = 0; s < count; s++) {
        int status = chash_priv_check_growth(ring, 0, nodes[s].npoints);
        if (status != CHASH_OK)
            return status;
        if (!nodes[s].id && nodes[s].id_len)
            return CHASH_EINVAL;
        if (chash_priv_has_node(ring, nodes[s].id, nodes[s].id_len))
            return CHASH_EEXIST;
        *total += nodes[s].npoints;
        if (*total > CHASH_MAX_POINTS)
            return CHASH_ERANGE;
    }
    if (ring->npoints + *total > CHASH_MAX_POINTS || ring->nnodes + count > CHASH_MAX_NODES)
        return CHASH_ERANGE;
    return CHASH_OK;
}

/*
 * The order the new nodes' points are laid out in, into *order (CHASH_FREE
 * it): by id, so equal values end up with the smallest id; or, in a ring
 * with CHASH_TIES_BY_ORDER, as given, so they end up with the node given
 * first.  Sorting by id also shows an id given twice, as two neighbours:
 * CHASH_EEXIST.  0, CHASH_EEXIST or CHASH_ENOMEM (*order then NULL).
 */
static int order_new_nodes(const chash_ring *ring, const chash_node_spec *nodes, size_t count,
                           const chash_node_spec ***order)
{
    const chash_node_spec **o = CHASH_MALLOC(count * sizeof *o);
    *order = NULL;
    if (!o)
        return CHASH_ENOMEM;
    for (size_t s = 0; s < count; s++)
        o[s] = &nodes[s];
    qsort(o, count, sizeof *o, compare_spec_ids);
    for (size_t r = 1; r < count; r++) {
        if (compare_spec_ids(&o[r - 1], &o[r]) == 0) {
            CHASH_FREE(o);
            return CHASH_EEXIST;
        }
    }
    if (ring->ties == CHASH_TIES_BY_ORDER)
        for (size_t r = 0; r < count; r++)
            o[r] = &nodes[r];
    *order = o;
    return CHASH_OK;
}

/* What chash_ring_add_many asks for before the ring changes. */
typedef struct {
    char **ids;            /* heap copies of the ids too long to sit inline */
    chash_pair *buf;       /* the new points, unless sorted in the ring's own array */
    uint32_t *fresh;       /* a new bucket index, or NULL (the ring's fits) */
    uint32_t *fresh_index; /* a new id index, or NULL (the ring's fits) */
} add_many_room;

/*
 * Every allocation adding nodes[0..count) (total points) needs: room in
 * the node table, the points array and both indexes, the ids' copies and,
 * unless direct (an empty ring, whose own array takes the points), a
 * buffer for the new points.  0, or CHASH_ENOMEM with everything taken
 * here given back (room made in the ring's own arrays is only capacity:
 * the ring is unchanged).
 */
static int reserve_add_many(chash_ring *ring, const chash_node_spec *nodes, size_t count,
                            size_t total, int direct, add_many_room *room)
{
    *room = (add_many_room){NULL, NULL, NULL, NULL};
    int status = chash_priv_reserve_nodes(ring, count);
    if (status == CHASH_OK) {
        room->ids = CHASH_MALLOC(count * sizeof *room->ids);
        room->buf = direct ? NULL : CHASH_MALLOC(total * sizeof *room->buf);
        status = room->ids && (room->buf || direct) ? chash_priv_reserve_merge(ring, total, &room->fresh)
                                                    : CHASH_ENOMEM;
    }
    if (status == CHASH_OK)
        status = chash_priv_reserve_index(ring, count, &room->fresh_index);
    size_t copied = 0;
    while (status == CHASH_OK && copied < count) {
        size_t len = nodes[copied].id_len;
        room->ids[copied] = len > INLINE_ID ? chash_priv_copy_id(nodes[copied].id, len) : NULL;
        if (len > INLINE_ID && !room->ids[copied])
            status = CHASH_ENOMEM;
        else
            copied++;
    }
    if (status != CHASH_OK) {
        for (size_t s = 0; s < copied; s++)
            CHASH_FREE(room->ids[s]);
        CHASH_FREE(room->fresh);
        CHASH_FREE(room->fresh_index);
        CHASH_FREE(room->ids);
        CHASH_FREE(room->buf);
        *room = (add_many_room){NULL, NULL, NULL, NULL};
        return CHASH_ENOMEM;
    }
    return CHASH_OK;
}

int chash_ring_add_many(chash_ring *ring, const chash_node_spec *nodes, size_t count)
{
    size_t total;
    int status = check_new_nodes(ring, nodes, count, &total);
    if (status != CHASH_OK || count == 0)
        return status;
    const chash_node_spec **order;
    status = order_new_nodes(ring, nodes, count, &order);
    if (status != CHASH_OK)
        return status;
    /* Every allocation first; nothing below them can fail.  On an empty
     * ring the points are sorted in the ring's own array; else in a buffer
     * of their own, then merged in. */
    int direct = ring->npoints == 0;
    add_many_room room;
    if (reserve_add_many(ring, nodes, count, total, direct, &room) != CHASH_OK) {
        CHASH_FREE(order);
        return CHASH_ENOMEM;
    }
    size_t base = ring->nnodes;
    for (size_t s = 0; s < count; s++)
        ring->nodes[base + s] = make_node(nodes[s].id, nodes[s].id_len, room.ids[s], nodes[s].data,
                                          nodes[s].npoints, chash_priv_id_hash_of(nodes[s].id, nodes[s].id_len));
    ring->nnodes += count;
    CHASH_FREE(room.ids);
    chash_priv_index_commit(ring, room.fresh_index, base);
    /* Points sorted by (value, rank of their owner in order), so equal
     * values end up in the order the ring wants; then the ranks become
     * node indices. */
    chash_pair *add = direct ? ring->pt : room.buf;
    size_t at = 0;
    for (size_t r = 0; r < count; r++)
        for (size_t p = 0; p < order[r]->npoints; p++)
            add[at++] = (chash_pair){order[r]->points[p], (uint32_t)r};
    chash_priv_sort_pairs(add, total);
    for (size_t i = 0; i < total; i++)
        add[i].owner = (uint32_t)(base + (size_t)(order[add[i].owner] - nodes));
    CHASH_FREE(order);
    if (direct)
        ring->npoints = total;
    else
        chash_priv_merge_sorted(ring, add, total);
    /* Sorted by value: the index shifts by them when its size stays. */
    chash_priv_update_buckets(ring, room.fresh, direct ? NULL : add, total, NULL, 0);
    CHASH_FREE(room.buf);
    return CHASH_OK;
}

/* Set in a drop entry's owner once a ring point matched it (owners stay
 * below CHASH_MAX_NODES, far under this bit). */
#define DROP_MATCHED UINT32_C(0x80000000)

/*
 * Whether ring point p is one of drop[0..n) (sorted by value) not matched
 * yet; if so, marks that entry matched.  *from is where the entries of
 * p's value may start: ring values never decrease, so it only moves up.
 */
static int match_drop(chash_pair p, chash_pair *drop, size_t n, size_t *from)
{
    size_t j = *from;
    while (j < n && drop[j].value < p.value)
        j++;
    *from = j;
    for (; j < n && drop[j].value == p.value; j++) {
        if (drop[j].owner == p.owner) {
            drop[j].owner |= DROP_MATCHED;
            return 1;
        }
    }
    return 0;
}

/* How many points of the ring match an entry of drop[0..n), each entry
 * matched at most once; leaves every entry unmarked again. */
static size_t count_drops(const chash_ring *ring, chash_pair *drop, size_t n)
{
    size_t matched = 0, from = 0;
    for (size_t i = 0; i < ring->npoints && matched < n; i++)
        matched += (size_t)match_drop(ring->pt[i], drop, n, &from);
    for (size_t j = 0; j < n; j++)
        drop[j].owner &= ~DROP_MATCHED;
    return matched;
}

/* The nodes of changes[0..count) as indices into *idx (CHASH_FREE it),
 * each checked: present, named once, left with 1 .. CHASH_MAX_NODE_POINTS
 * points.  Sums their points into *nadd and *ndrop. */
static int check_changes(const chash_ring *ring, const chash_point_change *changes, size_t count,
                         size_t **idx, size_t *nadd, size_t *ndrop)
{
    unsigned char *seen = CHASH_MALLOC(ring->nnodes ? ring->nnodes : 1);
    *idx = CHASH_MALLOC(count * sizeof **idx);
    if (!seen || !*idx) {
        CHASH_FREE(seen);
        CHASH_FREE(*idx);
        *idx = NULL;
        return CHASH_ENOMEM;
    }
    memset(seen, 0, ring->nnodes ? ring->nnodes : 1);
    int status = CHASH_OK;
    *nadd = *ndrop = 0;
    for (size_t c = 0; c < count && status == CHASH_OK; c++) {
        const chash_point_change *ch = &changes[c];
        size_t k = 0;
        if ((!ch->id && ch->id_len) || (!ch->add && ch->nadd) || (!ch->drop && ch->ndrop))
            status = CHASH_EINVAL;
        else if (chash_ring_find(ring, ch->id, ch->id_len, &k) != CHASH_OK)
            status = CHASH_ENOENT;
        else if (seen[k])
            status = CHASH_EEXIST;
        else if (ch->ndrop > ring->nodes[k].npoints)
            status = CHASH_ENOENT; /* more than it owns: some are not its */
        else if (ch->nadd > CHASH_MAX_NODE_POINTS
                 || ring->nodes[k].npoints - ch->ndrop + ch->nadd == 0
                 || ring->nodes[k].npoints - ch->ndrop + ch->nadd > CHASH_MAX_NODE_POINTS)
            status = CHASH_EINVAL;
        seen[k] = 1;
        (*idx)[c] = k;
        *nadd += ch->nadd;
        *ndrop += ch->ndrop;
        if (status == CHASH_OK && *nadd > CHASH_MAX_POINTS)
            status = CHASH_ERANGE;
    }
    if (status == CHASH_OK && ring->npoints - *ndrop + *nadd > CHASH_MAX_POINTS)
        status = CHASH_ERANGE;
    CHASH_FREE(seen);
    if (status != CHASH_OK) {
        CHASH_FREE(*idx);
        *idx = NULL;
    }
    return status;
}

int chash_ring_change_points(chash_ring *ring, const chash_point_change *changes, size_t count)
{
    if (count == 0)
        return CHASH_OK;
    size_t *idx, nadd, ndrop;
    int status = check_changes(ring, changes, count, &idx, &nadd, &ndrop);
    if (status != CHASH_OK)
        return status;
    chash_pair *add = CHASH_MALLOC((nadd ? nadd : 1) * sizeof *add);
    chash_pair *drop = CHASH_MALLOC((ndrop ? ndrop : 1) * sizeof *drop);
    if (!add || !drop) {
        status = CHASH_ENOMEM;
        goto done;
    }
    size_t na = 0, nd = 0;
    for (size_t c = 0; c < count; c++) {
        for (size_t p = 0; p < changes[c].nadd; p++)
            add[na++] = (chash_pair){changes[c].add[p], (uint32_t)idx[c]};
        for (size_t p = 0; p < changes[c].ndrop; p++)
            drop[nd++] = (chash_pair){changes[c].drop[p], (uint32_t)idx[c]};
    }
    chash_priv_sort_pairs(drop, ndrop);
    if (count_drops(ring, drop, ndrop) != ndrop) {
        status = CHASH_ENOENT;
        goto done;
    }
    /* Every allocation before the ring changes; nothing below can fail. */
    uint32_t *fresh = NULL;
    size_t total = ring->npoints - ndrop + nadd;
    status = chash_priv_reserve_points(ring, total > ring->npoints ? total : ring->npoints);
    if (status == CHASH_OK)
        status = chash_priv_reserve_buckets(ring, total, &fresh);
    if (status != CHASH_OK)
        goto done;
    /* The added points by (value, owner), then equal values put in the
     * ring's tie order (a no-op for ties by insertion order). */
    chash_priv_sort_pairs(add, nadd);
    for (size_t i = 1; i < nadd; i++) {
        chash_pair x = add[i];
        size_t j = i;
        for (; j > 0 && add[j - 1].value == x.value && chash_priv_owner_before(ring, x.owner, add[j - 1].owner); j--)
            add[j] = add[j - 1];
        add[j] = x;
    }
    size_t out = 0, from = 0;
    for (size_t i = 0; i < ring->npoints; i++) {
        chash_pair p = ring->pt[i];
        if (!match_drop(p, drop, ndrop, &from))
            ring->pt[out++] = p;
    }
    ring->npoints = out;
    chash_priv_merge_sorted(ring, add, nadd);
    for (size_t c = 0; c < count; c++)
        ring->nodes[idx[c]].npoints += changes[c].nadd - changes[c].ndrop;
    chash_priv_update_buckets(ring, fresh, nadd ? add : NULL, nadd, ndrop ? drop : NULL, ndrop);
    chash_priv_release_slack(ring);
done:
    CHASH_FREE(idx);
    CHASH_FREE(add);
    CHASH_FREE(drop);
    return status;
}
