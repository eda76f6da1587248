/*
 * haproxy.c - the haproxy layout's servers: their ids (HAProxy's puids),
 * numbered as HAProxy 2.6 numbers a backend's servers, and adding or
 * reweighing a server, whose points come from its puid
 * (chash_haproxy_points) rather than from its name (ring32.h).
 *
 * Numbering (cfgparse.c, check_config_validity): a counter starts at 1;
 * for each server in config order, one without an explicit id takes the
 * first id not in use at or after the counter, and the counter then moves
 * one past the server's position: past the id taken, or, for a server with
 * an explicit id, one step.  Here the add order is the config order; an
 * explicit id already in use is an error, as in HAProxy.  HAProxy knows
 * every explicit id before it numbers the others: a caller mixing the two
 * gives each server its id in order, as chash.compat.haproxy_backend does.
 *
 * The ids in use and the counter are the engine's (engine/haproxy_ids.h,
 * HaproxyIds), so checking an id and finding the first free one cost a
 * binary search, not a scan of nodes.
 */
#include "ring32.h"

#include <string.h>

void haproxy_forget(RouterObject *self, uint32_t puid)
{
    (void)chash_haproxy_ids_release(&self->r32.ids, puid); /* absent: nothing to do */
}

void haproxy_ids_free(HaproxyIds *ids)
{
    chash_haproxy_ids_free(ids);
}

/* Points for a weight: an integer in [1, 256], times 16; 0, or -1 with
 * ValueError. */
static int haproxy_count(PyObject *node, double weight, size_t *count)
{
    if (!(weight >= 1.0 && weight <= (double)CHASH_HAPROXY_MAX_WEIGHT) || weight != (double)(long)weight) {
        PyObject *shown = PyFloat_FromDouble(weight);
        if (shown)
            PyErr_Format(PyExc_ValueError,
                         "the haproxy layout takes integer weights from 1 to %d, not %R (node %R); "
                         "a server of weight 0 takes no keys: leave it out",
                         CHASH_HAPROXY_MAX_WEIGHT, shown, node);
        Py_XDECREF(shown);
        return -1;
    }
    *count = (size_t)weight * CHASH_HAPROXY_WEIGHT_SCALE;
    return 0;
}

/* Points first .. first + count - 1 of puid in a PyMem block, or NULL. */
static uint32_t *puid_points(uint32_t puid, size_t first, size_t count)
{
    uint32_t *points = PyMem_New(uint32_t, count ? count : 1);
    if (!points) {
        PyErr_NoMemory();
        return NULL;
    }
    (void)chash_haproxy_points(puid, first, count, points); /* in range: checked by the caller */
    return points;
}

/* The node holding puid (borrowed), for an error message; NULL if none. */
static PyObject *owner_of(RouterObject *self, uint32_t puid)
{
    size_t n = chash_ring_node_count(self->r32.ring);
    for (size_t i = 0; i < n; i++)
        if (entry_at(self, i)->puid == puid)
            return entry_at(self, i)->name;
    return NULL;
}

/* A present node to a new weight: only its own points change. */
static int reweigh(RouterObject *self, PyObject *node, size_t k, double weight, size_t count)
{
    chash_node_view view = chash_ring_node(self->r32.ring, k);
    NodeEntry *entry = view.data;
    if (count != view.npoints) {
        int grow = count > view.npoints;
        size_t first = grow ? view.npoints : count;
        size_t n = grow ? count - view.npoints : view.npoints - count;
        uint32_t *points = puid_points(entry->puid, first, n);
        if (!points)
            return -1;
        int status = grow ? chash_ring_grow(self->r32.ring, view.id, view.id_len, points, n)
                          : chash_ring_shrink(self->r32.ring, view.id, view.id_len, points, n);
        PyMem_Free(points);
        if (status != CHASH_OK) {
            set_status_error(status, node);
            return -1;
        }
    }
    entry->weight = weight;
    return 0;
}

