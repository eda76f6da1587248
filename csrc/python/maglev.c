/*
 * maglev.c - chash.MaglevRouter (maglev.h): Envoy's MAGLEV load balancer as
 * a router.  The table is Envoy's (strategies/maglev.h: hosts sorted by
 * key, host k's permutation from XXH64(key, 0) % M stepping by
 * XXH64(key, 1) % (M - 1) + 1, turns weighted by the normalised weights),
 * rebuilt whole from the ordered node list (node_list.h) on every change.
 * A key goes to table[XXH64(key) % M].
 * Part of chash._chash.
 *
 * Thread safety rests on the GIL: a rebuild computes the table aside,
 * running no Python code, then swaps it in.
 */
#include "maglev.h"

#include "family.h"

#include "args.h"
#include "diff.h"
#include "hash/hash.h"
#include "key_hash64.h"
#include "state.h"
#include "node_list.h"
#include "strategies/maglev.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    NodeList list;
    size_t table_size;     /* M, a prime */
    uint64_t mod_magic[2]; /* ceil(2**128 / M), high and low halves, for h % M */
    uint32_t *table;       /* node position per entry; PyMem, NULL with no node */
} MaglevObject;

/* h % M without a division (strategies/maglev.h). */
static inline uint64_t table_mod(const MaglevObject *self, uint64_t h)
{
    return chash_maglev_mod(self->mod_magic, self->table_size, h);
}

/* ------------------------------------------------------------------ */
/* The rebuild                                                        */

static void release_table(void *structure)
{
    PyMem_Free(structure);
}

/* The Maglev table of a node list: Envoy's build from the nodes' UTF-8 and
 * weights, in one engine call (strategies/maglev.h): hosts sorted by key,
 * weights normalised by their sum, the weighted fill, entries renamed to
 * add-order positions, the counts. */
static int build_table(void *owner, PyObject *nodes, const uint64_t *weights, size_t n,
                       size_t *counts, void **structure)
{
    MaglevObject *self = owner;
    if (n == 0)
        return 0; /* no table */
    const char **ids = PyMem_New(const char *, n);
    size_t *lens = PyMem_New(size_t, n);
    uint32_t *table = PyMem_New(uint32_t, self->table_size);
    int status = ids && lens && table ? CHASH_OK : CHASH_ENOMEM;
    for (size_t k = 0; k < n && status == CHASH_OK; k++) {
        Py_ssize_t len;
        ids[k] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(nodes, (Py_ssize_t)k), &len);
        lens[k] = (size_t)len;
        if (!ids[k])
            status = CHASH_ENOMEM;
    }
    if (status == CHASH_OK)
        status = chash_maglev_envoy_table(ids, lens, weights, n, self->table_size, table, counts);
    PyMem_Free(ids);
    PyMem_Free(lens);
    if (status != CHASH_OK) {
        PyMem_Free(table);
        if (!PyErr_Occurred())
            chash_py_error(status, NULL, "cannot build the Maglev table");
        return -1;
    }
    *structure = table;
    return 0;
}

static NodeListRebuild rebuild_of(MaglevObject *self)
{
    return (NodeListRebuild){self, build_table, release_table, (void **)&self->table, "maglev", 1, NULL};
}

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

