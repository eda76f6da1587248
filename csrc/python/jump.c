/*
 * jump.c - the jump family and the JumpRouter class (family.h): jump
 * consistent hash (Lamping & Veach 2014, strategies/jump.h) as a router.
 * The nodes are the buckets 0..n-1 in the order they were added, kept in
 * the ordered node list (node_list.h) with weight 1 each; there is no
 * table: a key goes to nodes[jump(hash64(key), n)], hash64 being
 * engine/scheme.h's chash_hash64 (Guava's padToLong of the hash).  A new
 * node is appended, and the last one dropped, in O(1) amortized (the node
 * list's append).
 *
 * Layouts: "jump" is the paper's function; "guava" is Guava's
 * Hashing.consistentHash(long, int), the same walk in its own arithmetic
 * (chash_jump_guava); "jumpback" is hash4j's jumpBackHashSplitMix64()
 * (strategies/jumpback.h), jump's contract in expected O(1) integer steps.  Jump has no weights and cannot drop a bucket from
 * the middle: both are refused with a ValueError that says so.  The shell
 * (router.c) does everything else of the type.  Part of chash._chash.
 *
 * Threads: the shell (router.c) hands these functions one published
 * state; a change appends, drops or swaps the node list of a copy, or,
 * with the GIL, of the state in place, running no Python code in between
 * (node_list.c).  Batches of hashes route without the GIL (buckets_of).
 */
#include "family.h"

#include "args.h"
#include "key_hash64.h"

#include <string.h>

/* By chash_jump_rule: the paper's, Guava's, JumpBackHash. */
static const char *const layout_names[] = {"jump", "guava", "jumpback"};

