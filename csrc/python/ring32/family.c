/*
 * family.c - the 32-bit ring family (ring32.h): its descriptor, node
 * entries, construction (argument checks, then ring32_empty(), which every
 * other way of making such a router goes through) and lifetime.
 */
#include "ring32.h"
#include "python/zones.h"

#include "python/args.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

/* An empty ring breaking ties as the layout's reference does; NULL when
 * out of memory. */
chash_ring *new_ring(chash_layout_id layout)
{
    chash_ring *ring = chash_ring_new();
    if (ring && chash_layout_ties(layout))
        (void)chash_ring_set_ties(ring, CHASH_TIES_BY_ORDER); /* empty: cannot fail */
    if (ring)
        (void)chash_ring_set_rule(ring, (chash_rule)chash_layout_rule(layout)); /* empty too */
    return ring;
}

int ring32_empty(RouterObject *self, const chash_scheme *scheme, PyObject *hash_fn,
                 size_t base_points)
{
    self->r32.ring = new_ring(scheme->layout);
    if (!self->r32.ring) {
        PyErr_NoMemory();
        return -1;
    }
    self->r32.scheme = *scheme;
    self->r32.hash_fn = Py_XNewRef(hash_fn);
    self->r32.base_points = base_points;
    self->r32.ids.next = 1;
    self->family = &ring32_family;
    return 0;
}

/*
 * self (allocated, no family yet) set to an empty ring from the
 * constructor's arguments: layout a str naming a layout, hash None (the
 * layout's own), a hash's name or a callable, vnodes the points at weight
 * 1 when vnodes_given (else the layout's default).  0, or -1 with
 * TypeError / ValueError naming the argument; _rebuild goes through here
 * too, so a pickle is checked as a call would be.
 */
int ring32_init(RouterObject *self, Py_ssize_t vnodes, int vnodes_given, PyObject *hash,
                PyObject *layout_obj)
{
    const char *layout_name = name_arg(layout_obj, "layout");
    if (!layout_name)
        return -1;
    chash_layout_id layout;
    if (chash_layout_by_name(layout_name, &layout) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError,
                     "unknown layout '%s': expected 'python', 'node', 'ketama', 'nginx', 'libmemcached', 'haproxy', 'varnish', 'nghttpx', 'envoy' or 'grpc'", layout_name);
        return -1;
    }
    size_t base = chash_layout_default_points(layout);
    if (vnodes_given) {
        if (vnodes < 1 || vnodes > MAX_VIRTUAL_NODES) {
            PyErr_Format(PyExc_ValueError,
                         "virtual_node_count must be between 1 and %d, not %zd",
                         MAX_VIRTUAL_NODES, vnodes);
            return -1;
        }
        base = (size_t)vnodes;
    }
    chash_hash_id hash_id = chash_layout_default_hash(layout);
    PyObject *hash_fn = NULL;
    if (hash == Py_None) {
        /* the layout's own hash */
    } else if (PyUnicode_Check(hash)) {
        const char *name = name_arg(hash, "hash");
        if (!name)
            return -1;
        if (chash_hash_by_name(name, &hash_id) != CHASH_OK) {
            PyErr_Format(PyExc_ValueError,
                         "unknown hash %R: expected one of md5, sha1, murmur2, murmur3, "
                         "xxh32, xxh64, xxh3, fnv1a, crc32, one_at_a_time, sdbm, djb2, wt6, "
                         "sdbm_avalanche, djb2_avalanche, wt6_avalanche, crc32_avalanche, "
                         "or a callable", hash);
            return -1;
        }
    } else if (PyCallable_Check(hash)) {
        hash_fn = hash;
    } else {
        PyErr_Format(PyExc_TypeError, "hash must be a str or a callable, not %.200s",
                     Py_TYPE(hash)->tp_name);
        return -1;
    }
    if (layout == CHASH_LAYOUT_KETAMA && (hash_fn || hash_id != CHASH_HASH_MD5)) {
        PyErr_SetString(PyExc_ValueError, "the ketama layout is defined over md5 only");
        return -1;
    }
    if (layout == CHASH_LAYOUT_NGINX && (hash_fn || hash_id != CHASH_HASH_CRC32)) {
        PyErr_SetString(PyExc_ValueError, "the nginx layout is defined over crc32 only");
        return -1;
    }
    if (layout == CHASH_LAYOUT_LIBMEMCACHED
        && (hash_fn || (hash_id != CHASH_HASH_ONE_AT_A_TIME && hash_id != CHASH_HASH_MD5))) {
        PyErr_SetString(PyExc_ValueError,
                        "the libmemcached layout takes hash 'one_at_a_time' or 'md5'");
        return -1;
    }
    if (layout == CHASH_LAYOUT_HAPROXY) {
        chash_scheme probe;
        if (hash_fn || chash_scheme_init(&probe, layout, hash_id) != CHASH_OK) {
            PyErr_SetString(PyExc_ValueError,
                            "the haproxy layout takes hash 'sdbm', 'djb2', 'wt6' or 'crc32', "
                            "each also with '_avalanche' (default 'sdbm_avalanche')");
            return -1;
        }
        if (vnodes_given && base != CHASH_HAPROXY_WEIGHT_SCALE) {
            PyErr_Format(PyExc_ValueError,
                         "the haproxy layout gives %d points per unit of weight, "
                         "not virtual_node_count=%zu", CHASH_HAPROXY_WEIGHT_SCALE, base);
            return -1;
        }
    }
    if (layout == CHASH_LAYOUT_VARNISH || layout == CHASH_LAYOUT_NGHTTPX) {
        const char *name = chash_layout_name(layout);
        if (hash_fn || hash_id != CHASH_HASH_SHA256) {
            PyErr_Format(PyExc_ValueError, "the %s layout is defined over sha256 only", name);
            return -1;
        }
        if (layout == CHASH_LAYOUT_NGHTTPX && vnodes_given && base != CHASH_NGHTTPX_POINTS) {
            PyErr_Format(PyExc_ValueError,
                         "the nghttpx layout gives every backend %d points, "
                         "not virtual_node_count=%zu", CHASH_NGHTTPX_POINTS, base);
            return -1;
        }
    }
    chash_scheme scheme;
    (void)chash_scheme_init(&scheme, layout, hash_id); /* both checked above */
    return ring32_empty(self, &scheme, hash_fn, base);
}

