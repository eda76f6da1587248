/*
 * _chash_ketama.c - membership changes of the layouts whose point counts
 * depend on every node's weight (ketama, weighted libmemcached).  Part of
 * chash._chash (_chash_router.h).
 */
#include "_chash_router.h"

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
        size_t at = n;
        for (size_t j = 0; k >= 0 && j < n; j++)
            if (slots[j].old == k)
                at = j;
        if (at < n) {
            slots[at].weight = weights[i];
            continue;
        }
        NodeEntry *entry = PyMem_Malloc(sizeof *entry);
        if (!entry) {
            PyErr_NoMemory();
            goto done;
        }
        entry->name = PyUnicode_CheckExact(add[i]) ? Py_NewRef(add[i]) : PyUnicode_FromObject(add[i]);
        if (!entry->name) {
            PyMem_Free(entry);
            goto done;
        }
        entry->weight = weights[i];
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
    /* When no present node's count changes (equal weights, mostly; plain
     * libmemcached always), the ring changes by the new or dropped node
     * only: one engine call, itself all-or-nothing, instead of a rebuild. */
    int counts_stay = weighted == was_weighted;
    size_t nnew = 0;
    for (size_t i = 0; i < n && counts_stay; i++) {
        if (slots[i].old < 0)
            nnew++;
        else
            counts_stay = chash_ring_node(ring, (size_t)slots[i].old).npoints == counts[i];
    }
    if (counts_stay) {
        int status = CHASH_OK;
        NodeEntry *dropped = drop >= 0 ? entry_at(self, (size_t)drop) : NULL;
        if (dropped)
            status = chash_ring_remove(ring, chash_ring_node(ring, (size_t)drop).id,
                                       chash_ring_node(ring, (size_t)drop).id_len, NULL);
        size_t k = 0;
        for (size_t i = 0; i < n && status == CHASH_OK; i++) {
            if (slots[i].old >= 0)
                continue;
            const char *id;
            Py_ssize_t id_len;
            if (node_id(slots[i].entry->name, &id, &id_len) < 0)
                goto done;
            slots[i].fresh = PyMem_New(uint32_t, counts[i]);
            status = slots[i].fresh ? chash_scheme_points(&point_scheme, id, (size_t)id_len, 0,
                                                          counts[i], slots[i].fresh)
                                    : CHASH_ENOMEM;
            specs[k++] = (chash_node_spec){id, (size_t)id_len, slots[i].entry, slots[i].fresh, counts[i]};
        }
        if (status == CHASH_OK && nnew)
            status = chash_ring_add_many(ring, specs, nnew);
        if (status != CHASH_OK) {
            set_status_error(status, NULL); /* a removal cannot fail: nothing changed */
            goto done;
        }
        for (size_t i = 0; i < n; i++)
            slots[i].entry->weight = slots[i].weight;
        if (dropped)
            free_entry(dropped);
        result = 0;
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