int haproxy_add(RouterObject *self, PyObject *node, double weight, uint32_t puid)
{
    const char *id;
    Py_ssize_t id_len;
    size_t count, k;
    if (node_id(node, &id, &id_len) < 0 || haproxy_count(node, weight, &count) < 0)
        return -1;
    if (chash_ring_find(self->r32.ring, id, (size_t)id_len, &k) == CHASH_OK) {
        uint32_t had = entry_at(self, k)->puid;
        if (puid && puid != had) {
            PyErr_Format(PyExc_ValueError, "node %R has id %u, not %u: remove it first to renumber it",
                         node, had, puid);
            return -1;
        }
        return reweigh(self, node, k, weight, count);
    }
    /* The id is taken first (the engine moves HAProxy's counter) and given
     * back, the counter restored, if the node cannot be added. */
    HaproxyIds *ids = &self->r32.ids;
    uint32_t next = ids->next, taken;
    int status = chash_haproxy_ids_take(ids, puid, &taken);
    if (status == CHASH_EEXIST) {
        PyErr_Format(PyExc_ValueError, "id %u is already used by node %R", puid, owner_of(self, puid));
        return -1;
    }
    if (status == CHASH_ERANGE) {
        PyErr_SetString(PyExc_ValueError, "no free server id is left");
        return -1;
    }
    if (status != CHASH_OK) {
        set_status_error(status, node);
        return -1;
    }
    uint32_t *points = puid_points(taken, 0, count);
    NodeEntry *entry = points ? new_entry(node, weight) : NULL;
    status = entry ? CHASH_OK : CHASH_ENOMEM; /* with the exception set */
    if (entry) {
        entry->puid = taken;
        status = chash_ring_add(self->r32.ring, id, (size_t)id_len, entry, points, count);
        if (status != CHASH_OK) {
            free_entry(entry);
            set_status_error(status, node);
        }
    }
    PyMem_Free(points);
    if (status != CHASH_OK) {
        (void)chash_haproxy_ids_release(ids, taken);
        ids->next = next;
        return -1;
    }
    return 0;
}

int haproxy_ids_equal(RouterObject *x, RouterObject *y)
{
    if ((x->r32.ids.next ? x->r32.ids.next : 1) != (y->r32.ids.next ? y->r32.ids.next : 1))
        return 0;
    size_t n = chash_ring_node_count(x->r32.ring);
    if (n != chash_ring_node_count(y->r32.ring))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (entry_at(x, i)->puid != entry_at(y, i)->puid)
            return 0;
    return 1;
}

PyObject *ring32_ids(RouterObject *self)
{
    PyObject *result = PyDict_New();
    size_t n = chash_ring_node_count(self->r32.ring);
    for (size_t i = 0; result && i < n && self->r32.scheme.layout == CHASH_LAYOUT_HAPROXY; i++) {
        NodeEntry *entry = entry_at(self, i);
        PyObject *value = PyLong_FromUnsignedLong(entry->puid);
        if (!value || PyDict_SetItem(result, entry->name, value) < 0)
            Py_CLEAR(result);
        Py_XDECREF(value);
    }
    return result;
}

/*
 * Adds the new nodes fresh[0..n) (distinct, none present) in one engine
 * call, numbered in order as haproxy_add numbers them one by one.  The ids
 * are taken first and given back if the engine refuses; all or nothing.
 */