static PyObject *maglev_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"table_size", "hash", "layout", NULL};
    PyObject *size_obj = NULL, *hash = NULL, *layout = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OO:MaglevRouter", kwlist, &size_obj, &hash,
                                     &layout))
        return NULL;
    size_t size;
    if (parse_table_size(size_obj, &size) < 0)
        return NULL;
    if (layout && !(PyUnicode_Check(layout) && PyUnicode_CompareWithASCIIString(layout, "envoy") == 0)) {
        PyErr_Format(PyExc_ValueError, "MaglevRouter's layout must be 'envoy', not %R", layout);
        return NULL;
    }
    chash_point_hash point_hash;
    if (parse_point_hash(hash, 0, "maglev", &point_hash) < 0)
        return NULL;
    MaglevObject *self = (MaglevObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->table_size = size;
    chash_maglev_mod_magic(size, self->mod_magic);
    if (node_list_init(&self->list) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int maglev_traverse(MaglevObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return node_list_traverse(&self->list, visit, arg);
}

static int maglev_clear(MaglevObject *self)
{
    (void)self; /* holds only exact str and dicts of them: no cycle */
    return 0;
}

static void maglev_dealloc(MaglevObject *self);

const uint64_t *maglev_changes(PyObject *obj)
{
    if (!chash_py_made_by(obj, (void *)maglev_dealloc))
        return NULL;
    return &((MaglevObject *)obj)->list.changes;
}

static void maglev_dealloc(MaglevObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    PyMem_Free(self->table);
    self->table = NULL;
    node_list_free(&self->list);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* ------------------------------------------------------------------ */
/* Membership                                                         */

static PyObject *done(int status)
{
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *maglev_add(MaglevObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"real_node_id", "weight", NULL};
    PyObject *node, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_node", kwlist, &node, &weight_obj))
        return NULL;
    double weight;
    if (parse_weight(weight_obj, &weight) < 0)
        return NULL;
    NodeListRebuild how = rebuild_of(self);
    return done(node_list_add(&self->list, node, weight, &how));
}

static PyObject *maglev_add_many(MaglevObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "weight", NULL};
    PyObject *nodes, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_nodes", kwlist, &nodes, &weight_obj))
        return NULL;
    double weight;
    if (parse_weight(weight_obj, &weight) < 0)
        return NULL;
    NodeListRebuild how = rebuild_of(self);
    return done(node_list_add_many(&self->list, nodes, weight, &how));
}

static PyObject *maglev_remove(MaglevObject *self, PyObject *node)
{
    NodeListRebuild how = rebuild_of(self);
    int removed = node_list_remove(&self->list, node, &how);
    if (removed == 0)
        PyErr_SetObject(PyExc_KeyError, node);
    return done(removed <= 0 ? -1 : 0);
}

static PyObject *maglev_discard(MaglevObject *self, PyObject *node)
{
    NodeListRebuild how = rebuild_of(self);
    return done(node_list_remove(&self->list, node, &how));
}

static PyObject *maglev_replace(MaglevObject *self, PyObject *pairs)
{
    NodeListRebuild how = rebuild_of(self);
    return done(node_list_replace(&self->list, pairs, &how));
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

static PyObject *owner_of(const MaglevObject *self, uint64_t h)
{
    if (!self->table)
        Py_RETURN_NONE;
    return Py_NewRef(node_list_at(&self->list, self->table[table_mod(self, h)]));
}

static PyObject *maglev_get(MaglevObject *self, PyObject *key)
{
    uint64_t h;
    if (key_hash64(key, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static PyObject *maglev_get_by_hash(MaglevObject *self, PyObject *hash)
{
    uint64_t h;
    if (parse_hash_arg(hash, 64, "maglev", &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static PyObject *nodes_of(const MaglevObject *self, const uint64_t *hashes, Py_ssize_t n)
{
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; result && i < n; i++)
        PyList_SET_ITEM(result, i, owner_of(self, hashes[i]));
    return result;
}

static PyObject *maglev_get_many(MaglevObject *self, PyObject *keys)
{
    Py_ssize_t n;
    uint64_t *hashes = key_hashes64(keys, &n);
    if (!hashes)
        return NULL;
    PyObject *result = nodes_of(self, hashes, n);
    PyMem_Free(hashes);
    return result;
}

static PyObject *maglev_get_many_by_hash(MaglevObject *self, PyObject *hashes)
{
    Py_ssize_t n;
    uint64_t *values = parse_hash_args(hashes, 64, "maglev", &n);
    if (!values)
        return NULL;
    PyObject *result = nodes_of(self, values, n);
    PyMem_Free(values);
    return result;
}

/* Envoy's Maglev retry walk: attempt a looks up h ^ (2**64 - a) (the hash
 * unchanged for a = 0).  The distinct nodes of attempts 0 .. M - 1 in the
 * order met, then any node not met, in add order; SIZE_MAX when out of
 * memory. */
static size_t maglev_walk(const MaglevObject *self, uint64_t h, size_t want, uint32_t *out)
{
    size_t n = (size_t)node_list_len(&self->list), got = 0;
    unsigned char *seen = PyMem_Malloc(n ? n : 1);
    if (!seen)
        return SIZE_MAX;
    memset(seen, 0, n ? n : 1);
    for (uint64_t a = 0; a < self->table_size && got < want; a++) {
        uint64_t probe = a ? h ^ (~UINT64_C(0) - a + 1) : h;
        uint32_t k = self->table[table_mod(self, probe)];
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

static PyObject *maglev_preference(MaglevObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get_preference_list expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    size_t want;
    uint64_t h;
    if (parse_count(args[1], &want) < 0 || key_hash64(args[0], &h) < 0)
        return NULL;
    size_t n = (size_t)node_list_len(&self->list);
    want = want < n ? want : n;
    uint32_t *owners = PyMem_New(uint32_t, want ? want : 1);
    if (!owners)
        return PyErr_NoMemory();
    size_t found = want ? maglev_walk(self, h, want, owners) : 0;
    if (found == SIZE_MAX) {
        PyMem_Free(owners);
        return PyErr_NoMemory();
    }
    PyObject *result = PyList_New((Py_ssize_t)found);
    for (size_t i = 0; result && i < found; i++)
        PyList_SET_ITEM(result, (Py_ssize_t)i, Py_NewRef(node_list_at(&self->list, owners[i])));
    PyMem_Free(owners);
    return result;
}

static PyObject *maglev_calculate_hash(MaglevObject *self, PyObject *key)
{
    (void)self;
    uint64_t h;
    if (key_hash64(key, &h) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(h);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

static PyObject *maglev_ownership(MaglevObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)node_list_len(&self->list);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    for (size_t k = 0; k < n; k++)
        share[k] = (double)self->list.counts[k] / (double)self->table_size;
    PyObject *result = node_list_float_map(&self->list, share);
    PyMem_Free(share);
    return result;
}

static PyObject *maglev_key_distribution(MaglevObject *self, PyObject *keys)
{
    Py_ssize_t nkeys;
    uint64_t *hashes = key_hashes64(keys, &nkeys);
    if (!hashes)
        return NULL;
    size_t n = (size_t)node_list_len(&self->list);
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    if (!counts) {
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (n ? n : 1) * sizeof *counts);
    for (Py_ssize_t i = 0; self->table && i < nkeys; i++)
        counts[self->table[table_mod(self, hashes[i])]]++;
    PyObject *result = node_list_count_map(&self->list, counts);
    PyMem_Free(hashes);
    PyMem_Free(counts);
    return result;
}

static PyObject *maglev_fingerprint(MaglevObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)node_list_len(&self->list);
    size_t entries = self->table ? self->table_size : 0;
    char head[128];
    int head_len = PyOS_snprintf(head, sizeof head, "maglev|xxh64|0|0|%zu", self->table_size);
    uint32_t *tags = PyMem_New(uint32_t, n ? n : 1);
    uint8_t *buf = PyMem_Malloc((size_t)head_len + entries * 4 + 1);
    if (!tags || !buf) {
        PyMem_Free(tags);
        PyMem_Free(buf);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    if (node_list_tags(&self->list, tags) == 0) {
        memcpy(buf, head, (size_t)head_len);
        uint8_t *at = buf + head_len;
        for (size_t i = 0; i < entries; i++, at += 4) {
            uint32_t tag = tags[self->table[i]];
            at[0] = (uint8_t)(tag >> 24);
            at[1] = (uint8_t)(tag >> 16);
            at[2] = (uint8_t)(tag >> 8);
            at[3] = (uint8_t)tag;
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

static PyObject *maglev_check(MaglevObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)node_list_len(&self->list);
    size_t *seen = PyMem_New(size_t, n ? n : 1);
    if (!seen)
        return PyErr_NoMemory();
    memset(seen, 0, (n ? n : 1) * sizeof *seen);
    int ok = (n == 0) == (self->table == NULL);
    for (size_t e = 0; ok && self->table && e < self->table_size; e++) {
        ok = self->table[e] < n;
        if (ok)
            seen[self->table[e]]++;
    }
    ok = ok && node_list_check(&self->list, seen);
    PyMem_Free(seen);
    if (PyErr_Occurred())
        return NULL;
    if (!ok)
        return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *list_node(PyObject *router, uint32_t index)
{
    return node_list_at(&((MaglevObject *)router)->list, index);
}

static PyObject *maglev_diff(MaglevObject *self, PyObject *other)
{
    module_state *state = state_of_type(Py_TYPE(self));
    if (!state)
        return NULL;
    if (!PyObject_TypeCheck(other, state->maglev_type)) {
        PyErr_Format(PyExc_TypeError, "diff() needs a MaglevRouter, not %.200s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    MaglevObject *to = (MaglevObject *)other;
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
    uint32_t *same = node_list_positions_in(&self->list, &to->list);
    if (!same)
        return NULL;
    chash_move *moves;
    size_t count;
    int status = chash_table_diff(self->table, to->table, self->table_size, same,
                                  (size_t)node_list_len(&self->list),
                                  (size_t)node_list_len(&to->list), &moves, &count);
    PyMem_Free(same);
    if (status != CHASH_OK)
        return chash_py_error(status, NULL, "diff");
    PyObject *list = diff_plain_moves(moves, count, (PyObject *)self, other, list_node);
    chash_moves_free(moves);
    if (list && diff_as_moves(list, state->move_type) < 0)
        Py_CLEAR(list);
    return list;
}

static PyObject *maglev_reduce(MaglevObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *pairs = node_list_pairs(&self->list);
    PyObject *module = pairs ? PyType_GetModuleByDef(Py_TYPE(self), &chash_module) : NULL;
    PyObject *rebuild = module ? PyObject_GetAttrString(module, "_rebuild_table") : NULL;
    PyObject *result = NULL;
    if (rebuild)
        result = Py_BuildValue("(O(OssKKnO))", rebuild, (PyObject *)Py_TYPE(self), "maglev", "xxh64",
                               0ULL, 0ULL, (Py_ssize_t)self->table_size, pairs);
    Py_XDECREF(rebuild);
    Py_XDECREF(pairs);
    return result;
}

PyObject *maglev_rebuild(PyTypeObject *cls, PyObject *table_size, PyObject *hash, PyObject *pairs)
{
    PyObject *args = Py_BuildValue("(O)", table_size);
    PyObject *kw = args ? Py_BuildValue("{sO}", "hash", hash) : NULL;
    PyObject *self = kw ? PyObject_Call((PyObject *)cls, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (self) {
        PyObject *filled = maglev_replace((MaglevObject *)self, pairs);
        if (!filled)
            Py_CLEAR(self);
        Py_XDECREF(filled);
    }
    return self;
}

static PyObject *get_table(MaglevObject *self, void *Py_UNUSED(closure))
{
    if (!self->table)
        return PyList_New(0);
    PyObject *list = PyList_New((Py_ssize_t)self->table_size);
    for (size_t e = 0; list && e < self->table_size; e++)
        PyList_SET_ITEM(list, (Py_ssize_t)e, Py_NewRef(node_list_at(&self->list, self->table[e])));
    return list;
}

static PyObject *get_size(MaglevObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->table_size);
}

static PyObject *get_nodes(MaglevObject *self, void *Py_UNUSED(closure))
{
    return node_list_nodes(&self->list);
}

static PyObject *get_weights(MaglevObject *self, void *Py_UNUSED(closure))
{
    return node_list_weights(&self->list);
}

static PyObject *get_points(MaglevObject *self, void *Py_UNUSED(closure))
{
    return node_list_counts(&self->list);
}

static PyObject *get_hash(MaglevObject *self, void *Py_UNUSED(closure))
{
    (void)self;
    return PyUnicode_FromString("xxh64");
}

/* Envoy's Maglev weights are uint32 integers from 1. */
static PyObject *get_weight_rule(MaglevObject *self, void *Py_UNUSED(closure))
{
    (void)self;
    return PyUnicode_FromString("whole");
}

static PyObject *get_layout(MaglevObject *self, void *Py_UNUSED(closure))
{
    (void)self;
    return PyUnicode_FromString("envoy");
}

static PyObject *get_memory(MaglevObject *self, void *Py_UNUSED(closure))
{
    size_t n = (size_t)node_list_len(&self->list);
    size_t bytes = n * (sizeof *self->list.weights + sizeof *self->list.counts);
    if (self->table)
        bytes += self->table_size * sizeof *self->table;
    return PyLong_FromSize_t(bytes);
}

/* ------------------------------------------------------------------ */
/* Protocols                                                          */

static Py_ssize_t maglev_len(MaglevObject *self)
{
    return node_list_len(&self->list);
}

static int maglev_contains(MaglevObject *self, PyObject *node)
{
    return node_list_contains(&self->list, node);
}

static PyObject *maglev_iter(MaglevObject *self)
{
    return node_list_iter(&self->list);
}

static PyObject *maglev_repr(MaglevObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat("%U(table_size=%zu, hash='xxh64', layout='envoy', nodes=%zd)",
                                          type_name, self->table_size, node_list_len(&self->list));
    Py_DECREF(type_name);
    return repr;
}

static PyObject *maglev_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    MaglevObject *x = (MaglevObject *)a, *y = (MaglevObject *)b;
    /* Maglev sorts its hosts: only the weights matter, not the order. */
    int equal = x->table_size == y->table_size ? node_list_equal(&x->list, &y->list, 0) : 0;
    if (equal < 0)
        return NULL;
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

/* ------------------------------------------------------------------ */
/* The tables                                                         */

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1)\n--\n\n"
"Add a node (or give a present one a new weight) and rebuild the table, as\n"
"Envoy does on every host change.  Weights are integers from 1 to\n"
"2**32 - 1, as Envoy's.");

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1)\n--\n\n"
"add_service_node(node, weight) for every node of an iterable, in one\n"
"rebuild: all or none of them.");

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node and rebuild; KeyError if it is not here.");

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node if it is here; do nothing otherwise.");

PyDoc_STRVAR(get_doc,
"get_target_node($self, request_key, /)\n--\n\n"
"table[XXH64(key) % table_size], as Envoy's Maglev routes a header hash;\n"
"None when there is no node.");

PyDoc_STRVAR(get_many_doc,
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

PyDoc_STRVAR(get_by_hash_doc,
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"table[hash % table_size] for a 64-bit hash computed by the caller (0 to\n"
"2**64 - 1); None when there is no node.");

PyDoc_STRVAR(get_many_by_hash_doc,
"get_target_nodes_by_hash($self, hashes, /)\n--\n\n"
"get_target_node_by_hash for every hash of an iterable of ints (each from\n"
"0 to 2**64 - 1), as a list; all are checked before any is looked up.");

PyDoc_STRVAR(preference_doc,
"get_preference_list($self, key, n, /)\n--\n\n"
"n distinct nodes in the order Envoy's retries meet them: attempt a looks\n"
"up the key's hash XOR (2**64 - a); after table_size attempts, any node\n"
"not met follows in add order.");

PyDoc_STRVAR(ownership_doc,
"ownership($self, /)\n--\n\n"
"{node: fraction of the 2**64 hashes it owns}; the values sum to 1.");

PyDoc_STRVAR(distribution_doc,
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys it owns}, every node included.");

PyDoc_STRVAR(fingerprint_doc,
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: the table size and\n"
"every table entry with its owner's name.");

PyDoc_STRVAR(diff_doc,
"diff($self, other, /)\n--\n\n"
"The entries of the lookup table whose owner differs between this router\n"
"and other (a MaglevRouter of the same table_size), as\n"
"chash.Move(start, end, source, target) named tuples in table order.  A\n"
"Move holds the entries e with start < e <= end, wrapping past the last\n"
"entry (table_size - 1) when start > end; start == end is every entry.\n"
"A key's entry is XXH64(key) % table_size; keys in a Move's entries move\n"
"from source (this router's node) to target (other's), no other key.");

PyDoc_STRVAR(calc_doc,
"_calculate_hash($self, key, /)\n--\n\n"
"The 64-bit hash of a str or bytes key: XXH64, seed 0.");

PyDoc_STRVAR(check_doc,
"_check($self, /)\n--\n\n"
"Verify every invariant; AssertionError if one is broken.");

PyDoc_STRVAR(reduce_doc, "__reduce__($self, /)\n--\n\nPickle support: rebuilt from its nodes.");

PyDoc_STRVAR(replace_doc,
"_replace_nodes($self, nodes, /)\n--\n\n"
"Make the router hold exactly nodes, a list of (node, weight) pairs, in\n"
"that order, in one rebuild: lookups see the old table or the new one.");

static PyMethodDef maglev_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))maglev_add, METH_VARARGS | METH_KEYWORDS, add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))maglev_add_many, METH_VARARGS | METH_KEYWORDS, add_many_doc},
    {"remove_service_node", (PyCFunction)maglev_remove, METH_O, remove_doc},
    {"discard_service_node", (PyCFunction)maglev_discard, METH_O, discard_doc},
    {"get_target_node", (PyCFunction)maglev_get, METH_O, get_doc},
    {"get_target_nodes", (PyCFunction)maglev_get_many, METH_O, get_many_doc},
    {"get_target_node_by_hash", (PyCFunction)maglev_get_by_hash, METH_O, get_by_hash_doc},
    {"get_target_nodes_by_hash", (PyCFunction)maglev_get_many_by_hash, METH_O, get_many_by_hash_doc},
    {"get_preference_list", (PyCFunction)(void (*)(void))maglev_preference, METH_FASTCALL, preference_doc},
    {"ownership", (PyCFunction)maglev_ownership, METH_NOARGS, ownership_doc},
    {"key_distribution", (PyCFunction)maglev_key_distribution, METH_O, distribution_doc},
    {"fingerprint", (PyCFunction)maglev_fingerprint, METH_NOARGS, fingerprint_doc},
    {"diff", (PyCFunction)maglev_diff, METH_O, diff_doc},
    {"_calculate_hash", (PyCFunction)maglev_calculate_hash, METH_O, calc_doc},
    {"_check", (PyCFunction)maglev_check, METH_NOARGS, check_doc},
    {"__reduce__", (PyCFunction)maglev_reduce, METH_NOARGS, reduce_doc},
    {"_replace_nodes", (PyCFunction)maglev_replace, METH_O, replace_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef maglev_getset[] = {
    {"table", (getter)get_table, NULL,
     "The lookup table: the node of every entry (a new list; [] with no node).", NULL},
    {"table_size", (getter)get_size, NULL, "The table's size M (a prime).", NULL},
    {"nodes", (getter)get_nodes, NULL, "The nodes, in the order they were added.", NULL},
    {"weights", (getter)get_weights, NULL, "{node: weight}.", NULL},
    {"points", (getter)get_points, NULL, "{node: number of table entries it holds}.", NULL},
    {"hash", (getter)get_hash, NULL, "The hash: 'xxh64'.", NULL},
    {"layout", (getter)get_layout, NULL, "'envoy'.", NULL},
    {"weight_rule", (getter)get_weight_rule, NULL, WEIGHT_RULE_DOC, NULL},
    {"memory_bytes", (getter)get_memory, NULL, "Heap bytes the table holds.", NULL},
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
    {Py_tp_dealloc, maglev_dealloc},
    {Py_tp_traverse, maglev_traverse},
    {Py_tp_clear, maglev_clear},
    {Py_tp_methods, maglev_methods},
    {Py_tp_getset, maglev_getset},
    {Py_tp_repr, maglev_repr},
    {Py_tp_richcompare, maglev_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, maglev_iter},
    {Py_sq_length, maglev_len},
    {Py_sq_contains, maglev_contains},
    {Py_mp_length, maglev_len},
    {0, NULL},
};

static PyType_Spec maglev_spec = {
    .name = "chash.MaglevRouter",
    .basicsize = sizeof(MaglevObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = maglev_slots,
};

int maglev_type_setup(PyObject *module)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &maglev_spec, NULL);
    if (!type)
        return -1;
    get_state(module)->maglev_type = type;
    return PyModule_AddType(module, type);
}
