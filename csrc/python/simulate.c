/*
 * simulate.c - the private functions of chash._chash over
 * strategies/strategies.h (jump, rendezvous, Maglev, bounded loads,
 * modulo) and the bulk helpers chash.simulate measures them with.  They
 * are module functions beside the router type, added to the module by
 * module.c; bounded loads reads a router's ring directly (one extension,
 * one copy of the engine: no ring pointer crosses between two).
 *
 * Bulk data crosses the boundary as flat buffers of native unsigned
 * integers, never as Python ints: key and node hashes as 64-bit words
 * (array('Q'), or bytes whose length is a multiple of 8), node indices,
 * ring points and tables as 32-bit words (array('I'), or bytes).  Results
 * come back as new array('Q') / array('I') objects.  A million keys thus
 * cost two flat buffers and no Python object each.
 *
 * The C loops run without the GIL, bounded loads' aside (it reads the
 * router's published ring inside a read section, epoch.h): the input buffers
 * are held (so they cannot be resized or freed) and the outputs are new
 * arrays nobody else sees yet.
 */
#include "simulate.h"

#include "state.h"
#include "epoch.h"
#include "family.h"

#include "engine/chash.h"
#include "engine/scheme.h"
#include "hash/hash.h"
#include "strategies/strategies.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Word buffers                                                       */

/* A read-only view of an argument as an array of width-byte words. */
typedef struct {
    Py_buffer view;
    const void *words; /* aligned for the width: view.buf or copy */
    void *copy;        /* PyMem copy when view.buf is misaligned */
    size_t count;
} words_view;

/* 1 when fmt names one native unsigned integer of itemsize width. */
static int unsigned_format(const char *fmt, Py_ssize_t itemsize, size_t width)
{
    if (fmt[0] == '@')
        fmt++;
    if (fmt[0] == '\0' || fmt[1] != '\0' || (size_t)itemsize != width)
        return 0;
    return strchr("BHILQN", fmt[0]) != NULL;
}

/*
 * Views obj (a C-contiguous buffer: an array of unsigned words of the
 * given width, or raw bytes whose length is a multiple of it).  Returns 0,
 * or -1 with TypeError / ValueError naming the argument.  Release with
 * words_release().
 */
