/*
 * rendezvous.c - the rendezvous family and the RendezvousRouter class
 * (family.h): highest random weight as a router, in the layouts of strategies/rendezvous.h: "hrw"
 * (weighted, the logarithmic method), "pymemcache" (pymemcache 4.0.0's
 * RendezvousHash), "caddy" (Caddy 2.6's hostByHashing), "squid" (Squid
 * 5.7's CARP).  Part of chash._chash.
 *
 * Here the family: construction, membership, lookups, views and its
 * docstrings (the shell, router.c, does everything else of the type);
 * what it holds and the all-or-nothing rebuild are rendezvous_nodes.c's
 * (rendezvous_nodes.h).  Lookups run no Python code once the key's bytes
 * are read, on the one published state the shell (router.c) hands them;
 * a batch routes its keys' bytes without the GIL (run_winners).
 */
#include "family.h"

#include "args.h"
#include "hash/hash.h"
#include "state.h"
#include "rendezvous_nodes.h"

#include <string.h>

static size_t count_of(const RendezvousObject *self)
{
    return (size_t)PyTuple_GET_SIZE(self->rdv.nodes);
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
        if (PyUnicode_CompareWithASCIIString(layout, rdv_layouts[i].name) == 0) {
            *out = (chash_rdv_layout)i;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "RendezvousRouter's layout must be 'hrw', 'pymemcache', 'caddy' or 'squid', not %R",
                 layout);
    return -1;
}

/* hash= : absent or None is the layout's own (the signature's 'xxh64' is
 * hrw's); a str must name the layout's own. */
static int check_hash(PyObject *hash, chash_rdv_layout layout)
{
    if (!hash || hash == Py_None)
        return 0;
    if (!PyUnicode_Check(hash)) {
        PyErr_Format(PyExc_TypeError, "hash must be str or None, not %.200s", Py_TYPE(hash)->tp_name);
        return -1;
    }
    if (PyUnicode_CompareWithASCIIString(hash, rdv_layouts[layout].hash) == 0)
        return 0;
    PyErr_Format(PyExc_ValueError, "the %s layout hashes with '%s', not %R", rdv_layouts[layout].name,
                 rdv_layouts[layout].hash, hash);
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
    RendezvousObject *self = router_alloc(type);
    if (!self)
        return NULL;
    self->rdv.layout = layout;
    PyObject *empty = PyTuple_New(0);
    if (!empty || rdv_router_set(self, empty, NULL) < 0) {
        Py_XDECREF(empty);
        Py_DECREF(self);
        return NULL;
    }
    Py_DECREF(empty);
    self->family = &rendezvous_family;
    return (PyObject *)self;
}

static int rdv_traverse(RendezvousObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->rdv.nodes);
    Py_VISIT(self->rdv.index);
    return 0;
}

static void rdv_clear(RendezvousObject *self)
{
    (void)self; /* holds only exact str and a dict of them: no cycle */
}

/* A deep copy (family.h): the same (immutable) node tuple, the rest
 * built again for it. */
static int rdv_copy(RendezvousObject *dst, RendezvousObject *src)
{
    dst->rdv.layout = src->rdv.layout;
    return rdv_router_set(dst, src->rdv.nodes, src->rdv.weights);
}

static void rdv_release(RendezvousObject *self)
{
    chash_rdv_free(self->rdv.set);
    self->rdv.set = NULL;
    PyMem_Free(self->rdv.weights);
    self->rdv.weights = NULL;
    Py_CLEAR(self->rdv.nodes);
    Py_CLEAR(self->rdv.index);
}

/* ------------------------------------------------------------------ */
/* Membership                                                         */

static int rdv_weight(RendezvousObject *self, PyObject *obj, double *w)
{
    return rdv_read_weight(self->rdv.layout, obj, w);
}

