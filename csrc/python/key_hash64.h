/*
 * key_hash64.h - a request key's 64-bit hash as Envoy's header hash policy,
 * gRPC's request_hash_header and Envoy's Maglev compute it: XXH64, seed 0,
 * of the key's bytes (a str's UTF-8, or bytes as they are).  Shared by the
 * 64-bit ring family (ring64.c) and the Maglev family (maglev.c).  Beside
 * it, a key's hash by any hash of chash.HASHES read as a 64-bit integer
 * (engine/scheme.h's chash_hash64: Guava's padToLong), which the jump and
 * anchor families (jump.c, anchor.c) route with.
 */
#ifndef CHASH_PY_KEY_HASH64_H
#define CHASH_PY_KEY_HASH64_H

#include "binding.h"
#include "engine/scheme.h"
#include "hash/hash.h"

/* The hash of one key into *out; 0, or -1 with TypeError. */
static inline int key_hash64(PyObject *key, uint64_t *out)
{
    const char *buf;
    Py_ssize_t len;
    if (chash_py_key_bytes(key, &buf, &len) < 0)
        return -1;
    *out = chash_xxh64(buf, (size_t)len, 0);
    return 0;
}

/* _calculate_hash: the key's hash as an int; NULL with TypeError. */
static inline PyObject *key_hash64_int(PyObject *key)
{
    uint64_t h;
    if (key_hash64(key, &h) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(h);
}

/* The hash named id of one key, as a 64-bit integer, into *out; 0, or -1
 * with TypeError. */
static inline int key_hash_named(chash_hash_id id, PyObject *key, uint64_t *out)
{
    const char *buf;
    Py_ssize_t len;
    if (chash_py_key_bytes(key, &buf, &len) < 0)
        return -1;
    *out = chash_hash64(id, buf, (size_t)len);
    return 0;
}

/* The hashes of every key of an iterable, by the hash named id (an id of
 * CHASH_HASH_COUNT or more: XXH64 seed 0, key_hash64), in a PyMem block
 * the caller frees; *n receives how many.  NULL with an exception. */
static inline uint64_t *key_hashes_named(PyObject *keys, int id, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of str or bytes");
    if (!seq)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    uint64_t *hashes = PyMem_New(uint64_t, *n ? (size_t)*n : 1);
    if (!hashes)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; hashes && i < *n; i++) {
        PyObject *key = PySequence_Fast_GET_ITEM(seq, i);
        int status = id >= CHASH_HASH_COUNT ? key_hash64(key, &hashes[i])
                                            : key_hash_named((chash_hash_id)id, key, &hashes[i]);
        if (status < 0) {
            PyMem_Free(hashes);
            hashes = NULL;
        }
    }
    Py_DECREF(seq);
    return hashes;
}

/* key_hash64 of every key of an iterable (key_hashes_named's block). */
static inline uint64_t *key_hashes64(PyObject *keys, Py_ssize_t *n)
{
    return key_hashes_named(keys, CHASH_HASH_COUNT, n);
}

#endif /* CHASH_PY_KEY_HASH64_H */
