/*
 * router.c - the ConsistentHashRouter type: its node entries, construction
 * (argument checks, then router_empty(), the C-level constructor every
 * other way of making a router goes through), lifetime, and the method and
 * property tables that name every concern's functions (router.h).
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
    chash_scheme scheme;
    (void)chash_scheme_init(&scheme, layout, hash_id); /* both checked above */
    return (PyObject *)router_empty(type, &scheme, hash_fn, base);
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
/* The type                                                          */

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

PyType_Spec router_spec = {
    .name = "chash.ConsistentHashRouter",
    .basicsize = sizeof(RouterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = router_slots,
};

