/*
 * anchor.c - the anchor family and the AnchorRouter class (family.h):
 * JumpBackAnchor (strategies/anchor.h, hash4j's jumpBackAnchorHash) as a
 * router.  The engine keeps the set of bucket ids and their history (the
 * stack of removed ids); this file keeps the node of every live id
 * (by_bucket) and each node's id (index).  A key goes to
 * by_bucket[anchor(hash64(key))], hash64 being engine/scheme.h's
 * chash_hash64 of the router's hash.
 *
 * A node added takes the id hash4j's addBucket() returns (the most
 * recently removed id, else the next new one); any node can be removed,
 * and only its keys move; re-adding it (when it is the last removed) moves
 * them back.  Because the mapping depends on the order of removals, the
 * router is shared as its state: state() is hash4j's getState() bytes,
 * and from_state(state, nodes_by_bucket) rebuilds the same mapping
 * anywhere.  Pickles carry the same two things through the shell's one
 * reconstructor.
 *
 * Invariants (anchor_check): the engine's own; by_bucket[b] is a node
 * exactly for the live ids b, NULL for every other slot; index maps each
 * of those nodes to its id and holds nothing else.
 *
 * Lookups only read: they never write the engine's set, by_bucket or the
 * index.  A membership change runs no Python code between touching the
 * engine and by_bucket (the index holds exact str keys, so no __eq__ or
 * __hash__ of the caller's runs), so under the GIL a lookup sees the
 * router before or after it.  add_service_nodes builds its result on a
 * copy (anchor_copy) and swaps it in whole.  Part of chash._chash.
 */
#include "family.h"

#include "args.h"
#include "key_hash64.h"

#include <string.h>

#define LAYOUT "anchor"

/* ------------------------------------------------------------------ */
/* Arguments                                                          */

/* A weight the shell read as a number: AnchorRouter has none, so only 1;
 * 0 or -1. */
static int check_weight(double weight)
{
    if (weight == 1.0)
        return 0;
    PyObject *value = PyFloat_FromDouble(weight);
    if (value) {
        PyErr_Format(PyExc_ValueError,
                     "AnchorRouter has no weights (every bucket gets the same share): weight "
                     "must be 1, not %R; ConsistentHashRouter, MaglevRouter and "
                     "RendezvousRouter take weights",
                     value);
        Py_DECREF(value);
    }
    return -1;
}

static int key_hash(const RouterObject *self, PyObject *key, uint64_t *out)
{
    return key_hash_named(self->anchor.hash, key, out);
}

/* A node argument as an exact str (a new reference): a str subclass is
 * copied so that no __hash__ / __eq__ of its own runs in the index.  NULL
 * with TypeError for a non-str. */
static PyObject *exact_node(PyObject *node)
{
    const char *id;
    Py_ssize_t len;
    if (node_id(node, &id, &len) < 0)
        return NULL;
    return PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
}

/* The bucket id of a node here: 0 and *bucket, 1 when it is not here (or
 * is no str), -1 with an exception. */
static int find(const RouterObject *self, PyObject *node, uint32_t *bucket)
{
    if (!PyUnicode_Check(node))
        return 1;
    PyObject *exact = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
    if (!exact)
        return -1;
    PyObject *at = PyDict_GetItemWithError(self->anchor.index, exact);
    Py_DECREF(exact);
    if (!at)
        return PyErr_Occurred() ? -1 : 1;
    *bucket = (uint32_t)PyLong_AsUnsignedLong(at);
    return 0;
}

/* Room in by_bucket for ids below want (zeroed); 0 or -1 with MemoryError,
 * by_bucket as it was. */
static int reserve(AnchorState *st, size_t want)
{
    if (want <= st->cap)
        return 0;
    size_t cap = st->cap < 8 ? 16 : st->cap * 2;
    if (cap < want)
        cap = want;
    PyObject **grown = PyMem_Resize(st->by_bucket, PyObject *, cap);
    if (!grown) {
        PyErr_NoMemory();
        return -1;
    }
    memset(grown + st->cap, 0, (cap - st->cap) * sizeof *grown);
    st->by_bucket = grown;
    st->cap = cap;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

/* An empty router of type; NULL with an exception. */
static RouterObject *make_empty(PyTypeObject *type, chash_hash_id hash)
{
    RouterObject *self = router_alloc(type);
    if (!self)
        return NULL;
    self->family = &anchor_family;
    self->anchor.hash = hash;
    self->anchor.set = chash_anchor_new();
    self->anchor.index = PyDict_New();
    if (!self->anchor.set || !self->anchor.index) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

static PyObject *anchor_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"hash", NULL};
    PyObject *hash = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$O:AnchorRouter", kwlist, &hash))
        return NULL;
    chash_hash_id hash_id;
    if (parse_key_hash(hash, &hash_id) < 0)
        return NULL;
    return (PyObject *)make_empty(type, hash_id);
}

