/*
 * rendezvous.h - chash.RendezvousRouter (rendezvous.c): highest random
 * weight in four layouts (hrw, pymemcache, caddy, squid), a type of its
 * own over the engine's node sets (strategies/rendezvous.h).
 */
#ifndef CHASH_PY_RENDEZVOUS_H
#define CHASH_PY_RENDEZVOUS_H

#include "binding.h"

/* The type, made and added to the module at init; 0 or -1. */
int rendezvous_type_setup(PyObject *module);

/* Where a RendezvousRouter (or an object of a subclass) counts its node
 * set's changes, for bounded loads to notice them; NULL for any other
 * object (no exception). */
const uint64_t *rendezvous_changes(PyObject *obj);

#endif /* CHASH_PY_RENDEZVOUS_H */
