/*
 * inspect.c - what a 32-bit ring tells about itself: the invariant check,
 * ownership, key distribution, the ring and node views, the settings, the
 * fingerprint, len / in / repr / ==, and diff (ring32.h).
 */
#include "ring32.h"

#include "python/diff.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

int ring32_check(RouterObject *self)
{
    int status = chash_ring_check(self->r32.ring);
    if (status != CHASH_OK) {
        set_status_error(status, NULL);
        return -1;
    }
    return 0;
}

PyObject *ring32_ownership(RouterObject *self)
{
    size_t n = chash_ring_node_count(self->r32.ring);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    chash_ring_ownership(self->r32.ring, share);
    PyObject *result = PyDict_New();
    for (size_t i = 0; result && i < n; i++) {
        PyObject *value = PyFloat_FromDouble(share[i]);
        if (!value || PyDict_SetItem(result, entry_at(self, i)->name, value) < 0)
            Py_CLEAR(result);
        Py_XDECREF(value);
    }
    PyMem_Free(share);
    return result;
}

PyObject *ring32_key_distribution(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n;
    uint32_t *hashes = hash_keys(self, keys, &n);
    if (!hashes)
        return NULL;
    size_t nnodes = chash_ring_node_count(self->r32.ring);
    Py_ssize_t *counts = PyMem_New(Py_ssize_t, nnodes ? nnodes : 1);
    if (!counts) {
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (nnodes ? nnodes : 1) * sizeof *counts);
    if (nnodes) {
        chash_ring_owners(self->r32.ring, hashes, (size_t)n, hashes);
        for (Py_ssize_t i = 0; i < n; i++)
            counts[hashes[i]]++;
    }
    PyMem_Free(hashes);
    PyObject *result = PyDict_New();
    for (size_t k = 0; result && k < nnodes; k++) {
        PyObject *count = PyLong_FromSsize_t(counts[k]);
        if (!count || PyDict_SetItem(result, entry_at(self, k)->name, count) < 0)
            Py_CLEAR(result);
        Py_XDECREF(count);
    }
    PyMem_Free(counts);
    return result;
}

PyObject *ring32_hash_ring(RouterObject *self)
{
    size_t n = chash_ring_point_count(self->r32.ring);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *value = PyLong_FromUnsignedLong(chash_ring_point(self->r32.ring, i));
        if (!value) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, value);
    }
    return list;
}

PyObject *ring32_node_map(RouterObject *self)
{
    size_t n = chash_ring_point_count(self->r32.ring);
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        uint32_t value = chash_ring_point(self->r32.ring, i);
        /* Points sharing a value: the first (smallest node id) owns it. */
        if (i && chash_ring_point(self->r32.ring, i - 1) == value)
            continue;
        PyObject *key = PyLong_FromUnsignedLong(value);
        NodeEntry *entry = entry_at(self, chash_ring_point_owner(self->r32.ring, i));
        if (!key || PyDict_SetItem(dict, key, entry->name) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(key);
    }
    return dict;
}

PyObject *ring32_nodes(RouterObject *self)
{
    size_t n = chash_ring_node_count(self->r32.ring);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++)
        PyList_SET_ITEM(list, (Py_ssize_t)i, Py_NewRef(entry_at(self, i)->name));
    return list;
}

PyObject *ring32_weights(RouterObject *self)
{
    size_t n = chash_ring_node_count(self->r32.ring);
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        NodeEntry *entry = entry_at(self, i);
        PyObject *weight = PyFloat_FromDouble(entry->weight);
        if (!weight || PyDict_SetItem(dict, entry->name, weight) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(weight);
    }
    return dict;
}

/* Finds node in the ring: 1 (its index in *index, when not NULL), 0 (not
 * a node: not a str, or a str with a lone surrogate), or -1. */
