/*
 * type.c - the ConsistentHashRouter type: its method and property tables,
 * docstring, slots and spec, naming the functions of every file of the
 * binding (router.h).  Only module.c uses what is here (router_spec).
 */
#include "router.h"

/* ------------------------------------------------------------------ */
/* Methods, properties, slots                                         */

static PyMethodDef router_methods[] = {
    {"add_service_node", (PyCFunction)(void (*)(void))router_add_zoned, METH_VARARGS | METH_KEYWORDS, zoned_add_doc},
    {"add_service_nodes", (PyCFunction)(void (*)(void))router_add_many, METH_VARARGS | METH_KEYWORDS, add_many_doc},
    {"remove_service_node", (PyCFunction)router_remove_zoned, METH_O, remove_doc},
    {"discard_service_node", (PyCFunction)router_discard_zoned, METH_O, discard_doc},
    {"get_target_node", (PyCFunction)router_get, METH_O, get_doc},
    {"get_target_nodes", (PyCFunction)router_get_many, METH_O, get_many_doc},
    {"get_target_node_by_hash", (PyCFunction)router_get_by_hash, METH_O, get_by_hash_doc},
    {"get_target_nodes_by_hash", (PyCFunction)router_get_many_by_hash, METH_O, get_many_by_hash_doc},
    {"get_preference_list", (PyCFunction)(void (*)(void))router_preference_zoned, METH_FASTCALL | METH_KEYWORDS, zoned_preference_doc},
    {"ownership", (PyCFunction)router_ownership, METH_NOARGS, ownership_doc},
    {"key_distribution", (PyCFunction)router_key_distribution, METH_O, distribution_doc},
    {"fingerprint", (PyCFunction)router_fingerprint, METH_NOARGS, fingerprint_doc},
    {"diff", (PyCFunction)router_diff, METH_O, diff_doc},
    {"_calculate_hash", (PyCFunction)router_calculate_hash, METH_O, calc_doc},
    {"_check", (PyCFunction)router_check, METH_NOARGS, check_doc},
    {"__reduce__", (PyCFunction)router_reduce_zoned, METH_NOARGS, reduce_doc},
    {"__setstate__", (PyCFunction)router_setstate, METH_O, setstate_doc},
    {"_replace_nodes", (PyCFunction)router_replace_zoned, METH_O, replace_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef router_getset[] = {
    {"virtual_node_count", (getter)router_get_vnodes, NULL,
     "Points a node of weight 1 owns.", NULL},
    {"hash_ring", (getter)router_get_hash_ring, NULL,
     "Every ring point, sorted (a new list each time).", NULL},
    {"node_map", (getter)router_get_node_map, NULL,
     "{point: node} (a new dict each time); a point shared by several nodes\n"
     "maps to the node with the smallest id (python, node layouts) or to the\n"
     "node added first (nginx, ketama, libmemcached).", NULL},
    {"nodes", (getter)router_get_nodes, NULL, "The nodes, in the order they were added.", NULL},
    {"weights", (getter)router_get_weights, NULL, "{node: weight}.", NULL},
    {"points", (getter)router_get_points, NULL, "{node: number of ring points it owns}.", NULL},
    {"hash", (getter)router_get_hash, NULL, "The hash: its name, or the callable.", NULL},
    {"layout", (getter)router_get_layout, NULL,
     "The layout: 'python', 'node', 'ketama', 'nginx', 'libmemcached' or 'haproxy'.", NULL},
    {"memory_bytes", (getter)router_get_memory, NULL, "Heap bytes the ring engine holds.", NULL},
    {"ids", (getter)router_get_ids, NULL,
     "{node: server id} of the haproxy layout (HAProxy's puids, which decide\n"
     "the points); empty for the other layouts.", NULL},
    {"zones", (getter)router_get_zones, NULL,
     "{node: zone} of the nodes added with a zone (a new dict each time).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(router_doc,
"ConsistentHashRouter(virtual_node_count=None, *, hash=None, layout='python',\n"
"                     minimum_ring_size=None, maximum_ring_size=None)\n--\n\n"
"A consistent-hash ring routing keys to nodes.\n\n"
"With the defaults it routes exactly like the documented pure-Python\n"
"ConsistentHashRouter: MD5 of the key's UTF-8 bytes mod 2**32, virtual keys\n"
"'{node}_virtual_{i}', the first point >= the key's hash, wrapping around.\n"
"layout 'nginx', 'ketama' and 'libmemcached' build the rings of nginx's\n"
"hash ... consistent, libketama (twemproxy, libmemcached ketama_weighted)\n"
"and libmemcached's ketama, integer weights and ties to the node added\n"
"first included.  hash defaults to the layout's (md5; crc32 for nginx,\n"
"one_at_a_time for libmemcached); virtual_node_count to the layout's own\n"
"(python 100, node 150, ketama 160, nginx 160, libmemcached 100) and must\n"
"lie in [1, 1000000].\n\n"
"layout 'haproxy' builds HAProxy's hash-type consistent ring: weight x 16\n"
"points per server, from its id (add_service_node(..., id=)), and the\n"
"nearest point either way, a tie to the one before; hash 'sdbm_avalanche'\n"
"by default, or sdbm, djb2, wt6, crc32, each with or without _avalanche.\n\n"
"layout 'envoy' and 'grpc' build Envoy's RING_HASH and gRPC's ring_hash:\n"
"64-bit points '{node}_{i}' (hash 'xxh64', or 'murmur2_64' for envoy),\n"
"counts by weight share between minimum_ring_size (1024) and\n"
"maximum_ring_size (envoy 8388608, grpc 4096; grpc caps both at 4096),\n"
"keys hashed with XXH64; such a router is a subtype of this one.");

static PyType_Slot router_slots[] = {
    {Py_tp_doc, (void *)router_doc},
    {Py_tp_new, router_new},
    {Py_tp_dealloc, router_dealloc},
    {Py_tp_traverse, router_traverse},
    {Py_tp_clear, router_clear},
    {Py_tp_methods, router_methods},
    {Py_tp_getset, router_getset},
    {Py_tp_repr, router_repr},
    {Py_tp_richcompare, router_richcompare},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, router_iter},
    {Py_sq_length, router_len},
    {Py_sq_contains, router_contains},
    {Py_mp_length, router_len},
    {0, NULL},
};

PyType_Spec router_spec = {
    .name = "chash.ConsistentHashRouter",
    .basicsize = sizeof(RouterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = router_slots,
};

