/*
 * router.c - the ConsistentHashRouter type (router.h): construction, the
 * method and property tables, argument parsing and the zones' bookkeeping,
 * each written once; every call then goes to the router's family, which
 * does the ring work.  Part of chash._chash.
 */
#include "router.h"

#include "args.h"
#include "diff.h"
#include "state.h"
#include "zones.h"

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

static PyObject *router_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"virtual_node_count", "hash", "layout", "minimum_ring_size",
                             "maximum_ring_size", NULL};
    PyObject *vnodes = Py_None, *hash = Py_None, *layout = NULL, *min_ring = NULL, *max_ring = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OOOO:ConsistentHashRouter", kwlist,
                                     &vnodes, &hash, &layout, &min_ring, &max_ring))
        return NULL;
    RouterObject *self = router_alloc(type);
    if (!self)
        return NULL;
    int status;
    if (ring64_layout(layout)) {
        if (vnodes != Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "the %U layout sizes its ring by minimum_ring_size and maximum_ring_size, "
                         "not virtual_node_count", layout);
            status = -1;
        } else {
            status = ring64_init(self, layout, hash, min_ring, max_ring);
        }
    } else if ((min_ring && min_ring != Py_None) || (max_ring && max_ring != Py_None)) {
        PyErr_SetString(PyExc_ValueError,
                        "minimum_ring_size and maximum_ring_size apply to the envoy and grpc "
                        "layouts only");
        status = -1;
    } else {
        Py_ssize_t count;
        int given;
        PyObject *name = layout ? Py_NewRef(layout) : PyUnicode_FromString("python");
        status = name && parse_vnodes(vnodes, &count, &given) == 0
                     ? ring32_init(self, count, given, hash, name) : -1;
        Py_XDECREF(name);
    }
    if (status < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int router_traverse(RouterObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->zones);
    return self->family ? self->family->traverse(self, visit, arg) : 0;
}

static int router_clear(RouterObject *self)
{
    Py_CLEAR(self->zones);
    if (self->family)
        self->family->clear(self);
    return 0;
}

static void router_dealloc(RouterObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->zones);
    if (self->family)
        self->family->release(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* ------------------------------------------------------------------ */
/* Membership                                                         */

static PyObject *router_add(RouterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"real_node_id", "weight", "id", "zone", NULL};
    PyObject *node, *weight_obj = NULL, *id = Py_None, *zone = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O$OO:add_service_node", kwlist, &node,
                                     &weight_obj, &id, &zone))
        return NULL;
    double weight;
    if (check_zone(zone) < 0 || parse_weight(weight_obj, &weight) < 0)
        return NULL;
    ZoneUndo undo = {NULL, NULL};
    if (zone != Py_None && zones_set(self, node, zone, &undo) < 0)
        return NULL;
    if (self->family->add(self, node, weight, id) < 0) {
        zones_undo(self, &undo);
        return NULL;
    }
    zones_keep(&undo);
    self->changes++;
    Py_RETURN_NONE;
}

static PyObject *router_add_many(RouterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "weight", NULL};
    PyObject *nodes, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_nodes", kwlist, &nodes, &weight_obj))
        return NULL;
    double weight;
    if (parse_weight(weight_obj, &weight) < 0 || self->family->add_many(self, nodes, weight) < 0)
        return NULL;
    self->changes++;
    Py_RETURN_NONE;
}

/* Removes node; 1, 0 (absent) or -1.  Its zone goes with it. */
static int remove_node(RouterObject *self, PyObject *node)
{
    PyObject *key;
    if (zones_key(self, node, &key) < 0)
        return -1;
    int removed = self->family->remove(self, node);
    if (removed == 1) {
        zones_forget(self, key);
        self->changes++;
    } else {
        Py_XDECREF(key);
    }
    return removed;
}

