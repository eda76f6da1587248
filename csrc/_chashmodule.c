/*
 * _chashmodule.c - chash._chash, the router's binding.  With
 * _chash_strategies.c (chash._strategies) one of two Python-aware C files;
 * what both need lives once in _chash_binding.h.
 *
 * A thin heap type, ConsistentHashRouter, over the ring engine (chash.h) and
 * the point schemes (chash_scheme.h).  The engine stores, for every node, a
 * pointer to a NodeEntry holding the node's str (an exact str, so releasing
 * it never runs Python code) and its weight.
 *
 * Thread safety rests on the GIL: every engine call runs with the GIL held
 * and no Python code runs between computing a node's points and handing them
 * to the engine, so no thread ever sees a half-changed ring.  A Python hash
 * callable is only ever called before the engine is touched.
 */
#include "_chash_binding.h"
#include "chash.h"
#include "chash_scheme.h"

#include <math.h>
#include <string.h>

/* virtual_node_count must lie in [1, MAX_VIRTUAL_NODES]. */
#define MAX_VIRTUAL_NODES 1000000

typedef struct {
    PyTypeObject *router_type;
} module_state;

typedef struct {
    PyObject *name; /* exact str */
    double weight;
} NodeEntry;

typedef struct {
    PyObject_HEAD
    chash_ring *ring;
    chash_scheme scheme;
    PyObject *hash_fn;     /* a Python callable bytes -> int, or NULL */
    size_t base_points;    /* virtual_node_count: points at weight 1 */
} RouterObject;

static struct PyModuleDef chash_module;
static PyObject *module_rebuild(PyObject *module, PyObject *args);

static inline module_state *get_state(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* ------------------------------------------------------------------ */
/* Errors                                                             */

/* Engine status codes become exceptions in chash_py_error()
 * (_chash_binding.h); node is the KeyError's argument. */
static void *set_status_error(int status, PyObject *node)
{
    return chash_py_error(status, node, NULL);
}

/* ------------------------------------------------------------------ */
/* Keys and node ids                                                  */

static int node_id(PyObject *node, const char **buf, Py_ssize_t *len)
{
    if (!PyUnicode_Check(node)) {
        PyErr_Format(PyExc_TypeError, "node id must be str, not %.200s", Py_TYPE(node)->tp_name);
        return -1;
    }
    *buf = PyUnicode_AsUTF8AndSize(node, len);
    return *buf ? 0 : -1;
}

/* Calls the user's hash on data; the ring position is its value mod 2**32. */
static int call_hash_fn(PyObject *fn, const char *data, Py_ssize_t len, uint32_t *out)
{
    PyObject *arg = PyBytes_FromStringAndSize(data, len);
    if (!arg)
        return -1;
    PyObject *value = PyObject_CallOneArg(fn, arg);
    Py_DECREF(arg);
    if (!value)
        return -1;
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "hash function must return int, not %.200s",
                     Py_TYPE(value)->tp_name);
        Py_DECREF(value);
        return -1;
    }
    unsigned long long low = PyLong_AsUnsignedLongLongMask(value);
    Py_DECREF(value);
    if (low == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = chash_scheme_cut_int(low);
    return 0;
}

/* The ring position of a key (str or bytes); 0 or -1. */
static int key_hash(RouterObject *self, PyObject *key, uint32_t *out)
{
    const char *buf;
    Py_ssize_t len;
    if (chash_py_key_bytes(key, &buf, &len) < 0)
        return -1;
    if (self->hash_fn)
        return call_hash_fn(self->hash_fn, buf, len, out);
    *out = chash_scheme_key_hash(&self->scheme, buf, (size_t)len);
    return 0;
}

/*
 * Writes points first .. first + count - 1 of a node to out; 0, or -1 with
 * an exception set.
 */
static int fill_points(RouterObject *self, const char *id, Py_ssize_t id_len, size_t first,
                       size_t count, uint32_t *out)
{
    if (!self->hash_fn) {
        int status = chash_scheme_points(&self->scheme, id, (size_t)id_len, first, count, out);
        if (status != CHASH_OK) {
            set_status_error(status, NULL);
            return -1;
        }
        return 0;
    }
    size_t cap = (size_t)id_len + 40;
    char *vkey = PyMem_Malloc(cap);
    if (!vkey) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < count; k++) {
        size_t len = chash_scheme_vkey(&self->scheme, id, (size_t)id_len, first + k, vkey, cap);
        if (call_hash_fn(self->hash_fn, vkey, (Py_ssize_t)len, &out[k]) < 0) {
            PyMem_Free(vkey);
            return -1;
        }
    }
    PyMem_Free(vkey);
    return 0;
}

/*
 * Points first .. first + count - 1 of a node, in a PyMem buffer the caller
 * frees, or NULL with an exception set.
 */
static uint32_t *node_points(RouterObject *self, const char *id, Py_ssize_t id_len,
                             size_t first, size_t count)
{
    uint32_t *points = PyMem_New(uint32_t, count);
    if (!points) {
        PyErr_NoMemory();
        return NULL;
    }
    if (fill_points(self, id, id_len, first, count, points) < 0) {
        PyMem_Free(points);
        return NULL;
    }
    return points;
}

static inline NodeEntry *entry_at(RouterObject *self, size_t index)
{
    return (NodeEntry *)chash_ring_node(self->ring, index).data;
}

static void free_entry(NodeEntry *entry)
{
    Py_DECREF(entry->name);
    PyMem_Free(entry);
}

/* A new NodeEntry for node (an exact str kept), or NULL with an exception. */
static NodeEntry *new_entry(PyObject *node, double weight)
{
    NodeEntry *entry = PyMem_Malloc(sizeof *entry);
    if (!entry) {
        PyErr_NoMemory();
        return NULL;
    }
    entry->name = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
    if (!entry->name) {
        PyMem_Free(entry);
        return NULL;
    }
    entry->weight = weight;
    return entry;
}

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

/* The UTF-8 of a str argument with no NUL inside, or NULL (TypeError /
 * ValueError naming what); C lookups by name stop at a NUL. */
static const char *name_arg(PyObject *value, const char *what)
{
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.200s", what, Py_TYPE(value)->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(value, &len);
    if (name && strlen(name) != (size_t)len) {
        PyErr_Format(PyExc_ValueError, "unknown %s %R", what, value);
        return NULL;
    }
    return name;
}

/* An empty ring breaking ties as the layout's reference does; NULL when
 * out of memory. */
