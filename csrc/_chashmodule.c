/*
 * _chashmodule.c - chash._chash, the router's binding: the module and the
 * ConsistentHashRouter type.  With _chash_strategies.c (chash._strategies)
 * one Python-aware layer; what both extensions need lives once in
 * _chash_binding.h, what the router's files share in _chash_router.h.
 *
 * A thin heap type over the ring engine (chash.h) and the point schemes
 * (chash_scheme.h).  The engine stores, for every node, a pointer to a
 * NodeEntry holding the node's str (an exact str, so releasing it never
 * runs Python code) and its weight.
 *
 * Thread safety rests on the GIL: every engine call runs with the GIL held
 * and no Python code runs between computing a node's points and handing them
 * to the engine, so no thread ever sees a half-changed ring.  A Python hash
 * callable is only ever called before the engine is touched.
 */
#include "_chash_router.h"

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

struct PyModuleDef chash_module = {
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

