/*
 * uhashring.h - chash._chash._UHashRing (uhashring.c), the continuum
 * behind chash.compat.uhashring.HashRing.
 */
#ifndef CHASH_PY_UHASHRING_H
#define CHASH_PY_UHASHRING_H

#include "binding.h"

/* Adds the type _UHashRing to module; 0 or -1 with an exception. */
int uhashring_setup(PyObject *module);

#endif /* CHASH_PY_UHASHRING_H */
