/*
 * maglev.h - chash.MaglevRouter (maglev.c): Envoy's MAGLEV load balancer
 * as a router, a type of its own over the ordered node list it shares with
 * the 64-bit ring (node_list.h).
 */
#ifndef CHASH_PY_MAGLEV_H
#define CHASH_PY_MAGLEV_H

#include "binding.h"

/* The type, made and added to the module at init; 0 or -1. */
int maglev_type_setup(PyObject *module);
/* Where a MaglevRouter (or an object of a subclass) counts its node
 * list's changes, for bounded loads to notice them; NULL for any other
 * object (no exception). */
const uint64_t *maglev_changes(PyObject *obj);
/* A MaglevRouter of cls of table_size holding the (node, weight) pairs:
 * what its pickles are read by (module.c's _rebuild_table); NULL with an
 * exception. */
PyObject *maglev_rebuild(PyTypeObject *cls, PyObject *table_size, PyObject *hash, PyObject *pairs);

#endif /* CHASH_PY_MAGLEV_H */
