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
/* A MaglevRouter of cls of table_size holding the (node, weight) pairs:
 * what its pickles are read by (module.c's _rebuild_table); NULL with an
 * exception. */
PyObject *maglev_rebuild(PyTypeObject *cls, PyObject *table_size, PyObject *hash, PyObject *pairs);

#endif /* CHASH_PY_MAGLEV_H */