/* Accepts a partly made state (NULL members), as copy and from_state
 * may leave it. */
static void anchor_release(RouterObject *self)
{
    AnchorState *st = &self->anchor;
    for (size_t b = 0; st->by_bucket && b < st->cap; b++)
        Py_XDECREF(st->by_bucket[b]);
    PyMem_Free(st->by_bucket);
    st->by_bucket = NULL;
    st->cap = 0;
    Py_CLEAR(st->index);
    chash_anchor_free(st->set);
    st->set = NULL;
}

static int anchor_traverse(RouterObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->anchor.index);
    return 0;
}

static void anchor_clear(RouterObject *self)
{
    (void)self; /* holds only exact str, ints and a dict of them: no cycle */
}

/* The engine's set has no copy of its own: its state bytes are all of it
 * (anchor.h), read back into a new set. */
static int anchor_copy(RouterObject *dst, RouterObject *src)
{
    const AnchorState *from = &src->anchor;
    AnchorState *to = &dst->anchor;
    dst->family = src->family;
    to->hash = from->hash;
    size_t len = chash_anchor_state_size(from->set);
    uint8_t *bytes = PyMem_Malloc(len);
    to->set = chash_anchor_new();
    int status = bytes && to->set ? chash_anchor_state(from->set, bytes, len) : CHASH_ENOMEM;
    if (status == CHASH_OK)
        status = chash_anchor_set_state(to->set, bytes, len);
    PyMem_Free(bytes);
    if (status != CHASH_OK) {
        chash_py_error(status, NULL, "AnchorRouter copy");
        return -1;
    }
    to->index = PyDict_Copy(from->index);
    if (!to->index || reserve(to, from->cap) < 0)
        return -1;
    for (size_t b = 0; b < from->cap; b++)
        to->by_bucket[b] = Py_XNewRef(from->by_bucket[b]);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Membership                                                         */

/* Adds exact (an exact str not here; the reference is taken only on
 * success) as the bucket the engine gives; 0, or -1 with an exception and
 * the router as it was. */
static int add_exact(AnchorState *st, PyObject *exact)
{
    if (reserve(st, (size_t)chash_anchor_high(st->set) + 1) < 0)
        return -1;
    uint32_t b;
    int status = chash_anchor_add(st->set, &b);
    if (status != CHASH_OK) {
        PyErr_Format(PyExc_ValueError, "AnchorRouter holds at most %lu bucket ids",
                     (unsigned long)CHASH_ANCHOR_MAX_BUCKETS);
        return -1;
    }
    PyObject *id = PyLong_FromUnsignedLong(b);
    if (!id || PyDict_SetItem(st->index, exact, id) < 0) {
        Py_XDECREF(id);
        /* Removing the id just added restores the set exactly (it goes
         * back on the stack, or high drops again) and needs no memory:
         * the stack and slots that held it are still there. */
        (void)chash_anchor_remove(st->set, b);
        return -1;
    }
    Py_DECREF(id);
    st->by_bucket[b] = Py_NewRef(exact);
    return 0;
}

static int anchor_add(RouterObject *self, PyObject *node, double weight, PyObject *id)
{
    (void)id; /* the shell passes None: AnchorRouter takes no id */
    if (check_weight(weight) < 0)
        return -1;
    PyObject *exact = exact_node(node);
    if (!exact)
        return -1;
    int present = PyDict_Contains(self->anchor.index, exact);
    int result = present < 0 ? -1 : present ? 0 : add_exact(&self->anchor, exact);
    Py_DECREF(exact);
    return result;
}

/* Every node added, in order, on a copy swapped in whole: all or none. */
static int anchor_add_many(RouterObject *self, PyObject *nodes, double weight)
{
    if (check_weight(weight) < 0)
        return -1;
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *id;
        Py_ssize_t len;
        if (node_id(PyTuple_GET_ITEM(seq, i), &id, &len) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    RouterObject scratch;
    memset(&scratch, 0, sizeof scratch);
    int result = anchor_copy(&scratch, self);
    for (Py_ssize_t i = 0; result == 0 && i < n; i++) {
        PyObject *exact = exact_node(PyTuple_GET_ITEM(seq, i));
        int present = exact ? PyDict_Contains(scratch.anchor.index, exact) : -1;
        result = present < 0 ? -1 : present ? 0 : add_exact(&scratch.anchor, exact);
        Py_XDECREF(exact);
    }
    Py_DECREF(seq);
    if (result == 0) {
        AnchorState old = self->anchor;
        self->anchor = scratch.anchor;
        scratch.anchor = old;
    }
    anchor_release(&scratch);
    return result;
}

/* Removes any node: 1 removed, 0 absent, -1 with an exception (the router
 * as it was). */
static int anchor_remove(RouterObject *self, PyObject *node)
{
    uint32_t b;
    int found = find(self, node, &b);
    if (found != 0)
        return found < 0 ? -1 : 0;
    int status = chash_anchor_remove(self->anchor.set, b);
    if (status != CHASH_OK) {
        chash_py_error(status, node, "remove_service_node");
        return -1;
    }
    /* by_bucket[b] is the exact str key: deleting it cannot fail or run
     * Python code. */
    PyObject *held = self->anchor.by_bucket[b];
    self->anchor.by_bucket[b] = NULL;
    if (PyDict_DelItem(self->anchor.index, held) < 0)
        PyErr_Clear();
    Py_DECREF(held);
    return 1;
}

static int anchor_contains(RouterObject *self, PyObject *node)
{
    uint32_t b;
    int found = find(self, node, &b);
    return found < 0 ? -1 : found == 0;
}

static Py_ssize_t anchor_len(RouterObject *self)
{
    return (Py_ssize_t)chash_anchor_size(self->anchor.set);
}

/* get_bounded's reads: every node weighs 1; the nodes in bucket-id order,
 * the removed ids stepped over. */
static double anchor_weight_of(RouterObject *self, PyObject *node)
{
    uint32_t b;
    int found = find(self, node, &b);
    return found < 0 ? -1.0 : found == 0 ? 1.0 : 0.0;
}

static PyObject *anchor_node_at(RouterObject *self, size_t *at, double *weight)
{
    const AnchorState *st = &self->anchor;
    size_t high = chash_anchor_high(st->set);
    while (*at < high && !st->by_bucket[*at])
        ++*at;
    if (*at >= high)
        return NULL;
    *weight = 1.0;
    return st->by_bucket[*at];
}

/* ------------------------------------------------------------------ */
/* Lookups (reads only)                                               */

static PyObject *owner_of(const RouterObject *self, uint64_t h)
{
    uint32_t b;
    if (chash_anchor_lookup(self->anchor.set, h, &b) != CHASH_OK)
        Py_RETURN_NONE;
    return Py_NewRef(self->anchor.by_bucket[b]);
}

/* The key's hash and a hash argument's value, read with the object's own
 * settings (what HASHED_READ_METHOD asks); 0, or -1 with an exception. */
static int hash_of_key(const RouterObject *self, PyObject *key, uint64_t *h)
{
    return key_hash(self, key, h);
}

static int hash_of_arg(const RouterObject *self, PyObject *hash, uint64_t *h)
{
    (void)self;
    return parse_hash_arg(hash, 64, LAYOUT, h);
}

static PyObject *anchor_get(RouterObject *self, PyObject *key)
{
    uint64_t h;
    if (hash_of_key(self, key, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static PyObject *anchor_get_by_hash(RouterObject *self, PyObject *hash)
{
    uint64_t h;
    if (hash_of_arg(self, hash, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static HASHED_READ_METHOD(anchor_read_get, hash_of_key, owner_of)
static HASHED_READ_METHOD(anchor_read_get_by_hash, hash_of_arg, owner_of)

/* The owner of each of n hashes (a PyMem buffer, freed here; NULL: the
 * exception set while making it), as a list.  The loop runs no Python
 * code and holds the GIL: self is the state the shell handed over, which
 * no change frees while the call's read section is open. */
static PyObject *nodes_of(const RouterObject *self, uint64_t *hashes, Py_ssize_t n)
{
    if (!hashes)
        return NULL;
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; result && i < n; i++)
        PyList_SET_ITEM(result, i, owner_of(self, hashes[i]));
    PyMem_Free(hashes);
    return result;
}

/* The 64-bit hash of every key of an iterable, in a PyMem buffer the
 * caller frees; NULL with an exception. */
static uint64_t *hash_keys(const RouterObject *self, PyObject *keys, Py_ssize_t *n)
{
    return key_hashes_named(keys, (int)self->anchor.hash, n);
}

static PyObject *anchor_get_many(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n = 0;
    uint64_t *hashes = hash_keys(self, keys, &n);
    return nodes_of(self, hashes, n);
}

static PyObject *anchor_get_many_by_hash(RouterObject *self, PyObject *hashes)
{
    Py_ssize_t n = 0;
    uint64_t *values = parse_hash_args(hashes, 64, LAYOUT, &n);
    return nodes_of(self, values, n);
}

static PyObject *anchor_preference_at(RouterObject *self, uint64_t h, size_t want)
{
    size_t live = chash_anchor_size(self->anchor.set);
    want = want < live ? want : live;
    uint32_t *buckets = PyMem_New(uint32_t, want ? want : 1);
    if (!buckets)
        return PyErr_NoMemory();
    size_t found = 0;
    int status = chash_anchor_preference(self->anchor.set, h, want, buckets, &found);
    PyObject *result = status == CHASH_OK ? PyList_New((Py_ssize_t)found) : NULL;
    if (status != CHASH_OK)
        chash_py_error(status, NULL, "get_preference_list");
    for (size_t k = 0; result && k < found; k++)
        PyList_SET_ITEM(result, (Py_ssize_t)k, Py_NewRef(self->anchor.by_bucket[buckets[k]]));
    PyMem_Free(buckets);
    return result;
}

LOCATED_BY_HASH(anchor_locate, anchor_get_at, anchor_preference, anchor_preference_at, hash_of_key,
                owner_of)

static PyObject *anchor_calculate_hash(RouterObject *self, PyObject *key)
{
    uint64_t h;
    if (key_hash(self, key, &h) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(h);
}

/* ------------------------------------------------------------------ */
/* What the router tells about itself                                 */

/* {node: value(b)} over the live ids, ascending. */
static PyObject *per_node(RouterObject *self, PyObject *(*value)(const void *, uint32_t),
                          const void *ctx)
{
    const AnchorState *st = &self->anchor;
    PyObject *result = PyDict_New();
    uint32_t high = chash_anchor_high(st->set);
    for (uint32_t b = 0; result && b < high; b++) {
        if (!st->by_bucket[b])
            continue;
        PyObject *v = value(ctx, b);
        if (!v || PyDict_SetItem(result, st->by_bucket[b], v) < 0)
            Py_CLEAR(result);
        Py_XDECREF(v);
    }
    return result;
}

static PyObject *share_value(const void *ctx, uint32_t b)
{
    (void)b;
    return PyFloat_FromDouble(*(const double *)ctx);
}

static PyObject *count_value(const void *ctx, uint32_t b)
{
    return PyLong_FromSize_t(((const size_t *)ctx)[b]);
}

static PyObject *anchor_ownership(RouterObject *self)
{
    uint32_t live = chash_anchor_size(self->anchor.set);
    double share = live ? 1.0 / (double)live : 0.0;
    return per_node(self, share_value, &share);
}

static PyObject *anchor_weights(RouterObject *self)
{
    double one = 1.0;
    return per_node(self, share_value, &one);
}

static PyObject *anchor_key_distribution(RouterObject *self, PyObject *keys)
{
    Py_ssize_t nkeys;
    uint64_t *hashes = hash_keys(self, keys, &nkeys);
    if (!hashes)
        return NULL;
    size_t high = chash_anchor_high(self->anchor.set);
    size_t *counts = PyMem_New(size_t, high ? high : 1);
    if (!counts) {
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (high ? high : 1) * sizeof *counts);
    for (Py_ssize_t i = 0; i < nkeys; i++) {
        uint32_t b;
        if (chash_anchor_lookup(self->anchor.set, hashes[i], &b) == CHASH_OK)
            counts[b]++;
    }
    PyObject *result = per_node(self, count_value, counts);
    PyMem_Free(hashes);
    PyMem_Free(counts);
    return result;
}

/* The state's bytes as a new bytes object; NULL with an exception. */
static PyObject *anchor_state(RouterObject *self)
{
    size_t len = chash_anchor_state_size(self->anchor.set);
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!bytes)
        return NULL;
    int status = chash_anchor_state(self->anchor.set, (uint8_t *)PyBytes_AS_STRING(bytes), len);
    if (status != CHASH_OK) {
        Py_DECREF(bytes);
        return chash_py_error(status, NULL, "state");
    }
    return bytes;
}

/* MD5 over "anchor|hash|", the state's bytes, then each live id's node's
 * UTF-8 and a NUL, ascending by id: what decides routing. */
static PyObject *anchor_fingerprint(RouterObject *self)
{
    const AnchorState *st = &self->anchor;
    PyObject *state = anchor_state(self);
    if (!state)
        return NULL;
    char head[64];
    int head_len = PyOS_snprintf(head, sizeof head, "anchor|%s|", chash_hash_name(st->hash));
    size_t total = (size_t)head_len + (size_t)PyBytes_GET_SIZE(state);
    uint32_t high = chash_anchor_high(st->set);
    for (uint32_t b = 0; b < high; b++) {
        Py_ssize_t len = 0;
        if (st->by_bucket[b] && !PyUnicode_AsUTF8AndSize(st->by_bucket[b], &len)) {
            Py_DECREF(state);
            return NULL;
        }
        total += (size_t)len + 1;
    }
    uint8_t *buf = PyMem_Malloc(total);
    if (!buf) {
        Py_DECREF(state);
        return PyErr_NoMemory();
    }
    uint8_t *at = buf;
    memcpy(at, head, (size_t)head_len);
    at += head_len;
    memcpy(at, PyBytes_AS_STRING(state), (size_t)PyBytes_GET_SIZE(state));
    at += PyBytes_GET_SIZE(state);
    for (uint32_t b = 0; b < high; b++) {
        Py_ssize_t len = 0;
        const char *name = st->by_bucket[b] ? PyUnicode_AsUTF8AndSize(st->by_bucket[b], &len) : "";
        memcpy(at, name, (size_t)len);
        at += len;
        *at++ = 0;
    }
    PyObject *result = chash_py_fingerprint(buf, (size_t)(at - buf));
    PyMem_Free(buf);
    Py_DECREF(state);
    return result;
}

static int anchor_check(RouterObject *self)
{
    const AnchorState *st = &self->anchor;
    int ok = chash_anchor_check(st->set) == CHASH_OK;
    uint32_t high = chash_anchor_high(st->set);
    ok = ok && (high == 0 || high <= st->cap)
         && (Py_ssize_t)chash_anchor_size(st->set) == PyDict_GET_SIZE(st->index);
    for (size_t b = 0; ok && b < st->cap; b++) {
        int live = b < high && chash_anchor_contains(st->set, (uint32_t)b);
        PyObject *node = st->by_bucket[b];
        ok = live == (node != NULL);
        if (ok && node) {
            PyObject *at = PyDict_GetItemWithError(st->index, node);
            ok = PyUnicode_CheckExact(node) && at && PyLong_AsSsize_t(at) == (Py_ssize_t)b;
        }
    }
    if (PyErr_Occurred())
        return -1;
    if (!ok) {
        chash_py_error(CHASH_ECORRUPT, NULL, NULL);
        return -1;
    }
    return 0;
}

/* The nodes by bucket id, ascending. */
static PyObject *anchor_nodes(RouterObject *self)
{
    const AnchorState *st = &self->anchor;
    PyObject *result = PyList_New(0);
    uint32_t high = chash_anchor_high(st->set);
    for (uint32_t b = 0; result && b < high; b++)
        if (st->by_bucket[b] && PyList_Append(result, st->by_bucket[b]) < 0)
            Py_CLEAR(result);
    return result;
}

/* [node of id 0, ..., node of id high - 1], None at removed ids. */
static PyObject *nodes_by_bucket(RouterObject *self)
{
    const AnchorState *st = &self->anchor;
    uint32_t high = chash_anchor_high(st->set);
    PyObject *result = PyList_New(high);
    for (uint32_t b = 0; result && b < high; b++)
        PyList_SET_ITEM(result, b, Py_NewRef(st->by_bucket[b] ? st->by_bucket[b] : Py_None));
    return result;
}

static PyObject *anchor_bucket_of(RouterObject *self, PyObject *node)
{
    const char *id;
    Py_ssize_t len;
    if (node_id(node, &id, &len) < 0)
        return NULL;
    uint32_t b;
    int found = find(self, node, &b);
    if (found < 0)
        return NULL;
    if (found) {
        PyErr_SetObject(PyExc_KeyError, node);
        return NULL;
    }
    return PyLong_FromUnsignedLong(b);
}

static PyObject *anchor_hash_name(RouterObject *self)
{
    return PyUnicode_FromString(chash_hash_name(self->anchor.hash));
}

static PyObject *anchor_layout(RouterObject *self)
{
    (void)self;
    return PyUnicode_FromString(LAYOUT);
}

static PyObject *anchor_repr(RouterObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat("%U(hash='%s', nodes=%zd)", type_name,
                                          chash_hash_name(self->anchor.hash), anchor_len(self));
    Py_DECREF(type_name);
    return repr;
}

/* Same hash, same state, same node at every id. */
static int anchor_equal(RouterObject *x, RouterObject *y)
{
    const AnchorState *a = &x->anchor, *b = &y->anchor;
    if (a->hash != b->hash || chash_anchor_high(a->set) != chash_anchor_high(b->set)
        || chash_anchor_size(a->set) != chash_anchor_size(b->set))
        return 0;
    PyObject *sa = anchor_state(x), *sb = sa ? anchor_state(y) : NULL;
    int equal = sb ? PyObject_RichCompareBool(sa, sb, Py_EQ) : -1;
    Py_XDECREF(sa);
    Py_XDECREF(sb);
    uint32_t high = chash_anchor_high(a->set);
    for (uint32_t k = 0; equal == 1 && k < high; k++) {
        PyObject *p = a->by_bucket[k], *q = b->by_bucket[k];
        if (!p || !q)
            equal = p == q;
        else
            equal = PyUnicode_Compare(p, q) == 0; /* exact str: no Python code */
    }
    return equal;
}

static const char *anchor_weight_rule(RouterObject *self)
{
    (void)self;
    return "none";
}

/* ------------------------------------------------------------------ */
/* From a state, and pickles                                          */

/* Puts the nodes of nodes_by_bucket (an iterable, one entry per id below
 * the state's high: a node for a live id, None for a removed one) into
 * self, whose set holds the state and which has no node yet; 0, or -1
 * with an exception (self then released by its caller). */
static int place_nodes(RouterObject *self, PyObject *nodes)
{
    AnchorState *st = &self->anchor;
    PyObject *seq = PySequence_Fast(nodes, "nodes_by_bucket must be an iterable of str or None");
    if (!seq)
        return -1;
    uint32_t high = chash_anchor_high(st->set);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int result = 0;
    if (n != (Py_ssize_t)high) {
        PyErr_Format(PyExc_ValueError,
                     "nodes_by_bucket must hold one entry per bucket id of the state (%lu: a "
                     "node for each live id, None for each removed one), not %zd",
                     (unsigned long)high, n);
        result = -1;
    }
    if (result == 0)
        result = reserve(st, high);
    for (uint32_t b = 0; result == 0 && b < high; b++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, b);
        int live = chash_anchor_contains(st->set, b);
        if (!live) {
            if (item != Py_None) {
                PyErr_Format(PyExc_ValueError,
                             "nodes_by_bucket[%lu] must be None: the state has removed bucket "
                             "%lu, not %R",
                             (unsigned long)b, (unsigned long)b, item);
                result = -1;
            }
            continue;
        }
        if (item == Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "nodes_by_bucket[%lu] is None, but bucket %lu is live in the state",
                         (unsigned long)b, (unsigned long)b);
            result = -1;
            break;
        }
        PyObject *exact = exact_node(item);
        PyObject *id = exact ? PyLong_FromUnsignedLong(b) : NULL;
        int present = id ? PyDict_Contains(st->index, exact) : -1;
        if (present == 1)
            PyErr_Format(PyExc_ValueError, "nodes_by_bucket names %R twice", item);
        if (present != 0 || PyDict_SetItem(st->index, exact, id) < 0) {
            result = -1;
        } else {
            st->by_bucket[b] = Py_NewRef(exact);
        }
        Py_XDECREF(exact);
        Py_XDECREF(id);
    }
    Py_DECREF(seq);
    return result;
}

/* A router of cls holding a state's set (hash4j's getState() bytes) and
 * the node of each id; NULL with ValueError for a state that does not
 * parse, or another exception. */
static PyObject *make_from_state(PyTypeObject *cls, chash_hash_id hash, const Py_buffer *state,
                                 PyObject *nodes)
{
    RouterObject *self = make_empty(cls, hash);
    if (!self)
        return NULL;
    int status = chash_anchor_set_state(self->anchor.set, state->buf, (size_t)state->len);
    if (status == CHASH_ENOMEM) {
        PyErr_NoMemory();
    } else if (status != CHASH_OK) {
        const uint8_t *p = state->buf;
        unsigned long high = state->len >= 4
            ? (unsigned long)p[0] | (unsigned long)p[1] << 8 | (unsigned long)p[2] << 16
                  | (unsigned long)p[3] << 24
            : 0;
        if (state->len < 4 || state->len % 4 != 0)
            PyErr_Format(PyExc_ValueError,
                         "the state does not parse: its length must be 4 + 4 * (ids removed), "
                         "not %zd bytes",
                         state->len);
        else if (status == CHASH_ERANGE || high > CHASH_ANCHOR_MAX_BUCKETS)
            PyErr_Format(PyExc_ValueError,
                         "the state does not parse: it names %lu bucket ids, more than the "
                         "%lu an AnchorRouter holds",
                         high, (unsigned long)CHASH_ANCHOR_MAX_BUCKETS);
        else
            PyErr_Format(PyExc_ValueError,
                         "the state does not parse: every removed id must lie below its first "
                         "integer (%lu), appear once, and leave at least one bucket",
                         high);
    }
    if (status != CHASH_OK || place_nodes(self, nodes) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* make_from_state with the hash given as an argument (NULL: xxh64); state
 * is released here, whatever happens. */
static PyObject *made_from(PyTypeObject *cls, PyObject *hash, Py_buffer *state, PyObject *nodes)
{
    chash_hash_id hash_id;
    PyObject *result = NULL;
    if (parse_key_hash(hash, &hash_id) == 0)
        result = make_from_state(cls, hash_id, state, nodes);
    PyBuffer_Release(state);
    return result;
}

static PyObject *anchor_from_state(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"state", "nodes_by_bucket", "hash", NULL};
    Py_buffer state;
    PyObject *nodes, *hash = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*O|$O:from_state", kwlist, &state, &nodes,
                                     &hash))
        return NULL;
    return made_from(cls, hash, &state, nodes);
}

/* ((hash, state), nodes by bucket id). */
static PyObject *anchor_reduce(RouterObject *self)
{
    PyObject *state = anchor_state(self);
    PyObject *nodes = state ? nodes_by_bucket(self) : NULL;
    if (!nodes) {
        Py_XDECREF(state);
        return NULL;
    }
    return Py_BuildValue("((sN)N)", chash_hash_name(self->anchor.hash), state, nodes);
}

static PyObject *anchor_unpickle(PyTypeObject *cls, PyObject *settings, PyObject *nodes)
{
    PyObject *hash;
    Py_buffer state;
    if (!PyArg_ParseTuple(settings, "Oy*:_reconstruct", &hash, &state))
        return NULL;
    return made_from(cls, hash, &state, nodes);
}

/* __setstate__((hash, state, nodes_by_bucket)): the router made to hold
 * exactly what from_state would make of them, in one swap; as it was on
 * any error.  What a shared ring's instances adopt (chash.membership). */
static PyObject *anchor_setstate(RouterObject *self, PyObject *arg)
{
    PyObject *hash, *nodes;
    Py_buffer state;
    if (!PyTuple_Check(arg) || !PyArg_ParseTuple(arg, "Oy*O:__setstate__", &hash, &state, &nodes)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "AnchorRouter state must be (hash, state, nodes_by_bucket)");
        return NULL;
    }
    PyObject *made = made_from(Py_TYPE(self), hash, &state, nodes);
    if (!made)
        return NULL;
    AnchorState old = self->anchor;
    self->anchor = ((RouterObject *)made)->anchor;
    ((RouterObject *)made)->anchor = old;
    Py_DECREF(made);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* The tables                                                         */

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1.0)\n--\n\n"
"Add a node as the bucket id hash4j's addBucket() would return: the id\n"
"removed most recently, or the next new id when none is removed; a node\n"
"already here stays where it is.  It takes only its share of the keys\n"
"(re-adding the last node removed moves its keys back).  No weights: any\n"
"weight but 1 is a ValueError.  Cost: O(1) amortized.");

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1.0)\n--\n\n"
"add_service_node(node) for every node of an iterable, in that order, all\n"
"or none of them.  Cost: O(n + k) (a copy of the router, k nodes given).");

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove any node (hash4j's removeBucket() of its id); only its keys move,\n"
"evenly onto the others.  KeyError if the node is not here.  Cost: O(1)\n"
"amortized.");

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove the node if it is here; do nothing otherwise.  Cost: O(1)\n"
"amortized.");

