/*
 * binding.h - what every file of the binding (csrc/python/, the one
 * extension chash._chash) may need, written once: the mapping of engine
 * status codes to exceptions, reading a key's bytes, and the
 * four-lanes-at-a-time loop that hashes a batch of keys.
 *
 * The binding's files are the only ones that include Python.h; the engine
 * (csrc/engine/, csrc/hash/, csrc/strategies/, csrc/http/) never sees
 * Python.  The types' own declarations are in family.h, router.h (and the families'
 * headers) and maglev.h; the module's state is in state.h.
 */
#ifndef CHASH_BINDING_H
#define CHASH_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "engine/chash.h"
#include "hash/hash.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The binding's own functions, declared from here on, are the extension's
 * alone (only PyInit__chash is exported: PyMODINIT_FUNC marks it): a call
 * from one of its files to another is then direct and may be inlined, not
 * a jump through the PLT (a single lookup made two such jumps).  The engine
 * is compiled without it (its code as measured), and the system's and
 * Python's headers are included above. */
#pragma GCC visibility push(hidden)

/*
 * A node's name as the routers keep it: an exact str (a str subclass is
 * copied), a new reference, or NULL with an exception.  On a free-threaded
 * build it is the interned str of that value, which is immortal (CPython
 * 3.13): a lookup that returns it from any thread then writes no reference
 * count, where a name owned by another thread costs an atomic add on its
 * shared count (docs/reliability.md).  A name not yet interned is copied
 * first, so the caller's own object is never made immortal.  Interned
 * names stay for the process's life.
 */
static inline PyObject *chash_py_node_name(PyObject *node)
{
    PyObject *name = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
#ifdef Py_GIL_DISABLED
    if (name && !PyUnicode_CHECK_INTERNED(name)) {
        Py_SETREF(name, PyUnicode_FromKindAndData(PyUnicode_KIND(name), PyUnicode_DATA(name),
                                                  PyUnicode_GET_LENGTH(name)));
        if (name)
            PyUnicode_InternInPlace(&name);
    }
#endif
    return name;
}

/* PyDict_GetItemRef's contract on every version: 1 with a new reference
 * to dict[key] in *out, 0 with *out NULL when key is missing, -1 with an
 * exception.  A strong reference, since without the GIL another thread may
 * replace the value meanwhile (before 3.13 the GIL keeps it alive until
 * the reference is taken, no Python code running in between). */
static inline int chash_py_dict_get_ref(PyObject *dict, PyObject *key, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyDict_GetItemRef(dict, key, out);
#else
    *out = Py_XNewRef(PyDict_GetItemWithError(dict, key));
    return *out ? 1 : PyErr_Occurred() ? -1 : 0;
#endif
}

/* 1 with *out set when value, an exact int, is a small int >= 0 (one
 * digit: below 2**30), read from the object with no call; else 0 (the
 * caller converts it the general way).  What loads are: in-flight counts. */
static inline int chash_py_small_int(PyObject *value, double *out)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)value)) {
        Py_ssize_t v = PyUnstable_Long_CompactValue((PyLongObject *)value);
        *out = (double)v;
        return v >= 0;
    }
    return 0;
#else
    Py_ssize_t size = Py_SIZE(value);
    if (size == 0 || size == 1) {
        *out = size ? (double)((PyLongObject *)value)->ob_digit[0] : 0.0;
        return 1;
    }
    return 0;
#endif
}

/*
 * CHASH_LOCKED(obj, statement): the statement under obj's critical section
 * (Python 3.13's per-object lock, a no-op with the GIL), for the types
 * whose every call changes the object (BoundedLoads, the affinity table).
 * Before 3.13 the GIL serialises the calls.
 */
#if PY_VERSION_HEX >= 0x030D0000
#define CHASH_LOCKED(obj, statement)                                                      \
    do {                                                                                  \
        Py_BEGIN_CRITICAL_SECTION(obj);                                                   \
        statement;                                                                        \
        Py_END_CRITICAL_SECTION();                                                        \
    } while (0)
#else
#define CHASH_LOCKED(obj, statement)                                                      \
    do {                                                                                  \
        statement;                                                                        \
    } while (0)
#endif

/*
 * Batches of at least CHASH_UNLOCKED_BATCH keys are routed without the GIL
 * on a GIL build: route(ctx) runs with the GIL let go (it must run no
 * Python code and touch no Python object), *readers counting it meanwhile
 * (the router's unlocked_readers, family.h: a change copies the state
 * while it is not 0).  Without the GIL (free-threaded) route just runs.
 */
#define CHASH_UNLOCKED_BATCH 1000

