/*
 * zones.c - the nodes' zones (datacentres, racks): add_service_node's
 * zone=, router.zones, get_preference_list's distinct_zones=, and keeping
 * zones through pickling.  Part of chash._chash (router.h, table.h).
 *
 * A zone is a label beside the ring, never part of it: routing, the
 * fingerprint and == ignore zones, so a router's keys go where they went
 * without them.  They live in a dict of the router (RouterObject.zones,
 * node -> zone, both exact str, NULL until a first zone is set), which the
 * lookups never read: get_target_node costs what it did.
 *
 * The methods below wrap the ring's and the 64-bit ring's own (mutate.c,
 * table.c): the wrapped call changes the ring, then the zone dict follows.
 * Setting a zone can fail only for memory, after the node went in; the
 * node is then taken out again (a new node) so the call changes nothing.
 */
#include "table.h"

/* The router's zone dict, made on first use; NULL with an exception. */
static PyObject *zones_of(RouterObject *self)
{
    if (!self->zones)
        self->zones = PyDict_New();
    return self->zones;
}

/* zone= : None, or a non-empty str; 0 or -1 with TypeError/ValueError. */
static int check_zone(PyObject *zone)
{
    if (zone == Py_None)
        return 0;
    if (!PyUnicode_CheckExact(zone)) {
        PyErr_Format(PyExc_TypeError, "zone must be str or None, not %.200s",
                     Py_TYPE(zone)->tp_name);
        return -1;
    }
    if (PyUnicode_GET_LENGTH(zone) == 0) {
        PyErr_SetString(PyExc_ValueError, "zone must not be empty");
        return -1;
    }
    return 0;
}

typedef PyObject *(*add_fn)(RouterObject *, PyObject *, PyObject *);
typedef PyObject *(*node_fn)(RouterObject *, PyObject *);

/* add_service_node with zone= taken out of kwds and applied after. */
static PyObject *zoned_add(RouterObject *self, PyObject *args, PyObject *kwds, add_fn add)
{
    PyObject *zone = kwds ? PyDict_GetItemString(kwds, "zone") : NULL;
    if (!zone)
        return add(self, args, kwds);
    if (check_zone(zone) < 0)
        return NULL;
    PyObject *rest = PyDict_Copy(kwds);
    if (!rest || PyDict_DelItemString(rest, "zone") < 0) {
        Py_XDECREF(rest);
        return NULL;
    }
    Py_INCREF(zone);
    PyObject *node = PyTuple_GET_SIZE(args) ? PyTuple_GET_ITEM(args, 0)
                                            : PyDict_GetItemString(rest, "real_node_id");
    Py_XINCREF(node);
    int was_in = node ? PySequence_Contains((PyObject *)self, node) : 0;
    PyObject *result = was_in < 0 ? NULL : add(self, args, PyDict_GET_SIZE(rest) ? rest : NULL);
    Py_DECREF(rest);
    if (result && zone != Py_None) {
        PyObject *zones = zones_of(self);
        if (!zones || PyDict_SetItem(zones, node, zone) < 0) {
            Py_CLEAR(result);
            if (!was_in) { /* take the new node out again: nothing changed */
                PyObject *type, *value, *tb;
                PyErr_Fetch(&type, &value, &tb);
                PyObject *gone = PyObject_CallMethod((PyObject *)self, "discard_service_node",
                                                     "O", node);
                Py_XDECREF(gone);
                PyErr_Clear();
                PyErr_Restore(type, value, tb);
            }
        }
    }
    Py_XDECREF(node);
    Py_DECREF(zone);
    return result;
}

PyObject *router_add_zoned(RouterObject *self, PyObject *args, PyObject *kwds)
{
    return zoned_add(self, args, kwds, router_add);
}

PyObject *table_add_zoned(RouterObject *self, PyObject *args, PyObject *kwds)
{
    return zoned_add(self, args, kwds, (add_fn)table_add);
}

/* A removal, then the node's zone dropped (a str key: cannot fail but
 * for a node absent, which is fine). */
static PyObject *zoned_remove(RouterObject *self, PyObject *node, node_fn remove)
{
    PyObject *result = remove(self, node);
    if (result && self->zones && PyUnicode_Check(node)
        && PyDict_Contains((PyObject *)self->zones, node) == 1
        && PySequence_Contains((PyObject *)self, node) == 0)
        (void)PyDict_DelItem(self->zones, node);
    return result;
}

PyObject *router_remove_zoned(RouterObject *self, PyObject *node)
{
    return zoned_remove(self, node, router_remove);
}

