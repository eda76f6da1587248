/*
 * ketama.c - membership changes of the layouts whose point counts depend
 * on every node's weight (ketama, weighted libmemcached).  Part of
 * chash._chash (router.h).
 */
#include "router.h"

/* libmemcached's points a server in its weighted ketama mode. */
#define LIBMEMCACHED_WEIGHTED_POINTS 160

/* One node of the ring a ketama update builds. */
typedef struct {
    NodeEntry *entry;     /* a new entry for a node not in the ring yet */
    long old;             /* its index in the current ring, or -1 */
    double weight;
    uint32_t *fresh;      /* points computed for it (PyMem), or NULL */
} KetamaSlot;

static void free_ketama_slots(KetamaSlot *slots, size_t n, int free_new_entries)
{
    for (size_t i = 0; i < n; i++) {
        PyMem_Free(slots[i].fresh);
        if (free_new_entries && slots[i].old < 0 && slots[i].entry)
            free_entry(slots[i].entry);
    }
    PyMem_Free(slots);
}

/*
 * Applies an update whose point scheme stays: the new nodes enter in one
 * chash_ring_add_many, the present nodes whose count changed gain or lose
 * only the points between their old and new count (a node's points for
 * count c are the first c of its sequence) in one chash_ring_change_points,
 * and the dropped node (an index, or -1) goes last.  Each engine call is
 * all-or-nothing and a failed recount is undone by removing the nodes just
 * added (a removal cannot fail), so on error (-1, exception set) the
 * router is as it was.  No Python code runs in between (these layouts
 * take no Python hash).
 */
static int ketama_apply(RouterObject *self, const KetamaSlot *slots, size_t n,
                        const size_t *counts, const chash_scheme *scheme, long drop)
{
    chash_ring *ring = self->ring;
    size_t nnew = 0, nchanged = 0, nmoved = 0;
    for (size_t i = 0; i < n; i++) {
        size_t have = slots[i].old >= 0 ? chash_ring_node(ring, (size_t)slots[i].old).npoints : 0;
        if (slots[i].old < 0)
            nnew++;
        else if (have != counts[i])
            nchanged++;
        nmoved += have > counts[i] ? have - counts[i] : counts[i] - have;
    }
    chash_node_spec *specs = PyMem_New(chash_node_spec, nnew + 1);
    chash_point_change *changes = PyMem_New(chash_point_change, nchanged + 1);
    uint32_t *points = PyMem_New(uint32_t, nmoved + 1);
    int status = specs && changes && points ? CHASH_OK : CHASH_ENOMEM;
    size_t s = 0, c = 0, at = 0;
    for (size_t i = 0; i < n && status == CHASH_OK; i++) {
        size_t have = slots[i].old >= 0 ? chash_ring_node(ring, (size_t)slots[i].old).npoints : 0;
        if (have == counts[i])
            continue;
        /* Ids from the entries' str: the engine's own copies may move when
         * the node table grows. */
        const char *id;
        Py_ssize_t id_len;
        if (node_id(slots[i].entry->name, &id, &id_len) < 0) {
            PyMem_Free(specs);
            PyMem_Free(changes);
            PyMem_Free(points);
            return -1;
        }
        size_t lo = have < counts[i] ? have : counts[i], len = (have < counts[i] ? counts[i] : have) - lo;
        status = chash_scheme_points(scheme, id, (size_t)id_len, lo, len, points + at);
        if (slots[i].old < 0)
            specs[s++] = (chash_node_spec){id, (size_t)id_len, slots[i].entry, points + at, len};
        else if (have < counts[i])
            changes[c++] = (chash_point_change){id, (size_t)id_len, points + at, len, NULL, 0};
        else
            changes[c++] = (chash_point_change){id, (size_t)id_len, NULL, 0, points + at, len};
        at += len;
    }
    if (status == CHASH_OK && s)
        status = chash_ring_add_many(ring, specs, s);
    if (status == CHASH_OK && c) {
        status = chash_ring_change_points(ring, changes, c);
        for (size_t i = 0; status != CHASH_OK && i < s; i++)
            (void)chash_ring_remove(ring, specs[i].id, specs[i].id_len, NULL);
    }
    PyMem_Free(specs);
    PyMem_Free(changes);
    PyMem_Free(points);
    if (status != CHASH_OK) {
        set_status_error(status, NULL);
        return -1;
    }
    if (drop >= 0) {
        NodeEntry *dropped = entry_at(self, (size_t)drop);
        chash_node_view view = chash_ring_node(ring, (size_t)drop);
        (void)chash_ring_remove(ring, view.id, view.id_len, NULL); /* present: cannot fail */
        free_entry(dropped);
    }
    for (size_t i = 0; i < n; i++)
        slots[i].entry->weight = slots[i].weight;
    return 0;
}

