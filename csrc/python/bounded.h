/*
 * bounded.h - chash._chash.BoundedLoads (bounded.c), the C base of
 * chash.BoundedLoadRouter: bounded loads over any router of this
 * extension (or any object with their lookups), over the engine's load
 * table (strategies/bounded.h).
 */
#ifndef CHASH_PY_BOUNDED_H
#define CHASH_PY_BOUNDED_H

#include "binding.h"

/* The type, made and added to the module at init; 0 or -1. */
int bounded_type_setup(PyObject *module);

#endif /* CHASH_PY_BOUNDED_H */
