/*
 * args.c - the binding's argument readers (args.h), written once for the
 * router type, its families and MaglevRouter.  Part of chash._chash.
 */
#include "args.h"

#include "strategies/maglev.h"

#include <string.h>

/* The UTF-8 of a node id (a str); 0, or -1 with TypeError (or the
 * UnicodeEncodeError of a str with a lone surrogate). */
int node_id(PyObject *node, const char **buf, Py_ssize_t *len)
{
    if (!PyUnicode_Check(node)) {
        PyErr_Format(PyExc_TypeError, "node id must be str, not %.200s", Py_TYPE(node)->tp_name);
        return -1;
    }
    *buf = PyUnicode_AsUTF8AndSize(node, len);
    return *buf ? 0 : -1;
}

/* The UTF-8 of a str argument with no NUL inside, or NULL (TypeError /
 * ValueError naming what); C lookups by name stop at a NUL. */
const char *name_arg(PyObject *value, const char *what)
{
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.200s", what, Py_TYPE(value)->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(value, &len);
    if (name && strlen(name) != (size_t)len) {
        PyErr_Format(PyExc_ValueError, "unknown %s %R", what, value);
        return NULL;
    }
    return name;
}

/* An optional weight (int or float, not bool; NULL is 1.0) into *weight;
 * each family then checks it against its own rule.  0 or -1. */
int parse_weight(PyObject *weight_obj, double *weight)
{
    *weight = 1.0;
    if (!weight_obj)
        return 0;
    if (PyBool_Check(weight_obj) || !(PyFloat_Check(weight_obj) || PyLong_Check(weight_obj))) {
        PyErr_Format(PyExc_TypeError, "weight must be int or float, not %.200s",
                     Py_TYPE(weight_obj)->tp_name);
        return -1;
    }
    *weight = PyFloat_AsDouble(weight_obj);
    if (*weight == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "weight must be a finite number > 0, not %R", weight_obj);
        }
        return -1;
    }
    return 0;
}

/* A balance factor (bounded loads' c), into *out: an int or float, finite
 * and >= 1; 0, or -1 with TypeError (not a number, or a bool) or
 * ValueError (below 1, NaN, infinite or too large for a float). */
