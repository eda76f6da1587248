/*
 * maglev.c - the Maglev family and the MaglevRouter class (family.h):
 * Envoy's MAGLEV load balancer as a router.  The table is Envoy's (strategies/maglev.h: hosts sorted by
 * key, host k's permutation from XXH64(key, 0) % M stepping by
 * XXH64(key, 1) % (M - 1) + 1, turns weighted by the normalised weights),
 * rebuilt whole from the ordered node list (node_list.h) on every change.
 * A key goes to table[XXH64(key) % M].  The shell (router.c) does
 * everything else of the type.  Part of chash._chash.
 *
 * Threads: the shell (router.c) hands these functions one published
 * state; a rebuild computes the table aside, running no Python code, then
 * swaps it in (into a copy, or with the GIL in place); batches of hashes
 * route without the GIL (positions_of).
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

/* h % M without a division (strategies/maglev.h). */
static inline uint64_t table_mod(const RouterObject *self, uint64_t h)
{
    return chash_maglev_mod(self->mg.mod_magic, self->mg.table_size, h);
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
    RouterObject *self = owner;
    if (n == 0)
        return 0; /* no table */
    const char **ids = PyMem_New(const char *, n);
    size_t *lens = PyMem_New(size_t, n);
    uint32_t *table = PyMem_New(uint32_t, self->mg.table_size);
    int status = ids && lens && table ? CHASH_OK : CHASH_ENOMEM;
    for (size_t k = 0; k < n && status == CHASH_OK; k++) {
        Py_ssize_t len;
        ids[k] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(nodes, (Py_ssize_t)k), &len);
        lens[k] = (size_t)len;
        if (!ids[k])
            status = CHASH_ENOMEM;
    }
    if (status == CHASH_OK)
        status = chash_maglev_envoy_table(ids, lens, weights, n, self->mg.table_size, table, counts);
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

