/*
 * state.h - the state of chash._chash (module.c) and how a file of the
 * binding finds it from a type or an object: the types it made and
 * chash.Move.  A leaf: it includes nothing of the binding but binding.h.
 */
#ifndef CHASH_PY_STATE_H
#define CHASH_PY_STATE_H

#include "binding.h"

/* The router classes the shell makes (router.c), in its order. */
#define ROUTER_CLASSES 5

typedef struct {
    PyTypeObject *types[ROUTER_CLASSES]; /* the router classes (router.c) */
    PyTypeObject *router_type; /* chash.ConsistentHashRouter: types[0] (router.c) */
    PyTypeObject *maglev_type; /* chash.MaglevRouter (maglev.c) */
    PyTypeObject *rendezvous_type; /* chash.RendezvousRouter (rendezvous.c) */
    PyObject *move_type;       /* chash.Move, a namedtuple (diff.c) */
} module_state;

/* The module's definition (module.c), to find its state from a type. */
extern struct PyModuleDef chash_module;

static inline module_state *get_state(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* The state of the module that made type (walking its MRO, so a Python
 * subclass finds it too); NULL with TypeError when there is none. */
static inline module_state *state_of_type(PyTypeObject *type)
{
    PyObject *module = PyType_GetModuleByDef(type, &chash_module);
    return module ? get_state(module) : NULL;
}

#endif /* CHASH_PY_STATE_H */
