/*
 * table.c - what the routers rebuilt whole share (table.h): the node list,
 * the all-or-nothing rebuild of a 64-bit ring or a Maglev table, lookups,
 * and the protocols.  Part of chash._chash.
 */
#include "table.h"

#include "hash/hash.h"
#include "strategies/strategies.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

const char *table_layout_name(const TableObject *self)
{
    switch (self->kind) {
    case TABLE_ENVOY: return "envoy";
    case TABLE_GRPC: return "grpc";
    default: return "maglev";
    }
}

TableObject *table_alloc(PyTypeObject *type, table_kind kind, chash_point_hash hash,
                         uint64_t min_ring, uint64_t max_ring, size_t table_size)
{
    TableObject *self = (TableObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    /* The base's own fields: an empty ring and a valid scheme. */
    (void)chash_scheme_init(&self->base.scheme, CHASH_LAYOUT_PYTHON, CHASH_HASH_MD5);
    self->base.ring = chash_ring_new();
    self->kind = kind;
    self->hash = hash;
    self->min_ring = min_ring;
    self->max_ring = max_ring;
    self->table_size = table_size;
    if (kind == TABLE_MAGLEV)
        chash_maglev_mod_magic(table_size, self->mod_magic);
    self->nodes = PyTuple_New(0);
    self->index = PyDict_New();
    self->ring = kind == TABLE_MAGLEV ? NULL : chash_wide_new();
    if (!self->base.ring || (kind != TABLE_MAGLEV && !self->ring)) {
        Py_DECREF(self);
        PyErr_NoMemory();
        return NULL;
    }
    if (!self->nodes || !self->index) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

int table_traverse(TableObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->nodes);
    Py_VISIT(self->index);
    Py_VISIT(self->base.zones);
    return 0;
}

int table_clear(TableObject *self)
{
    (void)self; /* holds only exact str and dicts of them: no cycle */
    return 0;
}

void table_dealloc(TableObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    chash_ring_free(self->base.ring);
    chash_wide_free(self->ring);
    PyMem_Free(self->table);
    PyMem_Free(self->weights);
    PyMem_Free(self->counts);
    Py_CLEAR(self->nodes);
    Py_CLEAR(self->index);
    Py_CLEAR(self->base.zones);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

int table_parse_hash(PyObject *hash, int murmur_allowed, const char *layout,
                     chash_point_hash *out)
{
    *out = CHASH_POINT_XXH64;
    if (hash == NULL || hash == Py_None)
        return 0;
    if (!PyUnicode_Check(hash)) {
        PyErr_Format(PyExc_TypeError, "the %s layout's hash must be a str, not %.200s", layout,
                     Py_TYPE(hash)->tp_name);
        return -1;
    }
    if (PyUnicode_CompareWithASCIIString(hash, "xxh64") == 0)
        return 0;
    if (murmur_allowed && PyUnicode_CompareWithASCIIString(hash, "murmur2_64") == 0) {
        *out = CHASH_POINT_MURMUR2_64;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "the %s layout takes hash %s, not %R", layout,
                 murmur_allowed ? "'xxh64' or 'murmur2_64'" : "'xxh64'", hash);
    return -1;
}

/* ------------------------------------------------------------------ */
/* The rebuild                                                        */

/* The new structure of a rebuild, computed aside. */
typedef struct {
    size_t *counts;
    chash_wide *ring;
    uint32_t *table;
    PyObject *index;
} TablePlan;

static void free_plan(TablePlan *plan)
{
    PyMem_Free(plan->counts);
    chash_wide_free(plan->ring);
    PyMem_Free(plan->table);
    Py_XDECREF(plan->index);
}

/* The UTF-8 of node k of nodes (exact str: cached, cannot fail twice). */
static const char *utf8_at(PyObject *nodes, Py_ssize_t k, Py_ssize_t *len)
{
    return PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(nodes, k), len);
}

/* The 64-bit ring of the plan: Envoy's counts, then every node's points. */
static int plan_ring(TableObject *self, PyObject *nodes, const uint64_t *weights, size_t n,
                     TablePlan *plan)
{
    uint64_t lo = self->min_ring, hi = self->max_ring;
    if (self->kind == TABLE_GRPC) {
        lo = lo < GRPC_RING_SIZE_CAP ? lo : GRPC_RING_SIZE_CAP;
        hi = hi < GRPC_RING_SIZE_CAP ? hi : GRPC_RING_SIZE_CAP;
    }
    size_t total;
    int status = chash_envoy_counts(weights, n, lo, hi, plan->counts, &total);
    if (status != CHASH_OK) {
        chash_py_error(status, NULL, "cannot size the ring");
        return -1;
    }
    uint64_t *points = PyMem_New(uint64_t, total ? total : 1);
    uint32_t *owners = PyMem_New(uint32_t, total ? total : 1);
    plan->ring = chash_wide_new();
    status = points && owners && plan->ring ? CHASH_OK : CHASH_ENOMEM;
    size_t at = 0;
    for (size_t k = 0; k < n && status == CHASH_OK; k++) {
        Py_ssize_t len;
        const char *id = utf8_at(nodes, (Py_ssize_t)k, &len);
        status = id ? chash_envoy_points(self->hash, id, (size_t)len, plan->counts[k], points + at)
                    : CHASH_ENOMEM;
        for (size_t j = 0; j < plan->counts[k]; j++)
            owners[at + j] = (uint32_t)k;
        at += plan->counts[k];
    }
    if (status == CHASH_OK)
        status = chash_wide_build(plan->ring, points, owners, total, n);
    PyMem_Free(points);
    PyMem_Free(owners);
    if (status != CHASH_OK) {
        if (!PyErr_Occurred())
            chash_py_error(status, NULL, "cannot build the ring");
        return -1;
    }
    return 0;
}

/* The Maglev table of the plan: Envoy's build from the nodes' UTF-8 and
 * weights, in one engine call (strategies/maglev.h): hosts sorted by key,
 * weights normalised by their sum, the weighted fill, entries renamed to
 * add-order positions, the counts. */
static int plan_maglev(TableObject *self, PyObject *nodes, const uint64_t *weights, size_t n,
                       TablePlan *plan)
{
    if (n == 0)
        return 0;
    const char **ids = PyMem_New(const char *, n);
    size_t *lens = PyMem_New(size_t, n);
    plan->table = PyMem_New(uint32_t, self->table_size);
    int status = ids && lens && plan->table ? CHASH_OK : CHASH_ENOMEM;
    for (size_t k = 0; k < n && status == CHASH_OK; k++) {
        Py_ssize_t len;
        ids[k] = utf8_at(nodes, (Py_ssize_t)k, &len);
        lens[k] = (size_t)len;
        if (!ids[k])
            status = CHASH_ENOMEM;
    }
    if (status == CHASH_OK)
        status = chash_maglev_envoy_table(ids, lens, weights, n, self->table_size, plan->table,
                                          plan->counts);
    PyMem_Free(ids);
    PyMem_Free(lens);
    if (status != CHASH_OK) {
        if (!PyErr_Occurred())
            chash_py_error(status, NULL, "cannot build the Maglev table");
        return -1;
    }
    return 0;
}

int table_set(TableObject *self, PyObject *nodes, const uint64_t *weights)
{
    size_t n = (size_t)PyTuple_GET_SIZE(nodes);
    TablePlan plan = {PyMem_New(size_t, n ? n : 1), NULL, NULL, PyDict_New()};
    uint64_t *copy = PyMem_New(uint64_t, n ? n : 1);
    int result = plan.counts && copy && plan.index ? 0 : -1;
    if (result < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    if (result == 0) {
        memset(plan.counts, 0, (n ? n : 1) * sizeof *plan.counts);
        memcpy(copy, weights, n * sizeof *copy);
        result = self->kind == TABLE_MAGLEV ? plan_maglev(self, nodes, weights, n, &plan)
                                            : plan_ring(self, nodes, weights, n, &plan);
    }
    for (size_t k = 0; result == 0 && k < n; k++) {
        PyObject *at = PyLong_FromSize_t(k);
        result = at ? PyDict_SetItem(plan.index, PyTuple_GET_ITEM(nodes, (Py_ssize_t)k), at) : -1;
        Py_XDECREF(at);
    }
    if (result < 0) {
        free_plan(&plan);
        PyMem_Free(copy);
        return -1;
    }
    /* Nothing can fail from here: swap the new structure in whole. */
    TablePlan old = {self->counts, self->ring, self->table, self->index};
    PyObject *old_nodes = self->nodes;
    uint64_t *old_weights = self->weights;
    self->counts = plan.counts;
    self->ring = plan.ring;
    self->table = plan.table;
    self->index = plan.index;
    self->nodes = Py_NewRef(nodes);
    self->weights = copy;
    free_plan(&old);
    Py_DECREF(old_nodes);
    PyMem_Free(old_weights);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Membership                                                         */

/* A weight for these layouts: an integer from 1 to 2**32 - 1, as Envoy's
 * and gRPC's uint32 weights; 0, or -1 with TypeError / ValueError. */
static int read_weight(TableObject *self, PyObject *obj, uint64_t *out)
{
    double w;
    if (parse_weight(obj, &w) < 0)
        return -1;
    if (!(w >= 1.0 && w <= 4294967295.0 && w == (double)(uint64_t)w)) {
        PyObject *value = PyFloat_FromDouble(w);
        if (value) {
            PyErr_Format(PyExc_ValueError,
                         "the %s layout takes integer weights from 1 to 2**32 - 1, not %R",
                         table_layout_name(self), value);
            Py_DECREF(value);
        }
        return -1;
    }
    *out = (uint64_t)w;
    return 0;
}

/* The position of node in the router, or -1 (also for a non-str; -1 with
 * an exception when a str subclass cannot be copied).  A str subclass is
 * looked up as an exact copy: its own __hash__ / __eq__ could run Python
 * code, and rebuild the router, in the middle of the dict lookup. */
static Py_ssize_t position_of(const TableObject *self, PyObject *node)
{
    if (!PyUnicode_Check(node))
        return -1;
    PyObject *exact = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
    if (!exact)
        return -1;
    PyObject *at = PyDict_GetItemWithError(self->index, exact);
    Py_DECREF(exact);
    return at ? PyLong_AsSsize_t(at) : -1;
}

/* Envoy refuses a total weight above 2**32 - 1; gRPC sums in size_t. */
static int check_total(TableObject *self, const uint64_t *weights, size_t n)
{
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++)
        sum += weights[k];
    if (self->kind != TABLE_GRPC && sum > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "the sum of the weights (%llu) exceeds 2**32 - 1, which Envoy refuses",
                     (unsigned long long)sum);
        return -1;
    }
    return 0;
}

/*
 * The router with each of add[0..nadd) at weights[i] (a present node keeps
 * its place and takes the weight, a new one goes last, in the order given)
 * and without node `drop` (a position, or -1).  0, or -1 with an exception
 * and the router unchanged.
 */
static int table_update(TableObject *self, PyObject *const *add, const uint64_t *weights,
                        Py_ssize_t nadd, Py_ssize_t drop)
{
    Py_ssize_t old_n = PyTuple_GET_SIZE(self->nodes);
    PyObject *list = PyList_New(0);
    uint64_t *w = PyMem_New(uint64_t, (size_t)(old_n + nadd) + 1);
    PyObject *seen = PyDict_New();
    int result = list && w && seen ? 0 : -1;
    if (result < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; result == 0 && k < old_n; k++) {
        if (k == drop)
            continue;
        PyObject *node = PyTuple_GET_ITEM(self->nodes, k);
        PyObject *at = PyLong_FromSsize_t(n);
        result = at && PyList_Append(list, node) == 0 && PyDict_SetItem(seen, node, at) == 0 ? 0 : -1;
        Py_XDECREF(at);
        w[n++] = self->weights[k];
    }
    for (Py_ssize_t i = 0; result == 0 && i < nadd; i++) {
        PyObject *name = PyUnicode_CheckExact(add[i]) ? Py_NewRef(add[i]) : PyUnicode_FromObject(add[i]);
        if (!name) {
            result = -1;
            break;
        }
        PyObject *at = PyDict_GetItemWithError(seen, name);
        if (at) {
            w[PyLong_AsSsize_t(at)] = weights[i];
        } else if (!PyErr_Occurred()) {
            PyObject *pos = PyLong_FromSsize_t(n);
            result = pos && PyList_Append(list, name) == 0 && PyDict_SetItem(seen, name, pos) == 0
                         ? 0 : -1;
            Py_XDECREF(pos);
            w[n++] = weights[i];
        } else {
            result = -1;
        }
        Py_DECREF(name);
    }
    PyObject *tuple = result == 0 ? PyList_AsTuple(list) : NULL;
    if (tuple && check_total(self, w, (size_t)n) == 0)
        result = table_set(self, tuple, w);
    else
        result = -1;
    Py_XDECREF(tuple);
    Py_XDECREF(list);
    Py_XDECREF(seen);
    PyMem_Free(w);
    return result;
}

/* The id of a node argument: a str with no surrogates; 0 or -1. */
static int check_node(PyObject *node)
{
    const char *id;
    Py_ssize_t len;
    return node_id(node, &id, &len);
}

const char table_add_doc[] = PyDoc_STR(
"add_service_node($self, /, real_node_id, weight=1)\n--\n\n"
"Add a node (or give a present one a new weight) and rebuild, as the\n"
"reference does on every host change.  Weights are integers from 1 to\n"
"2**32 - 1, as Envoy's and gRPC's.");

PyObject *table_add(TableObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"real_node_id", "weight", NULL};
    PyObject *node, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_node", kwlist, &node, &weight_obj))
        return NULL;
    uint64_t weight;
    if (check_node(node) < 0 || read_weight(self, weight_obj, &weight) < 0)
        return NULL;
    Py_ssize_t at = position_of(self, node);
    if (at < 0 && PyErr_Occurred())
        return NULL;
    if (at >= 0 && self->weights[at] == weight)
        Py_RETURN_NONE;
    if (table_update(self, &node, &weight, 1, -1) < 0)
        return NULL;
    Py_RETURN_NONE;
}