static chash_ring *new_ring(chash_layout_id layout)
{
    chash_ring *ring = chash_ring_new();
    if (ring && chash_layout_ties(layout))
        (void)chash_ring_set_ties(ring, CHASH_TIES_BY_ORDER); /* empty: cannot fail */
    return ring;
}

static PyObject *router_create(PyTypeObject *type, Py_ssize_t vnodes_arg, int vnodes_given,
                               PyObject *hash, PyObject *layout_obj)
{
    const char *layout_name = name_arg(layout_obj, "layout");
    if (!layout_name)
        return NULL;
    chash_layout_id layout;
    if (chash_layout_by_name(layout_name, &layout) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError,
                     "unknown layout '%s': expected 'python', 'node', 'ketama', 'nginx' or 'libmemcached'", layout_name);
        return NULL;
    }
    size_t base = chash_layout_default_points(layout);
    if (vnodes_given) {
        if (vnodes_arg < 1 || vnodes_arg > MAX_VIRTUAL_NODES) {
            PyErr_Format(PyExc_ValueError,
                         "virtual_node_count must be between 1 and %d, not %zd",
                         MAX_VIRTUAL_NODES, vnodes_arg);
            return NULL;
        }
        base = (size_t)vnodes_arg;
    }
    chash_hash_id hash_id = chash_layout_default_hash(layout);
    PyObject *hash_fn = NULL;
    if (hash == Py_None) {
        /* the layout's own hash */
    } else if (PyUnicode_Check(hash)) {
        const char *name = name_arg(hash, "hash");
        if (!name)
            return NULL;
        if (chash_hash_by_name(name, &hash_id) != CHASH_OK) {
            PyErr_Format(PyExc_ValueError,
                         "unknown hash %R: expected one of md5, sha1, murmur2, murmur3, "
                         "xxh32, xxh64, xxh3, fnv1a, crc32, one_at_a_time, or a callable", hash);
            return NULL;
        }
    } else if (PyCallable_Check(hash)) {
        hash_fn = hash;
    } else {
        PyErr_Format(PyExc_TypeError, "hash must be a str or a callable, not %.200s",
                     Py_TYPE(hash)->tp_name);
        return NULL;
    }
    if (layout == CHASH_LAYOUT_KETAMA && (hash_fn || hash_id != CHASH_HASH_MD5)) {
        PyErr_SetString(PyExc_ValueError, "the ketama layout is defined over md5 only");
        return NULL;
    }
    if (layout == CHASH_LAYOUT_NGINX && (hash_fn || hash_id != CHASH_HASH_CRC32)) {
        PyErr_SetString(PyExc_ValueError, "the nginx layout is defined over crc32 only");
        return NULL;
    }
    if (layout == CHASH_LAYOUT_LIBMEMCACHED
        && (hash_fn || (hash_id != CHASH_HASH_ONE_AT_A_TIME && hash_id != CHASH_HASH_MD5))) {
        PyErr_SetString(PyExc_ValueError,
                        "the libmemcached layout takes hash 'one_at_a_time' or 'md5'");
        return NULL;
    }
    RouterObject *self = (RouterObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->ring = new_ring(layout);
    if (!self->ring) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    (void)chash_scheme_init(&self->scheme, layout, hash_id);
    self->hash_fn = Py_XNewRef(hash_fn);
    self->base_points = base;
    return (PyObject *)self;
}

static PyObject *router_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"virtual_node_count", "hash", "layout", NULL};
    PyObject *vnodes = Py_None, *hash = NULL, *layout = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OO:ConsistentHashRouter", kwlist,
                                     &vnodes, &hash, &layout))
        return NULL;
    Py_ssize_t count = 0;
    int given = vnodes != Py_None;
    if (given) {
        if (!PyLong_Check(vnodes) || PyBool_Check(vnodes)) {
            PyErr_Format(PyExc_TypeError, "virtual_node_count must be int, not %.200s",
                         Py_TYPE(vnodes)->tp_name);
            return NULL;
        }
        count = PyLong_AsSsize_t(vnodes);
        if (count == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return NULL;
            PyErr_Clear();
            count = PY_SSIZE_T_MAX; /* reported as out of range below */
        }
    }
    PyObject *default_layout = layout ? NULL : PyUnicode_FromString("python");
    PyObject *self = NULL;
    if (layout || default_layout)
        self = router_create(type, count, given, hash ? hash : Py_None,
                             layout ? layout : default_layout);
    Py_XDECREF(default_layout);
    return self;
}

static void clear_nodes(RouterObject *self)
{
    if (!self->ring)
        return;
    chash_ring *ring = self->ring;
    self->ring = NULL;
    size_t n = chash_ring_node_count(ring);
    NodeEntry **entries = PyMem_New(NodeEntry *, n ? n : 1);
    /* Collect first, free the ring, then release: no Python object is
     * released while the ring still points at it. */
    if (entries) {
        for (size_t i = 0; i < n; i++)
            entries[i] = (NodeEntry *)chash_ring_node(ring, i).data;
        chash_ring_free(ring);
        for (size_t i = 0; i < n; i++)
            free_entry(entries[i]);
        PyMem_Free(entries);
    } else {
        for (size_t i = 0; i < n; i++)
            free_entry((NodeEntry *)chash_ring_node(ring, i).data);
        chash_ring_free(ring);
    }
}

static int router_traverse(RouterObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->hash_fn);
    return 0;
}

static int router_clear(RouterObject *self)
{
    Py_CLEAR(self->hash_fn);
    return 0;
}

static void router_dealloc(RouterObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    router_clear(self);
    clear_nodes(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

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
    if (chash_ring_find(self->ring, id, (size_t)id_len, &k) != CHASH_OK
        || chash_ring_node(self->ring, k).npoints != old_count)
        status = CHASH_EINVAL;
    else if (grow)
        status = chash_ring_grow(self->ring, id, (size_t)id_len, points, count);
    else
        status = chash_ring_shrink(self->ring, id, (size_t)id_len, points, count);
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

/* Parses an optional weight argument (int or float, not bool); 0 or -1. */
static int parse_weight(PyObject *weight_obj, double *weight)
{
    *weight = 1.0;
    if (!weight_obj)
        return 0;
    if (PyBool_Check(weight_obj) || !(PyFloat_Check(weight_obj) || PyLong_Check(weight_obj))) {
        PyErr_Format(PyExc_TypeError, "weight must be int or float, not %.200s",
                     Py_TYPE(weight_obj)->tp_name);
        return -1;
    }
    *weight = PyFloat_AsDouble(weight_obj);
    if (*weight == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "weight must be a finite number > 0, not %R", weight_obj);
        }
        return -1;
    }
    return 0;
}