int parse_balance_factor(PyObject *obj, double *out)
{
    if (PyBool_Check(obj) || !(PyLong_Check(obj) || PyFloat_Check(obj))) {
        PyErr_Format(PyExc_TypeError, "balance_factor must be a number, not %.200s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    double value = PyFloat_AsDouble(obj);
    if (value == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        value = HUGE_VAL;
    }
    if (!isfinite(value) || value < 1.0) {
        PyErr_Format(PyExc_ValueError, "balance_factor must be a finite number >= 1, not %R", obj);
        return -1;
    }
    *out = value;
    return 0;
}

/* A hash argument: an int in [0, 2**bits - 1] (bits 32 or 64), into *out;
 * 0, or -1 with TypeError (not an int, or a bool) or ValueError naming
 * the range and the layout. */
int parse_hash_arg(PyObject *obj, unsigned bits, const char *layout, uint64_t *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "hash must be int, not %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    /* Negative ints and ints of more than 64 bits raise OverflowError. */
    unsigned long long value = PyLong_AsUnsignedLongLong(obj);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        overflow = 1;
    }
    if (overflow || (bits < 64 && value >> bits)) {
        PyErr_Format(PyExc_ValueError,
                     "hash must be between 0 and 2**%u - 1 for the %s layout (%u-bit points), not %R",
                     bits, layout, bits, obj);
        return -1;
    }
    *out = (uint64_t)value;
    return 0;
}

/* Every hash of an iterable of ints (or the words of an array('Q'), read
 * without an int a word), range-checked, in a PyMem buffer the caller
 * frees; *n receives how many.  NULL with an exception set. */
/* The words of an array('Q') (a contiguous buffer of format "Q"), range
 * checked as parse_hash_arg checks an int: no int object a hash.  NULL
 * with an exception; *taken 0 (and NULL, nothing set) for any other
 * object, which the caller reads as an iterable. */
static uint64_t *hash_words(PyObject *hashes, unsigned bits, const char *layout, Py_ssize_t *n,
                            int *taken)
{
    *taken = 0;
    if (!PyObject_CheckBuffer(hashes) || PyBytes_Check(hashes) || PyByteArray_Check(hashes))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(hashes, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return NULL;
    }
    if (view.itemsize != 8 || !view.format || strcmp(view.format, "Q") != 0 || view.ndim != 1) {
        PyBuffer_Release(&view);
        return NULL;
    }
    *taken = 1;
    *n = view.len / 8;
    uint64_t *out = PyMem_New(uint64_t, *n ? (size_t)*n : 1);
    if (!out) {
        PyBuffer_Release(&view);
        PyErr_NoMemory();
        return NULL;
    }
    if (*n)
        memcpy(out, view.buf, (size_t)*n * 8);
    PyBuffer_Release(&view);
    for (Py_ssize_t i = 0; bits < 64 && i < *n; i++) {
        if (out[i] >> bits) {
            PyObject *value = PyLong_FromUnsignedLongLong(out[i]);
            if (value) {
                PyErr_Format(PyExc_ValueError,
                             "hash must be between 0 and 2**%u - 1 for the %s layout (%u-bit "
                             "points), not %R", bits, layout, bits, value);
                Py_DECREF(value);
            }
            PyMem_Free(out);
            return NULL;
        }
    }
    return out;
}

uint64_t *parse_hash_args(PyObject *hashes, unsigned bits, const char *layout, Py_ssize_t *n)
{
    int taken;
    uint64_t *words = hash_words(hashes, bits, layout, n, &taken);
    if (taken || PyErr_Occurred())
        return words;
    PyObject *seq = PySequence_Fast(hashes, "hashes must be an iterable of int");
    if (!seq)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    uint64_t *out = PyMem_New(uint64_t, *n ? (size_t)*n : 1);
    if (!out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < *n; i++) {
        if (parse_hash_arg(items[i], bits, layout, &out[i]) < 0) {
            PyMem_Free(out);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return out;
}

/* The hash= of JumpRouter and AnchorRouter: NULL is "xxh64", else a name
 * of chash.HASHES; 0, or -1 with TypeError / ValueError. */
int parse_key_hash(PyObject *obj, chash_hash_id *out)
{
    *out = CHASH_HASH_XXH64;
    if (!obj)
        return 0;
    const char *name = name_arg(obj, "hash");
    if (!name)
        return -1;
    if (chash_hash_by_name(name, out) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError, "unknown hash %R: expected one of chash.HASHES", obj);
        return -1;
    }
    return 0;
}

/* The n of get_preference_list: a non-negative int (huge ones are as good
 * as the node count: SIZE_MAX); 0 or -1. */
int parse_count(PyObject *obj, size_t *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "n must be int, not %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long n = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (overflow < 0 || (overflow == 0 && n < 0)) {
        PyErr_SetString(PyExc_ValueError, "n must be >= 0");
        return -1;
    }
    *out = overflow > 0 || (unsigned long long)n > SIZE_MAX ? SIZE_MAX : (size_t)n;
    return 0;
}

/* virtual_node_count: None (*given = 0) or an int (a huge one becomes
 * PY_SSIZE_T_MAX, for the family's range check to name); 0 or -1. */
int parse_vnodes(PyObject *obj, Py_ssize_t *count, int *given)
{
    *count = 0;
    *given = obj != NULL && obj != Py_None;
    if (!*given)
        return 0;
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "virtual_node_count must be int, not %.200s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *count = PyLong_AsSsize_t(obj);
    if (*count == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        *count = PY_SSIZE_T_MAX; /* reported as out of range by the family */
    }
    return 0;
}

/* A ring size: None or NULL (fallback) or an int in [1, 8388608], Envoy's
 * and gRPC's accepted range; 0 or -1. */
int parse_ring_size(PyObject *obj, const char *name, uint64_t fallback, uint64_t *out)
{
    *out = fallback;
    if (obj == NULL || obj == Py_None)
        return 0;
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be int, not %.200s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < 1 || (uint64_t)v > WIDE_RING_LIMIT) {
        PyErr_Format(PyExc_ValueError, "%s must be between 1 and %llu, not %R", name,
                     (unsigned long long)WIDE_RING_LIMIT, obj);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* A 64-bit point hash name ("xxh64", and "murmur2_64" when allowed; None
 * or NULL is xxh64) into *out; 0, or -1 with TypeError / ValueError. */
int parse_point_hash(PyObject *hash, int murmur_allowed, const char *layout, chash_point_hash *out)
{
    *out = CHASH_POINT_XXH64;
    if (hash == NULL || hash == Py_None)
        return 0;
    if (!PyUnicode_Check(hash)) {
        PyErr_Format(PyExc_TypeError, "the %s layout's hash must be a str, not %.200s", layout,
                     Py_TYPE(hash)->tp_name);
        return -1;
    }
    if (PyUnicode_CompareWithASCIIString(hash, "xxh64") == 0)
        return 0;
    if (murmur_allowed && PyUnicode_CompareWithASCIIString(hash, "murmur2_64") == 0) {
        *out = CHASH_POINT_MURMUR2_64;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "the %s layout takes hash %s, not %R", layout,
                 murmur_allowed ? "'xxh64' or 'murmur2_64'" : "'xxh64'", hash);
    return -1;
}

/* Maglev's table_size: NULL (Envoy's default) or a prime int from 2 to
 * CHASH_MAGLEV_MAX_TABLE; 0 or -1. */
int parse_table_size(PyObject *obj, size_t *out)
{
    *out = CHASH_MAGLEV_DEFAULT_TABLE;
    if (!obj)
        return 0;
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "table_size must be int, not %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < 2 || (unsigned long long)v > CHASH_MAGLEV_MAX_TABLE
        || !chash_is_prime((size_t)v)) {
        PyErr_Format(PyExc_ValueError,
                     "table_size must be a prime from 2 to %zu (Envoy: \"The table size of "
                     "maglev must be prime number\"), not %R",
                     (size_t)CHASH_MAGLEV_MAX_TABLE, obj);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

/* The haproxy layout's server id: None or NULL (*puid = 0: numbered as
 * HAProxy numbers a server without one) or an int in [1, 2**31 - 1]. */
int parse_haproxy_id(PyObject *id_obj, uint32_t *puid)
{
    *puid = 0;
    if (!id_obj || id_obj == Py_None)
        return 0;
    if (!PyLong_Check(id_obj) || PyBool_Check(id_obj)) {
        PyErr_Format(PyExc_TypeError, "id must be int or None, not %.200s", Py_TYPE(id_obj)->tp_name);
        return -1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(id_obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < 1 || v > (long long)HAPROXY_MAX_ID) {
        PyErr_Format(PyExc_ValueError, "id must be between 1 and %u (HAProxy's server ids), not %R",
                     HAPROXY_MAX_ID, id_obj);
        return -1;
    }
    *puid = (uint32_t)v;
    return 0;
}

/* zone= : None, or a non-empty exact str; 0 or -1. */
int check_zone(PyObject *zone)
{
    if (zone == Py_None)
        return 0;
    if (!PyUnicode_CheckExact(zone)) {
        PyErr_Format(PyExc_TypeError, "zone must be str or None, not %.200s",
                     Py_TYPE(zone)->tp_name);
        return -1;
    }
    if (PyUnicode_GET_LENGTH(zone) == 0) {
        PyErr_SetString(PyExc_ValueError, "zone must not be empty");
        return -1;
    }
    return 0;
}