static int words_get(PyObject *obj, size_t width, const char *what, words_view *w)
{
    w->copy = NULL;
    if (PyObject_GetBuffer(obj, &w->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a buffer of %zu-byte unsigned words "
                     "(array('%c') or bytes), not %.200s",
                     what, width, width == 8 ? 'Q' : 'I', Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *fmt = w->view.format ? w->view.format : "B";
    int raw = w->view.itemsize == 1 && (strcmp(fmt, "B") == 0 || strcmp(fmt, "b") == 0
                                        || strcmp(fmt, "c") == 0);
    if (!raw && !unsigned_format(fmt, w->view.itemsize, width)) {
        PyErr_Format(PyExc_TypeError, "%s must hold %zu-byte unsigned words "
                     "(array('%c') or bytes), not format '%s' of %zd bytes",
                     what, width, width == 8 ? 'Q' : 'I', fmt, w->view.itemsize);
        PyBuffer_Release(&w->view);
        return -1;
    }
    size_t len = (size_t)w->view.len;
    if (len % width != 0) {
        PyErr_Format(PyExc_ValueError, "%s: %zu bytes is not a whole number of %zu-byte words",
                     what, len, width);
        PyBuffer_Release(&w->view);
        return -1;
    }
    w->count = len / width;
    w->words = w->view.buf;
    /* A slice of bytes may start anywhere; words are read aligned. */
    if ((uintptr_t)w->view.buf % width != 0) {
        w->copy = PyMem_Malloc(len ? len : 1);
        if (!w->copy) {
            PyBuffer_Release(&w->view);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(w->copy, w->view.buf, len);
        w->words = w->copy;
    }
    return 0;
}

static void words_release(words_view *w)
{
    PyMem_Free(w->copy);
    w->copy = NULL;
    PyBuffer_Release(&w->view);
}

/* A word argument: the object, its width in bytes, its name in errors. */
typedef struct {
    PyObject *obj;
    size_t width;
    const char *what;
} words_arg;

/* Views args[0..n) into views[0..n): all of them (0), or none (-1 with the
 * first failure's exception set; those already taken are released). */
static int words_get_all(const words_arg *args, size_t n, words_view *views)
{
    for (size_t i = 0; i < n; i++) {
        if (words_get(args[i].obj, args[i].width, args[i].what, &views[i]) < 0) {
            while (i > 0)
                words_release(&views[--i]);
            return -1;
        }
    }
    return 0;
}

static void words_release_all(words_view *views, size_t n)
{
    while (n > 0)
        words_release(&views[--n]);
}

/*
 * A new array of count zero words, typecode 'I' (width 4) or 'Q' (width 8),
 * with a writable view of it in *out; NULL with an exception set.  The
 * caller releases the view before handing the array out.
 */
static PyObject *new_words(size_t count, size_t width, Py_buffer *out)
{
    if (count > (size_t)PY_SSIZE_T_MAX / width) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *array_module = PyImport_ImportModule("array");
    if (!array_module)
        return NULL;
    PyObject *one = PyObject_CallMethod(array_module, "array", "s(i)", width == 8 ? "Q" : "I", 0);
    Py_DECREF(array_module);
    if (!one)
        return NULL;
    /* array * n fills by doubling memcpy: cheaper than a Python loop. */
    PyObject *result = PySequence_Repeat(one, (Py_ssize_t)count);
    Py_DECREF(one);
    if (!result)
        return NULL;
    if (PyObject_GetBuffer(result, out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    if ((size_t)out->itemsize != width) {
        PyBuffer_Release(out);
        Py_DECREF(result);
        PyErr_Format(PyExc_SystemError, "array('%c') items are not %zu bytes here",
                     width == 8 ? 'Q' : 'I', width);
        return NULL;
    }
    return result;
}

/* Hands out an array filled through its view, or drops it on error. */
static PyObject *finish_words(PyObject *result, Py_buffer *out, int status, const char *what)
{
    PyBuffer_Release(out);
    if (status != CHASH_OK) {
        Py_DECREF(result);
        return chash_py_error(status, NULL, what);
    }
    return result;
}

/* A count argument in [1, max]; 0 or -1 with ValueError naming it. */
static int count_arg(Py_ssize_t value, size_t max, const char *what, size_t *out)
{
    if (value < 1 || (size_t)value > max) {
        PyErr_Format(PyExc_ValueError, "%s must be between 1 and %zu, not %zd", what, max, value);
        return -1;
    }
    *out = (size_t)value;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Key hashes                                                         */

PyDoc_STRVAR(key_hashes_doc,
"_key_hashes(keys, hash='md5', /)\n--\n\n"
"The 64-bit hash of every str (UTF-8) or bytes key, as array('Q'): the\n"
"named hash's digest read big-endian, its last 8 bytes (all of a shorter\n"
"digest).  With md5 the low 32 bits are the key's position on a ring of\n"
"the 'python' layout.");

/* The last 8 bytes of a digest (all of a shorter one), big-endian. */
static uint64_t digest_tail(const uint8_t *digest, size_t size)
{
    uint64_t value = 0;
    for (size_t b = size > 8 ? size - 8 : 0; b < size; b++)
        value = value << 8 | digest[b];
    return value;
}

/* Where _key_hashes' callbacks write: the hash and the results. */
typedef struct {
    chash_hash_id id;
    uint64_t *hashes;
} key_batch;

static void key_hash_four(void *ctx, const void *const data[4], const size_t lens[4], size_t at)
{
    key_batch *batch = ctx;
    uint8_t digests[4][CHASH_MD5_DIGEST_SIZE];
    chash_md5_x4(data, lens, digests);
    for (int l = 0; l < 4; l++)
        batch->hashes[at + (size_t)l] = digest_tail(digests[l], CHASH_MD5_DIGEST_SIZE);
}

static int key_hash_one(void *ctx, PyObject *key, size_t at)
{
    key_batch *batch = ctx;
    const char *buf;
    Py_ssize_t len;
    if (chash_py_key_bytes(key, &buf, &len) < 0)
        return -1;
    uint8_t digest[CHASH_MAX_DIGEST];
    size_t size = chash_digest(batch->id, buf, (size_t)len, 0, digest);
    batch->hashes[at] = digest_tail(digest, size);
    return 0;
}

static PyObject *py_key_hashes(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *keys;
    const char *name = "md5";
    if (!PyArg_ParseTuple(args, "O|s:_key_hashes", &keys, &name))
        return NULL;
    key_batch batch;
    if (chash_hash_by_name(name, &batch.id) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError, "unknown hash '%s'", name);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of str or bytes");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_buffer out;
    PyObject *result = new_words((size_t)n, 8, &out);
    if (result) {
        batch.hashes = out.buf;
        /* MD5 runs four keys at once; nothing here runs Python code. */
        int failed = chash_py_hash_keys(PySequence_Fast_ITEMS(seq), n,
                                        batch.id == CHASH_HASH_MD5 ? key_hash_four : NULL,
                                        key_hash_one, &batch);
        PyBuffer_Release(&out);
        if (failed)
            Py_CLEAR(result);
    }
    Py_DECREF(seq);
    return result;
}

/* ------------------------------------------------------------------ */
/* Strategies                                                         */

PyDoc_STRVAR(modulo_doc,
"_modulo_assign(hashes, n, /)\n--\n\n"
"hash % n for every 64-bit key hash, as array('I').");

/* A bucket for every 64-bit key hash by assign (modulo or jump), as
 * array('I'); n is checked against max_n first. */
static PyObject *assign_buckets(PyObject *args, const char *format, size_t max_n,
                                int (*assign)(const uint64_t *, size_t, size_t, uint32_t *),
                                const char *name)
{
    PyObject *hashes_obj;
    Py_ssize_t n_arg;
    size_t n;
    if (!PyArg_ParseTuple(args, format, &hashes_obj, &n_arg)
        || count_arg(n_arg, max_n, "n", &n) < 0)
        return NULL;
    words_view keys;
    if (words_get(hashes_obj, 8, "hashes", &keys) < 0)
        return NULL;
    Py_buffer out;
    PyObject *result = new_words(keys.count, 4, &out);
    int status = CHASH_OK;
    if (result) {
        Py_BEGIN_ALLOW_THREADS
        status = assign(keys.words, keys.count, n, out.buf);
        Py_END_ALLOW_THREADS
        result = finish_words(result, &out, status, name);
    }
    words_release(&keys);
    return result;
}

static PyObject *py_modulo_assign(PyObject *Py_UNUSED(module), PyObject *args)
{
    return assign_buckets(args, "On:_modulo_assign", UINT32_MAX, chash_modulo_assign, "_modulo_assign");
}

PyDoc_STRVAR(jump_doc,
"_jump_assign(hashes, n, /)\n--\n\n"
"Jump consistent hash (Lamping & Veach) of every 64-bit key hash into n\n"
"buckets, 1 <= n < 2**31, as array('I').");

static PyObject *py_jump_assign(PyObject *Py_UNUSED(module), PyObject *args)
{
    return assign_buckets(args, "On:_jump_assign", CHASH_JUMP_MAX_BUCKETS, chash_jump_assign,
                          "_jump_assign");
}

PyDoc_STRVAR(rendezvous_doc,
"_rendezvous_assign(hashes, node_hashes, /)\n--\n\n"
"Rendezvous (highest random weight) winner among the 64-bit node hashes\n"
"for every 64-bit key hash: indices into node_hashes, as array('I').");

static PyObject *py_rendezvous_assign(PyObject *Py_UNUSED(module), PyObject *args)
{
    words_arg in[2] = {{NULL, 8, "hashes"}, {NULL, 8, "node_hashes"}};
    words_view v[2];
    if (!PyArg_ParseTuple(args, "OO:_rendezvous_assign", &in[0].obj, &in[1].obj)
        || words_get_all(in, 2, v) < 0)
        return NULL;
    PyObject *result = NULL;
    if (v[1].count == 0 || v[1].count > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "node_hashes must hold between 1 and 2**32 - 1 hashes");
    } else {
        Py_buffer out;
        result = new_words(v[0].count, 4, &out);
        int status = CHASH_OK;
        if (result) {
            Py_BEGIN_ALLOW_THREADS
            status = chash_rendezvous_assign(v[0].words, v[0].count, v[1].words, v[1].count,
                                             out.buf);
            Py_END_ALLOW_THREADS
            result = finish_words(result, &out, status, "_rendezvous_assign");
        }
    }
    words_release_all(v, 2);
    return result;
}

PyDoc_STRVAR(maglev_doc,
"_maglev_table(node_hashes, size=65537, /)\n--\n\n"
"The Maglev lookup table (Eisenbud et al. 2016) of the 64-bit node hashes,\n"
"as array('I') of node indices; size must be a prime >= the node count.");

static PyObject *py_maglev_table(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *nodes_obj;
    Py_ssize_t size_arg = (Py_ssize_t)CHASH_MAGLEV_DEFAULT_TABLE;
    if (!PyArg_ParseTuple(args, "O|n:_maglev_table", &nodes_obj, &size_arg))
        return NULL;
    words_view nodes;
    if (words_get(nodes_obj, 8, "node_hashes", &nodes) < 0)
        return NULL;
    PyObject *result = NULL;
    if (nodes.count == 0) {
        PyErr_SetString(PyExc_ValueError, "node_hashes must not be empty");
    } else if (size_arg < 2 || (size_t)size_arg > CHASH_MAGLEV_MAX_TABLE
               || !chash_is_prime((size_t)size_arg) || (size_t)size_arg < nodes.count) {
        PyErr_Format(PyExc_ValueError,
                     "size must be a prime between the node count (%zu) and %zu, not %zd",
                     nodes.count, CHASH_MAGLEV_MAX_TABLE, size_arg);
    } else {
        Py_buffer out;
        result = new_words((size_t)size_arg, 4, &out);
        int status = CHASH_OK;
        if (result) {
            Py_BEGIN_ALLOW_THREADS
            status = chash_maglev_build(nodes.words, nodes.count, out.buf, (size_t)size_arg);
            Py_END_ALLOW_THREADS
            result = finish_words(result, &out, status, "_maglev_table");
        }
    }
    words_release(&nodes);
    return result;
}

PyDoc_STRVAR(table_doc,
"_table_assign(hashes, table, /)\n--\n\n"
"table[hash % len(table)] for every 64-bit key hash (the Maglev lookup),\n"
"as array('I').");

static PyObject *py_table_assign(PyObject *Py_UNUSED(module), PyObject *args)
{
    words_arg in[2] = {{NULL, 8, "hashes"}, {NULL, 4, "table"}};
    words_view v[2];
    if (!PyArg_ParseTuple(args, "OO:_table_assign", &in[0].obj, &in[1].obj)
        || words_get_all(in, 2, v) < 0)
        return NULL;
    PyObject *result = NULL;
    if (v[1].count == 0) {
        PyErr_SetString(PyExc_ValueError, "table must not be empty");
    } else {
        Py_buffer out;
        result = new_words(v[0].count, 4, &out);
        int status = CHASH_OK;
        if (result) {
            Py_BEGIN_ALLOW_THREADS
            status = chash_table_assign(v[0].words, v[0].count, v[1].words, v[1].count, out.buf);
            Py_END_ALLOW_THREADS
            result = finish_words(result, &out, status, "_table_assign");
        }
    }
    words_release_all(v, 2);
    return result;
}

PyDoc_STRVAR(bounded_doc,
"_bounded_assign(router, hashes, balance, /)\n--\n\n"
"Consistent hashing with bounded loads (Mirrokni, Thorup & Zadimoghaddam)\n"
"over the ring of router (a ConsistentHashRouter, only read): keys placed\n"
"in order, each on the first node clockwise from the successor of its ring\n"
"position (the hash's low 32 bits) whose load is below\n"
"ceil(balance * (placed + 1) / len(router)).  Returns array('I') of node\n"
"indices in router.nodes order.");

static PyObject *py_bounded_assign(PyObject *module, PyObject *args)
{
    PyObject *router, *hashes_obj;
    double balance;
    if (!PyArg_ParseTuple(args, "OOd:_bounded_assign", &router, &hashes_obj, &balance))
        return NULL;
    if (!PyObject_TypeCheck(router, get_state(module)->router_type)) {
        PyErr_Format(PyExc_TypeError, "router must be a ConsistentHashRouter, not %.200s",
                     Py_TYPE(router)->tp_name);
        return NULL;
    }
    if (((RouterObject *)router)->family != &ring32_family) {
        PyErr_Format(PyExc_ValueError, "_bounded_assign: needs a router of a 32-bit ring layout, not %R",
                     router);
        return NULL;
    }
    if (!isfinite(balance) || balance < 1.0) {
        PyErr_Format(PyExc_ValueError, "balance must be a finite number >= 1, not %R",
                     PyTuple_GET_ITEM(args, 2));
        return NULL;
    }
    words_view keys;
    if (words_get(hashes_obj, 8, "hashes", &keys) < 0)
        return NULL;
    Py_buffer out;
    PyObject *result = new_words(keys.count, 4, &out);
    /* The router's published ring, kept by the read section (epoch.h)
     * while it is read, whatever other threads change meanwhile. */
    if (result && epoch_enter() < 0) {
        PyBuffer_Release(&out);
        Py_CLEAR(result);
    }
    if (result) {
        const chash_ring *ring = router_state((RouterObject *)router)->r32.ring;
        int empty = chash_ring_point_count(ring) == 0;
        int status = empty ? CHASH_OK
                           : chash_bounded_assign(ring, balance, keys.words, keys.count, out.buf);
        epoch_exit();
        result = finish_words(result, &out, status, "_bounded_assign");
        if (result && empty) {
            Py_CLEAR(result);
            PyErr_SetString(PyExc_ValueError, "_bounded_assign: the router has no node");
        }
    }
    words_release(&keys);
    return result;
}

/* ------------------------------------------------------------------ */
/* Comparing assignments                                              */

PyDoc_STRVAR(moved_doc,
"_moved(before, after, /)\n--\n\n"
"How many positions differ between two assignments (32-bit words) of one\n"
"length: the keys that moved.");

static PyObject *py_moved(PyObject *Py_UNUSED(module), PyObject *args)
{
    words_arg in[2] = {{NULL, 4, "before"}, {NULL, 4, "after"}};
    words_view v[2];
    if (!PyArg_ParseTuple(args, "OO:_moved", &in[0].obj, &in[1].obj)
        || words_get_all(in, 2, v) < 0)
        return NULL;
    PyObject *result = NULL;
    if (v[0].count != v[1].count) {
        PyErr_Format(PyExc_ValueError, "before and after differ in length: %zu and %zu",
                     v[0].count, v[1].count);
    } else {
        const uint32_t *x = v[0].words, *y = v[1].words;
        size_t moved = 0;
        for (size_t i = 0; i < v[0].count; i++)
            moved += x[i] != y[i];
        result = PyLong_FromSize_t(moved);
    }
    words_release_all(v, 2);
    return result;
}

PyDoc_STRVAR(counts_doc,
"_counts(assignment, n, /)\n--\n\n"
"How many keys each of the nodes 0 .. n-1 received: a list of n ints.\n"
"ValueError if an entry is n or more.");

static PyObject *py_counts(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *a_obj;
    Py_ssize_t n_arg;
    size_t n;
    if (!PyArg_ParseTuple(args, "On:_counts", &a_obj, &n_arg)
        || count_arg(n_arg, UINT32_MAX, "n", &n) < 0)
        return NULL;
    words_view a;
    if (words_get(a_obj, 4, "assignment", &a) < 0)
        return NULL;
    size_t *counts = PyMem_Calloc(n, sizeof *counts);
    if (!counts) {
        words_release(&a);
        return PyErr_NoMemory();
    }
    const uint32_t *x = a.words;
    PyObject *result = NULL;
    size_t i = 0;
    for (; i < a.count && x[i] < n; i++)
        counts[x[i]]++;
    if (i < a.count) {
        PyErr_Format(PyExc_ValueError, "assignment[%zu] = %u is not below n = %zu", i,
                     (unsigned)x[i], n);
    } else {
        result = PyList_New((Py_ssize_t)n);
        for (size_t k = 0; result && k < n; k++) {
            PyObject *count = PyLong_FromSize_t(counts[k]);
            if (!count)
                Py_CLEAR(result);
            else
                PyList_SET_ITEM(result, (Py_ssize_t)k, count);
        }
    }
    PyMem_Free(counts);
    words_release(&a);
    return result;
}

PyDoc_STRVAR(relabel_doc,
"_relabel(assignment, labels, /)\n--\n\n"
"labels[a] for every entry a of an assignment (32-bit words), as\n"
"array('I'): node indices of one list turned into those of another.");

static PyObject *py_relabel(PyObject *Py_UNUSED(module), PyObject *args)
{
    words_arg in[2] = {{NULL, 4, "assignment"}, {NULL, 4, "labels"}};
    words_view v[2];
    if (!PyArg_ParseTuple(args, "OO:_relabel", &in[0].obj, &in[1].obj)
        || words_get_all(in, 2, v) < 0)
        return NULL;
    Py_buffer out;
    PyObject *result = new_words(v[0].count, 4, &out);
    if (result) {
        const uint32_t *x = v[0].words, *map = v[1].words;
        uint32_t *y = out.buf;
        size_t i = 0;
        for (; i < v[0].count && x[i] < v[1].count; i++)
            y[i] = map[x[i]];
        PyBuffer_Release(&out);
        if (i < v[0].count) {
            PyErr_Format(PyExc_ValueError, "assignment[%zu] = %u has no label (%zu labels)", i,
                         (unsigned)x[i], v[1].count);
            Py_CLEAR(result);
        }
    }
    words_release_all(v, 2);
    return result;
}

PyDoc_STRVAR(node_indices_doc,
"_node_indices(owners, nodes, /)\n--\n\n"
"The position in nodes of every entry of owners (say, a router's\n"
"get_target_nodes() result), as array('I'); the first position of a node\n"
"listed twice.  ValueError if an owner is not among nodes.");

static PyObject *py_node_indices(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *owners_obj, *nodes_obj;
    if (!PyArg_ParseTuple(args, "OO:_node_indices", &owners_obj, &nodes_obj))
        return NULL;
    PyObject *owners = PySequence_Fast(owners_obj, "owners must be a sequence");
    if (!owners)
        return NULL;
    PyObject *nodes = PySequence_Fast(nodes_obj, "nodes must be a sequence");
    if (!nodes) {
        Py_DECREF(owners);
        return NULL;
    }
    PyObject *index = PyDict_New(), *result = NULL;
    Py_ssize_t nnodes = PySequence_Fast_GET_SIZE(nodes);
    if (nnodes > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many nodes");
        goto done;
    }
    for (Py_ssize_t k = 0; index && k < nnodes; k++) {
        PyObject *position = PyLong_FromSsize_t(k);
        /* SetDefault: a node listed twice keeps its first position. */
        if (!position || !PyDict_SetDefault(index, PySequence_Fast_GET_ITEM(nodes, k), position))
            Py_CLEAR(index);
        Py_XDECREF(position);
    }
    if (!index)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(owners);
    Py_buffer out;
    result = new_words((size_t)n, 4, &out);
    if (!result)
        goto done;
    uint32_t *y = out.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* A lookup may run an owner's __eq__, which may shrink a list of
         * owners: check the size, and hold the owner while it is used. */
        if (PySequence_Fast_GET_SIZE(owners) != n) {
            PyErr_SetString(PyExc_RuntimeError, "owners changed size during the call");
            goto fail;
        }
        PyObject *owner = Py_NewRef(PySequence_Fast_GET_ITEM(owners, i));
        PyObject *position = PyDict_GetItemWithError(index, owner);
        if (!position && !PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "owners[%zd] = %R is not among the nodes", i, owner);
        Py_DECREF(owner);
        if (!position)
            goto fail;
        y[i] = (uint32_t)PyLong_AsSize_t(position);
    }
    PyBuffer_Release(&out);
    goto done;
fail:
    PyBuffer_Release(&out);
    Py_CLEAR(result);
done:
    Py_XDECREF(index);
    Py_DECREF(nodes);
    Py_DECREF(owners);
    return result;
}

PyMethodDef strategy_methods[] = {
    {"_key_hashes", py_key_hashes, METH_VARARGS, key_hashes_doc},
    {"_modulo_assign", py_modulo_assign, METH_VARARGS, modulo_doc},
    {"_jump_assign", py_jump_assign, METH_VARARGS, jump_doc},
    {"_rendezvous_assign", py_rendezvous_assign, METH_VARARGS, rendezvous_doc},
    {"_maglev_table", py_maglev_table, METH_VARARGS, maglev_doc},
    {"_table_assign", py_table_assign, METH_VARARGS, table_doc},
    {"_bounded_assign", py_bounded_assign, METH_VARARGS, bounded_doc},
    {"_moved", py_moved, METH_VARARGS, moved_doc},
    {"_counts", py_counts, METH_VARARGS, counts_doc},
    {"_relabel", py_relabel, METH_VARARGS, relabel_doc},
    {"_node_indices", py_node_indices, METH_VARARGS, node_indices_doc},
    {NULL, NULL, 0, NULL},
};
