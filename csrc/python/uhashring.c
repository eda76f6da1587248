/*
 * uhashring.c - chash._chash._UHashRing, the ring behind
 * chash.compat.uhashring.HashRing: uhashring's two continuums, point for
 * point, with its lookups, builds, adds and removes in C.
 *
 * Two modes, as uhashring has two runtimes:
 *
 * - md5 (uhashring's MetaRing): a node named n has the points
 *   int(md5(f"{n}-{i}").hexdigest(), 16), 128-bit, for i < its count; a
 *   key hashes as md5(str(key)).  The 128-bit value is held as (hi, lo),
 *   its big-endian halves: points are sorted by hi, an equal hi decided
 *   by lo, so the order is the 128-bit order without 128-bit arithmetic.
 *   A value two nodes share has one owner, the node that wrote it last
 *   (uhashring keeps a dict of point -> node); a node's points are
 *   replaced whole when it is set again, and dropping a node drops the
 *   points it owns, so a point another node lost to it goes too.
 * - ketama (uhashring's KetamaRing): the points of f"{n}-{w}" are the
 *   four little-endian 32-bit words of its MD5 (the first `replicas`);
 *   the whole continuum is rebuilt on every change, from the node list
 *   the caller passes.  A value met twice stays twice in the sorted
 *   points (uhashring inserts every value in its key list), both owned
 *   by the node that wrote it last.
 *
 * The points, their successor rule (the first point strictly greater than
 * the key's hash, wrapping), their bucket index and every change to them
 * are the engine's (engine/ring128.h); this file holds them for Python.
 * Each point carries a sequence number, the order it first entered the
 * continuum, so `ring` (a dict in uhashring) lists values in the order
 * uhashring's dict would.
 *
 * State: the sorted points and a bucket index over them (a change merges
 * into a spare array whose room, like the index's, is reserved first, then
 * swaps it in, so a failed call leaves the ring as it was), the node names
 * (strong references, a slot each), a dict name -> slot, and `_nodes`, the
 * caller's dict of node configurations, read by the lookups that return
 * one; and get_bounded's view, made by its first call after a change:
 * each slot's weight (read from its configuration) and the names indexed
 * by address and str value (node_index.h), so that each entry of the
 * caller's loads costs one probe.  Everything is plain arrays and dicts,
 * copied whole by copying each.
 * The GIL serialises calls (the module keeps it enabled); no call reaches
 * back into Python while the arrays are being changed (names are formatted
 * and slots looked up before; a change that ran Python code checks the
 * ring's change counter first and refuses when that code changed it).
 */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "engine/alloc.h"
#include "engine/ring128.h"
#include "node_index.h"
#include "uhashring.h"

#include <math.h>

typedef struct {
    PyObject_HEAD
    int ketama;         /* 0: 128-bit md5 points; 1: ketama's 32-bit points */
    chash_r128_point *pts;      /* sorted by (hi, lo, seq); room for cap */
    size_t n, cap;
    chash_r128_point *spare;    /* room for spare_cap: where a change merges into, then swapped in */
    size_t spare_cap;
    size_t unique;      /* distinct values among pts (ketama keeps repeats) */
    /* The bucket index, remade from pts after every change (uh_refresh):
     * index[b] is the first point whose top ibits bits are >= b, for
     * b <= 2**ibits (room for index_cap), so a lookup reads one bucket. */
    uint32_t *index;
    size_t index_cap;
    int ibits;
    PyObject **names;   /* slot -> node name, strong references */
    size_t nnodes, names_cap;
    PyObject *slots;    /* dict: name -> slot (int) */
    PyObject *nodes;    /* the caller's dict: name -> configuration dict */
    PyObject *instance; /* the str "instance", the key get_node_instance reads */
    PyObject *weight;   /* the str "weight", the key get_bounded's view reads */
    uint64_t next_seq;
    uint64_t changes;   /* bumped by every change: a call that ran Python code
                         * (a name's __format__, __hash__ or __eq__) checks it
                         * before it changes anything */
    /* get_bounded's view of the nodes (uh_bounded_view), made by its first
     * call after a change: each slot's weight (its configuration's
     * "weight"), their sum, and the names by address and str value. */
    double *weights;
    double weight_sum;
    NodeIndex *names_index; /* NODE_INDEX_NONE: some name is not a str */
    uint64_t view_at;   /* changes when the view was made (weights not NULL) */
} UHashRingObject;

/* RuntimeError when the ring changed since `before` (Python code a call ran
 * changed it); 0 or -1. */
static int uh_unchanged(const UHashRingObject *self, uint64_t before)
{
    if (self->changes == before)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "the ring changed during the call");
    return -1;
}


static int uh_traverse(UHashRingObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    for (size_t i = 0; i < self->nnodes; i++)
        Py_VISIT(self->names[i]);
    Py_VISIT(self->slots);
    Py_VISIT(self->nodes);
    return 0;
}

static void uh_drop_names(UHashRingObject *self)
{
    PyObject **names = self->names;
    size_t n = self->nnodes;
    self->names = NULL;
    self->nnodes = self->names_cap = 0;
    for (size_t i = 0; i < n; i++)
        Py_DECREF(names[i]);
    CHASH_FREE(names);
}

/* Drops get_bounded's view (it borrows the names). */
static void uh_drop_view(UHashRingObject *self)
{
    node_index_free(self->names_index);
    CHASH_FREE(self->weights);
    self->names_index = NULL;
    self->weights = NULL;
}

static int uh_clear(UHashRingObject *self)
{
    uh_drop_view(self);
    uh_drop_names(self);
    CHASH_FREE(self->pts);
    CHASH_FREE(self->spare);
    CHASH_FREE(self->index);
    self->pts = self->spare = NULL;
    self->index = NULL;
    self->n = self->cap = self->spare_cap = self->index_cap = self->unique = 0;
    Py_CLEAR(self->slots);
    Py_CLEAR(self->nodes);
    Py_CLEAR(self->instance);
    Py_CLEAR(self->weight);
    return 0;
}