/*
 * The ketama layout: every node's point count depends on every weight
 * (chash_ketama_counts), so a change of membership rebuilds the ring, as
 * twemproxy and libmemcached rebuild their continuum.  The libmemcached
 * layout too: while every weight is 1 each node owns virtual_node_count
 * points "{id}-{i}" hashed with the key hash; once a weight is above 1,
 * libmemcached switches to libketama's weighted ring (MD5 points, 160 a
 * node of average weight, counts by share of the total) and keeps its key
 * hash, and so does this.  The new ring holds
 * the current nodes in their order, less `drop` (an index, or -1), with
 * the nodes add[0..nadd) given weights[i]: a present node keeps its place
 * and takes the new weight, a new one goes last (add holds no duplicates).
 * A node whose count stays keeps its points as they are; the others are
 * computed afresh.  The ring is built aside and swapped in: on error
 * (-1, exception set) the router is unchanged.
 */
int ketama_update(RouterObject *self, PyObject *const *add, const double *weights,
                         Py_ssize_t nadd, long drop)
{
    chash_ring *ring = self->ring;
    size_t old_n = chash_ring_node_count(ring);
    size_t cap = old_n + (size_t)nadd;
    KetamaSlot *slots = PyMem_New(KetamaSlot, cap ? cap : 1);
    uint64_t *w = PyMem_New(uint64_t, cap ? cap : 1);
    size_t *counts = PyMem_New(size_t, cap ? cap : 1);
    size_t *start = PyMem_New(size_t, old_n + 1);
    uint32_t *old_points = PyMem_New(uint32_t, chash_ring_point_count(ring) + 1);
    chash_node_spec *specs = PyMem_New(chash_node_spec, cap ? cap : 1);
    chash_ring *fresh_ring = NULL;
    size_t n = 0;
    int result = -1;
    if (!slots || !w || !counts || !start || !old_points || !specs) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < old_n; k++)
        if ((long)k != drop)
            slots[n++] = (KetamaSlot){entry_at(self, k), (long)k, entry_at(self, k)->weight, NULL};
    for (Py_ssize_t i = 0; i < nadd; i++) {
        const char *id;
        Py_ssize_t id_len;
        if (node_id(add[i], &id, &id_len) < 0 || check_integer_weight(self, weights[i]) < 0)
            goto done;
        size_t found;
        long k = chash_ring_find(ring, id, (size_t)id_len, &found) == CHASH_OK ? (long)found : -1;
        /* The present nodes fill slots in ring order less drop. */
        size_t at = k < 0 || k == drop ? n : (size_t)(drop >= 0 && k > drop ? k - 1 : k);
        if (at < n) {
            slots[at].weight = weights[i];
            continue;
        }
        NodeEntry *entry = new_entry(add[i], weights[i]);
        if (!entry)
            goto done;
        slots[n++] = (KetamaSlot){entry, -1, weights[i], NULL};
    }
    int weighted = self->scheme.layout == CHASH_LAYOUT_KETAMA, was_weighted = weighted;
    for (size_t k = 0; k < old_n && !was_weighted; k++)
        was_weighted = entry_at(self, k)->weight > 1.0;
    for (size_t i = 0; i < n; i++) {
        w[i] = (uint64_t)slots[i].weight;
        weighted |= w[i] > 1;
    }
    chash_scheme point_scheme = self->scheme;
    size_t base = self->base_points;
    if (weighted && self->scheme.layout == CHASH_LAYOUT_LIBMEMCACHED) {
        (void)chash_scheme_init(&point_scheme, CHASH_LAYOUT_KETAMA, CHASH_HASH_MD5);
        base = LIBMEMCACHED_WEIGHTED_POINTS;
    }
    if (!weighted) {
        for (size_t i = 0; i < n; i++)
            counts[i] = base;
    } else if (chash_ketama_counts(base, w, n, counts) != CHASH_OK) {
        PyErr_SetString(PyExc_ValueError, "the ketama layout's total weight is too large");
        goto done;
    }
    unsigned long long total = 0;
    for (size_t i = 0; i < n; i++)
        total += (unsigned long long)w[i];
    for (size_t i = 0; i < n; i++) {
        if (counts[i] == 0 || counts[i] > CHASH_MAX_NODE_POINTS) {
            PyErr_Format(PyExc_ValueError,
                         "in the %s layout node %R would own %zu points (weight %llu of a "
                         "total %llu over %zu nodes); a node owns from 1 to %zu",
                         chash_layout_name(self->scheme.layout), slots[i].entry->name,
                         counts[i], (unsigned long long)w[i], total, n,
                         (size_t)CHASH_MAX_NODE_POINTS);
            goto done;
        }
    }
    /* The same point scheme as before (always but when libmemcached turns
     * weighted or back): the ring changes in place by the points that move
     * (ketama_apply) instead of being rebuilt. */
    if (weighted == was_weighted) {
        result = ketama_apply(self, slots, n, counts, &point_scheme, drop);
        goto done;
    }
    /* The current points of every node, grouped by owner in one pass. */
    start[0] = 0;
    for (size_t k = 0; k < old_n; k++)
        start[k + 1] = start[k] + chash_ring_node(ring, k).npoints;
    for (size_t i = 0, np = chash_ring_point_count(ring); i < np; i++)
        old_points[start[chash_ring_point_owner(ring, i)]++] = chash_ring_point(ring, i);
    for (size_t k = old_n; k > 0; k--) /* back to the start of each group */
        start[k] = start[k - 1];
    start[0] = 0;
    for (size_t i = 0; i < n; i++) {
        KetamaSlot *slot = &slots[i];
        chash_node_view view = slot->old >= 0 ? chash_ring_node(ring, (size_t)slot->old)
                                               : (chash_node_view){NULL, 0, NULL, 0};
        const char *id = view.id;
        Py_ssize_t id_len = (Py_ssize_t)view.id_len;
        if (slot->old < 0 && node_id(slot->entry->name, &id, &id_len) < 0)
            goto done;
        const uint32_t *points;
        if (slot->old >= 0 && view.npoints == counts[i] && weighted == was_weighted) {
            points = old_points + start[slot->old];
        } else {
            slot->fresh = PyMem_New(uint32_t, counts[i]);
            int status = slot->fresh ? chash_scheme_points(&point_scheme, id, (size_t)id_len, 0,
                                                           counts[i], slot->fresh)
                                     : CHASH_ENOMEM;
            if (status != CHASH_OK) {
                set_status_error(status, NULL);
                goto done;
            }
            points = slot->fresh;
        }
        specs[i] = (chash_node_spec){id, (size_t)id_len, slot->entry, points, counts[i]};
    }
    fresh_ring = new_ring(self->scheme.layout);
    int status = fresh_ring ? chash_ring_add_many(fresh_ring, specs, n) : CHASH_ENOMEM;
    if (status != CHASH_OK) {
        chash_ring_free(fresh_ring);
        set_status_error(status, NULL);
        goto done;
    }
    /* Nothing can fail from here: swap, then settle the entries. */
    NodeEntry *dropped = drop >= 0 ? entry_at(self, (size_t)drop) : NULL;
    self->ring = fresh_ring;
    chash_ring_free(ring);
    for (size_t i = 0; i < n; i++)
        slots[i].entry->weight = slots[i].weight;
    if (dropped)
        free_entry(dropped);
    result = 0;
done:
    if (slots)
        free_ketama_slots(slots, n, result < 0);
    PyMem_Free(w);
    PyMem_Free(counts);
    PyMem_Free(start);
    PyMem_Free(old_points);
    PyMem_Free(specs);
    return result;
}