const char table_add_many_doc[] = PyDoc_STR(
"add_service_nodes($self, /, nodes, weight=1)\n--\n\n"
"add_service_node(node, weight) for every node of an iterable, in one\n"
"rebuild: all or none of them.");

PyObject *table_add_many(TableObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "weight", NULL};
    PyObject *nodes, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_nodes", kwlist, &nodes, &weight_obj))
        return NULL;
    uint64_t weight;
    if (read_weight(self, weight_obj, &weight) < 0)
        return NULL;
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    uint64_t *weights = PyMem_New(uint64_t, (size_t)n + 1);
    int result = weights ? 0 : -1;
    if (!weights)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; result == 0 && i < n; i++) {
        result = check_node(PyTuple_GET_ITEM(seq, i));
        weights[i] = weight;
    }
    if (result == 0)
        result = table_update(self, n ? &PyTuple_GET_ITEM(seq, 0) : NULL, weights, n, -1);
    PyMem_Free(weights);
    Py_DECREF(seq);
    if (result < 0)
        return NULL;
    Py_RETURN_NONE;
}

const char table_remove_doc[] = PyDoc_STR(
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node and rebuild; KeyError if it is not here.");

PyObject *table_remove(TableObject *self, PyObject *node)
{
    Py_ssize_t at = position_of(self, node);
    if (at < 0) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, node);
        return NULL;
    }
    if (table_update(self, NULL, NULL, 0, at) < 0)
        return NULL;
    Py_RETURN_NONE;
}