static void weight_error(PyObject *node, double weight)
{
    if (!(weight > 0.0) || !isfinite(weight)) {
        PyObject *value = PyFloat_FromDouble(weight);
        if (value) {
            PyErr_Format(PyExc_ValueError, "weight must be a finite number > 0, not %R", value);
            Py_DECREF(value);
        }
        return;
    }
    PyErr_Format(PyExc_ValueError, "weight gives %s%R more than %zu points",
                 node == Py_None ? "each node" : "node ", node == Py_None ? Py_None : node,
                 (size_t)CHASH_MAX_NODE_POINTS);
}


/* ------------------------------------------------------------------ */
/* Weights of the layouts that follow another program's ring          */

/* nginx, ketama and libmemcached take their references' integer weights. */
static int integer_weights(const RouterObject *self)
{
    chash_layout_id layout = self->scheme.layout;
    return layout == CHASH_LAYOUT_NGINX || layout == CHASH_LAYOUT_KETAMA
        || layout == CHASH_LAYOUT_LIBMEMCACHED;
}

/* 0, or -1 with a ValueError naming the weight when the layout takes
 * integer weights (1 .. 2**32 - 1, as the references' unsigned 32-bit
 * weight) and this one is not such an integer. */
static int check_integer_weight(const RouterObject *self, double weight)
{
    if (!integer_weights(self) || (weight >= 1.0 && weight <= 4294967295.0 && weight == floor(weight)))
        return 0;
    PyObject *value = PyFloat_FromDouble(weight);
    if (value) {
        PyErr_Format(PyExc_ValueError,
                     "the %s layout takes integer weights from 1 to 2**32 - 1, as %s does, not %R",
                     chash_layout_name(self->scheme.layout),
                     self->scheme.layout == CHASH_LAYOUT_NGINX ? "nginx's weight=N"
                         : self->scheme.layout == CHASH_LAYOUT_KETAMA ? "libketama"
                                                                       : "libmemcached",
                     value);
        Py_DECREF(value);
    }
    return -1;
}

/*
 * How many points a node of this weight owns, for the layouts whose counts
 * do not depend on other nodes (not ketama nor libmemcached: see
 * ketama_update).  0, or -1 with a ValueError.
 */
static int points_for(RouterObject *self, PyObject *node, double weight, size_t *count)
{
    if (check_integer_weight(self, weight) < 0)
        return -1;
    if (chash_points_for_weight(self->base_points, weight, CHASH_MAX_NODE_POINTS, count) != CHASH_OK) {
        weight_error(node, weight);
        return -1;
    }
    return 0;
}

/* Layouts whose point counts depend on every node's weight: ketama, and
 * libmemcached (any weight above 1 switches it to libketama's weighted
 * ring); a change of membership rebuilds their ring (ketama_update). */
static int rebuilds(const RouterObject *self)
{
    return self->scheme.layout == CHASH_LAYOUT_KETAMA
        || self->scheme.layout == CHASH_LAYOUT_LIBMEMCACHED;
}

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
static int ketama_update(RouterObject *self, PyObject *const *add, const double *weights,
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

static int add_node(RouterObject *self, PyObject *node, double weight)
{
    const char *id;
    Py_ssize_t id_len;
    if (node_id(node, &id, &id_len) < 0)
        return -1;
    size_t k;
    int found = chash_ring_find(self->ring, id, (size_t)id_len, &k) == CHASH_OK;
    if (rebuilds(self)) {
        if (found && entry_at(self, k)->weight == weight)
            return 0;
        return ketama_update(self, &node, &weight, 1, -1);
    }
    size_t count;
    if (points_for(self, node, weight, &count) < 0)
        return -1;
    if (found) {
        size_t old_count = chash_ring_node(self->ring, k).npoints;
        if (reweigh(self, node, id, id_len, old_count, count) < 0)
            return -1;
        /* Found again: the node table may have moved meanwhile. */
        if (chash_ring_find(self->ring, id, (size_t)id_len, &k) == CHASH_OK)
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
    int status = chash_ring_add(self->ring, id, (size_t)id_len, entry, points, count);
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
static int remove_node(RouterObject *self, PyObject *node)
{
    const char *id;
    Py_ssize_t id_len;
    if (node_id(node, &id, &id_len) < 0)
        return -1;
    if (rebuilds(self)) {
        size_t k;
        if (chash_ring_find(self->ring, id, (size_t)id_len, &k) != CHASH_OK)
            return 0;
        return ketama_update(self, NULL, NULL, 0, (long)k) < 0 ? -1 : 1;
    }
    void *data = NULL;
    if (chash_ring_remove(self->ring, id, (size_t)id_len, &data) != CHASH_OK)
        return 0;
    free_entry((NodeEntry *)data);
    return 1;
}

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1.0)\n--\n\n"
"Add a node owning round(virtual_node_count * weight) points (at least 1).\n\n"
"Adding a node already present with the same weight does nothing; with\n"
"another weight, the node gains or loses only points of its own, so keys\n"
"move only onto or off that node.  The nginx, ketama and libmemcached\n"
"layouts take integer weights as their references do; in ketama (and in\n"
"libmemcached once a weight is above 1) every node's point count follows\n"
"from its share of the total weight, so any change recomputes them all.");

static PyObject *router_add(RouterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"real_node_id", "weight", NULL};
    PyObject *node;
    PyObject *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_node", kwlist, &node, &weight_obj))
        return NULL;
    double weight;
    if (parse_weight(weight_obj, &weight) < 0)
        return NULL;
    if (add_node(self, node, weight) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Frees what add_many prepared for nodes [0, n) and their points. */
static void free_prepared(chash_node_spec *specs, Py_ssize_t n, uint32_t *points)
{
    for (Py_ssize_t i = 0; i < n; i++)
        free_entry((NodeEntry *)specs[i].data);
    PyMem_Free(specs);
    PyMem_Free(points);
}

/*
 * Adds every new node of seq (all str, deduplicated) in one engine call.
 * Returns 0, or -1 with an exception set and the ring unchanged.  The
 * points of all nodes share one block, freed as one when the engine has
 * copied them: no per-node block is left behind in the heap.
 */
static int add_new_nodes(RouterObject *self, PyObject *fresh, double weight, size_t count)
{
    size_t n = (size_t)PyList_GET_SIZE(fresh);
    if (n > (CHASH_MAX_POINTS - chash_ring_point_count(self->ring)) / count) {
        set_status_error(CHASH_ERANGE, NULL);
        return -1;
    }
    chash_node_spec *specs = PyMem_New(chash_node_spec, n ? n : 1);
    uint32_t *points = PyMem_New(uint32_t, n ? n * count : 1);
    if (!specs || !points) {
        PyMem_Free(specs);
        PyMem_Free(points);
        PyErr_NoMemory();
        return -1;
    }
    size_t ready = 0;
    for (; ready < n; ready++) {
        PyObject *node = PyList_GET_ITEM(fresh, (Py_ssize_t)ready);
        const char *id;
        Py_ssize_t id_len;
        uint32_t *mine = points + ready * count;
        if (node_id(node, &id, &id_len) < 0 || fill_points(self, id, id_len, 0, count, mine) < 0)
            break;
        NodeEntry *entry = new_entry(node, weight);
        if (!entry)
            break;
        specs[ready] = (chash_node_spec){id, (size_t)id_len, entry, mine, count};
    }
    if (ready < n) {
        free_prepared(specs, (Py_ssize_t)ready, points);
        return -1;
    }
    int status = chash_ring_add_many(self->ring, specs, n);
    if (status != CHASH_OK) {
        free_prepared(specs, (Py_ssize_t)n, points);
        if (status == CHASH_EEXIST) {
            /* A Python hash let another thread add one of them: one by one. */
            for (size_t i = 0; i < n; i++)
                if (add_node(self, PyList_GET_ITEM(fresh, (Py_ssize_t)i), weight) < 0)
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

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1.0)\n--\n\n"
"add_service_node(node, weight) for every node of an iterable, faster: the\n"
"new nodes enter the ring in one sort and one merge, all or none of them.\n"
"Nodes already present get the weight as add_service_node would give it.");

static PyObject *router_add_many(RouterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "weight", NULL};
    PyObject *nodes, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_nodes", kwlist, &nodes, &weight_obj))
        return NULL;
    double weight;
    if (parse_weight(weight_obj, &weight) < 0)
        return NULL;
    size_t count = 0;
    if (!rebuilds(self) && points_for(self, Py_None, weight, &count) < 0)
        return NULL;
    /* A tuple: a str subclass's __hash__ (run by the set) cannot change it. */
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "nodes must be an iterable of str");
        }
        return NULL;
    }
    PyObject *fresh = PyList_New(0), *present = PyList_New(0), *seen = PySet_New(NULL);
    PyObject *result = NULL;
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
        PyObject *into = chash_ring_find(self->ring, id, (size_t)id_len, NULL) == CHASH_OK ? present : fresh;
        if (PyList_Append(into, node) < 0)
            goto done;
    }
    if (rebuilds(self)) {
        /* One rebuild for all of them: present nodes first (in place), then
         * the new ones in the order given. */
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
            result = Py_NewRef(Py_None);
        goto done;
    }
    if (add_new_nodes(self, fresh, weight, count) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(present); i++)
        if (add_node(self, PyList_GET_ITEM(present, i), weight) < 0)
            goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(fresh);
    Py_XDECREF(present);
    Py_XDECREF(seen);
    Py_DECREF(seq);
    return result;
}

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node and all its points; KeyError if it is not in the ring.");

