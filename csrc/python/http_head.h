/*
 * http_head.h - chash._chash._request_head, the gateway's request-head
 * policy (csrc/http/request_head.c) as the proxy calls it, and
 * _backend_head, the head of the request it sends on.
 */
#ifndef CHASH_PY_HTTP_HEAD_H
#define CHASH_PY_HTTP_HEAD_H

#include "binding.h"

extern const char request_head_doc[];
PyObject *module_request_head(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

extern const char backend_head_doc[];
PyObject *module_backend_head(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
