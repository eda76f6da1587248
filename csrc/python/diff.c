/*
 * diff.c - chash.Move and what every diff() shares (diff.h).  Part of
 * chash._chash.
 */
#include "diff.h"

#include "state.h"

PyObject *diff_plain_moves(const chash_move *moves, size_t n, PyObject *from, PyObject *to,
                           diff_node_of node_of)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *item = Py_BuildValue("(KKOO)", (unsigned long long)moves[i].start,
                                       (unsigned long long)moves[i].end,
                                       node_of(from, moves[i].source),
                                       node_of(to, moves[i].target));
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

int diff_as_moves(PyObject *list, PyObject *move_type)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *move = PyObject_CallObject(move_type, PyList_GET_ITEM(list, i));
        if (!move)
            return -1;
        PyList_SetItem(list, i, move); /* steals move, drops the tuple */
    }
    return 0;
}

PyObject *diff_error(int status)
{
    if (status == CHASH_EINVAL) {
        PyErr_SetString(PyExc_ValueError,
                        "diff() of an empty and a non-empty router: the empty one's keys have "
                        "no owner");
        return NULL;
    }
    return chash_py_error(status, NULL, "diff");
}

/* A layout's description for messages: "layout 'nginx', hash 'crc32'". */
static PyObject *describe(PyObject *router)
{
    PyObject *layout = PyObject_GetAttrString(router, "layout");
    PyObject *hash = layout ? PyObject_GetAttrString(router, "hash") : NULL;
    PyObject *text = hash ? PyUnicode_FromFormat("layout %R, hash %R", layout, hash) : NULL;
    Py_XDECREF(layout);
    Py_XDECREF(hash);
    return text;
}

PyObject *diff_mismatch(PyObject *a, PyObject *b)
{
    PyObject *da = describe(a);
    PyObject *db = da ? describe(b) : NULL;
    if (db)
        PyErr_Format(PyExc_ValueError,
                     "diff() needs two routers of the same layout and hash, not %U and %U", da,
                     db);
    Py_XDECREF(da);
    Py_XDECREF(db);
    return NULL;
}

int diff_module_setup(PyObject *module)
{
    PyObject *collections = PyImport_ImportModule("collections");
    if (!collections)
        return -1;
    PyObject *move = PyObject_CallMethod(collections, "namedtuple", "ss", "Move",
                                         "start end source target");
    Py_DECREF(collections);
    if (!move)
        return -1;
    PyObject *where = PyUnicode_FromString("chash");
    PyObject *doc = PyUnicode_FromString(
        "Move(start, end, source, target): the hashes h with start < h <= end\n"
        "(wrapping past the top of the ring when start > end; the whole ring\n"
        "when start == end) move from node source to node target.");
    int bad = !where || !doc || PyObject_SetAttrString(move, "__module__", where) < 0
              || PyObject_SetAttrString(move, "__doc__", doc) < 0;
    Py_XDECREF(where);
    Py_XDECREF(doc);
    if (bad) {
        Py_DECREF(move);
        return -1;
    }
    get_state(module)->move_type = Py_NewRef(move);
    int status = PyModule_AddObjectRef(module, "Move", move);
    Py_DECREF(move);
    return status;
}