static NodeListRebuild rebuild_of(RouterObject *self)
{
    return (NodeListRebuild){self, build_table, release_table, (void **)&self->mg.table, "maglev", 1, NULL};
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
    RouterObject *self = router_alloc(type);
    if (!self)
        return NULL;
    self->mg.table_size = size;
    chash_maglev_mod_magic(size, self->mg.mod_magic);
    if (node_list_init(&self->mg.list) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->family = &maglev_family;
    return (PyObject *)self;
}

static int maglev_traverse(RouterObject *self, visitproc visit, void *arg)
{
    return node_list_traverse(&self->mg.list, visit, arg);
}

static void maglev_clear(RouterObject *self)
{
    (void)self; /* holds only exact str and dicts of them: no cycle */
}

/* A deep copy (family.h): the node list and the table. */
static int maglev_copy(RouterObject *dst, RouterObject *src)
{
    dst->mg.table_size = src->mg.table_size;
    memcpy(dst->mg.mod_magic, src->mg.mod_magic, sizeof dst->mg.mod_magic);
    if (node_list_copy(&dst->mg.list, &src->mg.list) < 0)
        return -1;
    if (!src->mg.table)
        return 0;
    dst->mg.table = PyMem_New(uint32_t, src->mg.table_size);
    if (!dst->mg.table) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(dst->mg.table, src->mg.table, src->mg.table_size * sizeof *dst->mg.table);
    return 0;
}

static void maglev_release(RouterObject *self)
{
    PyMem_Free(self->mg.table);
    self->mg.table = NULL;
    node_list_free(&self->mg.list);
}

/* ------------------------------------------------------------------ */
/* Membership                                                         */

static int maglev_add(RouterObject *self, PyObject *node, double weight, PyObject *id)
{
    (void)id; /* the shell passes None: MaglevRouter takes no id */
    NodeListRebuild how = rebuild_of(self);
    return node_list_add(&self->mg.list, node, weight, &how);
}

static int maglev_add_many(RouterObject *self, PyObject *nodes, double weight)
{
    NodeListRebuild how = rebuild_of(self);
    return node_list_add_many(&self->mg.list, nodes, weight, &how);
}

static int maglev_remove(RouterObject *self, PyObject *node)
{
    NodeListRebuild how = rebuild_of(self);
    return node_list_remove(&self->mg.list, node, &how);
}

static int maglev_replace(RouterObject *self, PyObject *pairs)
{
    NodeListRebuild how = rebuild_of(self);
    return node_list_replace(&self->mg.list, pairs, &how);
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

static PyObject *owner_of(const RouterObject *self, uint64_t h)
{
    if (!self->mg.table)
        Py_RETURN_NONE;
    return Py_NewRef(node_list_at(&self->mg.list, self->mg.table[table_mod(self, h)]));
}

/* The key's hash and a hash argument's value, read with the object's own
 * settings (what HASHED_READ_METHOD asks); 0, or -1 with an exception. */
static int hash_of_key(const RouterObject *self, PyObject *key, uint64_t *h)
{
    (void)self; /* one hash for every router of the family */
    return key_hash64(key, h);
}

static int hash_of_arg(const RouterObject *self, PyObject *hash, uint64_t *h)
{
    (void)self;
    return parse_hash_arg(hash, 64, "maglev", h);
}

static PyObject *maglev_get(RouterObject *self, PyObject *key)
{
    uint64_t h;
    if (hash_of_key(self, key, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static PyObject *maglev_get_by_hash(RouterObject *self, PyObject *hash)
{
    uint64_t h;
    if (hash_of_arg(self, hash, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static HASHED_READ_METHOD(maglev_read_get, hash_of_key, owner_of)
static HASHED_READ_METHOD(maglev_read_get_by_hash, hash_of_arg, owner_of)

/* The node position of each hash (node_list_route: a table is there),
 * the table read into locals once. */
static void positions_of(const void *owner, const uint64_t *hashes, size_t n, uint32_t *positions)
{
    const RouterObject *self = owner;
    const uint32_t *table = self->mg.table;
    const uint64_t magic[2] = {self->mg.mod_magic[0], self->mg.mod_magic[1]};
    const size_t size = self->mg.table_size;
    for (size_t i = 0; i < n; i++)
        positions[i] = table[chash_maglev_mod(magic, size, hashes[i])];
}

static PyObject *maglev_get_many(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n = 0;
    uint64_t *hashes = key_hashes64(keys, &n);
    return node_list_route(&self->mg.list, &router_object(self)->unlocked_readers, self, hashes, n,
                           positions_of);
}

static PyObject *maglev_get_many_by_hash(RouterObject *self, PyObject *hashes)
{
    Py_ssize_t n = 0;
    uint64_t *values = parse_hash_args(hashes, 64, "maglev", &n);
    return node_list_route(&self->mg.list, &router_object(self)->unlocked_readers, self, values, n,
                           positions_of);
}

/* Envoy's Maglev retry walk: attempt a looks up h ^ (2**64 - a) (the hash
 * unchanged for a = 0).  The distinct nodes of attempts 0 .. M - 1 in the
 * order met, then any node not met, in add order; SIZE_MAX when out of
 * memory. */
static size_t maglev_walk(const RouterObject *self, uint64_t h, size_t want, uint32_t *out)
{
    size_t n = (size_t)node_list_len(&self->mg.list), got = 0;
    unsigned char *seen = PyMem_Malloc(n ? n : 1);
    if (!seen)
        return SIZE_MAX;
    memset(seen, 0, n ? n : 1);
    for (uint64_t a = 0; a < self->mg.table_size && got < want; a++) {
        uint64_t probe = a ? h ^ (~UINT64_C(0) - a + 1) : h;
        uint32_t k = self->mg.table[table_mod(self, probe)];
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

static PyObject *maglev_preference_at(RouterObject *self, uint64_t h, size_t want)
{
    size_t n = (size_t)node_list_len(&self->mg.list);
    want = want < n ? want : n;
    uint32_t *owners = PyMem_New(uint32_t, want ? want : 1);
    if (!owners)
        return PyErr_NoMemory();
    size_t found = want ? maglev_walk(self, h, want, owners) : 0;
    if (found == SIZE_MAX) {
        PyMem_Free(owners);
        return PyErr_NoMemory();
    }
    PyObject *result = node_list_pick(&self->mg.list, owners, found);
    PyMem_Free(owners);
    return result;
}

LOCATED_BY_HASH(maglev_locate, maglev_get_at, maglev_preference, maglev_preference_at, hash_of_key,
                owner_of)

static PyObject *maglev_calculate_hash(RouterObject *self, PyObject *key)
{
    (void)self;
    return key_hash64_int(key);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

static PyObject *maglev_ownership(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->mg.list);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    for (size_t k = 0; k < n; k++)
        share[k] = (double)self->mg.list.counts[k] / (double)self->mg.table_size;
    PyObject *result = node_list_float_map(&self->mg.list, share);
    PyMem_Free(share);
    return result;
}

static PyObject *maglev_key_distribution(RouterObject *self, PyObject *keys)
{
    Py_ssize_t nkeys;
    uint64_t *hashes = key_hashes64(keys, &nkeys);
    if (!hashes)
        return NULL;
    size_t n = (size_t)node_list_len(&self->mg.list);
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    if (!counts) {
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (n ? n : 1) * sizeof *counts);
    for (Py_ssize_t i = 0; self->mg.table && i < nkeys; i++)
        counts[self->mg.table[table_mod(self, hashes[i])]]++;
    PyObject *result = node_list_count_map(&self->mg.list, counts);
    PyMem_Free(hashes);
    PyMem_Free(counts);
    return result;
}

static PyObject *maglev_fingerprint(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->mg.list);
    size_t entries = self->mg.table ? self->mg.table_size : 0;
    char head[128];
    int head_len = PyOS_snprintf(head, sizeof head, "maglev|xxh64|0|0|%zu", self->mg.table_size);
    uint32_t *tags = PyMem_New(uint32_t, n ? n : 1);
    uint8_t *buf = PyMem_Malloc((size_t)head_len + entries * 4 + 1);
    if (!tags || !buf) {
        PyMem_Free(tags);
        PyMem_Free(buf);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    if (node_list_tags(&self->mg.list, tags) == 0) {
        memcpy(buf, head, (size_t)head_len);
        uint8_t *at = buf + head_len;
        for (size_t i = 0; i < entries; i++, at += 4) {
            uint32_t tag = tags[self->mg.table[i]];
            at[0] = (uint8_t)(tag >> 24);
            at[1] = (uint8_t)(tag >> 16);
            at[2] = (uint8_t)(tag >> 8);
            at[3] = (uint8_t)tag;
        }
        result = chash_py_fingerprint(buf, (size_t)(at - buf));
    }
    PyMem_Free(tags);
    PyMem_Free(buf);
    return result;
}

static int maglev_check(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->mg.list);
    size_t *seen = PyMem_New(size_t, n ? n : 1);
    if (!seen) {
        PyErr_NoMemory();
        return -1;
    }
    memset(seen, 0, (n ? n : 1) * sizeof *seen);
    int ok = (n == 0) == (self->mg.table == NULL);
    for (size_t e = 0; ok && self->mg.table && e < self->mg.table_size; e++) {
        ok = self->mg.table[e] < n;
        if (ok)
            seen[self->mg.table[e]]++;
    }
    ok = ok && node_list_check(&self->mg.list, seen);
    PyMem_Free(seen);
    if (PyErr_Occurred())
        return -1;
    if (!ok) {
        chash_py_error(CHASH_ECORRUPT, NULL, NULL);
        return -1;
    }
    return 0;
}

static PyObject *list_node(PyObject *router, uint32_t index)
{
    return node_list_at(&((RouterObject *)router)->mg.list, index);
}

static PyObject *maglev_diff(RouterObject *self, RouterObject *to)
{
    if (self->mg.table_size != to->mg.table_size) {
        PyErr_Format(PyExc_ValueError,
                     "diff() needs two MaglevRouters of one table_size, not %zu and %zu (a "
                     "key's entry depends on the size: every key may move)",
                     self->mg.table_size, to->mg.table_size);
        return NULL;
    }
    if (!self->mg.table || !to->mg.table) {
        if (!self->mg.table && !to->mg.table)
            return PyList_New(0);
        return diff_error(CHASH_EINVAL);
    }
    uint32_t *same = node_list_positions_in(&self->mg.list, &to->mg.list);
    if (!same)
        return NULL;
    chash_move *moves;
    size_t count;
    int status = chash_table_diff(self->mg.table, to->mg.table, self->mg.table_size, same,
                                  (size_t)node_list_len(&self->mg.list),
                                  (size_t)node_list_len(&to->mg.list), &moves, &count);
    PyMem_Free(same);
    if (status != CHASH_OK)
        return chash_py_error(status, NULL, "diff");
    PyObject *list = diff_plain_moves(moves, count, (PyObject *)self, (PyObject *)to, list_node);
    chash_moves_free(moves);
    return list;
}

/* ((table_size,), pairs). */
static PyObject *maglev_reduce(RouterObject *self)
{
    PyObject *pairs = node_list_pairs(&self->mg.list);
    if (!pairs)
        return NULL;
    return Py_BuildValue("((n)N)", (Py_ssize_t)self->mg.table_size, pairs);
}

PyObject *maglev_rebuild(PyTypeObject *cls, PyObject *table_size, PyObject *hash, PyObject *pairs)
{
    PyObject *args = Py_BuildValue("(O)", table_size);
    PyObject *kw = args ? Py_BuildValue("{sO}", "hash", hash) : NULL;
    PyObject *self = kw ? PyObject_Call((PyObject *)cls, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (self && maglev_replace((RouterObject *)self, pairs) < 0)
        Py_CLEAR(self);
    return self;
}

static PyObject *maglev_unpickle(PyTypeObject *cls, PyObject *settings, PyObject *nodes)
{
    PyObject *size;
    if (!PyArg_ParseTuple(settings, "O:_reconstruct", &size))
        return NULL;
    PyObject *hash = PyUnicode_FromString("xxh64");
    PyObject *result = hash ? maglev_rebuild(cls, size, hash, nodes) : NULL;
    Py_XDECREF(hash);
    return result;
}

static PyObject *maglev_table(RouterObject *self)
{
    if (!self->mg.table)
        return PyList_New(0);
    PyObject *list = PyList_New((Py_ssize_t)self->mg.table_size);
    for (size_t e = 0; list && e < self->mg.table_size; e++)
        PyList_SET_ITEM(list, (Py_ssize_t)e, Py_NewRef(node_list_at(&self->mg.list, self->mg.table[e])));
    return list;
}

static PyObject *maglev_settings(RouterObject *self, int which)
{
    (void)which; /* the class has table_size only */
    return PyLong_FromSize_t(self->mg.table_size);
}

static PyObject *maglev_nodes(RouterObject *self)
{
    return node_list_nodes(&self->mg.list);
}

static PyObject *maglev_weights(RouterObject *self)
{
    return node_list_weights(&self->mg.list);
}

static double maglev_weight_of(RouterObject *self, PyObject *node)
{
    return node_list_weight_of(&self->mg.list, node);
}

static PyObject *maglev_node_at(RouterObject *self, size_t *at, double *weight)
{
    return node_list_node_at(&self->mg.list, *at, weight);
}

static PyObject *maglev_points(RouterObject *self)
{
    return node_list_counts(&self->mg.list);
}

static PyObject *maglev_hash_name(RouterObject *self)
{
    (void)self;
    return PyUnicode_FromString("xxh64");
}

/* Envoy's Maglev weights are uint32 integers from 1. */
static const char *maglev_weight_rule(RouterObject *self)
{
    (void)self;
    return "whole";
}

static PyObject *maglev_layout(RouterObject *self)
{
    (void)self;
    return PyUnicode_FromString("envoy");
}

static size_t maglev_memory(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->mg.list);
    size_t bytes = n * (sizeof *self->mg.list.weights + sizeof *self->mg.list.counts);
    if (self->mg.table)
        bytes += self->mg.table_size * sizeof *self->mg.table;
    return bytes;
}

/* ------------------------------------------------------------------ */
/* Protocols                                                          */

static Py_ssize_t maglev_len(RouterObject *self)
{
    return node_list_len(&self->mg.list);
}

static int maglev_contains(RouterObject *self, PyObject *node)
{
    return node_list_contains(&self->mg.list, node);
}

static PyObject *maglev_repr(RouterObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat("%U(table_size=%zu, hash='xxh64', layout='envoy', nodes=%zd)",
                                          type_name, self->mg.table_size, node_list_len(&self->mg.list));
    Py_DECREF(type_name);
    return repr;
}

static int maglev_equal(RouterObject *x, RouterObject *y)
{
    /* Maglev sorts its hosts: only the weights matter, not the order. */
    if (x->mg.table_size != y->mg.table_size)
        return 0;
    return node_list_equal(&x->mg.list, &y->mg.list, 0);
}

/* ------------------------------------------------------------------ */
/* The tables                                                         */

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1)\n--\n\n"
"Add a node (or give a present one a new weight) and rebuild the table, as\n"
"Envoy does on every host change.  Weights are integers from 1 to\n"
"2**32 - 1, as Envoy's.  Cost: O(n + M) rebuild of the table (M =\n"
"table_size).");

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1)\n--\n\n"
"add_service_node(node, weight) for every node of an iterable, in one\n"
"rebuild: all or none of them.  Cost: O(n + k + M) rebuild (k nodes\n"
"given, M = table_size).");

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node and rebuild; KeyError if it is not here.  Cost: O(n + M)\n"
"rebuild (M = table_size).");

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node if it is here; do nothing otherwise.  Cost: O(n + M)\n"
"rebuild when it is.");

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
"that order, in one rebuild: lookups see the old table or the new one.\n"
"Cost: O(n + M) rebuild (M = table_size).");

PyDoc_STRVAR(maglev_doc,
"MaglevRouter(table_size=65537, *, hash='xxh64', layout='envoy')\n--\n\n"
"Envoy's Maglev as a router: a lookup table of table_size entries (a\n"
"prime), rebuilt in C on every change, filled from the hosts sorted by id\n"
"with weighted turns; a key goes to table[XXH64(key) % table_size].\n"
"Weights are integers from 1 to 2**32 - 1, as Envoy's.");

const router_family maglev_family = {
    .name = "maglev",
    .bits = 64,
    .cls = &maglev_class,
    .release = maglev_release,
    .copy = maglev_copy,
    .traverse = maglev_traverse,
    .clear = maglev_clear,
    .add = maglev_add,
    .add_many = maglev_add_many,
    .remove = maglev_remove,
    .replace = maglev_replace,
    .contains = maglev_contains,
    .len = maglev_len,
    .get = maglev_get,
    .get_many = maglev_get_many,
    .get_by_hash = maglev_get_by_hash,
    .read_get = maglev_read_get,
    .read_get_by_hash = maglev_read_get_by_hash,
    .get_many_by_hash = maglev_get_many_by_hash,
    .preference = maglev_preference,
    .locate = maglev_locate,
    .get_at = maglev_get_at,
    .preference_at = maglev_preference_at,
    .calculate_hash = maglev_calculate_hash,
    .ownership = maglev_ownership,
    .key_distribution = maglev_key_distribution,
    .fingerprint = maglev_fingerprint,
    .check = maglev_check,
    .nodes = maglev_nodes,
    .weights = maglev_weights,
    .weight_of = maglev_weight_of,
    .node_at = maglev_node_at,
    .points = maglev_points,
    .table = maglev_table,
    .hash_name = maglev_hash_name,
    .layout = maglev_layout,
    .settings = maglev_settings,
    .memory = maglev_memory,
    .repr = maglev_repr,
    .equal = maglev_equal,
    .reduce = maglev_reduce,
    .unpickle = maglev_unpickle,
    .diff = maglev_diff,
    .weight_rule = maglev_weight_rule,
};

const router_class maglev_class = {
    .name = "chash.MaglevRouter",
    .doc = maglev_doc,
    .subclassable = 0,
    .zones = 0,
    .one_family = 1,
    .make = maglev_new,
    .family = &maglev_family,
    .methods = {
        ROUTER_COMMON_METHODS,
        [RM_GET_MANY_BY_HASH] = get_many_by_hash_doc,
        [RM_DIFF] = diff_doc,
        [RM_CALCULATE_HASH] = calc_doc,
        [RM_REPLACE] = replace_doc,
    },
    .properties = {
        [RP_TABLE] = "The lookup table: the node of every entry (a new list; [] with no node).",
        [RP_TABLE_SIZE] = "The table's size M (a prime).",
        [RP_NODES] = "The nodes, in the order they were added.",
        [RP_WEIGHTS] = "{node: weight}.",
        [RP_POINTS] = "{node: number of table entries it holds}.",
        [RP_HASH] = "The hash: 'xxh64'.",
        [RP_LAYOUT] = "'envoy'.",
        [RP_WEIGHT_RULE] = WEIGHT_RULE_DOC,
        [RP_MEMORY] = "Heap bytes the table holds.",
    },
};
