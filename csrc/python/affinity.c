/*
 * affinity.c - chash._chash.prefix_blocks and the private _AffinityTable
 * type under chash.affinity.PrefixAffinity, over csrc/strategies/affinity.h.
 *
 * The table holds the engine's chash_affinity and a dict from each node it
 * has seen to its slot there; a node gets a slot (its LRU allocated whole)
 * the first time a preference list names it, and loses it with forget().
 * Calls are serialised per table (CHASH_LOCKED: the object's critical
 * section from Python 3.13, the GIL before), since a route changes the
 * LRUs; nothing here calls back into Python while the engine's table is
 * half-changed: every Python object is read before the engine is touched.
 */
#include "affinity.h"

#include "strategies/affinity.h"

/* Blocks a call reads onto the stack before it allocates. */
#define STACK_BLOCKS 128
/* The defaults of prefix_blocks: blocks of 128 characters or tokens, at
 * most 128 of them. */
#define DEFAULT_BLOCK 128
#define DEFAULT_LIMIT 128

typedef struct {
    PyObject_HEAD
    chash_affinity *table;
    PyObject *slots; /* dict: node -> int slot */
} AffinityObject;

/* -- blocks in and out ------------------------------------------------ */

typedef struct {
    uint64_t stack[STACK_BLOCKS];
    uint64_t *items;
    size_t n;
} block_buf;

static void block_buf_release(block_buf *buf)
{
    if (buf->items != buf->stack)
        PyMem_Free(buf->items);
}

/* A sequence of ints in 0 .. 2**64-1 read into buf; 0 or -1 with
 * TypeError or ValueError naming `what`. */
static int read_u64s(PyObject *seq, const char *what, block_buf *buf)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    buf->items = buf->stack;
    buf->n = (size_t)n;
    if (n > STACK_BLOCKS) {
        buf->items = PyMem_New(uint64_t, (size_t)n);
        if (!buf->items) {
            Py_DECREF(fast);
            PyErr_NoMemory();
            return -1;
        }
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyLong_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "%s must hold ints, not %.100s", what,
                         Py_TYPE(items[i])->tp_name);
            goto fail;
        }
        unsigned long long v = PyLong_AsUnsignedLongLong(items[i]);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must hold ints in 0 .. 2**64-1, not %R", what,
                         items[i]);
            goto fail;
        }
        buf->items[i] = (uint64_t)v;
    }
    Py_DECREF(fast);
    return 0;
fail:
    Py_DECREF(fast);
    block_buf_release(buf);
    return -1;
}

static PyObject *list_of_u64(const uint64_t *items, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(items[i]);
        if (!v)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

/* -- prefix_blocks ------------------------------------------------------ */

PyDoc_STRVAR(prefix_blocks_doc,
"prefix_blocks(data, *, block=128, limit=128)\n--\n\n"
"The chained hashes of a prompt's blocks, a list of ints in 0 .. 2**64-1:\n"
"data is text (a str, cut into blocks of `block` characters) or a sequence\n"
"of token ids (ints in 0 .. 2**64-1, cut into blocks of `block` tokens).\n"
"Block i's hash covers blocks 0..i, so equal hashes at a position mean an\n"
"equal prefix; a trailing partial block counts; at most `limit` blocks.\n"
"Text and tokens never share a chain.  TypeError or ValueError on bad\n"
"input; block and limit must be >= 1.");

static PyObject *prefix_blocks(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "block", "limit", NULL};
    PyObject *data;
    Py_ssize_t block = DEFAULT_BLOCK, limit = DEFAULT_LIMIT;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$nn:prefix_blocks", kwlist, &data, &block,
                                     &limit))
        return NULL;
    if (block < 1 || limit < 1) {
        PyErr_Format(PyExc_ValueError, "prefix_blocks: %s must be >= 1, not %zd",
                     block < 1 ? "block" : "limit", block < 1 ? block : limit);
        return NULL;
    }
    if (PyBytes_Check(data) || PyByteArray_Check(data)) {
        PyErr_SetString(PyExc_TypeError,
                        "prefix_blocks: data must be a str or a sequence of token ids, not bytes");
        return NULL;
    }
    uint64_t stack[STACK_BLOCKS];
    block_buf tokens = {.items = NULL};
    const char *text = NULL;
    Py_ssize_t len = 0;
    if (PyUnicode_Check(data)) {
        text = PyUnicode_AsUTF8AndSize(data, &len);
        if (!text)
            return NULL;
    } else if (!PySequence_Check(data)) {
        PyErr_Format(PyExc_TypeError,
                     "prefix_blocks: data must be a str or a sequence of token ids, not %.100s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    } else if (read_u64s(data, "prefix_blocks: token ids", &tokens) < 0) {
        return NULL;
    }
    size_t units = text ? (size_t)len : tokens.n;
    size_t most = units / (size_t)block + 1;
    if (most > (size_t)limit)
        most = (size_t)limit;
    uint64_t *out = most <= STACK_BLOCKS ? stack : PyMem_New(uint64_t, most);
    if (!out) {
        if (tokens.items)
            block_buf_release(&tokens);
        return PyErr_NoMemory();
    }
    size_t count = 0;
    if (text)
        chash_prefix_blocks_utf8(text, (size_t)len, (size_t)block, most, out, &count);
    else
        chash_prefix_blocks_tokens(tokens.items, tokens.n, (size_t)block, most, out, &count);
    PyObject *result = list_of_u64(out, count);
    if (out != stack)
        PyMem_Free(out);
    if (tokens.items)
        block_buf_release(&tokens);
    return result;
}

