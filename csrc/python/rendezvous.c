/*
 * rendezvous.c - chash.RendezvousRouter (rendezvous.h): highest random
 * weight as a router, in the layouts of strategies/rendezvous.h: "hrw"
 * (weighted, the logarithmic method), "pymemcache" (pymemcache 4.0.0's
 * RendezvousHash), "caddy" (Caddy 2.6's hostByHashing), "squid" (Squid
 * 5.7's CARP).  Part of chash._chash.
 *
 * Here the type: construction, membership, lookups, views and its tables;
 * what it holds and the all-or-nothing rebuild are rendezvous_nodes.c's
 * (rendezvous_nodes.h).  Lookups run no Python code once the key's bytes
 * are read, so under the GIL a lookup sees the old router or the new one.
 */
#include "rendezvous.h"

#include "family.h"

#include "args.h"
#include "hash/hash.h"
#include "state.h"
#include "rendezvous_nodes.h"

#include <string.h>

static size_t count_of(const RendezvousObject *self)
{
    return (size_t)PyTuple_GET_SIZE(self->nodes);
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
    RendezvousObject *self = (RendezvousObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->layout = layout;
    PyObject *empty = PyTuple_New(0);
    if (!empty || rdv_router_set(self, empty, NULL) < 0) {
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

static void rdv_dealloc(RendezvousObject *self);

const uint64_t *rendezvous_changes(PyObject *obj)
{
    if (!chash_py_made_by(obj, (void *)rdv_dealloc))
        return NULL;
    return &((RendezvousObject *)obj)->changes;
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
    if (node_id(node, &id, &len) < 0 || rdv_read_weight(self->layout, weight_obj, &w) < 0)
        return NULL;
    Py_ssize_t at = rdv_position_of(self, node);
    if (at < 0 && PyErr_Occurred())
        return NULL;
    if (at >= 0 && self->weights[at] == w)
        Py_RETURN_NONE;
    return done(rdv_update(self, &node, &w, 1, -1));
}

static PyObject *rdv_add_many(RendezvousObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "weight", NULL};
    PyObject *nodes, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_nodes", kwlist, &nodes, &weight_obj))
        return NULL;
    double w;
    if (rdv_read_weight(self->layout, weight_obj, &w) < 0)
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
        result = rdv_update(self, n ? &PyTuple_GET_ITEM(seq, 0) : NULL, weights, n, -1);
    PyMem_Free(weights);
    Py_DECREF(seq);
    return done(result);
}

static int remove_node(RendezvousObject *self, PyObject *node)
{
    Py_ssize_t at = rdv_position_of(self, node);
    if (at < 0)
        return PyErr_Occurred() ? -1 : 0;
    return rdv_update(self, NULL, NULL, 0, at) < 0 ? -1 : 1;
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
    return done(rdv_nodes_replace(self, pairs));
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
    if (rdv_key_view_of(self->layout, key, &v) < 0)
        return NULL;
    PyObject *result = owner_of(self, &v);
    rdv_key_view_release(&v);
    return result;
}

static PyObject *rdv_get_by_hash(RendezvousObject *self, PyObject *hash)
{
    if (self->layout != CHASH_RDV_HRW) {
        PyErr_Format(PyExc_ValueError,
                     "the %s layout scores the key's bytes, not a hash: use get_target_node",
                     rdv_layouts[self->layout].name);
        return NULL;
    }
    uint64_t h;
    if (parse_hash_arg(hash, 64, "hrw", &h) < 0)
        return NULL;
    uint32_t winner;
    if (chash_rdv_lookup_hash(self->set, h, &winner) != CHASH_OK)
        Py_RETURN_NONE;
    return Py_NewRef(PyTuple_GET_ITEM(self->nodes, (Py_ssize_t)winner));
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
        if (rdv_key_view_of(self->layout, PySequence_Fast_GET_ITEM(seq, i), &v) < 0) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, owner_of(self, &v));
        rdv_key_view_release(&v);
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
    if (parse_count(args[1], &want) < 0 || rdv_key_view_of(self->layout, args[0], &v) < 0)
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
        if (rdv_key_view_of(self->layout, PySequence_Fast_GET_ITEM(seq, i), &v) < 0) {
            failed = 1;
            break;
        }
        uint32_t winner;
        /* The key's bytes are read: no Python code ran since n was taken
         * except a bytes subclass's __str__ (pymemcache), which may have
         * changed the router: count only what fits. */
        if (chash_rdv_lookup(self->set, v.buf, (size_t)v.len, &winner) == CHASH_OK && winner < n)
            counts[winner]++;
        rdv_key_view_release(&v);
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
    if (list && !rdv_layouts[self->layout].ordered && PyList_Sort(list) < 0)
        Py_CLEAR(list);
    return list;
}

static PyObject *rdv_fingerprint(RendezvousObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *list = canonical_nodes(self);
    if (!list)
        return NULL;
    PyObject *text = PyUnicode_FromFormat("rendezvous|%s|%s", rdv_layouts[self->layout].name,
                                          rdv_layouts[self->layout].hash);
    for (Py_ssize_t i = 0; text && i < PyList_GET_SIZE(list); i++) {
        PyObject *node = PyList_GET_ITEM(list, i);
        Py_ssize_t at = rdv_position_of(self, node);
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
        ok = PyUnicode_CheckExact(node) && rdv_position_of(self, node) == (Py_ssize_t)k;
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
        result = Py_BuildValue("(O(sO))", rebuild, rdv_layouts[self->layout].name, pairs);
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
    return PyUnicode_FromString(rdv_layouts[self->layout].hash);
}

/* hrw's weights are real, squid's whole; pymemcache and caddy have none. */
static PyObject *get_weight_rule(RendezvousObject *self, void *Py_UNUSED(closure))
{
    const char *name = rdv_layouts[self->layout].name;
    const char *rule = strcmp(name, "hrw") == 0 ? "real" : strcmp(name, "squid") == 0 ? "whole" : "none";
    return PyUnicode_FromString(rule);
}

static PyObject *get_layout(RendezvousObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(rdv_layouts[self->layout].name);
}

/* ------------------------------------------------------------------ */
/* Protocols                                                          */

static Py_ssize_t rdv_len(RendezvousObject *self)
{
    return PyTuple_GET_SIZE(self->nodes);
}

static int rdv_contains(RendezvousObject *self, PyObject *node)
{
    Py_ssize_t at = rdv_position_of(self, node);
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
                                          rdv_layouts[self->layout].name, rdv_layouts[self->layout].hash,
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
    if (equal == 1 && rdv_layouts[x->layout].ordered)
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
"that order, in one rebuild.");

static PyMethodDef rdv_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))rdv_add, METH_VARARGS | METH_KEYWORDS, add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))rdv_add_many, METH_VARARGS | METH_KEYWORDS,
     add_many_doc},
    {"remove_service_node", (PyCFunction)rdv_remove, METH_O, remove_doc},
    {"discard_service_node", (PyCFunction)rdv_discard, METH_O, discard_doc},
    {"get_target_node", (PyCFunction)rdv_get, METH_O, get_doc},
    {"get_target_nodes", (PyCFunction)rdv_get_many, METH_O, get_many_doc},
    {"get_target_node_by_hash", (PyCFunction)rdv_get_by_hash, METH_O, get_by_hash_doc},
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
    {"weight_rule", (getter)get_weight_rule, NULL, WEIGHT_RULE_DOC, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

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