static int rdv_add(RendezvousObject *self, PyObject *node, double w, PyObject *id)
{
    (void)id; /* the shell passes None: RendezvousRouter takes no id */
    const char *name;
    Py_ssize_t len;
    if (node_id(node, &name, &len) < 0)
        return -1;
    Py_ssize_t at = rdv_position_of(self, node);
    if (at < 0 && PyErr_Occurred())
        return -1;
    if (at >= 0 && self->rdv.weights[at] == w)
        return 0;
    return rdv_update(self, &node, &w, 1, -1);
}

static int rdv_add_many(RendezvousObject *self, PyObject *nodes, double w)
{
    if (PyUnicode_Check(nodes) || PyBytes_Check(nodes)) {
        PyErr_SetString(PyExc_TypeError, "nodes must be an iterable of str, not a single str");
        return -1;
    }
    PyObject *seq = PySequence_Tuple(nodes);
    if (!seq)
        return -1;
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
        result = rdv_update(self, n ? &PyTuple_GET_ITEM(seq, 0) : NULL, weights, n, -1);
    PyMem_Free(weights);
    Py_DECREF(seq);
    return result;
}

static int rdv_remove(RendezvousObject *self, PyObject *node)
{
    Py_ssize_t at = rdv_position_of(self, node);
    if (at < 0)
        return PyErr_Occurred() ? -1 : 0;
    return rdv_update(self, NULL, NULL, 0, at) < 0 ? -1 : 1;
}

/* Exactly the (node, weight) pairs of an iterable, in that order. */
static int rdv_replace(RendezvousObject *self, PyObject *pairs)
{
    return rdv_nodes_replace(self, pairs);
}

static int rdv_contains(RendezvousObject *self, PyObject *node)
{
    Py_ssize_t at = rdv_position_of(self, node);
    return at >= 0 ? 1 : PyErr_Occurred() ? -1 : 0;
}

static Py_ssize_t rdv_len(RendezvousObject *self)
{
    return PyTuple_GET_SIZE(self->rdv.nodes);
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

/* The node of a key view: a new reference, Py_None when no node wins. */
static PyObject *owner_of(const RendezvousObject *self, const key_view *v)
{
    uint32_t winner;
    int status = chash_rdv_lookup(self->rdv.set, v->buf, (size_t)v->len, &winner);
    if (status == CHASH_ENOENT)
        Py_RETURN_NONE;
    return Py_NewRef(PyTuple_GET_ITEM(self->rdv.nodes, (Py_ssize_t)winner));
}

static PyObject *rdv_get(RendezvousObject *self, PyObject *key)
{
    key_view v;
    if (rdv_key_view_of(self->rdv.layout, key, &v) < 0)
        return NULL;
    PyObject *result = owner_of(self, &v);
    rdv_key_view_release(&v);
    return result;
}

static PyObject *rdv_get_by_hash(RendezvousObject *self, PyObject *hash)
{
    if (self->rdv.layout != CHASH_RDV_HRW) {
        PyErr_Format(PyExc_ValueError,
                     "the %s layout scores the key's bytes, not a hash: use get_target_node",
                     rdv_layouts[self->rdv.layout].name);
        return NULL;
    }
    uint64_t h;
    if (parse_hash_arg(hash, 64, "hrw", &h) < 0)
        return NULL;
    uint32_t winner;
    if (chash_rdv_lookup_hash(self->rdv.set, h, &winner) != CHASH_OK)
        Py_RETURN_NONE;
    return Py_NewRef(PyTuple_GET_ITEM(self->rdv.nodes, (Py_ssize_t)winner));
}

static READ_METHOD(rdv_read_get, rdv_get)
static READ_METHOD(rdv_read_get_by_hash, rdv_get_by_hash)

/* The winners of n key views, by the engine alone (no Python object
 * touched): run without the GIL for a large batch. */
typedef struct {
    const chash_rdv_set *set;
    const key_view *views;
    size_t n;
    uint32_t *winners; /* UINT32_MAX: no node */
} WinnersCall;

static void run_winners(void *ctx)
{
    WinnersCall *call = ctx;
    for (size_t i = 0; i < call->n; i++) {
        uint32_t winner;
        int status = chash_rdv_lookup(call->set, call->views[i].buf, (size_t)call->views[i].len,
                                      &winner);
        call->winners[i] = status == CHASH_OK ? winner : UINT32_MAX;
    }
}

static PyObject *rdv_get_many(RendezvousObject *self, PyObject *keys)
{
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of str or bytes");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), made = 0;
    PyObject *result = PyList_New(n);
    key_view *views = result ? PyMem_New(key_view, n ? (size_t)n : 1) : NULL;
    uint32_t *winners = views ? PyMem_New(uint32_t, n ? (size_t)n : 1) : NULL;
    if (result && !winners) {
        Py_CLEAR(result);
        PyErr_NoMemory();
    }
    for (; result && made < n; made++) {
        if (rdv_key_view_of(self->rdv.layout, PySequence_Fast_GET_ITEM(seq, made), &views[made]) < 0) {
            Py_CLEAR(result);
            break;
        }
    }
    if (result) {
        WinnersCall call = {self->rdv.set, views, (size_t)n, winners};
        chash_py_route_unlocked(&router_object(self)->unlocked_readers, (size_t)n, run_winners,
                                &call);
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i,
                            Py_NewRef(winners[i] == UINT32_MAX
                                          ? Py_None
                                          : PyTuple_GET_ITEM(self->rdv.nodes, (Py_ssize_t)winners[i])));
    }
    for (Py_ssize_t i = 0; i < made; i++)
        rdv_key_view_release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(winners);
    Py_DECREF(seq);
    return result;
}

