/*
 * rendezvous.c - chash.RendezvousRouter (rendezvous.h): highest random
 * weight as a router, in the layouts of strategies/rendezvous.h: "hrw"
 * (weighted, the logarithmic method), "pymemcache" (pymemcache 4.0.0's
 * RendezvousHash), "caddy" (Caddy 2.6's hostByHashing), "squid" (Squid
 * 5.7's CARP).  Part of chash._chash.
 *
 * The router keeps its nodes (a tuple of exact str, in add order), their
 * weights (doubles: hrw's are real numbers, unlike the integer weights of
 * the node list Maglev and the 64-bit ring share) and an index, beside the
 * engine's node set, which holds every node's bytes and what depends on
 * the node alone.  Every change builds a new set aside, then swaps the
 * nodes, weights, index and set in at once (all-or-nothing); lookups run
 * no Python code once the key's bytes are read, so under the GIL a lookup
 * sees the old router or the new one.
 */
#include "rendezvous.h"

#include "args.h"
#include "hash/hash.h"
#include "module.h"
#include "strategies/rendezvous.h"

#include <math.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    chash_rdv_layout layout;
    PyObject *nodes;    /* tuple of exact str, in add order */
    double *weights;    /* PyMem, one a node */
    PyObject *index;    /* dict: node -> its position in nodes */
    chash_rdv_set *set; /* the engine's node set, always built */
} RendezvousObject;

/* Each layout's name, its hash's name, and whether the order nodes were
 * added in takes part in routing (the programs that scan a list). */
static const struct {
    const char *name;
    const char *hash;
    int ordered;
} layouts[CHASH_RDV_LAYOUT_COUNT] = {
    [CHASH_RDV_HRW] = {"hrw", "xxh64", 0},
    [CHASH_RDV_PYMEMCACHE] = {"pymemcache", "murmur3", 0},
    [CHASH_RDV_CADDY] = {"caddy", "fnv1a", 1},
    [CHASH_RDV_SQUID] = {"squid", "carp", 1},
};

static size_t count_of(const RendezvousObject *self)
{
    return (size_t)PyTuple_GET_SIZE(self->nodes);
}

/* ------------------------------------------------------------------ */
/* Bytes as each layout reads them                                    */

/*
 * The bytes a layout hashes of a str: UTF-8, except pymemcache, whose
 * murmur3 reads the low byte of every code point (ord(c) & 0xFF).  *buf is
 * the str's own storage or a PyMem block put in *owned (the caller frees
 * it); 0 or -1 with an exception.
 */
static int str_bytes(chash_rdv_layout layout, PyObject *s, const char **buf, Py_ssize_t *len,
                     char **owned)
{
    *owned = NULL;
    if (layout != CHASH_RDV_PYMEMCACHE) {
        *buf = PyUnicode_AsUTF8AndSize(s, len);
        return *buf ? 0 : -1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    *len = n;
    if (PyUnicode_KIND(s) == PyUnicode_1BYTE_KIND) {
        *buf = (const char *)PyUnicode_1BYTE_DATA(s);
        return 0;
    }
    char *copy = PyMem_Malloc(n ? (size_t)n : 1);
    if (!copy) {
        PyErr_NoMemory();
        return -1;
    }
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++)
        copy[i] = (char)(unsigned char)(PyUnicode_READ(kind, data, i) & 0xFF);
    *buf = copy;
    *owned = copy;
    return 0;
}

/* A key's bytes: a str as str_bytes reads it; a bytes key as is, except
 * for pymemcache, which formats any key into f"{node}-{key}" (a bytes key
 * as its str(), b'...'). */
typedef struct {
    const char *buf;
    Py_ssize_t len;
    char *owned;
    PyObject *text;
} key_view;

static int key_view_of(chash_rdv_layout layout, PyObject *key, key_view *v)
{
    v->owned = NULL;
    v->text = NULL;
    if (!PyUnicode_Check(key) && !PyBytes_Check(key)) {
        PyErr_Format(PyExc_TypeError, "key must be str or bytes, not %.200s", Py_TYPE(key)->tp_name);
        return -1;
    }
    if (PyBytes_Check(key) && layout != CHASH_RDV_PYMEMCACHE)
        return chash_py_key_bytes(key, &v->buf, &v->len);
    PyObject *text = PyUnicode_Check(key) ? Py_NewRef(key) : PyObject_Str(key);
    if (!text)
        return -1;
    if (!PyUnicode_Check(text)) {
        Py_DECREF(text);
        PyErr_SetString(PyExc_TypeError, "str() of a bytes key must return str");
        return -1;
    }
    v->text = text;
    if (str_bytes(layout, text, &v->buf, &v->len, &v->owned) < 0) {
        Py_CLEAR(v->text);
        return -1;
    }
    return 0;
}

