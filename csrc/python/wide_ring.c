/*
 * wide_ring.c - ConsistentHashRouter(layout="envoy" | "grpc"): Envoy's
 * RING_HASH and gRPC's ring_hash, 64-bit points on a ring rebuilt whole
 * (table.h).  The constructor of ConsistentHashRouter hands these layouts
 * to wide_ring_create(), which returns this subtype, so the object is a
 * ConsistentHashRouter whose methods are the ones below.  Part of
 * chash._chash.
 */
#include "table.h"

/* A ring size argument: None (the default) or an int in [1, 8388608],
 * Envoy's and gRPC's accepted range; 0 or -1 with an exception. */
static int ring_size_arg(PyObject *obj, const char *name, uint64_t fallback, uint64_t *out)
{
    *out = fallback;
    if (obj == NULL || obj == Py_None)
        return 0;
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be int, not %.200s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < 1 || (uint64_t)v > WIDE_RING_LIMIT) {
        PyErr_Format(PyExc_ValueError, "%s must be between 1 and %llu, not %R", name,
                     (unsigned long long)WIDE_RING_LIMIT, obj);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

PyObject *wide_ring_create(PyObject *module, PyObject *layout, PyObject *vnodes, PyObject *hash,
                           PyObject *min_ring, PyObject *max_ring)
{
    table_kind kind;
    if (PyUnicode_Check(layout) && PyUnicode_CompareWithASCIIString(layout, "envoy") == 0)
        kind = TABLE_ENVOY;
    else if (PyUnicode_Check(layout) && PyUnicode_CompareWithASCIIString(layout, "grpc") == 0)
        kind = TABLE_GRPC;
    else {
        PyErr_Format(PyExc_ValueError, "not a 64-bit ring layout: %R", layout);
        return NULL;
    }
    const char *name = kind == TABLE_ENVOY ? "envoy" : "grpc";
    if (vnodes && vnodes != Py_None) {
        PyErr_Format(PyExc_ValueError,
                     "the %s layout sizes its ring by minimum_ring_size and maximum_ring_size, "
                     "not virtual_node_count", name);
        return NULL;
    }
    chash_point_hash point_hash;
    uint64_t lo, hi;
    if (table_parse_hash(hash, kind == TABLE_ENVOY, name, &point_hash) < 0
        || ring_size_arg(min_ring, "minimum_ring_size", ENVOY_MIN_RING, &lo) < 0
        || ring_size_arg(max_ring, "maximum_ring_size",
                         kind == TABLE_ENVOY ? ENVOY_MAX_RING : GRPC_MAX_RING, &hi) < 0)
        return NULL;
    if (lo > hi) {
        PyErr_Format(PyExc_ValueError, "minimum_ring_size (%llu) > maximum_ring_size (%llu)",
                     (unsigned long long)lo, (unsigned long long)hi);
        return NULL;
    }
    PyTypeObject *type = get_state(module)->wide_ring_type;
    return (PyObject *)table_alloc(type, kind, point_hash, lo, hi, 0);
}

static PyObject *wide_get_hash_ring(TableObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_wide_count(self->ring);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *value = PyLong_FromUnsignedLongLong(chash_wide_point(self->ring, i));
        if (!value)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, value);
    }
    return list;
}

static PyObject *wide_get_node_map(TableObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_wide_count(self->ring);
    PyObject *map = PyDict_New();
    /* Walked backwards so a shared value keeps the owner the ring uses. */
    for (size_t i = n; map && i-- > 0;) {
        PyObject *value = PyLong_FromUnsignedLongLong(chash_wide_point(self->ring, i));
        PyObject *node = PyTuple_GET_ITEM(self->nodes, chash_wide_owner(self->ring, i));
        if (!value || PyDict_SetItem(map, value, node) < 0)
            Py_CLEAR(map);
        Py_XDECREF(value);
    }
    return map;
}

static PyObject *wide_get_min(TableObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->min_ring);
}

static PyObject *wide_get_max(TableObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->max_ring);
}

static PyObject *wide_get_vnodes(TableObject *self, void *Py_UNUSED(closure))
{
    (void)self;
    return PyLong_FromLong(0);
}

static const char wide_get_by_hash_doc[] = PyDoc_STR(
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"The node owning the first ring point >= hash, wrapping around, for a\n"
"64-bit hash computed by the caller (0 to 2**64 - 1), as Envoy's and\n"
"gRPC's pickers look it up; None on an empty ring.");

static const char wide_get_doc[] = PyDoc_STR(
"get_target_node($self, request_key, /)\n--\n\n"
"The node owning the first ring point >= XXH64(key), wrapping around, as\n"
"Envoy's header hash policy and gRPC's request_hash_header route; None\n"
"when the ring is empty.");

static const char wide_preference_doc[] = PyDoc_STR(
"get_preference_list($self, key, n, /, *, distinct_zones=False)\n--\n\n"
"The first n distinct nodes met clockwise from the key, its owner first\n"
"(a host the ring had no room for owns no point and is never met); with\n"
"distinct_zones, each in a zone not yet in the list (a node without a zone\n"
"counts as a zone of its own).");

