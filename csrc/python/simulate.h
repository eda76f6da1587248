/*
 * simulate.h - the strategy functions chash.simulate measures
 * (simulate.c), added to the module's own at init (module.c).
 */
#ifndef CHASH_PY_SIMULATE_H
#define CHASH_PY_SIMULATE_H

#include "binding.h"

extern PyMethodDef strategy_methods[];

#endif /* CHASH_PY_SIMULATE_H */