static void key_view_release(key_view *v)
{
    PyMem_Free(v->owned);
    v->owned = NULL;
    Py_CLEAR(v->text);
}

/* ------------------------------------------------------------------ */
/* Weights                                                            */

static int check_weight(chash_rdv_layout layout, double w)
{
    int ok;
    const char *rule;
    switch (layout) {
    case CHASH_RDV_HRW:
        ok = w > 0.0 && isfinite(w);
        rule = "weight must be a finite number > 0";
        break;
    case CHASH_RDV_SQUID:
        ok = w >= 1.0 && w <= (double)CHASH_RDV_SQUID_MAX_TOTAL && w == floor(w);
        rule = "the squid layout takes integer weights from 1 to 2**31 - 1 (cache_peer weight=N)";
        break;
    default:
        ok = w == 1.0;
        rule = layout == CHASH_RDV_CADDY
                   ? "the caddy layout has no weights (Caddy's hash policies ignore them): "
                     "weight must be 1"
                   : "the pymemcache layout has no weights (RendezvousHash has none): weight "
                     "must be 1";
        break;
    }
    if (ok)
        return 0;
    PyObject *value = PyFloat_FromDouble(w);
    if (value) {
        PyErr_Format(PyExc_ValueError, "%s, not %R", rule, value);
        Py_DECREF(value);
    }
    return -1;
}

static int read_weight(chash_rdv_layout layout, PyObject *obj, double *w)
{
    if (parse_weight(obj, w) < 0)
        return -1;
    return check_weight(layout, *w);
}

/* ------------------------------------------------------------------ */
/* The rebuild                                                        */

/* The engine's set for nodes (a tuple of exact str) at weights: 0 and
 * *out, or -1 with an exception. */
static int build_set(chash_rdv_layout layout, PyObject *nodes, const double *weights,
                     chash_rdv_set **out)
{
    size_t n = (size_t)PyTuple_GET_SIZE(nodes);
    const char **ids = PyMem_New(const char *, n ? n : 1);
    const char **names = PyMem_New(const char *, n ? n : 1);
    size_t *id_lens = PyMem_New(size_t, n ? n : 1);
    size_t *name_lens = PyMem_New(size_t, n ? n : 1);
    char **owned = PyMem_New(char *, n ? n : 1);
    int result = ids && names && id_lens && name_lens && owned ? 0 : -1;
    if (result < 0)
        PyErr_NoMemory();
    size_t filled = 0;
    double total = 0.0;
    for (; result == 0 && filled < n; filled++) {
        PyObject *node = PyTuple_GET_ITEM(nodes, (Py_ssize_t)filled);
        Py_ssize_t len;
        names[filled] = PyUnicode_AsUTF8AndSize(node, &len);
        name_lens[filled] = (size_t)len;
        if (!names[filled] || str_bytes(layout, node, &ids[filled], &len, &owned[filled]) < 0) {
            result = -1;
            break;
        }
        id_lens[filled] = (size_t)len;
        total += weights[filled];
    }
    if (result == 0 && layout == CHASH_RDV_SQUID && total > (double)CHASH_RDV_SQUID_MAX_TOTAL) {
        PyErr_Format(PyExc_ValueError,
                     "the sum of the weights (%.0f) exceeds 2**31 - 1, which Squid's CARP sums "
                     "in a C int",
                     total);
        result = -1;
    }
    if (result == 0) {
        int status = chash_rdv_build(layout, n, ids, id_lens, names, name_lens, weights, out);
        if (status != CHASH_OK) {
            chash_py_error(status, NULL, "cannot build the rendezvous node set");
            result = -1;
        }
    }
    for (size_t k = 0; owned && k < filled; k++)
        PyMem_Free(owned[k]);
    PyMem_Free(ids);
    PyMem_Free(names);
    PyMem_Free(id_lens);
    PyMem_Free(name_lens);
    PyMem_Free(owned);
    return result;
}

/* Make the router hold nodes (a tuple of distinct exact str, not yet
 * checked against the set's limit) at weights (copied); all-or-nothing. */