static PyObject *router_remove(RouterObject *self, PyObject *node)
{
    int removed = remove_node(self, node);
    if (removed < 0)
        return NULL;
    if (!removed)
        return set_status_error(CHASH_ENOENT, node);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node if it is in the ring; do nothing otherwise.");

static PyObject *router_discard(RouterObject *self, PyObject *node)
{
    if (remove_node(self, node) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

PyDoc_STRVAR(get_doc,
"get_target_node($self, request_key, /)\n--\n\n"
"The node owning the first ring point >= the key's hash, wrapping around;\n"
"None when the ring is empty.  request_key is a str or bytes.");

static PyObject *router_get(RouterObject *self, PyObject *key)
{
    uint32_t hash;
    if (key_hash(self, key, &hash) < 0)
        return NULL;
    void *entry;
    if (chash_ring_lookup(self->ring, hash, &entry) != CHASH_OK)
        Py_RETURN_NONE; /* an empty ring */
    return Py_NewRef(((NodeEntry *)entry)->name);
}

/* Where hash_all's callbacks write: the router and the positions. */
typedef struct {
    RouterObject *self;
    uint32_t *hashes;
} hash_batch;

static void hash_four(void *ctx, const void *const data[4], const size_t lens[4], size_t at)
{
    hash_batch *batch = ctx;
    chash_scheme_key_hash_x4(&batch->self->scheme, data, lens, batch->hashes + at);
}

static int hash_one(void *ctx, PyObject *key, size_t at)
{
    hash_batch *batch = ctx;
    return key_hash(batch->self, key, &batch->hashes[at]);
}

/*
 * The ring positions of every key of seq, in a PyMem buffer the caller
 * frees, or NULL with an exception set.  All keys are hashed before the
 * ring is read, so a batch sees one ring even when a Python hash lets other
 * threads run; built-in hashes take keys four at a time.
 */
static uint32_t *hash_all(RouterObject *self, PyObject *seq, Py_ssize_t n)
{
    hash_batch batch = {self, PyMem_New(uint32_t, n ? (size_t)n : 1)};
    if (!batch.hashes) {
        PyErr_NoMemory();
        return NULL;
    }
    if (chash_py_hash_keys(PySequence_Fast_ITEMS(seq), n, self->hash_fn ? NULL : hash_four,
                           hash_one, &batch) < 0) {
        PyMem_Free(batch.hashes);
        return NULL;
    }
    return batch.hashes;
}

PyDoc_STRVAR(get_many_doc,
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

/* The keys as a sequence whose items stay put: a tuple copy when a Python
 * hash could change a list between keys, else the list itself. */
static PyObject *key_sequence(RouterObject *self, PyObject *keys)
{
    if (self->hash_fn) {
        PyObject *tuple = PySequence_Tuple(keys);
        if (!tuple && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "keys must be an iterable of str or bytes");
        }
        return tuple;
    }
    return PySequence_Fast(keys, "keys must be an iterable of str or bytes");
}

/* The ring positions of every key of an iterable (PyMem, the caller frees);
 * *n receives how many. */
static uint32_t *hash_keys(RouterObject *self, PyObject *keys, Py_ssize_t *n)
{
    PyObject *seq = key_sequence(self, keys);
    if (!seq)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    uint32_t *hashes = hash_all(self, seq, *n);
    Py_DECREF(seq);
    return hashes;
}

static PyObject *router_get_many(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n;
    uint32_t *hashes = hash_keys(self, keys, &n);
    if (!hashes)
        return NULL;
    PyObject *result = PyList_New(n);
    if (result && chash_ring_point_count(self->ring) == 0) {
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
    } else if (result) {
        /* Owners written over the hashes: each is read before it is replaced. */
        chash_ring_owners(self->ring, hashes, (size_t)n, hashes);
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(entry_at(self, hashes[i])->name));
    }
    PyMem_Free(hashes);
    return result;
}

PyDoc_STRVAR(preference_doc,
"get_preference_list($self, key, n, /)\n--\n\n"
"The first n distinct nodes met clockwise from the key, its owner first.\n"
"Fewer when the ring has fewer nodes; [] on an empty ring.");

static PyObject *router_preference(RouterObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get_preference_list expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    if (!PyLong_Check(args[1]) || PyBool_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "n must be int, not %.200s", Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();
        PyObject *zero = PyLong_FromLong(0);
        int negative = zero ? PyObject_RichCompareBool(args[1], zero, Py_LT) : -1;
        Py_XDECREF(zero);
        if (negative < 0)
            return NULL;
        n = negative ? -1 : PY_SSIZE_T_MAX;
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "n must be >= 0");
        return NULL;
    }
    uint32_t hash;
    if (key_hash(self, args[0], &hash) < 0)
        return NULL;
    size_t want = (size_t)n < chash_ring_node_count(self->ring) ? (size_t)n
                                                                  : chash_ring_node_count(self->ring);
    size_t *owners = PyMem_New(size_t, want ? want : 1);
    if (!owners)
        return PyErr_NoMemory();
    size_t found;
    int status = chash_ring_preference(self->ring, hash, want, owners, &found);
    if (status != CHASH_OK) {
        PyMem_Free(owners);
        return set_status_error(status, NULL);
    }
    PyObject *result = PyList_New((Py_ssize_t)found);
    if (result)
        for (size_t i = 0; i < found; i++)
            PyList_SET_ITEM(result, (Py_ssize_t)i, Py_NewRef(entry_at(self, owners[i])->name));
    PyMem_Free(owners);
    return result;
}

PyDoc_STRVAR(calc_doc,
"_calculate_hash($self, key, /)\n--\n\n"
"The ring position (0 <= h < 2**32) of a str or bytes key.");

static PyObject *router_calculate_hash(RouterObject *self, PyObject *key)
{
    uint32_t hash;
    if (key_hash(self, key, &hash) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(hash);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

PyDoc_STRVAR(check_doc,
"_check($self, /)\n--\n\n"
"Verify every invariant of the ring; AssertionError if one is broken.");

static PyObject *router_check(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    int status = chash_ring_check(self->ring);
    if (status != CHASH_OK)
        return set_status_error(status, NULL);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(ownership_doc,
"ownership($self, /)\n--\n\n"
"{node: fraction of the 2**32 ring positions it owns}; the values sum to 1.");

static PyObject *router_ownership(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = chash_ring_node_count(self->ring);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    chash_ring_ownership(self->ring, share);
    PyObject *result = PyDict_New();
    for (size_t i = 0; result && i < n; i++) {
        PyObject *value = PyFloat_FromDouble(share[i]);
        if (!value || PyDict_SetItem(result, entry_at(self, i)->name, value) < 0)
            Py_CLEAR(result);
        Py_XDECREF(value);
    }
    PyMem_Free(share);
    return result;
}

PyDoc_STRVAR(distribution_doc,
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys route to it}, every node listed (0 included).");

static PyObject *router_key_distribution(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n;
    uint32_t *hashes = hash_keys(self, keys, &n);
    if (!hashes)
        return NULL;
    size_t nnodes = chash_ring_node_count(self->ring);
    Py_ssize_t *counts = PyMem_New(Py_ssize_t, nnodes ? nnodes : 1);
    if (!counts) {
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (nnodes ? nnodes : 1) * sizeof *counts);
    if (nnodes) {
        chash_ring_owners(self->ring, hashes, (size_t)n, hashes);
        for (Py_ssize_t i = 0; i < n; i++)
            counts[hashes[i]]++;
    }
    PyMem_Free(hashes);
    PyObject *result = PyDict_New();
    for (size_t k = 0; result && k < nnodes; k++) {
        PyObject *count = PyLong_FromSsize_t(counts[k]);
        if (!count || PyDict_SetItem(result, entry_at(self, k)->name, count) < 0)
            Py_CLEAR(result);
        Py_XDECREF(count);
    }
    PyMem_Free(counts);
    return result;
}

static PyObject *router_get_hash_ring(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_point_count(self->ring);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *value = PyLong_FromUnsignedLong(chash_ring_point(self->ring, i));
        if (!value) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, value);
    }
    return list;
}

static PyObject *router_get_node_map(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_point_count(self->ring);
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        uint32_t value = chash_ring_point(self->ring, i);
        /* Points sharing a value: the first (smallest node id) owns it. */
        if (i && chash_ring_point(self->ring, i - 1) == value)
            continue;
        PyObject *key = PyLong_FromUnsignedLong(value);
        NodeEntry *entry = entry_at(self, chash_ring_point_owner(self->ring, i));
        if (!key || PyDict_SetItem(dict, key, entry->name) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(key);
    }
    return dict;
}

static PyObject *router_get_nodes(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_node_count(self->ring);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++)
        PyList_SET_ITEM(list, (Py_ssize_t)i, Py_NewRef(entry_at(self, i)->name));
    return list;
}

static PyObject *router_get_weights(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_node_count(self->ring);
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        NodeEntry *entry = entry_at(self, i);
        PyObject *weight = PyFloat_FromDouble(entry->weight);
        if (!weight || PyDict_SetItem(dict, entry->name, weight) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(weight);
    }
    return dict;
}

static PyObject *router_get_points(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_node_count(self->ring);
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        PyObject *count = PyLong_FromSize_t(chash_ring_node(self->ring, i).npoints);
        if (!count || PyDict_SetItem(dict, entry_at(self, i)->name, count) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(count);
    }
    return dict;
}

static PyObject *router_get_vnodes(RouterObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->base_points);
}

