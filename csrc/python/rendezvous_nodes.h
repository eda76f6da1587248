/*
 * rendezvous_nodes.h - the inside of chash.RendezvousRouter, shared by its
 * two files: rendezvous.c (the family: construction, lookups, views, docs)
 * calls rendezvous_nodes.c (the bytes each layout hashes, the weight
 * rules, the all-or-nothing rebuild); calls point that one way.
 *
 * The router keeps its nodes (a tuple of exact str, in add order), their
 * weights (doubles: hrw's are real numbers, unlike the integer weights of
 * the node list Maglev and the 64-bit ring share) and an index, beside the
 * engine's node set (strategies/rendezvous.h), which holds every node's
 * bytes and what depends on the node alone.  Every change builds a new set
 * aside, then swaps nodes, weights, index and set in at once.
 */
#ifndef CHASH_PY_RENDEZVOUS_NODES_H
#define CHASH_PY_RENDEZVOUS_NODES_H

#include "family.h"

/* A RendezvousRouter: the shell's object, its state in self->rdv. */
typedef RouterObject RendezvousObject;

/* Each layout's name, its hash's name, and whether the order nodes were
 * added in takes part in routing (the programs that scan a list). */
typedef struct {
    const char *name;
    const char *hash;
    int ordered;
} rdv_layout_info;

extern const rdv_layout_info rdv_layouts[CHASH_RDV_LAYOUT_COUNT];

/* A key's bytes: a str as str_bytes reads it; a bytes key as is, except
 * for pymemcache, which formats any key into f"{node}-{key}" (a bytes key
 * as its str(), b'...'). */
typedef struct {
    const char *buf;
    Py_ssize_t len;
    char *owned;
    PyObject *text;
} key_view;

/* A key's bytes as the layout reads them (v->buf, v->len); 0, or -1 with
 * TypeError for a key that is not str or bytes.  Release with
 * rdv_key_view_release. */
int rdv_key_view_of(chash_rdv_layout layout, PyObject *key, key_view *v);
void rdv_key_view_release(key_view *v);

/* A weight argument (NULL is 1) checked against the layout's rule; 0 or -1
 * with TypeError / ValueError. */
int rdv_read_weight(chash_rdv_layout layout, PyObject *obj, double *w);

/* The position of a node, or -1 (absent, not a str; -1 with an exception
 * when a str subclass cannot be copied). */
Py_ssize_t rdv_position_of(const RendezvousObject *self, PyObject *node);

/* Changes, each all-or-nothing: 0, or -1 with an exception and the router
 * as it was.  rdv_router_set: exactly nodes (a tuple of distinct exact str)
 * at weights.  rdv_update: add[0..nadd) at weights (a present node keeps
 * its place), without the node at position drop (or -1); every node
 * already checked to be a str.  rdv_nodes_replace: exactly the (node,
 * weight) pairs of an iterable, in that order. */
int rdv_router_set(RendezvousObject *self, PyObject *nodes, const double *weights);
int rdv_update(RendezvousObject *self, PyObject *const *add, const double *weights,
               Py_ssize_t nadd, Py_ssize_t drop);
int rdv_nodes_replace(RendezvousObject *self, PyObject *pairs);

#endif /* CHASH_PY_RENDEZVOUS_NODES_H */