static int router_set(RendezvousObject *self, PyObject *nodes, const double *weights)
{
    size_t n = (size_t)PyTuple_GET_SIZE(nodes);
    if (n > CHASH_RDV_MAX_NODES) {
        PyErr_Format(PyExc_ValueError, "a RendezvousRouter holds at most %zu nodes",
                     (size_t)CHASH_RDV_MAX_NODES);
        return -1;
    }
    double *copy = PyMem_New(double, n ? n : 1);
    PyObject *index = PyDict_New();
    chash_rdv_set *set = NULL;
    int result = copy && index ? 0 : -1;
    if (result < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    if (result == 0) {
        if (n)
            memcpy(copy, weights, n * sizeof *copy);
        result = build_set(self->layout, nodes, weights, &set);
    }
    for (size_t k = 0; result == 0 && k < n; k++) {
        PyObject *at = PyLong_FromSize_t(k);
        result = at ? PyDict_SetItem(index, PyTuple_GET_ITEM(nodes, (Py_ssize_t)k), at) : -1;
        Py_XDECREF(at);
    }
    if (result < 0) {
        chash_rdv_free(set);
        PyMem_Free(copy);
        Py_XDECREF(index);
        return -1;
    }
    /* Nothing can fail from here: swap everything in at once. */
    chash_rdv_set *old_set = self->set;
    double *old_weights = self->weights;
    PyObject *old_nodes = self->nodes, *old_index = self->index;
    self->set = set;
    self->weights = copy;
    self->nodes = Py_NewRef(nodes);
    self->index = index;
    chash_rdv_free(old_set);
    PyMem_Free(old_weights);
    Py_XDECREF(old_nodes);
    Py_XDECREF(old_index);
    return 0;
}

/* The position of a node, or -1 (absent, or not a str; -1 with an
 * exception when a str subclass cannot be copied).  A str subclass is
 * looked up as an exact copy: its own __hash__ / __eq__ could run Python
 * code in the middle of the lookup. */
static Py_ssize_t position_of(const RendezvousObject *self, PyObject *node)
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

/*
 * The router with each of add[0..nadd) at weights[i] (a present node keeps
 * its place and takes the new weight, a new one goes last, in the order
 * given) and without the node at position drop (or -1).  Every node must
 * already be checked to be a str; 0, or -1 with the router unchanged.
 */
static int update(RendezvousObject *self, PyObject *const *add, const double *weights,
                  Py_ssize_t nadd, Py_ssize_t drop)
{
    Py_ssize_t old_n = PyTuple_GET_SIZE(self->nodes);
    PyObject *names = PyList_New(0);
    PyObject *seen = PyDict_New();
    double *w = PyMem_New(double, (size_t)(old_n + nadd) + 1);
    int result = names && seen && w ? 0 : -1;
    if (result < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; result == 0 && k < old_n; k++) {
        if (k == drop)
            continue;
        PyObject *node = PyTuple_GET_ITEM(self->nodes, k);
        PyObject *at = PyLong_FromSsize_t(n);
        result = at && PyList_Append(names, node) == 0 && PyDict_SetItem(seen, node, at) == 0 ? 0 : -1;
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
            result = pos && PyList_Append(names, name) == 0 && PyDict_SetItem(seen, name, pos) == 0
                         ? 0 : -1;
            Py_XDECREF(pos);
            w[n++] = weights[i];
        } else {
            result = -1;
        }
        Py_DECREF(name);
    }
    PyObject *tuple = result == 0 ? PyList_AsTuple(names) : NULL;
    result = tuple ? router_set(self, tuple, w) : -1;
    Py_XDECREF(tuple);
    Py_XDECREF(names);
    Py_XDECREF(seen);
    PyMem_Free(w);
    return result;
}

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

static int parse_layout(PyObject *layout, chash_rdv_layout *out)
{
    *out = CHASH_RDV_HRW;
    if (!layout)
        return 0;
    if (!PyUnicode_Check(layout)) {
        PyErr_Format(PyExc_TypeError, "layout must be str, not %.200s", Py_TYPE(layout)->tp_name);
        return -1;
    }
    for (int i = 0; i < CHASH_RDV_LAYOUT_COUNT; i++) {
        if (PyUnicode_CompareWithASCIIString(layout, layouts[i].name) == 0) {
            *out = (chash_rdv_layout)i;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "RendezvousRouter's layout must be 'hrw', 'pymemcache', 'caddy' or 'squid', not %R",
                 layout);
    return -1;
}

/* hash= : None (or absent) is the layout's own; a str must name it. */
static int check_hash(PyObject *hash, chash_rdv_layout layout)
{
    if (!hash || hash == Py_None)
        return 0;
    if (!PyUnicode_Check(hash)) {
        PyErr_Format(PyExc_TypeError, "hash must be str or None, not %.200s", Py_TYPE(hash)->tp_name);
        return -1;
    }
    if (PyUnicode_CompareWithASCIIString(hash, layouts[layout].hash) == 0)
        return 0;
    PyErr_Format(PyExc_ValueError, "the %s layout hashes with '%s', not %R", layouts[layout].name,
                 layouts[layout].hash, hash);
    return -1;
}

static PyObject *rdv_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"layout", "hash", NULL};
    PyObject *layout_obj = NULL, *hash = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OO:RendezvousRouter", kwlist, &layout_obj,
                                     &hash))
        return NULL;
    chash_rdv_layout layout;
    if (parse_layout(layout_obj, &layout) < 0 || check_hash(hash, layout) < 0)
        return NULL;
    RendezvousObject *self = (RendezvousObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->layout = layout;
    PyObject *empty = PyTuple_New(0);
    if (!empty || router_set(self, empty, NULL) < 0) {
        Py_XDECREF(empty);
        Py_DECREF(self);
        return NULL;
    }
    Py_DECREF(empty);
    return (PyObject *)self;
}

