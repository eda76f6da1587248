/*
 * mutate.c - the 32-bit ring's mutations: add one or many nodes, reweigh,
 * remove.  Each is all-or-nothing: on error the ring is as it was.
 * Replacing the whole membership is build.c's (ring32.h).
 */
#include "ring32.h"

/* ------------------------------------------------------------------ */
/* Membership                                                         */

/* Moves an existing node to a new weight: only its own points change. */
static int reweigh(RouterObject *self, PyObject *node, const char *id, Py_ssize_t id_len,
                   size_t old_count, size_t new_count)
{
    if (new_count == old_count)
        return 0;
    int grow = new_count > old_count;
    size_t first = grow ? old_count : new_count;
    size_t count = grow ? new_count - old_count : old_count - new_count;
    uint32_t *points = node_points(self, id, id_len, first, count);
    if (!points)
        return -1;
    int status;
    size_t k;
    /* A Python hash may have let another thread change this node. */
    if (chash_ring_find(self->r32.ring, id, (size_t)id_len, &k) != CHASH_OK
        || chash_ring_node(self->r32.ring, k).npoints != old_count)
        status = CHASH_EINVAL;
    else if (grow)
        status = chash_ring_grow(self->r32.ring, id, (size_t)id_len, points, count);
    else
        status = chash_ring_shrink(self->r32.ring, id, (size_t)id_len, points, count);
    PyMem_Free(points);
    if (status == CHASH_EINVAL) {
        PyErr_Format(PyExc_RuntimeError, "node %R changed while its points were computed", node);
        return -1;
    }
    if (status != CHASH_OK) {
        set_status_error(status, node);
        return -1;
    }
    return 0;
}

/* Adds node with weight, or moves a present node to that weight; 0, or -1
 * with an exception set and the router unchanged. */
int add_node(RouterObject *self, PyObject *node, double weight)
{
    const char *id;
    Py_ssize_t id_len;
    if (node_id(node, &id, &id_len) < 0)
        return -1;
    if (self->r32.scheme.layout == CHASH_LAYOUT_HAPROXY)
        return haproxy_add(self, node, weight, 0);
    size_t k;
    int found = chash_ring_find(self->r32.ring, id, (size_t)id_len, &k) == CHASH_OK;
    if (counts_by_share(self)) {
        if (found && entry_at(self, k)->weight == weight)
            return 0;
        return ketama_update(self, &node, &weight, 1, -1);
    }
    size_t count;
    if (points_for(self, node, weight, &count) < 0)
        return -1;
    if (found) {
        size_t old_count = chash_ring_node(self->r32.ring, k).npoints;
        if (reweigh(self, node, id, id_len, old_count, count) < 0)
            return -1;
        /* Found again: the node table may have moved meanwhile. */
        if (chash_ring_find(self->r32.ring, id, (size_t)id_len, &k) == CHASH_OK)
            entry_at(self, k)->weight = weight;
        return 0;
    }
    uint32_t *points = node_points(self, id, id_len, 0, count);
    if (!points)
        return -1;
    NodeEntry *entry = new_entry(node, weight);
    if (!entry) {
        PyMem_Free(points);
        return -1;
    }
    int status = chash_ring_add(self->r32.ring, id, (size_t)id_len, entry, points, count);
    PyMem_Free(points);
    if (status != CHASH_OK) {
        free_entry(entry);
        if (status == CHASH_EEXIST) /* added meanwhile by a thread a Python hash let run */
            return 0;
        set_status_error(status, node);
        return -1;
    }
    return 0;
}

/* 1 removed, 0 absent, -1 error. */
int ring32_remove(RouterObject *self, PyObject *node)
{
    const char *id;
    Py_ssize_t id_len;
    if (node_id(node, &id, &id_len) < 0)
        return -1;
    if (counts_by_share(self)) {
        size_t k;
        if (chash_ring_find(self->r32.ring, id, (size_t)id_len, &k) != CHASH_OK)
            return 0;
        return ketama_update(self, NULL, NULL, 0, (long)k) < 0 ? -1 : 1;
    }
    void *data = NULL;
    if (chash_ring_remove(self->r32.ring, id, (size_t)id_len, &data) != CHASH_OK)
        return 0;
    if (self->r32.scheme.layout == CHASH_LAYOUT_HAPROXY)
        haproxy_forget(self, ((NodeEntry *)data)->puid);
    free_entry((NodeEntry *)data);
    return 1;
}

int ring32_add(RouterObject *self, PyObject *node, double weight, PyObject *id)
{
    if (id != Py_None && self->r32.scheme.layout != CHASH_LAYOUT_HAPROXY) {
        PyErr_Format(PyExc_ValueError, "id is for layout='haproxy' only (this router's layout is '%s')",
                     chash_layout_name(self->r32.scheme.layout));
        return -1;
    }
    uint32_t puid;
    if (parse_haproxy_id(id, &puid) < 0)
        return -1;
    return self->r32.scheme.layout == CHASH_LAYOUT_HAPROXY ? haproxy_add(self, node, weight, puid)
                                                           : add_node(self, node, weight);
}

/* Frees what add_nodes_at_once prepared for nodes [0, n) and their points. */
static void free_prepared(chash_node_spec *specs, size_t n, uint32_t *points)
{
    for (size_t i = 0; i < n; i++)
        free_entry((NodeEntry *)specs[i].data);
    PyMem_Free(specs);
    PyMem_Free(points);
}