static PyObject *rdv_preference(RendezvousObject *self, PyObject *key, size_t want)
{
    key_view v;
    if (rdv_key_view_of(self->rdv.layout, key, &v) < 0)
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
        int status = chash_rdv_rank(self->rdv.set, v.buf, (size_t)v.len, order);
        if (status != CHASH_OK) {
            chash_py_error(status, NULL, "get_preference_list");
        } else {
            result = PyList_New((Py_ssize_t)want);
            for (size_t i = 0; result && i < want; i++)
                PyList_SET_ITEM(result, (Py_ssize_t)i,
                                Py_NewRef(PyTuple_GET_ITEM(self->rdv.nodes, (Py_ssize_t)order[i])));
        }
    }
    PyMem_Free(order);
    rdv_key_view_release(&v);
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
        if (!v || PyDict_SetItem(result, PyTuple_GET_ITEM(self->rdv.nodes, (Py_ssize_t)k), v) < 0)
            Py_CLEAR(result);
        Py_XDECREF(v);
    }
    return result;
}

static PyObject *rdv_ownership(RendezvousObject *self)
{
    size_t n = count_of(self);
    double *share = PyMem_New(double, n ? n : 1);
    if (!share)
        return PyErr_NoMemory();
    for (size_t k = 0; k < n; k++)
        share[k] = chash_rdv_share(self->rdv.set, k);
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
        if (rdv_key_view_of(self->rdv.layout, PySequence_Fast_GET_ITEM(seq, i), &v) < 0) {
            failed = 1;
            break;
        }
        uint32_t winner;
        /* The key's bytes are read: no Python code ran since n was taken
         * except a bytes subclass's __str__ (pymemcache), which may have
         * changed the router: count only what fits. */
        if (chash_rdv_lookup(self->rdv.set, v.buf, (size_t)v.len, &winner) == CHASH_OK && winner < n)
            counts[winner]++;
        rdv_key_view_release(&v);
    }
    Py_DECREF(seq);
    PyObject *result = NULL;
    if (!failed && count_of(self) == n) {
        result = PyDict_New();
        for (size_t k = 0; result && k < n; k++) {
            PyObject *c = PyLong_FromSize_t(counts[k]);
            if (!c || PyDict_SetItem(result, PyTuple_GET_ITEM(self->rdv.nodes, (Py_ssize_t)k), c) < 0)
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
    PyObject *list = PySequence_List(self->rdv.nodes);
    if (list && !rdv_layouts[self->rdv.layout].ordered && PyList_Sort(list) < 0)
        Py_CLEAR(list);
    return list;
}

static PyObject *rdv_fingerprint(RendezvousObject *self)
{
    PyObject *list = canonical_nodes(self);
    if (!list)
        return NULL;
    PyObject *text = PyUnicode_FromFormat("rendezvous|%s|%s", rdv_layouts[self->rdv.layout].name,
                                          rdv_layouts[self->rdv.layout].hash);
    for (Py_ssize_t i = 0; text && i < PyList_GET_SIZE(list); i++) {
        PyObject *node = PyList_GET_ITEM(list, i);
        Py_ssize_t at = rdv_position_of(self, node);
        char weight[64];
        PyOS_snprintf(weight, sizeof weight, "%.17g", at >= 0 ? self->rdv.weights[at] : 0.0);
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
        result = chash_py_fingerprint(bytes, (size_t)len);
    }
    Py_DECREF(text);
    return result;
}

static int rdv_check(RendezvousObject *self)
{
    size_t n = count_of(self);
    int ok = self->rdv.set && chash_rdv_size(self->rdv.set) == n
             && chash_rdv_layout_of(self->rdv.set) == self->rdv.layout
             && PyDict_GET_SIZE(self->rdv.index) == (Py_ssize_t)n;
    for (size_t k = 0; ok && k < n; k++) {
        PyObject *node = PyTuple_GET_ITEM(self->rdv.nodes, (Py_ssize_t)k);
        ok = PyUnicode_CheckExact(node) && rdv_position_of(self, node) == (Py_ssize_t)k;
    }
    if (PyErr_Occurred())
        return -1;
    int status = ok ? chash_rdv_check(self->rdv.set) : CHASH_ECORRUPT;
    if (status != CHASH_OK) {
        chash_py_error(status, NULL, NULL);
        return -1;
    }
    return 0;
}

static PyObject *pairs_of(const RendezvousObject *self)
{
    Py_ssize_t n = PyTuple_GET_SIZE(self->rdv.nodes);
    PyObject *pairs = PyList_New(n);
    for (Py_ssize_t k = 0; pairs && k < n; k++) {
        PyObject *item = Py_BuildValue("(Od)", PyTuple_GET_ITEM(self->rdv.nodes, k), self->rdv.weights[k]);
        if (!item)
            Py_CLEAR(pairs);
        else
            PyList_SET_ITEM(pairs, k, item);
    }
    return pairs;
}

/* ((layout,), pairs). */
static PyObject *rdv_reduce(RendezvousObject *self)
{
    PyObject *pairs = pairs_of(self);
    if (!pairs)
        return NULL;
    return Py_BuildValue("((s)N)", rdv_layouts[self->rdv.layout].name, pairs);
}

static PyObject *rdv_rebuild(PyTypeObject *cls, PyObject *args)
{
    PyObject *layout, *pairs;
    if (!PyArg_ParseTuple(args, "OO:_rebuild", &layout, &pairs))
        return NULL;
    PyObject *empty = PyTuple_New(0);
    PyObject *kw = empty ? Py_BuildValue("{sO}", "layout", layout) : NULL;
    PyObject *self = kw ? PyObject_Call((PyObject *)cls, empty, kw) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(kw);
    if (self) {
        if (((RouterObject *)self)->family != &rendezvous_family) {
            PyErr_SetString(PyExc_TypeError, "_rebuild: cls must be a RendezvousRouter type");
            Py_CLEAR(self);
            return NULL;
        }
        if (rdv_replace((RendezvousObject *)self, pairs) < 0)
            Py_CLEAR(self);
    }
    return self;
}

static PyObject *rdv_unpickle(PyTypeObject *cls, PyObject *settings, PyObject *nodes)
{
    PyObject *layout;
    if (!PyArg_ParseTuple(settings, "O:_reconstruct", &layout))
        return NULL;
    PyObject *args = PyTuple_Pack(2, layout, nodes);
    PyObject *result = args ? rdv_rebuild(cls, args) : NULL;
    Py_XDECREF(args);
    return result;
}

static PyObject *rdv_nodes(RendezvousObject *self)
{
    return PySequence_List(self->rdv.nodes);
}

static PyObject *rdv_weights(RendezvousObject *self)
{
    return float_map(self, self->rdv.weights);
}

static double rdv_weight_of(RendezvousObject *self, PyObject *node)
{
    Py_ssize_t at = rdv_position_of(self, node);
    if (at < 0)
        return PyErr_Occurred() ? -1.0 : 0.0;
    return self->rdv.weights[at];
}

static PyObject *rdv_node_at(RendezvousObject *self, size_t *at, double *weight)
{
    if (*at >= (size_t)PyTuple_GET_SIZE(self->rdv.nodes))
        return NULL;
    *weight = self->rdv.weights[*at];
    return PyTuple_GET_ITEM(self->rdv.nodes, (Py_ssize_t)*at);
}

static PyObject *rdv_hash_name(RendezvousObject *self)
{
    return PyUnicode_FromString(rdv_layouts[self->rdv.layout].hash);
}

/* hrw's weights are real, squid's whole; pymemcache and caddy have none. */
static const char *rdv_weight_rule(RendezvousObject *self)
{
    switch (self->rdv.layout) {
    case CHASH_RDV_HRW: return "real";
    case CHASH_RDV_SQUID: return "whole";
    default: return "none";
    }
}

static PyObject *rdv_layout_name(RendezvousObject *self)
{
    return PyUnicode_FromString(rdv_layouts[self->rdv.layout].name);
}

static PyObject *rdv_repr(RendezvousObject *self)
{
    PyObject *type_name = PyType_GetName(Py_TYPE(self));
    if (!type_name)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat("%U(layout='%s', hash='%s', nodes=%zd)", type_name,
                                          rdv_layouts[self->rdv.layout].name, rdv_layouts[self->rdv.layout].hash,
                                          PyTuple_GET_SIZE(self->rdv.nodes));
    Py_DECREF(type_name);
    return repr;
}

static int rdv_equal(RendezvousObject *x, RendezvousObject *y)
{
    int equal = x->rdv.layout == y->rdv.layout;
    if (equal) {
        PyObject *wa = float_map(x, x->rdv.weights);
        PyObject *wb = wa ? float_map(y, y->rdv.weights) : NULL;
        equal = wb ? PyObject_RichCompareBool(wa, wb, Py_EQ) : -1;
        Py_XDECREF(wa);
        Py_XDECREF(wb);
    }
    /* The layouts that scan a list route by its order too. */
    if (equal == 1 && rdv_layouts[x->rdv.layout].ordered)
        equal = PyObject_RichCompareBool(x->rdv.nodes, y->rdv.nodes, Py_EQ);
    return equal;
}

/* ------------------------------------------------------------------ */
/* The tables                                                         */

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1.0)\n--\n\n"
"Add a node (or give a present one a new weight).  hrw takes any finite\n"
"weight > 0 (a node's share is its weight's share), squid integer weights\n"
"from 1 to 2**31 - 1 (cache_peer weight=N); pymemcache and caddy have no\n"
"weights (1 only).  Cost: O(n) rebuild of the node set (a present node\n"
"given its weight again: O(1)).");

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1.0)\n--\n\n"
"add_service_node(node, weight) for every node of an iterable, in one\n"
"rebuild: all or none of them.  Cost: O(n + k) rebuild (k nodes given).");

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node; KeyError if it is not here.  Only its keys move.  Cost:\n"
"O(n) rebuild of the node set.");

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node if it is here; do nothing otherwise.  Cost: O(n) rebuild\n"
"when it is.");

