/*
 * diff.h - what every diff() shares (diff.c): chash.Move, the engine's
 * moves as plain tuples, the errors.  The walks themselves are the
 * engine's (engine/diff.h), called by each family and by MaglevRouter.
 *
 * Move's constructor is Python code, which may let another thread change
 * a router, so moves are first read into plain (start, end, source,
 * target) tuples, with no Python code running while the engine's node
 * indices are read, and only then turned into Moves (diff_as_moves).
 */
#ifndef CHASH_PY_DIFF_H
#define CHASH_PY_DIFF_H

#include "binding.h"
#include "engine/diff.h"

/* The node object of a router's node index (borrowed). */
typedef PyObject *(*diff_node_of)(PyObject *router, uint32_t index);

/* moves[0..n) as a list of plain tuples; NULL with an exception. */
PyObject *diff_plain_moves(const chash_move *moves, size_t n, PyObject *from, PyObject *to,
                           diff_node_of node_of);
/* The plain tuples of list turned into Moves in place; 0 or -1. */
int diff_as_moves(PyObject *list, PyObject *move_type);
/* The engine's status as an exception (EINVAL: one router is empty); NULL. */
PyObject *diff_error(int status);
/* ValueError naming both routers' layouts and hashes; NULL. */
PyObject *diff_mismatch(PyObject *a, PyObject *b);
/* chash.Move made and added to the module, with _moving_keys (the moving
 * keys of two routers compared key by key, for those without arcs); 0 or -1. */
int diff_module_setup(PyObject *module);

#endif /* CHASH_PY_DIFF_H */