static PyObject *router_remove(RouterObject *self, PyObject *node)
{
    int removed = remove_node(self, node);
    if (removed == 0)
        PyErr_SetObject(PyExc_KeyError, node);
    if (removed <= 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *router_discard(RouterObject *self, PyObject *node)
{
    if (remove_node(self, node) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *router_replace(RouterObject *self, PyObject *pairs)
{
    /* The ring may have changed even when pruning the zones failed. */
    int failed = self->family->replace(self, pairs) < 0;
    self->changes++;
    if (failed || zones_prune(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

static PyObject *router_get(RouterObject *self, PyObject *key)
{
    return self->family->get(self, key);
}

static PyObject *router_get_many(RouterObject *self, PyObject *keys)
{
    return self->family->get_many(self, keys);
}

static PyObject *router_get_by_hash(RouterObject *self, PyObject *hash)
{
    return self->family->get_by_hash(self, hash);
}

static PyObject *router_get_many_by_hash(RouterObject *self, PyObject *hashes)
{
    return self->family->get_many_by_hash(self, hashes);
}

/* get_preference_list(key, n, /, *, distinct_zones=False) */
static PyObject *router_preference(RouterObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int distinct = 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(name, "distinct_zones") != 0) {
            PyErr_Format(PyExc_TypeError,
                         "get_preference_list() got an unexpected keyword argument %R", name);
            return NULL;
        }
        distinct = PyObject_IsTrue(args[nargs + i]);
        if (distinct < 0)
            return NULL;
    }
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get_preference_list expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    size_t n;
    if (parse_count(args[1], &n) < 0)
        return NULL;
    if (!distinct)
        return self->family->preference(self, args[0], n);
    PyObject *all = self->family->preference(self, args[0], SIZE_MAX);
    PyObject *result = all ? zones_distinct(self, all, n) : NULL;
    Py_XDECREF(all);
    return result;
}

static PyObject *router_calculate_hash(RouterObject *self, PyObject *key)
{
    return self->family->calculate_hash(self, key);
}

/* ------------------------------------------------------------------ */
/* What the router tells about itself                                 */

static PyObject *router_ownership(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    return self->family->ownership(self);
}

static PyObject *router_key_distribution(RouterObject *self, PyObject *keys)
{
    return self->family->key_distribution(self, keys);
}

static PyObject *router_fingerprint(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    return self->family->fingerprint(self);
}

static PyObject *router_check(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->family->check(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *router_diff(RouterObject *self, PyObject *other)
{
    module_state *state = state_of_type(Py_TYPE(self));
    if (!state)
        return NULL;
    if (!PyObject_TypeCheck(other, state->router_type)) {
        PyErr_Format(PyExc_TypeError, "diff() needs a ConsistentHashRouter, not %.200s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    RouterObject *to = (RouterObject *)other;
    if (to->family != self->family)
        return diff_mismatch((PyObject *)self, other);
    PyObject *list = self->family->diff(self, to);
    if (list && diff_as_moves(list, state->move_type) < 0)
        Py_CLEAR(list);
    return list;
}

static PyObject *router_reduce(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    return zones_reduce(self, self->family->reduce(self));
}

const uint64_t *router_changes(PyObject *obj)
{
    if (!chash_py_made_by(obj, (void *)router_dealloc))
        return NULL;
    return &((RouterObject *)obj)->changes;
}

static PyObject *router_setstate(RouterObject *self, PyObject *state)
{
    return zones_setstate(self, state);
}

static PyObject *get_vnodes(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->settings(self, SETTING_VNODES);
}

static PyObject *get_min_ring(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->settings(self, SETTING_MIN_RING);
}

static PyObject *get_max_ring(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->settings(self, SETTING_MAX_RING);
}

static PyObject *get_hash_ring(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->hash_ring(self);
}

static PyObject *get_node_map(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->node_map(self);
}

static PyObject *get_nodes(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->nodes(self);
}

static PyObject *get_weights(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->weights(self);
}

static PyObject *get_points(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->points(self);
}

static PyObject *get_hash(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->hash_name(self);
}

static PyObject *get_layout(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->layout(self);
}

static PyObject *get_memory(RouterObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->family->memory(self));
}

static PyObject *get_ids(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->family->ids(self);
}

static PyObject *get_zones(RouterObject *self, void *Py_UNUSED(closure))
{
    return zones_get(self);
}

/* ------------------------------------------------------------------ */
/* Protocols: len, in, iter, repr, ==                                 */

static Py_ssize_t router_len(RouterObject *self)
{
    return self->family->len(self);
}

static int router_contains(RouterObject *self, PyObject *node)
{
    return self->family->contains(self, node);
}

static PyObject *router_iter(RouterObject *self)
{
    PyObject *nodes = self->family->nodes(self);
    if (!nodes)
        return NULL;
    PyObject *it = PyObject_GetIter(nodes);
    Py_DECREF(nodes);
    return it;
}

static PyObject *router_repr(RouterObject *self)
{
    return self->family->repr(self);
}

static PyObject *router_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    RouterObject *x = (RouterObject *)a, *y = (RouterObject *)b;
    int equal = x->family == y->family ? x->family->equal(x, y) : 0;
    if (equal < 0)
        return NULL;
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

/* ------------------------------------------------------------------ */
/* The tables                                                         */

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1.0, *, id=None, zone=None)\n--\n\n"
"Add a node, or give a present one a new weight.\n\n"
"In the 32-bit layouts the node owns round(virtual_node_count * weight)\n"
"points (at least 1); adding a node already present with the same weight\n"
"does nothing; with another weight, the node gains or loses only points of\n"
"its own, so keys move only onto or off that node.  The nginx, ketama and\n"
"libmemcached layouts take integer weights as their references do; in\n"
"ketama (and in libmemcached once a weight is above 1) every node's point\n"
"count follows from its share of the total weight, so any change\n"
"recomputes them all.  The envoy and grpc layouts take integer weights\n"
"from 1 to 2**32 - 1 and rebuild the ring, as their references do on every\n"
"host change.\n\n"
"id is the haproxy layout's server id (puid, 1 .. 2**31-1), which decides\n"
"the node's points: given, it must be free; None numbers the node as\n"
"HAProxy numbers a server without an id, counting in add order.  Other\n"
"layouts take no id.\n\n"
"zone names the node's zone (a datacentre, a rack) for\n"
"get_preference_list(..., distinct_zones=True) and chash.zones; it never\n"
"changes routing.  None leaves a node present as it was (a new node has\n"
"no zone).");

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1.0)\n--\n\n"
"add_service_node(node, weight) for every node of an iterable, faster: the\n"
"new nodes enter the ring in one step, all or none of them.  Nodes already\n"
"present get the weight as add_service_node would give it.");

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node and all its points; KeyError if it is not in the ring.");

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node if it is in the ring; do nothing otherwise.");

PyDoc_STRVAR(get_doc,
"get_target_node($self, request_key, /)\n--\n\n"
"The node owning the first ring point >= the key's hash, wrapping around\n"
"(the nearest point either way for the haproxy layout; Varnish's own\n"
"lookup for the varnish layout, which keeps a hash above the last point at\n"
"the last point); None when the ring is empty.  request_key is a str or bytes; the envoy and grpc layouts hash\n"
"it with XXH64, as Envoy's header hash policy and gRPC's\n"
"request_hash_header do.");

PyDoc_STRVAR(get_many_doc,
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

PyDoc_STRVAR(get_by_hash_doc,
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"The node owning the first ring point >= hash, wrapping around, for a hash\n"
"computed by the caller: an int from 0 to 2**32 - 1 (2**64 - 1 for the\n"
"envoy and grpc layouts); None on an empty ring.");

PyDoc_STRVAR(get_many_by_hash_doc,
"get_target_nodes_by_hash($self, hashes, /)\n--\n\n"
"get_target_node_by_hash for every hash of an iterable of ints, as a list;\n"
"all are checked before any is looked up.");

PyDoc_STRVAR(preference_doc,
"get_preference_list($self, key, n, /, *, distinct_zones=False)\n--\n\n"
"The first n distinct nodes met walking the ring clockwise from key's\n"
"owner, owner first (fewer when the ring holds fewer): replicas or\n"
"fallbacks.  With distinct_zones, the owner first, then the next nodes\n"
"clockwise whose zone is not yet in the list (a node without a zone counts\n"
"as a zone of its own), so n copies land in n zones when there are n.");

PyDoc_STRVAR(ownership_doc,
"ownership($self, /)\n--\n\n"
"{node: fraction of the ring's positions (2**32, or 2**64) it owns}; the\n"
"values sum to 1.");

PyDoc_STRVAR(distribution_doc,
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys route to it}, every node listed (0 included).");

PyDoc_STRVAR(fingerprint_doc,
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: the layout, hash and\n"
"sizes, and every ring point with its owner's name.  Equal on every\n"
"process that holds the same ring.");

PyDoc_STRVAR(diff_doc,
"diff($self, other, /)\n--\n\n"
"The arcs of the ring whose owner differs between this router and other\n"
"(the same layout and hash), as chash.Move(start, end, source, target)\n"
"named tuples in ring order.  An arc holds the hashes h with\n"
"start < h <= end, wrapping past the top of the ring (2**32, or 2**64 for\n"
"the envoy and grpc layouts) when start > end; start == end is the whole\n"
"ring.  Keys hashing inside an arc move from source (this router's owner)\n"
"to target (other's); no other key changes owner.");

PyDoc_STRVAR(calc_doc,
"_calculate_hash($self, key, /)\n--\n\n"
"The ring position of a str or bytes key (0 <= h < 2**32, or 2**64).");

PyDoc_STRVAR(check_doc,
"_check($self, /)\n--\n\n"
"Verify every invariant of the ring; AssertionError if one is broken.");

PyDoc_STRVAR(reduce_doc, "__reduce__($self, /)\n--\n\nPickle support: rebuilt from its nodes.");

PyDoc_STRVAR(setstate_doc,
"__setstate__($self, state, /)\n--\n\n"
"Restore the zones a pickle carries ({'zones': {node: zone}}).");

PyDoc_STRVAR(replace_doc,
"_replace_nodes($self, nodes, /)\n--\n\n"
"Make the ring hold exactly nodes, a list of (node, weight) pairs ((node,\n"
"weight, id) for the haproxy layout), added in that order, in one step:\n"
"lookups see the old ring or the new one.  For keeping the order that\n"
"breaks ties the same on several processes.");

static PyMethodDef router_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))router_add, METH_VARARGS | METH_KEYWORDS, add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))router_add_many, METH_VARARGS | METH_KEYWORDS, add_many_doc},
    {"remove_service_node", (PyCFunction)router_remove, METH_O, remove_doc},
    {"discard_service_node", (PyCFunction)router_discard, METH_O, discard_doc},
    {"get_target_node", (PyCFunction)router_get, METH_O, get_doc},
    {"get_target_nodes", (PyCFunction)router_get_many, METH_O, get_many_doc},
    {"get_target_node_by_hash", (PyCFunction)router_get_by_hash, METH_O, get_by_hash_doc},
    {"get_target_nodes_by_hash", (PyCFunction)router_get_many_by_hash, METH_O, get_many_by_hash_doc},
    {"get_preference_list", (PyCFunction)(void (*)(void))router_preference, METH_FASTCALL | METH_KEYWORDS, preference_doc},
    {"ownership", (PyCFunction)router_ownership, METH_NOARGS, ownership_doc},
    {"key_distribution", (PyCFunction)router_key_distribution, METH_O, distribution_doc},
    {"fingerprint", (PyCFunction)router_fingerprint, METH_NOARGS, fingerprint_doc},
    {"diff", (PyCFunction)router_diff, METH_O, diff_doc},
    {"_calculate_hash", (PyCFunction)router_calculate_hash, METH_O, calc_doc},
    {"_check", (PyCFunction)router_check, METH_NOARGS, check_doc},
    {"__reduce__", (PyCFunction)router_reduce, METH_NOARGS, reduce_doc},
    {"__setstate__", (PyCFunction)router_setstate, METH_O, setstate_doc},
    {"_replace_nodes", (PyCFunction)router_replace, METH_O, replace_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef router_getset[] = {
    {"virtual_node_count", (getter)get_vnodes, NULL,
     "Points a node of weight 1 owns (0: the envoy and grpc layouts size the\n"
     "ring by minimum_ring_size and maximum_ring_size).", NULL},
    {"minimum_ring_size", (getter)get_min_ring, NULL,
     "The envoy and grpc layouts' minimum ring size; None for the others.", NULL},
    {"maximum_ring_size", (getter)get_max_ring, NULL,
     "The envoy and grpc layouts' maximum ring size (gRPC caps both at\n"
     "4096); None for the others.", NULL},
    {"hash_ring", (getter)get_hash_ring, NULL,
     "Every ring point, sorted (a new list each time).", NULL},
    {"node_map", (getter)get_node_map, NULL,
     "{point: node} (a new dict each time); a point shared by several nodes\n"
     "maps to the node the ring routes it to.", NULL},
    {"nodes", (getter)get_nodes, NULL, "The nodes, in the order they were added.", NULL},
    {"weights", (getter)get_weights, NULL, "{node: weight}.", NULL},
    {"points", (getter)get_points, NULL,
     "{node: number of ring points it owns} (0 for a host the envoy or grpc\n"
     "ring has no room for).", NULL},
    {"hash", (getter)get_hash, NULL, "The hash: its name, or the callable.", NULL},
    {"layout", (getter)get_layout, NULL,
     "The layout: 'python', 'node', 'ketama', 'nginx', 'libmemcached',\n"
     "'haproxy', 'varnish', 'nghttpx', 'envoy' or 'grpc'.", NULL},
    {"memory_bytes", (getter)get_memory, NULL, "Heap bytes the ring holds.", NULL},
    {"ids", (getter)get_ids, NULL,
     "{node: server id} of the haproxy layout (HAProxy's puids, which decide\n"
     "the points); empty for the other layouts.", NULL},
    {"zones", (getter)get_zones, NULL,
     "{node: zone} of the nodes added with a zone (a new dict each time).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(router_doc,
"ConsistentHashRouter(virtual_node_count=None, *, hash=None, layout='python',\n"
"                     minimum_ring_size=None, maximum_ring_size=None)\n--\n\n"
"A consistent-hash ring routing keys to nodes.\n\n"
"With the defaults it routes exactly like the documented pure-Python\n"
"ConsistentHashRouter: MD5 of the key's UTF-8 bytes mod 2**32, virtual keys\n"
"'{node}_virtual_{i}', the first point >= the key's hash, wrapping around.\n"
"layout 'nginx', 'ketama' and 'libmemcached' build the rings of nginx's\n"
"hash ... consistent, libketama (twemproxy, libmemcached ketama_weighted)\n"
"and libmemcached's ketama, integer weights and ties to the node added\n"
"first included.  hash defaults to the layout's (md5; crc32 for nginx,\n"
"one_at_a_time for libmemcached); virtual_node_count to the layout's own\n"
"(python 100, node 150, ketama 160, nginx 160, libmemcached 100) and must\n"
"lie in [1, 1000000].\n\n"
"layout 'haproxy' builds HAProxy's hash-type consistent ring: weight x 16\n"
"points per server, from its id (add_service_node(..., id=)), and the\n"
"nearest point either way, a tie to the one before; hash 'sdbm_avalanche'\n"
"by default, or sdbm, djb2, wt6, crc32, each with or without _avalanche.\n\n"
"layout 'varnish' builds Varnish 7.1's shard director: points\n"
"'{ident}{i}' hashed with SHA-256 (the last 4 bytes, little-endian),\n"
"trunc(virtual_node_count x weight) per backend (its replicas, 67; weights\n"
">= 1), its own lookup (no wrap above the last point) and its walk as the\n"
"preference list.  layout 'nghttpx' builds nghttpx 1.52's affinity ring:\n"
"160 SHA-256 points per backend 'HOST:PORT' from its address (weight 1),\n"
"keys cut from SHA-256 as its affinity=ip is.\n\n"
"layout 'envoy' and 'grpc' build Envoy's RING_HASH and gRPC's ring_hash:\n"
"64-bit points '{node}_{i}' (hash 'xxh64', or 'murmur2_64' for envoy),\n"
"counts by weight share between minimum_ring_size (1024) and\n"
"maximum_ring_size (envoy 8388608, grpc 4096; grpc caps both at 4096),\n"
"keys hashed with XXH64, the ring rebuilt on every change.");

static PyType_Slot router_slots[] = {
    {Py_tp_doc, (void *)router_doc},
    {Py_tp_new, router_new},
    {Py_tp_dealloc, router_dealloc},
    {Py_tp_traverse, router_traverse},
    {Py_tp_clear, router_clear},
    {Py_tp_methods, router_methods},
    {Py_tp_getset, router_getset},
    {Py_tp_repr, router_repr},
    {Py_tp_richcompare, router_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, router_iter},
    {Py_sq_length, router_len},
    {Py_sq_contains, router_contains},
    {Py_mp_length, router_len},
    {0, NULL},
};

static PyType_Spec router_spec = {
    .name = "chash.ConsistentHashRouter",
    .basicsize = sizeof(RouterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = router_slots,
};

int router_type_setup(PyObject *module)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &router_spec, NULL);
    if (!type)
        return -1;
    get_state(module)->router_type = type;
    return PyModule_AddType(module, type);
}
