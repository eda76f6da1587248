/*
 * module.c - chash._chash: the one extension, over one copy of the engine.
 * It holds the router classes, one shell (router.c) over the families:
 * ConsistentHashRouter (ring_class.c; ring32/, ring64.c), MaglevRouter
 * (maglev.c), JumpRouter (jump.c), RendezvousRouter (rendezvous.c,
 * rendezvous_nodes.c), AnchorRouter (anchor.c); the base of BoundedLoadRouter
 * (bounded.c), chash.Move (diff.c), the
 * strategy functions chash.simulate uses (simulate.c) and the gateway's
 * request-head functions (http_head.c).  Here: the module's own functions
 * (_hash; the readers of earlier pickles, _rebuild and _rebuild_table,
 * beside router.c's _reconstruct, which reads every pickle made now), its
 * constants, its
 * state (state.h) and multi-phase init (PEP 489), which calls each
 * type's setup.
 */
#include "state.h"

#include "affinity.h"
#include "bounded.h"
#include "diff.h"
#include "http_head.h"
#include "maglev.h"
#include "ring32/ring32.h"
#include "router.h"
#include "simulate.h"
#include "uhashring.h"

PyDoc_STRVAR(hash_fn_doc,
"_hash(name, data, seed=0, /)\n--\n\n"
"The named hash of bytes as an int (digests read big-endian); for tests.");

static PyObject *module_hash(PyObject *Py_UNUSED(module), PyObject *args)
{
    const char *name;
    Py_buffer data;
    unsigned long long seed = 0;
    if (!PyArg_ParseTuple(args, "sy*|K:_hash", &name, &data, &seed))
        return NULL;
    chash_hash_id id;
    PyObject *result = NULL;
    if (chash_hash_by_name(name, &id) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError, "unknown hash %s", name);
    } else {
        uint8_t digest[CHASH_MAX_DIGEST];
        size_t size = chash_digest(id, data.buf, (size_t)data.len, (uint64_t)seed, digest);
        result = PyObject_CallMethod((PyObject *)&PyLong_Type, "from_bytes", "y#s",
                                     (const char *)digest, (Py_ssize_t)size, "big");
    }
    PyBuffer_Release(&data);
    return result;
}

PyDoc_STRVAR(rebuild_table_doc,
"_rebuild_table(cls, layout, hash, minimum_ring_size, maximum_ring_size, table_size, nodes, /)\n"
"--\n\n"
"A router of class cls (a ConsistentHashRouter of the envoy or grpc layout,\n"
"or a MaglevRouter for layout 'maglev') holding nodes, a list of (node,\n"
"weight) pairs; the arguments are checked as a call's.");

/* The pickles of the routers rebuilt whole, read by the type they name. */
static PyObject *module_rebuild_table(PyObject *module, PyObject *args)
{
    PyTypeObject *cls;
    PyObject *layout, *hash, *lo, *hi, *size, *pairs;
    if (!PyArg_ParseTuple(args, "O!OOOOOO:_rebuild_table", &PyType_Type, &cls, &layout, &hash, &lo,
                          &hi, &size, &pairs))
        return NULL;
    module_state *state = get_state(module);
    if (PyUnicode_Check(layout) && PyUnicode_CompareWithASCIIString(layout, "maglev") == 0) {
        if (!PyType_IsSubtype(cls, state->maglev_type)) {
            PyErr_SetString(PyExc_TypeError, "_rebuild_table: cls must be MaglevRouter");
            return NULL;
        }
        return maglev_rebuild(cls, size, hash, pairs);
    }
    if (!PyType_IsSubtype(cls, state->router_type)) {
        PyErr_SetString(PyExc_TypeError, "_rebuild_table: cls must be a ConsistentHashRouter type");
        return NULL;
    }
    return ring64_rebuild(cls, layout, hash, lo, hi, pairs);
}

