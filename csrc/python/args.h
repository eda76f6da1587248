/*
 * args.h - every reader of a Python argument the binding takes: node ids,
 * weights, hashes given by the caller, counts, names, ring and table sizes,
 * HAProxy server ids, zones.  Each returns 0 (or a value), or -1 (NULL)
 * with TypeError / ValueError naming the argument; none runs Python code
 * beyond the argument's own conversion.  The contracts are in args.c.
 */
#ifndef CHASH_PY_ARGS_H
#define CHASH_PY_ARGS_H

#include "binding.h"
#include "engine/envoy.h"
#include "engine/haproxy_ids.h"
#include "engine/scheme.h"

/* HAProxy's server ids are positive C ints. */
#define HAPROXY_MAX_ID CHASH_HAPROXY_MAX_ID

int node_id(PyObject *node, const char **buf, Py_ssize_t *len);
const char *name_arg(PyObject *value, const char *what);
int parse_weight(PyObject *weight_obj, double *weight);
int parse_balance_factor(PyObject *obj, double *out);
int parse_hash_arg(PyObject *obj, unsigned bits, const char *layout, uint64_t *out);
uint64_t *parse_hash_args(PyObject *hashes, unsigned bits, const char *layout, Py_ssize_t *n);
int parse_count(PyObject *obj, size_t *out);
int parse_key_hash(PyObject *obj, chash_hash_id *out);
int parse_vnodes(PyObject *obj, Py_ssize_t *count, int *given);
int parse_ring_size(PyObject *obj, const char *name, uint64_t fallback, uint64_t *out);
int parse_point_hash(PyObject *hash, int murmur_allowed, const char *layout, chash_point_hash *out);
int parse_table_size(PyObject *obj, size_t *out);
int parse_haproxy_id(PyObject *id_obj, uint32_t *puid);
int check_zone(PyObject *zone);

/* Envoy's and gRPC's largest accepted ring size. */
#define WIDE_RING_LIMIT ((uint64_t)8388608)

#endif /* CHASH_PY_ARGS_H */
