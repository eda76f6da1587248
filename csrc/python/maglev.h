/*
 * maglev.h - the Maglev family of the router shell (maglev.c, family.h's
 * maglev_family and maglev_class): what module.c reads its old pickles by.
 */
#ifndef CHASH_PY_MAGLEV_H
#define CHASH_PY_MAGLEV_H

#include "binding.h"

/* A MaglevRouter of cls of table_size holding the (node, weight) pairs:
 * what its pickles are read by (module.c's _rebuild_table); NULL with an
 * exception. */
PyObject *maglev_rebuild(PyTypeObject *cls, PyObject *table_size, PyObject *hash, PyObject *pairs);

#endif /* CHASH_PY_MAGLEV_H */
