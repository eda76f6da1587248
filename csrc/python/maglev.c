/*
 * maglev.c - chash.MaglevRouter: Envoy's MAGLEV load balancer as a router
 * (table.h).  Hosts are sorted by key; host k's permutation starts at
 * XXH64(key, 0) % M and steps by XXH64(key, 1) % (M - 1) + 1; the table is
 * filled by turns weighted by the normalised weights
 * (chash_maglev_build_weighted), and rebuilt on every change.  A key goes
 * to table[XXH64(key) % M].  Part of chash._chash.
 */
#include "table.h"

#include "strategies/strategies.h"

static PyObject *maglev_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"table_size", "hash", "layout", NULL};
    PyObject *size_obj = NULL, *hash = NULL, *layout = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OO:MaglevRouter", kwlist, &size_obj, &hash,
                                     &layout))
        return NULL;
    size_t size = CHASH_MAGLEV_DEFAULT_TABLE;
    if (size_obj) {
        if (!PyLong_Check(size_obj) || PyBool_Check(size_obj)) {
            PyErr_Format(PyExc_TypeError, "table_size must be int, not %.200s",
                         Py_TYPE(size_obj)->tp_name);
            return NULL;
        }
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(size_obj, &overflow);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (overflow || v < 2 || (unsigned long long)v > CHASH_MAGLEV_MAX_TABLE
            || !chash_is_prime((size_t)v)) {
            PyErr_Format(PyExc_ValueError,
                         "table_size must be a prime from 2 to %zu (Envoy: \"The table size of "
                         "maglev must be prime number\"), not %R",
                         (size_t)CHASH_MAGLEV_MAX_TABLE, size_obj);
            return NULL;
        }
        size = (size_t)v;
    }
    if (layout && !(PyUnicode_Check(layout) && PyUnicode_CompareWithASCIIString(layout, "envoy") == 0)) {
        PyErr_Format(PyExc_ValueError, "MaglevRouter's layout must be 'envoy', not %R", layout);
        return NULL;
    }
    chash_point_hash point_hash;
    if (table_parse_hash(hash, 0, "maglev", &point_hash) < 0)
        return NULL;
    return (PyObject *)table_alloc(type, TABLE_MAGLEV, point_hash, 0, 0, size);
}

static PyObject *maglev_get_table(TableObject *self, void *Py_UNUSED(closure))
{
    if (!self->table)
        return PyList_New(0);
    PyObject *list = PyList_New((Py_ssize_t)self->table_size);
    for (size_t e = 0; list && e < self->table_size; e++)
        PyList_SET_ITEM(list, (Py_ssize_t)e, Py_NewRef(PyTuple_GET_ITEM(self->nodes, self->table[e])));
    return list;
}

static PyObject *maglev_get_size(TableObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->table_size);
}

static const char maglev_get_doc[] = PyDoc_STR(
"get_target_node($self, request_key, /)\n--\n\n"
"table[XXH64(key) % table_size], as Envoy's Maglev routes a header hash;\n"
"None when there is no node.");

static const char maglev_get_by_hash_doc[] = PyDoc_STR(
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"table[hash % table_size] for a 64-bit hash computed by the caller (0 to\n"
"2**64 - 1); None when there is no node.");

static const char maglev_preference_doc[] = PyDoc_STR(
"get_preference_list($self, key, n, /)\n--\n\n"
"n distinct nodes in the order Envoy's retries meet them: attempt a looks\n"
"up the key's hash XOR (2**64 - a); after table_size attempts, any node\n"
"not met follows in add order.");

static PyMethodDef maglev_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))table_add, METH_VARARGS | METH_KEYWORDS, table_add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))table_add_many, METH_VARARGS | METH_KEYWORDS, table_add_many_doc},
    {"remove_service_node", (PyCFunction)table_remove, METH_O, table_remove_doc},
    {"discard_service_node", (PyCFunction)table_discard, METH_O, table_discard_doc},
    {"get_target_node", (PyCFunction)table_get, METH_O, maglev_get_doc},
    {"get_target_nodes", (PyCFunction)table_get_many, METH_O, table_get_many_doc},
    {"get_target_node_by_hash", (PyCFunction)table_get_by_hash, METH_O, maglev_get_by_hash_doc},
    {"get_target_nodes_by_hash", (PyCFunction)table_get_many_by_hash, METH_O, table_get_many_by_hash_doc},
    {"get_preference_list", (PyCFunction)(void (*)(void))table_preference, METH_FASTCALL, maglev_preference_doc},
    {"ownership", (PyCFunction)table_ownership, METH_NOARGS, table_ownership_doc},
    {"key_distribution", (PyCFunction)table_key_distribution, METH_O, table_distribution_doc},
    {"fingerprint", (PyCFunction)table_fingerprint, METH_NOARGS, table_fingerprint_doc},
    {"diff", (PyCFunction)maglev_diff, METH_O, maglev_diff_doc},
    {"_calculate_hash", (PyCFunction)table_calculate_hash, METH_O, table_calc_doc},
    {"_check", (PyCFunction)table_check, METH_NOARGS, table_check_doc},
    {"__reduce__", (PyCFunction)table_reduce, METH_NOARGS, table_reduce_doc},
    {"_replace_nodes", (PyCFunction)table_replace_nodes, METH_O, table_replace_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef maglev_getset[] = {
    {"table", (getter)maglev_get_table, NULL,
     "The lookup table: the node of every entry (a new list; [] with no node).", NULL},
    {"table_size", (getter)maglev_get_size, NULL, "The table's size M (a prime).", NULL},
    {"nodes", (getter)table_get_nodes, NULL, "The nodes, in the order they were added.", NULL},
    {"weights", (getter)table_get_weights, NULL, "{node: weight}.", NULL},
    {"points", (getter)table_get_points, NULL, "{node: number of table entries it holds}.", NULL},
    {"hash", (getter)table_get_hash, NULL, "The hash: 'xxh64'.", NULL},
    {"layout", (getter)table_get_layout, NULL, "'envoy'.", NULL},
    {"memory_bytes", (getter)table_get_memory, NULL, "Heap bytes the table holds.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(maglev_doc,
"MaglevRouter(table_size=65537, *, hash='xxh64', layout='envoy')\n--\n\n"
"Envoy's Maglev as a router: a lookup table of table_size entries (a\n"
"prime), rebuilt in C on every change, filled from the hosts sorted by id\n"
"with weighted turns; a key goes to table[XXH64(key) % table_size].\n"
"Weights are integers from 1 to 2**32 - 1, as Envoy's.");

static PyType_Slot maglev_slots[] = {
    {Py_tp_doc, (void *)maglev_doc},
    {Py_tp_new, maglev_new},
    {Py_tp_dealloc, table_dealloc},
    {Py_tp_traverse, table_traverse},
    {Py_tp_clear, table_clear},
    {Py_tp_methods, maglev_methods},
    {Py_tp_getset, maglev_getset},
    {Py_tp_repr, table_repr},
    {Py_tp_richcompare, table_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, table_iter},
    {Py_sq_length, table_len},
    {Py_sq_contains, table_contains},
    {Py_mp_length, table_len},
    {0, NULL},
};

PyType_Spec maglev_spec = {
    .name = "chash.MaglevRouter",
    .basicsize = sizeof(TableObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = maglev_slots,
};