static void uh_dealloc(UHashRingObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    uh_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *uh_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    UHashRingObject *self = (UHashRingObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->slots = PyDict_New();
    self->nodes = PyDict_New();
    self->instance = PyUnicode_InternFromString("instance");
    self->weight = PyUnicode_InternFromString("weight");
    if (!self->slots || !self->nodes || !self->instance || !self->weight) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* The digest of str(key) as UTF-8 (uhashring's key hash); 0 or -1. */
static int uh_key_digest(PyObject *key, uint8_t out[CHASH_MD5_DIGEST_SIZE])
{
    PyObject *text = PyUnicode_CheckExact(key) ? Py_NewRef(key) : PyObject_Str(key);
    if (!text)
        return -1;
    Py_ssize_t len;
    const char *buf = PyUnicode_AsUTF8AndSize(text, &len);
    if (!buf) {
        Py_DECREF(text);
        return -1;
    }
    chash_md5(buf, (size_t)len, out);
    Py_DECREF(text);
    return 0;
}

/* The successor of key's hash; -1 with an exception, -2 when empty. */
static Py_ssize_t uh_locate(UHashRingObject *self, PyObject *key)
{
    uint8_t dig[CHASH_MD5_DIGEST_SIZE];
    if (uh_key_digest(key, dig) < 0)
        return -1;
    if (self->n == 0)
        return -2;
    uint64_t hi, lo;
    chash_r128_key(dig, self->ketama, &hi, &lo);
    size_t b = chash_r128_bucket(hi, self->ketama, self->ibits);
    return (Py_ssize_t)chash_r128_successor(self->pts, self->n, self->index[b], self->index[b + 1], hi, lo);
}

static PyObject *uh_value(const UHashRingObject *self, const chash_r128_point *p)
{
    if (self->ketama)
        return PyLong_FromUnsignedLongLong(p->hi);
    PyObject *hi = PyLong_FromUnsignedLongLong(p->hi);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *lo = PyLong_FromUnsignedLongLong(p->lo);
    PyObject *up = hi && shift ? PyNumber_Lshift(hi, shift) : NULL;
    PyObject *v = up && lo ? PyNumber_Or(up, lo) : NULL;
    Py_XDECREF(hi);
    Py_XDECREF(shift);
    Py_XDECREF(lo);
    Py_XDECREF(up);
    return v;
}

PyDoc_STRVAR(uh_get_node_doc,
"get_node($self, key, /)\n--\n\n"
"The name of the node key maps to, or None when the ring is empty.");

static PyObject *uh_get_node(UHashRingObject *self, PyObject *key)
{
    Py_ssize_t pos = uh_locate(self, key);
    if (pos == -1)
        return NULL;
    if (pos == -2)
        Py_RETURN_NONE;
    return Py_NewRef(self->names[self->pts[pos].owner]);
}

/* The configuration dict of the node key maps to (a new reference),
 * Py_None (new) when the ring is empty, NULL with an exception.  The name
 * is held while the dict compares it (its __eq__ may run Python code). */
static PyObject *uh_conf_of(UHashRingObject *self, PyObject *key)
{
    Py_ssize_t pos = uh_locate(self, key);
    if (pos == -1)
        return NULL;
    if (pos == -2)
        Py_RETURN_NONE;
    PyObject *name = Py_NewRef(self->names[self->pts[pos].owner]);
    PyObject *conf = PyDict_GetItemWithError(self->nodes, name);
    if (conf)
        Py_INCREF(conf);
    else if (!PyErr_Occurred())
        PyErr_SetObject(PyExc_KeyError, name);
    Py_DECREF(name);
    return conf;
}

PyDoc_STRVAR(uh_get_doc,
"get($self, key, /)\n--\n\n"
"The configuration dict of the node key maps to, or None when the ring\n"
"is empty.");

static PyObject *uh_get(UHashRingObject *self, PyObject *key)
{
    return uh_conf_of(self, key);
}

PyDoc_STRVAR(uh_instance_doc,
"get_node_instance($self, key, /)\n--\n\n"
"The instance of the node key maps to (its configuration's \"instance\"),\n"
"or None when the ring is empty.");

static PyObject *uh_instance(UHashRingObject *self, PyObject *key)
{
    PyObject *conf = uh_conf_of(self, key);
    if (!conf || conf == Py_None)
        return conf;
    PyObject *instance = PyObject_GetItem(conf, self->instance);
    Py_DECREF(conf);
    return instance;
}

PyDoc_STRVAR(uh_lookup_doc,
"_lookup($self, key, /)\n--\n\n"
"(position, point, node name) of the point key maps to, or None when the\n"
"ring is empty.");

static PyObject *uh_lookup(UHashRingObject *self, PyObject *key)
{
    Py_ssize_t pos = uh_locate(self, key);
    if (pos == -1)
        return NULL;
    if (pos == -2)
        Py_RETURN_NONE;
    const chash_r128_point *p = &self->pts[pos];
    PyObject *value = uh_value(self, p);
    if (!value)
        return NULL;
    return Py_BuildValue("(nNO)", pos, value, self->names[p->owner]);
}

PyDoc_STRVAR(uh_walk_doc,
"_walk($self, key, unique, /)\n--\n\n"
"The owners of the points from key's successor on, once round the ring:\n"
"each node once when unique, else one name a point.");

static PyObject *uh_walk(UHashRingObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_walk takes key and unique");
        return NULL;
    }
    int unique = PyObject_IsTrue(args[1]);
    if (unique < 0)
        return NULL;
    Py_ssize_t pos = uh_locate(self, args[0]);
    if (pos == -1)
        return NULL;
    PyObject *out = PyList_New(0);
    if (!out || pos == -2)
        return out;
    unsigned char *seen = unique ? CHASH_MALLOC(self->nnodes ? self->nnodes : 1) : NULL;
    if (unique && !seen) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    if (seen)
        memset(seen, 0, self->nnodes);
    size_t found = 0;
    for (size_t k = 0; k < self->n; k++) {
        uint32_t owner = self->pts[((size_t)pos + k) % self->n].owner;
        if (unique) {
            if (seen[owner])
                continue;
            seen[owner] = 1;
        }
        if (PyList_Append(out, self->names[owner]) < 0) {
            CHASH_FREE(seen);
            Py_DECREF(out);
            return NULL;
        }
        if (unique && ++found == self->nnodes)
            break;
    }
    CHASH_FREE(seen);
    return out;
}

PyDoc_STRVAR(chash_r128_points_doc,
"_points($self, /)\n--\n\n"
"The (point, node name) pairs in ring order, a repeated value as often as\n"
"it is held.");

static PyObject *chash_r128_points(UHashRingObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New((Py_ssize_t)self->n);
    for (size_t i = 0; out && i < self->n; i++) {
        PyObject *value = uh_value(self, &self->pts[i]);
        PyObject *pair = value ? PyTuple_Pack(2, value, self->names[self->pts[i].owner]) : NULL;
        Py_XDECREF(value);
        if (!pair)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)i, pair);
    }
    return out;
}

