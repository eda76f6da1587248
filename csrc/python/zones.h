/*
 * zones.h - the nodes' zones (datacentres, racks) beside the ring, kept by
 * the router shell (router.c) around its family's calls, for the classes
 * with zones (ConsistentHashRouter): add_service_node's
 * zone=, router.zones, get_preference_list's distinct_zones=, pickling.
 *
 * A zone is a label, never part of the ring: routing, the fingerprint and
 * == ignore zones.  They live in RouterObject.zones (node -> zone, both
 * exact str, NULL until a first zone is set), which lookups never read.
 * A zone is written before the family's add and taken back if the add
 * fails, so a failed call changes nothing and no rollback touches the ring.
 */
#ifndef CHASH_PY_ZONES_H
#define CHASH_PY_ZONES_H

#include "family.h"

/* What zones_set replaced, for zones_undo. */
typedef struct {
    PyObject *node; /* exact str, or NULL when nothing was set */
    PyObject *old;  /* the zone it had, or NULL */
} ZoneUndo;

/* Sets node's zone (zone a checked, non-None str; node a str, else
 * nothing is set and the family's add names the error); 0 or -1. */
int zones_set(RouterObject *self, PyObject *node, PyObject *zone, ZoneUndo *undo);
/* Puts back what zones_set replaced (no allocation: cannot fail). */
void zones_undo(RouterObject *self, ZoneUndo *undo);
/* Forgets what zones_set replaced, the set zone kept. */
void zones_keep(ZoneUndo *undo);
/* An exact str copy of node for zones_forget (a str subclass's own hash
 * never runs on the dict), or NULL: not a str, or no zones; -1 on error. */
int zones_key(RouterObject *self, PyObject *node, PyObject **key);
/* Drops key's zone (key from zones_key, released here). */
void zones_forget(RouterObject *self, PyObject *key);
/* Drops the zones of nodes no longer in the router; 0 or -1. */
int zones_prune(RouterObject *self);
/* {node: zone}: a new dict. */
PyObject *zones_get(RouterObject *self);
/* The owner first, then the next nodes of all (a full preference list)
 * whose zone is not yet listed (a node without a zone is a zone of its
 * own), n at most; a new list. */
PyObject *zones_distinct(RouterObject *self, PyObject *all, size_t n);
/* __reduce__'s value with the zones as its state when a node has one
 * (plain is the family's (callable, args), consumed). */
PyObject *zones_reduce(RouterObject *self, PyObject *plain);
/* __setstate__: the zones of a pickle ({'zones': {node: zone}}). */
PyObject *zones_setstate(RouterObject *self, PyObject *state);

#endif /* CHASH_PY_ZONES_H */
