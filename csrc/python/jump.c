/*
 * jump.c - chash.JumpRouter (jump.h): jump consistent hash (Lamping &
 * Veach 2014, strategies/jump.h) as a router.  The nodes are the buckets
 * 0..n-1 in the order they were added, kept in the ordered node list
 * (node_list.h) with weight 1 each; there is no table: a key goes to
 * nodes[jump(hash64(key), n)], hash64 being engine/scheme.h's
 * chash_hash64 (Guava's padToLong of the hash).
 *
 * Layouts: "jump" is the paper's function; "guava" is Guava's
 * Hashing.consistentHash(long, int), the same walk in its own arithmetic
 * (chash_jump_guava).  Jump has no weights and cannot drop a bucket from
 * the middle: both are refused with a ValueError that says so.
 * Part of chash._chash.
 *
 * Thread safety rests on the GIL: a membership change swaps the node list
 * in whole (node_list.c), running no Python code in between.
 */
#include "jump.h"

#include "args.h"
#include "engine/scheme.h"
#include "hash/hash.h"
#include "state.h"
#include "node_list.h"
#include "strategies/jump.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    NodeList list;
    chash_jump_rule rule;
    chash_hash_id hash;
    void *structure; /* the node list's structure slot: jump keeps none (NULL) */
} JumpObject;

static const char *const layout_names[] = {"jump", "guava"};

static const char *layout_name(const JumpObject *self)
{
    return layout_names[self->rule == CHASH_JUMP_GUAVA];
}

/* ------------------------------------------------------------------ */
/* The node list's rebuild: no structure, one bucket a node           */

static int build_buckets(void *owner, PyObject *nodes, const uint64_t *weights, size_t n,
                         size_t *counts, void **structure)
{
    (void)owner;
    (void)nodes;
    (void)weights;
    if (n > CHASH_JUMP_MAX_BUCKETS) {
        PyErr_Format(PyExc_ValueError, "JumpRouter holds at most %lu nodes",
                     (unsigned long)CHASH_JUMP_MAX_BUCKETS);
        return -1;
    }
    for (size_t k = 0; k < n; k++)
        counts[k] = 1;
    *structure = NULL;
    return 0;
}

static void release_buckets(void *structure)
{
    (void)structure; /* always NULL */
}

/* A new last bucket changes nothing else: the node list appends it in
 * O(1) amortized, and drops the last one in O(1), with no rebuild. */
static int append_bucket(void *owner, size_t n, size_t *count)
{
    (void)owner;
    if (n >= CHASH_JUMP_MAX_BUCKETS) {
        PyErr_Format(PyExc_ValueError, "JumpRouter holds at most %lu nodes",
                     (unsigned long)CHASH_JUMP_MAX_BUCKETS);
        return -1;
    }
    *count = 1;
    return 0;
}

static NodeListRebuild rebuild_of(JumpObject *self)
{
    return (NodeListRebuild){self, build_buckets, release_buckets, &self->structure,
                             layout_name(self), 0, append_bucket};
}

/* ------------------------------------------------------------------ */
/* Arguments                                                          */

/* layout: NULL is "jump"; 0, or -1 with TypeError / ValueError. */
static int parse_layout(PyObject *obj, chash_jump_rule *out)
{
    *out = CHASH_JUMP_LAMPING;
    if (!obj)
        return 0;
    const char *name = name_arg(obj, "layout");
    if (!name)
        return -1;
    if (strcmp(name, "jump") == 0)
        return 0;
    if (strcmp(name, "guava") == 0) {
        *out = CHASH_JUMP_GUAVA;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "JumpRouter's layout must be 'jump' or 'guava', not %R", obj);
    return -1;
}

/* hash: NULL is "xxh64", else a name of chash.HASHES; 0 or -1. */
static int parse_hash_name(PyObject *obj, chash_hash_id *out)
{
    *out = CHASH_HASH_XXH64;
    if (!obj)
        return 0;
    const char *name = name_arg(obj, "hash");
    if (!name)
        return -1;
    if (chash_hash_by_name(name, out) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError, "unknown hash %R: expected one of chash.HASHES", obj);
        return -1;
    }
    return 0;
}

