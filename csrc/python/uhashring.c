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
 * The successor rule, written once in uh_successor(): the first point
 * strictly greater than the key's hash, wrapping to index 0.
 *
 * Each point carries a sequence number: the order it first entered the
 * continuum, so `ring` (a dict in uhashring) lists values in the order
 * uhashring's dict would.
 *
 * State: the sorted points and a bucket index over them (a change merges
 * into a spare array whose room, like the index's, is reserved first, then
 * swaps it in, so a failed call leaves the ring as it was), the node names
 * (strong references, a slot each), a dict name -> slot, and `_nodes`, the
 * caller's dict of node configurations, read by the lookups that return
 * one.  Everything is plain arrays and dicts, copied whole by copying each.
 * The GIL serialises calls (the module keeps it enabled); no call reaches
 * back into Python while the arrays are being changed (names are formatted
 * and slots looked up before; a change that ran Python code checks the
 * ring's change counter first and refuses when that code changed it).
 */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "engine/alloc.h"
#include "uhashring.h"

typedef struct {
    uint64_t hi;    /* the point's value, high half (ketama: the 32-bit value) */
    uint64_t lo;    /* its low half (ketama: 0) */
    uint64_t seq;   /* when the value first entered the continuum */
    uint32_t owner; /* the owning node's slot */
    uint32_t spare;
} uh_point;

typedef struct {
    PyObject_HEAD
    int ketama;         /* 0: 128-bit md5 points; 1: ketama's 32-bit points */
    uh_point *pts;      /* sorted by (hi, lo, seq); room for cap */
    size_t n, cap;
    uh_point *spare;    /* room for spare_cap: where a change merges into, then swapped in */
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
    uint64_t next_seq;
    uint64_t changes;   /* bumped by every change: a call that ran Python code
                         * (a name's __format__, __hash__ or __eq__) checks it
                         * before it changes anything */
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

/* ---- the points, with no Python ---- */

static int uh_less(const uh_point *a, const uh_point *b)
{
    if (a->hi != b->hi)
        return a->hi < b->hi;
    if (a->lo != b->lo)
        return a->lo < b->lo;
    return a->seq < b->seq;
}

/*
 * Sorts p[0..n) by (hi, lo, seq): a stable LSD radix sort on the 32 bits
 * of hi that vary most (its top half for 128-bit values, its low half for
 * ketama's), then one insertion pass settling the rare runs those bits tie
 * (O(n) when they are rare).  scratch, when not NULL, is room for n points
 * the sort may overwrite.  0, or -1 when out of memory (p unchanged).
 */
static int uh_sort(uh_point *p, size_t n, int shift, uh_point *scratch)
{
    if (n < 2)
        return 0;
    uh_point *tmp = scratch ? scratch : CHASH_MALLOC(n * sizeof *tmp);
    if (!tmp)
        return -1;
    uh_point *src = p, *dst = tmp;
    for (int pass = 0; pass < 4; pass++) {
        size_t count[257] = {0};
        int s = shift + 8 * pass;
        for (size_t i = 0; i < n; i++)
            count[((src[i].hi >> s) & 0xffu) + 1]++;
        for (size_t b = 1; b < 257; b++)
            count[b] += count[b - 1];
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].hi >> s) & 0xffu]++] = src[i];
        uh_point *t = src;
        src = dst;
        dst = t;
    }
    /* Four passes: the result is back in p. */
    if (!scratch)
        CHASH_FREE(tmp);
    for (size_t i = 1; i < n; i++) {
        uh_point v = p[i];
        size_t j = i;
        while (j > 0 && uh_less(&v, &p[j - 1])) {
            p[j] = p[j - 1];
            j--;
        }
        p[j] = v;
    }
    return 0;
}

/* The successor rule: index of the first point > (hi, lo) in p[from..to),
 * else to; wrapping (to == n) to 0.  Every point before from is <= the key
 * and every point from to on is > it (the bucket index guarantees it). */
