/*
 * _chash_strategies.h - the private functions of chash._chash that expose
 * chash_strategies.h (jump, rendezvous, Maglev, bounded loads, modulo) and
 * the bulk helpers chash.simulate measures them with.  The module adds them
 * with PyModule_AddFunctions(module, chash_strategy_methods).
 */
#ifndef CHASH_PY_STRATEGIES_H
#define CHASH_PY_STRATEGIES_H

#include <Python.h>

extern PyMethodDef chash_strategy_methods[];

#endif /* CHASH_PY_STRATEGIES_H */