void ring32_release(RouterObject *self)
{
    Py_CLEAR(self->r32.hash_fn);
    haproxy_ids_free(&self->r32.ids);
    if (!self->r32.ring)
        return;
    chash_ring *ring = self->r32.ring;
    self->r32.ring = NULL;
    size_t n = chash_ring_node_count(ring);
    NodeEntry **entries = PyMem_New(NodeEntry *, n ? n : 1);
    /* Collect first, free the ring, then release: no Python object is
     * released while the ring still points at it. */
    if (entries) {
        for (size_t i = 0; i < n; i++)
            entries[i] = (NodeEntry *)chash_ring_node(ring, i).data;
        chash_ring_free(ring);
        for (size_t i = 0; i < n; i++)
            free_entry(entries[i]);
        PyMem_Free(entries);
    } else {
        for (size_t i = 0; i < n; i++)
            free_entry((NodeEntry *)chash_ring_node(ring, i).data);
        chash_ring_free(ring);
    }
}

/* A deep copy (family.h): a new ring holding every node (in the same
 * order, with its own entry and the same points), the same scheme, hash
 * callable and server ids. */
static int ring32_copy(RouterObject *dst, RouterObject *src)
{
    const chash_ring *from = src->r32.ring;
    dst->r32.scheme = src->r32.scheme;
    dst->r32.base_points = src->r32.base_points;
    dst->r32.hash_fn = Py_XNewRef(src->r32.hash_fn);
    dst->r32.ids = src->r32.ids;
    dst->r32.ids.used = NULL;
    dst->r32.ids.cap = dst->r32.ids.count = 0;
    if (src->r32.ids.count) {
        dst->r32.ids.used = malloc(src->r32.ids.count * sizeof *dst->r32.ids.used);
        if (!dst->r32.ids.used) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(dst->r32.ids.used, src->r32.ids.used,
               src->r32.ids.count * sizeof *dst->r32.ids.used);
        dst->r32.ids.count = dst->r32.ids.cap = src->r32.ids.count;
    }
    chash_ring *ring = chash_ring_new();
    if (!ring) {
        PyErr_NoMemory();
        return -1;
    }
    dst->r32.ring = ring;
    (void)chash_ring_set_ties(ring, chash_ring_ties(from)); /* empty: cannot fail */
    (void)chash_ring_set_rule(ring, chash_ring_rule(from));
    size_t n = chash_ring_node_count(from), total = chash_ring_point_count(from);
    if (n == 0)
        return 0;
    chash_node_spec *specs = PyMem_New(chash_node_spec, n);
    size_t *fill = PyMem_New(size_t, n);
    uint32_t *points = PyMem_New(uint32_t, total);
    NodeEntry **entries = PyMem_New(NodeEntry *, n);
    int result = specs && fill && points && entries ? 0 : -1;
    if (result < 0)
        PyErr_NoMemory();
    size_t made = 0;
    for (size_t i = 0, at = 0; result == 0 && i < n; i++, made++) {
        chash_node_view view = chash_ring_node(from, i);
        const NodeEntry *entry = view.data;
        entries[i] = new_entry(entry->name, entry->weight); /* an exact str: no copy */
        if (!entries[i]) {
            result = -1;
            break;
        }
        entries[i]->puid = entry->puid;
        specs[i] = (chash_node_spec){view.id, view.id_len, entries[i], points + at, view.npoints};
        fill[i] = at;
        at += view.npoints;
    }
    if (result == 0) {
        for (size_t p = 0; p < total; p++)
            points[fill[chash_ring_point_owner(from, p)]++] = chash_ring_point(from, p);
        int status = chash_ring_add_many(ring, specs, n);
        if (status != CHASH_OK) {
            set_status_error(status, NULL);
            result = -1;
        }
    }
    if (result < 0)
        for (size_t i = 0; i < made; i++)
            free_entry(entries[i]);
    PyMem_Free(specs);
    PyMem_Free(fill);
    PyMem_Free(points);
    PyMem_Free(entries);
    return result;
}

