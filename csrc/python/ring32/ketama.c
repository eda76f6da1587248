/*
 * ketama.c - membership changes of the layouts whose point counts depend
 * on every node's weight (ketama, weighted libmemcached) (ring32.h).
 */
#include "ring32.h"

/* libmemcached's points a server in its weighted ketama mode. */
#define LIBMEMCACHED_WEIGHTED_POINTS 160

/* One node of the ring a ketama update builds. */
typedef struct {
    NodeEntry *entry;     /* its entry: the ring's own, or a new one for a
                             node not in the ring yet (old < 0) */
    long old;             /* its index in the current ring, or -1 */
    double weight;        /* its weight in the new ring */
    uint32_t *fresh;      /* points computed for it (PyMem), or NULL */
} KetamaSlot;

/* How the new ring's points are computed (ketama_counts). */
typedef struct {
    chash_scheme scheme;  /* the scheme of the points */
    int weighted;         /* the new ring is libketama's weighted ring */
    int was_weighted;     /* the current ring is */
} KetamaPlan;

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
    chash_ring *ring = self->r32.ring;
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
 * Fills slots (room for the ring's nodes and nadd more) with the nodes of
 * the new ring: the current ones in their order, less drop (an index, or
 * -1), then the nodes of add[0..nadd) that are not in the ring, in the
 * order given, each with a new entry; a present node of add keeps its
 * place and takes weights[i].  *n is the count of slots filled, kept true
 * on error too so the caller frees the new entries.  0, or -1 with an
 * exception set (an id that is not a str, a weight the layout refuses).
 */
static int ketama_slots(RouterObject *self, PyObject *const *add, const double *weights,
                        Py_ssize_t nadd, long drop, KetamaSlot *slots, size_t *n)
{
    chash_ring *ring = self->r32.ring;
    size_t old_n = chash_ring_node_count(ring);
    *n = 0;
    for (size_t k = 0; k < old_n; k++)
        if ((long)k != drop)
            slots[(*n)++] = (KetamaSlot){entry_at(self, k), (long)k, entry_at(self, k)->weight, NULL};
    for (Py_ssize_t i = 0; i < nadd; i++) {
        const char *id;
        Py_ssize_t id_len;
        if (node_id(add[i], &id, &id_len) < 0 || check_integer_weight(self, weights[i]) < 0)
            return -1;
        size_t found;
        long k = chash_ring_find(ring, id, (size_t)id_len, &found) == CHASH_OK ? (long)found : -1;
        /* The present nodes fill slots in ring order less drop. */
        size_t at = k < 0 || k == drop ? *n : (size_t)(drop >= 0 && k > drop ? k - 1 : k);
        if (at < *n) {
            slots[at].weight = weights[i];
            continue;
        }
        NodeEntry *entry = new_entry(add[i], weights[i]);
        if (!entry)
            return -1;
        slots[(*n)++] = (KetamaSlot){entry, -1, weights[i], NULL};
    }
    return 0;
}

/*
 * The point count of every slot into counts[0..n), and the plan: which
 * scheme the points follow and whether the ring is (and was) libketama's
 * weighted one.  ketama always is; libmemcached is once a weight is above
 * 1, with MD5 points, 160 a node of average weight.  0, or -1 with a
 * ValueError (a total weight too large, a node left with no point or more
 * than CHASH_MAX_NODE_POINTS) or MemoryError.
 */
static int ketama_counts(RouterObject *self, const KetamaSlot *slots, size_t n, size_t *counts,
                         KetamaPlan *plan)
{
    uint64_t *w = PyMem_New(uint64_t, n ? n : 1);
    if (!w) {
        PyErr_NoMemory();
        return -1;
    }
    size_t old_n = chash_ring_node_count(self->r32.ring);
    plan->weighted = self->r32.scheme.layout == CHASH_LAYOUT_KETAMA;
    plan->was_weighted = plan->weighted;
    for (size_t k = 0; k < old_n && !plan->was_weighted; k++)
        plan->was_weighted = entry_at(self, k)->weight > 1.0;
    for (size_t i = 0; i < n; i++) {
        w[i] = (uint64_t)slots[i].weight;
        plan->weighted |= w[i] > 1;
    }
    plan->scheme = self->r32.scheme;
    size_t base = self->r32.base_points;
    if (plan->weighted && self->r32.scheme.layout == CHASH_LAYOUT_LIBMEMCACHED) {
        (void)chash_scheme_init(&plan->scheme, CHASH_LAYOUT_KETAMA, CHASH_HASH_MD5);
        base = LIBMEMCACHED_WEIGHTED_POINTS;
    }
    int result = 0;
    if (!plan->weighted) {
        for (size_t i = 0; i < n; i++)
            counts[i] = base;
    } else if (chash_ketama_counts(base, w, n, counts) != CHASH_OK) {
        PyErr_SetString(PyExc_ValueError, "the ketama layout's total weight is too large");
        result = -1;
    }
    unsigned long long total = 0;
    for (size_t i = 0; i < n; i++)
        total += (unsigned long long)w[i];
    for (size_t i = 0; result == 0 && i < n; i++) {
        if (counts[i] == 0 || counts[i] > CHASH_MAX_NODE_POINTS) {
            PyErr_Format(PyExc_ValueError,
                         "in the %s layout node %R would own %zu points (weight %llu of a "
                         "total %llu over %zu nodes); a node owns from 1 to %zu",
                         chash_layout_name(self->r32.scheme.layout), slots[i].entry->name,
                         counts[i], (unsigned long long)w[i], total, n,
                         (size_t)CHASH_MAX_NODE_POINTS);
            result = -1;
        }
    }
    PyMem_Free(w);
    return result;
}

/*
 * Builds the new ring aside, every node's points computed afresh with the
 * plan's scheme (libmemcached turning weighted or back: no point stays),
 * and swaps it in.  On error (-1, exception set) the router is unchanged;
 * the slots' fresh points are the caller's to free either way.
 */
static int ketama_rebuild(RouterObject *self, KetamaSlot *slots, size_t n, const size_t *counts,
                          const chash_scheme *scheme, long drop)
{
    chash_ring *ring = self->r32.ring;
    chash_node_spec *specs = PyMem_New(chash_node_spec, n ? n : 1);
    if (!specs) {
        PyErr_NoMemory();
        return -1;
    }
    int status = CHASH_OK;
    for (size_t i = 0; i < n && status == CHASH_OK; i++) {
        KetamaSlot *slot = &slots[i];
        chash_node_view view = slot->old >= 0 ? chash_ring_node(ring, (size_t)slot->old)
                                               : (chash_node_view){NULL, 0, NULL, 0};
        const char *id = view.id;
        Py_ssize_t id_len = (Py_ssize_t)view.id_len;
        if (slot->old < 0 && node_id(slot->entry->name, &id, &id_len) < 0) {
            PyMem_Free(specs);
            return -1;
        }
        slot->fresh = PyMem_New(uint32_t, counts[i]);
        status = slot->fresh ? chash_scheme_points(scheme, id, (size_t)id_len, 0, counts[i], slot->fresh)
                             : CHASH_ENOMEM;
        specs[i] = (chash_node_spec){id, (size_t)id_len, slot->entry, slot->fresh, counts[i]};
    }
    chash_ring *fresh_ring = NULL;
    if (status == CHASH_OK) {
        fresh_ring = new_ring(self->r32.scheme.layout);
        status = fresh_ring ? chash_ring_add_many(fresh_ring, specs, n) : CHASH_ENOMEM;
    }
    PyMem_Free(specs);
    if (status != CHASH_OK) {
        chash_ring_free(fresh_ring);
        set_status_error(status, NULL);
        return -1;
    }
    /* Nothing can fail from here: swap, then settle the entries. */
    NodeEntry *dropped = drop >= 0 ? entry_at(self, (size_t)drop) : NULL;
    self->r32.ring = fresh_ring;
    chash_ring_free(ring);
    for (size_t i = 0; i < n; i++)
        slots[i].entry->weight = slots[i].weight;
    if (dropped)
        free_entry(dropped);
    return 0;
}

/*
 * The ketama layout: every node's point count depends on every weight
 * (chash_ketama_counts), as in twemproxy and libmemcached, which rebuild
 * their continuum on every change.  The libmemcached layout too: while
 * every weight is 1 each node owns virtual_node_count points "{id}-{i}"
 * hashed with the key hash; once a weight is above 1, libmemcached
 * switches to libketama's weighted ring (MD5 points, 160 a node of average
 * weight, counts by share of the total) and keeps its key hash, and so
 * does this.  The new ring holds the current nodes in their order, less
 * `drop` (an index, or -1), with the nodes add[0..nadd) given weights[i]:
 * a present node keeps its place and takes the new weight, a new one goes
 * last (add holds no duplicates).
 *
 * When the point scheme stays (always, but when libmemcached turns
 * weighted or back) the ring changes in place by the points that move
 * (ketama_apply); otherwise it is built aside and swapped in
 * (ketama_rebuild).  Either way, on error (-1, exception set) the router
 * is unchanged.
 */
int ketama_update(RouterObject *self, PyObject *const *add, const double *weights,
                  Py_ssize_t nadd, long drop)
{
    size_t cap = chash_ring_node_count(self->r32.ring) + (size_t)nadd;
    KetamaSlot *slots = PyMem_New(KetamaSlot, cap ? cap : 1);
    size_t *counts = PyMem_New(size_t, cap ? cap : 1);
    size_t n = 0;
    int result = -1;
    KetamaPlan plan;
    if (!slots || !counts)
        PyErr_NoMemory();
    else if (ketama_slots(self, add, weights, nadd, drop, slots, &n) == 0
             && ketama_counts(self, slots, n, counts, &plan) == 0)
        result = plan.weighted == plan.was_weighted
                     ? ketama_apply(self, slots, n, counts, &plan.scheme, drop)
                     : ketama_rebuild(self, slots, n, counts, &plan.scheme, drop);
    if (slots)
        free_ketama_slots(slots, n, result < 0);
    PyMem_Free(counts);
    return result;
}