/* -- the table ---------------------------------------------------------- */

static PyObject *affinity_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"capacity", NULL};
    Py_ssize_t capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n:_AffinityTable", kwlist, &capacity))
        return NULL;
    if (capacity < 1 || (size_t)capacity > CHASH_AFFINITY_MAX_CAPACITY) {
        PyErr_Format(PyExc_ValueError, "capacity must lie between 1 and %zu blocks, not %zd",
                     (size_t)CHASH_AFFINITY_MAX_CAPACITY, capacity);
        return NULL;
    }
    AffinityObject *self = (AffinityObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->slots = PyDict_New();
    if (!self->slots) {
        Py_DECREF(self);
        return NULL;
    }
    self->table = chash_affinity_new((size_t)capacity);
    if (!self->table) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static int affinity_traverse(AffinityObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->slots);
    return 0;
}

static int affinity_clear(AffinityObject *self)
{
    Py_CLEAR(self->slots);
    return 0;
}

static void affinity_dealloc(AffinityObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->slots);
    chash_affinity_free(self->table);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* node's slot, or -1 without an exception when it has none; -2 with one. */
static Py_ssize_t slot_of(AffinityObject *self, PyObject *node)
{
    PyObject *slot = PyDict_GetItemWithError(self->slots, node);
    if (!slot)
        return PyErr_Occurred() ? -2 : -1;
    return PyLong_AsSsize_t(slot);
}

/* node's slot, made when it has none; -1 with an exception. */
static Py_ssize_t slot_made(AffinityObject *self, PyObject *node)
{
    Py_ssize_t found = slot_of(self, node);
    if (found != -1)
        return found < 0 ? -1 : found;
    size_t slot;
    int status = chash_affinity_add(self->table, &slot);
    if (status != CHASH_OK) {
        chash_py_error(status, node, "_AffinityTable");
        return -1;
    }
    PyObject *value = PyLong_FromSize_t(slot);
    if (!value || PyDict_SetItem(self->slots, node, value) < 0) {
        Py_XDECREF(value);
        chash_affinity_remove(self->table, slot); /* as it was */
        return -1;
    }
    Py_DECREF(value);
    return (Py_ssize_t)slot;
}

/* A value of an optional mapping for node as a double >= 0 (0 when the
 * mapping is None or lacks it); 0 or -1 with an exception. */
static int mapped(PyObject *mapping, PyObject *node, const char *what, double *out)
{
    *out = 0.0;
    if (mapping == Py_None)
        return 0;
    PyObject *v;
    if (PyDict_CheckExact(mapping)) {
        v = PyDict_GetItemWithError(mapping, node);
        if (!v)
            return PyErr_Occurred() ? -1 : 0;
        Py_INCREF(v);
    } else {
        v = PyObject_GetItem(mapping, node);
        if (!v) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError))
                return -1;
            PyErr_Clear();
            return 0;
        }
    }
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) {
        Py_DECREF(v);
        return -1;
    }
    if (!(x >= 0.0) || !isfinite(x)) {
        PyErr_Format(PyExc_ValueError, "%s of %R must be a finite number >= 0, not %R", what, node,
                     v);
        Py_DECREF(v);
        return -1;
    }
    Py_DECREF(v);
    *out = x;
    return 0;
}