const char table_discard_doc[] = PyDoc_STR(
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node if it is here; do nothing otherwise.");

PyObject *table_discard(TableObject *self, PyObject *node)
{
    Py_ssize_t at = position_of(self, node);
    if (at < 0 && PyErr_Occurred())
        return NULL;
    if (at >= 0 && table_update(self, NULL, NULL, 0, at) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The (node, weight) pairs of an iterable into a new tuple of exact str
 * and weights (PyMem, the caller frees); NULL with an exception (a pair
 * that is not (str, weight), a node named twice). */
static PyObject *read_pairs(TableObject *self, PyObject *pairs, uint64_t **weights)
{
    PyObject *seq = PySequence_Tuple(pairs);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *nodes = PyTuple_New(n);
    PyObject *seen = PySet_New(NULL);
    *weights = PyMem_New(uint64_t, (size_t)n + 1);
    int result = nodes && seen && *weights ? 0 : -1;
    if (result < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; result == 0 && i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(seq, i), *node, *weight;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_TypeError, "nodes must hold (node, weight) tuples, not %.200s",
                         Py_TYPE(pair)->tp_name);
            result = -1;
            break;
        }
        node = PyTuple_GET_ITEM(pair, 0);
        weight = PyTuple_GET_ITEM(pair, 1);
        if (check_node(node) < 0 || read_weight(self, weight, &(*weights)[i]) < 0) {
            result = -1;
            break;
        }
        PyObject *name = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
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
    if (result == 0 && check_total(self, *weights, (size_t)n) < 0)
        result = -1;
    Py_DECREF(seq);
    Py_XDECREF(seen);
    if (result < 0) {
        Py_XDECREF(nodes);
        PyMem_Free(*weights);
        *weights = NULL;
        return NULL;
    }
    return nodes;
}

const char table_replace_doc[] = PyDoc_STR(
"_replace_nodes($self, nodes, /)\n--\n\n"
"Make the router hold exactly nodes, a list of (node, weight) pairs, in\n"
"that order, in one rebuild: lookups see the old structure or the new one.");

PyObject *table_replace_nodes(TableObject *self, PyObject *pairs)
{
    uint64_t *weights;
    PyObject *nodes = read_pairs(self, pairs, &weights);
    if (!nodes)
        return NULL;
    int result = table_set(self, nodes, weights);
    Py_DECREF(nodes);
    PyMem_Free(weights);
    if (result < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

static unsigned table_bits(const TableObject *self)
{
    (void)self;
    return 64;
}

/* The position of the node a hash routes to, or -1 when there is none. */
static long owner_of(const TableObject *self, uint64_t h)
{
    if (self->kind == TABLE_MAGLEV)
        return self->table ? (long)self->table[chash_maglev_mod(self->mod_magic, self->table_size, h)] : -1;
    if (chash_wide_count(self->ring) == 0)
        return -1;
    return (long)chash_wide_owner(self->ring, chash_wide_successor(self->ring, h));
}

static PyObject *node_or_none(const TableObject *self, long at)
{
    if (at < 0)
        Py_RETURN_NONE;
    return Py_NewRef(PyTuple_GET_ITEM(self->nodes, at));
}

/* A request key's hash: XXH64 (seed 0) of its bytes, as Envoy's header
 * hash policy and gRPC's request_hash_header compute it; 0 or -1. */
static int request_hash(PyObject *key, uint64_t *out)
{
    const char *buf;
    Py_ssize_t len;
    if (chash_py_key_bytes(key, &buf, &len) < 0)
        return -1;
    *out = chash_xxh64(buf, (size_t)len, 0);
    return 0;
}

PyObject *table_get(TableObject *self, PyObject *key)
{
    uint64_t h;
    if (request_hash(key, &h) < 0)
        return NULL;
    return node_or_none(self, owner_of(self, h));
}

PyObject *table_get_by_hash(TableObject *self, PyObject *hash)
{
    uint64_t h;
    if (parse_hash_arg(hash, table_bits(self), table_layout_name(self), &h) < 0)
        return NULL;
    return node_or_none(self, owner_of(self, h));
}

/* The nodes of hashes[0..n) as a list. */
static PyObject *nodes_of(const TableObject *self, const uint64_t *hashes, Py_ssize_t n)
{
    PyObject *result = PyList_New(n);
    if (!result)
        return NULL;
    if (self->kind != TABLE_MAGLEV && chash_wide_count(self->ring) > 0) {
        uint32_t *owners = PyMem_New(uint32_t, n ? (size_t)n : 1);
        if (!owners) {
            Py_DECREF(result);
            return PyErr_NoMemory();
        }
        chash_wide_owners(self->ring, hashes, (size_t)n, owners);
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(PyTuple_GET_ITEM(self->nodes, owners[i])));
        PyMem_Free(owners);
        return result;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(result, i, node_or_none(self, owner_of(self, hashes[i])));
    return result;
}

const char table_get_many_doc[] = PyDoc_STR(
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

PyObject *table_get_many(TableObject *self, PyObject *keys)
{
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of str or bytes");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    uint64_t *hashes = PyMem_New(uint64_t, n ? (size_t)n : 1);
    PyObject *result = NULL;
    if (!hashes) {
        PyErr_NoMemory();
    } else {
        Py_ssize_t i = 0;
        for (; i < n; i++)
            if (request_hash(PySequence_Fast_GET_ITEM(seq, i), &hashes[i]) < 0)
                break;
        if (i == n)
            result = nodes_of(self, hashes, n);
    }
    PyMem_Free(hashes);
    Py_DECREF(seq);
    return result;
}

const char table_get_many_by_hash_doc[] = PyDoc_STR(
"get_target_nodes_by_hash($self, hashes, /)\n--\n\n"
"get_target_node_by_hash for every hash of an iterable of ints (each from\n"
"0 to 2**64 - 1), as a list; all are checked before any is looked up.");

PyObject *table_get_many_by_hash(TableObject *self, PyObject *hashes)
{
    Py_ssize_t n;
    uint64_t *values = parse_hash_args(hashes, table_bits(self), table_layout_name(self), &n);
    if (!values)
        return NULL;
    PyObject *result = nodes_of(self, values, n);
    PyMem_Free(values);
    return result;
}

/* The n argument of get_preference_list: a non-negative int (huge ones
 * are as good as the node count); 0 or -1. */
static int read_count(PyObject *obj, size_t *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "n must be int, not %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (overflow < 0 || (overflow == 0 && n < 0)) {
        PyErr_SetString(PyExc_ValueError, "n must be >= 0");
        return -1;
    }
    *out = overflow > 0 ? SIZE_MAX : (size_t)n;
    return 0;
}

/* Envoy's Maglev retry walk: attempt a looks up h ^ (2**64 - a) (the hash
 * unchanged for a = 0).  The distinct nodes of attempts 0 .. M - 1 in the
 * order met, then any node not met, in add order. */
static size_t maglev_walk(const TableObject *self, uint64_t h, size_t want, uint32_t *out)
{
    size_t n = (size_t)PyTuple_GET_SIZE(self->nodes), got = 0;
    unsigned char *seen = PyMem_Malloc(n ? n : 1);
    if (!seen)
        return SIZE_MAX;
    memset(seen, 0, n ? n : 1);
    for (uint64_t a = 0; a < self->table_size && got < want; a++) {
        uint64_t probe = a ? h ^ (~UINT64_C(0) - a + 1) : h;
        uint32_t k = self->table[chash_maglev_mod(self->mod_magic, self->table_size, probe)];
        if (!seen[k]) {
            seen[k] = 1;
            out[got++] = k;
        }
    }
    for (size_t k = 0; k < n && got < want; k++)
        if (!seen[k])
            out[got++] = (uint32_t)k;
    PyMem_Free(seen);
    return got;
}

PyObject *table_preference(TableObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get_preference_list expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    size_t want;
    uint64_t h;
    if (read_count(args[1], &want) < 0 || request_hash(args[0], &h) < 0)
        return NULL;
    size_t n = (size_t)PyTuple_GET_SIZE(self->nodes);
    want = want < n ? want : n;
    uint32_t *owners = PyMem_New(uint32_t, want ? want : 1);
    if (!owners)
        return PyErr_NoMemory();
    size_t found = 0;
    if (want == 0) {
        found = 0;
    } else if (self->kind == TABLE_MAGLEV) {
        found = maglev_walk(self, h, want, owners);
    } else if (chash_wide_preference(self->ring, h, want, owners, &found) != CHASH_OK) {
        found = SIZE_MAX;
    }
    if (found == SIZE_MAX) {
        PyMem_Free(owners);
        return PyErr_NoMemory();
    }
    PyObject *result = PyList_New((Py_ssize_t)found);
    for (size_t i = 0; result && i < found; i++)
        PyList_SET_ITEM(result, (Py_ssize_t)i, Py_NewRef(PyTuple_GET_ITEM(self->nodes, owners[i])));
    PyMem_Free(owners);
    return result;
}

const char table_calc_doc[] = PyDoc_STR(
"_calculate_hash($self, key, /)\n--\n\n"
"The 64-bit hash of a str or bytes key: XXH64, seed 0.");

PyObject *table_calculate_hash(TableObject *self, PyObject *key)
{
    (void)self;
    uint64_t h;
    if (request_hash(key, &h) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(h);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

/* {node: value(k)} over every node, value a new reference or NULL. */
static PyObject *per_node(const TableObject *self, PyObject *(*value)(const TableObject *, size_t, void *),
                          void *ctx)
{
    PyObject *result = PyDict_New();
    Py_ssize_t n = PyTuple_GET_SIZE(self->nodes);
    for (Py_ssize_t k = 0; result && k < n; k++) {
        PyObject *v = value(self, (size_t)k, ctx);
        if (!v || PyDict_SetItem(result, PyTuple_GET_ITEM(self->nodes, k), v) < 0)
            Py_CLEAR(result);
        Py_XDECREF(v);
    }
    return result;
}

static PyObject *share_value(const TableObject *self, size_t k, void *ctx)
{
    (void)self;
    return PyFloat_FromDouble(((const double *)ctx)[k]);
}

const char table_ownership_doc[] = PyDoc_STR(
"ownership($self, /)\n--\n\n"
"{node: fraction of the 2**64 hashes it owns}; the values sum to 1.");

PyObject *table_ownership(TableObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)PyTuple_GET_SIZE(self->nodes);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    if (self->kind == TABLE_MAGLEV) {
        for (size_t k = 0; k < n; k++)
            share[k] = (double)self->counts[k] / (double)self->table_size;
    } else {
        chash_wide_ownership(self->ring, share);
    }
    PyObject *result = per_node(self, share_value, share);
    PyMem_Free(share);
    return result;
}

static PyObject *count_value(const TableObject *self, size_t k, void *ctx)
{
    (void)self;
    return PyLong_FromSize_t(((const size_t *)ctx)[k]);
}

const char table_distribution_doc[] = PyDoc_STR(
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys it owns}, every node included.");

PyObject *table_key_distribution(TableObject *self, PyObject *keys)
{
    PyObject *owners = table_get_many(self, keys);
    if (!owners)
        return NULL;
    size_t n = (size_t)PyTuple_GET_SIZE(self->nodes);
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    if (!counts) {
        Py_DECREF(owners);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (n ? n : 1) * sizeof *counts);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(owners); i++) {
        Py_ssize_t at = position_of(self, PyList_GET_ITEM(owners, i));
        if (at >= 0)
            counts[at]++;
    }
    Py_DECREF(owners);
    PyObject *result = per_node(self, count_value, counts);
    PyMem_Free(counts);
    return result;
}

PyObject *table_get_points(TableObject *self, void *Py_UNUSED(closure))
{
    return per_node(self, count_value, self->counts);
}

static PyObject *weight_value(const TableObject *self, size_t k, void *ctx)
{
    (void)ctx;
    return PyFloat_FromDouble((double)self->weights[k]);
}

PyObject *table_get_weights(TableObject *self, void *Py_UNUSED(closure))
{
    return per_node(self, weight_value, NULL);
}

PyObject *table_get_nodes(TableObject *self, void *Py_UNUSED(closure))
{
    return PySequence_List(self->nodes);
}

PyObject *table_get_hash(TableObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(self->hash == CHASH_POINT_MURMUR2_64 ? "murmur2_64" : "xxh64");
}

PyObject *table_get_layout(TableObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(self->kind == TABLE_GRPC ? "grpc" : "envoy");
}

PyObject *table_get_memory(TableObject *self, void *Py_UNUSED(closure))
{
    size_t n = (size_t)PyTuple_GET_SIZE(self->nodes);
    size_t bytes = n * (sizeof *self->weights + sizeof *self->counts);
    if (self->ring)
        bytes += chash_wide_memory(self->ring);
    if (self->table)
        bytes += self->table_size * sizeof *self->table;
    return PyLong_FromSize_t(bytes);
}

/* The first 4 bytes of MD5(name) of every node, big-endian, into tags. */
static int node_tags(const TableObject *self, uint32_t *tags)
{
    Py_ssize_t n = PyTuple_GET_SIZE(self->nodes);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t len;
        const char *id = utf8_at(self->nodes, k, &len);
        if (!id)
            return -1;
        uint8_t digest[CHASH_MD5_DIGEST_SIZE];
        chash_md5(id, (size_t)len, digest);
        tags[k] = (uint32_t)digest[0] << 24 | (uint32_t)digest[1] << 16
                  | (uint32_t)digest[2] << 8 | digest[3];
    }
    return 0;
}

static void put_be(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
}

const char table_fingerprint_doc[] = PyDoc_STR(
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: the layout, hash and\n"
"sizes, and every ring point (or table entry) with its owner's name.");

PyObject *table_fingerprint(TableObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)PyTuple_GET_SIZE(self->nodes);
    size_t entries = self->kind == TABLE_MAGLEV ? (self->table ? self->table_size : 0)
                                                : chash_wide_count(self->ring);
    size_t stride = self->kind == TABLE_MAGLEV ? 4 : 12;
    char head[128];
    int head_len = PyOS_snprintf(head, sizeof head, "%s|%s|%llu|%llu|%zu", table_layout_name(self),
                                 self->hash == CHASH_POINT_MURMUR2_64 ? "murmur2_64" : "xxh64",
                                 (unsigned long long)self->min_ring,
                                 (unsigned long long)self->max_ring, self->table_size);
    uint32_t *tags = PyMem_New(uint32_t, n ? n : 1);
    uint8_t *buf = PyMem_Malloc((size_t)head_len + entries * stride + 1);
    if (!tags || !buf) {
        PyMem_Free(tags);
        PyMem_Free(buf);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    if (node_tags(self, tags) == 0) {
        memcpy(buf, head, (size_t)head_len);
        uint8_t *at = buf + head_len;
        for (size_t i = 0; i < entries; i++, at += stride) {
            if (self->kind == TABLE_MAGLEV) {
                put_be(at, tags[self->table[i]], 4);
            } else {
                put_be(at, chash_wide_point(self->ring, i), 8);
                put_be(at + 8, tags[chash_wide_owner(self->ring, i)], 4);
            }
        }
        uint8_t digest[CHASH_MD5_DIGEST_SIZE];
        chash_md5(buf, (size_t)(at - buf), digest);
        char hex[17];
        for (int i = 0; i < 8; i++)
            PyOS_snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        result = PyUnicode_FromStringAndSize(hex, 16);
    }
    PyMem_Free(tags);
    PyMem_Free(buf);
    return result;
}

const char table_check_doc[] = PyDoc_STR(
"_check($self, /)\n--\n\n"
"Verify every invariant; AssertionError if one is broken.");

PyObject *table_check(TableObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)PyTuple_GET_SIZE(self->nodes);
    int ok = PyDict_GET_SIZE(self->index) == (Py_ssize_t)n;
    size_t *seen = PyMem_New(size_t, n ? n : 1);
    if (!seen)
        return PyErr_NoMemory();
    memset(seen, 0, (n ? n : 1) * sizeof *seen);
    for (size_t k = 0; ok && k < n; k++)
        ok = position_of(self, PyTuple_GET_ITEM(self->nodes, (Py_ssize_t)k)) == (Py_ssize_t)k
             && self->weights[k] >= 1;
    if (ok && self->kind == TABLE_MAGLEV) {
        ok = (n == 0) == (self->table == NULL);
        for (size_t e = 0; ok && self->table && e < self->table_size; e++) {
            ok = self->table[e] < n;
            if (ok)
                seen[self->table[e]]++;
        }
    } else if (ok) {
        ok = chash_wide_check(self->ring) == CHASH_OK && chash_wide_nodes(self->ring) == n;
        for (size_t i = 0; ok && i < chash_wide_count(self->ring); i++)
            seen[chash_wide_owner(self->ring, i)]++;
    }
    for (size_t k = 0; ok && k < n; k++)
        ok = seen[k] == self->counts[k];
    PyMem_Free(seen);
    if (PyErr_Occurred())
        return NULL;
    if (!ok)
        return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* Protocols and pickling                                             */

Py_ssize_t table_len(TableObject *self)
{
    return PyTuple_GET_SIZE(self->nodes);
}

int table_contains(TableObject *self, PyObject *node)
{
    Py_ssize_t at = position_of(self, node);
    return at >= 0 ? 1 : PyErr_Occurred() ? -1 : 0;
}

PyObject *table_iter(TableObject *self)
{
    return PyObject_GetIter(self->nodes);
}

PyObject *table_repr(TableObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr;
    const char *hash = self->hash == CHASH_POINT_MURMUR2_64 ? "murmur2_64" : "xxh64";
    if (self->kind == TABLE_MAGLEV)
        repr = PyUnicode_FromFormat("%U(table_size=%zu, hash='%s', layout='envoy', nodes=%zd)",
                                    type_name, self->table_size, hash, PyTuple_GET_SIZE(self->nodes));
    else
        repr = PyUnicode_FromFormat(
            "%U(hash='%s', layout='%s', minimum_ring_size=%llu, maximum_ring_size=%llu, "
            "nodes=%zd, points=%zu)",
            type_name, hash, table_layout_name(self), (unsigned long long)self->min_ring,
            (unsigned long long)self->max_ring, PyTuple_GET_SIZE(self->nodes),
            chash_wide_count(self->ring));
    Py_DECREF(type_name);
    return repr;
}

PyObject *table_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    TableObject *x = (TableObject *)a, *y = (TableObject *)b;
    int equal = x->kind == y->kind && x->hash == y->hash && x->min_ring == y->min_ring
                && x->max_ring == y->max_ring && x->table_size == y->table_size;
    if (equal) {
        /* The rings depend on the add order (running sums); Maglev sorts
         * its hosts, so only the weights matter. */
        PyObject *wa = table_get_weights(x, NULL);
        PyObject *wb = wa ? table_get_weights(y, NULL) : NULL;
        equal = wb ? PyObject_RichCompareBool(wa, wb, Py_EQ) : -1;
        Py_XDECREF(wa);
        Py_XDECREF(wb);
        if (equal == 1 && x->kind != TABLE_MAGLEV)
            equal = PyObject_RichCompareBool(x->nodes, y->nodes, Py_EQ);
        if (equal < 0)
            return NULL;
    }
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

const char table_reduce_doc[] = PyDoc_STR("__reduce__($self, /)\n--\n\nPickle support: rebuilt from its nodes.");

PyObject *table_reduce(TableObject *self, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t n = PyTuple_GET_SIZE(self->nodes);
    PyObject *pairs = PyList_New(n);
    for (Py_ssize_t k = 0; pairs && k < n; k++) {
        PyObject *item = Py_BuildValue("(OK)", PyTuple_GET_ITEM(self->nodes, k),
                                       (unsigned long long)self->weights[k]);
        if (!item)
            Py_CLEAR(pairs);
        else
            PyList_SET_ITEM(pairs, k, item);
    }
    PyObject *module = pairs ? PyType_GetModuleByDef(Py_TYPE(self), &chash_module) : NULL;
    PyObject *rebuild = module ? PyObject_GetAttrString(module, "_rebuild_table") : NULL;
    PyObject *result = NULL;
    /* The ring subtype shares its name with ConsistentHashRouter, which is
     * how pickle finds a class: the base is named, _rebuild_table reads
     * the layout. */
    PyObject *cls = self->kind == TABLE_MAGLEV ? (PyObject *)Py_TYPE(self)
                    : module ? (PyObject *)get_state(module)->router_type : NULL;
    if (rebuild && cls)
        result = Py_BuildValue("(O(OssKKnO))", rebuild, cls,
                               table_layout_name(self),
                               self->hash == CHASH_POINT_MURMUR2_64 ? "murmur2_64" : "xxh64",
                               (unsigned long long)self->min_ring,
                               (unsigned long long)self->max_ring, (Py_ssize_t)self->table_size,
                               pairs);
    Py_XDECREF(rebuild);
    Py_XDECREF(pairs);
    return result;
}

const char rebuild_table_doc[] = PyDoc_STR(
"_rebuild_table(cls, layout, hash, minimum_ring_size, maximum_ring_size, table_size, nodes, /)\n"
"--\n\n"
"A router of class cls (the envoy/grpc ring or MaglevRouter) holding nodes,\n"
"a list of (node, weight) pairs; the arguments are checked as a call's.");

PyObject *module_rebuild_table(PyObject *module, PyObject *args)
{
    PyTypeObject *cls;
    PyObject *layout, *hash, *lo, *hi, *size, *pairs;
    if (!PyArg_ParseTuple(args, "O!OOOOOO:_rebuild_table", &PyType_Type, &cls, &layout, &hash, &lo,
                          &hi, &size, &pairs))
        return NULL;
    module_state *state = get_state(module);
    PyObject *self;
    /* A ring pickles its class by name, which names the base type. */
    if (PyUnicode_Check(layout) && PyUnicode_CompareWithASCIIString(layout, "maglev") == 0) {
        if (cls != state->maglev_type) {
            PyErr_SetString(PyExc_TypeError, "_rebuild_table: cls must be MaglevRouter");
            return NULL;
        }
        PyObject *call_args = Py_BuildValue("(O)", size);
        PyObject *kw = call_args ? Py_BuildValue("{sO}", "hash", hash) : NULL;
        self = kw ? PyObject_Call((PyObject *)cls, call_args, kw) : NULL;
        Py_XDECREF(call_args);
        Py_XDECREF(kw);
    } else {
        if (cls != state->router_type && cls != state->wide_ring_type) {
            PyErr_SetString(PyExc_TypeError, "_rebuild_table: cls must be ConsistentHashRouter");
            return NULL;
        }
        self = wide_ring_create(module, layout, Py_None, hash, lo, hi);
        cls = state->wide_ring_type;
    }
    if (self && !PyObject_TypeCheck(self, cls)) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_TypeError, "_rebuild_table: layout does not match cls");
        return NULL;
    }
    if (self) {
        PyObject *done = table_replace_nodes((TableObject *)self, pairs);
        if (!done)
            Py_CLEAR(self);
        Py_XDECREF(done);
    }
    return self;
}

/* ------------------------------------------------------------------ */
/* Module init                                                        */

static PyMethodDef table_module_methods[] = {
    {"_rebuild_table", module_rebuild_table, METH_VARARGS, rebuild_table_doc},
    {NULL, NULL, 0, NULL},
};

int table_module_init(PyObject *module)
{
    module_state *state = get_state(module);
    state->wide_ring_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &wide_ring_spec, (PyObject *)state->router_type);
    if (!state->wide_ring_type)
        return -1;
    state->maglev_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &maglev_spec, NULL);
    if (!state->maglev_type || PyModule_AddType(module, state->maglev_type) < 0)
        return -1;
    return PyModule_AddFunctions(module, table_module_methods);
}
