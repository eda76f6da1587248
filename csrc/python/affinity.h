/*
 * affinity.h - chash._chash.prefix_blocks and the private _AffinityTable
 * under chash.affinity.PrefixAffinity (affinity.c), over
 * csrc/strategies/affinity.h.
 */
#ifndef CHASH_PY_AFFINITY_H
#define CHASH_PY_AFFINITY_H

#include "binding.h"

/* The type and prefix_blocks added to the module at init; 0 or -1. */
int affinity_setup(PyObject *module);

#endif /* CHASH_PY_AFFINITY_H */
