/*
 * ring32.h - the 32-bit ring family of ConsistentHashRouter (family.h):
 * the python, node, ketama, nginx, libmemcached, haproxy, varnish and
 * nghttpx layouts, a
 * chash_ring (engine/chash.h) changed in place, its points from the point
 * schemes (engine/scheme.h).  The family's private declarations, shared
 * by its files, each of which owns one concern:
 *
 *   family.c   the descriptor, construction, lifetime (node entries: here)
 *   points.c   the scheme glue: key hashes, a node's points, weights
 *   mutate.c   add, add many, remove
 *   ketama.c   the ketama / libmemcached update (counts by share)
 *   haproxy.c  the haproxy layout: server ids (puids), their numbering,
 *              adding and reweighing servers by puid
 *   build.c    a ring filled from (node, weight) pairs: pickling
 *              (__reduce__, _rebuild) and _replace_nodes
 *   lookup.c   single, batch, by-hash and preference lookups
 *   inspect.c  introspection, fingerprint, len/in/repr/==, diff
 *
 * The engine stores, for every node, a pointer to a NodeEntry holding the
 * node's str (an exact str, so releasing it never runs Python code) and
 * its weight.  A Python hash callable is only ever called before the
 * engine is touched, so no thread sees a half-changed ring.
 */
#ifndef CHASH_PY_RING32_H
#define CHASH_PY_RING32_H

#include "python/args.h"
#include "python/family.h"

/* virtual_node_count must lie in [1, MAX_VIRTUAL_NODES]. */
#define MAX_VIRTUAL_NODES 1000000

typedef struct {
    PyObject *name; /* exact str */
    double weight;
    uint32_t puid;  /* the haproxy layout's server id; 0 in other layouts */
} NodeEntry;

/* The entry of the node at index (the engine's node data). */
static inline NodeEntry *entry_at(RouterObject *self, size_t index)
{
    return (NodeEntry *)chash_ring_node(self->r32.ring, index).data;
}

/* Engine status codes become exceptions in chash_py_error() (binding.h);
 * node is the KeyError's argument. */
static inline void *set_status_error(int status, PyObject *node)
{
    return chash_py_error(status, node, NULL);
}

static inline void free_entry(NodeEntry *entry)
{
    Py_DECREF(entry->name);
    PyMem_Free(entry);
}

/* A new NodeEntry for node (an exact str kept), or NULL with an exception. */
static inline NodeEntry *new_entry(PyObject *node, double weight)
{
    NodeEntry *entry = PyMem_Malloc(sizeof *entry);
    if (!entry) {
        PyErr_NoMemory();
        return NULL;
    }
    entry->name = chash_py_node_name(node);
    if (!entry->name) {
        PyMem_Free(entry);
        return NULL;
    }
    entry->weight = weight;
    entry->puid = 0;
    return entry;
}

/* Construction (family.c). */
/* An empty ring breaking ties as the layout's reference does; NULL when
 * out of memory. */
chash_ring *new_ring(chash_layout_id layout);
/* Sets self (allocated, no family yet) to an empty ring over an already
 * valid scheme; 0, or -1 with MemoryError. */
int ring32_empty(RouterObject *self, const chash_scheme *scheme, PyObject *hash_fn,
                 size_t base_points);
/* Releases the ring and its entries (self's ring is NULL afterwards). */
void ring32_release(RouterObject *self);

/* Scheme glue (points.c). */
int check_integer_weight(const RouterObject *self, double weight);
int counts_by_share(const RouterObject *self);
int fill_points(RouterObject *self, const char *id, Py_ssize_t id_len, size_t first, size_t count,
                uint32_t *out);
int key_hash(RouterObject *self, PyObject *key, uint32_t *out);
uint32_t *node_points(RouterObject *self, const char *id, Py_ssize_t id_len, size_t first, size_t count);
int points_for(RouterObject *self, PyObject *node, double weight, size_t *count);

/* Mutations (mutate.c, ketama.c). */
int add_node(RouterObject *self, PyObject *node, double weight);
int add_nodes_at_once(RouterObject *self, PyObject *const *nodes, const double *weights, size_t n);
int ketama_update(RouterObject *self, PyObject *const *add, const double *weights, Py_ssize_t nadd, long drop);
int ring32_add(RouterObject *self, PyObject *node, double weight, PyObject *id);
int ring32_add_many(RouterObject *self, PyObject *nodes, double weight);
int ring32_remove(RouterObject *self, PyObject *node);

/* The haproxy layout (haproxy.c). */
int haproxy_add(RouterObject *self, PyObject *node, double weight, uint32_t puid);
int haproxy_add_many(RouterObject *self, PyObject *nodes, double weight);
void haproxy_forget(RouterObject *self, uint32_t puid);
void haproxy_ids_free(HaproxyIds *ids);
int haproxy_ids_equal(RouterObject *x, RouterObject *y);
PyObject *ring32_ids(RouterObject *self);

/* Built from (node, weight) pairs (build.c). */
PyObject *ring32_reduce(RouterObject *self);
int ring32_replace(RouterObject *self, PyObject *pairs);
PyObject *module_rebuild(PyObject *module, PyObject *args);
PyObject *ring32_unpickle(PyTypeObject *cls, PyObject *settings, PyObject *nodes);
extern const char rebuild_doc[];

/* Lookups (lookup.c). */
uint32_t *hash_keys(RouterObject *self, PyObject *keys, Py_ssize_t *n);
PyObject *ring32_get(RouterObject *self, PyObject *key);
PyObject *ring32_get_many(RouterObject *self, PyObject *keys);
PyObject *ring32_get_by_hash(RouterObject *self, PyObject *hash);
/* Both in their read sections (family.h's READ_METHOD). */
PyObject *ring32_read_get(RouterObject *self, PyObject *key);
PyObject *ring32_read_get_by_hash(RouterObject *self, PyObject *hash);
PyObject *ring32_get_many_by_hash(RouterObject *self, PyObject *hashes);
PyObject *ring32_preference(RouterObject *self, PyObject *key, size_t n);
int ring32_locate(RouterObject *self, PyObject *key, uint64_t *place);
PyObject *ring32_get_at(RouterObject *self, uint64_t place);
PyObject *ring32_preference_at(RouterObject *self, uint64_t place, size_t n);
PyObject *ring32_calculate_hash(RouterObject *self, PyObject *key);

/* Introspection and protocols (inspect.c). */
int ring32_check(RouterObject *self);
int ring32_contains(RouterObject *self, PyObject *node);
PyObject *ring32_fingerprint(RouterObject *self);
PyObject *ring32_hash_name(RouterObject *self);
PyObject *ring32_hash_ring(RouterObject *self);
PyObject *ring32_layout(RouterObject *self);
size_t ring32_memory(RouterObject *self);
PyObject *ring32_node_map(RouterObject *self);
PyObject *ring32_nodes(RouterObject *self);
PyObject *ring32_settings(RouterObject *self, int which);
PyObject *ring32_weights(RouterObject *self);
double ring32_weight_of(RouterObject *self, PyObject *node);
PyObject *ring32_node_at(RouterObject *self, size_t *at, double *weight);
PyObject *ring32_points(RouterObject *self);
PyObject *ring32_key_distribution(RouterObject *self, PyObject *keys);
Py_ssize_t ring32_len(RouterObject *self);
PyObject *ring32_ownership(RouterObject *self);
PyObject *ring32_repr(RouterObject *self);
int ring32_equal(RouterObject *x, RouterObject *y);
PyObject *ring32_diff(RouterObject *self, RouterObject *other);

#endif /* CHASH_PY_RING32_H */