static PyObject *router_get_hash(RouterObject *self, void *Py_UNUSED(closure))
{
    if (self->hash_fn)
        return Py_NewRef(self->hash_fn);
    return PyUnicode_FromString(chash_hash_name(self->scheme.hash));
}

static PyObject *router_get_layout(RouterObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(chash_layout_name(self->scheme.layout));
}

static PyObject *router_get_memory(RouterObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(chash_ring_memory(self->ring));
}

PyDoc_STRVAR(fingerprint_doc,
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: layout, hash, virtual\n"
"node count and every ring point with its owner.  Equal on every process\n"
"that holds the same ring, whatever the order nodes were added in.");

static PyObject *router_fingerprint(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    /* The sorted points and their owners decide every route, so they are
     * what is summed; MD5 keeps the result the same on every platform. */
    PyObject *hash_name;
    if (self->hash_fn) {
        hash_name = PyObject_GetAttrString(self->hash_fn, "__qualname__");
        if (!hash_name) {
            PyErr_Clear();
            hash_name = PyUnicode_FromString("callable");
        }
    } else {
        hash_name = PyUnicode_FromString(chash_hash_name(self->scheme.hash));
    }
    if (!hash_name)
        return NULL;
    PyObject *parts = PyUnicode_FromFormat("%s|%U|%zu", chash_layout_name(self->scheme.layout),
                                           hash_name, self->base_points);
    Py_DECREF(hash_name);
    if (!parts)
        return NULL;
    Py_ssize_t head_len;
    const char *head = PyUnicode_AsUTF8AndSize(parts, &head_len);
    if (!head) {
        Py_DECREF(parts);
        return NULL;
    }
    size_t n = chash_ring_point_count(self->ring);
    size_t nnodes = chash_ring_node_count(self->ring);
    /* Each point is followed by the first 4 bytes of the MD5 of its owner's
     * id (its index would depend on the order nodes were added in): hashed
     * once a node, into owner_tag, not once a point. */
    unsigned char *buf = PyMem_Malloc((size_t)head_len + n * 8 + 1);
    uint8_t (*owner_tag)[4] = PyMem_Malloc((nnodes ? nnodes : 1) * sizeof *owner_tag);
    if (!buf || !owner_tag) {
        PyMem_Free(buf);
        PyMem_Free(owner_tag);
        Py_DECREF(parts);
        return PyErr_NoMemory();
    }
    for (size_t k = 0; k < nnodes; k++) {
        chash_node_view node = chash_ring_node(self->ring, k);
        uint8_t digest[CHASH_MAX_DIGEST];
        chash_digest(CHASH_HASH_MD5, node.id, node.id_len, 0, digest);
        memcpy(owner_tag[k], digest, 4);
    }
    size_t at = 0;
    memcpy(buf, head, (size_t)head_len);
    at += (size_t)head_len;
    Py_DECREF(parts);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = chash_ring_point(self->ring, i);
        buf[at++] = (unsigned char)(v >> 24);
        buf[at++] = (unsigned char)(v >> 16);
        buf[at++] = (unsigned char)(v >> 8);
        buf[at++] = (unsigned char)v;
        memcpy(buf + at, owner_tag[chash_ring_point_owner(self->ring, i)], 4);
        at += 4;
    }
    PyMem_Free(owner_tag);
    uint8_t digest[CHASH_MAX_DIGEST];
    chash_digest(CHASH_HASH_MD5, buf, at, 0, digest);
    PyMem_Free(buf);
    char hex[17];
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    return PyUnicode_FromStringAndSize(hex, 16);
}

