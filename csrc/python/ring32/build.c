/*
 * build.c - a 32-bit ring built whole from a list of (node, weight) pairs,
 * for the two calls that need one: unpickling (__reduce__ hands _rebuild
 * the type, the scheme's names and the pairs) and _replace_nodes (a ring
 * like self's is filled aside, then the rings are swapped).  Both start
 * from ring32_empty() (family.c) and fill the ring through fill(), over
 * the mutations of mutate.c and ketama.c; nothing is packed into a Python
 * tuple to be parsed again (ring32.h).
 */
#include "ring32.h"

#include "python/state.h"

/* The node (borrowed) and weight of a pair, a (node, weight) tuple; 0, or
 * -1 with TypeError / ValueError. */
static int read_pair(PyObject *pair, PyObject **node, double *weight)
{
    if (!PyTuple_Check(pair)) {
        PyErr_Format(PyExc_TypeError, "nodes must hold (node, weight) tuples, not %.200s",
                     Py_TYPE(pair)->tp_name);
        return -1;
    }
    return PyArg_ParseTuple(pair, "Od", node, weight) ? 0 : -1;
}

/* The haproxy layout's entries: (node, weight) or (node, weight, id)
 * tuples, added with haproxy_add in order; 0, or -1 with an exception. */
static int fill_haproxy(RouterObject *fresh, PyObject *seq)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i), *node, *id_obj = Py_None;
        double weight;
        uint32_t puid;
        if (!PyTuple_Check(item)) {
            PyErr_Format(PyExc_TypeError, "nodes must hold (node, weight[, id]) tuples, not %.200s",
                         Py_TYPE(item)->tp_name);
            return -1;
        }
        if (!PyArg_ParseTuple(item, "Od|O", &node, &weight, &id_obj)
            || parse_haproxy_id(id_obj, &puid) < 0 || haproxy_add(fresh, node, weight, puid) < 0)
            return -1;
    }
    return 0;
}

/*
 * Adds the (node, weight) pairs of seq (a tuple) to fresh, an empty router
 * nobody else holds yet, in that order, in one step: one ketama_update for
 * the layouts whose point counts go by share of the total weight, one
 * add_nodes_at_once for the others, not one change a node.  0, or -1 with an exception set (a pair that is not a
 * (str, number) tuple, a bad weight, a full ring); fresh may then hold
 * some of the nodes, and the caller drops it.
 */
static int fill(RouterObject *fresh, PyObject *seq)
{
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (fresh->r32.scheme.layout == CHASH_LAYOUT_HAPROXY)
        return fill_haproxy(fresh, seq);
    /* The nodes are borrowed from seq, which outlives the update. */
    PyObject **nodes = PyMem_New(PyObject *, (size_t)n + 1);
    double *weights = PyMem_New(double, (size_t)n + 1);
    int status = nodes && weights ? 0 : -1;
    if (status < 0)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; status == 0 && i < n; i++)
        status = read_pair(PyTuple_GET_ITEM(seq, i), &nodes[i], &weights[i]);
    if (status == 0)
        status = counts_by_share(fresh) ? ketama_update(fresh, nodes, weights, n, -1)
                                        : add_nodes_at_once(fresh, nodes, weights, (size_t)n);
    PyMem_Free(nodes);
    PyMem_Free(weights);
    return status;
}

/* fill() from any iterable of pairs, read once into a tuple first (so the
 * pairs cannot change while the router is filled). */
static int fill_from(RouterObject *fresh, PyObject *pairs)
{
    PyObject *seq = PySequence_Tuple(pairs);
    if (!seq)
        return -1;
    int status = fill(fresh, seq);
    Py_DECREF(seq);
    return status;
}

PyObject *ring32_reduce(RouterObject *self)
{
    PyObject *hash = ring32_hash_name(self);
    if (!hash)
        return NULL;
    size_t n = chash_ring_node_count(self->r32.ring);
    PyObject *nodes = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; nodes && i < n; i++) {
        NodeEntry *entry = entry_at(self, i);
        PyObject *item = self->r32.scheme.layout == CHASH_LAYOUT_HAPROXY
            ? Py_BuildValue("(Odk)", entry->name, entry->weight, (unsigned long)entry->puid)
            : Py_BuildValue("(Od)", entry->name, entry->weight);
        if (!item)
            Py_CLEAR(nodes);
        else
            PyList_SET_ITEM(nodes, (Py_ssize_t)i, item);
    }
    PyObject *result = NULL;
    if (nodes && self->r32.scheme.layout == CHASH_LAYOUT_HAPROXY)
        /* The id counter too: it numbers the nodes added later. */
        result = Py_BuildValue("((nOsk)O)", (Py_ssize_t)self->r32.base_points, hash,
                               chash_layout_name(self->r32.scheme.layout),
                               (unsigned long)(self->r32.ids.next ? self->r32.ids.next : 1), nodes);
    else if (nodes)
        result = Py_BuildValue("((nOsO)O)", (Py_ssize_t)self->r32.base_points, hash,
                               chash_layout_name(self->r32.scheme.layout), Py_None, nodes);
    Py_XDECREF(nodes);
    Py_DECREF(hash);
    return result;
}

