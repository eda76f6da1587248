/*
 * ring64.c - the 64-bit ring family of ConsistentHashRouter (family.h):
 * the envoy and grpc layouts, Envoy's RING_HASH and gRPC's ring_hash.
 * 64-bit points '{node}_{i}' (engine/envoy.h) on a chash_wide ring
 * (engine/wide.h), counts by weight share between the ring sizes, rebuilt
 * whole from the ordered node list (node_list.h) on every change, as the
 * references do.  Keys are hashed with XXH64, seed 0.  Part of
 * chash._chash.
 */
#include "family.h"

#include "args.h"
#include "diff.h"
#include "hash/hash.h"
#include "key_hash64.h"
#include "state.h"
#include "zones.h"

#include <string.h>

/* Envoy's defaults (and gRPC's, with its cap). */
#define ENVOY_MIN_RING ((uint64_t)1024)
#define ENVOY_MAX_RING ((uint64_t)8388608)
#define GRPC_MAX_RING ((uint64_t)4096)
#define GRPC_RING_SIZE_CAP ((uint64_t)4096)

static const char *layout_name(const RouterObject *self)
{
    return self->r64.kind == RING64_ENVOY ? "envoy" : "grpc";
}

static const char *point_hash_name(chash_point_hash hash)
{
    return hash == CHASH_POINT_MURMUR2_64 ? "murmur2_64" : "xxh64";
}

int ring64_layout(PyObject *layout)
{
    return layout && PyUnicode_Check(layout)
           && (PyUnicode_CompareWithASCIIString(layout, "envoy") == 0
               || PyUnicode_CompareWithASCIIString(layout, "grpc") == 0);
}

/* ------------------------------------------------------------------ */
/* The rebuild                                                        */

static void release_wide(void *structure)
{
    chash_wide_free(structure);
}

/* The ring for a node list: Envoy's counts, then every node's points. */
static int build_wide(void *owner, PyObject *nodes, const uint64_t *weights, size_t n,
                      size_t *counts, void **structure)
{
    RouterObject *self = owner;
    uint64_t lo = self->r64.min_ring, hi = self->r64.max_ring;
    if (self->r64.kind == RING64_GRPC) {
        lo = lo < GRPC_RING_SIZE_CAP ? lo : GRPC_RING_SIZE_CAP;
        hi = hi < GRPC_RING_SIZE_CAP ? hi : GRPC_RING_SIZE_CAP;
    }
    size_t total;
    int status = chash_envoy_counts(weights, n, lo, hi, counts, &total);
    if (status != CHASH_OK) {
        chash_py_error(status, NULL, "cannot size the ring");
        return -1;
    }
    uint64_t *points = PyMem_New(uint64_t, total ? total : 1);
    uint32_t *owners = PyMem_New(uint32_t, total ? total : 1);
    chash_wide *ring = chash_wide_new();
    status = points && owners && ring ? CHASH_OK : CHASH_ENOMEM;
    size_t at = 0;
    for (size_t k = 0; k < n && status == CHASH_OK; k++) {
        Py_ssize_t len;
        const char *id = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(nodes, (Py_ssize_t)k), &len);
        status = id ? chash_envoy_points(self->r64.hash, id, (size_t)len, counts[k], points + at)
                    : CHASH_ENOMEM;
        for (size_t j = 0; j < counts[k]; j++)
            owners[at + j] = (uint32_t)k;
        at += counts[k];
    }
    if (status == CHASH_OK)
        status = chash_wide_build(ring, points, owners, total, n);
    PyMem_Free(points);
    PyMem_Free(owners);
    if (status != CHASH_OK) {
        chash_wide_free(ring);
        if (!PyErr_Occurred())
            chash_py_error(status, NULL, "cannot build the ring");
        return -1;
    }
    *structure = ring;
    return 0;
}

static NodeListRebuild rebuild_of(RouterObject *self)
{
    return (NodeListRebuild){self, build_wide, release_wide, (void **)&self->r64.wide,
                             layout_name(self), self->r64.kind != RING64_GRPC, NULL};
}

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