static int rdv_traverse(RendezvousObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->nodes);
    Py_VISIT(self->index);
    return 0;
}

static int rdv_clear(RendezvousObject *self)
{
    (void)self; /* holds only exact str and a dict of them: no cycle */
    return 0;
}

static void rdv_dealloc(RendezvousObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    chash_rdv_free(self->set);
    self->set = NULL;
    PyMem_Free(self->weights);
    self->weights = NULL;
    Py_CLEAR(self->nodes);
    Py_CLEAR(self->index);
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

static PyObject *rdv_add(RendezvousObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"real_node_id", "weight", NULL};
    PyObject *node, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_node", kwlist, &node, &weight_obj))
        return NULL;
    const char *id;
    Py_ssize_t len;
    double w;
    if (node_id(node, &id, &len) < 0 || read_weight(self->layout, weight_obj, &w) < 0)
        return NULL;
    Py_ssize_t at = position_of(self, node);
    if (at < 0 && PyErr_Occurred())
        return NULL;
    if (at >= 0 && self->weights[at] == w)
        Py_RETURN_NONE;
    return done(update(self, &node, &w, 1, -1));
}

static PyObject *rdv_add_many(RendezvousObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "weight", NULL};
    PyObject *nodes, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_nodes", kwlist, &nodes, &weight_obj))
        return NULL;
    double w;
    if (read_weight(self->layout, weight_obj, &w) < 0)
        return NULL;
    if (PyUnicode_Check(nodes) || PyBytes_Check(nodes)) {
        PyErr_SetString(PyExc_TypeError, "nodes must be an iterable of str, not a single str");
        return NULL;
    }
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    double *weights = PyMem_New(double, (size_t)n + 1);
    int result = weights ? 0 : -1;
    if (!weights)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; result == 0 && i < n; i++) {
        const char *id;
        Py_ssize_t len;
        result = node_id(PyTuple_GET_ITEM(seq, i), &id, &len);
        weights[i] = w;
    }
    if (result == 0)
        result = update(self, n ? &PyTuple_GET_ITEM(seq, 0) : NULL, weights, n, -1);
    PyMem_Free(weights);
    Py_DECREF(seq);
    return done(result);
}

static int remove_node(RendezvousObject *self, PyObject *node)
{
    Py_ssize_t at = position_of(self, node);
    if (at < 0)
        return PyErr_Occurred() ? -1 : 0;
    return update(self, NULL, NULL, 0, at) < 0 ? -1 : 1;
}

static PyObject *rdv_remove(RendezvousObject *self, PyObject *node)
{
    int removed = remove_node(self, node);
    if (removed == 0)
        PyErr_SetObject(PyExc_KeyError, node);
    return done(removed <= 0 ? -1 : 0);
}

static PyObject *rdv_discard(RendezvousObject *self, PyObject *node)
{
    return done(remove_node(self, node));
}