PyObject *router_discard_zoned(RouterObject *self, PyObject *node)
{
    return zoned_remove(self, node, router_discard);
}

PyObject *table_remove_zoned(RouterObject *self, PyObject *node)
{
    return zoned_remove(self, node, (node_fn)table_remove);
}

PyObject *table_discard_zoned(RouterObject *self, PyObject *node)
{
    return zoned_remove(self, node, (node_fn)table_discard);
}

/* Drops the zones of nodes no longer in the router; 0 or -1. */
static int prune(RouterObject *self)
{
    if (!self->zones)
        return 0;
    PyObject *keys = PyDict_Keys(self->zones);
    if (!keys)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *node = PyList_GET_ITEM(keys, i);
        int in = PySequence_Contains((PyObject *)self, node);
        if (in < 0 || (in == 0 && PyDict_DelItem(self->zones, node) < 0)) {
            Py_DECREF(keys);
            return -1;
        }
    }
    Py_DECREF(keys);
    return 0;
}

static PyObject *zoned_replace(RouterObject *self, PyObject *nodes, node_fn replace)
{
    PyObject *result = replace(self, nodes);
    if (result && prune(self) < 0)
        Py_CLEAR(result);
    return result;
}

PyObject *router_replace_zoned(RouterObject *self, PyObject *nodes)
{
    return zoned_replace(self, nodes, router_replace_nodes);
}

PyObject *table_replace_zoned(RouterObject *self, PyObject *nodes)
{
    return zoned_replace(self, nodes, (node_fn)table_replace_nodes);
}

PyObject *router_get_zones(RouterObject *self, void *Py_UNUSED(closure))
{
    return self->zones ? PyDict_Copy(self->zones) : PyDict_New();
}

/* ------------------------------------------------------------------ */
/* Preference lists                                                   */

typedef PyObject *(*pref_fn)(RouterObject *, PyObject *const *, Py_ssize_t);

/* The owner first, then the next nodes clockwise whose zone is not yet in
 * the list (a node without a zone is a zone of its own), n at most. */
static PyObject *distinct(RouterObject *self, PyObject *key, PyObject *n_obj, pref_fn pref)
{
    Py_ssize_t n = PyLong_AsSsize_t(n_obj);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    PyObject *count = PyLong_FromSsize_t(PyObject_Length((PyObject *)self));
    if (!count)
        return NULL;
    PyObject *args[2] = {key, count};
    PyObject *all = pref(self, args, 2);
    Py_DECREF(count);
    if (!all)
        return NULL;
    PyObject *out = PyList_New(0);
    PyObject *seen = PySet_New(NULL);
    for (Py_ssize_t i = 0; out && seen && i < PyList_GET_SIZE(all) && PyList_GET_SIZE(out) < n;
         i++) {
        PyObject *node = PyList_GET_ITEM(all, i);
        PyObject *zone = self->zones ? PyDict_GetItemWithError(self->zones, node) : NULL;
        if (!zone && PyErr_Occurred()) {
            Py_CLEAR(out);
            break;
        }
        /* No zone: the node stands for itself (a tuple never equals a zone str). */
        PyObject *label = zone ? Py_NewRef(zone) : PyTuple_Pack(1, node);
        int dup = label ? PySet_Contains(seen, label) : -1;
        if (dup < 0 || (dup == 0 && (PySet_Add(seen, label) < 0 || PyList_Append(out, node) < 0)))
            Py_CLEAR(out);
        Py_XDECREF(label);
    }
    if (!seen)
        Py_CLEAR(out);
    Py_XDECREF(seen);
    Py_DECREF(all);
    return out;
}

/* get_preference_list(key, n, /, *, distinct_zones=False) */
static PyObject *zoned_preference(RouterObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames, pref_fn pref)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int zoned = 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(name, "distinct_zones") != 0) {
            PyErr_Format(PyExc_TypeError,
                         "get_preference_list() got an unexpected keyword argument %R", name);
            return NULL;
        }
        zoned = PyObject_IsTrue(args[nargs + i]);
        if (zoned < 0)
            return NULL;
    }
    if (!zoned || nargs != 2)
        return pref(self, args, nargs);
    /* The plain call checks the arguments first (types, n >= 0). */
    PyObject *checked = pref(self, args, nargs);
    if (!checked)
        return NULL;
    Py_DECREF(checked);
    return distinct(self, args[0], args[1], pref);
}

PyObject *router_preference_zoned(RouterObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    return zoned_preference(self, args, nargsf, kwnames, router_preference);
}

PyObject *table_preference_zoned(RouterObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    return zoned_preference(self, args, nargsf, kwnames, (pref_fn)table_preference);
}

