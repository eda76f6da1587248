/*
 * node_names.h - the names of a router's nodes, kept the same way by every
 * family that holds a node list (node_list.c: the 64-bit ring, Maglev,
 * jump; rendezvous_nodes.c): a tuple of exact str in the order added.
 *
 * A change builds the next tuple aside (names added, one dropped) and says
 * where each weight goes; a replacement reads (node, weight) pairs.  The
 * weights themselves stay each family's own (integers for the node list,
 * doubles for rendezvous), placed through what these return.
 */
#ifndef CHASH_PY_NODE_NAMES_H
#define CHASH_PY_NODE_NAMES_H

#include "binding.h"

/*
 * The names after dropping position drop of old (-1: none) and adding
 * add[0..nadd) (each a str whose id was checked): a present name keeps its
 * place and takes the added weight, a new one goes last, in the order
 * given.  Each name's weight, an element of size bytes, is copied from
 * old_weights (one per old name) or add_weights (one per added name) to
 * its new position in weights, which has room for every old and added
 * name.  A new tuple of exact str, or NULL with an exception.
 */
PyObject *node_names_merge(PyObject *old, Py_ssize_t drop, PyObject *const *add, Py_ssize_t nadd,
                           const void *old_weights, const void *add_weights, size_t size,
                           void *weights);

/* Reads pair i's weight argument into the caller's array; 0, or -1 with
 * an exception. */
typedef int (*node_weight_reader)(void *ctx, PyObject *weight, Py_ssize_t i);

/*
 * The nodes of pairs, a tuple of (node, weight) tuples, as a new tuple of
 * exact str, each weight read through read (after its node is checked);
 * NULL with an exception for a pair that is not a 2-tuple, a node that is
 * not a valid str, a weight read refuses, or a node named twice.
 */
PyObject *node_names_of_pairs(PyObject *pairs, node_weight_reader read, void *ctx);

#endif /* CHASH_PY_NODE_NAMES_H */
