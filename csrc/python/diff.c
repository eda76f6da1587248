/*
 * diff.c - chash.Move, what every diff() shares, and the per-key
 * comparison of two routers where there are no arcs (diff.h).  Part of
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

/* router.get_target_nodes(keys) as a list of len(keys); NULL with an exception. */
static PyObject *owners(PyObject *router, PyObject *keys)
{
    PyObject *list = PyObject_CallMethod(router, "get_target_nodes", "O", keys);
    if (list && (!PyList_CheckExact(list) || PyList_GET_SIZE(list) != PyList_GET_SIZE(keys))) {
        PyErr_Format(PyExc_TypeError,
                     "_moving_keys: get_target_nodes of %.200s gave no list of one owner a key",
                     Py_TYPE(router)->tp_name);
        Py_CLEAR(list);
    }
    return list;
}

PyDoc_STRVAR(moving_keys_doc,
"_moving_keys(old, new, keys, /)\n--\n\n"
"[(key, source, target)] for the keys of the list keys whose owner differs\n"
"between the routers old and new (get_target_nodes of each, one batch),\n"
"in the keys' order; a key either router has no owner for is left out.");

static PyObject *moving_keys(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "_moving_keys() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *keys = args[2];
    if (!PyList_CheckExact(keys)) {
        PyErr_Format(PyExc_TypeError, "_moving_keys: keys must be a list, not %.200s",
                     Py_TYPE(keys)->tp_name);
        return NULL;
    }
    PyObject *before = owners(args[0], keys);
    PyObject *after = before ? owners(args[1], keys) : NULL;
    PyObject *out = after ? PyList_New(0) : NULL;
    /* The router calls may have run Python code: the lengths are checked
     * against the keys list as it is now. */
    Py_ssize_t n = out ? PyList_GET_SIZE(keys) : 0;
    if (out && (PyList_GET_SIZE(before) != n || PyList_GET_SIZE(after) != n)) {
        PyErr_SetString(PyExc_RuntimeError, "_moving_keys: keys changed during the call");
        Py_CLEAR(out);
        n = 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *source = PyList_GET_ITEM(before, i), *target = PyList_GET_ITEM(after, i);
        if (source == target || source == Py_None || target == Py_None)
            continue;
        int same = PyObject_RichCompareBool(source, target, Py_EQ);
        PyObject *item = same == 0 ? PyTuple_Pack(3, PyList_GET_ITEM(keys, i), source, target)
                                   : NULL;
        if (same < 0 || (same == 0 && (!item || PyList_Append(out, item) < 0))) {
            Py_XDECREF(item);
            Py_CLEAR(out);
            break;
        }
        Py_XDECREF(item);
    }
    Py_XDECREF(before);
    Py_XDECREF(after);
    return out;
}

static PyMethodDef diff_methods[] = {
    {"_moving_keys", (PyCFunction)(void (*)(void))moving_keys, METH_FASTCALL, moving_keys_doc},
    {NULL, NULL, 0, NULL},
};

int diff_module_setup(PyObject *module)
{
    if (PyModule_AddFunctions(module, diff_methods) < 0)
        return -1;
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
