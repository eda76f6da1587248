/*
 * node_list.c - the ordered node list of the routers rebuilt whole, and
 * its all-or-nothing rebuild (node_list.h).  Part of chash._chash.
 */
#include "node_list.h"

#include "args.h"
#include "engine/diff.h"
#include "node_names.h"
#include "hash/hash.h"

#include <string.h>

int node_list_init(NodeList *list)
{
    list->weights = NULL;
    list->counts = NULL;
    list->capacity = 0;
    list->changes = 0;
    list->nodes = PyList_New(0);
    list->index = PyDict_New();
    if (!list->nodes || !list->index) {
        node_list_free(list);
        return -1;
    }
    return 0;
}

void node_list_free(NodeList *list)
{
    PyMem_Free(list->weights);
    PyMem_Free(list->counts);
    list->weights = NULL;
    list->counts = NULL;
    list->capacity = 0;
    list->changes = 0;
    Py_CLEAR(list->nodes);
    Py_CLEAR(list->index);
}

int node_list_copy(NodeList *dst, const NodeList *src)
{
    size_t n = (size_t)node_list_len(src), room = src->capacity > n ? src->capacity : n;
    dst->capacity = room;
    dst->changes = src->changes;
    dst->nodes = PyList_GetSlice(src->nodes, 0, (Py_ssize_t)n);
    dst->index = dst->nodes ? PyDict_Copy(src->index) : NULL;
    if (!dst->index)
        return -1;
    dst->weights = PyMem_New(uint64_t, room ? room : 1);
    dst->counts = PyMem_New(size_t, room ? room : 1);
    if (!dst->weights || !dst->counts) {
        PyErr_NoMemory();
        return -1;
    }
    if (n) {
        memcpy(dst->weights, src->weights, n * sizeof *dst->weights);
        memcpy(dst->counts, src->counts, n * sizeof *dst->counts);
    }
    return 0;
}

int node_list_traverse(NodeList *list, visitproc visit, void *arg)
{
    Py_VISIT(list->nodes);
    Py_VISIT(list->index);
    return 0;
}

/* A str subclass is looked up as an exact copy: its own __hash__ / __eq__
 * could run Python code, and rebuild the router, in the middle of the
 * dict lookup. */
Py_ssize_t node_list_position(const NodeList *list, PyObject *node)
{
    if (!PyUnicode_Check(node))
        return -1;
    PyObject *exact = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
    if (!exact)
        return -1;
    PyObject *at = PyDict_GetItemWithError(list->index, exact);
    Py_DECREF(exact);
    return at ? PyLong_AsSsize_t(at) : -1;
}

int node_list_contains(const NodeList *list, PyObject *node)
{
    Py_ssize_t at = node_list_position(list, node);
    return at >= 0 ? 1 : PyErr_Occurred() ? -1 : 0;
}

double node_list_weight_of(const NodeList *list, PyObject *node)
{
    Py_ssize_t at = node_list_position(list, node);
    if (at < 0)
        return PyErr_Occurred() ? -1.0 : 0.0;
    return (double)list->weights[at];
}

PyObject *node_list_node_at(const NodeList *list, size_t k, double *weight)
{
    if (k >= (size_t)node_list_len(list))
        return NULL;
    *weight = (double)list->weights[k];
    return node_list_at(list, k);
}

int node_list_weight(double w, const char *layout, uint64_t *out)
{
    if (!(w >= 1.0 && w <= 4294967295.0 && w == (double)(uint64_t)w)) {
        PyObject *value = PyFloat_FromDouble(w);
        if (value) {
            PyErr_Format(PyExc_ValueError,
                         "the %s layout takes integer weights from 1 to 2**32 - 1, not %R",
                         layout, value);
            Py_DECREF(value);
        }
        return -1;
    }
    *out = (uint64_t)w;
    return 0;
}