static PyMethodDef module_methods[] = {
    {"_hash", module_hash, METH_VARARGS, hash_fn_doc},
    {"_reconstruct", router_reconstruct, METH_VARARGS, reconstruct_doc},
    {"_rebuild", module_rebuild, METH_VARARGS, rebuild_doc},
    {"_rebuild_table", module_rebuild_table, METH_VARARGS, rebuild_table_doc},
    {"_request_head", (PyCFunction)(void (*)(void))module_request_head, METH_FASTCALL,
     request_head_doc},
    {"_backend_head", (PyCFunction)(void (*)(void))module_backend_head, METH_FASTCALL,
     backend_head_doc},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *module)
{
    if (router_type_setup(module) < 0
        || bounded_type_setup(module) < 0
        || diff_module_setup(module) < 0 || affinity_setup(module) < 0
        || uhashring_setup(module) < 0)
        return -1;
    PyObject *hashes = PyTuple_New(CHASH_HASH_COUNT);
    if (!hashes)
        return -1;
    for (int i = 0; i < CHASH_HASH_COUNT; i++) {
        PyObject *name = PyUnicode_FromString(chash_hash_name((chash_hash_id)i));
        if (!name) {
            Py_DECREF(hashes);
            return -1;
        }
        PyTuple_SET_ITEM(hashes, i, name);
    }
    if (PyModule_AddObject(module, "HASHES", hashes) < 0) {
        Py_DECREF(hashes);
        return -1;
    }
    PyObject *layouts = PyTuple_New(CHASH_LAYOUT_COUNT);
    for (int i = 0; layouts && i < CHASH_LAYOUT_COUNT; i++) {
        PyObject *name = PyUnicode_FromString(chash_layout_name((chash_layout_id)i));
        if (!name)
            Py_CLEAR(layouts);
        else
            PyTuple_SET_ITEM(layouts, i, name);
    }
    if (!layouts || PyModule_AddObject(module, "LAYOUTS", layouts) < 0) {
        Py_XDECREF(layouts);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "MAX_VIRTUAL_NODES", MAX_VIRTUAL_NODES) < 0
        || PyModule_AddIntConstant(module, "MAX_NODE_POINTS", (long)CHASH_MAX_NODE_POINTS) < 0
        || PyModule_AddIntConstant(module, "MAX_POINTS", (long)CHASH_MAX_POINTS) < 0
        || PyModule_AddIntConstant(module, "MAX_NODES", (long)CHASH_MAX_NODES) < 0)
        return -1;
    return PyModule_AddFunctions(module, strategy_methods);
}

static int module_traverse(PyObject *module, visitproc visit, void *arg)
{
    for (size_t k = 0; k < ROUTER_CLASSES; k++)
        Py_VISIT(get_state(module)->types[k]);
    Py_VISIT(get_state(module)->router_type);
    Py_VISIT(get_state(module)->maglev_type);
    Py_VISIT(get_state(module)->rendezvous_type);
    Py_VISIT(get_state(module)->move_type);
    return 0;
}

static int module_clear(PyObject *module)
{
    for (size_t k = 0; k < ROUTER_CLASSES; k++)
        Py_CLEAR(get_state(module)->types[k]);
    Py_CLEAR(get_state(module)->router_type);
    Py_CLEAR(get_state(module)->maglev_type);
    Py_CLEAR(get_state(module)->rendezvous_type);
    Py_CLEAR(get_state(module)->move_type);
    return 0;
}

static void module_free(void *module)
{
    module_clear((PyObject *)module);
}

/* Safe without the GIL: routers publish whole states and reclaim old
 * ones by epochs (router.c, epoch.h); BoundedLoads and the affinity table
 * lock themselves per object (docs/reliability.md). */
static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

struct PyModuleDef chash_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "chash._chash",
    .m_doc = "The C engine behind chash: ConsistentHashRouter, MaglevRouter and Move, the "
             "strategies chash.simulate measures, and the gateway's request-head policy.",
    .m_size = sizeof(module_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__chash(void)
{
    return PyModuleDef_Init(&chash_module);
}