/* settings (virtual_node_count, hash, layout, next_id or None): read as
 * _rebuild reads its arguments. */
PyObject *ring32_unpickle(PyTypeObject *cls, PyObject *settings, PyObject *nodes)
{
    PyObject *vnodes, *hash, *layout, *next_id;
    if (!PyArg_ParseTuple(settings, "OOOO:_reconstruct", &vnodes, &hash, &layout, &next_id))
        return NULL;
    PyObject *module = PyType_GetModuleByDef(cls, &chash_module);
    PyObject *args = module ? PyTuple_Pack(next_id == Py_None ? 5 : 6, (PyObject *)cls, vnodes,
                                           hash, layout, nodes, next_id)
                            : NULL;
    PyObject *result = args ? module_rebuild(module, args) : NULL;
    Py_XDECREF(args);
    return result;
}

const char rebuild_doc[] = PyDoc_STR(
"_rebuild(cls, virtual_node_count, hash, layout, nodes, next_id=None, /)\n--\n\n"
"A router of class cls holding nodes, a list of (node, weight) pairs\n"
"((node, weight, id) for the haproxy layout, whose id counter next_id\n"
"then takes, when given).");

/* What __reduce__ returns is read here: the arguments are checked as the
 * constructor's are (ring32_init), then the pairs fill the router. */
PyObject *module_rebuild(PyObject *module, PyObject *args)
{
    PyTypeObject *cls;
    Py_ssize_t vnodes;
    PyObject *hash, *nodes, *layout, *next_obj = Py_None;
    if (!PyArg_ParseTuple(args, "O!nOOO|O:_rebuild", &PyType_Type, &cls, &vnodes, &hash, &layout,
                          &nodes, &next_obj))
        return NULL;
    if (!PyType_IsSubtype(cls, get_state(module)->router_type)) {
        PyErr_SetString(PyExc_TypeError, "_rebuild: cls must be a ConsistentHashRouter type");
        return NULL;
    }
    PyObject *self = (PyObject *)router_alloc(cls);
    if (self && (ring32_init((RouterObject *)self, vnodes, 1, hash, layout) < 0
                 || fill_from((RouterObject *)self, nodes) < 0))
        Py_CLEAR(self);
    uint32_t next;
    if (self && next_obj != Py_None) {
        if (((RouterObject *)self)->r32.scheme.layout != CHASH_LAYOUT_HAPROXY) {
            PyErr_SetString(PyExc_ValueError, "_rebuild: next_id is for the haproxy layout only");
            Py_CLEAR(self);
        } else if (parse_haproxy_id(next_obj, &next) < 0) {
            Py_CLEAR(self);
        } else {
            ((RouterObject *)self)->r32.ids.next = next;
        }
    }
    return self;
}

/* All-or-nothing: the new ring is filled in a router of its own, with
 * self's scheme, and swapped in only once it is complete. */
int ring32_replace(RouterObject *self, PyObject *pairs)
{
    RouterObject *fresh = router_alloc(Py_TYPE(self));
    if (!fresh)
        return -1;
    if (ring32_empty(fresh, &self->r32.scheme, self->r32.hash_fn, self->r32.base_points) < 0
        || fill_from(fresh, pairs) < 0) {
        Py_DECREF(fresh);
        return -1;
    }
    /* Swap the rings: self takes the new one, fresh releases the old one
     * (and its entries) when it goes. */
    chash_ring *ring = self->r32.ring;
    self->r32.ring = fresh->r32.ring;
    fresh->r32.ring = ring;
    HaproxyIds ids = self->r32.ids; /* the haproxy layout's ids go with the ring */
    self->r32.ids = fresh->r32.ids;
    fresh->r32.ids = ids;
    Py_DECREF(fresh);
    return 0;
}
