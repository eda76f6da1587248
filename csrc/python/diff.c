/*
 * diff.c - router.diff(other): the arcs of the ring whose owner differs
 * between two routers of one layout and hash, as chash.Move named tuples
 * (engine/diff.h does the walk), MaglevRouter.diff(other), the same over
 * the lookup table's entries, and the Move type itself.  Part of
 * chash._chash (router.h, table.h).
 *
 * Move is a collections.namedtuple made at module init and kept in the
 * module state.  Its constructor is Python code, which may let another
 * thread change a router, so the moves are first read into plain tuples
 * (no Python code runs while the engine's node indices are read), and
 * only then turned into Moves.
 */
#include "table.h"

#include "engine/diff.h"

const char diff_doc[] = PyDoc_STR(
"diff($self, other, /)\n--\n\n"
"The arcs of the ring whose owner differs between this router and other\n"
"(the same layout and hash), as chash.Move(start, end, source, target)\n"
"named tuples in ring order.  An arc holds the hashes h with\n"
"start < h <= end, wrapping past the top of the ring (2**32, or 2**64 for\n"
"the envoy and grpc layouts) when start > end; start == end is the whole\n"
"ring.  Keys hashing inside an arc move from source (this router's owner)\n"
"to target (other's); no other key changes owner.");

const char maglev_diff_doc[] = PyDoc_STR(
"diff($self, other, /)\n--\n\n"
"The entries of the lookup table whose owner differs between this router\n"
"and other (a MaglevRouter of the same table_size), as\n"
"chash.Move(start, end, source, target) named tuples in table order.  A\n"
"Move holds the entries e with start < e <= end, wrapping past the last\n"
"entry (table_size - 1) when start > end; start == end is every entry.\n"
"A key's entry is XXH64(key) % table_size; keys in a Move's entries move\n"
"from source (this router's node) to target (other's), no other key.");

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

/* ValueError naming both routers' layouts and hashes; NULL. */
static PyObject *mismatch(PyObject *a, PyObject *b)
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

/* The moves as a list of plain (start, end, source, target) tuples; the
 * node objects are read through node_of(router, index). */
typedef PyObject *(*node_of_fn)(PyObject *router, uint32_t index);

static PyObject *ring_node(PyObject *router, uint32_t index)
{
    return entry_at((RouterObject *)router, index)->name;
}

static PyObject *table_node(PyObject *router, uint32_t index)
{
    return PyTuple_GET_ITEM(((TableObject *)router)->nodes, (Py_ssize_t)index);
}

static PyObject *plain_moves(const chash_move *moves, size_t n, PyObject *from, PyObject *to,
                             node_of_fn node_of)
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

/* Turns the plain tuples of list into Moves, in place; 0 or -1. */
static int as_moves(PyObject *list, PyObject *move_type)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *move = PyObject_CallObject(move_type, PyList_GET_ITEM(list, i));
        if (!move)
            return -1;
        PyList_SetItem(list, i, move); /* steals move, drops the tuple */
    }
    return 0;
}

/* The engine's status as an exception (EINVAL: one ring is empty). */
static PyObject *diff_error(int status)
{
    if (status == CHASH_EINVAL) {
        PyErr_SetString(PyExc_ValueError,
                        "diff() of an empty and a non-empty router: the empty one's keys have "
                        "no owner");
        return NULL;
    }
    return chash_py_error(status, NULL, "diff");
}

/* The 64-bit rings' diff: same[] maps from's node positions to to's. */
/* same[k]: the position in to of from's node k, or CHASH_DIFF_NONE; a
 * PyMem block of one entry a node of from, or NULL with an exception.
 * The lookups are by exact str keys: they run no Python code, so neither
 * router changes meanwhile. */
static uint32_t *positions_in(TableObject *from, TableObject *to)
{
    Py_ssize_t n = PyTuple_GET_SIZE(from->nodes);
    uint32_t *same = PyMem_New(uint32_t, n ? (size_t)n : 1);
    if (!same) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *at = PyDict_GetItemWithError(to->index, PyTuple_GET_ITEM(from->nodes, k));
        if (!at && PyErr_Occurred()) {
            PyMem_Free(same);
            return NULL;
        }
        same[k] = at ? (uint32_t)PyLong_AsSize_t(at) : CHASH_DIFF_NONE;
    }
    return same;
}