PyDoc_STRVAR(get_doc,
"get_target_node($self, request_key, /)\n--\n\n"
"The node of bucket anchor(hash64(key)): hash64 is the router's hash of the\n"
"key's UTF-8 (bytes as they are) as a 64-bit integer (as JumpRouter's);\n"
"None when there is no node.");

PyDoc_STRVAR(get_many_doc,
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

PyDoc_STRVAR(get_by_hash_doc,
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"The node of hash4j's getBucket(hash) for a 64-bit hash computed by the\n"
"caller (0 to 2**64 - 1; a Java long is hash & (2**64 - 1)); None when\n"
"there is no node.");

PyDoc_STRVAR(get_many_by_hash_doc,
"get_target_nodes_by_hash($self, hashes, /)\n--\n\n"
"get_target_node_by_hash for every hash of an iterable of ints (each from\n"
"0 to 2**64 - 1), as a list; all are checked before any is looked up.");

PyDoc_STRVAR(preference_doc,
"get_preference_list($self, key, n, /)\n--\n\n"
"n distinct nodes: the key's node, then where the key would go if the\n"
"nodes before it in the list were removed, in that order (each removal as\n"
"remove_service_node does it), without changing the router.  So when the\n"
"first k fail and are removed, the key lands on node k + 1.  Fewer when\n"
"the router has fewer nodes.  Cost: n lookups and O(n**2) more.");

PyDoc_STRVAR(ownership_doc,
"ownership($self, /)\n--\n\n"
"{node: 1 / n}: the live buckets share the 64-bit hashes equally (by\n"
"design, not measured; key_distribution counts real keys).");

PyDoc_STRVAR(distribution_doc,
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys it owns}, every node included.");

PyDoc_STRVAR(fingerprint_doc,
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: the hash, the state()\n"
"and the node of every bucket id.");

PyDoc_STRVAR(calc_doc,
"_calculate_hash($self, key, /)\n--\n\n"
"The 64-bit hash of a str or bytes key that the router looks up.");

PyDoc_STRVAR(check_doc,
"_check($self, /)\n--\n\n"
"Verify every invariant; AssertionError if one is broken.");

PyDoc_STRVAR(reduce_doc,
"__reduce__($self, /)\n--\n\n"
"Pickle support: rebuilt from its hash, state() and the node of every\n"
"bucket id.");

PyDoc_STRVAR(bucket_of_doc,
"bucket_of($self, node, /)\n--\n\n"
"The node's bucket id (what hash4j's addBucket() returned for it);\n"
"KeyError if it is not here.");

PyDoc_STRVAR(state_doc,
"state($self, /)\n--\n\n"
"The set of bucket ids and its history as bytes, equal to hash4j's\n"
"getState() after the same adds and removes: little-endian 32-bit\n"
"integers, the number of ids ever in use (since the router was last\n"
"empty), then the removed ids, the earliest removed first.  4 + 4 x\n"
"(ids removed) bytes.  With the node of every id it is all that decides\n"
"routing: from_state(state, nodes_by_bucket) rebuilds the same mapping.");

PyDoc_STRVAR(from_state_doc,
"from_state($cls, /, state, nodes_by_bucket, *, hash='xxh64')\n--\n\n"
"A router routing exactly as the one whose state() this is (hash4j's\n"
"setState()), its bucket ids held by nodes_by_bucket: an iterable with one\n"
"entry per id below the state's first integer, the node of each live id\n"
"and None at each removed one.  A state that does not parse (a length not\n"
"4 + 4k, a removed id out of range or named twice, every id removed) is a\n"
"ValueError, as are entries that do not fit it.");

PyDoc_STRVAR(setstate_doc,
"__setstate__($self, state, /)\n--\n\n"
"Hold exactly what from_state(state, nodes_by_bucket, hash=hash) would make\n"
"of state = (hash, state, nodes_by_bucket), in one swap (the router as it\n"
"was on any error): how a shared ring's instances adopt the mapping\n"
"another one recorded.");

PyDoc_STRVAR(anchor_doc,
"AnchorRouter(*, hash='xxh64')\n--\n\n"
"JumpBackAnchor (hash4j's ConsistentHashing.jumpBackAnchorHash) as a\n"
"router: nodes are bucket ids, any node can be removed and only its keys\n"
"move, in expected O(1) per lookup with memory only for the removed ids.\n"
"Ids are given as hash4j gives them (a removed id is reused, the latest\n"
"first), so the mapping depends on the order of changes: state() and\n"
"from_state() carry it between processes (chash.membership keeps it under\n"
"the ring's version).  Safe to share between threads; changes are\n"
"serialised by the GIL and lookups see the router before or after one.");

const router_family anchor_family = {
    .name = "anchor",
    .bits = 64,
    .cls = &anchor_class,
    .release = anchor_release,
    .traverse = anchor_traverse,
    .clear = anchor_clear,
    .copy = anchor_copy,
    .add = anchor_add,
    .add_many = anchor_add_many,
    .remove = anchor_remove,
    .contains = anchor_contains,
    .weight_of = anchor_weight_of,
    .node_at = anchor_node_at,
    .len = anchor_len,
    .get = anchor_get,
    .get_many = anchor_get_many,
    .get_by_hash = anchor_get_by_hash,
    .read_get = anchor_read_get,
    .read_get_by_hash = anchor_read_get_by_hash,
    .get_many_by_hash = anchor_get_many_by_hash,
    .preference = anchor_preference,
    .locate = anchor_locate,
    .get_at = anchor_get_at,
    .preference_at = anchor_preference_at,
    .calculate_hash = anchor_calculate_hash,
    .ownership = anchor_ownership,
    .key_distribution = anchor_key_distribution,
    .fingerprint = anchor_fingerprint,
    .check = anchor_check,
    .nodes = anchor_nodes,
    .weights = anchor_weights,
    .hash_name = anchor_hash_name,
    .layout = anchor_layout,
    .repr = anchor_repr,
    .equal = anchor_equal,
    .reduce = anchor_reduce,
    .unpickle = anchor_unpickle,
    .setstate = anchor_setstate,
    .bucket_of = anchor_bucket_of,
    .state = anchor_state,
    .from_state = anchor_from_state,
    .weight_rule = anchor_weight_rule,
};

const router_class anchor_class = {
    .name = "chash.AnchorRouter",
    .doc = anchor_doc,
    .subclassable = 0,
    .zones = 0,
    .one_family = 1,
    .make = anchor_new,
    .family = &anchor_family,
    .methods = {
        ROUTER_COMMON_METHODS,
        [RM_GET_MANY_BY_HASH] = get_many_by_hash_doc,
        [RM_CALCULATE_HASH] = calc_doc,
        [RM_BUCKET_OF] = bucket_of_doc,
        [RM_STATE] = state_doc,
        [RM_FROM_STATE] = from_state_doc,
        [RM_SETSTATE] = setstate_doc,
    },
    .properties = {
        [RP_NODES] = "The nodes in bucket id order.",
        [RP_WEIGHTS] = "{node: 1.0}: AnchorRouter has no weights.",
        [RP_HASH] = "The key hash, one of chash.HASHES.",
        [RP_LAYOUT] = "'anchor'.",
        [RP_WEIGHT_RULE] = WEIGHT_RULE_DOC,
    },
};