/* Exactly the (node, weight) pairs of an iterable, in that order. */
static PyObject *rdv_replace(RendezvousObject *self, PyObject *pairs)
{
    PyObject *seq = PySequence_Tuple(pairs);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *nodes = PyTuple_New(n);
    PyObject *seen = PySet_New(NULL);
    double *weights = PyMem_New(double, (size_t)n + 1);
    int result = nodes && seen && weights ? 0 : -1;
    if (result < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; result == 0 && i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(seq, i);
        const char *id;
        Py_ssize_t len;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_TypeError, "nodes must hold (node, weight) tuples, not %.200s",
                         Py_TYPE(pair)->tp_name);
            result = -1;
            break;
        }
        PyObject *node = PyTuple_GET_ITEM(pair, 0);
        if (node_id(node, &id, &len) < 0
            || read_weight(self->layout, PyTuple_GET_ITEM(pair, 1), &weights[i]) < 0) {
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
    if (result == 0)
        result = router_set(self, nodes, weights);
    Py_DECREF(seq);
    Py_XDECREF(nodes);
    Py_XDECREF(seen);
    PyMem_Free(weights);
    return done(result);
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

/* The node of a key view: a new reference, Py_None when no node wins. */
static PyObject *owner_of(const RendezvousObject *self, const key_view *v)
{
    uint32_t winner;
    int status = chash_rdv_lookup(self->set, v->buf, (size_t)v->len, &winner);
    if (status == CHASH_ENOENT)
        Py_RETURN_NONE;
    return Py_NewRef(PyTuple_GET_ITEM(self->nodes, (Py_ssize_t)winner));
}

static PyObject *rdv_get(RendezvousObject *self, PyObject *key)
{
    key_view v;
    if (key_view_of(self->layout, key, &v) < 0)
        return NULL;
    PyObject *result = owner_of(self, &v);
    key_view_release(&v);
    return result;
}

static PyObject *rdv_get_many(RendezvousObject *self, PyObject *keys)
{
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of str or bytes");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = PyList_New(n);
    for (Py_ssize_t i = 0; result && i < n; i++) {
        key_view v;
        if (key_view_of(self->layout, PySequence_Fast_GET_ITEM(seq, i), &v) < 0) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, owner_of(self, &v));
        key_view_release(&v);
    }
    Py_DECREF(seq);
    return result;
}

static PyObject *rdv_preference(RendezvousObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get_preference_list expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    size_t want;
    key_view v;
    if (parse_count(args[1], &want) < 0 || key_view_of(self->layout, args[0], &v) < 0)
        return NULL;
    size_t n = count_of(self);
    want = want < n ? want : n;
    uint32_t *order = PyMem_New(uint32_t, n ? n : 1);
    PyObject *result = NULL;
    if (!order) {
        PyErr_NoMemory();
    } else if (n == 0 || want == 0) {
        result = PyList_New(0);
    } else {
        int status = chash_rdv_rank(self->set, v.buf, (size_t)v.len, order);
        if (status != CHASH_OK) {
            chash_py_error(status, NULL, "get_preference_list");
        } else {
            result = PyList_New((Py_ssize_t)want);
            for (size_t i = 0; result && i < want; i++)
                PyList_SET_ITEM(result, (Py_ssize_t)i,
                                Py_NewRef(PyTuple_GET_ITEM(self->nodes, (Py_ssize_t)order[i])));
        }
    }
    PyMem_Free(order);
    key_view_release(&v);
    return result;
}

/* ------------------------------------------------------------------ */
/* Introspection                                                      */

static PyObject *float_map(const RendezvousObject *self, const double *values)
{
    PyObject *result = PyDict_New();
    size_t n = count_of(self);
    for (size_t k = 0; result && k < n; k++) {
        PyObject *v = PyFloat_FromDouble(values[k]);
        if (!v || PyDict_SetItem(result, PyTuple_GET_ITEM(self->nodes, (Py_ssize_t)k), v) < 0)
            Py_CLEAR(result);
        Py_XDECREF(v);
    }
    return result;
}

static PyObject *rdv_ownership(RendezvousObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = count_of(self);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    for (size_t k = 0; k < n; k++)
        share[k] = chash_rdv_share(self->set, k);
    PyObject *result = float_map(self, share);
    PyMem_Free(share);
    return result;
}

static PyObject *rdv_key_distribution(RendezvousObject *self, PyObject *keys)
{
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of str or bytes");
    if (!seq)
        return NULL;
    size_t n = count_of(self);
    size_t *counts = PyMem_New(size_t, n ? n : 1);
    if (!counts) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    memset(counts, 0, (n ? n : 1) * sizeof *counts);
    int failed = 0;
    for (Py_ssize_t i = 0; !failed && i < PySequence_Fast_GET_SIZE(seq); i++) {
        key_view v;
        if (key_view_of(self->layout, PySequence_Fast_GET_ITEM(seq, i), &v) < 0) {
            failed = 1;
            break;
        }
        uint32_t winner;
        /* The key's bytes are read: no Python code ran since n was taken
         * except a bytes subclass's __str__ (pymemcache), which may have
         * changed the router: count only what fits. */
        if (chash_rdv_lookup(self->set, v.buf, (size_t)v.len, &winner) == CHASH_OK && winner < n)
            counts[winner]++;
        key_view_release(&v);
    }
    Py_DECREF(seq);
    PyObject *result = NULL;
    if (!failed && count_of(self) == n) {
        result = PyDict_New();
        for (size_t k = 0; result && k < n; k++) {
            PyObject *c = PyLong_FromSize_t(counts[k]);
            if (!c || PyDict_SetItem(result, PyTuple_GET_ITEM(self->nodes, (Py_ssize_t)k), c) < 0)
                Py_CLEAR(result);
            Py_XDECREF(c);
        }
    } else if (!failed) {
        PyErr_SetString(PyExc_RuntimeError, "the router changed during key_distribution()");
    }
    PyMem_Free(counts);
    return result;
}