static int find_node(RouterObject *self, PyObject *node, size_t *index)
{
    if (!PyUnicode_Check(node))
        return 0;
    const char *id;
    Py_ssize_t id_len;
    if (node_id(node, &id, &id_len) < 0) {
        /* A str with a lone surrogate cannot be a node. */
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    return chash_ring_find(self->r32.ring, id, (size_t)id_len, index) == CHASH_OK;
}

double ring32_weight_of(RouterObject *self, PyObject *node)
{
    size_t index;
    int found = find_node(self, node, &index);
    return found < 0 ? -1.0 : found ? entry_at(self, index)->weight : 0.0;
}

PyObject *ring32_node_at(RouterObject *self, size_t *at, double *weight)
{
    if (*at >= chash_ring_node_count(self->r32.ring))
        return NULL;
    NodeEntry *entry = entry_at(self, *at);
    *weight = entry->weight;
    return entry->name;
}

PyObject *ring32_points(RouterObject *self)
{
    size_t n = chash_ring_node_count(self->r32.ring);
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        PyObject *count = PyLong_FromSize_t(chash_ring_node(self->r32.ring, i).npoints);
        if (!count || PyDict_SetItem(dict, entry_at(self, i)->name, count) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(count);
    }
    return dict;
}

PyObject *ring32_settings(RouterObject *self, int which)
{
    if (which == SETTING_VNODES)
        return PyLong_FromSize_t(self->r32.base_points);
    Py_RETURN_NONE; /* the ring sizes are the 64-bit ring's */
}

PyObject *ring32_hash_name(RouterObject *self)
{
    if (self->r32.hash_fn)
        return Py_NewRef(self->r32.hash_fn);
    return PyUnicode_FromString(chash_hash_name(self->r32.scheme.hash));
}

PyObject *ring32_layout(RouterObject *self)
{
    return PyUnicode_FromString(chash_layout_name(self->r32.scheme.layout));
}

size_t ring32_memory(RouterObject *self)
{
    return chash_ring_memory(self->r32.ring);
}

PyObject *ring32_fingerprint(RouterObject *self)
{
    /* The sorted points and their owners decide every route, so they are
     * what is summed; MD5 keeps the result the same on every platform. */
    PyObject *hash_name;
    if (self->r32.hash_fn) {
        hash_name = PyObject_GetAttrString(self->r32.hash_fn, "__qualname__");
        if (!hash_name) {
            PyErr_Clear();
            hash_name = PyUnicode_FromString("callable");
        }
    } else {
        hash_name = PyUnicode_FromString(chash_hash_name(self->r32.scheme.hash));
    }
    if (!hash_name)
        return NULL;
    PyObject *parts = PyUnicode_FromFormat("%s|%U|%zu", chash_layout_name(self->r32.scheme.layout),
                                           hash_name, self->r32.base_points);
    Py_DECREF(hash_name);
    if (!parts)
        return NULL;
    Py_ssize_t head_len;
    const char *head = PyUnicode_AsUTF8AndSize(parts, &head_len);
    if (!head) {
        Py_DECREF(parts);
        return NULL;
    }
    size_t n = chash_ring_point_count(self->r32.ring);
    size_t nnodes = chash_ring_node_count(self->r32.ring);
    /* Each point is followed by the first 4 bytes of the MD5 of its owner's
     * id (its index would depend on the order nodes were added in): hashed
     * once a node, into owner_tag, not once a point. */
    unsigned char *buf = PyMem_Malloc((size_t)head_len + n * 8 + 1);
    uint8_t (*owner_tag)[4] = PyMem_Malloc((nnodes ? nnodes : 1) * sizeof *owner_tag);
    if (!buf || !owner_tag) {
        PyMem_Free(buf);
        PyMem_Free(owner_tag);
        Py_DECREF(parts);
        return PyErr_NoMemory();
    }
    for (size_t k = 0; k < nnodes; k++) {
        chash_node_view node = chash_ring_node(self->r32.ring, k);
        uint8_t digest[CHASH_MAX_DIGEST];
        chash_digest(CHASH_HASH_MD5, node.id, node.id_len, 0, digest);
        memcpy(owner_tag[k], digest, 4);
    }
    size_t at = 0;
    memcpy(buf, head, (size_t)head_len);
    at += (size_t)head_len;
    Py_DECREF(parts);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = chash_ring_point(self->r32.ring, i);
        buf[at++] = (unsigned char)(v >> 24);
        buf[at++] = (unsigned char)(v >> 16);
        buf[at++] = (unsigned char)(v >> 8);
        buf[at++] = (unsigned char)v;
        memcpy(buf + at, owner_tag[chash_ring_point_owner(self->r32.ring, i)], 4);
        at += 4;
    }
    PyMem_Free(owner_tag);
    uint8_t digest[CHASH_MAX_DIGEST];
    chash_digest(CHASH_HASH_MD5, buf, at, 0, digest);
    PyMem_Free(buf);
    char hex[17];
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    return PyUnicode_FromStringAndSize(hex, 16);
}

