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

#endif /* CHASH_PY_RENDEZVOUS_H */