/* The nodes in the order that decides routing: add order for the
 * layouts that scan a list, sorted by name for the others. */
static PyObject *canonical_nodes(const RendezvousObject *self)
{
    PyObject *list = PySequence_List(self->nodes);
    if (list && !layouts[self->layout].ordered && PyList_Sort(list) < 0)
        Py_CLEAR(list);
    return list;
}

static PyObject *rdv_fingerprint(RendezvousObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *list = canonical_nodes(self);
    if (!list)
        return NULL;
    PyObject *text = PyUnicode_FromFormat("rendezvous|%s|%s", layouts[self->layout].name,
                                          layouts[self->layout].hash);
    for (Py_ssize_t i = 0; text && i < PyList_GET_SIZE(list); i++) {
        PyObject *node = PyList_GET_ITEM(list, i);
        Py_ssize_t at = position_of(self, node);
        char weight[64];
        PyOS_snprintf(weight, sizeof weight, "%.17g", at >= 0 ? self->weights[at] : 0.0);
        PyObject *part = PyUnicode_FromFormat("\n%U\t%s", node, weight);
        PyObject *joined = part ? PyUnicode_Concat(text, part) : NULL;
        Py_XDECREF(part);
        Py_SETREF(text, joined);
    }
    Py_DECREF(list);
    if (!text)
        return NULL;
    Py_ssize_t len;
    const char *bytes = PyUnicode_AsUTF8AndSize(text, &len);
    PyObject *result = NULL;
    if (bytes) {
        uint8_t digest[CHASH_MD5_DIGEST_SIZE];
        chash_md5(bytes, (size_t)len, digest);
        char hex[17];
        for (int i = 0; i < 8; i++)
            PyOS_snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        result = PyUnicode_FromStringAndSize(hex, 16);
    }
    Py_DECREF(text);
    return result;
}

