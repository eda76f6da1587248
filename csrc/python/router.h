/*
 * router.h - the ConsistentHashRouter type's private declarations, shared
 * by the files of the binding (chash._chash), each of which owns one concern:
 *
 *   module.c      the module: its functions, constants, state and init
 *   type.c        the type: its method and property tables, slots, spec
 *   router.c      the objects: node entries, construction, lifetime
 *   build.c       a router built from a list of (node, weight) pairs:
 *                 pickling (__reduce__, _rebuild) and _replace_nodes
 *   points.c      the scheme glue: key hashes, a node's points, weights
 *   mutate.c      add, add many, remove, discard
 *   ketama.c      the ketama / libmemcached update (counts by share)
 *   haproxy.c     the haproxy layout: server ids (puids), their numbering,
 *                 adding and reweighing servers by puid
 *   lookup.c      single, batch and preference lookups
 *   by_hash.c     lookups by a caller's hash, and reading hash arguments
 *   inspect.c     introspection, fingerprint, len/in/iter/repr/==
 *   simulate.c    the strategy functions beside the ring, for chash.simulate
 *   diff.c        diff(other): the arcs that change owner, chash.Move
 *   zones.c       the nodes' zones: zone=, zones, distinct_zones=, pickling
 *   table.c, wide_ring.c, maglev.c
 *                 the routers rebuilt whole: the envoy and grpc layouts'
 *                 64-bit ring and MaglevRouter (table.h)
 *
 * Engine status codes become exceptions only in chash_py_error()
 * (binding.h), through set_status_error() below.
 */
#ifndef CHASH_ROUTER_H
#define CHASH_ROUTER_H

#include "binding.h"
#include "engine/chash.h"
#include "engine/scheme.h"
#include "engine/haproxy_ids.h"

/* virtual_node_count must lie in [1, MAX_VIRTUAL_NODES]. */
#define MAX_VIRTUAL_NODES 1000000

typedef struct {
    PyTypeObject *router_type;
    PyTypeObject *wide_ring_type; /* the envoy/grpc layouts' subtype (wide_ring.c) */
    PyTypeObject *maglev_type;    /* chash.MaglevRouter (maglev.c) */
    PyObject *move_type;          /* chash.Move, a namedtuple (diff.c) */
} module_state;

typedef struct {
    PyObject *name; /* exact str */
    double weight;
    uint32_t puid;  /* the haproxy layout's server id; 0 in other layouts */
} NodeEntry;

/* The haproxy layout's server ids in use, sorted, and HAProxy's counter
 * for the next automatic one (engine/haproxy_ids.h, used by haproxy.c). */
typedef chash_haproxy_ids HaproxyIds;

typedef struct {
    PyObject_HEAD
    chash_ring *ring;
    chash_scheme scheme;
    PyObject *hash_fn;     /* a Python callable bytes -> int, or NULL */
    size_t base_points;    /* virtual_node_count: points at weight 1 */
    HaproxyIds ids;        /* the haproxy layout's puids (empty otherwise) */
    PyObject *zones;       /* dict node -> zone (zones.c), or NULL */
} RouterObject;

/* The module's definition (module.c), to find its state from a type. */
extern struct PyModuleDef chash_module;

