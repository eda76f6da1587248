/*
 * points.c - the 32-bit ring's glue to the point schemes: a key's ring
 * position, a node's points (engine scheme or the user's Python hash), and
 * the weights each layout takes (ring32.h).
 */
#include "ring32.h"

#include <math.h>

/* ------------------------------------------------------------------ */
/* Keys and node ids                                                  */

/* Calls the user's hash on data; the ring position is its value mod 2**32. */
static int call_hash_fn(PyObject *fn, const char *data, Py_ssize_t len, uint32_t *out)
{
    PyObject *arg = PyBytes_FromStringAndSize(data, len);
    if (!arg)
        return -1;
    PyObject *value = PyObject_CallOneArg(fn, arg);
    Py_DECREF(arg);
    if (!value)
        return -1;
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "hash function must return int, not %.200s",
                     Py_TYPE(value)->tp_name);
        Py_DECREF(value);
        return -1;
    }
    unsigned long long low = PyLong_AsUnsignedLongLongMask(value);
    Py_DECREF(value);
    if (low == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = chash_scheme_cut_int(low);
    return 0;
}

/* The ring position of a key (str or bytes); 0 or -1. */
int key_hash(RouterObject *self, PyObject *key, uint32_t *out)
{
    const char *buf;
    Py_ssize_t len;
    if (chash_py_key_bytes(key, &buf, &len) < 0)
        return -1;
    if (self->r32.hash_fn)
        return call_hash_fn(self->r32.hash_fn, buf, len, out);
    *out = chash_scheme_key_hash(&self->r32.scheme, buf, (size_t)len);
    return 0;
}

/*
 * Writes points first .. first + count - 1 of a node to out; 0, or -1 with
 * an exception set.
 */
int fill_points(RouterObject *self, const char *id, Py_ssize_t id_len, size_t first,
                       size_t count, uint32_t *out)
{
    if (!self->r32.hash_fn) {
        int status = chash_scheme_points(&self->r32.scheme, id, (size_t)id_len, first, count, out);
        if (status == CHASH_EINVAL && self->r32.scheme.layout == CHASH_LAYOUT_NGHTTPX) {
            PyObject *name = PyUnicode_DecodeUTF8(id, id_len, "replace");
            if (!name)
                return -1;
            PyErr_Format(PyExc_ValueError,
                         "the nghttpx layout names a backend 'HOST:PORT' with a numeric IPv4 "
                         "host or '[IPV6]:PORT' (nghttpx hashes the address), or "
                         "chash.compat.nghttpx_id(host, port, dns=True) for one with its dns "
                         "flag; not %R",
                         name);
            Py_DECREF(name);
            return -1;
        }
        if (status != CHASH_OK) {
            set_status_error(status, NULL);
            return -1;
        }
        return 0;
    }
    size_t cap = (size_t)id_len + 40;
    char *vkey = PyMem_Malloc(cap);
    if (!vkey) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < count; k++) {
        size_t len = chash_scheme_vkey(&self->r32.scheme, id, (size_t)id_len, first + k, vkey, cap);
        if (call_hash_fn(self->r32.hash_fn, vkey, (Py_ssize_t)len, &out[k]) < 0) {
            PyMem_Free(vkey);
            return -1;
        }
    }
    PyMem_Free(vkey);
    return 0;
}

/*
 * Points first .. first + count - 1 of a node, in a PyMem buffer the caller
 * frees, or NULL with an exception set.
 */
uint32_t *node_points(RouterObject *self, const char *id, Py_ssize_t id_len,
                             size_t first, size_t count)
{
    uint32_t *points = PyMem_New(uint32_t, count);
    if (!points) {
        PyErr_NoMemory();
        return NULL;
    }
    if (fill_points(self, id, id_len, first, count, points) < 0) {
        PyMem_Free(points);
        return NULL;
    }
    return points;
}