static const char *layout_name(const RouterObject *self)
{
    return layout_names[self->jump.rule];
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

static NodeListRebuild rebuild_of(RouterObject *self)
{
    return (NodeListRebuild){self, build_buckets, release_buckets, &self->jump.structure,
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
    if (strcmp(name, "jumpback") == 0) {
        *out = CHASH_JUMP_BACK;
        return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 "JumpRouter's layout must be 'jump', 'guava' or 'jumpback', not %R", obj);
    return -1;
}

/* A weight (the shell read it as a number): jump has none, so only 1 is
 * taken; 0 or -1. */
static int check_jump_weight(double weight)
{
    if (weight == 1.0)
        return 0;
    PyObject *value = PyFloat_FromDouble(weight);
    if (value) {
        PyErr_Format(PyExc_ValueError,
                     "JumpRouter has no weights (jump gives every bucket the same share): "
                     "weight must be 1, not %R; ConsistentHashRouter, MaglevRouter and "
                     "RendezvousRouter take weights",
                     value);
        Py_DECREF(value);
    }
    return -1;
}

static int key_hash(const RouterObject *self, PyObject *key, uint64_t *out)
{
    return key_hash_named(self->jump.hash, key, out);
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
    if (parse_layout(layout, &rule) < 0 || parse_key_hash(hash, &hash_id) < 0)
        return NULL;
    RouterObject *self = router_alloc(type);
    if (!self)
        return NULL;
    if (node_list_init(&self->jump.list) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->jump.rule = rule;
    self->jump.hash = hash_id;
    self->jump.structure = NULL;
    self->family = &jump_family;
    return (PyObject *)self;
}

static int jump_traverse(RouterObject *self, visitproc visit, void *arg)
{
    return node_list_traverse(&self->jump.list, visit, arg);
}

static void jump_clear(RouterObject *self)
{
    (void)self; /* holds only exact str and dicts of them: no cycle */
}

/* A deep copy (family.h): the node list's own copy; no structure. */
static int jump_copy(RouterObject *dst, RouterObject *src)
{
    dst->jump.rule = src->jump.rule;
    dst->jump.hash = src->jump.hash;
    dst->jump.structure = NULL;
    return node_list_copy(&dst->jump.list, &src->jump.list);
}

static void jump_release(RouterObject *self)
{
    node_list_free(&self->jump.list);
}

/* ------------------------------------------------------------------ */
/* Membership                                                         */

static int jump_add(RouterObject *self, PyObject *node, double weight, PyObject *id)
{
    (void)id; /* the shell passes None: JumpRouter takes no id */
    if (check_jump_weight(weight) < 0)
        return -1;
    NodeListRebuild how = rebuild_of(self);
    return node_list_add(&self->jump.list, node, 1.0, &how);
}

static int jump_add_many(RouterObject *self, PyObject *nodes, double weight)
{
    if (check_jump_weight(weight) < 0)
        return -1;
    NodeListRebuild how = rebuild_of(self);
    return node_list_add_many(&self->jump.list, nodes, 1.0, &how);
}

/* Removes node if it is the last bucket: 1 removed, 0 absent, -1 with
 * ValueError for a node that is not the last (or another error). */
static int jump_remove(RouterObject *self, PyObject *node)
{
    Py_ssize_t at = node_list_position(&self->jump.list, node);
    if (at < 0)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t n = node_list_len(&self->jump.list);
    if (at != n - 1) {
        PyErr_Format(PyExc_ValueError,
                     "cannot remove %R: it is bucket %zd of %zd, and jump consistent hash can "
                     "only drop the last bucket (%R); dropping another would renumber the "
                     "buckets after it and move their keys.  ConsistentHashRouter and "
                     "RendezvousRouter remove any node, moving only its keys",
                     node, at, n, node_list_at(&self->jump.list, (size_t)(n - 1)));
        return -1;
    }
    NodeListRebuild how = rebuild_of(self);
    return node_list_remove(&self->jump.list, node, &how);
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

static PyObject *owner_of(const RouterObject *self, uint64_t h)
{
    size_t n = (size_t)node_list_len(&self->jump.list);
    if (n == 0)
        Py_RETURN_NONE;
    return Py_NewRef(node_list_at(&self->jump.list, chash_jump_by(self->jump.rule, h, n)));
}

/* The key's hash and a hash argument's value, read with the object's own
 * settings (what HASHED_READ_METHOD asks); 0, or -1 with an exception. */
static int hash_of_key(const RouterObject *self, PyObject *key, uint64_t *h)
{
    return key_hash(self, key, h);
}

static int hash_of_arg(const RouterObject *self, PyObject *hash, uint64_t *h)
{
    return parse_hash_arg(hash, 64, layout_name(self), h);
}

static PyObject *jump_get(RouterObject *self, PyObject *key)
{
    uint64_t h;
    if (hash_of_key(self, key, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static PyObject *jump_get_by_hash(RouterObject *self, PyObject *hash)
{
    uint64_t h;
    if (hash_of_arg(self, hash, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static HASHED_READ_METHOD(jump_read_get, hash_of_key, owner_of)
static HASHED_READ_METHOD(jump_read_get_by_hash, hash_of_arg, owner_of)

/* The bucket of each hash (node_list_route; at least one bucket), no
 * Python object changed: the count and rule read into locals once. */
static void buckets_of(const void *owner, const uint64_t *hashes, size_t n, uint32_t *positions)
{
    const RouterObject *self = owner;
    const size_t buckets = (size_t)node_list_len(&self->jump.list);
    const chash_jump_rule rule = self->jump.rule;
    for (size_t i = 0; i < n; i++)
        positions[i] = (uint32_t)chash_jump_by(rule, hashes[i], buckets);
}

/* The 64-bit hash of every key of an iterable, in a PyMem buffer the
 * caller frees; NULL with an exception. */
static uint64_t *hash_keys(const RouterObject *self, PyObject *keys, Py_ssize_t *n)
{
    return key_hashes_named(keys, (int)self->jump.hash, n);
}

static PyObject *jump_get_many(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n = 0;
    uint64_t *hashes = hash_keys(self, keys, &n);
    return node_list_route(&self->jump.list, &router_object(self)->unlocked_readers, self, hashes,
                           n, buckets_of);
}

static PyObject *jump_get_many_by_hash(RouterObject *self, PyObject *hashes)
{
    Py_ssize_t n = 0;
    uint64_t *values = parse_hash_args(hashes, 64, layout_name(self), &n);
    return node_list_route(&self->jump.list, &router_object(self)->unlocked_readers, self, values,
                           n, buckets_of);
}

static PyObject *jump_preference_at(RouterObject *self, uint64_t h, size_t want)
{
    size_t n = (size_t)node_list_len(&self->jump.list);
    want = want < n ? want : n;
    uint32_t *buckets = PyMem_New(uint32_t, want ? want : 1);
    if (!buckets)
        return PyErr_NoMemory();
    size_t found = 0;
    int status = want ? chash_jump_preference(self->jump.rule, h, n, want, buckets, &found) : CHASH_OK;
    if (status != CHASH_OK) {
        PyMem_Free(buckets);
        return chash_py_error(status, NULL, "get_preference_list");
    }
    PyObject *result = node_list_pick(&self->jump.list, buckets, found);
    PyMem_Free(buckets);
    return result;
}

LOCATED_BY_HASH(jump_locate, jump_get_at, jump_preference, jump_preference_at, hash_of_key,
                owner_of)

static PyObject *jump_calculate_hash(RouterObject *self, PyObject *key)
{
    uint64_t h;
    if (key_hash(self, key, &h) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(h);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

static PyObject *jump_ownership(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->jump.list);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    for (size_t k = 0; k < n; k++)
        share[k] = 1.0 / (double)n;
    PyObject *result = node_list_float_map(&self->jump.list, share);
    PyMem_Free(share);
    return result;
}

static PyObject *jump_key_distribution(RouterObject *self, PyObject *keys)
{
    Py_ssize_t nkeys;
    uint64_t *hashes = hash_keys(self, keys, &nkeys);
    if (!hashes)
        return NULL;
    size_t n = (size_t)node_list_len(&self->jump.list);
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    if (!counts) {
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (n ? n : 1) * sizeof *counts);
    for (Py_ssize_t i = 0; n && i < nkeys; i++)
        counts[chash_jump_by(self->jump.rule, hashes[i], n)]++;
    PyObject *result = node_list_count_map(&self->jump.list, counts);
    PyMem_Free(hashes);
    PyMem_Free(counts);
    return result;
}

static PyObject *jump_fingerprint(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->jump.list);
    char head[128];
    int head_len = PyOS_snprintf(head, sizeof head, "jump|%s|%s|%zu", layout_name(self),
                                 chash_hash_name(self->jump.hash), n);
    uint32_t *tags = PyMem_New(uint32_t, n ? n : 1);
    uint8_t *buf = PyMem_Malloc((size_t)head_len + n * 4 + 1);
    if (!tags || !buf) {
        PyMem_Free(tags);
        PyMem_Free(buf);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    if (node_list_tags(&self->jump.list, tags) == 0) {
        memcpy(buf, head, (size_t)head_len);
        uint8_t *at = buf + head_len;
        for (size_t k = 0; k < n; k++, at += 4) {
            at[0] = (uint8_t)(tags[k] >> 24);
            at[1] = (uint8_t)(tags[k] >> 16);
            at[2] = (uint8_t)(tags[k] >> 8);
            at[3] = (uint8_t)tags[k];
        }
        result = chash_py_fingerprint(buf, (size_t)(at - buf));
    }
    PyMem_Free(tags);
    PyMem_Free(buf);
    return result;
}

static int jump_check(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->jump.list);
    size_t *seen = PyMem_New(size_t, n ? n : 1);
    if (!seen) {
        PyErr_NoMemory();
        return -1;
    }
    int ok = self->jump.structure == NULL && n <= CHASH_JUMP_MAX_BUCKETS;
    for (size_t k = 0; ok && k < n; k++) {
        seen[k] = 1;
        ok = self->jump.list.weights[k] == 1;
    }
    ok = ok && node_list_check(&self->jump.list, seen);
    PyMem_Free(seen);
    if (PyErr_Occurred())
        return -1;
    if (!ok) {
        chash_py_error(CHASH_ECORRUPT, NULL, NULL);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Pickles: JumpRouter(layout=..., hash=...) with its nodes in order    */

/* ((layout, hash), nodes in bucket order). */
static PyObject *jump_reduce(RouterObject *self)
{
    PyObject *nodes = node_list_nodes(&self->jump.list);
    if (!nodes)
        return NULL;
    return Py_BuildValue("((ss)N)", layout_name(self), chash_hash_name(self->jump.hash), nodes);
}

/* (layout, hash, nodes): the router made to hold exactly these, in one
 * swap; as it was on any error. */
static PyObject *jump_setstate(RouterObject *self, PyObject *state)
{
    PyObject *layout, *hash, *nodes;
    if (!PyTuple_Check(state) || !PyArg_ParseTuple(state, "OOO:__setstate__", &layout, &hash, &nodes)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "JumpRouter state must be (layout, hash, nodes)");
        return NULL;
    }
    chash_jump_rule rule;
    chash_hash_id hash_id;
    if (parse_layout(layout, &rule) < 0 || parse_key_hash(hash, &hash_id) < 0)
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
    int status = node_list_replace(&self->jump.list, pairs, &how);
    Py_DECREF(pairs);
    if (status < 0)
        return NULL;
    self->jump.rule = rule;
    self->jump.hash = hash_id;
    Py_RETURN_NONE;
}

/* A JumpRouter of cls made as JumpRouter(layout=, hash=), then holding
 * nodes: what __setstate__ does with the state of earlier pickles. */
static PyObject *jump_unpickle(PyTypeObject *cls, PyObject *settings, PyObject *nodes)
{
    PyObject *layout, *hash;
    if (!PyArg_ParseTuple(settings, "OO:_reconstruct", &layout, &hash))
        return NULL;
    PyObject *empty = PyTuple_New(0);
    PyObject *self = empty ? jump_new(cls, empty, NULL) : NULL;
    Py_XDECREF(empty);
    PyObject *state = self ? PyTuple_Pack(3, layout, hash, nodes) : NULL;
    PyObject *done = state ? jump_setstate((RouterObject *)self, state) : NULL;
    Py_XDECREF(state);
    if (!done)
        Py_CLEAR(self);
    Py_XDECREF(done);
    return self;
}

static PyObject *jump_nodes(RouterObject *self)
{
    return node_list_nodes(&self->jump.list);
}

static PyObject *jump_weights(RouterObject *self)
{
    return node_list_weights(&self->jump.list);
}

static double jump_weight_of(RouterObject *self, PyObject *node)
{
    return node_list_weight_of(&self->jump.list, node);
}

static PyObject *jump_node_at(RouterObject *self, size_t *at, double *weight)
{
    return node_list_node_at(&self->jump.list, *at, weight);
}

static PyObject *jump_hash_name(RouterObject *self)
{
    return PyUnicode_FromString(chash_hash_name(self->jump.hash));
}

static PyObject *jump_layout(RouterObject *self)
{
    return PyUnicode_FromString(layout_name(self));
}

/* ------------------------------------------------------------------ */
/* Protocols                                                          */

static Py_ssize_t jump_len(RouterObject *self)
{
    return node_list_len(&self->jump.list);
}

static int jump_contains(RouterObject *self, PyObject *node)
{
    return node_list_contains(&self->jump.list, node);
}

static PyObject *jump_repr(RouterObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat("%U(layout='%s', hash='%s', nodes=%zd)", type_name,
                                          layout_name(self), chash_hash_name(self->jump.hash),
                                          node_list_len(&self->jump.list));
    Py_DECREF(type_name);
    return repr;
}

static int jump_equal(RouterObject *x, RouterObject *y)
{
    /* Buckets are numbered by add order: the order is part of routing. */
    if (x->jump.rule != y->jump.rule || x->jump.hash != y->jump.hash)
        return 0;
    return node_list_equal(&x->jump.list, &y->jump.list, 1);
}

static const char *jump_weight_rule(RouterObject *self)
{
    (void)self;
    return "none";
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
"remove_service_node); do nothing otherwise.  Cost: O(1) amortized.");

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
"Guava's Hashing.consistentHash(hash, n); with layout='jumpback', hash4j's\n"
"ConsistentHashing.jumpBackHashSplitMix64().getBucket(hash, n).  None when\n"
"there is no node.");

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

PyDoc_STRVAR(jump_doc,
"JumpRouter(*, layout='jump', hash='xxh64')\n--\n\n"
"Jump consistent hash (Lamping & Veach 2014) as a router: the nodes are\n"
"buckets 0..n-1 in the order added, no table; a key goes to\n"
"nodes[jump(hash64(key), n)] in O(log n) steps.  Adding a node moves 1/(n+1)\n"
"of the keys to it and nothing else; only the last bucket can be removed.\n"
"layout='guava' is Guava's Hashing.consistentHash(long, int);\n"
"layout='jumpback' is JumpBackHash (Ertl 2024), hash4j's\n"
"jumpBackHashSplitMix64(): the same contract in expected O(1) integer steps,\n"
"any bucket count.  With\n"
"hash='murmur3_128', get_target_node(key) is Guava's\n"
"consistentHash(murmur3_128().hashString(key, UTF_8), n).  No diff(): a\n"
"bucket owns no arcs of hashes to list; compare get_target_nodes(keys).");

const router_family jump_family = {
    .name = "jump",
    .bits = 64,
    .cls = &jump_class,
    .release = jump_release,
    .copy = jump_copy,
    .traverse = jump_traverse,
    .clear = jump_clear,
    .add = jump_add,
    .add_many = jump_add_many,
    .remove = jump_remove,
    .contains = jump_contains,
    .len = jump_len,
    .get = jump_get,
    .get_many = jump_get_many,
    .get_by_hash = jump_get_by_hash,
    .read_get = jump_read_get,
    .read_get_by_hash = jump_read_get_by_hash,
    .get_many_by_hash = jump_get_many_by_hash,
    .preference = jump_preference,
    .locate = jump_locate,
    .get_at = jump_get_at,
    .preference_at = jump_preference_at,
    .calculate_hash = jump_calculate_hash,
    .ownership = jump_ownership,
    .key_distribution = jump_key_distribution,
    .fingerprint = jump_fingerprint,
    .check = jump_check,
    .nodes = jump_nodes,
    .weights = jump_weights,
    .weight_of = jump_weight_of,
    .node_at = jump_node_at,
    .hash_name = jump_hash_name,
    .layout = jump_layout,
    .repr = jump_repr,
    .equal = jump_equal,
    .reduce = jump_reduce,
    .unpickle = jump_unpickle,
    .setstate = jump_setstate,
    .weight_rule = jump_weight_rule,
};

const router_class jump_class = {
    .name = "chash.JumpRouter",
    .doc = jump_doc,
    .subclassable = 0,
    .zones = 0,
    .one_family = 1,
    .make = jump_new,
    .family = &jump_family,
    .methods = {
        ROUTER_COMMON_METHODS,
        [RM_GET_MANY_BY_HASH] = get_many_by_hash_doc,
        [RM_CALCULATE_HASH] = calc_doc,
        [RM_SETSTATE] = setstate_doc,
    },
    .properties = {
        [RP_NODES] = "The nodes in bucket order (the order they were added).",
        [RP_WEIGHTS] = "{node: 1.0}: jump has no weights.",
        [RP_HASH] = "The key hash, one of chash.HASHES.",
        [RP_LAYOUT] = "'jump' (the paper's function), 'guava' or 'jumpback' (hash4j's\n"
                      "JumpBackHash).",
        [RP_WEIGHT_RULE] = WEIGHT_RULE_DOC,
    },
};