PyDoc_STRVAR(get_doc,
"get_target_node($self, request_key, /)\n--\n\n"
"The node with the highest score for the key (str or bytes), by the\n"
"layout's rule; None when there is no node (and, for caddy and squid,\n"
"when no score beats 0, as those programs then pick none).");

PyDoc_STRVAR(get_by_hash_doc,
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"hrw only: the node of a key whose XXH64 (seed 0) is hash, an int from 0\n"
"to 2**64 - 1; None when there is no node.  The program layouts score the\n"
"key's bytes themselves (ValueError).");

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
"that order, in one rebuild.  Cost: O(n) rebuild.");

PyDoc_STRVAR(rdv_doc,
"RendezvousRouter(*, layout='hrw', hash='xxh64')\n--\n\n"
"Highest random weight (rendezvous) hashing, scored in C: a key goes to the\n"
"node with the highest score of (key, node).  Layouts: 'hrw' (weighted:\n"
"score = weight / -ln(u), u uniform in (0, 1) from XXH64 of the key mixed\n"
"with XXH64 of the node, so a node's share is its weight's share);\n"
"'pymemcache' (pymemcache 4.0.0's RendezvousHash); 'caddy' (Caddy 2.6's\n"
"hostByHashing, nodes as upstream dial strings); 'squid' (Squid 5.7's\n"
"CARP, weights as cache_peer weight=).  hash is the hrw layout's key hash\n"
"('xxh64'); the program layouts hash as their programs do (pymemcache\n"
"'murmur3', caddy 'fnv1a', squid 'carp') and take no other name: omitted\n"
"(or None) it is the layout's own.");