static void weight_error(PyObject *node, double weight)
{
    if (!(weight > 0.0) || !isfinite(weight)) {
        PyObject *value = PyFloat_FromDouble(weight);
        if (value) {
            PyErr_Format(PyExc_ValueError, "weight must be a finite number > 0, not %R", value);
            Py_DECREF(value);
        }
        return;
    }
    PyErr_Format(PyExc_ValueError, "weight gives %s%R more than %zu points",
                 node == Py_None ? "each node" : "node ", node == Py_None ? Py_None : node,
                 (size_t)CHASH_MAX_NODE_POINTS);
}


/* ------------------------------------------------------------------ */
/* Weights of the layouts that follow another program's ring          */

/* nginx, ketama and libmemcached take their references' integer weights. */
static int integer_weights(const RouterObject *self)
{
    chash_layout_id layout = self->r32.scheme.layout;
    return layout == CHASH_LAYOUT_NGINX || layout == CHASH_LAYOUT_KETAMA
        || layout == CHASH_LAYOUT_LIBMEMCACHED;
}

/* 0, or -1 with a ValueError naming the weight when the layout takes
 * integer weights (1 .. 2**32 - 1, as the references' unsigned 32-bit
 * weight) and this one is not such an integer. */
int check_integer_weight(const RouterObject *self, double weight)
{
    if (!integer_weights(self) || (weight >= 1.0 && weight <= 4294967295.0 && weight == floor(weight)))
        return 0;
    PyObject *value = PyFloat_FromDouble(weight);
    if (value) {
        PyErr_Format(PyExc_ValueError,
                     "the %s layout takes integer weights from 1 to 2**32 - 1, as %s does, not %R",
                     chash_layout_name(self->r32.scheme.layout),
                     self->r32.scheme.layout == CHASH_LAYOUT_NGINX ? "nginx's weight=N"
                         : self->r32.scheme.layout == CHASH_LAYOUT_KETAMA ? "libketama"
                                                                       : "libmemcached",
                     value);
        Py_DECREF(value);
    }
    return -1;
}

/*
 * How many points a node of this weight owns, for the layouts whose counts
 * do not depend on other nodes (not ketama nor libmemcached: see
 * ketama_update).  0, or -1 with a ValueError.
 */
int points_for(RouterObject *self, PyObject *node, double weight, size_t *count)
{
    if (check_integer_weight(self, weight) < 0)
        return -1;
    chash_layout_id layout = self->r32.scheme.layout;
    if (layout == CHASH_LAYOUT_NGHTTPX && weight != 1.0) {
        PyObject *value = PyFloat_FromDouble(weight);
        if (value) {
            PyErr_Format(PyExc_ValueError,
                         "the nghttpx layout gives every backend 160 points whatever its "
                         "weight (nghttpx's affinity ring has no weights): weight must be 1, "
                         "not %R", value);
            Py_DECREF(value);
        }
        return -1;
    }
    if (layout == CHASH_LAYOUT_VARNISH) {
        if (chash_varnish_points_for_weight(self->r32.base_points, weight, CHASH_MAX_NODE_POINTS,
                                            count) == CHASH_OK)
            return 0;
        PyObject *value = PyFloat_FromDouble(weight);
        if (value) {
            if (weight >= 1.0 && isfinite(weight))
                weight_error(node, weight);
            else
                PyErr_Format(PyExc_ValueError,
                             "the varnish layout takes weights >= 1, as the shard director's "
                             "add_backend(weight=) does, not %R", value);
            Py_DECREF(value);
        }
        return -1;
    }
    if (chash_points_for_weight(self->r32.base_points, weight, CHASH_MAX_NODE_POINTS, count) != CHASH_OK) {
        weight_error(node, weight);
        return -1;
    }
    return 0;
}

/* 1 for the layouts whose point counts depend on every node's weight:
 * ketama, and libmemcached (any weight above 1 switches it to libketama's
 * weighted ring).  Their membership changes go through ketama_update, which
 * recounts every node and changes the ring in place by the points that
 * move (rebuilding it only when libmemcached turns weighted or back). */
int counts_by_share(const RouterObject *self)
{
    return self->r32.scheme.layout == CHASH_LAYOUT_KETAMA
        || self->r32.scheme.layout == CHASH_LAYOUT_LIBMEMCACHED;
}