static int ring32_traverse(RouterObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->r32.hash_fn);
    return 0;
}

static void ring32_clear(RouterObject *self)
{
    Py_CLEAR(self->r32.hash_fn);
}

/* The weights of each 32-bit layout, as its reference takes them. */
static const char *ring32_weight_rule(RouterObject *self)
{
    switch (self->r32.scheme.layout) {
    case CHASH_LAYOUT_PYTHON:
    case CHASH_LAYOUT_NODE: return "real";
    case CHASH_LAYOUT_VARNISH: return "at_least_one";
    case CHASH_LAYOUT_NGHTTPX: return "none";
    default: return "whole"; /* ketama, nginx, libmemcached, haproxy */
    }
}

const router_family ring32_family = {
    .name = "ring32",
    .bits = 32,
    .cls = &ring_class,
    .setstate = zones_setstate,
    .weight_rule = ring32_weight_rule,
    .release = ring32_release,
    .copy = ring32_copy,
    .traverse = ring32_traverse,
    .clear = ring32_clear,
    .add = ring32_add,
    .add_many = ring32_add_many,
    .remove = ring32_remove,
    .replace = ring32_replace,
    .contains = ring32_contains,
    .len = ring32_len,
    .get = ring32_get,
    .get_many = ring32_get_many,
    .get_by_hash = ring32_get_by_hash,
    .read_get = ring32_read_get,
    .read_get_by_hash = ring32_read_get_by_hash,
    .get_many_by_hash = ring32_get_many_by_hash,
    .preference = ring32_preference,
    .locate = ring32_locate,
    .get_at = ring32_get_at,
    .preference_at = ring32_preference_at,
    .calculate_hash = ring32_calculate_hash,
    .ownership = ring32_ownership,
    .key_distribution = ring32_key_distribution,
    .fingerprint = ring32_fingerprint,
    .check = ring32_check,
    .nodes = ring32_nodes,
    .weights = ring32_weights,
    .weight_of = ring32_weight_of,
    .node_at = ring32_node_at,
    .points = ring32_points,
    .hash_ring = ring32_hash_ring,
    .node_map = ring32_node_map,
    .hash_name = ring32_hash_name,
    .layout = ring32_layout,
    .settings = ring32_settings,
    .memory = ring32_memory,
    .ids = ring32_ids,
    .repr = ring32_repr,
    .equal = ring32_equal,
    .reduce = ring32_reduce,
    .unpickle = ring32_unpickle,
    .diff = ring32_diff,
};