const router_family rendezvous_family = {
    .name = "rendezvous",
    .bits = 64,
    .cls = &rendezvous_class,
    .release = rdv_release,
    .copy = rdv_copy,
    .traverse = rdv_traverse,
    .clear = rdv_clear,
    .add = rdv_add,
    .read_weight = rdv_weight,
    .add_many = rdv_add_many,
    .remove = rdv_remove,
    .replace = rdv_replace,
    .contains = rdv_contains,
    .len = rdv_len,
    .get = rdv_get,
    .get_many = rdv_get_many,
    .get_by_hash = rdv_get_by_hash,
    .read_get = rdv_read_get,
    .read_get_by_hash = rdv_read_get_by_hash,
    .preference = rdv_preference,
    .ownership = rdv_ownership,
    .key_distribution = rdv_key_distribution,
    .fingerprint = rdv_fingerprint,
    .check = rdv_check,
    .nodes = rdv_nodes,
    .weights = rdv_weights,
    .weight_of = rdv_weight_of,
    .node_at = rdv_node_at,
    .hash_name = rdv_hash_name,
    .layout = rdv_layout_name,
    .repr = rdv_repr,
    .equal = rdv_equal,
    .reduce = rdv_reduce,
    .unpickle = rdv_unpickle,
    .rebuild = rdv_rebuild,
    .weight_rule = rdv_weight_rule,
};

const router_class rendezvous_class = {
    .name = "chash.RendezvousRouter",
    .doc = rdv_doc,
    .subclassable = 0,
    .zones = 0,
    .one_family = 1,
    .make = rdv_new,
    .family = &rendezvous_family,
    .methods = {
        ROUTER_COMMON_METHODS,
        [RM_REPLACE] = replace_doc,
        [RM_REBUILD] = rebuild_doc,
    },
    .properties = {
        [RP_NODES] = "The nodes, in the order they were added.",
        [RP_WEIGHTS] = "{node: weight}.",
        [RP_HASH] = "The layout's hash: 'xxh64' (hrw), 'murmur3' (pymemcache), 'fnv1a' (caddy), "
                    "'carp' (squid).",
        [RP_LAYOUT] = "'hrw', 'pymemcache', 'caddy' or 'squid'.",
        [RP_WEIGHT_RULE] = WEIGHT_RULE_DOC,
    },
};