/* ------------------------------------------------------------------ */
/* Protocols: len, in, iter, repr, ==, pickle                         */

static Py_ssize_t router_len(RouterObject *self)
{
    return (Py_ssize_t)chash_ring_node_count(self->ring);
}

static int router_contains(RouterObject *self, PyObject *node)
{
    if (!PyUnicode_Check(node))
        return 0;
    const char *id;
    Py_ssize_t id_len;
    if (node_id(node, &id, &id_len) < 0) {
        /* A str with a lone surrogate cannot be a node. */
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    return chash_ring_find(self->ring, id, (size_t)id_len, NULL) == CHASH_OK;
}

static PyObject *router_iter(RouterObject *self)
{
    PyObject *nodes = router_get_nodes(self, NULL);
    if (!nodes)
        return NULL;
    PyObject *it = PyObject_GetIter(nodes);
    Py_DECREF(nodes);
    return it;
}

static PyObject *router_repr(RouterObject *self)
{
    PyObject *hash = router_get_hash(self, NULL);
    if (!hash)
        return NULL;
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    PyObject *repr = NULL;
    if (type_name)
        repr = PyUnicode_FromFormat(
            "%U(virtual_node_count=%zu, hash=%R, layout='%s', nodes=%zu, points=%zu)",
            type_name, self->base_points, hash, chash_layout_name(self->scheme.layout),
            chash_ring_node_count(self->ring), chash_ring_point_count(self->ring));
    Py_XDECREF(type_name);
    Py_DECREF(hash);
    return repr;
}

static PyObject *router_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    RouterObject *x = (RouterObject *)a, *y = (RouterObject *)b;
    int equal = x->base_points == y->base_points && x->scheme.layout == y->scheme.layout
        && x->hash_fn == y->hash_fn && (x->hash_fn || x->scheme.hash == y->scheme.hash);
    if (equal) {
        PyObject *wa = router_get_weights(x, NULL);
        PyObject *wb = wa ? router_get_weights(y, NULL) : NULL;
        if (!wb) {
            Py_XDECREF(wa);
            return NULL;
        }
        equal = PyObject_RichCompareBool(wa, wb, Py_EQ);
        Py_DECREF(wa);
        Py_DECREF(wb);
        if (equal < 0)
            return NULL;
    }
    if (equal == 1 && chash_layout_ties(x->scheme.layout)) {
        /* The order nodes were added in breaks ties: part of the config. */
        PyObject *na = router_get_nodes(x, NULL);
        PyObject *nb = na ? router_get_nodes(y, NULL) : NULL;
        if (!nb) {
            Py_XDECREF(na);
            return NULL;
        }
        equal = PyObject_RichCompareBool(na, nb, Py_EQ);
        Py_DECREF(na);
        Py_DECREF(nb);
        if (equal < 0)
            return NULL;
    }
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

PyDoc_STRVAR(reduce_doc, "__reduce__($self, /)\n--\n\nPickle support: rebuilt node by node.");

static PyObject *router_reduce(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *hash = router_get_hash(self, NULL);
    if (!hash)
        return NULL;
    size_t n = chash_ring_node_count(self->ring);
    PyObject *nodes = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; nodes && i < n; i++) {
        NodeEntry *entry = entry_at(self, i);
        PyObject *item = Py_BuildValue("(Od)", entry->name, entry->weight);
        if (!item)
            Py_CLEAR(nodes);
        else
            PyList_SET_ITEM(nodes, (Py_ssize_t)i, item);
    }
    PyObject *result = NULL;
    /* Walks the MRO, so subclasses find the module too. */
    PyObject *module = PyType_GetModuleByDef(Py_TYPE(self), &chash_module);
    PyObject *rebuild = nodes && module ? PyObject_GetAttrString(module, "_rebuild") : NULL;
    if (rebuild)
        result = Py_BuildValue("(O(OnOsO))", rebuild, (PyObject *)Py_TYPE(self),
                               (Py_ssize_t)self->base_points, hash,
                               chash_layout_name(self->scheme.layout), nodes);
    Py_XDECREF(rebuild);
    Py_XDECREF(nodes);
    Py_DECREF(hash);
    return result;
}