int ring64_init(RouterObject *self, PyObject *layout, PyObject *hash, PyObject *min_ring,
                PyObject *max_ring)
{
    ring64_kind kind = PyUnicode_CompareWithASCIIString(layout, "envoy") == 0 ? RING64_ENVOY
                                                                              : RING64_GRPC;
    const char *name = kind == RING64_ENVOY ? "envoy" : "grpc";
    chash_point_hash point_hash;
    uint64_t lo, hi;
    if (parse_point_hash(hash, kind == RING64_ENVOY, name, &point_hash) < 0
        || parse_ring_size(min_ring, "minimum_ring_size", ENVOY_MIN_RING, &lo) < 0
        || parse_ring_size(max_ring, "maximum_ring_size",
                           kind == RING64_ENVOY ? ENVOY_MAX_RING : GRPC_MAX_RING, &hi) < 0)
        return -1;
    if (lo > hi) {
        PyErr_Format(PyExc_ValueError, "minimum_ring_size (%llu) > maximum_ring_size (%llu)",
                     (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    if (node_list_init(&self->r64.list) < 0)
        return -1;
    self->r64.wide = chash_wide_new();
    if (!self->r64.wide) {
        node_list_free(&self->r64.list);
        PyErr_NoMemory();
        return -1;
    }
    self->r64.kind = kind;
    self->r64.hash = point_hash;
    self->r64.min_ring = lo;
    self->r64.max_ring = hi;
    self->family = &ring64_family;
    return 0;
}

/* A deep copy (family.h): the node list, and the ring built again for it
 * (the engine's ring has no copy; it is a function of the list). */
static int ring64_copy(RouterObject *dst, RouterObject *src)
{
    dst->r64.kind = src->r64.kind;
    dst->r64.hash = src->r64.hash;
    dst->r64.min_ring = src->r64.min_ring;
    dst->r64.max_ring = src->r64.max_ring;
    if (node_list_copy(&dst->r64.list, &src->r64.list) < 0)
        return -1;
    size_t n = (size_t)node_list_len(&dst->r64.list);
    PyObject *nodes = PyList_AsTuple(dst->r64.list.nodes);
    size_t *counts = nodes ? PyMem_New(size_t, n ? n : 1) : NULL;
    void *wide = NULL;
    int result = -1;
    if (nodes && !counts)
        PyErr_NoMemory();
    if (counts) {
        memset(counts, 0, (n ? n : 1) * sizeof *counts);
        result = build_wide(dst, nodes, dst->r64.list.weights, n, counts, &wide);
    }
    if (result == 0)
        dst->r64.wide = wide;
    PyMem_Free(counts);
    Py_XDECREF(nodes);
    return result;
}

static void ring64_release(RouterObject *self)
{
    chash_wide_free(self->r64.wide);
    self->r64.wide = NULL;
    node_list_free(&self->r64.list);
}

static int ring64_traverse(RouterObject *self, visitproc visit, void *arg)
{
    return node_list_traverse(&self->r64.list, visit, arg);
}

static void ring64_clear(RouterObject *self)
{
    (void)self; /* holds only exact str and dicts of them: no cycle */
}

/* ------------------------------------------------------------------ */
/* Membership                                                         */

static int ring64_add(RouterObject *self, PyObject *node, double weight, PyObject *id)
{
    if (id != Py_None) {
        PyErr_Format(PyExc_ValueError, "id is for layout='haproxy' only (this router's layout is '%s')",
                     layout_name(self));
        return -1;
    }
    NodeListRebuild how = rebuild_of(self);
    return node_list_add(&self->r64.list, node, weight, &how);
}

static int ring64_add_many(RouterObject *self, PyObject *nodes, double weight)
{
    NodeListRebuild how = rebuild_of(self);
    return node_list_add_many(&self->r64.list, nodes, weight, &how);
}

static int ring64_remove(RouterObject *self, PyObject *node)
{
    NodeListRebuild how = rebuild_of(self);
    return node_list_remove(&self->r64.list, node, &how);
}

static int ring64_replace(RouterObject *self, PyObject *pairs)
{
    NodeListRebuild how = rebuild_of(self);
    return node_list_replace(&self->r64.list, pairs, &how);
}

static int ring64_contains(RouterObject *self, PyObject *node)
{
    return node_list_contains(&self->r64.list, node);
}

static Py_ssize_t ring64_len(RouterObject *self)
{
    return node_list_len(&self->r64.list);
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

static PyObject *owner_of(RouterObject *self, uint64_t h)
{
    if (chash_wide_count(self->r64.wide) == 0)
        Py_RETURN_NONE;
    uint32_t k = chash_wide_owner(self->r64.wide, chash_wide_successor(self->r64.wide, h));
    return Py_NewRef(node_list_at(&self->r64.list, k));
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
    return parse_hash_arg(hash, 64, layout_name(self), h);
}

static PyObject *ring64_get(RouterObject *self, PyObject *key)
{
    uint64_t h;
    if (hash_of_key(self, key, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static PyObject *ring64_get_by_hash(RouterObject *self, PyObject *hash)
{
    uint64_t h;
    if (hash_of_arg(self, hash, &h) < 0)
        return NULL;
    return owner_of(self, h);
}

static HASHED_READ_METHOD(ring64_read_get, hash_of_key, owner_of)
static HASHED_READ_METHOD(ring64_read_get_by_hash, hash_of_arg, owner_of)

/* The node position of each hash (node_list_route: the ring has points). */
static void positions_of(const void *owner, const uint64_t *hashes, size_t n, uint32_t *positions)
{
    const RouterObject *self = owner;
    chash_wide_owners(self->r64.wide, hashes, n, positions);
}

static PyObject *ring64_get_many(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n = 0;
    uint64_t *hashes = key_hashes64(keys, &n);
    return node_list_route(&self->r64.list, &router_object(self)->unlocked_readers, self, hashes, n,
                           positions_of);
}

static PyObject *ring64_get_many_by_hash(RouterObject *self, PyObject *hashes)
{
    Py_ssize_t n = 0;
    uint64_t *values = parse_hash_args(hashes, 64, layout_name(self), &n);
    return node_list_route(&self->r64.list, &router_object(self)->unlocked_readers, self, values,
                           n, positions_of);
}

static PyObject *ring64_preference_at(RouterObject *self, uint64_t h, size_t want)
{
    size_t n = (size_t)node_list_len(&self->r64.list);
    want = want < n ? want : n;
    uint32_t *owners = PyMem_New(uint32_t, want ? want : 1);
    if (!owners)
        return PyErr_NoMemory();
    size_t found = 0;
    if (want && chash_wide_preference(self->r64.wide, h, want, owners, &found) != CHASH_OK) {
        PyMem_Free(owners);
        return PyErr_NoMemory();
    }
    PyObject *result = node_list_pick(&self->r64.list, owners, found);
    PyMem_Free(owners);
    return result;
}

LOCATED_BY_HASH(ring64_locate, ring64_get_at, ring64_preference, ring64_preference_at, hash_of_key,
                owner_of)

static PyObject *ring64_calculate_hash(RouterObject *self, PyObject *key)
{
    (void)self;
    return key_hash64_int(key);
}

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

static PyObject *ring64_ownership(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->r64.list);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    chash_wide_ownership(self->r64.wide, share);
    PyObject *result = node_list_float_map(&self->r64.list, share);
    PyMem_Free(share);
    return result;
}

static PyObject *ring64_key_distribution(RouterObject *self, PyObject *keys)
{
    Py_ssize_t nkeys;
    uint64_t *hashes = key_hashes64(keys, &nkeys);
    if (!hashes)
        return NULL;
    size_t n = (size_t)node_list_len(&self->r64.list);
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    uint32_t *owners = PyMem_New(uint32_t, nkeys ? (size_t)nkeys : 1);
    if (!counts || !owners) {
        PyMem_Free(hashes);
        PyMem_Free(counts);
        PyMem_Free(owners);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (n ? n : 1) * sizeof *counts);
    if (chash_wide_count(self->r64.wide) > 0) {
        chash_wide_owners(self->r64.wide, hashes, (size_t)nkeys, owners);
        for (Py_ssize_t i = 0; i < nkeys; i++)
            counts[owners[i]]++;
    }
    PyObject *result = node_list_count_map(&self->r64.list, counts);
    PyMem_Free(hashes);
    PyMem_Free(counts);
    PyMem_Free(owners);
    return result;
}

static void put_be(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
}

static PyObject *ring64_fingerprint(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->r64.list);
    size_t entries = chash_wide_count(self->r64.wide);
    const size_t stride = 12;
    char head[128];
    /* The trailing 0 is the table size a Maglev table would have: the
     * head is the one these layouts have always been summed with. */
    int head_len = PyOS_snprintf(head, sizeof head, "%s|%s|%llu|%llu|%zu", layout_name(self),
                                 point_hash_name(self->r64.hash),
                                 (unsigned long long)self->r64.min_ring,
                                 (unsigned long long)self->r64.max_ring, (size_t)0);
    uint32_t *tags = PyMem_New(uint32_t, n ? n : 1);
    uint8_t *buf = PyMem_Malloc((size_t)head_len + entries * stride + 1);
    if (!tags || !buf) {
        PyMem_Free(tags);
        PyMem_Free(buf);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    if (node_list_tags(&self->r64.list, tags) == 0) {
        memcpy(buf, head, (size_t)head_len);
        uint8_t *at = buf + head_len;
        for (size_t i = 0; i < entries; i++, at += stride) {
            put_be(at, chash_wide_point(self->r64.wide, i), 8);
            put_be(at + 8, tags[chash_wide_owner(self->r64.wide, i)], 4);
        }
        result = chash_py_fingerprint(buf, (size_t)(at - buf));
    }
    PyMem_Free(tags);
    PyMem_Free(buf);
    return result;
}

static int ring64_check(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->r64.list);
    size_t *seen = PyMem_New(size_t, n ? n : 1);
    if (!seen) {
        PyErr_NoMemory();
        return -1;
    }
    memset(seen, 0, (n ? n : 1) * sizeof *seen);
    int ok = chash_wide_check(self->r64.wide) == CHASH_OK && chash_wide_nodes(self->r64.wide) == n;
    for (size_t i = 0; ok && i < chash_wide_count(self->r64.wide); i++)
        seen[chash_wide_owner(self->r64.wide, i)]++;
    ok = ok && node_list_check(&self->r64.list, seen);
    PyMem_Free(seen);
    if (PyErr_Occurred())
        return -1;
    if (!ok) {
        chash_py_error(CHASH_ECORRUPT, NULL, NULL);
        return -1;
    }
    return 0;
}

static PyObject *ring64_nodes(RouterObject *self)
{
    return node_list_nodes(&self->r64.list);
}

static PyObject *ring64_weights(RouterObject *self)
{
    return node_list_weights(&self->r64.list);
}

static double ring64_weight_of(RouterObject *self, PyObject *node)
{
    return node_list_weight_of(&self->r64.list, node);
}

static PyObject *ring64_node_at(RouterObject *self, size_t *at, double *weight)
{
    return node_list_node_at(&self->r64.list, *at, weight);
}

static PyObject *ring64_points(RouterObject *self)
{
    return node_list_counts(&self->r64.list);
}

static PyObject *ring64_hash_ring(RouterObject *self)
{
    size_t n = chash_wide_count(self->r64.wide);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *value = PyLong_FromUnsignedLongLong(chash_wide_point(self->r64.wide, i));
        if (!value)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, value);
    }
    return list;
}

static PyObject *ring64_node_map(RouterObject *self)
{
    size_t n = chash_wide_count(self->r64.wide);
    PyObject *map = PyDict_New();
    /* Walked backwards so a shared value keeps the owner the ring uses. */
    for (size_t i = n; map && i-- > 0;) {
        PyObject *value = PyLong_FromUnsignedLongLong(chash_wide_point(self->r64.wide, i));
        PyObject *node = node_list_at(&self->r64.list, chash_wide_owner(self->r64.wide, i));
        if (!value || PyDict_SetItem(map, value, node) < 0)
            Py_CLEAR(map);
        Py_XDECREF(value);
    }
    return map;
}

static PyObject *ring64_hash_name(RouterObject *self)
{
    return PyUnicode_FromString(point_hash_name(self->r64.hash));
}

static PyObject *ring64_layout_name(RouterObject *self)
{
    return PyUnicode_FromString(layout_name(self));
}

static PyObject *ring64_settings(RouterObject *self, int which)
{
    switch (which) {
    case SETTING_MIN_RING: return PyLong_FromUnsignedLongLong(self->r64.min_ring);
    case SETTING_MAX_RING: return PyLong_FromUnsignedLongLong(self->r64.max_ring);
    default: return PyLong_FromLong(0); /* no virtual_node_count: sized by the ring sizes */
    }
}

static size_t ring64_memory(RouterObject *self)
{
    size_t n = (size_t)node_list_len(&self->r64.list);
    return n * (sizeof *self->r64.list.weights + sizeof *self->r64.list.counts)
           + chash_wide_memory(self->r64.wide);
}

/* Server ids belong to the haproxy layout: these layouts number none. */
static PyObject *ring64_ids(RouterObject *self)
{
    (void)self;
    return PyDict_New();
}

static PyObject *ring64_repr(RouterObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat(
        "%U(hash='%s', layout='%s', minimum_ring_size=%llu, maximum_ring_size=%llu, "
        "nodes=%zd, points=%zu)",
        type_name, point_hash_name(self->r64.hash), layout_name(self),
        (unsigned long long)self->r64.min_ring, (unsigned long long)self->r64.max_ring,
        node_list_len(&self->r64.list), chash_wide_count(self->r64.wide));
    Py_DECREF(type_name);
    return repr;
}

static int ring64_equal(RouterObject *x, RouterObject *y)
{
    if (x->r64.kind != y->r64.kind || x->r64.hash != y->r64.hash
        || x->r64.min_ring != y->r64.min_ring || x->r64.max_ring != y->r64.max_ring)
        return 0;
    /* The ring depends on the add order (running sums). */
    return node_list_equal(&x->r64.list, &y->r64.list, 1);
}

/* ((layout, hash, minimum_ring_size, maximum_ring_size), pairs). */
static PyObject *ring64_reduce(RouterObject *self)
{
    PyObject *pairs = node_list_pairs(&self->r64.list);
    if (!pairs)
        return NULL;
    return Py_BuildValue("((ssKK)N)", layout_name(self), point_hash_name(self->r64.hash),
                         (unsigned long long)self->r64.min_ring,
                         (unsigned long long)self->r64.max_ring, pairs);
}

static PyObject *ring64_unpickle(PyTypeObject *cls, PyObject *settings, PyObject *nodes)
{
    PyObject *layout, *hash, *lo, *hi;
    if (!PyArg_ParseTuple(settings, "OOOO:_reconstruct", &layout, &hash, &lo, &hi))
        return NULL;
    return ring64_rebuild(cls, layout, hash, lo, hi, nodes);
}

static PyObject *list_node(PyObject *router, uint32_t index)
{
    return node_list_at(&((RouterObject *)router)->r64.list, index);
}

static PyObject *ring64_diff(RouterObject *self, RouterObject *other)
{
    if (self->r64.kind != other->r64.kind || self->r64.hash != other->r64.hash)
        return diff_mismatch((PyObject *)self, (PyObject *)other);
    uint32_t *same = node_list_positions_in(&self->r64.list, &other->r64.list);
    if (!same)
        return NULL;
    chash_move *moves;
    size_t count;
    int status = chash_wide_diff(self->r64.wide, other->r64.wide, same, &moves, &count);
    PyMem_Free(same);
    if (status != CHASH_OK)
        return diff_error(status);
    PyObject *list = diff_plain_moves(moves, count, (PyObject *)self, (PyObject *)other, list_node);
    chash_moves_free(moves);
    return list;
}

/* Envoy's and gRPC's weights are uint32 integers from 1. */
static const char *ring64_weight_rule(RouterObject *self)
{
    (void)self;
    return "whole";
}

const router_family ring64_family = {
    .name = "ring64",
    .bits = 64,
    .cls = &ring_class,
    .setstate = zones_setstate,
    .weight_rule = ring64_weight_rule,
    .release = ring64_release,
    .copy = ring64_copy,
    .traverse = ring64_traverse,
    .clear = ring64_clear,
    .add = ring64_add,
    .add_many = ring64_add_many,
    .remove = ring64_remove,
    .replace = ring64_replace,
    .contains = ring64_contains,
    .len = ring64_len,
    .get = ring64_get,
    .get_many = ring64_get_many,
    .get_by_hash = ring64_get_by_hash,
    .read_get = ring64_read_get,
    .read_get_by_hash = ring64_read_get_by_hash,
    .get_many_by_hash = ring64_get_many_by_hash,
    .preference = ring64_preference,
    .locate = ring64_locate,
    .get_at = ring64_get_at,
    .preference_at = ring64_preference_at,
    .calculate_hash = ring64_calculate_hash,
    .ownership = ring64_ownership,
    .key_distribution = ring64_key_distribution,
    .fingerprint = ring64_fingerprint,
    .check = ring64_check,
    .nodes = ring64_nodes,
    .weights = ring64_weights,
    .weight_of = ring64_weight_of,
    .node_at = ring64_node_at,
    .points = ring64_points,
    .hash_ring = ring64_hash_ring,
    .node_map = ring64_node_map,
    .hash_name = ring64_hash_name,
    .layout = ring64_layout_name,
    .settings = ring64_settings,
    .memory = ring64_memory,
    .ids = ring64_ids,
    .repr = ring64_repr,
    .equal = ring64_equal,
    .reduce = ring64_reduce,
    .unpickle = ring64_unpickle,
    .diff = ring64_diff,
};

PyObject *ring64_rebuild(PyTypeObject *cls, PyObject *layout, PyObject *hash, PyObject *min_ring,
                         PyObject *max_ring, PyObject *pairs)
{
    if (!ring64_layout(layout)) {
        PyErr_Format(PyExc_ValueError, "_rebuild_table: not a 64-bit ring layout: %R", layout);
        return NULL;
    }
    RouterObject *self = router_alloc(cls);
    if (self && (ring64_init(self, layout, hash, min_ring, max_ring) < 0
                 || ring64_replace(self, pairs) < 0))
        Py_CLEAR(self);
    return (PyObject *)self;
}