static size_t uh_successor(const uh_point *p, size_t n, size_t from, size_t to, uint64_t hi,
                           uint64_t lo)
{
    size_t lo_i = from, hi_i = to;
    while (lo_i < hi_i) {
        size_t mid = lo_i + (hi_i - lo_i) / 2;
        if (p[mid].hi > hi || (p[mid].hi == hi && p[mid].lo > lo))
            hi_i = mid;
        else
            lo_i = mid + 1;
    }
    return lo_i == n ? 0 : lo_i;
}

/* The bits a value's bucket is taken from: the top of hi (md5), the top
 * of its 32 bits (ketama). */
static uint64_t uh_bucket(uint64_t hi, int ketama, int ibits)
{
    return ketama ? (hi & 0xffffffffu) >> (32 - ibits) : hi >> (64 - ibits);
}

/* The bucket bits of a ring of n points: about log2(n), 1 to 24. */
static int uh_index_bits(size_t n)
{
    int b = 1;
    while (b < 24 && ((size_t)1 << b) < n)
        b++;
    return b;
}

static uint64_t be64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | b[i];
    return v;
}

static uint64_t le32(const uint8_t *b)
{
    return (uint64_t)b[0] | ((uint64_t)b[1] << 8) | ((uint64_t)b[2] << 16) | ((uint64_t)b[3] << 24);
}

/*
 * The points of one node: the MD5 of prefix followed by the decimal i,
 * for i < count, written to out (count * per points, per = 1 for md5
 * points, `replicas` for ketama's), owner slot, seq from *seq on.  0, or
 * -1 when out of memory.
 */
static int uh_node_points(const char *prefix, size_t plen, size_t count, int ketama, int replicas,
                          uint32_t slot, uint64_t *seq, uh_point *out)
{
    size_t cap = plen + 24;
    char *buf = CHASH_MALLOC(4 * cap);
    if (!buf)
        return -1;
    for (int lane = 0; lane < 4; lane++)
        memcpy(buf + (size_t)lane * cap, prefix, plen);
    size_t per = ketama ? (size_t)replicas : 1;
    for (size_t i = 0; i < count; i += 4) {
        const void *data[4];
        size_t len[4];
        uint8_t dig[4][CHASH_MD5_DIGEST_SIZE];
        size_t lanes = count - i < 4 ? count - i : 4;
        for (size_t lane = 0; lane < 4; lane++) {
            char *s = buf + lane * cap;
            size_t v = i + (lane < lanes ? lane : 0), d = 0;
            char digits[24];
            do {
                digits[d++] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            for (size_t k = 0; k < d; k++)
                s[plen + k] = digits[d - 1 - k];
            data[lane] = s;
            len[lane] = plen + d;
        }
        if (len[0] <= 55 && len[1] <= 55 && len[2] <= 55 && len[3] <= 55) {
            chash_md5_x4(data, len, dig);
        } else {
            for (size_t lane = 0; lane < lanes; lane++)
                chash_md5(data[lane], len[lane], dig[lane]);
        }
        for (size_t lane = 0; lane < lanes; lane++) {
            for (size_t r = 0; r < per; r++) {
                uh_point *p = &out[(i + lane) * per + r];
                if (ketama) {
                    p->hi = le32(dig[lane] + 4 * r);
                    p->lo = 0;
                } else {
                    p->hi = be64(dig[lane]);
                    p->lo = be64(dig[lane] + 8);
                }
                p->seq = (*seq)++;
                p->owner = slot;
                p->spare = 0;
            }
        }
    }
    CHASH_FREE(buf);
    return 0;
}

/* Counts the distinct values of sorted p[0..n). */
static size_t uh_unique(const uh_point *p, size_t n)
{
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || p[i].hi != p[i - 1].hi || p[i].lo != p[i - 1].lo)
            u++;
    return u;
}

/* ---- the Python side ---- */

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

