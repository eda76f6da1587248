/*
 * get_bounded.h - get_bounded(key, loads, balance_factor=1.25), the bounded
 * lookup over loads the caller tracks (get_bounded.c), for the shell's
 * master method table (router.c).  Its docstring is family.h's
 * GET_BOUNDED_DOC, which every class names.
 */
#ifndef CHASH_PY_GET_BOUNDED_H
#define CHASH_PY_GET_BOUNDED_H

#include "family.h"

/* METH_FASTCALL | METH_KEYWORDS: the chosen node (a new reference), None
 * for an empty router, or NULL with an exception. */
PyObject *router_get_bounded(RouterObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames);

#endif /* CHASH_PY_GET_BOUNDED_H */