/* A weight argument: jump has none, so only 1 is taken; 0 or -1. */
static int parse_jump_weight(PyObject *weight_obj)
{
    double weight;
    if (parse_weight(weight_obj, &weight) < 0)
        return -1;
    if (weight != 1.0) {
        PyErr_Format(PyExc_ValueError,
                     "JumpRouter has no weights (jump gives every bucket the same share): "
                     "weight must be 1, not %R; ConsistentHashRouter, MaglevRouter and "
                     "RendezvousRouter take weights",
                     weight_obj);
        return -1;
    }
    return 0;
}

static int key_hash(const JumpObject *self, PyObject *key, uint64_t *out)
{
    const char *buf;
    Py_ssize_t len;
    if (chash_py_key_bytes(key, &buf, &len) < 0)
        return -1;
    *out = chash_hash64(self->hash, buf, (size_t)len);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

static PyObject *jump_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"layout", "hash", NULL};
    PyObject *layout = NULL, *hash = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OO:JumpRouter", kwlist, &layout, &hash))
        return NULL;
    chash_jump_rule rule;
    chash_hash_id hash_id;
    if (parse_layout(layout, &rule) < 0 || parse_hash_name(hash, &hash_id) < 0)
        return NULL;
    JumpObject *self = (JumpObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->rule = rule;
    self->hash = hash_id;
    self->structure = NULL;
    if (node_list_init(&self->list) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int jump_traverse(JumpObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return node_list_traverse(&self->list, visit, arg);
}

static int jump_clear(JumpObject *self)
{
    (void)self; /* holds only exact str and dicts of them: no cycle */
    return 0;
}

static void jump_dealloc(JumpObject *self);

const uint64_t *jump_changes(PyObject *obj)
{
    if (!chash_py_made_by(obj, (void *)jump_dealloc))
        return NULL;
    return &((JumpObject *)obj)->list.changes;
}

static void jump_dealloc(JumpObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
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

static PyObject *jump_add(JumpObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"real_node_id", "weight", NULL};
    PyObject *node, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_node", kwlist, &node, &weight_obj))
        return NULL;
    if (parse_jump_weight(weight_obj) < 0)
        return NULL;
    NodeListRebuild how = rebuild_of(self);
    return done(node_list_add(&self->list, node, 1.0, &how));
}

static PyObject *jump_add_many(JumpObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "weight", NULL};
    PyObject *nodes, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_nodes", kwlist, &nodes, &weight_obj))
        return NULL;
    if (parse_jump_weight(weight_obj) < 0)
        return NULL;
    NodeListRebuild how = rebuild_of(self);
    return done(node_list_add_many(&self->list, nodes, 1.0, &how));
}

/* Removes node if it is the last bucket: 1 removed, 0 absent, -1 with
 * ValueError for a node that is not the last (or another error). */
static int remove_last(JumpObject *self, PyObject *node)
{
    Py_ssize_t at = node_list_position(&self->list, node);
    if (at < 0)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t n = node_list_len(&self->list);
    if (at != n - 1) {
        PyErr_Format(PyExc_ValueError,
                     "cannot remove %R: it is bucket %zd of %zd, and jump consistent hash can "
                     "only drop the last bucket (%R); dropping another would renumber the "
                     "buckets after it and move their keys.  ConsistentHashRouter and "
                     "RendezvousRouter remove any node, moving only its keys",
                     node, at, n, node_list_at(&self->list, (size_t)(n - 1)));
        return -1;
    }
    NodeListRebuild how = rebuild_of(self);
    return node_list_remove(&self->list, node, &how);
}

static PyObject *jump_remove(JumpObject *self, PyObject *node)
{
    int removed = remove_last(self, node);
    if (removed == 0)
        PyErr_SetObject(PyExc_KeyError, node);
    return done(removed <= 0 ? -1 : 0);
}

static PyObject *jump_discard(JumpObject *self, PyObject *node)
{
    return done(remove_last(self, node));
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

static PyObject *owner_of(const JumpObject *self, uint64_t h)
{
    size_t n = (size_t)node_list_len(&self->list);
    if (n == 0)
        Py_RETURN_NONE;
    return Py_NewRef(node_list_at(&self->list, chash_jump_by(self->rule, h, n)));
}

static PyObject *jump_get(JumpObject *self, PyObject *key)
{
    uint64_t h;
    if (key_hash(self, key, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static PyObject *jump_get_by_hash(JumpObject *self, PyObject *hash)
{
    uint64_t h;
    if (parse_hash_arg(hash, 64, layout_name(self), &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static PyObject *nodes_of(const JumpObject *self, const uint64_t *hashes, Py_ssize_t n)
{
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; result && i < n; i++)
        PyList_SET_ITEM(result, i, owner_of(self, hashes[i]));
    return result;
}

/* The 64-bit hash of every key of an iterable, in a PyMem buffer the
 * caller frees; NULL with an exception. */
static uint64_t *hash_keys(const JumpObject *self, PyObject *keys, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of str or bytes");
    if (!seq)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    uint64_t *hashes = PyMem_New(uint64_t, *n ? (size_t)*n : 1);
    if (!hashes)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; hashes && i < *n; i++) {
        if (key_hash(self, PySequence_Fast_GET_ITEM(seq, i), &hashes[i]) < 0) {
            PyMem_Free(hashes);
            hashes = NULL;
        }
    }
    Py_DECREF(seq);
    return hashes;
}

static PyObject *jump_get_many(JumpObject *self, PyObject *keys)
{
    Py_ssize_t n;
    uint64_t *hashes = hash_keys(self, keys, &n);
    if (!hashes)
        return NULL;
    PyObject *result = nodes_of(self, hashes, n);
    PyMem_Free(hashes);
    return result;
}

static PyObject *jump_get_many_by_hash(JumpObject *self, PyObject *hashes)
{
    Py_ssize_t n;
    uint64_t *values = parse_hash_args(hashes, 64, layout_name(self), &n);
    if (!values)
        return NULL;
    PyObject *result = nodes_of(self, values, n);
    PyMem_Free(values);
    return result;
}

static PyObject *jump_preference(JumpObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get_preference_list expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    size_t want;
    uint64_t h;
    if (parse_count(args[1], &want) < 0 || key_hash(self, args[0], &h) < 0)
        return NULL;
    size_t n = (size_t)node_list_len(&self->list);
    want = want < n ? want : n;
    uint32_t *buckets = PyMem_New(uint32_t, want ? want : 1);
    if (!buckets)
        return PyErr_NoMemory();
    size_t found = 0;
    int status = want ? chash_jump_preference(self->rule, h, n, want, buckets, &found) : CHASH_OK;
    if (status != CHASH_OK) {
        PyMem_Free(buckets);
        return chash_py_error(status, NULL, "get_preference_list");
    }
    PyObject *result = PyList_New((Py_ssize_t)found);
    for (size_t i = 0; result && i < found; i++)
        PyList_SET_ITEM(result, (Py_ssize_t)i, Py_NewRef(node_list_at(&self->list, buckets[i])));
    PyMem_Free(buckets);
    return result;
}

static PyObject *jump_calculate_hash(JumpObject *self, PyObject *key)
{
    uint64_t h;
    if (key_hash(self, key, &h) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(h);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

static PyObject *jump_ownership(JumpObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)node_list_len(&self->list);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    for (size_t k = 0; k < n; k++)
        share[k] = 1.0 / (double)n;
    PyObject *result = node_list_float_map(&self->list, share);
    PyMem_Free(share);
    return result;
}

static PyObject *jump_key_distribution(JumpObject *self, PyObject *keys)
{
    Py_ssize_t nkeys;
    uint64_t *hashes = hash_keys(self, keys, &nkeys);
    if (!hashes)
        return NULL;
    size_t n = (size_t)node_list_len(&self->list);
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    if (!counts) {
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (n ? n : 1) * sizeof *counts);
    for (Py_ssize_t i = 0; n && i < nkeys; i++)
        counts[chash_jump_by(self->rule, hashes[i], n)]++;
    PyObject *result = node_list_count_map(&self->list, counts);
    PyMem_Free(hashes);
    PyMem_Free(counts);
    return result;
}

static PyObject *jump_fingerprint(JumpObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)node_list_len(&self->list);
    char head[128];
    int head_len = PyOS_snprintf(head, sizeof head, "jump|%s|%s|%zu", layout_name(self),
                                 chash_hash_name(self->hash), n);
    uint32_t *tags = PyMem_New(uint32_t, n ? n : 1);
    uint8_t *buf = PyMem_Malloc((size_t)head_len + n * 4 + 1);
    if (!tags || !buf) {
        PyMem_Free(tags);
        PyMem_Free(buf);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    if (node_list_tags(&self->list, tags) == 0) {
        memcpy(buf, head, (size_t)head_len);
        uint8_t *at = buf + head_len;
        for (size_t k = 0; k < n; k++, at += 4) {
            at[0] = (uint8_t)(tags[k] >> 24);
            at[1] = (uint8_t)(tags[k] >> 16);
            at[2] = (uint8_t)(tags[k] >> 8);
            at[3] = (uint8_t)tags[k];
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

static PyObject *jump_check(JumpObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = (size_t)node_list_len(&self->list);
    size_t *seen = PyMem_New(size_t, n ? n : 1);
    if (!seen)
        return PyErr_NoMemory();
    int ok = self->structure == NULL && n <= CHASH_JUMP_MAX_BUCKETS;
    for (size_t k = 0; ok && k < n; k++) {
        seen[k] = 1;
        ok = self->list.weights[k] == 1;
    }
    ok = ok && node_list_check(&self->list, seen);
    PyMem_Free(seen);
    if (PyErr_Occurred())
        return NULL;
    if (!ok)
        return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* Pickles: JumpRouter(layout=..., hash=...) with its nodes in order    */

static PyObject *jump_reduce(JumpObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *nodes = node_list_nodes(&self->list);
    if (!nodes)
        return NULL;
    PyObject *result = Py_BuildValue("(O()(ssO))", (PyObject *)Py_TYPE(self), layout_name(self),
                                     chash_hash_name(self->hash), nodes);
    Py_DECREF(nodes);
    return result;
}

/* (layout, hash, nodes): the router made to hold exactly these, in one
 * swap; as it was on any error. */
static PyObject *jump_setstate(JumpObject *self, PyObject *state)
{
    PyObject *layout, *hash, *nodes;
    if (!PyTuple_Check(state) || !PyArg_ParseTuple(state, "OOO:__setstate__", &layout, &hash, &nodes)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "JumpRouter state must be (layout, hash, nodes)");
        return NULL;
    }
    chash_jump_rule rule;
    chash_hash_id hash_id;
    if (parse_layout(layout, &rule) < 0 || parse_hash_name(hash, &hash_id) < 0)
        return NULL;
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *pairs = PyList_New(n);
    PyObject *one = PyFloat_FromDouble(1.0);
    for (Py_ssize_t i = 0; pairs && one && i < n; i++) {
        PyObject *pair = PyTuple_Pack(2, PyTuple_GET_ITEM(seq, i), one);
        if (!pair) {
            Py_CLEAR(pairs);
            break;
        }
        PyList_SET_ITEM(pairs, i, pair);
    }
    Py_DECREF(seq);
    Py_XDECREF(one);
    if (!pairs)
        return NULL;
    NodeListRebuild how = rebuild_of(self);
    int status = node_list_replace(&self->list, pairs, &how);
    Py_DECREF(pairs);
    if (status < 0)
        return NULL;
    self->rule = rule;
    self->hash = hash_id;
    Py_RETURN_NONE;
}

static PyObject *get_nodes(JumpObject *self, void *Py_UNUSED(closure))
{
    return node_list_nodes(&self->list);
}

static PyObject *get_weights(JumpObject *self, void *Py_UNUSED(closure))
{
    return node_list_weights(&self->list);
}

static PyObject *get_hash(JumpObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(chash_hash_name(self->hash));
}

static PyObject *get_layout(JumpObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(layout_name(self));
}

/* ------------------------------------------------------------------ */
/* Protocols                                                          */

static Py_ssize_t jump_len(JumpObject *self)
{
    return node_list_len(&self->list);
}

static int jump_contains(JumpObject *self, PyObject *node)
{
    return node_list_contains(&self->list, node);
}

static PyObject *jump_iter(JumpObject *self)
{
    return node_list_iter(&self->list);
}

static PyObject *jump_repr(JumpObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat("%U(layout='%s', hash='%s', nodes=%zd)", type_name,
                                          layout_name(self), chash_hash_name(self->hash),
                                          node_list_len(&self->list));
    Py_DECREF(type_name);
    return repr;
}

static PyObject *jump_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    JumpObject *x = (JumpObject *)a, *y = (JumpObject *)b;
    /* Buckets are numbered by add order: the order is part of routing. */
    int equal = x->rule == y->rule && x->hash == y->hash ? node_list_equal(&x->list, &y->list, 1) : 0;
    if (equal < 0)
        return NULL;
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

/* ------------------------------------------------------------------ */
/* The tables                                                         */

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1.0)\n--\n\n"
"Append a node as the next bucket (n, of buckets 0..n); a node already\n"
"here stays where it is.  Jump has no weights: any weight but 1 is a\n"
"ValueError.  Cost: O(1) amortized (no rebuild).");

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1.0)\n--\n\n"
"add_service_node(node) for every node of an iterable, in that order, all\n"
"or none of them.  Cost: O(n + k) rebuild of the node list (k nodes given).");

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove the last bucket; KeyError if the node is not here, ValueError if\n"
"it is not the last (jump can only drop its last bucket:\n"
"ConsistentHashRouter and RendezvousRouter remove any node).  Cost: O(1)\n"
"amortized.");

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove the node if it is here (it must be the last bucket, as for\n"
"remove_service_node); do nothing otherwise.");

PyDoc_STRVAR(get_doc,
"get_target_node($self, request_key, /)\n--\n\n"
"nodes[jump(hash64(key), n)]: hash64 is the router's hash of the key's\n"
"UTF-8 (bytes as they are) as a 64-bit integer, as Guava's padToLong reads\n"
"a hash code (a byte digest's first 8 bytes little-endian, an integer\n"
"result as itself); None when there is no node.");

PyDoc_STRVAR(get_many_doc,
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

PyDoc_STRVAR(get_by_hash_doc,
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"nodes[jump(hash, n)] for a 64-bit hash computed by the caller (0 to\n"
"2**64 - 1; a Java long is hash & (2**64 - 1)); with layout='guava',\n"
"Guava's Hashing.consistentHash(hash, n).  None when there is no node.");

PyDoc_STRVAR(get_many_by_hash_doc,
"get_target_nodes_by_hash($self, hashes, /)\n--\n\n"
"get_target_node_by_hash for every hash of an iterable of ints (each from\n"
"0 to 2**64 - 1), as a list; all are checked before any is looked up.");

PyDoc_STRVAR(preference_doc,
"get_preference_list($self, key, n, /)\n--\n\n"
"n distinct nodes: the key's bucket, then, for k = 1, 2, ..., the jump of\n"
"the rehashed key mix64(hash64(key) + k) over the buckets not chosen yet\n"
"(counted in bucket order), so the keys of a failed bucket spread evenly\n"
"over all the others.  Fewer when the router has fewer nodes.");

PyDoc_STRVAR(ownership_doc,
"ownership($self, /)\n--\n\n"
"{node: 1 / n}: jump's buckets share the 64-bit hashes equally (by design,\n"
"not measured; key_distribution counts real keys).");

PyDoc_STRVAR(distribution_doc,
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys it owns}, every node included.");

PyDoc_STRVAR(fingerprint_doc,
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: the layout, the hash\n"
"and the nodes in bucket order.");

PyDoc_STRVAR(calc_doc,
"_calculate_hash($self, key, /)\n--\n\n"
"The 64-bit hash of a str or bytes key that the router jumps with.");

PyDoc_STRVAR(check_doc,
"_check($self, /)\n--\n\n"
"Verify every invariant; AssertionError if one is broken.");

PyDoc_STRVAR(reduce_doc, "__reduce__($self, /)\n--\n\nPickle support: rebuilt from its nodes.");

PyDoc_STRVAR(setstate_doc,
"__setstate__($self, state, /)\n--\n\n"
"Pickle support: hold exactly state = (layout, hash, nodes), in one swap.");

static PyMethodDef jump_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))jump_add, METH_VARARGS | METH_KEYWORDS, add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))jump_add_many, METH_VARARGS | METH_KEYWORDS, add_many_doc},
    {"remove_service_node", (PyCFunction)jump_remove, METH_O, remove_doc},
    {"discard_service_node", (PyCFunction)jump_discard, METH_O, discard_doc},
    {"get_target_node", (PyCFunction)jump_get, METH_O, get_doc},
    {"get_target_nodes", (PyCFunction)jump_get_many, METH_O, get_many_doc},
    {"get_target_node_by_hash", (PyCFunction)jump_get_by_hash, METH_O, get_by_hash_doc},
    {"get_target_nodes_by_hash", (PyCFunction)jump_get_many_by_hash, METH_O, get_many_by_hash_doc},
    {"get_preference_list", (PyCFunction)(void (*)(void))jump_preference, METH_FASTCALL, preference_doc},
    {"ownership", (PyCFunction)jump_ownership, METH_NOARGS, ownership_doc},
    {"key_distribution", (PyCFunction)jump_key_distribution, METH_O, distribution_doc},
    {"fingerprint", (PyCFunction)jump_fingerprint, METH_NOARGS, fingerprint_doc},
    {"_calculate_hash", (PyCFunction)jump_calculate_hash, METH_O, calc_doc},
    {"_check", (PyCFunction)jump_check, METH_NOARGS, check_doc},
    {"__reduce__", (PyCFunction)jump_reduce, METH_NOARGS, reduce_doc},
    {"__setstate__", (PyCFunction)jump_setstate, METH_O, setstate_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef jump_getset[] = {
    {"nodes", (getter)get_nodes, NULL, "The nodes in bucket order (the order they were added).", NULL},
    {"weights", (getter)get_weights, NULL, "{node: 1.0}: jump has no weights.", NULL},
    {"hash", (getter)get_hash, NULL, "The key hash, one of chash.HASHES.", NULL},
    {"layout", (getter)get_layout, NULL, "'jump' (the paper's function) or 'guava'.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(jump_doc,
"JumpRouter(*, layout='jump', hash='xxh64')\n--\n\n"
"Jump consistent hash (Lamping & Veach 2014) as a router: the nodes are\n"
"buckets 0..n-1 in the order added, no table; a key goes to\n"
"nodes[jump(hash64(key), n)] in O(log n) steps.  Adding a node moves 1/(n+1)\n"
"of the keys to it and nothing else; only the last bucket can be removed.\n"
"layout='guava' is Guava's Hashing.consistentHash(long, int); with\n"
"hash='murmur3_128', get_target_node(key) is Guava's\n"
"consistentHash(murmur3_128().hashString(key, UTF_8), n).  No diff(): a\n"
"bucket owns no arcs of hashes to list; compare get_target_nodes(keys).");

static PyType_Slot jump_slots[] = {
    {Py_tp_doc, (void *)jump_doc},
    {Py_tp_new, jump_new},
    {Py_tp_dealloc, jump_dealloc},
    {Py_tp_traverse, jump_traverse},
    {Py_tp_clear, jump_clear},
    {Py_tp_methods, jump_methods},
    {Py_tp_getset, jump_getset},
    {Py_tp_repr, jump_repr},
    {Py_tp_richcompare, jump_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, jump_iter},
    {Py_sq_length, jump_len},
    {Py_sq_contains, jump_contains},
    {Py_mp_length, jump_len},
    {0, NULL},
};

static PyType_Spec jump_spec = {
    .name = "chash.JumpRouter",
    .basicsize = sizeof(JumpObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = jump_slots,
};

int jump_type_setup(PyObject *module)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &jump_spec, NULL);
    if (!type)
        return -1;
    return PyModule_AddType(module, type);
}