PyDoc_STRVAR(affinity_route_doc,
"route($self, blocks, nodes, loads, queued, tokens, block_tokens, miss_cost, rank_cost,\n"
"      load_cost, /)\n"
"--\n\n"
"The index in nodes (a preference order) of the node with the lowest\n"
"estimated cost for blocks, which are then recorded there; see\n"
"chash.affinity.PrefixAffinity.");

static PyObject *affinity_route_unlocked(AffinityObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "route() takes 9 arguments (%zd given)", nargs);
        return NULL;
    }
    chash_affinity_weights weights;
    double *w[5] = {&weights.tokens, &weights.block_tokens, &weights.miss_cost, &weights.rank_cost,
                    &weights.load_cost};
    for (int k = 0; k < 5; k++) {
        *w[k] = PyFloat_AsDouble(args[4 + k]);
        if (*w[k] == -1.0 && PyErr_Occurred())
            return NULL;
    }
    PyObject *names = PySequence_Fast(args[1], "route: nodes must be a sequence");
    if (!names)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(names);
    chash_affinity_candidate stack[64];
    chash_affinity_candidate *cands = count <= 64 ? stack : PyMem_New(chash_affinity_candidate,
                                                                      (size_t)count);
    block_buf blocks = {.items = NULL};
    PyObject *result = NULL;
    if (!cands) {
        PyErr_NoMemory();
        goto done;
    }
    if (count == 0) {
        PyErr_SetString(PyExc_ValueError, "route: no nodes to choose from");
        goto done;
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        PyObject *node = PySequence_Fast_GET_ITEM(names, r);
        Py_ssize_t slot = slot_made(self, node);
        if (slot < 0 || mapped(args[2], node, "load", &cands[r].load) < 0
            || mapped(args[3], node, "queued work", &cands[r].queued) < 0)
            goto done;
        cands[r].slot = (size_t)slot;
    }
    if (read_u64s(args[0], "blocks", &blocks) < 0)
        goto done;
    size_t choice;
    int status = chash_affinity_choose(self->table, cands, (size_t)count, blocks.items, blocks.n,
                                       &weights, &choice);
    if (status != CHASH_OK) {
        chash_py_error(status, NULL, "route: tokens, block_tokens and the costs must be finite and >= 0");
        goto done;
    }
    chash_affinity_record(self->table, cands[choice].slot, blocks.items, blocks.n);
    result = PyLong_FromSize_t(choice);
done:
    if (blocks.items)
        block_buf_release(&blocks);
    if (cands && cands != stack)
        PyMem_Free(cands);
    Py_DECREF(names);
    return result;
}

static PyObject *affinity_route(AffinityObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *result;
    CHASH_LOCKED(self, result = affinity_route_unlocked(self, args, nargs));
    return result;
}

PyDoc_STRVAR(affinity_match_doc,
"match($self, node, blocks, /)\n--\n\n"
"How many of blocks, from the first, the record of node holds (0 for a\n"
"node never routed to).");

static PyObject *affinity_match_unlocked(AffinityObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "match() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t slot = slot_of(self, args[0]);
    if (slot == -2)
        return NULL;
    block_buf blocks;
    if (read_u64s(args[1], "blocks", &blocks) < 0)
        return NULL;
    size_t hits = slot < 0 ? 0 : chash_affinity_match(self->table, (size_t)slot, blocks.items,
                                                      blocks.n);
    block_buf_release(&blocks);
    return PyLong_FromSize_t(hits);
}

static PyObject *affinity_match(AffinityObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *result;
    CHASH_LOCKED(self, result = affinity_match_unlocked(self, args, nargs));
    return result;
}

PyDoc_STRVAR(affinity_held_doc,
"held($self, node, /)\n--\n\n"
"How many blocks the record of node holds (0 for a node never routed to).");

static PyObject *affinity_held_unlocked(AffinityObject *self, PyObject *node)
{
    Py_ssize_t slot = slot_of(self, node);
    if (slot == -2)
        return NULL;
    return PyLong_FromSize_t(slot < 0 ? 0 : chash_affinity_held(self->table, (size_t)slot));
}