/* Envoy refuses a total weight above 2**32 - 1; gRPC sums in size_t. */
static int check_total(const NodeListRebuild *how, const uint64_t *weights, size_t n)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++)
        sum += weights[k];
    if (how->cap_total && sum > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "the sum of the weights (%llu) exceeds 2**32 - 1, which Envoy refuses",
                     (unsigned long long)sum);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The rebuild                                                        */

int node_list_set(NodeList *list, PyObject *nodes, const uint64_t *weights,
                  const NodeListRebuild *how)
{
    size_t n = (size_t)PyTuple_GET_SIZE(nodes);
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    uint64_t *copy = PyMem_New(uint64_t, n ? n : 1);
    PyObject *index = PyDict_New();
    PyObject *names = PySequence_List(nodes);
    void *structure = NULL;
    int result = counts && copy && index && names ? 0 : -1;
    if (result < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    if (result == 0) {
        memset(counts, 0, (n ? n : 1) * sizeof *counts);
        memcpy(copy, weights, n * sizeof *copy);
        result = how->build(how->owner, nodes, weights, n, counts, &structure);
    }
    for (size_t k = 0; result == 0 && k < n; k++) {
        PyObject *at = PyLong_FromSize_t(k);
        result = at ? PyDict_SetItem(index, PyTuple_GET_ITEM(nodes, (Py_ssize_t)k), at) : -1;
        Py_XDECREF(at);
    }
    if (result < 0) {
        if (structure)
            how->release(structure);
        PyMem_Free(counts);
        PyMem_Free(copy);
        Py_XDECREF(index);
        Py_XDECREF(names);
        return -1;
    }
    /* Nothing can fail from here: swap the new list and structure in whole. */
    void *old_structure = *how->slot;
    NodeList old = *list;
    *how->slot = structure;
    list->nodes = names;
    list->weights = copy;
    list->counts = counts;
    list->capacity = n ? n : 1;
    list->index = index;
    list->changes++;
    if (old_structure)
        how->release(old_structure);
    node_list_free(&old);
    return 0;
}

/*
 * The list with each of add[0..nadd) at weights[i] (a present node keeps
 * its place and takes the weight, a new one goes last, in the order given)
 * and without node `drop` (a position, or -1).  0, or -1 with an exception
 * and the list unchanged.
 */
static int update(NodeList *list, PyObject *const *add, const uint64_t *weights, Py_ssize_t nadd,
                  Py_ssize_t drop, const NodeListRebuild *how)
{
    uint64_t *w = PyMem_New(uint64_t, (size_t)(node_list_len(list) + nadd) + 1);
    if (!w) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *old = PyList_AsTuple(list->nodes);
    PyObject *tuple = old ? node_names_merge(old, drop, add, nadd, list->weights, weights,
                                             sizeof *w, w) : NULL;
    Py_XDECREF(old);
    int result = -1;
    if (tuple && check_total(how, w, (size_t)PyTuple_GET_SIZE(tuple)) == 0)
        result = node_list_set(list, tuple, w, how);
    Py_XDECREF(tuple);
    PyMem_Free(w);
    return result;
}

/* The id of a node argument: a str with no lone surrogate; 0 or -1. */
static int check_node(PyObject *node)
{
    const char *id;
    Py_ssize_t len;
    return node_id(node, &id, &len);
}

/* Room for one more node in weights and counts, doubling; 0 or -1 with
 * MemoryError (the arrays as they were, perhaps one of them larger). */
static int reserve_one(NodeList *list)
{
    size_t n = (size_t)node_list_len(list);
    if (n < list->capacity)
        return 0;
    size_t room = list->capacity < 4 ? 8 : list->capacity * 2;
    uint64_t *weights = PyMem_Resize(list->weights, uint64_t, room);
    if (!weights) {
        PyErr_NoMemory();
        return -1;
    }
    list->weights = weights;
    size_t *counts = PyMem_Resize(list->counts, size_t, room);
    if (!counts) {
        PyErr_NoMemory();
        return -1;
    }
    list->counts = counts;
    list->capacity = room;
    return 0;
}

/*
 * Appends node (not present, its id checked) at weight w, as its owner's
 * append says: O(1) amortized.  Each step that can fail comes before any
 * that changes what a reader sees, and none runs Python code (the index's
 * keys are exact str), so the list is as it was on an error.
 */
static int append(NodeList *list, PyObject *node, uint64_t w, const NodeListRebuild *how)
{
    size_t n = (size_t)node_list_len(list), count;
    if (how->append(how->owner, n, &count) < 0 || reserve_one(list) < 0)
        return -1;
    PyObject *name = chash_py_node_name(node);
    PyObject *at = name ? PyLong_FromSize_t(n) : NULL;
    int result = at ? PyDict_SetItem(list->index, name, at) : -1;
    if (result == 0 && PyList_Append(list->nodes, name) < 0) {
        /* Deleting the exact str just set cannot fail or run Python code. */
        (void)PyDict_DelItem(list->index, name);
        result = -1;
    }
    Py_XDECREF(at);
    Py_XDECREF(name);
    if (result < 0)
        return -1;
    list->weights[n] = w;
    list->counts[n] = count;
    list->changes++;
    return 0;
}

/* Drops the last node (number n - 1), as its owner's append allows: O(1)
 * amortized; 0, or -1 with MemoryError and the list as it was. */
static int drop_last(NodeList *list)
{
    Py_ssize_t n = node_list_len(list);
    PyObject *last = Py_NewRef(PyList_GET_ITEM(list->nodes, n - 1));
    if (PyList_SetSlice(list->nodes, n - 1, n, NULL) < 0) {
        Py_DECREF(last);
        return -1;
    }
    /* An exact str key that is present: deleting it cannot fail or run
     * Python code. */
    (void)PyDict_DelItem(list->index, last);
    Py_DECREF(last);
    list->changes++;
    return 0;
}

int node_list_add(NodeList *list, PyObject *node, double weight, const NodeListRebuild *how)
{
    uint64_t w;
    if (check_node(node) < 0 || node_list_weight(weight, how->layout, &w) < 0)
        return -1;
    Py_ssize_t at = node_list_position(list, node);
    if (at < 0 && PyErr_Occurred())
        return -1;
    if (at >= 0 && list->weights[at] == w)
        return 0;
    if (at < 0 && how->append)
        return append(list, node, w, how);
    return update(list, &node, &w, 1, -1, how);
}

int node_list_add_many(NodeList *list, PyObject *nodes, double weight, const NodeListRebuild *how)
{
    uint64_t w;
    if (node_list_weight(weight, how->layout, &w) < 0)
        return -1;
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    uint64_t *weights = PyMem_New(uint64_t, (size_t)n + 1);
    int result = weights ? 0 : -1;
    if (!weights)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; result == 0 && i < n; i++) {
        result = check_node(PyTuple_GET_ITEM(seq, i));
        weights[i] = w;
    }
    if (result == 0)
        result = update(list, n ? &PyTuple_GET_ITEM(seq, 0) : NULL, weights, n, -1, how);
    PyMem_Free(weights);
    Py_DECREF(seq);
    return result;
}

