/*
 * node_names.c - building the next tuple of node names for a change or a
 * replacement (node_names.h).  Part of chash._chash.
 */
#include "node_names.h"

#include "args.h"

#include <string.h>

/* name as an exact str (a new reference), or NULL with an exception. */
static PyObject *exact_str(PyObject *name)
{
    return chash_py_node_name(name);
}

/* Appends name to names unless seen maps it already; then copies its
 * weight (size bytes at weight) to its position in weights. */
static int place(PyObject *names, PyObject *seen, PyObject *name, const char *weight,
                 size_t size, char *weights)
{
    Py_ssize_t slot;
    PyObject *at = PyDict_GetItemWithError(seen, name);
    if (at) {
        slot = PyLong_AsSsize_t(at);
        if (slot < 0)
            return -1;
    } else if (PyErr_Occurred()) {
        return -1;
    } else {
        slot = PyList_GET_SIZE(names);
        PyObject *pos = PyLong_FromSsize_t(slot);
        int added = pos && PyList_Append(names, name) == 0 && PyDict_SetItem(seen, name, pos) == 0;
        Py_XDECREF(pos);
        if (!added)
            return -1;
    }
    memcpy(weights + (size_t)slot * size, weight, size);
    return 0;
}

PyObject *node_names_merge(PyObject *old, Py_ssize_t drop, PyObject *const *add, Py_ssize_t nadd,
                           const void *old_weights, const void *add_weights, size_t size,
                           void *weights)
{
    Py_ssize_t old_n = PyTuple_GET_SIZE(old);
    PyObject *names = PyList_New(0);
    PyObject *seen = PyDict_New();
    int result = names && seen ? 0 : -1;
    for (Py_ssize_t k = 0; result == 0 && k < old_n; k++)
        if (k != drop)
            result = place(names, seen, PyTuple_GET_ITEM(old, k),
                           (const char *)old_weights + (size_t)k * size, size, weights);
    for (Py_ssize_t i = 0; result == 0 && i < nadd; i++) {
        PyObject *name = exact_str(add[i]);
        result = name ? place(names, seen, name, (const char *)add_weights + (size_t)i * size,
                              size, weights)
                      : -1;
        Py_XDECREF(name);
    }
    PyObject *tuple = result == 0 ? PyList_AsTuple(names) : NULL;
    Py_XDECREF(names);
    Py_XDECREF(seen);
    return tuple;
}

PyObject *node_names_of_pairs(PyObject *pairs, node_weight_reader read, void *ctx)
{
    Py_ssize_t n = PyTuple_GET_SIZE(pairs);
    PyObject *nodes = PyTuple_New(n);
    PyObject *seen = PySet_New(NULL);
    int result = nodes && seen ? 0 : -1;
    for (Py_ssize_t i = 0; result == 0 && i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        const char *id;
        Py_ssize_t len;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_TypeError, "nodes must hold (node, weight) tuples, not %.200s",
                         Py_TYPE(pair)->tp_name);
            result = -1;
            break;
        }
        PyObject *node = PyTuple_GET_ITEM(pair, 0);
        if (node_id(node, &id, &len) < 0 || read(ctx, PyTuple_GET_ITEM(pair, 1), i) < 0) {
            result = -1;
            break;
        }
        PyObject *name = exact_str(node);
        if (!name) {
            result = -1;
            break;
        }
        PyTuple_SET_ITEM(nodes, i, name);
        int dup = PySet_Contains(seen, name);
        if (dup == 0)
            dup = PySet_Add(seen, name) < 0 ? -1 : 0;
        else if (dup == 1)
            PyErr_Format(PyExc_ValueError, "node %R is given twice", name);
        result = dup == 0 ? 0 : -1;
    }
    Py_XDECREF(seen);
    if (result < 0)
        Py_CLEAR(nodes);
    return nodes;
}