static PyObject *wide_diff(TableObject *from, TableObject *to)
{
    uint32_t *same = positions_in(from, to);
    if (!same)
        return NULL;
    chash_move *moves;
    size_t count;
    int status = chash_wide_diff(from->ring, to->ring, same, &moves, &count);
    PyMem_Free(same);
    if (status != CHASH_OK)
        return diff_error(status);
    PyObject *list = plain_moves(moves, count, (PyObject *)from, (PyObject *)to, table_node);
    chash_moves_free(moves);
    return list;
}

PyObject *maglev_diff(TableObject *self, PyObject *other)
{
    PyObject *module = PyType_GetModuleByDef(Py_TYPE(self), &chash_module);
    if (!module)
        return NULL;
    module_state *state = get_state(module);
    if (!PyObject_TypeCheck(other, state->maglev_type)) {
        PyErr_Format(PyExc_TypeError, "diff() needs a MaglevRouter, not %.200s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    TableObject *to = (TableObject *)other;
    if (self->table_size != to->table_size) {
        PyErr_Format(PyExc_ValueError,
                     "diff() needs two MaglevRouters of one table_size, not %zu and %zu (a "
                     "key's entry depends on the size: every key may move)",
                     self->table_size, to->table_size);
        return NULL;
    }
    if (!self->table || !to->table) {
        if (!self->table && !to->table)
            return PyList_New(0);
        return diff_error(CHASH_EINVAL);
    }
    Py_ssize_t n = PyTuple_GET_SIZE(self->nodes);
    uint32_t *same = positions_in(self, to);
    if (!same)
        return NULL;
    chash_move *moves;
    size_t count;
    int status = chash_table_diff(self->table, to->table, self->table_size, same, (size_t)n,
                                  (size_t)PyTuple_GET_SIZE(to->nodes), &moves, &count);
    PyMem_Free(same);
    if (status != CHASH_OK)
        return chash_py_error(status, NULL, "diff");
    PyObject *list = plain_moves(moves, count, (PyObject *)self, other, table_node);
    chash_moves_free(moves);
    if (list && as_moves(list, state->move_type) < 0)
        Py_CLEAR(list);
    return list;
}

PyObject *router_diff(RouterObject *self, PyObject *other)
{
    PyObject *module = PyType_GetModuleByDef(Py_TYPE(self), &chash_module);
    if (!module)
        return NULL;
    module_state *state = get_state(module);
    if (!PyObject_TypeCheck(other, state->router_type)) {
        PyErr_Format(PyExc_TypeError, "diff() needs a ConsistentHashRouter, not %.200s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    int wide_a = PyObject_TypeCheck((PyObject *)self, state->wide_ring_type);
    int wide_b = PyObject_TypeCheck(other, state->wide_ring_type);
    PyObject *list;
    if (wide_a || wide_b) {
        TableObject *a = (TableObject *)self, *b = (TableObject *)other;
        if (!wide_a || !wide_b || a->kind != b->kind || a->hash != b->hash)
            return mismatch((PyObject *)self, other);
        list = wide_diff(a, b);
    } else {
        RouterObject *b = (RouterObject *)other;
        if (self->scheme.layout != b->scheme.layout || self->scheme.hash != b->scheme.hash
            || self->hash_fn != b->hash_fn)
            return mismatch((PyObject *)self, other);
        chash_move *moves;
        size_t count;
        int status = chash_ring_diff(self->ring, b->ring, &moves, &count);
        if (status != CHASH_OK)
            return diff_error(status);
        list = plain_moves(moves, count, (PyObject *)self, other, ring_node);
        chash_moves_free(moves);
    }
    if (list && as_moves(list, state->move_type) < 0)
        Py_CLEAR(list);
    return list;
}

int diff_module_init(PyObject *module)
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