static int seq_order(const void *a, const void *b)
{
    uint64_t x = (*(chash_r128_point *const *)a)->seq, y = (*(chash_r128_point *const *)b)->seq;
    return (x > y) - (x < y);
}

PyDoc_STRVAR(uh_continuum_doc,
"_continuum($self, /)\n--\n\n"
"A new dict point -> node name, each distinct point once, in the order the\n"
"points entered the ring.");

static PyObject *uh_continuum(UHashRingObject *self, PyObject *Py_UNUSED(ignored))
{
    /* The first entry of each run of equal values carries its smallest seq. */
    chash_r128_point **first = CHASH_MALLOC((self->unique ? self->unique : 1) * sizeof *first);
    if (!first)
        return PyErr_NoMemory();
    size_t u = 0;
    for (size_t i = 0; i < self->n; i++)
        if (i == 0 || self->pts[i].hi != self->pts[i - 1].hi || self->pts[i].lo != self->pts[i - 1].lo)
            first[u++] = &self->pts[i];
    qsort(first, u, sizeof *first, seq_order);
    PyObject *out = PyDict_New();
    for (size_t i = 0; out && i < u; i++) {
        PyObject *value = uh_value(self, first[i]);
        if (!value || PyDict_SetItem(out, value, self->names[first[i]->owner]) < 0)
            Py_CLEAR(out);
        Py_XDECREF(value);
    }
    CHASH_FREE(first);
    return out;
}

PyDoc_STRVAR(uh_size_doc,
"_size($self, /)\n--\n\n"
"How many distinct points the ring holds.");

static PyObject *uh_size(UHashRingObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSize_t(self->unique);
}

/* f"{name}-" as UTF-8 into a new bytes object; NULL with an exception. */
static PyObject *uh_prefix(PyObject *name)
{
    PyObject *text = PyObject_Format(name, NULL);
    if (!text)
        return NULL;
    PyObject *prefix = PyUnicode_FromFormat("%U-", text);
    Py_DECREF(text);
    if (!prefix)
        return NULL;
    PyObject *bytes = PyUnicode_AsUTF8String(prefix);
    Py_DECREF(prefix);
    return bytes;
}

/* A point count from a Python int: 0 for a negative one (an empty range,
 * as uhashring's range() is).  -1 with an exception. */