static PyMethodDef wide_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))table_add_zoned, METH_VARARGS | METH_KEYWORDS, wide_zoned_add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))table_add_many, METH_VARARGS | METH_KEYWORDS, table_add_many_doc},
    {"remove_service_node", (PyCFunction)table_remove_zoned, METH_O, table_remove_doc},
    {"discard_service_node", (PyCFunction)table_discard_zoned, METH_O, table_discard_doc},
    {"get_target_node", (PyCFunction)table_get, METH_O, wide_get_doc},
    {"get_target_nodes", (PyCFunction)table_get_many, METH_O, table_get_many_doc},
    {"get_target_node_by_hash", (PyCFunction)table_get_by_hash, METH_O, wide_get_by_hash_doc},
    {"get_target_nodes_by_hash", (PyCFunction)table_get_many_by_hash, METH_O, table_get_many_by_hash_doc},
    {"get_preference_list", (PyCFunction)(void (*)(void))table_preference_zoned, METH_FASTCALL | METH_KEYWORDS, wide_preference_doc},
    {"ownership", (PyCFunction)table_ownership, METH_NOARGS, table_ownership_doc},
    {"key_distribution", (PyCFunction)table_key_distribution, METH_O, table_distribution_doc},
    {"fingerprint", (PyCFunction)table_fingerprint, METH_NOARGS, table_fingerprint_doc},
    /* diff and the zones' own entries read the 64-bit ring themselves (diff.c, zones.c). */
    {"diff", (PyCFunction)router_diff, METH_O, diff_doc},
    {"__setstate__", (PyCFunction)router_setstate, METH_O, setstate_doc},
    {"_calculate_hash", (PyCFunction)table_calculate_hash, METH_O, table_calc_doc},
    {"_check", (PyCFunction)table_check, METH_NOARGS, table_check_doc},
    {"__reduce__", (PyCFunction)table_reduce_zoned, METH_NOARGS, table_reduce_doc},
    {"_replace_nodes", (PyCFunction)table_replace_zoned, METH_O, table_replace_doc},
    {NULL, NULL, 0, NULL},
};

/* Server ids belong to the haproxy layout: these layouts have none. */
static PyObject *
wide_get_ids(PyObject *self, void *Py_UNUSED(closure))
{
    (void)self;
    return PyDict_New();
}

static PyGetSetDef wide_getset[] = {
    {"virtual_node_count", (getter)wide_get_vnodes, NULL,
     "0: the envoy and grpc layouts size the ring by minimum/maximum_ring_size.", NULL},
    {"minimum_ring_size", (getter)wide_get_min, NULL, "The minimum ring size given.", NULL},
    {"maximum_ring_size", (getter)wide_get_max, NULL,
     "The maximum ring size given (gRPC caps both at 4096).", NULL},
    {"hash_ring", (getter)wide_get_hash_ring, NULL, "Every 64-bit ring point, sorted.", NULL},
    {"node_map", (getter)wide_get_node_map, NULL, "{point: node} (a new dict each time).", NULL},
    {"nodes", (getter)table_get_nodes, NULL, "The nodes, in the order they were added.", NULL},
    {"weights", (getter)table_get_weights, NULL, "{node: weight}.", NULL},
    {"points", (getter)table_get_points, NULL,
     "{node: number of ring points it owns} (0 for a host the ring has no room for).", NULL},
    {"hash", (getter)table_get_hash, NULL, "The point hash: 'xxh64' or 'murmur2_64'.", NULL},
    {"layout", (getter)table_get_layout, NULL, "'envoy' or 'grpc'.", NULL},
    {"memory_bytes", (getter)table_get_memory, NULL, "Heap bytes the ring holds.", NULL},
    {"zones", (getter)router_get_zones, NULL,
     "{node: zone} of the nodes added with a zone (a new dict each time).", NULL},
    {"ids", (getter)wide_get_ids, NULL,
     "{}: server ids are the haproxy layout's; these layouts number no server.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(wide_doc,
"A ConsistentHashRouter of the envoy or grpc layout: 64-bit points\n"
"'{node}_{i}' hashed with XXH64 (or murmur2_64), counts by Envoy's rule,\n"
"rebuilt on every change.  Made by ConsistentHashRouter(layout=...).");

static PyType_Slot wide_slots[] = {
    {Py_tp_doc, (void *)wide_doc},
    {Py_tp_dealloc, table_dealloc},
    {Py_tp_traverse, table_traverse},
    {Py_tp_clear, table_clear},
    {Py_tp_methods, wide_methods},
    {Py_tp_getset, wide_getset},
    {Py_tp_repr, table_repr},
    {Py_tp_richcompare, table_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, table_iter},
    {Py_sq_length, table_len},
    {Py_sq_contains, table_contains},
    {Py_mp_length, table_len},
    {0, NULL},
};

PyType_Spec wide_ring_spec = {
    .name = "chash.ConsistentHashRouter",
    .basicsize = sizeof(TableObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = wide_slots,
};