static int add_fresh(RouterObject *self, PyObject *const *fresh, size_t n, double weight, size_t count)
{
    HaproxyIds *ids = &self->r32.ids;
    uint32_t next = ids->next;
    if (n > (CHASH_MAX_POINTS - chash_ring_point_count(self->r32.ring)) / count) {
        set_status_error(CHASH_ERANGE, NULL);
        return -1;
    }
    int reserved = chash_haproxy_ids_reserve(ids, n);
    if (reserved != CHASH_OK) {
        set_status_error(reserved, NULL);
        return -1;
    }
    chash_node_spec *specs = PyMem_New(chash_node_spec, n ? n : 1);
    uint32_t *points = PyMem_New(uint32_t, n > 0 ? n * count : 1);
    uint32_t *taken = PyMem_New(uint32_t, n ? n : 1);
    size_t ready = 0, numbered = 0;
    int status = specs && points && taken ? 0 : -1;
    if (status < 0)
        PyErr_NoMemory();
    for (; status == 0 && numbered < n; numbered++) {
        /* Room was reserved: only running out of ids can fail. */
        if (chash_haproxy_ids_take(ids, 0, &taken[numbered]) != CHASH_OK) {
            PyErr_SetString(PyExc_ValueError, "no free server id is left");
            status = -1;
            break;
        }
    }
    for (; status == 0 && ready < n; ready++) {
        const char *id;
        Py_ssize_t id_len;
        uint32_t *mine = points + ready * count;
        NodeEntry *entry = node_id(fresh[ready], &id, &id_len) == 0 ? new_entry(fresh[ready], weight) : NULL;
        if (!entry) {
            status = -1;
            break;
        }
        entry->puid = taken[ready];
        (void)chash_haproxy_points(taken[ready], 0, count, mine); /* count <= 4096 */
        specs[ready] = (chash_node_spec){id, (size_t)id_len, entry, mine, count};
    }
    if (status == 0) {
        int engine = chash_ring_add_many(self->r32.ring, specs, n);
        if (engine != CHASH_OK) {
            set_status_error(engine, NULL);
            status = -1;
        }
    }
    if (status < 0) {
        for (size_t i = 0; i < ready; i++)
            free_entry((NodeEntry *)specs[i].data);
        for (size_t i = 0; i < numbered; i++)
            haproxy_forget(self, taken[i]);
        ids->next = next;
    }
    PyMem_Free(specs);
    PyMem_Free(points);
    PyMem_Free(taken);
    return status;
}

/*
 * add_service_nodes for the haproxy layout: the new nodes numbered in the
 * order given and added in one engine call, all or none of them; then the
 * nodes present before are reweighed (only the weight can fail, and it was
 * checked first).
 */
int haproxy_add_many(RouterObject *self, PyObject *nodes, double weight)
{
    size_t count;
    if (haproxy_count(Py_None, weight, &count) < 0)
        return -1;
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "nodes must be an iterable of str");
        }
        return -1;
    }
    PyObject *fresh = PyList_New(0), *present = PyList_New(0), *seen = PySet_New(NULL);
    int status = fresh && present && seen ? 0 : -1;
    for (Py_ssize_t i = 0; status == 0 && i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *node = PyTuple_GET_ITEM(seq, i);
        const char *id;
        Py_ssize_t id_len;
        if (node_id(node, &id, &id_len) < 0) {
            status = -1;
            break;
        }
        int dup = PySet_Contains(seen, node);
        if (dup < 0 || (!dup && PySet_Add(seen, node) < 0)) {
            status = -1;
            break;
        }
        if (dup)
            continue;
        PyObject *into = chash_ring_find(self->r32.ring, id, (size_t)id_len, NULL) == CHASH_OK ? present : fresh;
        status = PyList_Append(into, node);
    }
    if (status == 0 && PyList_GET_SIZE(fresh))
        status = add_fresh(self, &PyList_GET_ITEM(fresh, 0), (size_t)PyList_GET_SIZE(fresh), weight, count);
    for (Py_ssize_t i = 0; status == 0 && i < PyList_GET_SIZE(present); i++)
        status = haproxy_add(self, PyList_GET_ITEM(present, i), weight, 0);
    Py_XDECREF(fresh);
    Py_XDECREF(present);
    Py_XDECREF(seen);
    Py_DECREF(seq);
    return status < 0 ? -1 : 0;
}
