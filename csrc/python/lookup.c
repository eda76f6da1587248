/*
 * lookup.c - the router's lookups: one key, a batch of keys (four MD5
 * lanes at a time), the preference list, a key's ring position.  Part of
 * chash._chash (router.h).
 */
#include "router.h"

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

const char get_doc[] = PyDoc_STR(
"get_target_node($self, request_key, /)\n--\n\n"
"The node owning the first ring point >= the key's hash, wrapping around;\n"
"None when the ring is empty.  request_key is a str or bytes.");

PyObject *router_get(RouterObject *self, PyObject *key)
{
    uint32_t hash;
    if (key_hash(self, key, &hash) < 0)
        return NULL;
    void *entry;
    if (chash_ring_lookup(self->ring, hash, &entry) != CHASH_OK)
        Py_RETURN_NONE; /* an empty ring */
    return Py_NewRef(((NodeEntry *)entry)->name);
}

/* Where hash_all's callbacks write: the router and the positions. */
typedef struct {
    RouterObject *self;
    uint32_t *hashes;
} hash_batch;

static void hash_four(void *ctx, const void *const data[4], const size_t lens[4], size_t at)
{
    hash_batch *batch = ctx;
    chash_scheme_key_hash_x4(&batch->self->scheme, data, lens, batch->hashes + at);
}

static int hash_one(void *ctx, PyObject *key, size_t at)
{
    hash_batch *batch = ctx;
    return key_hash(batch->self, key, &batch->hashes[at]);
}

/*
 * The ring positions of every key of seq, in a PyMem buffer the caller
 * frees, or NULL with an exception set.  All keys are hashed before the
 * ring is read, so a batch sees one ring even when a Python hash lets other
 * threads run; built-in hashes take keys four at a time.
 */
static uint32_t *hash_all(RouterObject *self, PyObject *seq, Py_ssize_t n)
{
    hash_batch batch = {self, PyMem_New(uint32_t, n ? (size_t)n : 1)};
    if (!batch.hashes) {
        PyErr_NoMemory();
        return NULL;
    }
    if (chash_py_hash_keys(PySequence_Fast_ITEMS(seq), n, self->hash_fn ? NULL : hash_four,
                           hash_one, &batch) < 0) {
        PyMem_Free(batch.hashes);
        return NULL;
    }
    return batch.hashes;
}

const char get_many_doc[] = PyDoc_STR(
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

/* The keys as a sequence whose items stay put: a tuple copy when a Python
 * hash could change a list between keys, else the list itself. */
static PyObject *key_sequence(RouterObject *self, PyObject *keys)
{
    if (self->hash_fn) {
        PyObject *tuple = PySequence_Tuple(keys);
        if (!tuple && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "keys must be an iterable of str or bytes");
        }
        return tuple;
    }
    return PySequence_Fast(keys, "keys must be an iterable of str or bytes");
}

/* The ring positions of every key of an iterable (PyMem, the caller frees);
 * *n receives how many. */
uint32_t *hash_keys(RouterObject *self, PyObject *keys, Py_ssize_t *n)
{
    PyObject *seq = key_sequence(self, keys);
    if (!seq)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    uint32_t *hashes = hash_all(self, seq, *n);
    Py_DECREF(seq);
    return hashes;
}

PyObject *router_get_many(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n;
    uint32_t *hashes = hash_keys(self, keys, &n);
    if (!hashes)
        return NULL;
    PyObject *result = PyList_New(n);
    if (result && chash_ring_point_count(self->ring) == 0) {
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
    } else if (result) {
        /* Owners written over the hashes: each is read before it is replaced. */
        chash_ring_owners(self->ring, hashes, (size_t)n, hashes);
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(entry_at(self, hashes[i])->name));
    }
    PyMem_Free(hashes);
    return result;
}

const char preference_doc[] = PyDoc_STR(
"get_preference_list($self, key, n, /)\n--\n\n"
"The first n distinct nodes met clockwise from the key, its owner first.\n"
"Fewer when the ring has fewer nodes; [] on an empty ring.");

PyObject *router_preference(RouterObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get_preference_list expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    if (!PyLong_Check(args[1]) || PyBool_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "n must be int, not %.200s", Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();
        PyObject *zero = PyLong_FromLong(0);
        int negative = zero ? PyObject_RichCompareBool(args[1], zero, Py_LT) : -1;
        Py_XDECREF(zero);
        if (negative < 0)
            return NULL;
        n = negative ? -1 : PY_SSIZE_T_MAX;
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "n must be >= 0");
        return NULL;
    }
    uint32_t hash;
    if (key_hash(self, args[0], &hash) < 0)
        return NULL;
    size_t want = (size_t)n < chash_ring_node_count(self->ring) ? (size_t)n
                                                                  : chash_ring_node_count(self->ring);
    size_t *owners = PyMem_New(size_t, want ? want : 1);
    if (!owners)
        return PyErr_NoMemory();
    size_t found;
    int status = chash_ring_preference(self->ring, hash, want, owners, &found);
    if (status != CHASH_OK) {
        PyMem_Free(owners);
        return set_status_error(status, NULL);
    }
    PyObject *result = PyList_New((Py_ssize_t)found);
    if (result)
        for (size_t i = 0; i < found; i++)
            PyList_SET_ITEM(result, (Py_ssize_t)i, Py_NewRef(entry_at(self, owners[i])->name));
    PyMem_Free(owners);
    return result;
}

const char calc_doc[] = PyDoc_STR(
"_calculate_hash($self, key, /)\n--\n\n"
"The ring position (0 <= h < 2**32) of a str or bytes key.");

PyObject *router_calculate_hash(RouterObject *self, PyObject *key)
{
    uint32_t hash;
    if (key_hash(self, key, &hash) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(hash);
}

