/*
 * lookup.c - the 32-bit ring's lookups: one key, a batch of keys (four MD5
 * lanes at a time), hashes the caller computed, the preference list, a
 * key's ring position (ring32.h).
 */
#include "ring32.h"

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

PyObject *ring32_get(RouterObject *self, PyObject *key)
{
    uint32_t hash;
    if (key_hash(self, key, &hash) < 0)
        return NULL;
    return ring32_get_at(self, hash);
}

/* A key's place on the ring is its 32-bit hash. */
int ring32_locate(RouterObject *self, PyObject *key, uint64_t *place)
{
    uint32_t hash;
    if (key_hash(self, key, &hash) < 0)
        return -1;
    *place = hash;
    return 0;
}

PyObject *ring32_get_at(RouterObject *self, uint64_t place)
{
    void *entry;
    if (chash_ring_lookup(self->r32.ring, (uint32_t)place, &entry) != CHASH_OK)
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
    chash_scheme_key_hash_x4(&batch->self->r32.scheme, data, lens, batch->hashes + at);
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
    if (chash_py_hash_keys(PySequence_Fast_ITEMS(seq), n, self->r32.hash_fn ? NULL : hash_four,
                           hash_one, &batch) < 0) {
        PyMem_Free(batch.hashes);
        return NULL;
    }
    return batch.hashes;
}

/* The keys as a sequence whose items stay put: a tuple copy when a Python
 * hash could change a list between keys, else the list itself. */
static PyObject *key_sequence(RouterObject *self, PyObject *keys)
{
    if (self->r32.hash_fn) {
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

/* The owners of hashes[0..n) written over them, by the engine alone (no
 * Python object touched): run without the GIL for a large batch. */
typedef struct {
    const chash_ring *ring;
    uint32_t *hashes;
    size_t n;
} OwnersCall;

static void run_owners(void *ctx)
{
    OwnersCall *call = ctx;
    chash_ring_owners(call->ring, call->hashes, call->n, call->hashes);
}

static void owners_in_place(RouterObject *self, uint32_t *hashes, size_t n)
{
    OwnersCall call = {self->r32.ring, hashes, n};
    chash_py_route_unlocked(&router_object(self)->unlocked_readers, n, run_owners, &call);
}

PyObject *ring32_get_many(RouterObject *self, PyObject *keys)
{
    Py_ssize_t n;
    uint32_t *hashes = hash_keys(self, keys, &n);
    if (!hashes)
        return NULL;
    PyObject *result = PyList_New(n);
    if (result && chash_ring_point_count(self->r32.ring) == 0) {
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
    } else if (result) {
        /* Owners written over the hashes: each is read before it is replaced. */
        owners_in_place(self, hashes, (size_t)n);
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(entry_at(self, hashes[i])->name));
    }
    PyMem_Free(hashes);
    return result;
}

PyObject *ring32_preference(RouterObject *self, PyObject *key, size_t n)
{
    uint32_t hash;
    if (key_hash(self, key, &hash) < 0)
        return NULL;
    return ring32_preference_at(self, hash, n);
}

PyObject *ring32_preference_at(RouterObject *self, uint64_t place, size_t n)
{
    uint32_t hash = (uint32_t)place;
    size_t want = n < chash_ring_node_count(self->r32.ring) ? n : chash_ring_node_count(self->r32.ring);
    size_t *owners = PyMem_New(size_t, want ? want : 1);
    if (!owners)
        return PyErr_NoMemory();
    size_t found;
    int status = chash_ring_preference(self->r32.ring, hash, want, owners, &found);
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

PyObject *ring32_calculate_hash(RouterObject *self, PyObject *key)
{
    uint32_t hash;
    if (key_hash(self, key, &hash) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(hash);
}

PyObject *ring32_get_by_hash(RouterObject *self, PyObject *hash)
{
    uint64_t h;
    if (parse_hash_arg(hash, 32, chash_layout_name(self->r32.scheme.layout), &h) < 0)
        return NULL;
    void *entry;
    if (chash_ring_lookup(self->r32.ring, (uint32_t)h, &entry) != CHASH_OK)
        Py_RETURN_NONE;
    return Py_NewRef(((NodeEntry *)entry)->name);
}

READ_METHOD(ring32_read_get, ring32_get)
READ_METHOD(ring32_read_get_by_hash, ring32_get_by_hash)

PyObject *ring32_get_many_by_hash(RouterObject *self, PyObject *hashes)
{
    Py_ssize_t n;
    uint64_t *wide = parse_hash_args(hashes, 32, chash_layout_name(self->r32.scheme.layout), &n);
    if (!wide)
        return NULL;
    uint32_t *owners = PyMem_New(uint32_t, n ? (size_t)n : 1);
    PyObject *result = owners ? PyList_New(n) : PyErr_NoMemory();
    if (result && chash_ring_point_count(self->r32.ring) == 0) {
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(Py_None));
    } else if (result) {
        for (Py_ssize_t i = 0; i < n; i++)
            owners[i] = (uint32_t)wide[i];
        owners_in_place(self, owners, (size_t)n);
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(result, i, Py_NewRef(entry_at(self, owners[i])->name));
    }
    PyMem_Free(owners);
    PyMem_Free(wide);
    return result;
}