int node_list_remove(NodeList *list, PyObject *node, const NodeListRebuild *how)
{
    Py_ssize_t at = node_list_position(list, node);
    if (at < 0)
        return PyErr_Occurred() ? -1 : 0;
    if (how->append && at == node_list_len(list) - 1)
        return drop_last(list) < 0 ? -1 : 1;
    return update(list, NULL, NULL, 0, at, how) < 0 ? -1 : 1;
}

/* Where read_pair_weight puts each pair's weight, by the layout's rule. */
typedef struct {
    const NodeListRebuild *how;
    uint64_t *weights;
} pair_weights;

static int read_pair_weight(void *ctx, PyObject *obj, Py_ssize_t i)
{
    pair_weights *into = ctx;
    double weight;
    if (parse_weight(obj, &weight) < 0)
        return -1;
    return node_list_weight(weight, into->how->layout, &into->weights[i]);
}

/* The (node, weight) pairs of an iterable into a new tuple of exact str
 * and weights (PyMem, the caller frees); NULL with an exception (a pair
 * that is not (str, weight), a node named twice). */
static PyObject *read_pairs(PyObject *pairs, const NodeListRebuild *how, uint64_t **weights)
{
    PyObject *seq = PySequence_Tuple(pairs);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    pair_weights into = {how, PyMem_New(uint64_t, (size_t)n + 1)};
    PyObject *nodes = NULL;
    if (!into.weights)
        PyErr_NoMemory();
    else
        nodes = node_names_of_pairs(seq, read_pair_weight, &into);
    if (nodes && check_total(how, into.weights, (size_t)n) < 0)
        Py_CLEAR(nodes);
    Py_DECREF(seq);
    if (!nodes) {
        PyMem_Free(into.weights);
        into.weights = NULL;
    }
    *weights = into.weights;
    return nodes;
}