/* ------------------------------------------------------------------ */
/* Pickling                                                           */

/* __reduce__: the ring's own, with {"zones": {...}} as the state when a
 * node has a zone. */
static PyObject *zoned_reduce(RouterObject *self, PyObject *(*reduce)(RouterObject *, PyObject *))
{
    PyObject *plain = reduce(self, NULL);
    if (!plain || !self->zones || PyDict_GET_SIZE(self->zones) == 0)
        return plain;
    PyObject *zones = PyDict_Copy(self->zones);
    PyObject *state = zones ? Py_BuildValue("{sN}", "zones", zones) : NULL;
    PyObject *result = state ? Py_BuildValue("(OON)", PyTuple_GET_ITEM(plain, 0),
                                             PyTuple_GET_ITEM(plain, 1), state)
                             : NULL;
    Py_DECREF(plain);
    return result;
}

PyObject *router_reduce_zoned(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    return zoned_reduce(self, router_reduce);
}

PyObject *table_reduce_zoned(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    return zoned_reduce(self, (PyObject * (*)(RouterObject *, PyObject *)) table_reduce);
}

PyObject *router_setstate(RouterObject *self, PyObject *state)
{
    PyObject *zones = PyDict_Check(state) ? PyDict_GetItemString(state, "zones") : NULL;
    if (!zones || !PyDict_Check(zones)) {
        PyErr_SetString(PyExc_ValueError, "router state must be {'zones': {node: zone}}");
        return NULL;
    }
    PyObject *fresh = PyDict_New();
    Py_ssize_t pos = 0;
    PyObject *node, *zone;
    while (fresh && PyDict_Next(zones, &pos, &node, &zone)) {
        int in = PyUnicode_CheckExact(node) ? PySequence_Contains((PyObject *)self, node) : 0;
        if (in <= 0 || zone == Py_None || check_zone(zone) < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "zones of nodes not in the router: %R", node);
            Py_CLEAR(fresh);
        } else if (PyDict_SetItem(fresh, node, zone) < 0) {
            Py_CLEAR(fresh);
        }
    }
    if (!fresh)
        return NULL;
    Py_XSETREF(self->zones, fresh);
    Py_RETURN_NONE;
}

const char zoned_add_doc[] = PyDoc_STR(
"add_service_node($self, /, real_node_id, weight=1.0, *, id=None, zone=None)\n--\n\n"
"Add a node owning round(virtual_node_count * weight) points (at least 1).\n\n"
"Adding a node already present with the same weight does nothing; with\n"
"another weight, the node gains or loses only points of its own, so keys\n"
"move only onto or off that node.  The nginx, ketama and libmemcached\n"
"layouts take integer weights as their references do; in ketama (and in\n"
"libmemcached once a weight is above 1) every node's point count follows\n"
"from its share of the total weight, so any change recomputes them all.\n\n"
"id is the haproxy layout's server id (puid, 1 .. 2**31-1), which decides\n"
"the node's points: given, it must be free; None numbers the node as\n"
"HAProxy numbers a server without an id, counting in add order.  Other\n"
"layouts take no id.\n\n"
"zone names the node's zone (a datacentre, a rack) for\n"
"get_preference_list(..., distinct_zones=True) and chash.zones; it never\n"
"changes routing.  None leaves a node present as it was (a new node has\n"
"no zone).");

const char wide_zoned_add_doc[] = PyDoc_STR(
"add_service_node($self, /, real_node_id, weight=1, *, zone=None)\n--\n\n"
"Add a node (or give a present one a new weight) and rebuild, as the\n"
"reference does on every host change.  Weights are integers from 1 to\n"
"2**32 - 1, as Envoy's and gRPC's.  zone names the node's zone for\n"
"get_preference_list(..., distinct_zones=True) and chash.zones; it never\n"
"changes routing.  None leaves a node present as it was.");

const char zoned_preference_doc[] = PyDoc_STR(
"get_preference_list($self, key, n, /, *, distinct_zones=False)\n--\n\n"
"The first n distinct nodes met walking the ring clockwise from key's\n"
"owner, owner first (fewer when the ring holds fewer): replicas or\n"
"fallbacks.  With distinct_zones, the owner first, then the next nodes\n"
"clockwise whose zone is not yet in the list (a node without a zone counts\n"
"as a zone of its own), so n copies land in n zones when there are n.");

const char setstate_doc[] = PyDoc_STR(
"__setstate__($self, state, /)\n--\n\n"
"Restore the zones a pickle carries ({'zones': {node: zone}}).");