/*
 * Adds nodes[0..n) (str, none in the ring, none twice), node i with
 * weights[i], in that order, in one engine call: one sort and one merge
 * instead of one of each a node.  Not for the layouts whose point counts go
 * by share (ketama_update does those).  Returns 0, or -1 with an exception
 * set and the ring unchanged.  The points of all nodes share one block,
 * freed as one when the engine has copied them: no per-node block is left
 * behind in the heap.
 */
int add_nodes_at_once(RouterObject *self, PyObject *const *nodes, const double *weights, size_t n)
{
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    if (!counts) {
        PyErr_NoMemory();
        return -1;
    }
    size_t total = 0, room = CHASH_MAX_POINTS - chash_ring_point_count(self->r32.ring);
    for (size_t i = 0; i < n; i++) {
        if (points_for(self, nodes[i], weights[i], &counts[i]) < 0) {
            PyMem_Free(counts);
            return -1;
        }
        if (counts[i] > room - total) {
            PyMem_Free(counts);
            set_status_error(CHASH_ERANGE, NULL);
            return -1;
        }
        total += counts[i];
    }
    chash_node_spec *specs = PyMem_New(chash_node_spec, n ? n : 1);
    uint32_t *points = PyMem_New(uint32_t, total ? total : 1);
    if (!specs || !points) {
        PyMem_Free(counts);
        PyMem_Free(specs);
        PyMem_Free(points);
        PyErr_NoMemory();
        return -1;
    }
    size_t ready = 0, offset = 0;
    for (; ready < n; ready++) {
        const char *id;
        Py_ssize_t id_len;
        uint32_t *mine = points + offset;
        if (node_id(nodes[ready], &id, &id_len) < 0
            || fill_points(self, id, id_len, 0, counts[ready], mine) < 0)
            break;
        NodeEntry *entry = new_entry(nodes[ready], weights[ready]);
        if (!entry)
            break;
        specs[ready] = (chash_node_spec){id, (size_t)id_len, entry, mine, counts[ready]};
        offset += counts[ready];
    }
    PyMem_Free(counts);
    if (ready < n) {
        free_prepared(specs, ready, points);
        return -1;
    }
    int status = chash_ring_add_many(self->r32.ring, specs, n);
    if (status != CHASH_OK) {
        free_prepared(specs, n, points);
        if (status == CHASH_EEXIST) {
            /* A Python hash let another thread add one of them, or the
             * caller gave one twice: one by one, as add_service_node would. */
            for (size_t i = 0; i < n; i++)
                if (add_node(self, nodes[i], weights[i]) < 0)
                    return -1;
            return 0;
        }
        set_status_error(status, NULL);
        return -1;
    }
    PyMem_Free(specs);
    PyMem_Free(points);
    return 0;
}

int ring32_add_many(RouterObject *self, PyObject *nodes, double weight)
{
    if (self->r32.scheme.layout == CHASH_LAYOUT_HAPROXY)
        return haproxy_add_many(self, nodes, weight);
    size_t count = 0;
    if (!counts_by_share(self) && points_for(self, Py_None, weight, &count) < 0)
        return -1; /* the weight's own error, before any node is read */
    /* A tuple: a str subclass's __hash__ (run by the set) cannot change it. */
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "nodes must be an iterable of str");
        }
        return -1;
    }
    PyObject *fresh = PyList_New(0), *present = PyList_New(0), *seen = PySet_New(NULL);
    int result = -1;
    if (!fresh || !present || !seen)
        goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *node = PySequence_Fast_GET_ITEM(seq, i);
        const char *id;
        Py_ssize_t id_len;
        if (node_id(node, &id, &id_len) < 0)
            goto done;
        int dup = PySet_Contains(seen, node);
        if (dup < 0 || (!dup && PySet_Add(seen, node) < 0))
            goto done;
        if (dup)
            continue;
        PyObject *into = chash_ring_find(self->r32.ring, id, (size_t)id_len, NULL) == CHASH_OK ? present : fresh;
        if (PyList_Append(into, node) < 0)
            goto done;
    }
    if (counts_by_share(self)) {
        /* One ketama update for all of them, not one a node: present nodes
         * first (they keep their places), then the new ones in the order
         * given. */
        Py_ssize_t np = PyList_GET_SIZE(present), nf = PyList_GET_SIZE(fresh);
        PyObject **all = PyMem_New(PyObject *, (size_t)(np + nf) + 1);
        double *weights = PyMem_New(double, (size_t)(np + nf) + 1);
        int status = -1;
        if (all && weights) {
            for (Py_ssize_t i = 0; i < np + nf; i++) {
                all[i] = i < np ? PyList_GET_ITEM(present, i) : PyList_GET_ITEM(fresh, i - np);
                weights[i] = weight;
            }
            status = ketama_update(self, all, weights, np + nf, -1);
        } else {
            PyErr_NoMemory();
        }
        PyMem_Free(all);
        PyMem_Free(weights);
        if (status == 0)
            result = 0;
        goto done;
    }
    Py_ssize_t nf = PyList_GET_SIZE(fresh);
    double *weights = PyMem_New(double, (size_t)nf + 1);
    if (!weights) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nf; i++)
        weights[i] = weight;
    /* The list's items are borrowed: fresh outlives the call. */
    int added = add_nodes_at_once(self, &PyList_GET_ITEM(fresh, 0), weights, (size_t)nf);
    PyMem_Free(weights);
    if (added < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(present); i++)
        if (add_node(self, PyList_GET_ITEM(present, i), weight) < 0)
            goto done;
    result = 0;
done:
    Py_XDECREF(fresh);
    Py_XDECREF(present);
    Py_XDECREF(seen);
    Py_DECREF(seq);
    return result;
}