static int uh_clear(UHashRingObject *self)
{
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
    if (!self->slots || !self->nodes || !self->instance) {
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
    uint64_t hi = self->ketama ? le32(dig) : be64(dig);
    uint64_t lo = self->ketama ? 0 : be64(dig + 8);
    uint64_t b = uh_bucket(hi, self->ketama, self->ibits);
    return (Py_ssize_t)uh_successor(self->pts, self->n, self->index[b], self->index[b + 1], hi, lo);
}

static PyObject *uh_value(const UHashRingObject *self, const uh_point *p)
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
    const uh_point *p = &self->pts[pos];
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

PyDoc_STRVAR(uh_points_doc,
"_points($self, /)\n--\n\n"
"The (point, node name) pairs in ring order, a repeated value as often as\n"
"it is held.");

static PyObject *uh_points(UHashRingObject *self, PyObject *Py_UNUSED(ignored))
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
    uint64_t x = (*(uh_point *const *)a)->seq, y = (*(uh_point *const *)b)->seq;
    return (x > y) - (x < y);
}

PyDoc_STRVAR(uh_continuum_doc,
"_continuum($self, /)\n--\n\n"
"A new dict point -> node name, each distinct point once, in the order the\n"
"points entered the ring.");

static PyObject *uh_continuum(UHashRingObject *self, PyObject *Py_UNUSED(ignored))
{
    /* The first entry of each run of equal values carries its smallest seq. */
    uh_point **first = CHASH_MALLOC((self->unique ? self->unique : 1) * sizeof *first);
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
    if (*count > ((size_t)1 << 26)) {
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
    size_t buckets = ((size_t)1 << uh_index_bits(n)) + 1;
    if ((merge && uh_grow((void **)&self->spare, &self->spare_cap, n, sizeof(uh_point)) < 0)
        || uh_grow((void **)&self->index, &self->index_cap, buckets, sizeof(uint32_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Rewrites the bucket index from the points (room reserved): one pass,
 * each bucket's start written as the points cross into it. */
static void uh_refresh(UHashRingObject *self)
{
    const uh_point *pts = self->pts;
    uint32_t *index = self->index;
    size_t n = self->n;
    int b = uh_index_bits(n);
    size_t buckets = (size_t)1 << b, next = 0;
    int shift = self->ketama ? 32 - b : 64 - b;
    uint64_t mask = self->ketama ? 0xffffffffu : UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t bucket = (size_t)((pts[i].hi & mask) >> shift);
        while (next <= bucket)
            index[next++] = (uint32_t)i;
    }
    while (next <= buckets)
        index[next++] = (uint32_t)n;
    self->ibits = b;
}

/* Swaps the spare array, holding n points of which unique distinct, in
 * as the points; the old points become the spare. */
static void uh_swap_in(UHashRingObject *self, size_t n, size_t unique)
{
    uh_point *old = self->pts;
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
    PyObject *slot = PyDict_GetItemWithError(self->slots, name);
    if (!slot)
        return PyErr_Occurred() ? -2 : -1;
    return PyLong_AsSsize_t(slot);
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
    uh_point *add = CHASH_MALLOC((count ? count : 1) * sizeof *add);
    uint64_t seq = self->next_seq;
    if (!add
        || uh_node_points(PyBytes_AS_STRING(prefix), (size_t)PyBytes_GET_SIZE(prefix), count, 0, 1,
                          (uint32_t)slot, &seq, add) < 0
        || uh_sort(add, count, 32, NULL) < 0) {
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
    uh_point *out = self->spare;
    Py_XDECREF(slot_obj);
    /* No Python from here on: merge the others' points with the new ones. */
    size_t i = 0, j = 0, m = 0;
    while (i < self->n || j < count) {
        if (i < self->n && self->pts[i].owner == (uint32_t)slot) {
            i++;
            continue;
        }
        if (j < count && j > 0 && add[j].hi == add[j - 1].hi && add[j].lo == add[j - 1].lo) {
            j++; /* the node's own repeat: one value, one point */
            continue;
        }
        if (j == count || (i < self->n && (self->pts[i].hi < add[j].hi
                                           || (self->pts[i].hi == add[j].hi && self->pts[i].lo < add[j].lo)))) {
            out[m++] = self->pts[i++];
        } else if (i < self->n && self->pts[i].hi == add[j].hi && self->pts[i].lo == add[j].lo) {
            out[m] = self->pts[i++]; /* written again: this node's now, where it was */
            out[m++].owner = (uint32_t)slot;
            j++;
        } else {
            out[m++] = add[j++];
        }
    }
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
    size_t m = 0;
    for (size_t i = 0; i < self->n; i++) {
        uh_point p = self->pts[i];
        if (p.owner == (uint32_t)slot)
            continue;
        if (p.owner == last)
            p.owner = (uint32_t)slot;
        self->pts[m++] = p;
    }
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
    uh_point *pts = NULL;
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
        if (uh_node_points(PyBytes_AS_STRING(prefixes[k]), (size_t)PyBytes_GET_SIZE(prefixes[k]),
                           counts[k], ketama, (int)replicas, (uint32_t)k, &seq, pts + at) < 0) {
            PyErr_NoMemory();
            goto fail;
        }
        at += counts[k] * per;
    }
    /* The spare array (room reserved, contents free) is the sort's scratch. */
    if (uh_reserve(self, total, 1) < 0 || uh_unchanged(self, before) < 0)
        goto fail;
    uh_sort(pts, total, ketama ? 0 : 32, self->spare);
    /* A value written more than once: owned by its last writer, placed by
     * its first; md5 mode keeps it once, ketama every time. */
    size_t m = 0;
    for (size_t i = 0; i < total;) {
        size_t end = i + 1;
        while (end < total && pts[end].hi == pts[i].hi && pts[end].lo == pts[i].lo)
            end++;
        uint32_t owner = pts[end - 1].owner;
        size_t keep = ketama ? end - i : 1;
        for (size_t k = 0; k < keep; k++) {
            pts[m] = pts[i + k];
            pts[m++].owner = owner;
        }
        i = end;
    }
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
    self->unique = ketama ? uh_unique(pts, m) : m;
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
    for (size_t i = 0; i < self->n; i++) {
        const uh_point *p = &self->pts[i];
        int bad = p->owner >= self->nnodes || (i > 0 && uh_less(p, &self->pts[i - 1]));
        if (i > 0 && p->hi == self->pts[i - 1].hi && p->lo == self->pts[i - 1].lo)
            bad |= !self->ketama || p->owner != self->pts[i - 1].owner;
        if (self->ketama)
            bad |= p->hi > UINT32_MAX || p->lo != 0;
        if (bad)
            return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
    }
    if (self->unique != uh_unique(self->pts, self->n)
        || (size_t)PyDict_GET_SIZE(self->slots) != self->nnodes)
        return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
    if (self->n) {
        size_t buckets = (size_t)1 << self->ibits;
        if (self->index[buckets] != self->n)
            return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
        for (size_t k = 0; k < buckets; k++) {
            size_t first = self->index[k], next = self->index[k + 1];
            int bad = first > next;
            if (!bad && first < self->n)
                bad = uh_bucket(self->pts[first].hi, self->ketama, self->ibits) < k;
            if (!bad && first > 0)
                bad = uh_bucket(self->pts[first - 1].hi, self->ketama, self->ibits) >= k;
            if (bad)
                return chash_py_error(CHASH_ECORRUPT, NULL, NULL);
        }
    }
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

static PyMethodDef uh_methods[] = {
    {"get_node", (PyCFunction)uh_get_node, METH_O, uh_get_node_doc},
    {"get", (PyCFunction)uh_get, METH_O, uh_get_doc},
    {"get_node_instance", (PyCFunction)uh_instance, METH_O, uh_instance_doc},
    {"_lookup", (PyCFunction)uh_lookup, METH_O, uh_lookup_doc},
    {"_walk", (PyCFunction)(void (*)(void))uh_walk, METH_FASTCALL, uh_walk_doc},
    {"_points", (PyCFunction)uh_points, METH_NOARGS, uh_points_doc},
    {"_continuum", (PyCFunction)uh_continuum, METH_NOARGS, uh_continuum_doc},
    {"_size", (PyCFunction)uh_size, METH_NOARGS, uh_size_doc},
    {"_set_node", (PyCFunction)(void (*)(void))uh_set_node, METH_FASTCALL, uh_set_node_doc},
    {"_remove", (PyCFunction)uh_remove, METH_O, uh_remove_doc},
    {"_build", (PyCFunction)(void (*)(void))uh_build, METH_FASTCALL, uh_build_doc},
    {"_check", (PyCFunction)uh_check, METH_NOARGS, uh_check_doc},
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