static PyObject *affinity_held(AffinityObject *self, PyObject *node)
{
    PyObject *result;
    CHASH_LOCKED(self, result = affinity_held_unlocked(self, node));
    return result;
}

PyDoc_STRVAR(affinity_forget_doc,
"forget($self, node, /)\n--\n\n"
"Drop the record of node and its memory; KeyError when it has none.");

static PyObject *affinity_forget_unlocked(AffinityObject *self, PyObject *node)
{
    Py_ssize_t slot = slot_of(self, node);
    if (slot == -2)
        return NULL;
    if (slot == -1)
        return chash_py_error(CHASH_ENOENT, node, NULL);
    if (PyDict_DelItem(self->slots, node) < 0)
        return NULL;
    chash_affinity_remove(self->table, (size_t)slot);
    Py_RETURN_NONE;
}

static PyObject *affinity_forget(AffinityObject *self, PyObject *node)
{
    PyObject *result;
    CHASH_LOCKED(self, result = affinity_forget_unlocked(self, node));
    return result;
}

PyDoc_STRVAR(affinity_nodes_doc,
"nodes($self, /)\n--\n\n"
"The nodes with a record, in the order they got one.");

static PyObject *affinity_nodes_unlocked(AffinityObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyDict_Keys(self->slots);
}

static PyObject *affinity_nodes(AffinityObject *self, PyObject *ignored)
{
    PyObject *result;
    CHASH_LOCKED(self, result = affinity_nodes_unlocked(self, ignored));
    return result;
}

PyDoc_STRVAR(affinity_check_doc,
"_check($self, /)\n--\n\n"
"AssertionError when an invariant of the records is broken.");

static PyObject *affinity_check_unlocked(AffinityObject *self, PyObject *Py_UNUSED(ignored))
{
    int status = chash_affinity_check(self->table);
    if (status != CHASH_OK)
        return chash_py_error(status, NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *affinity_check(AffinityObject *self, PyObject *ignored)
{
    PyObject *result;
    CHASH_LOCKED(self, result = affinity_check_unlocked(self, ignored));
    return result;
}

static PyObject *affinity_capacity(AffinityObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(chash_affinity_capacity(self->table));
}

static PyMethodDef affinity_methods[] = {
    {"route", (PyCFunction)(void (*)(void))affinity_route, METH_FASTCALL, affinity_route_doc},
    {"match", (PyCFunction)(void (*)(void))affinity_match, METH_FASTCALL, affinity_match_doc},
    {"held", (PyCFunction)affinity_held, METH_O, affinity_held_doc},
    {"forget", (PyCFunction)affinity_forget, METH_O, affinity_forget_doc},
    {"nodes", (PyCFunction)affinity_nodes, METH_NOARGS, affinity_nodes_doc},
    {"_check", (PyCFunction)affinity_check, METH_NOARGS, affinity_check_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef affinity_getset[] = {
    {"capacity", (getter)affinity_capacity, NULL, "Blocks the record of a node holds at most.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(affinity_doc,
"_AffinityTable(capacity)\n--\n\n"
"What chash.affinity.PrefixAffinity routed where: an LRU of at most\n"
"capacity block hashes a node, in C, and the choice along a preference\n"
"order.  Private: use PrefixAffinity.  Safe to share between threads:\n"
"every call takes the table's own lock (a route changes the LRUs).");

static PyType_Slot affinity_slots[] = {
    {Py_tp_doc, (void *)affinity_doc},
    {Py_tp_new, affinity_new},
    {Py_tp_dealloc, affinity_dealloc},
    {Py_tp_traverse, affinity_traverse},
    {Py_tp_clear, affinity_clear},
    {Py_tp_methods, affinity_methods},
    {Py_tp_getset, affinity_getset},
    {0, NULL},
};

static PyType_Spec affinity_spec = {
    .name = "chash._chash._AffinityTable",
    .basicsize = sizeof(AffinityObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = affinity_slots,
};

static PyMethodDef affinity_functions[] = {
    {"prefix_blocks", (PyCFunction)(void (*)(void))prefix_blocks, METH_VARARGS | METH_KEYWORDS,
     prefix_blocks_doc},
    {NULL, NULL, 0, NULL},
};

int affinity_setup(PyObject *module)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &affinity_spec, NULL);
    if (!type)
        return -1;
    if (PyModule_AddType(module, type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    Py_DECREF(type);
    return PyModule_AddFunctions(module, affinity_functions);
}
