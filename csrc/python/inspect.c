/*
 * inspect.c - what the router tells about itself: the invariant check,
 * ownership, key distribution, the ring and node views, the fingerprint,
 * len / in / iter / repr / ==.  Part of chash._chash (router.h).
 */
#include "router.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

const char check_doc[] = PyDoc_STR(
"_check($self, /)\n--\n\n"
"Verify every invariant of the ring; AssertionError if one is broken.");

PyObject *router_check(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    int status = chash_ring_check(self->ring);
    if (status != CHASH_OK)
        return set_status_error(status, NULL);
    Py_RETURN_NONE;
}

const char ownership_doc[] = PyDoc_STR(
"ownership($self, /)\n--\n\n"
"{node: fraction of the 2**32 ring positions it owns}; the values sum to 1.");

PyObject *router_ownership(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = chash_ring_node_count(self->ring);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    chash_ring_ownership(self->ring, share);
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

const char distribution_doc[] = PyDoc_STR(
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys route to it}, every node listed (0 included).");

PyObject *router_key_distribution(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n;
    uint32_t *hashes = hash_keys(self, keys, &n);
    if (!hashes)
        return NULL;
    size_t nnodes = chash_ring_node_count(self->ring);
    Py_ssize_t *counts = PyMem_New(Py_ssize_t, nnodes ? nnodes : 1);
    if (!counts) {
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (nnodes ? nnodes : 1) * sizeof *counts);
    if (nnodes) {
        chash_ring_owners(self->ring, hashes, (size_t)n, hashes);
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

PyObject *router_get_hash_ring(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_point_count(self->ring);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *value = PyLong_FromUnsignedLong(chash_ring_point(self->ring, i));
        if (!value) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, value);
    }
    return list;
}

PyObject *router_get_node_map(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_point_count(self->ring);
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        uint32_t value = chash_ring_point(self->ring, i);
        /* Points sharing a value: the first (smallest node id) owns it. */
        if (i && chash_ring_point(self->ring, i - 1) == value)
            continue;
        PyObject *key = PyLong_FromUnsignedLong(value);
        NodeEntry *entry = entry_at(self, chash_ring_point_owner(self->ring, i));
        if (!key || PyDict_SetItem(dict, key, entry->name) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(key);
    }
    return dict;
}

PyObject *router_get_nodes(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_node_count(self->ring);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++)
        PyList_SET_ITEM(list, (Py_ssize_t)i, Py_NewRef(entry_at(self, i)->name));
    return list;
}

PyObject *router_get_weights(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_node_count(self->ring);
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

PyObject *router_get_points(RouterObject *self, void *Py_UNUSED(closure))
{
    size_t n = chash_ring_node_count(self->ring);
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict && i < n; i++) {
        PyObject *count = PyLong_FromSize_t(chash_ring_node(self->ring, i).npoints);
        if (!count || PyDict_SetItem(dict, entry_at(self, i)->name, count) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(count);
    }
    return dict;
}

PyObject *router_get_vnodes(RouterObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->base_points);
}

PyObject *router_get_hash(RouterObject *self, void *Py_UNUSED(closure))
{
    if (self->hash_fn)
        return Py_NewRef(self->hash_fn);
    return PyUnicode_FromString(chash_hash_name(self->scheme.hash));
}

PyObject *router_get_layout(RouterObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(chash_layout_name(self->scheme.layout));
}

PyObject *router_get_memory(RouterObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(chash_ring_memory(self->ring));
}

const char fingerprint_doc[] = PyDoc_STR(
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: layout, hash, virtual\n"
"node count and every ring point with its owner.  Equal on every process\n"
"that holds the same ring, whatever the order nodes were added in.");