static int uh_count(PyObject *obj, size_t *count)
{
    Py_ssize_t v = PyLong_AsSsize_t(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *count = v < 0 ? 0 : (size_t)v;
    if (*count > CHASH_R128_MAX_NODE_POINTS) {
        PyErr_SetString(PyExc_ValueError, "too many points for one node: at most 2**26");
        return -1;
    }
    return 0;
}

/* Grows *buf to room for need items of size bytes (its contents kept);
 * 0, or -1 with *buf as it was. */
static int uh_grow(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t want = need + need / 4 + 16;
    void *grown = CHASH_REALLOC(*buf, want * size);
    if (!grown)
        return -1;
    *buf = grown;
    *cap = want;
    return 0;
}

/*
 * Room for a ring of n points in everything a change writes: what a
 * lookup reads and, when merge, the spare point array the change merges
 * into.  Called before a change, so that once it starts nothing can fail.
 * 0, or -1 with MemoryError (the ring as it was; some arrays may have
 * grown).
 */
static int uh_reserve(UHashRingObject *self, size_t n, int merge)
{
    size_t buckets = ((size_t)1 << chash_r128_index_bits(n)) + 1;
    if ((merge && uh_grow((void **)&self->spare, &self->spare_cap, n, sizeof(chash_r128_point)) < 0)
        || uh_grow((void **)&self->index, &self->index_cap, buckets, sizeof(uint32_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Rewrites the bucket index from the points (room reserved). */
static void uh_refresh(UHashRingObject *self)
{
    self->ibits = chash_r128_index_bits(self->n);
    chash_r128_index(self->pts, self->n, self->ketama, self->ibits, self->index);
}

/* Swaps the spare array, holding n points of which unique distinct, in
 * as the points; the old points become the spare. */
static void uh_swap_in(UHashRingObject *self, size_t n, size_t unique)
{
    chash_r128_point *old = self->pts;
    size_t old_cap = self->cap;
    self->pts = self->spare;
    self->cap = self->spare_cap;
    self->spare = old;
    self->spare_cap = old_cap;
    self->n = n;
    self->unique = unique;
    uh_refresh(self);
}

/* Room for one more name; 0 or -1 (MemoryError). */
static int uh_reserve_name(UHashRingObject *self)
{
    if (self->nnodes < self->names_cap)
        return 0;
    size_t cap = self->names_cap ? 2 * self->names_cap : 8;
    PyObject **names = CHASH_REALLOC(self->names, cap * sizeof *names);
    if (!names) {
        PyErr_NoMemory();
        return -1;
    }
    self->names = names;
    self->names_cap = cap;
    return 0;
}

/* The slot of name, -1 when it has none, -2 with an exception. */
static Py_ssize_t uh_slot(UHashRingObject *self, PyObject *name)
{
    /* A strong reference: a name's __eq__ may let another thread change
     * the slots meanwhile. */
    PyObject *slot;
    int found = chash_py_dict_get_ref(self->slots, name, &slot);
    if (found <= 0)
        return found < 0 ? -2 : -1;
    Py_ssize_t at = PyLong_AsSsize_t(slot);
    Py_DECREF(slot);
    return at;
}

PyDoc_STRVAR(uh_set_node_doc,
"_set_node($self, name, count, /)\n--\n\n"
"md5 mode: replace the points of name (a new node, or one set again) with\n"
"its first count points; a value another node holds becomes name's.");

static PyObject *uh_set_node(UHashRingObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_set_node takes name and count");
        return NULL;
    }
    PyObject *name = args[0];
    uint64_t before = self->changes;
    size_t count;
    if (uh_count(args[1], &count) < 0)
        return NULL;
    Py_ssize_t slot = uh_slot(self, name);
    if (slot == -2)
        return NULL;
    PyObject *prefix = uh_prefix(name);
    if (!prefix)
        return NULL;
    int fresh = slot == -1;
    PyObject *slot_obj = NULL;
    if (fresh) {
        if (self->nnodes >= UINT32_MAX || uh_reserve_name(self) < 0
            || !(slot_obj = PyLong_FromSize_t(self->nnodes))) {
            Py_DECREF(prefix);
            return self->nnodes >= UINT32_MAX ? PyErr_Format(PyExc_ValueError, "too many nodes")
                                              : NULL;
        }
        slot = (Py_ssize_t)self->nnodes;
    }
    chash_r128_point *add = CHASH_MALLOC((count ? count : 1) * sizeof *add);
    uint64_t seq = self->next_seq;
    if (!add
        || chash_r128_node_points_wide(PyBytes_AS_STRING(prefix), (size_t)PyBytes_GET_SIZE(prefix), count, 0,
                                  1, (uint32_t)slot, &seq, add) < 0
        || chash_r128_sort(add, count, 32, NULL) < 0) {
        CHASH_FREE(add);
        Py_DECREF(prefix);
        Py_XDECREF(slot_obj);
        return PyErr_NoMemory();
    }
    Py_DECREF(prefix);
    if (uh_reserve(self, self->n + count, 1) < 0 || uh_unchanged(self, before) < 0
        || (fresh && PyDict_SetItem(self->slots, name, slot_obj) < 0)) {
        CHASH_FREE(add);
        Py_XDECREF(slot_obj);
        return NULL;
    }
    chash_r128_point *out = self->spare;
    Py_XDECREF(slot_obj);
    /* No Python from here on: merge the others' points with the new ones. */
    size_t m = chash_r128_merge(self->pts, self->n, add, count, (uint32_t)slot, out);
    CHASH_FREE(add);
    self->next_seq = seq;
    if (fresh)
        self->names[self->nnodes++] = Py_NewRef(name);
    uh_swap_in(self, m, m); /* md5 mode: every value once */
    self->changes++;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(uh_remove_doc,
"_remove($self, name, /)\n--\n\n"
"md5 mode: drop name and every point it owns; KeyError when it has none.");

static PyObject *uh_remove(UHashRingObject *self, PyObject *name)
{
    uint64_t before = self->changes;
    Py_ssize_t slot = uh_slot(self, name);
    if (slot == -2)
        return NULL;
    if (slot == -1)
        return chash_py_error(CHASH_ENOENT, name, NULL);
    if (uh_unchanged(self, before) < 0)
        return NULL;
    self->changes++;
    uint32_t last = (uint32_t)(self->nnodes - 1);
    PyObject *moved = NULL;
    if ((uint32_t)slot != last) {
        moved = PyLong_FromSsize_t(slot);
        if (!moved || PyDict_SetItem(self->slots, self->names[last], moved) < 0) {
            Py_XDECREF(moved);
            return NULL;
        }
        Py_DECREF(moved);
    }
    if (PyDict_DelItem(self->slots, name) < 0)
        return NULL;
    size_t m = chash_r128_drop(self->pts, self->n, (uint32_t)slot, last);
    self->n = m;
    self->unique = m; /* md5 mode: every value once */
    uh_refresh(self);  /* fewer points: the room reserved for more suffices */
    PyObject *gone = self->names[slot];
    self->names[slot] = self->names[last];
    self->nnodes--;
    Py_DECREF(gone);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(uh_build_doc,
"_build($self, nodes, ketama, replicas, /)\n--\n\n"
"Replace the whole ring with nodes, a sequence of (name, count) in order:\n"
"md5 points (count a node) when ketama is false, as if each were set in\n"
"turn on an empty ring; else ketama's, count * replicas points a node.");

static PyObject *uh_build(UHashRingObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_build takes nodes, ketama and replicas");
        return NULL;
    }
    int ketama = PyObject_IsTrue(args[1]);
    if (ketama < 0)
        return NULL;
    long replicas = PyLong_AsLong(args[2]);
    if (replicas == -1 && PyErr_Occurred())
        return NULL;
    if (ketama && (replicas < 0 || replicas > 4)) {
        PyErr_SetString(PyExc_ValueError, "replicas must be between 0 and 4");
        return NULL;
    }
    /* A tuple: the names' __format__ may change the caller's list. */
    PyObject *items = PySequence_Tuple(args[0]);
    if (!items)
        return NULL;
    uint64_t before = self->changes;
    Py_ssize_t nn = PyTuple_GET_SIZE(items);
    size_t per = ketama ? (size_t)replicas : 1;
    PyObject *slots = PyDict_New();
    PyObject **names = CHASH_MALLOC((nn ? (size_t)nn : 1) * sizeof *names);
    PyObject **prefixes = CHASH_MALLOC((nn ? (size_t)nn : 1) * sizeof *prefixes);
    size_t *counts = CHASH_MALLOC((nn ? (size_t)nn : 1) * sizeof *counts);
    Py_ssize_t made = 0;
    size_t total = 0;
    chash_r128_point *pts = NULL;
    if (!slots || !names || !prefixes || !counts) {
        PyErr_NoMemory();
        goto fail;
    }
    for (; made < nn; made++) {
        PyObject *item = PyTuple_GET_ITEM(items, made);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "nodes must be a sequence of (name, count)");
            goto fail;
        }
        PyObject *slot = PyLong_FromSsize_t(made);
        int bad = !slot || PyDict_SetItem(slots, PyTuple_GET_ITEM(item, 0), slot) < 0;
        Py_XDECREF(slot);
        if (bad || uh_count(PyTuple_GET_ITEM(item, 1), &counts[made]) < 0)
            goto fail;
        if (PyDict_GET_SIZE(slots) != made + 1) {
            PyErr_SetString(PyExc_ValueError, "a node is named twice");
            goto fail;
        }
        prefixes[made] = uh_prefix(PyTuple_GET_ITEM(item, 0));
        if (!prefixes[made])
            goto fail;
        names[made] = Py_NewRef(PyTuple_GET_ITEM(item, 0));
        total += counts[made] * per;
    }
    pts = CHASH_MALLOC((total ? total : 1) * sizeof *pts);
    if (!pts) {
        PyErr_NoMemory();
        goto fail;
    }
    uint64_t seq = self->next_seq;
    size_t at = 0;
    for (Py_ssize_t k = 0; k < nn; k++) {
        if (chash_r128_node_points_wide(PyBytes_AS_STRING(prefixes[k]),
                                        (size_t)PyBytes_GET_SIZE(prefixes[k]), counts[k], ketama,
                                        (int)replicas, (uint32_t)k, &seq, pts + at) < 0) {
            PyErr_NoMemory();
            goto fail;
        }
        at += counts[k] * per;
    }
    /* The spare array (room reserved, contents free) is the sort's scratch. */
    if (uh_reserve(self, total, 1) < 0 || uh_unchanged(self, before) < 0)
        goto fail;
    chash_r128_sort(pts, total, ketama ? 0 : 32, self->spare);
    /* A value written more than once: owned by its last writer, placed by
     * its first; md5 mode keeps it once, ketama every time. */
    size_t m = chash_r128_settle(pts, total, ketama);
    /* Nothing can fail from here: swap the new state in. */
    for (Py_ssize_t k = 0; k < nn; k++)
        Py_DECREF(prefixes[k]);
    CHASH_FREE(prefixes);
    CHASH_FREE(counts);
    Py_DECREF(items);
    uh_drop_names(self);
    self->names = names;
    self->nnodes = self->names_cap = (size_t)nn;
    Py_SETREF(self->slots, slots);
    self->ketama = ketama;
    self->next_seq = seq;
    self->changes++;
    CHASH_FREE(self->pts);
    self->pts = pts;
    self->cap = total;
    self->n = m;
    self->unique = ketama ? chash_r128_unique(pts, m) : m;
    uh_refresh(self);
    Py_RETURN_NONE;

fail:
    for (Py_ssize_t k = 0; k < made; k++) {
        Py_DECREF(prefixes[k]);
        Py_DECREF(names[k]);
    }
    CHASH_FREE(pts);
    CHASH_FREE(names);
    CHASH_FREE(prefixes);
    CHASH_FREE(counts);
    Py_XDECREF(slots);
    Py_DECREF(items);
    return NULL;
}

PyDoc_STRVAR(uh_check_doc,
"_check($self, /)\n--\n\n"
"AssertionError when an invariant is broken: points sorted, owners held,\n"
"md5 mode's values distinct, the slots dict naming each slot.");

static PyObject *uh_check(UHashRingObject *self, PyObject *Py_UNUSED(ignored))
{
    int status = chash_r128_check(self->pts, self->n, self->nnodes, self->ketama, self->n ? self->index : NULL,
                                  self->ibits);
    if (status != CHASH_OK || self->unique != chash_r128_unique(self->pts, self->n)
        || (size_t)PyDict_GET_SIZE(self->slots) != self->nnodes)
        return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
    for (size_t k = 0; k < self->nnodes; k++) {
        Py_ssize_t slot = uh_slot(self, self->names[k]);
        if (slot == -2)
            return NULL;
        if (slot != (Py_ssize_t)k)
            return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
    }
    Py_RETURN_NONE;
}

static PyObject *uh_get_nodes_dict(UHashRingObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->nodes);
}

/* ------------------------------------------------------------------ */
/* get_bounded                                                        */

/* The slots in order, each name with its weight (node_index_next). */
static PyObject *uh_next(void *ctx, size_t *at, double *weight)
{
    UHashRingObject *self = ctx;
    if (*at >= self->nnodes)
        return NULL;
    *weight = self->weights[*at];
    return self->names[*at];
}

/* Makes get_bounded's view when the ring changed since the last: each
 * slot's weight read from its configuration (a lookup in the caller's
 * dict, which may run a name's __eq__, and a number's __float__), then the
 * index.  0, or -1 with an exception (the old view dropped). */
static int uh_bounded_view(UHashRingObject *self)
{
    if (self->weights && self->view_at == self->changes)
        return 0;
    uh_drop_view(self);
    uint64_t before = self->changes;
    size_t n = self->nnodes;
    double *weights = CHASH_MALLOC((n ? n : 1) * sizeof *weights);
    if (!weights) {
        PyErr_NoMemory();
        return -1;
    }
    double sum = 0.0;
    for (size_t k = 0; k < n; k++) {
        PyObject *name = Py_NewRef(self->names[k]);
        /* A strong reference: without the GIL another thread may replace
         * the configuration meanwhile. */
        PyObject *conf;
        (void)chash_py_dict_get_ref(self->nodes, name, &conf);
        PyObject *weight = NULL;
        if (conf) {
            weight = PyObject_GetItem(conf, self->weight);
            Py_DECREF(conf);
        } else if (!PyErr_Occurred()) {
            PyErr_SetObject(PyExc_KeyError, name);
        }
        Py_DECREF(name);
        weights[k] = weight ? PyFloat_AsDouble(weight) : -1.0;
        Py_XDECREF(weight);
        if (!weight || (weights[k] == -1.0 && PyErr_Occurred()) || uh_unchanged(self, before) < 0) {
            CHASH_FREE(weights);
            return -1;
        }
        sum += weights[k];
    }
    /* A view another call made while this one ran Python code (a nested
     * get_bounded from a weight's __float__) gives way to this one. */
    uh_drop_view(self);
    self->weights = weights;
    self->weight_sum = sum;
    self->names_index = node_index_make(uh_next, self);
    if (!self->names_index) {
        uh_drop_view(self);
        return -1;
    }
    self->view_at = before;
    return 0;
}

/* TypeError from format: its %R is named (when not NULL), its %U the
 * __name__ of value's type, as HashRing's messages name them. */
static void uh_not_a_number(const char *format, PyObject *named, PyObject *value)
{
    PyObject *type = PyType_GetName(Py_TYPE(value));
    if (!type)
        return;
    if (named)
        PyErr_Format(PyExc_TypeError, format, named, type);
    else
        PyErr_Format(PyExc_TypeError, format, type);
    Py_DECREF(type);
}

/* HashRing's balance factor (a bool refused, as a number): a finite number
 * >= 1, into *out; 0, or -1 with TypeError / ValueError naming it. */
static int uh_balance_factor(PyObject *value, double *out)
{
    if (PyBool_Check(value) || !(PyLong_Check(value) || PyFloat_Check(value))) {
        uh_not_a_number("balance_factor must be a number, not %U", NULL, value);
        return -1;
    }
    double c = PyFloat_Check(value) ? PyFloat_AS_DOUBLE(value) : PyLong_AsDouble(value);
    if (c == -1.0 && PyErr_Occurred())
        return -1;
    if (!(c >= 1.0) || isinf(c)) {
        PyErr_Format(PyExc_ValueError, "balance_factor must be a finite number >= 1, not %R", value);
        return -1;
    }
    *out = c;
    return 0;
}

/* A load as HashRing reads it: an int or float (not a bool), >= 0 and
 * finite, into *out; 0, or -1 with TypeError / ValueError naming node (an
 * int too large for a float is an OverflowError, as float() makes it,
 * unless it is negative). */
static inline int uh_load(PyObject *node, PyObject *value, double *out)
{
    double v;
    if (PyLong_CheckExact(value) && chash_py_small_int(value, out))
        return 0;
    if (PyFloat_CheckExact(value)) {
        v = PyFloat_AS_DOUBLE(value);
    } else if (PyBool_Check(value) || !(PyLong_Check(value) || PyFloat_Check(value))) {
        uh_not_a_number("the load of %R must be a number, not %U", node, value);
        return -1;
    } else if (PyFloat_Check(value)) {
        v = PyFloat_AS_DOUBLE(value);
    } else {
        v = PyLong_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) {
            int overflow = 0;
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return -1;
            (void)PyLong_AsLongLongAndOverflow(value, &overflow);
            if (overflow >= 0)
                return -1; /* too large for a float */
            PyErr_Clear();
            v = -1.0; /* negative: refused below */
        }
    }
    if (!(v >= 0.0) || isinf(v)) {
        PyErr_Format(PyExc_ValueError, "the load of %R must be a finite number >= 0, not %R", node,
                     value);
        return -1;
    }
    *out = v;
    return 0;
}

/* The slot of name among the view's, -1 when the ring has none, -2 with
 * an exception: the index first, the slots dict for a name it cannot
 * answer. */
static Py_ssize_t uh_bounded_slot(UHashRingObject *self, PyObject *name, NodeIndexProbe *probe)
{
    if (self->names_index != NODE_INDEX_NONE) {
        double w;
        size_t at;
        if (node_index_find(self->names_index, name, &w, &at, probe))
            return (Py_ssize_t)at;
        if (!probe->unknown)
            return -1;
    }
    return uh_slot(self, name);
}

/* The loads, read into by_slot (zeroed, a slot each) and summed in the
 * caller's order into *total; 0, or -1 with an exception. */
static int uh_read_loads(UHashRingObject *self, PyObject *loads, double *by_slot, double *total)
{
    uint64_t before = self->changes;
    NodeIndexProbe probe = {0, 0};
    double sum = 0.0;
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    while (PyDict_Next(loads, &pos, &name, &value)) {
        Py_ssize_t slot = uh_bounded_slot(self, name, &probe);
        if (slot == -2 || uh_unchanged(self, before) < 0)
            return -1;
        if (slot < 0)
            continue;
        double v;
        if (uh_load(name, value, &v) < 0)
            return -1;
        by_slot[slot] = v;
        sum += v;
    }
    *total = sum;
    return 0;
}

/* The node of the first slot from point pos on, once round the ring,
 * whose load is below its bound (HashRing.get_bounded's rule, with T =
 * slots); the owner at pos when none is. */
static PyObject *uh_bounded_walk(UHashRingObject *self, size_t pos, const double *by_slot,
                                 double slots, unsigned char *seen)
{
    uint32_t first = self->pts[pos].owner;
    size_t found = 0;
    for (size_t k = 0; k < self->n && found < self->nnodes; k++) {
        uint32_t owner = self->pts[(pos + k) % self->n].owner;
        if (seen[owner])
            continue;
        seen[owner] = 1;
        found++;
        double bound = 1.0;
        if (self->weight_sum > 0.0) {
            bound = ceil(slots * self->weights[owner] / self->weight_sum);
            if (bound < 1.0)
                bound = 1.0;
        }
        if (by_slot[owner] < bound)
            return Py_NewRef(self->names[owner]);
    }
    return Py_NewRef(self->names[first]);
}

/* Up to this many slots, a call's arrays are on its stack. */
#define UH_STACK_SLOTS 256

/* One attempt at get_bounded over dict (the caller's loads, or a private
 * copy of them), under the ring's critical section: the view, the loads,
 * the key's point, the walk.  NULL with an exception, *changed set when the
 * ring changed meanwhile (Python code the attempt ran let a change in:
 * another thread's, or its own). */
static PyObject *uh_get_bounded_once(UHashRingObject *self, PyObject *key, PyObject *dict,
                                     double c, int *changed)
{
    uint64_t start = self->changes;
    *changed = 0;
    if (uh_bounded_view(self) < 0) {
        *changed = self->changes != start;
        return NULL;
    }
    size_t n = self->nnodes;
    double stack_loads[UH_STACK_SLOTS];
    unsigned char stack_seen[UH_STACK_SLOTS];
    double *by_slot = n <= UH_STACK_SLOTS ? stack_loads : CHASH_MALLOC(n * sizeof *by_slot);
    unsigned char *seen = n <= UH_STACK_SLOTS ? stack_seen : CHASH_MALLOC(n);
    PyObject *result = NULL;
    if (!by_slot || !seen) {
        PyErr_NoMemory();
        goto done;
    }
    memset(by_slot, 0, n * sizeof *by_slot);
    memset(seen, 0, n);
    double total;
    if (uh_read_loads(self, dict, by_slot, &total) < 0)
        goto done;
    Py_ssize_t pos = uh_locate(self, key); /* str(key) may run Python code */
    if (pos == -1 || uh_unchanged(self, start) < 0)
        goto done;
    if (pos == -2) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    double slots = ceil(c * (total + 1.0));
    if (!isfinite(slots)) {
        PyErr_SetString(PyExc_OverflowError, "cannot convert float infinity to integer");
        goto done;
    }
    result = uh_bounded_walk(self, (size_t)pos, by_slot, slots, seen);
done:
    if (by_slot != stack_loads)
        CHASH_FREE(by_slot);
    if (seen != stack_seen)
        CHASH_FREE(seen);
    if (!result)
        *changed = self->changes != start;
    return result;
}

/* How many times get_bounded starts again when the ring changed during an
 * attempt before it gives up with RuntimeError: a change made by another
 * thread at that moment is a rare race; one made by the call's own Python
 * code every time would never end. */
#define UH_BOUNDED_ATTEMPTS 4

/* get_bounded: the factor checked and the loads made a dict before the
 * ring's lock is taken (another mapping's items() is Python code; without
 * the GIL, a dict is copied, since iterating the caller's dict needs its
 * lock, which taken inside the ring's could let the ring's go), then the
 * attempts. */
static PyObject *uh_get_bounded(PyObject *self, PyObject *key, PyObject *loads, PyObject *factor)
{
    double c = 1.25;
    if (factor && uh_balance_factor(factor, &c) < 0)
        return NULL;
    PyObject *dict;
    if (PyDict_Check(loads)) {
#ifdef Py_GIL_DISABLED
        dict = PyDict_Copy(loads);
#else
        dict = Py_NewRef(loads);
#endif
    } else {
        /* Another mapping: its items() once, as HashRing reads it. */
        PyObject *items = PyObject_CallMethod(loads, "items", NULL);
        dict = items ? PyDict_New() : NULL;
        if (dict && PyDict_MergeFromSeq2(dict, items, 1) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(items);
    }
    if (!dict)
        return NULL;
    PyObject *result = NULL;
    for (int attempt = 1;; attempt++) {
        int changed;
        CHASH_LOCKED(self, result = uh_get_bounded_once((UHashRingObject *)self, key, dict, c,
                                                       &changed));
        if (result || !changed || attempt == UH_BOUNDED_ATTEMPTS)
            break;
        PyErr_Clear();
    }
    Py_DECREF(dict);
    return result;
}

PyDoc_STRVAR(uh_get_bounded_doc,
"get_bounded($self, /, key, loads, balance_factor=1.25)\n--\n\n"
"The node for key under the loads the caller tracks: the first node\n"
"along the ring from key (iterate_nodes' order) whose load is below its\n"
"bound, None when the ring is empty.\n\n"
"loads maps node name -> current load (a finite int or float >= 0); a\n"
"node missing from it has load 0, an entry for a node the ring does not\n"
"hold is ignored (in the sum too).  With t the sum of the loads,\n"
"T = ceil(balance_factor * (t + 1)) and a node of weight w of W may hold\n"
"max(ceil(T * w / W), 1): the rule of chash.BoundedLoadRouter.  With\n"
"every load 0 the answer is get_node(key).  Stateless: nothing is\n"
"acquired or released.  ValueError for a negative, infinite or NaN load\n"
"or a balance factor below 1, TypeError for one that is not a number,\n"
"each naming it.  A node's weight is its configuration's \"weight\" as the\n"
"ring last changed (read once a change, with the names indexed, so each\n"
"entry of loads costs one probe).");

/* get_bounded(key, loads, balance_factor=1.25), each by position or name. */
static PyObject *uh_get_bounded_locked(PyObject *self, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames)
{
    static const char *const names[] = {"key", "loads", "balance_factor"};
    PyObject *given[3] = {NULL, NULL, NULL};
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs > 3) {
        PyErr_Format(PyExc_TypeError, "get_bounded() takes at most 3 arguments (%zd given)", nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        given[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, i);
        int k = 0;
        while (k < 3 && PyUnicode_CompareWithASCIIString(kw, names[k]) != 0)
            k++;
        if (k == 3) {
            PyErr_Format(PyExc_TypeError, "get_bounded() got an unexpected keyword argument %R", kw);
            return NULL;
        }
        if (given[k]) {
            PyErr_Format(PyExc_TypeError, "get_bounded() got multiple values for argument '%s'",
                         names[k]);
            return NULL;
        }
        given[k] = args[nargs + i];
    }
    for (int k = 0; k < 2; k++) {
        if (!given[k]) {
            PyErr_Format(PyExc_TypeError, "get_bounded() missing required argument '%s'", names[k]);
            return NULL;
        }
    }
    return uh_get_bounded(self, given[0], given[1], given[2]);
}

/* Every method under the ring's critical section (binding.h's
 * CHASH_LOCKED; the GIL before 3.13): on a free-threaded build one call at
 * a time reads or changes a ring, so a lookup never meets a change half
 * made and the spare arrays a change merges into are never shared.  A
 * name's Python code run inside a change may let the section go; the
 * change then finds the ring changed and refuses (uh_unchanged). */
#define UH_LOCKED_O(fn)                                                                   \
    static PyObject *fn##_locked(PyObject *self, PyObject *arg)                           \
    {                                                                                     \
        PyObject *result;                                                                 \
        CHASH_LOCKED(self, result = fn((UHashRingObject *)self, arg));                    \
        return result;                                                                    \
    }
#define UH_LOCKED_FAST(fn)                                                                \
    static PyObject *fn##_locked(PyObject *self, PyObject *const *args, Py_ssize_t nargs) \
    {                                                                                     \
        PyObject *result;                                                                 \
        CHASH_LOCKED(self, result = fn((UHashRingObject *)self, args, nargs));            \
        return result;                                                                    \
    }
UH_LOCKED_O(uh_get_node)
UH_LOCKED_O(uh_get)
UH_LOCKED_O(uh_instance)
UH_LOCKED_O(uh_lookup)
UH_LOCKED_O(uh_remove)
UH_LOCKED_O(chash_r128_points)
UH_LOCKED_O(uh_continuum)
UH_LOCKED_O(uh_size)
UH_LOCKED_O(uh_check)
UH_LOCKED_FAST(uh_walk)
UH_LOCKED_FAST(uh_set_node)
UH_LOCKED_FAST(uh_build)

static PyMethodDef uh_methods[] = {
    {"get_node", (PyCFunction)uh_get_node_locked, METH_O, uh_get_node_doc},
    {"get", (PyCFunction)uh_get_locked, METH_O, uh_get_doc},
    {"get_node_instance", (PyCFunction)uh_instance_locked, METH_O, uh_instance_doc},
    {"_lookup", (PyCFunction)uh_lookup_locked, METH_O, uh_lookup_doc},
    {"_walk", (PyCFunction)(void (*)(void))uh_walk_locked, METH_FASTCALL, uh_walk_doc},
    {"_points", (PyCFunction)chash_r128_points_locked, METH_NOARGS, chash_r128_points_doc},
    {"_continuum", (PyCFunction)uh_continuum_locked, METH_NOARGS, uh_continuum_doc},
    {"_size", (PyCFunction)uh_size_locked, METH_NOARGS, uh_size_doc},
    {"_set_node", (PyCFunction)(void (*)(void))uh_set_node_locked, METH_FASTCALL, uh_set_node_doc},
    {"_remove", (PyCFunction)uh_remove_locked, METH_O, uh_remove_doc},
    {"_build", (PyCFunction)(void (*)(void))uh_build_locked, METH_FASTCALL, uh_build_doc},
    {"_check", (PyCFunction)uh_check_locked, METH_NOARGS, uh_check_doc},
    {"get_bounded", (PyCFunction)(void (*)(void))uh_get_bounded_locked,
     METH_FASTCALL | METH_KEYWORDS, uh_get_bounded_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef uh_getset[] = {
    {"_nodes", (getter)uh_get_nodes_dict, NULL, "The node configurations: name -> dict.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(uh_doc,
"_UHashRing()\n--\n\n"
"The continuum of chash.compat.uhashring.HashRing, in C: uhashring's md5\n"
"or ketama points, lookups, builds, adds and removes.  Private: use\n"
"HashRing.");

static PyType_Slot uh_slots[] = {
    {Py_tp_doc, (void *)uh_doc},
    {Py_tp_new, uh_new},
    {Py_tp_dealloc, uh_dealloc},
    {Py_tp_traverse, uh_traverse},
    {Py_tp_clear, uh_clear},
    {Py_tp_methods, uh_methods},
    {Py_tp_getset, uh_getset},
    {0, NULL},
};

static PyType_Spec uh_spec = {
    .name = "chash._chash._UHashRing",
    .basicsize = sizeof(UHashRingObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .slots = uh_slots,
};

int uhashring_setup(PyObject *module)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &uh_spec, NULL);
    if (!type)
        return -1;
    int status = PyModule_AddType(module, type);
    Py_DECREF(type);
    return status;
}