static inline module_state *get_state(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* Engine status codes become exceptions in chash_py_error()
 * (binding.h); node is the KeyError's argument. */
static inline void *set_status_error(int status, PyObject *node)
{
    return chash_py_error(status, node, NULL);
}

/* The UTF-8 of a node id (a str); 0, or -1 with TypeError. */
static inline int node_id(PyObject *node, const char **buf, Py_ssize_t *len)
{
    if (!PyUnicode_Check(node)) {
        PyErr_Format(PyExc_TypeError, "node id must be str, not %.200s", Py_TYPE(node)->tp_name);
        return -1;
    }
    *buf = PyUnicode_AsUTF8AndSize(node, len);
    return *buf ? 0 : -1;
}

/* The entry of the node at index (the engine's node data). */
static inline NodeEntry *entry_at(RouterObject *self, size_t index)
{
    return (NodeEntry *)chash_ring_node(self->ring, index).data;
}

/* The type (type.c). */
extern PyType_Spec router_spec;

/* The objects (router.c): node entries, construction and lifetime. */
int router_clear(RouterObject *self);
void router_dealloc(RouterObject *self);
PyObject *router_new(PyTypeObject *type, PyObject *args, PyObject *kwds);
int router_traverse(RouterObject *self, visitproc visit, void *arg);
void free_entry(NodeEntry *entry);
NodeEntry *new_entry(PyObject *node, double weight);
chash_ring *new_ring(chash_layout_id layout);
RouterObject *router_empty(PyTypeObject *type, const chash_scheme *scheme, PyObject *hash_fn,
                           size_t base_points);
PyObject *router_create(PyTypeObject *type, Py_ssize_t vnodes_arg, int vnodes_given, PyObject *hash,
                        PyObject *layout_obj);

/* Scheme glue (points.c): 0 / a result, or -1 / NULL with an exception
 * set, as each function's comment says. */
int check_integer_weight(const RouterObject *self, double weight);
int counts_by_share(const RouterObject *self);
int fill_points(RouterObject *self, const char *id, Py_ssize_t id_len, size_t first, size_t count, uint32_t *out);
int key_hash(RouterObject *self, PyObject *key, uint32_t *out);
uint32_t *node_points(RouterObject *self, const char *id, Py_ssize_t id_len, size_t first, size_t count);
int parse_weight(PyObject *weight_obj, double *weight);
int points_for(RouterObject *self, PyObject *node, double weight, size_t *count);

/* Mutations (mutate.c, ketama.c) */
int add_node(RouterObject *self, PyObject *node, double weight);
int add_nodes_at_once(RouterObject *self, PyObject *const *nodes, const double *weights, size_t n);
int ketama_update(RouterObject *self, PyObject *const *add, const double *weights, Py_ssize_t nadd, long drop);
PyObject *router_add(RouterObject *self, PyObject *args, PyObject *kwds);
PyObject *router_add_many(RouterObject *self, PyObject *args, PyObject *kwds);
PyObject *router_discard(RouterObject *self, PyObject *node);
PyObject *router_remove(RouterObject *self, PyObject *node);

/* The haproxy layout (haproxy.c) */
#define HAPROXY_MAX_ID CHASH_HAPROXY_MAX_ID /* HAProxy's ids are positive C ints */
int haproxy_parse_id(PyObject *id_obj, uint32_t *puid);
int haproxy_add(RouterObject *self, PyObject *node, double weight, uint32_t puid);
PyObject *haproxy_add_many(RouterObject *self, PyObject *nodes, double weight);
void haproxy_forget(RouterObject *self, uint32_t puid);
void haproxy_ids_free(HaproxyIds *ids);
int haproxy_ids_equal(RouterObject *x, RouterObject *y);
PyObject *router_get_ids(RouterObject *self, void *Py_UNUSED(closure));

/* Built from (node, weight) pairs (build.c) */
PyObject *module_rebuild(PyObject *module, PyObject *args);
PyObject *router_reduce(RouterObject *self, PyObject *Py_UNUSED(ignored));
PyObject *router_replace_nodes(RouterObject *self, PyObject *nodes);

/* Lookups (lookup.c) */
uint32_t *hash_keys(RouterObject *self, PyObject *keys, Py_ssize_t *n);
PyObject *router_calculate_hash(RouterObject *self, PyObject *key);
PyObject *router_get(RouterObject *self, PyObject *key);
PyObject *router_get_many(RouterObject *self, PyObject *keys);
PyObject *router_preference(RouterObject *self, PyObject *const *args, Py_ssize_t nargs);

/* Lookups by a caller's hash (by_hash.c) */
int parse_hash_arg(PyObject *obj, unsigned bits, const char *layout, uint64_t *out);
uint64_t *parse_hash_args(PyObject *hashes, unsigned bits, const char *layout, Py_ssize_t *n);
PyObject *router_get_by_hash(RouterObject *self, PyObject *hash);
PyObject *router_get_many_by_hash(RouterObject *self, PyObject *hashes);
extern const char get_by_hash_doc[], get_many_by_hash_doc[];

/* Introspection and protocols (inspect.c) */
PyObject *router_check(RouterObject *self, PyObject *Py_UNUSED(ignored));
int router_contains(RouterObject *self, PyObject *node);
PyObject *router_fingerprint(RouterObject *self, PyObject *Py_UNUSED(ignored));
PyObject *router_get_hash(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_get_hash_ring(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_get_layout(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_get_memory(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_get_node_map(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_get_nodes(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_get_points(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_get_vnodes(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_get_weights(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_iter(RouterObject *self);
PyObject *router_key_distribution(RouterObject *self, PyObject *keys);
Py_ssize_t router_len(RouterObject *self);
PyObject *router_ownership(RouterObject *self, PyObject *Py_UNUSED(ignored));
PyObject *router_repr(RouterObject *self);
PyObject *router_richcompare(PyObject *a, PyObject *b, int op);

/* The routers rebuilt whole (table.c): their types made and their
 * module functions added at init; 0 or -1. */
int table_module_init(PyObject *module);

/* Zones (zones.c): wrappers of the ring's and the 64-bit ring's methods
 * that keep RouterObject.zones in step, zones, __setstate__. */
PyObject *router_add_zoned(RouterObject *self, PyObject *args, PyObject *kwds);
PyObject *table_add_zoned(RouterObject *self, PyObject *args, PyObject *kwds);
PyObject *router_remove_zoned(RouterObject *self, PyObject *node);
PyObject *router_discard_zoned(RouterObject *self, PyObject *node);
PyObject *table_remove_zoned(RouterObject *self, PyObject *node);
PyObject *table_discard_zoned(RouterObject *self, PyObject *node);
PyObject *router_replace_zoned(RouterObject *self, PyObject *nodes);
PyObject *table_replace_zoned(RouterObject *self, PyObject *nodes);
PyObject *router_get_zones(RouterObject *self, void *Py_UNUSED(closure));
PyObject *router_preference_zoned(RouterObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames);
PyObject *table_preference_zoned(RouterObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames);
PyObject *router_reduce_zoned(RouterObject *self, PyObject *Py_UNUSED(ignored));
PyObject *table_reduce_zoned(RouterObject *self, PyObject *Py_UNUSED(ignored));
PyObject *router_setstate(RouterObject *self, PyObject *state);
extern const char zoned_add_doc[], wide_zoned_add_doc[], zoned_preference_doc[], setstate_doc[];

/* router.diff (diff.c), and chash.Move made at init; 0 or -1. */
PyObject *router_diff(RouterObject *self, PyObject *other);
int diff_module_init(PyObject *module);
extern const char diff_doc[];

/* The strategy functions (simulate.c), added to the module's own. */
extern PyMethodDef strategy_methods[];

/* Method docstrings, each beside its function. */
extern const char add_doc[], add_many_doc[], remove_doc[], discard_doc[], replace_doc[];
extern const char get_doc[], get_many_doc[], preference_doc[], calc_doc[];
extern const char check_doc[], ownership_doc[], distribution_doc[], fingerprint_doc[];
extern const char reduce_doc[], rebuild_doc[];

#endif /* CHASH_ROUTER_H */