int node_list_replace(NodeList *list, PyObject *pairs, const NodeListRebuild *how)
{
    uint64_t *weights;
    PyObject *nodes = read_pairs(pairs, how, &weights);
    if (!nodes)
        return -1;
    int result = node_list_set(list, nodes, weights, how);
    Py_DECREF(nodes);
    PyMem_Free(weights);
    return result;
}

/* ------------------------------------------------------------------ */
/* Views                                                              */

PyObject *node_list_nodes(const NodeList *list)
{
    return PySequence_List(list->nodes);
}

PyObject *node_list_pick(const NodeList *list, const uint32_t *positions, size_t n)
{
    PyObject *result = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; result && i < n; i++)
        PyList_SET_ITEM(result, (Py_ssize_t)i, Py_NewRef(node_list_at(list, positions[i])));
    return result;
}

typedef struct {
    const void *owner;
    const uint64_t *hashes;
    size_t n;
    uint32_t *positions;
    void (*route)(const void *, const uint64_t *, size_t, uint32_t *);
} RouteCall;

static void run_route(void *ctx)
{
    RouteCall *call = ctx;
    call->route(call->owner, call->hashes, call->n, call->positions);
}

PyObject *node_list_route(const NodeList *list, unsigned *readers, const void *owner,
                          uint64_t *hashes, Py_ssize_t n,
                          void (*route)(const void *owner, const uint64_t *hashes, size_t n,
                                        uint32_t *positions))
{
    if (!hashes)
        return NULL;
    PyObject *result = PyList_New(n);
    if (result && node_list_len(list) == 0) {
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
    } else if (result) {
        uint32_t *positions = PyMem_New(uint32_t, n ? (size_t)n : 1);
        if (!positions) {
            Py_CLEAR(result);
            PyErr_NoMemory();
        } else {
            RouteCall call = {owner, hashes, (size_t)n, positions, route};
            chash_py_route_unlocked(readers, (size_t)n, run_route, &call);
            PyObject *const *items = node_list_items(list);
            for (Py_ssize_t i = 0; i < n; i++)
                PyList_SET_ITEM(result, i, Py_NewRef(items[positions[i]]));
            PyMem_Free(positions);
        }
    }
    PyMem_Free(hashes);
    return result;
}

PyObject *node_list_iter(const NodeList *list)
{
    PyObject *now = PyList_AsTuple(list->nodes);
    if (!now)
        return NULL;
    PyObject *it = PyObject_GetIter(now);
    Py_DECREF(now);
    return it;
}

/* {node: value(k)} over every node, value a new reference or NULL. */
static PyObject *per_node(const NodeList *list, PyObject *(*value)(const void *, size_t),
                          const void *values)
{
    PyObject *result = PyDict_New();
    Py_ssize_t n = node_list_len(list);
    for (Py_ssize_t k = 0; result && k < n; k++) {
        PyObject *v = value(values, (size_t)k);
        if (!v || PyDict_SetItem(result, PyList_GET_ITEM(list->nodes, k), v) < 0)
            Py_CLEAR(result);
        Py_XDECREF(v);
    }
    return result;
}