/* ------------------------------------------------------------------ */
/* Protocols: len, in, iter, repr, ==                                 */

Py_ssize_t ring32_len(RouterObject *self)
{
    return (Py_ssize_t)chash_ring_node_count(self->r32.ring);
}

int ring32_contains(RouterObject *self, PyObject *node)
{
    return find_node(self, node, NULL);
}

PyObject *ring32_repr(RouterObject *self)
{
    PyObject *hash = ring32_hash_name(self);
    if (!hash)
        return NULL;
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    PyObject *repr = NULL;
    if (type_name)
        repr = PyUnicode_FromFormat(
            "%U(virtual_node_count=%zu, hash=%R, layout='%s', nodes=%zu, points=%zu)",
            type_name, self->r32.base_points, hash, chash_layout_name(self->r32.scheme.layout),
            chash_ring_node_count(self->r32.ring), chash_ring_point_count(self->r32.ring));
    Py_XDECREF(type_name);
    Py_DECREF(hash);
    return repr;
}

int ring32_equal(RouterObject *x, RouterObject *y)
{
    int equal = x->r32.base_points == y->r32.base_points && x->r32.scheme.layout == y->r32.scheme.layout
        && x->r32.hash_fn == y->r32.hash_fn && (x->r32.hash_fn || x->r32.scheme.hash == y->r32.scheme.hash);
    if (equal) {
        PyObject *wa = ring32_weights(x);
        PyObject *wb = wa ? ring32_weights(y) : NULL;
        if (!wb) {
            Py_XDECREF(wa);
            return -1;
        }
        equal = PyObject_RichCompareBool(wa, wb, Py_EQ);
        Py_DECREF(wa);
        Py_DECREF(wb);
        if (equal < 0)
            return -1;
    }
    if (equal == 1 && chash_layout_ties(x->r32.scheme.layout)) {
        /* The order nodes were added in breaks ties: part of the config. */
        PyObject *na = ring32_nodes(x);
        PyObject *nb = na ? ring32_nodes(y) : NULL;
        if (!nb) {
            Py_XDECREF(na);
            return -1;
        }
        equal = PyObject_RichCompareBool(na, nb, Py_EQ);
        Py_DECREF(na);
        Py_DECREF(nb);
        if (equal < 0)
            return -1;
    }
    if (equal == 1 && x->r32.scheme.layout == CHASH_LAYOUT_HAPROXY)
        equal = haproxy_ids_equal(x, y); /* the ids decide the points */
    return equal;
}

/* ------------------------------------------------------------------ */
/* diff                                                               */

static PyObject *ring_node(PyObject *router, uint32_t index)
{
    return entry_at((RouterObject *)router, index)->name;
}

PyObject *ring32_diff(RouterObject *self, RouterObject *other)
{
    if (self->r32.scheme.layout != other->r32.scheme.layout
        || self->r32.scheme.hash != other->r32.scheme.hash
        || self->r32.hash_fn != other->r32.hash_fn)
        return diff_mismatch((PyObject *)self, (PyObject *)other);
    chash_move *moves;
    size_t count;
    int status = chash_ring_diff(self->r32.ring, other->r32.ring, &moves, &count);
    if (status != CHASH_OK)
        return diff_error(status);
    PyObject *list = diff_plain_moves(moves, count, (PyObject *)self, (PyObject *)other, ring_node);
    chash_moves_free(moves);
    return list;
}
