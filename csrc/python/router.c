/*
 * router.c - the ConsistentHashRouter objects: their node entries,
 * construction (argument checks, then router_empty(), the C-level
 * constructor every other way of making a router goes through) and
 * lifetime.  The type's tables are type.c's (router.h).
 *
 * A thin heap type over the ring engine (engine/chash.h) and the point
 * schemes (engine/scheme.h).  The engine stores, for every node, a pointer
 * to a NodeEntry holding the node's str (an exact str, so releasing it
 * never runs Python code) and its weight.
 *
 * Thread safety rests on the GIL: every engine call runs with the GIL held
 * and no Python code runs between computing a node's points and handing them
 * to the engine, so no thread ever sees a half-changed ring.  A Python hash
 * callable is only ever called before the engine is touched.
 */
#include "router.h"
#include "table.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Node entries                                                       */

void free_entry(NodeEntry *entry)
{
    Py_DECREF(entry->name);
    PyMem_Free(entry);
}

/* A new NodeEntry for node (an exact str kept), or NULL with an exception. */
NodeEntry *new_entry(PyObject *node, double weight)
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
chash_ring *new_ring(chash_layout_id layout)
{
    chash_ring *ring = chash_ring_new();
    if (ring && chash_layout_ties(layout))
        (void)chash_ring_set_ties(ring, CHASH_TIES_BY_ORDER); /* empty: cannot fail */
    if (ring)
        (void)chash_ring_set_rule(ring, (chash_rule)chash_layout_rule(layout)); /* empty too */
    return ring;
}

/*
 * An empty router of type over an already valid scheme (hash_fn: NULL, or
 * the Python hash callable, kept), base_points points at weight 1.  The
 * C-level constructor: router_create() checks Python arguments first, a
 * rebuild (build.c) copies them from a router.  NULL with an exception.
 */
RouterObject *router_empty(PyTypeObject *type, const chash_scheme *scheme, PyObject *hash_fn,
                           size_t base_points)
{
    RouterObject *self = (RouterObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->ring = new_ring(scheme->layout);
    if (!self->ring) {
        Py_DECREF(self);
        PyErr_NoMemory();
        return NULL;
    }
    self->scheme = *scheme;
    self->hash_fn = Py_XNewRef(hash_fn);
    self->base_points = base_points;
    self->ids.next = 1;
    return self;
}

/*
 * A new empty router of type from the constructor's arguments: layout a
 * str naming a layout, hash None (the layout's own), a hash's name or a
 * callable, vnodes_arg the points at weight 1 when vnodes_given (else the
 * layout's default).  NULL with TypeError / ValueError naming the
 * argument; _rebuild goes through here too, so a pickle is checked as a
 * call would be.
 */
PyObject *router_create(PyTypeObject *type, Py_ssize_t vnodes_arg, int vnodes_given,
                        PyObject *hash, PyObject *layout_obj)
{
    const char *layout_name = name_arg(layout_obj, "layout");
    if (!layout_name)
        return NULL;
    chash_layout_id layout;
    if (chash_layout_by_name(layout_name, &layout) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError,
                     "unknown layout '%s': expected 'python', 'node', 'ketama', 'nginx', 'libmemcached', 'haproxy', 'envoy' or 'grpc'", layout_name);
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
                         "xxh32, xxh64, xxh3, fnv1a, crc32, one_at_a_time, sdbm, djb2, wt6, "
                         "sdbm_avalanche, djb2_avalanche, wt6_avalanche, crc32_avalanche, "
                         "or a callable", hash);
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
    if (layout == CHASH_LAYOUT_HAPROXY) {
        chash_scheme probe;
        if (hash_fn || chash_scheme_init(&probe, layout, hash_id) != CHASH_OK) {
            PyErr_SetString(PyExc_ValueError,
                            "the haproxy layout takes hash 'sdbm', 'djb2', 'wt6' or 'crc32', "
                            "each also with '_avalanche' (default 'sdbm_avalanche')");
            return NULL;
        }
        if (vnodes_given && base != CHASH_HAPROXY_WEIGHT_SCALE) {
            PyErr_Format(PyExc_ValueError,
                         "the haproxy layout gives %d points per unit of weight, "
                         "not virtual_node_count=%zu", CHASH_HAPROXY_WEIGHT_SCALE, base);
            return NULL;
        }
    }
    chash_scheme scheme;
    (void)chash_scheme_init(&scheme, layout, hash_id); /* both checked above */
    return (PyObject *)router_empty(type, &scheme, hash_fn, base);
}

/* The envoy and grpc layouts (64-bit rings, table.h) are a subtype of
 * their own; 1 when layout names one of them, 0 otherwise. */
static int wide_layout(PyObject *layout)
{
    return layout && PyUnicode_Check(layout)
           && (PyUnicode_CompareWithASCIIString(layout, "envoy") == 0
               || PyUnicode_CompareWithASCIIString(layout, "grpc") == 0);
}

PyObject *router_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"virtual_node_count", "hash", "layout", "minimum_ring_size",
                             "maximum_ring_size", NULL};
    PyObject *vnodes = Py_None, *hash = NULL, *layout = NULL, *min_ring = NULL, *max_ring = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OOOO:ConsistentHashRouter", kwlist,
                                     &vnodes, &hash, &layout, &min_ring, &max_ring))
        return NULL;
    if (wide_layout(layout)) {
        PyObject *module = PyType_GetModuleByDef(type, &chash_module);
        if (module && type != get_state(module)->router_type) {
            PyErr_SetString(PyExc_TypeError,
                            "the envoy and grpc layouts make a ConsistentHashRouter of their "
                            "own type and cannot be used from a subclass");
            return NULL;
        }
        return module ? wide_ring_create(module, layout, vnodes, hash, min_ring, max_ring) : NULL;
    }
    if ((min_ring && min_ring != Py_None) || (max_ring && max_ring != Py_None)) {
        PyErr_SetString(PyExc_ValueError,
                        "minimum_ring_size and maximum_ring_size apply to the envoy and grpc "
                        "layouts only");
        return NULL;
    }
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

int router_traverse(RouterObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->hash_fn);
    Py_VISIT(self->zones);
    return 0;
}

int router_clear(RouterObject *self)
{
    Py_CLEAR(self->hash_fn);
    Py_CLEAR(self->zones);
    return 0;
}

void router_dealloc(RouterObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    router_clear(self);
    clear_nodes(self);
    haproxy_ids_free(&self->ids);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}