PyObject *router_fingerprint(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    /* The sorted points and their owners decide every route, so they are
     * what is summed; MD5 keeps the result the same on every platform. */
    PyObject *hash_name;
    if (self->hash_fn) {
        hash_name = PyObject_GetAttrString(self->hash_fn, "__qualname__");
        if (!hash_name) {
            PyErr_Clear();
            hash_name = PyUnicode_FromString("callable");
        }
    } else {
        hash_name = PyUnicode_FromString(chash_hash_name(self->scheme.hash));
    }
    if (!hash_name)
        return NULL;
    PyObject *parts = PyUnicode_FromFormat("%s|%U|%zu", chash_layout_name(self->scheme.layout),
                                           hash_name, self->base_points);
    Py_DECREF(hash_name);
    if (!parts)
        return NULL;
    Py_ssize_t head_len;
    const char *head = PyUnicode_AsUTF8AndSize(parts, &head_len);
    if (!head) {
        Py_DECREF(parts);
        return NULL;
    }
    size_t n = chash_ring_point_count(self->ring);
    size_t nnodes = chash_ring_node_count(self->ring);
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
        chash_node_view node = chash_ring_node(self->ring, k);
        uint8_t digest[CHASH_MAX_DIGEST];
        chash_digest(CHASH_HASH_MD5, node.id, node.id_len, 0, digest);
        memcpy(owner_tag[k], digest, 4);
    }
    size_t at = 0;
    memcpy(buf, head, (size_t)head_len);
    at += (size_t)head_len;
    Py_DECREF(parts);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = chash_ring_point(self->ring, i);
        buf[at++] = (unsigned char)(v >> 24);
        buf[at++] = (unsigned char)(v >> 16);
        buf[at++] = (unsigned char)(v >> 8);
        buf[at++] = (unsigned char)v;
        memcpy(buf + at, owner_tag[chash_ring_point_owner(self->ring, i)], 4);
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

Py_ssize_t router_len(RouterObject *self)
{
    return (Py_ssize_t)chash_ring_node_count(self->ring);
}

int router_contains(RouterObject *self, PyObject *node)
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
    return chash_ring_find(self->ring, id, (size_t)id_len, NULL) == CHASH_OK;
}

PyObject *router_iter(RouterObject *self)
{
    PyObject *nodes = router_get_nodes(self, NULL);
    if (!nodes)
        return NULL;
    PyObject *it = PyObject_GetIter(nodes);
    Py_DECREF(nodes);
    return it;
}

PyObject *router_repr(RouterObject *self)
{
    PyObject *hash = router_get_hash(self, NULL);
    if (!hash)
        return NULL;
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    PyObject *repr = NULL;
    if (type_name)
        repr = PyUnicode_FromFormat(
            "%U(virtual_node_count=%zu, hash=%R, layout='%s', nodes=%zu, points=%zu)",
            type_name, self->base_points, hash, chash_layout_name(self->scheme.layout),
            chash_ring_node_count(self->ring), chash_ring_point_count(self->ring));
    Py_XDECREF(type_name);
    Py_DECREF(hash);
    return repr;
}

PyObject *router_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    RouterObject *x = (RouterObject *)a, *y = (RouterObject *)b;
    int equal = x->base_points == y->base_points && x->scheme.layout == y->scheme.layout
        && x->hash_fn == y->hash_fn && (x->hash_fn || x->scheme.hash == y->scheme.hash);
    if (equal) {
        PyObject *wa = router_get_weights(x, NULL);
        PyObject *wb = wa ? router_get_weights(y, NULL) : NULL;
        if (!wb) {
            Py_XDECREF(wa);
            return NULL;
        }
        equal = PyObject_RichCompareBool(wa, wb, Py_EQ);
        Py_DECREF(wa);
        Py_DECREF(wb);
        if (equal < 0)
            return NULL;
    }
    if (equal == 1 && chash_layout_ties(x->scheme.layout)) {
        /* The order nodes were added in breaks ties: part of the config. */
        PyObject *na = router_get_nodes(x, NULL);
        PyObject *nb = na ? router_get_nodes(y, NULL) : NULL;
        if (!nb) {
            Py_XDECREF(na);
            return NULL;
        }
        equal = PyObject_RichCompareBool(na, nb, Py_EQ);
        Py_DECREF(na);
        Py_DECREF(nb);
        if (equal < 0)
            return NULL;
    }
    if (equal == 1 && x->scheme.layout == CHASH_LAYOUT_HAPROXY)
        equal = haproxy_ids_equal(x, y); /* the ids decide the points */
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}
