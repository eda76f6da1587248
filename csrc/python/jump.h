/*
 * jump.h - chash.JumpRouter (jump.c): jump consistent hash as a router, a
 * type of its own over the ordered node list it shares with the 64-bit
 * ring and MaglevRouter (node_list.h).  Buckets are the nodes in the order
 * added; only the last one can go away.
 */
#ifndef CHASH_PY_JUMP_H
#define CHASH_PY_JUMP_H

#include "binding.h"

/* The type, made and added to the module at init; 0 or -1. */
int jump_type_setup(PyObject *module);
/* Where a JumpRouter (or an object of a subclass) counts its node
 * list's changes, for bounded loads to notice them; NULL for any other
 * object (no exception). */
const uint64_t *jump_changes(PyObject *obj);

#endif /* CHASH_PY_JUMP_H */