static PyObject *float_value(const void *values, size_t k)
{
    return PyFloat_FromDouble(((const double *)values)[k]);
}

static PyObject *count_value(const void *values, size_t k)
{
    return PyLong_FromSize_t(((const size_t *)values)[k]);
}

static PyObject *weight_value(const void *values, size_t k)
{
    return PyFloat_FromDouble((double)((const uint64_t *)values)[k]);
}

PyObject *node_list_float_map(const NodeList *list, const double *values)
{
    return per_node(list, float_value, values);
}

PyObject *node_list_count_map(const NodeList *list, const size_t *values)
{
    return per_node(list, count_value, values);
}

PyObject *node_list_weights(const NodeList *list)
{
    return per_node(list, weight_value, list->weights);
}

PyObject *node_list_counts(const NodeList *list)
{
    return per_node(list, count_value, list->counts);
}

PyObject *node_list_pairs(const NodeList *list)
{
    Py_ssize_t n = node_list_len(list);
    PyObject *pairs = PyList_New(n);
    for (Py_ssize_t k = 0; pairs && k < n; k++) {
        PyObject *item = Py_BuildValue("(OK)", PyList_GET_ITEM(list->nodes, k),
                                       (unsigned long long)list->weights[k]);
        if (!item)
            Py_CLEAR(pairs);
        else
            PyList_SET_ITEM(pairs, k, item);
    }
    return pairs;
}

int node_list_equal(const NodeList *a, const NodeList *b, int ordered)
{
    PyObject *wa = node_list_weights(a);
    PyObject *wb = wa ? node_list_weights(b) : NULL;
    int equal = wb ? PyObject_RichCompareBool(wa, wb, Py_EQ) : -1;
    Py_XDECREF(wa);
    Py_XDECREF(wb);
    if (equal == 1 && ordered)
        equal = PyObject_RichCompareBool(a->nodes, b->nodes, Py_EQ);
    return equal;
}

int node_list_tags(const NodeList *list, uint32_t *tags)
{
    Py_ssize_t n = node_list_len(list);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t len;
        const char *id = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(list->nodes, k), &len);
        if (!id)
            return -1;
        uint8_t digest[CHASH_MD5_DIGEST_SIZE];
        chash_md5(id, (size_t)len, digest);
        tags[k] = (uint32_t)digest[0] << 24 | (uint32_t)digest[1] << 16
                  | (uint32_t)digest[2] << 8 | digest[3];
    }
    return 0;
}

/* The lookups are by exact str keys: they run no Python code, so neither
 * list changes meanwhile. */
uint32_t *node_list_positions_in(const NodeList *from, const NodeList *to)
{
    Py_ssize_t n = node_list_len(from);
    uint32_t *same = PyMem_New(uint32_t, n ? (size_t)n : 1);
    if (!same) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *at = PyDict_GetItemWithError(to->index, PyList_GET_ITEM(from->nodes, k));
        if (!at && PyErr_Occurred()) {
            PyMem_Free(same);
            return NULL;
        }
        same[k] = at ? (uint32_t)PyLong_AsSize_t(at) : CHASH_DIFF_NONE;
    }
    return same;
}

int node_list_check(const NodeList *list, const size_t *seen)
{
    size_t n = (size_t)node_list_len(list);
    int ok = PyDict_GET_SIZE(list->index) == (Py_ssize_t)n;
    for (size_t k = 0; ok && k < n; k++)
        ok = node_list_position(list, PyList_GET_ITEM(list->nodes, (Py_ssize_t)k)) == (Py_ssize_t)k
             && list->weights[k] >= 1 && seen[k] == list->counts[k];
    return ok;
}