static PyObject *rdv_check(RendezvousObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = count_of(self);
    int ok = self->set && chash_rdv_size(self->set) == n
             && chash_rdv_layout_of(self->set) == self->layout
             && PyDict_GET_SIZE(self->index) == (Py_ssize_t)n;
    for (size_t k = 0; ok && k < n; k++) {
        PyObject *node = PyTuple_GET_ITEM(self->nodes, (Py_ssize_t)k);
        ok = PyUnicode_CheckExact(node) && position_of(self, node) == (Py_ssize_t)k;
    }
    if (PyErr_Occurred())
        return NULL;
    int status = ok ? chash_rdv_check(self->set) : CHASH_ECORRUPT;
    if (status != CHASH_OK)
        return chash_py_error(status, NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *pairs_of(const RendezvousObject *self)
{
    Py_ssize_t n = PyTuple_GET_SIZE(self->nodes);
    PyObject *pairs = PyList_New(n);
    for (Py_ssize_t k = 0; pairs && k < n; k++) {
        PyObject *item = Py_BuildValue("(Od)", PyTuple_GET_ITEM(self->nodes, k), self->weights[k]);
        if (!item)
            Py_CLEAR(pairs);
        else
            PyList_SET_ITEM(pairs, k, item);
    }
    return pairs;
}

static PyObject *rdv_reduce(RendezvousObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *pairs = pairs_of(self);
    PyObject *rebuild = pairs ? PyObject_GetAttrString((PyObject *)Py_TYPE(self), "_rebuild") : NULL;
    PyObject *result = NULL;
    if (rebuild)
        result = Py_BuildValue("(O(sO))", rebuild, layouts[self->layout].name, pairs);
    Py_XDECREF(rebuild);
    Py_XDECREF(pairs);
    return result;
}

static PyObject *rdv_rebuild(PyObject *cls, PyObject *args)
{
    PyObject *layout, *pairs;
    if (!PyArg_ParseTuple(args, "OO:_rebuild", &layout, &pairs))
        return NULL;
    PyObject *empty = PyTuple_New(0);
    PyObject *kw = empty ? Py_BuildValue("{sO}", "layout", layout) : NULL;
    PyObject *self = kw ? PyObject_Call(cls, empty, kw) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(kw);
    if (self) {
        module_state *state = state_of_type(Py_TYPE(self));
        if (!state || !PyObject_TypeCheck(self, state->rendezvous_type)) {
            if (state)
                PyErr_SetString(PyExc_TypeError, "_rebuild: cls must be a RendezvousRouter type");
            Py_CLEAR(self);
            return NULL;
        }
        PyObject *filled = rdv_replace((RendezvousObject *)self, pairs);
        if (!filled)
            Py_CLEAR(self);
        Py_XDECREF(filled);
    }
    return self;
}

static PyObject *get_nodes(RendezvousObject *self, void *Py_UNUSED(closure))
{
    return PySequence_List(self->nodes);
}

static PyObject *get_weights(RendezvousObject *self, void *Py_UNUSED(closure))
{
    return float_map(self, self->weights);
}

static PyObject *get_hash(RendezvousObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(layouts[self->layout].hash);
}

static PyObject *get_layout(RendezvousObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(layouts[self->layout].name);
}

/* ------------------------------------------------------------------ */
/* Protocols                                                          */

static Py_ssize_t rdv_len(RendezvousObject *self)
{
    return PyTuple_GET_SIZE(self->nodes);
}

static int rdv_contains(RendezvousObject *self, PyObject *node)
{
    Py_ssize_t at = position_of(self, node);
    return at >= 0 ? 1 : PyErr_Occurred() ? -1 : 0;
}

static PyObject *rdv_iter(RendezvousObject *self)
{
    return PyObject_GetIter(self->nodes);
}

static PyObject *rdv_repr(RendezvousObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat("%U(layout='%s', hash='%s', nodes=%zd)", type_name,
                                          layouts[self->layout].name, layouts[self->layout].hash,
                                          PyTuple_GET_SIZE(self->nodes));
    Py_DECREF(type_name);
    return repr;
}

static PyObject *rdv_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    RendezvousObject *x = (RendezvousObject *)a, *y = (RendezvousObject *)b;
    int equal = x->layout == y->layout;
    if (equal) {
        PyObject *wa = float_map(x, x->weights);
        PyObject *wb = wa ? float_map(y, y->weights) : NULL;
        equal = wb ? PyObject_RichCompareBool(wa, wb, Py_EQ) : -1;
        Py_XDECREF(wa);
        Py_XDECREF(wb);
    }
    /* The layouts that scan a list route by its order too. */
    if (equal == 1 && layouts[x->layout].ordered)
        equal = PyObject_RichCompareBool(x->nodes, y->nodes, Py_EQ);
    if (equal < 0)
        return NULL;
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

/* ------------------------------------------------------------------ */
/* The tables                                                         */

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1.0)\n--\n\n"
"Add a node (or give a present one a new weight).  hrw takes any finite\n"
"weight > 0 (a node's share is its weight's share), squid integer weights\n"
"from 1 to 2**31 - 1 (cache_peer weight=N); pymemcache and caddy have no\n"
"weights (1 only).");

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1.0)\n--\n\n"
"add_service_node(node, weight) for every node of an iterable, in one\n"
"rebuild: all or none of them.");

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node; KeyError if it is not here.  Only its keys move.");

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node if it is here; do nothing otherwise.");

PyDoc_STRVAR(get_doc,
"get_target_node($self, request_key, /)\n--\n\n"
"The node with the highest score for the key (str or bytes), by the\n"
"layout's rule; None when there is no node (and, for caddy and squid,\n"
"when no score beats 0, as those programs then pick none).");

