/*
 * node_list.h - what the families over an ordered node list share (the
 * 64-bit ring, ring64.c; Maglev, maglev.c; jump, jump.c): the node list
 * with integer weights, its index, the all-or-nothing rebuild that swaps a
 * new list and its owner's new structure in at once, the O(1) amortized
 * append and drop of the last node for an owner whose structure a last
 * node does not change (jump), and their batch lookups of 64-bit hashes.
 *
 * A NodeList holds exact str only (node names), so releasing or looking
 * one up never runs Python code.  Its owner says how to build its
 * structure (a ring of 64-bit points, a Maglev table) for a list, through
 * a NodeListRebuild; the rebuild computes everything aside and swaps it
 * in whole, so a lookup in another thread sees the old one or the new.
 */
#ifndef CHASH_PY_NODE_LIST_H
#define CHASH_PY_NODE_LIST_H

#include "binding.h"

typedef struct {
    PyObject *nodes;   /* list of exact str, in add order; never handed out */
    uint64_t *weights; /* PyMem, one a node, each >= 1 */
    size_t *counts;    /* PyMem: points or table entries a node owns */
    size_t capacity;   /* room in weights and counts (>= the nodes) */
    PyObject *index;   /* dict: node -> its position in nodes */
    uint64_t changes;  /* lists swapped in: bounded loads re-read weights */
} NodeList;

/*
 * How an owner builds its structure for a node list: build(owner, nodes,
 * weights, n, counts, &structure) fills counts (zeroed, n of them) and
 * makes the new structure (NULL is a valid one, e.g. no table for no
 * node), 0, or -1 with an exception and nothing to free; release frees
 * one; *slot is where the owner keeps it.  layout names the layout in
 * messages; cap_total refuses a total weight above 2**32 - 1 (Envoy).
 *
 * append, when not NULL, says the owner keeps no structure that a new
 * last node or the loss of the last one changes (jump's buckets): it
 * gives the count of a node appended as number n (0, or -1 with an
 * exception when there is no room for it), and a new node is then
 * appended, and the last one removed, in O(1) amortized with no rebuild.
 * cap_total must then be 0.
 */
typedef struct {
    void *owner;
    int (*build)(void *owner, PyObject *nodes, const uint64_t *weights, size_t n, size_t *counts,
                 void **structure);
    void (*release)(void *structure);
    void **slot;
    const char *layout;
    int cap_total;
    int (*append)(void *owner, size_t n, size_t *count);
} NodeListRebuild;

/* An empty list; 0, or -1 with an exception. */
int node_list_init(NodeList *list);
/* Frees the list's own memory (not the owner's structure). */
void node_list_free(NodeList *list);
/* dst (zeroed) as a copy of src: a new list, index and arrays; 0, or -1
 * with an exception and dst freeable by node_list_free(). */
int node_list_copy(NodeList *dst, const NodeList *src);
int node_list_traverse(NodeList *list, visitproc visit, void *arg);

static inline Py_ssize_t node_list_len(const NodeList *list)
{
    return PyList_GET_SIZE(list->nodes);
}

static inline PyObject *node_list_at(const NodeList *list, size_t k)
{
    return PyList_GET_ITEM(list->nodes, (Py_ssize_t)k);
}

/* The nodes' array, for a loop that runs no Python code (the list cannot
 * change under it): one load per node instead of two. */
static inline PyObject *const *node_list_items(const NodeList *list)
{
    return ((PyListObject *)list->nodes)->ob_item;
}

/* The position of node, or -1 (also for a non-str; -1 with an exception
 * when a str subclass cannot be copied). */
Py_ssize_t node_list_position(const NodeList *list, PyObject *node);
/* 1, 0, or -1 with an exception. */
int node_list_contains(const NodeList *list, PyObject *node);
/* The weight of node (>= 1), 0.0 when the list lacks it, -1.0 with an
 * exception; the sum of the weights, in list order (get_bounded's). */
double node_list_weight_of(const NodeList *list, PyObject *node);
PyObject *node_list_node_at(const NodeList *list, size_t k, double *weight);

/* A weight of these layouts: an integer from 1 to 2**32 - 1 (Envoy's and
 * gRPC's uint32), from a double parse_weight read; 0 or -1. */
int node_list_weight(double weight, const char *layout, uint64_t *out);

/* Membership changes, each all-or-nothing through how: 0, or -1 with an
 * exception and the list (and the structure) as they were. */
int node_list_add(NodeList *list, PyObject *node, double weight, const NodeListRebuild *how);
int node_list_add_many(NodeList *list, PyObject *nodes, double weight, const NodeListRebuild *how);
/* 1 removed, 0 absent, -1 error. */
int node_list_remove(NodeList *list, PyObject *node, const NodeListRebuild *how);
/* Exactly the (node, weight) pairs of an iterable, in that order. */
int node_list_replace(NodeList *list, PyObject *pairs, const NodeListRebuild *how);
/* The list rebuilt as it is (after a setting of the owner changed). */
int node_list_set(NodeList *list, PyObject *nodes, const uint64_t *weights,
                  const NodeListRebuild *how);

/* Views (new objects, NULL with an exception). */
PyObject *node_list_nodes(const NodeList *list);
/* An iterator over the nodes as they are now (later changes unseen). */
PyObject *node_list_iter(const NodeList *list);
PyObject *node_list_weights(const NodeList *list);
PyObject *node_list_counts(const NodeList *list);
PyObject *node_list_pairs(const NodeList *list);
/* The nodes at positions[0..n) (each < the node count), as a new list. */
PyObject *node_list_pick(const NodeList *list, const uint32_t *positions, size_t n);
/* The nodes of a PyMem block of 64-bit hashes (NULL: an error already
 * set), which is freed here, as a list (None for each with no node): the
 * batch lookups of the families that route 64-bit hashes (ring64.c,
 * maglev.c, jump.c).  route(owner, hashes, n, positions) writes each
 * hash's node position (the list holds a node); it runs no Python code,
 * and without the GIL for a large batch (chash_py_route_unlocked,
 * readers the router's unlocked_readers). */
PyObject *node_list_route(const NodeList *list, unsigned *readers, const void *owner,
                          uint64_t *hashes, Py_ssize_t n,
                          void (*route)(const void *owner, const uint64_t *hashes, size_t n,
                                        uint32_t *positions));
/* {node: values[k]} as floats / ints. */
PyObject *node_list_float_map(const NodeList *list, const double *values);
PyObject *node_list_count_map(const NodeList *list, const size_t *values);
/* 1 when both lists hold the same weights (and, with ordered, the same
 * order), 0, -1 with an exception. */
int node_list_equal(const NodeList *a, const NodeList *b, int ordered);
/* The first 4 bytes of MD5(name) of every node, big-endian; 0 or -1. */
int node_list_tags(const NodeList *list, uint32_t *tags);
/* same[k]: the position in to of from's node k, or CHASH_DIFF_NONE (engine/diff.h); a PyMem
 * block the caller frees, or NULL with an exception. */
uint32_t *node_list_positions_in(const NodeList *from, const NodeList *to);
/* The check of node_list's own invariants against counts recounted by
 * the owner (seen); 1 when they hold. */
int node_list_check(const NodeList *list, const size_t *seen);

#endif /* CHASH_PY_NODE_LIST_H */
