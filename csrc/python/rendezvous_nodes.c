/*
 * rendezvous_nodes.c - what RendezvousRouter holds and how it changes
 * (rendezvous_nodes.h): the bytes each layout hashes of a node or a key,
 * the layouts' weight rules, and the all-or-nothing rebuild of the nodes,
 * weights, index and engine node set.  Part of chash._chash.
 */
#include "rendezvous_nodes.h"

#include "args.h"
#include "node_names.h"

#include <math.h>
#include <string.h>

const rdv_layout_info rdv_layouts[CHASH_RDV_LAYOUT_COUNT] = {
    [CHASH_RDV_HRW] = {"hrw", "xxh64", 0},
    [CHASH_RDV_PYMEMCACHE] = {"pymemcache", "murmur3", 0},
    [CHASH_RDV_CADDY] = {"caddy", "fnv1a", 1},
    [CHASH_RDV_SQUID] = {"squid", "carp", 1},
};

/* ------------------------------------------------------------------ */
/* Bytes as each layout reads them                                    */

/*
 * The bytes a layout hashes of a str: UTF-8, except pymemcache, whose
 * murmur3 reads the low byte of every code point (ord(c) & 0xFF).  *buf is
 * the str's own storage or a PyMem block put in *owned (the caller frees
 * it); 0 or -1 with an exception.
 */
static int rdv_str_bytes(chash_rdv_layout layout, PyObject *s, const char **buf, Py_ssize_t *len,
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


int rdv_key_view_of(chash_rdv_layout layout, PyObject *key, key_view *v)
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
    if (rdv_str_bytes(layout, text, &v->buf, &v->len, &v->owned) < 0) {
        Py_CLEAR(v->text);
        return -1;
    }
    return 0;
}

void rdv_key_view_release(key_view *v)
{
    PyMem_Free(v->owned);
    v->owned = NULL;
    Py_CLEAR(v->text);
}

/* ------------------------------------------------------------------ */
/* Weights                                                            */

static int rdv_check_weight(chash_rdv_layout layout, double w)
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

int rdv_read_weight(chash_rdv_layout layout, PyObject *obj, double *w)
{
    if (parse_weight(obj, w) < 0)
        return -1;
    return rdv_check_weight(layout, *w);
}

/* ------------------------------------------------------------------ */
/* The rebuild                                                        */

/* The engine's set for nodes (a tuple of exact str) at weights: 0 and
 * *out, or -1 with an exception. */
static int rdv_build_set(chash_rdv_layout layout, PyObject *nodes, const double *weights,
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
        if (!names[filled] || rdv_str_bytes(layout, node, &ids[filled], &len, &owned[filled]) < 0) {
            result = -1;
            break;
        }
        id_lens[filled] = (size_t)len;
        total += weights[filled];
    }
    if (result == 0 && layout == CHASH_RDV_SQUID && total > (double)CHASH_RDV_SQUID_MAX_TOTAL) {
        /* PyErr_Format has no %f: the sum goes through a float object. */
        PyObject *sum = PyFloat_FromDouble(total);
        if (sum) {
            PyErr_Format(PyExc_ValueError,
                         "the sum of the weights (%R) exceeds 2**31 - 1, which Squid's CARP sums "
                         "in a C int",
                         sum);
            Py_DECREF(sum);
        }
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
int rdv_router_set(RendezvousObject *self, PyObject *nodes, const double *weights)
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
        result = rdv_build_set(self->rdv.layout, nodes, weights, &set);
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
    chash_rdv_set *old_set = self->rdv.set;
    double *old_weights = self->rdv.weights;
    PyObject *old_nodes = self->rdv.nodes, *old_index = self->rdv.index;
    self->rdv.set = set;
    self->rdv.weights = copy;
    self->rdv.nodes = Py_NewRef(nodes);
    self->rdv.index = index;
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
Py_ssize_t rdv_position_of(const RendezvousObject *self, PyObject *node)
{
    if (!PyUnicode_Check(node))
        return -1;
    PyObject *exact = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
    if (!exact)
        return -1;
    PyObject *at = PyDict_GetItemWithError(self->rdv.index, exact);
    Py_DECREF(exact);
    return at ? PyLong_AsSsize_t(at) : -1;
}

/*
 * The router with each of add[0..nadd) at weights[i] (a present node keeps
 * its place and takes the new weight, a new one goes last, in the order
 * given) and without the node at position drop (or -1).  Every node must
 * already be checked to be a str; 0, or -1 with the router unchanged.
 */
int rdv_update(RendezvousObject *self, PyObject *const *add, const double *weights,
                  Py_ssize_t nadd, Py_ssize_t drop)
{
    double *w = PyMem_New(double, (size_t)(PyTuple_GET_SIZE(self->rdv.nodes) + nadd) + 1);
    if (!w) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *tuple = node_names_merge(self->rdv.nodes, drop, add, nadd, self->rdv.weights, weights,
                                       sizeof *w, w);
    int result = tuple ? rdv_router_set(self, tuple, w) : -1;
    Py_XDECREF(tuple);
    PyMem_Free(w);
    return result;
}

/* Where read_pair_weight puts each pair's weight, by the layout's rule. */
typedef struct {
    chash_rdv_layout layout;
    double *weights;
} pair_weights;

static int read_pair_weight(void *ctx, PyObject *obj, Py_ssize_t i)
{
    pair_weights *into = ctx;
    return rdv_read_weight(into->layout, obj, &into->weights[i]);
}

/* Exactly the (node, weight) pairs of an iterable, in that order. */
int rdv_nodes_replace(RendezvousObject *self, PyObject *pairs)
{
    PyObject *seq = PySequence_Tuple(pairs);
    if (!seq)
        return -1;
    pair_weights into = {self->rdv.layout, PyMem_New(double, (size_t)PyTuple_GET_SIZE(seq) + 1)};
    PyObject *nodes = NULL;
    if (!into.weights)
        PyErr_NoMemory();
    else
        nodes = node_names_of_pairs(seq, read_pair_weight, &into);
    int result = nodes ? rdv_router_set(self, nodes, into.weights) : -1;
    Py_DECREF(seq);
    Py_XDECREF(nodes);
    PyMem_Free(into.weights);
    return result;
}
