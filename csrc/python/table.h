/*
 * table.h - the routers whose lookup structure is rebuilt whole from the
 * ordered (node, weight) list on every change, as their references do:
 *
 *   ConsistentHashRouter(layout="envoy" | "grpc")  64-bit points on a
 *       chash_wide ring (engine/wide.h), Envoy's and gRPC's counts
 *       (engine/envoy.h); a subtype of ConsistentHashRouter that the
 *       constructor returns for these layouts (wide_ring.c);
 *   MaglevRouter  Envoy's Maglev table (maglev.c).
 *
 * Both share one object layout, TableObject, and the functions of
 * table.c: the node list, the all-or-nothing rebuild, the hash arguments,
 * the protocols.  A TableObject starts with a RouterObject so the ring
 * subtype is a ConsistentHashRouter in C too; that base holds an empty
 * 32-bit ring (so its own methods, called on such an object through the
 * base class, see no node rather than crash) and is otherwise unused.
 *
 * Thread safety rests on the GIL, as for the ring: a rebuild computes
 * everything aside, running no Python code (node names are exact str,
 * whose hashing and comparison never call back), then swaps it in, so a
 * lookup in another thread sees the old structure or the new one.
 */
#ifndef CHASH_TABLE_H
#define CHASH_TABLE_H

#include "router.h"
#include "engine/envoy.h"
#include "engine/wide.h"

typedef enum { TABLE_ENVOY, TABLE_GRPC, TABLE_MAGLEV } table_kind;

/* Envoy's defaults (and gRPC's, with its cap). */
#define ENVOY_MIN_RING ((uint64_t)1024)
#define ENVOY_MAX_RING ((uint64_t)8388608)
#define GRPC_MAX_RING ((uint64_t)4096)
#define GRPC_RING_SIZE_CAP ((uint64_t)4096)
/* Envoy's and gRPC's largest accepted ring size. */
#define WIDE_RING_LIMIT ((uint64_t)8388608)

typedef struct {
    RouterObject base;      /* see the file comment */
    table_kind kind;
    chash_point_hash hash;  /* how points are hashed (Maglev: XXH64) */
    uint64_t min_ring;      /* the ring sizes given (before gRPC's cap) */
    uint64_t max_ring;
    size_t table_size;      /* Maglev's M */
    uint64_t mod_magic[2];  /* Maglev: ceil(2**128 / M), high and low halves,
                               for h % M without a division (strategies/maglev.h) */
    PyObject *nodes;        /* tuple of exact str, in add order */
    uint64_t *weights;      /* PyMem, one a node, >= 1 */
    size_t *counts;         /* PyMem: points (ring) or entries (Maglev) a node */
    PyObject *index;        /* dict: node -> its position in nodes */
    chash_wide *ring;       /* the ring layouts' points */
    uint32_t *table;        /* Maglev: node position per entry; PyMem, NULL when empty */
} TableObject;

/* The ring subtype and MaglevRouter specs (wide_ring.c, maglev.c). */
extern PyType_Spec wide_ring_spec;
extern PyType_Spec maglev_spec;

/* MaglevRouter.diff (diff.c). */
PyObject *maglev_diff(TableObject *self, PyObject *other);
extern const char maglev_diff_doc[];

/* The layout's name ("envoy", "grpc") and point width for messages. */
const char *table_layout_name(const TableObject *self);

/* Construction (table.c): a new empty TableObject of type; NULL with an
 * exception.  The caller has checked the parameters. */
TableObject *table_alloc(PyTypeObject *type, table_kind kind, chash_point_hash hash,
                         uint64_t min_ring, uint64_t max_ring, size_t table_size);
void table_dealloc(TableObject *self);
int table_traverse(TableObject *self, visitproc visit, void *arg);
int table_clear(TableObject *self);

/* A point hash name ("xxh64", "murmur2_64"; None for xxh64) into *out;
 * 0, or -1 with TypeError / ValueError. */
int table_parse_hash(PyObject *hash, int murmur_allowed, const char *layout,
                     chash_point_hash *out);

/* The rebuild (table.c): the router's structure for nodes (a tuple of
 * exact str, no duplicates) with weights (n of them, each >= 1), swapped
 * in whole; 0, or -1 with an exception and the router unchanged. */
int table_set(TableObject *self, PyObject *nodes, const uint64_t *weights);

/* Methods shared by both types (table.c), same contracts as the ring's. */
PyObject *table_add(TableObject *self, PyObject *args, PyObject *kwds);
PyObject *table_add_many(TableObject *self, PyObject *args, PyObject *kwds);
PyObject *table_remove(TableObject *self, PyObject *node);
PyObject *table_discard(TableObject *self, PyObject *node);
PyObject *table_replace_nodes(TableObject *self, PyObject *pairs);
PyObject *table_get(TableObject *self, PyObject *key);
PyObject *table_get_many(TableObject *self, PyObject *keys);
PyObject *table_get_by_hash(TableObject *self, PyObject *hash);
PyObject *table_get_many_by_hash(TableObject *self, PyObject *hashes);
PyObject *table_preference(TableObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *table_calculate_hash(TableObject *self, PyObject *key);
PyObject *table_ownership(TableObject *self, PyObject *Py_UNUSED(ignored));
PyObject *table_key_distribution(TableObject *self, PyObject *keys);
PyObject *table_fingerprint(TableObject *self, PyObject *Py_UNUSED(ignored));
PyObject *table_check(TableObject *self, PyObject *Py_UNUSED(ignored));
PyObject *table_reduce(TableObject *self, PyObject *Py_UNUSED(ignored));
PyObject *table_get_nodes(TableObject *self, void *Py_UNUSED(closure));
PyObject *table_get_weights(TableObject *self, void *Py_UNUSED(closure));
PyObject *table_get_points(TableObject *self, void *Py_UNUSED(closure));
PyObject *table_get_hash(TableObject *self, void *Py_UNUSED(closure));
PyObject *table_get_layout(TableObject *self, void *Py_UNUSED(closure));
PyObject *table_get_memory(TableObject *self, void *Py_UNUSED(closure));
Py_ssize_t table_len(TableObject *self);
int table_contains(TableObject *self, PyObject *node);
PyObject *table_iter(TableObject *self);
PyObject *table_repr(TableObject *self);
PyObject *table_richcompare(PyObject *a, PyObject *b, int op);

/* The ring subtype's constructor, called by ConsistentHashRouter() for
 * the envoy and grpc layouts (wide_ring.c); the module's _rebuild_table
 * for pickles of either type (table.c). */
PyObject *wide_ring_create(PyObject *module, PyObject *layout, PyObject *vnodes, PyObject *hash,
                           PyObject *min_ring, PyObject *max_ring);
PyObject *module_rebuild_table(PyObject *module, PyObject *args);
extern const char rebuild_table_doc[];

extern const char table_add_doc[], table_add_many_doc[], table_remove_doc[], table_discard_doc[];
extern const char table_replace_doc[], table_get_many_doc[], table_get_many_by_hash_doc[];
extern const char table_calc_doc[], table_ownership_doc[], table_distribution_doc[];
extern const char table_fingerprint_doc[], table_check_doc[], table_reduce_doc[];

#endif /* CHASH_TABLE_H */