PyDoc_STRVAR(rebuild_doc,
"_rebuild(cls, virtual_node_count, hash, layout, nodes, /)\n--\n\n"
"A router of class cls holding nodes, a list of (node, weight) pairs.");

static PyObject *module_rebuild(PyObject *module, PyObject *args)
{
    PyTypeObject *cls;
    Py_ssize_t vnodes;
    PyObject *hash, *nodes, *layout;
    if (!PyArg_ParseTuple(args, "O!nOOO:_rebuild", &PyType_Type, &cls, &vnodes, &hash, &layout, &nodes))
        return NULL;
    if (!PyType_IsSubtype(cls, get_state(module)->router_type)) {
        PyErr_SetString(PyExc_TypeError, "_rebuild: cls must be a ConsistentHashRouter type");
        return NULL;
    }
    PyObject *self = router_create(cls, vnodes, 1, hash, layout);
    if (!self)
        return NULL;
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq) {
        Py_DECREF(self);
        return NULL;
    }
    if (rebuilds((RouterObject *)self)) {
        /* One rebuild, not one a node. */
        Py_ssize_t n = PyTuple_GET_SIZE(seq);
        PyObject **all = PyMem_New(PyObject *, (size_t)n + 1);
        double *weights = PyMem_New(double, (size_t)n + 1);
        int status = all && weights ? 0 : -1;
        if (status < 0)
            PyErr_NoMemory();
        for (Py_ssize_t i = 0; status == 0 && i < n; i++)
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(seq, i), "Od", &all[i], &weights[i]))
                status = -1;
        if (status == 0)
            status = ketama_update((RouterObject *)self, all, weights, n, -1);
        PyMem_Free(all);
        PyMem_Free(weights);
        Py_DECREF(seq);
        if (status < 0)
            Py_CLEAR(self);
        return self;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *node;
        double weight;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(seq, i), "Od", &node, &weight)
            || add_node((RouterObject *)self, node, weight) < 0) {
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return self;
}

PyDoc_STRVAR(replace_doc,
"_replace_nodes($self, nodes, /)\n--\n\n"
"Make the ring hold exactly nodes, a list of (node, weight) pairs, added in\n"
"that order, in one step: lookups see the old ring or the new one.  For\n"
"keeping the order that breaks ties the same on several processes.");