PyDoc_STRVAR(get_many_doc,
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

PyDoc_STRVAR(preference_doc,
"get_preference_list($self, key, n, /)\n--\n\n"
"The first n nodes by descending score for the key, ties broken by the\n"
"layout's rule: a natural replica list, whose first node is\n"
"get_target_node's whenever that is not None.");

PyDoc_STRVAR(ownership_doc,
"ownership($self, /)\n--\n\n"
"{node: the share of keys it is designed to own}: hrw weight / total\n"
"weight (exact for uniform hashes: the logarithmic method's property);\n"
"squid weight / total weight (the load factors CARP's multipliers aim\n"
"at); pymemcache and caddy 1 / n.  Measure real keys with\n"
"key_distribution().");

PyDoc_STRVAR(distribution_doc,
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys it owns}, every node included.");

PyDoc_STRVAR(fingerprint_doc,
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: the layout, the nodes\n"
"and their weights (in add order for caddy and squid, which scan a list;\n"
"by name for hrw and pymemcache).");

PyDoc_STRVAR(check_doc,
"_check($self, /)\n--\n\n"
"Verify every invariant; AssertionError if one is broken.");

PyDoc_STRVAR(reduce_doc, "__reduce__($self, /)\n--\n\nPickle support: rebuilt from its nodes.");

PyDoc_STRVAR(rebuild_doc,
"_rebuild($type, layout, nodes, /)\n--\n\n"
"A router of this class and layout holding nodes, a list of (node,\n"
"weight) pairs in order: what pickles are read by.");

PyDoc_STRVAR(replace_doc,
"_replace_nodes($self, nodes, /)\n--\n\n"
"Make the router hold exactly nodes, a list of (node, weight) pairs, in\n"
"that order, in one rebuild.");

static PyMethodDef rdv_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))rdv_add, METH_VARARGS | METH_KEYWORDS, add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))rdv_add_many, METH_VARARGS | METH_KEYWORDS,
     add_many_doc},
    {"remove_service_node", (PyCFunction)rdv_remove, METH_O, remove_doc},
    {"discard_service_node", (PyCFunction)rdv_discard, METH_O, discard_doc},
    {"get_target_node", (PyCFunction)rdv_get, METH_O, get_doc},
    {"get_target_nodes", (PyCFunction)rdv_get_many, METH_O, get_many_doc},
    {"get_preference_list", (PyCFunction)(void (*)(void))rdv_preference, METH_FASTCALL,
     preference_doc},
    {"ownership", (PyCFunction)rdv_ownership, METH_NOARGS, ownership_doc},
    {"key_distribution", (PyCFunction)rdv_key_distribution, METH_O, distribution_doc},
    {"fingerprint", (PyCFunction)rdv_fingerprint, METH_NOARGS, fingerprint_doc},
    {"_check", (PyCFunction)rdv_check, METH_NOARGS, check_doc},
    {"__reduce__", (PyCFunction)rdv_reduce, METH_NOARGS, reduce_doc},
    {"_rebuild", (PyCFunction)rdv_rebuild, METH_VARARGS | METH_CLASS, rebuild_doc},
    {"_replace_nodes", (PyCFunction)rdv_replace, METH_O, replace_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rdv_getset[] = {
    {"nodes", (getter)get_nodes, NULL, "The nodes, in the order they were added.", NULL},
    {"weights", (getter)get_weights, NULL, "{node: weight}.", NULL},
    {"hash", (getter)get_hash, NULL,
     "The layout's hash: 'xxh64' (hrw), 'murmur3' (pymemcache), 'fnv1a' (caddy), 'carp' (squid).",
     NULL},
    {"layout", (getter)get_layout, NULL, "'hrw', 'pymemcache', 'caddy' or 'squid'.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(rdv_doc,
"RendezvousRouter(*, layout='hrw', hash=None)\n--\n\n"
"Highest random weight (rendezvous) hashing, scored in C: a key goes to the\n"
"node with the highest score of (key, node).  Layouts: 'hrw' (weighted:\n"
"score = weight / -ln(u), u uniform in (0, 1) from XXH64 of the key mixed\n"
"with XXH64 of the node, so a node's share is its weight's share);\n"
"'pymemcache' (pymemcache 4.0.0's RendezvousHash); 'caddy' (Caddy 2.6's\n"
"hostByHashing, nodes as upstream dial strings); 'squid' (Squid 5.7's\n"
"CARP, weights as cache_peer weight=).  hash None is the layout's own.");

static PyType_Slot rdv_slots[] = {
    {Py_tp_doc, (void *)rdv_doc},
    {Py_tp_new, rdv_new},
    {Py_tp_dealloc, rdv_dealloc},
    {Py_tp_traverse, rdv_traverse},
    {Py_tp_clear, rdv_clear},
    {Py_tp_methods, rdv_methods},
    {Py_tp_getset, rdv_getset},
    {Py_tp_repr, rdv_repr},
    {Py_tp_richcompare, rdv_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, rdv_iter},
    {Py_sq_length, rdv_len},
    {Py_sq_contains, rdv_contains},
    {Py_mp_length, rdv_len},
    {0, NULL},
};

static PyType_Spec rdv_spec = {
    .name = "chash.RendezvousRouter",
    .basicsize = sizeof(RendezvousObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = rdv_slots,
};

int rendezvous_type_setup(PyObject *module)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &rdv_spec, NULL);
    if (!type)
        return -1;
    get_state(module)->rendezvous_type = type;
    return PyModule_AddType(module, type);
}
