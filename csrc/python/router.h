/*
 * router.h - the router shell (router.c): the five router classes
 * (ConsistentHashRouter, MaglevRouter, JumpRouter, RendezvousRouter,
 * AnchorRouter), each
 * a heap type over the one object layout and the families of family.h.
 */
#ifndef CHASH_PY_ROUTER_H
#define CHASH_PY_ROUTER_H

#include "family.h"

/* The five types, made and added to the module at init; 0 or -1. */
int router_type_setup(PyObject *module);

/* Where a router of any of the five classes (or of a subclass) counts its
 * membership changes, for bounded loads to notice them; NULL for any
 * other object (no exception). */
const uint64_t *router_changes(PyObject *obj);

/* chash._chash._reconstruct(cls, family, settings, nodes): the one
 * reader of every router's pickles (module.c's function table). */
PyObject *router_reconstruct(PyObject *module, PyObject *args);
extern const char reconstruct_doc[];

#endif /* CHASH_PY_ROUTER_H */
