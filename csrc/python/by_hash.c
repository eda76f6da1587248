/*
 * by_hash.c - lookups by a hash the caller computed: reading hash
 * arguments (range-checked by the router's point width) and the ring's
 * get_target_node_by_hash / get_target_nodes_by_hash.  The 64-bit routers
 * (table.c) read their hash arguments here too.  Part of chash._chash
 * (router.h).
 */
#include "router.h"

/* A hash argument: an int in [0, 2**bits - 1] (bits 32 or 64), into *out;
 * 0, or -1 with TypeError (not an int, or a bool) or ValueError naming
 * the range and the layout. */
int parse_hash_arg(PyObject *obj, unsigned bits, const char *layout, uint64_t *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "hash must be int, not %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    /* Negative ints and ints of more than 64 bits raise OverflowError. */
    unsigned long long value = PyLong_AsUnsignedLongLong(obj);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        overflow = 1;
    }
    if (overflow || (bits < 64 && value >> bits)) {
        PyErr_Format(PyExc_ValueError,
                     "hash must be between 0 and 2**%u - 1 for the %s layout (%u-bit points), not %R",
                     bits, layout, bits, obj);
        return -1;
    }
    *out = (uint64_t)value;
    return 0;
}

/* Every hash of an iterable of ints, range-checked, in a PyMem buffer the
 * caller frees; *n receives how many.  NULL with an exception set. */
uint64_t *parse_hash_args(PyObject *hashes, unsigned bits, const char *layout, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(hashes, "hashes must be an iterable of int");
    if (!seq)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    uint64_t *out = PyMem_New(uint64_t, *n ? (size_t)*n : 1);
    if (!out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < *n; i++) {
        if (parse_hash_arg(items[i], bits, layout, &out[i]) < 0) {
            PyMem_Free(out);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return out;
}

const char get_by_hash_doc[] = PyDoc_STR(
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"The node owning the first ring point >= hash, wrapping around, for a hash\n"
"computed by the caller (an int from 0 to 2**32 - 1); None on an empty ring.");

PyObject *router_get_by_hash(RouterObject *self, PyObject *hash)
{
    uint64_t h;
    if (parse_hash_arg(hash, 32, chash_layout_name(self->scheme.layout), &h) < 0)
        return NULL;
    void *entry;
    if (chash_ring_lookup(self->ring, (uint32_t)h, &entry) != CHASH_OK)
        Py_RETURN_NONE;
    return Py_NewRef(((NodeEntry *)entry)->name);
}

const char get_many_by_hash_doc[] = PyDoc_STR(
"get_target_nodes_by_hash($self, hashes, /)\n--\n\n"
"get_target_node_by_hash for every hash of an iterable of ints, as a list;\n"
"all are checked before any is looked up.");

PyObject *router_get_many_by_hash(RouterObject *self, PyObject *hashes)
{
    Py_ssize_t n;
    uint64_t *wide = parse_hash_args(hashes, 32, chash_layout_name(self->scheme.layout), &n);
    if (!wide)
        return NULL;
    uint32_t *owners = PyMem_New(uint32_t, n ? (size_t)n : 1);
    PyObject *result = owners ? PyList_New(n) : PyErr_NoMemory();
    if (result && chash_ring_point_count(self->ring) == 0) {
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
    } else if (result) {
        for (Py_ssize_t i = 0; i < n; i++)
            owners[i] = (uint32_t)wide[i];
        chash_ring_owners(self->ring, owners, (size_t)n, owners);
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(entry_at(self, owners[i])->name));
    }
    PyMem_Free(owners);
    PyMem_Free(wide);
    return result;
}