static inline void chash_py_route_unlocked(unsigned *readers, size_t n, void (*route)(void *ctx),
                                           void *ctx)
{
#ifndef Py_GIL_DISABLED
    if (n >= CHASH_UNLOCKED_BATCH) {
        (*readers)++;
        Py_BEGIN_ALLOW_THREADS
        route(ctx);
        Py_END_ALLOW_THREADS
        (*readers)--;
        return;
    }
#else
    (void)readers;
    (void)n;
#endif
    route(ctx);
}

/*
 * The one place engine status codes become Python exceptions.  node (may
 * be NULL) is the KeyError's argument for CHASH_ENOENT; what (may be NULL)
 * prefixes the message of a ValueError for CHASH_EINVAL and other codes.
 * Always returns NULL, so callers can `return chash_py_error(...)`.
 */
static inline void *chash_py_error(int status, PyObject *node, const char *what)
{
    switch (status) {
    case CHASH_ENOMEM:
        PyErr_NoMemory();
        break;
    case CHASH_ENOENT:
        if (node)
            PyErr_SetObject(PyExc_KeyError, node);
        else
            PyErr_SetString(PyExc_KeyError, chash_strerror(status));
        break;
    case CHASH_ERANGE:
        PyErr_Format(PyExc_ValueError,
                     "ring size limit exceeded: at most %zu points and %zu nodes",
                     (size_t)CHASH_MAX_POINTS, (size_t)CHASH_MAX_NODES);
        break;
    case CHASH_ECORRUPT:
        PyErr_SetString(PyExc_AssertionError, "ring invariant broken");
        break;
    default:
        if (what)
            PyErr_Format(PyExc_ValueError, "%s: %s", what, chash_strerror(status));
        else
            PyErr_Format(PyExc_ValueError, "%s", chash_strerror(status));
        break;
    }
    return NULL;
}

/* The UTF-8 bytes of a str key, or a bytes key as is; 0 or -1 (TypeError
 * for any other type).  CPython caches a str's UTF-8 form inside it: no
 * copy, and the bytes live as long as the key. */
static inline int chash_py_key_bytes(PyObject *key, const char **buf, Py_ssize_t *len)
{
    if (PyUnicode_Check(key)) {
        *buf = PyUnicode_AsUTF8AndSize(key, len);
        return *buf ? 0 : -1;
    }
    if (PyBytes_Check(key)) {
        *buf = PyBytes_AS_STRING(key);
        *len = PyBytes_GET_SIZE(key);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "key must be str or bytes, not %.200s", Py_TYPE(key)->tp_name);
    return -1;
}

/* A fingerprint(): the first 8 bytes of MD5(buf[0..len)) as 16 lowercase
 * hex digits, a new str; NULL with an exception. */
static inline PyObject *chash_py_fingerprint(const void *buf, size_t len)
{
    uint8_t digest[CHASH_MD5_DIGEST_SIZE];
    chash_md5(buf, len, digest);
    char hex[17];
    for (int i = 0; i < 8; i++)
        PyOS_snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return PyUnicode_FromStringAndSize(hex, 16);
}

/* 1 when obj's type, or a base of it, was made with this tp_dealloc: an
 * object of one of this extension's types or of a subclass (whose own
 * dealloc is CPython's), told apart without the module's state. */
static inline int chash_py_made_by(PyObject *obj, void *dealloc)
{
    for (PyTypeObject *t = Py_TYPE(obj); t; t = t->tp_base)
        if ((t->tp_flags & Py_TPFLAGS_HEAPTYPE) && PyType_GetSlot(t, Py_tp_dealloc) == dealloc)
            return 1;
    return 0;
}

/* Hashes the four keys data[0..4) (lens bytes each) into results at..at+3. */
typedef void (*chash_py_hash4)(void *ctx, const void *const data[4], const size_t lens[4],
                               size_t at);
/* Hashes one key object into result at; 0 or -1 with an exception set. */
typedef int (*chash_py_hash1)(void *ctx, PyObject *key, size_t at);

/*
 * Hashes items[0..n): groups of four through four (when not NULL; the
 * caller runs no Python code in it, so the borrowed key bytes stay valid
 * across a group), the rest one by one through one.  0, or -1 with an
 * exception set (a key of the wrong type, or one's own failure).
 */
static inline int chash_py_hash_keys(PyObject *const *items, Py_ssize_t n, chash_py_hash4 four,
                                     chash_py_hash1 one, void *ctx)
{
    Py_ssize_t i = 0;
    for (; four && i + 4 <= n; i += 4) {
        const void *data[4];
        size_t lens[4];
        for (int l = 0; l < 4; l++) {
            const char *buf;
            Py_ssize_t len;
            if (chash_py_key_bytes(items[i + l], &buf, &len) < 0)
                return -1;
            data[l] = buf;
            lens[l] = (size_t)len;
        }
        four(ctx, data, lens, (size_t)i);
    }
    for (; i < n; i++)
        if (one(ctx, items[i], (size_t)i) < 0)
            return -1;
    return 0;
}

#endif /* CHASH_BINDING_H */