static PyObject *router_replace_nodes(RouterObject *self, PyObject *nodes)
{
    PyObject *hash = router_get_hash(self, NULL);
    PyObject *layout = hash ? router_get_layout(self, NULL) : NULL;
    PyObject *args = layout ? Py_BuildValue("(OnOOO)", (PyObject *)Py_TYPE(self),
                                            (Py_ssize_t)self->base_points, hash, layout, nodes)
                            : NULL;
    Py_XDECREF(hash);
    Py_XDECREF(layout);
    if (!args)
        return NULL;
    PyObject *module = PyType_GetModuleByDef(Py_TYPE(self), &chash_module);
    RouterObject *fresh = module ? (RouterObject *)module_rebuild(module, args) : NULL;
    Py_DECREF(args);
    if (!fresh)
        return NULL;
    /* Swap the rings: self takes the new one, fresh releases the old one
     * (and its entries) when it goes. */
    chash_ring *ring = self->ring;
    self->ring = fresh->ring;
    fresh->ring = ring;
    Py_DECREF(fresh);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* Type and module                                                    */

static PyMethodDef router_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))router_add, METH_VARARGS | METH_KEYWORDS, add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))router_add_many, METH_VARARGS | METH_KEYWORDS, add_many_doc},
    {"remove_service_node", (PyCFunction)router_remove, METH_O, remove_doc},
    {"discard_service_node", (PyCFunction)router_discard, METH_O, discard_doc},
    {"get_target_node", (PyCFunction)router_get, METH_O, get_doc},
    {"get_target_nodes", (PyCFunction)router_get_many, METH_O, get_many_doc},
    {"get_preference_list", (PyCFunction)(void (*)(void))router_preference, METH_FASTCALL, preference_doc},
    {"ownership", (PyCFunction)router_ownership, METH_NOARGS, ownership_doc},
    {"key_distribution", (PyCFunction)router_key_distribution, METH_O, distribution_doc},
    {"fingerprint", (PyCFunction)router_fingerprint, METH_NOARGS, fingerprint_doc},
    {"_calculate_hash", (PyCFunction)router_calculate_hash, METH_O, calc_doc},
    {"_check", (PyCFunction)router_check, METH_NOARGS, check_doc},
    {"__reduce__", (PyCFunction)router_reduce, METH_NOARGS, reduce_doc},
    {"_replace_nodes", (PyCFunction)router_replace_nodes, METH_O, replace_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef router_getset[] = {
    {"virtual_node_count", (getter)router_get_vnodes, NULL,
     "Points a node of weight 1 owns.", NULL},
    {"hash_ring", (getter)router_get_hash_ring, NULL,
     "Every ring point, sorted (a new list each time).", NULL},
    {"node_map", (getter)router_get_node_map, NULL,
     "{point: node} (a new dict each time); a point shared by several nodes\n"
     "maps to the node with the smallest id (python, node layouts) or to the\n"
     "node added first (nginx, ketama, libmemcached).", NULL},
    {"nodes", (getter)router_get_nodes, NULL, "The nodes, in the order they were added.", NULL},
    {"weights", (getter)router_get_weights, NULL, "{node: weight}.", NULL},
    {"points", (getter)router_get_points, NULL, "{node: number of ring points it owns}.", NULL},
    {"hash", (getter)router_get_hash, NULL, "The hash: its name, or the callable.", NULL},
    {"layout", (getter)router_get_layout, NULL,
     "The layout: 'python', 'node', 'ketama', 'nginx' or 'libmemcached'.", NULL},
    {"memory_bytes", (getter)router_get_memory, NULL, "Heap bytes the ring engine holds.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(router_doc,
"ConsistentHashRouter(virtual_node_count=None, *, hash=None, layout='python')\n--\n\n"
"A consistent-hash ring routing keys to nodes.\n\n"
"With the defaults it routes exactly like the documented pure-Python\n"
"ConsistentHashRouter: MD5 of the key's UTF-8 bytes mod 2**32, virtual keys\n"
"'{node}_virtual_{i}', the first point >= the key's hash, wrapping around.\n"
"layout 'nginx', 'ketama' and 'libmemcached' build the rings of nginx's\n"
"hash ... consistent, libketama (twemproxy, libmemcached ketama_weighted)\n"
"and libmemcached's ketama, integer weights and ties to the node added\n"
"first included.  hash defaults to the layout's (md5; crc32 for nginx,\n"
"one_at_a_time for libmemcached); virtual_node_count to the layout's own\n"
"(python 100, node 150, ketama 160, nginx 160, libmemcached 100) and must\n"
"lie in [1, 1000000].");

static PyType_Slot router_slots[] = {
    {Py_tp_doc, (void *)router_doc},
    {Py_tp_new, router_new},
    {Py_tp_dealloc, router_dealloc},
    {Py_tp_traverse, router_traverse},
    {Py_tp_clear, router_clear},
    {Py_tp_methods, router_methods},
    {Py_tp_getset, router_getset},
    {Py_tp_repr, router_repr},
    {Py_tp_richcompare, router_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, router_iter},
    {Py_sq_length, router_len},
    {Py_sq_contains, router_contains},
    {Py_mp_length, router_len},
    {0, NULL},
};

static PyType_Spec router_spec = {
    .name = "chash.ConsistentHashRouter",
    .basicsize = sizeof(RouterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = router_slots,
};

PyDoc_STRVAR(hash_fn_doc,
"_hash(name, data, seed=0, /)\n--\n\n"
"The named hash of bytes as an int (digests read big-endian); for tests.");

static PyObject *module_hash(PyObject *Py_UNUSED(module), PyObject *args)
{
    const char *name;
    Py_buffer data;
    unsigned long long seed = 0;
    if (!PyArg_ParseTuple(args, "sy*|K:_hash", &name, &data, &seed))
        return NULL;
    chash_hash_id id;
    PyObject *result = NULL;
    if (chash_hash_by_name(name, &id) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError, "unknown hash %s", name);
    } else {
        uint8_t digest[CHASH_MAX_DIGEST];
        size_t size = chash_digest(id, data.buf, (size_t)data.len, (uint64_t)seed, digest);
        result = PyObject_CallMethod((PyObject *)&PyLong_Type, "from_bytes", "y#s",
                                     (const char *)digest, (Py_ssize_t)size, "big");
    }
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef module_methods[] = {
    {"_hash", module_hash, METH_VARARGS, hash_fn_doc},
    {"_rebuild", module_rebuild, METH_VARARGS, rebuild_doc},
    {NULL, NULL, 0, NULL},
};

/* chash_py_ring_api.ring_of: the ring of a router, for chash._strategies. */
static int ring_of(PyObject *obj, const chash_ring **ring)
{
    PyObject *module = PyType_GetModuleByDef(Py_TYPE(obj), &chash_module);
    if (!module || !PyObject_TypeCheck(obj, get_state(module)->router_type)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "router must be a ConsistentHashRouter, not %.200s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *ring = ((RouterObject *)obj)->ring;
    return 0;
}

static int module_exec(PyObject *module)
{
    module_state *state = get_state(module);
    state->router_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &router_spec, NULL);
    if (!state->router_type)
        return -1;
    if (PyModule_AddType(module, state->router_type) < 0)
        return -1;
    PyObject *hashes = PyTuple_New(CHASH_HASH_COUNT);
    if (!hashes)
        return -1;
    for (int i = 0; i < CHASH_HASH_COUNT; i++) {
        PyObject *name = PyUnicode_FromString(chash_hash_name((chash_hash_id)i));
        if (!name) {
            Py_DECREF(hashes);
            return -1;
        }
        PyTuple_SET_ITEM(hashes, i, name);
    }
    if (PyModule_AddObject(module, "HASHES", hashes) < 0) {
        Py_DECREF(hashes);
        return -1;
    }
    PyObject *layouts = PyTuple_New(CHASH_LAYOUT_COUNT);
    for (int i = 0; layouts && i < CHASH_LAYOUT_COUNT; i++) {
        PyObject *name = PyUnicode_FromString(chash_layout_name((chash_layout_id)i));
        if (!name)
            Py_CLEAR(layouts);
        else
            PyTuple_SET_ITEM(layouts, i, name);
    }
    if (!layouts || PyModule_AddObject(module, "LAYOUTS", layouts) < 0) {
        Py_XDECREF(layouts);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "MAX_VIRTUAL_NODES", MAX_VIRTUAL_NODES) < 0
        || PyModule_AddIntConstant(module, "MAX_NODE_POINTS", (long)CHASH_MAX_NODE_POINTS) < 0
        || PyModule_AddIntConstant(module, "MAX_POINTS", (long)CHASH_MAX_POINTS) < 0
        || PyModule_AddIntConstant(module, "MAX_NODES", (long)CHASH_MAX_NODES) < 0)
        return -1;
    static const chash_py_ring_api ring_api = {ring_of};
    PyObject *capsule = PyCapsule_New((void *)&ring_api, CHASH_PY_RING_API, NULL);
    if (!capsule || PyModule_AddObject(module, "_ring_api", capsule) < 0) {
        Py_XDECREF(capsule);
        return -1;
    }
    return 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg)
{
    Py_VISIT(get_state(module)->router_type);
    return 0;
}

static int module_clear(PyObject *module)
{
    Py_CLEAR(get_state(module)->router_type);
    return 0;
}

static void module_free(void *module)
{
    module_clear((PyObject *)module);
}

static PyModuleDef_Slot module_slots[] = CHASH_PY_MODULE_SLOTS(module_exec);

static struct PyModuleDef chash_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "chash._chash",
    .m_doc = "The C ring engine behind chash.ConsistentHashRouter.",
    .m_size = sizeof(module_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__chash(void)
{
    return PyModuleDef_Init(&chash_module);
}
