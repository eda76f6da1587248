/*
 * zones.c - the nodes' zones beside the ring (zones.h).  Part of
 * chash._chash.
 */
#include "zones.h"

#include "args.h"

int zones_set(RouterObject *self, PyObject *node, PyObject *zone, ZoneUndo *undo)
{
    undo->node = undo->old = NULL;
    if (!PyUnicode_Check(node))
        return 0;
    if (!self->zones && !(self->zones = PyDict_New()))
        return -1;
    PyObject *key = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
    if (!key)
        return -1;
    PyObject *old = PyDict_GetItemWithError(self->zones, key);
    if ((!old && PyErr_Occurred()) || PyDict_SetItem(self->zones, key, zone) < 0) {
        Py_DECREF(key);
        return -1;
    }
    undo->node = key;
    undo->old = Py_XNewRef(old);
    return 0;
}

void zones_undo(RouterObject *self, ZoneUndo *undo)
{
    if (!undo->node)
        return;
    /* The key is in the dict: replacing its value or deleting it never
     * allocates, so this cannot fail (the caller's exception is kept). */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (undo->old)
        (void)PyDict_SetItem(self->zones, undo->node, undo->old);
    else
        (void)PyDict_DelItem(self->zones, undo->node);
    PyErr_Restore(type, value, tb);
    zones_keep(undo);
}

void zones_keep(ZoneUndo *undo)
{
    Py_CLEAR(undo->node);
    Py_CLEAR(undo->old);
}

int zones_key(RouterObject *self, PyObject *node, PyObject **key)
{
    *key = NULL;
    if (!self->zones || !PyUnicode_Check(node))
        return 0;
    *key = PyUnicode_CheckExact(node) ? Py_NewRef(node) : PyUnicode_FromObject(node);
    return *key ? 0 : -1;
}

void zones_forget(RouterObject *self, PyObject *key)
{
    if (!key)
        return;
    if (self->zones && PyDict_DelItem(self->zones, key) < 0)
        PyErr_Clear(); /* the node had no zone */
    Py_DECREF(key);
}

int zones_prune(RouterObject *self)
{
    if (!self->zones)
        return 0;
    PyObject *keys = PyDict_Keys(self->zones);
    if (!keys)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *node = PyList_GET_ITEM(keys, i);
        int in = self->family->contains(router_state(self), node);
        if (in < 0 || (in == 0 && PyDict_DelItem(self->zones, node) < 0)) {
            Py_DECREF(keys);
            return -1;
        }
    }
    Py_DECREF(keys);
    return 0;
}

PyObject *zones_get(RouterObject *self)
{
    return self->zones ? PyDict_Copy(self->zones) : PyDict_New();
}

PyObject *zones_distinct(RouterObject *self, PyObject *all, size_t n)
{
    PyObject *out = PyList_New(0);
    PyObject *seen = PySet_New(NULL);
    for (Py_ssize_t i = 0; out && seen && i < PyList_GET_SIZE(all) && (size_t)PyList_GET_SIZE(out) < n;
         i++) {
        PyObject *node = PyList_GET_ITEM(all, i);
        /* A strong reference: another thread may change the zones meanwhile. */
        PyObject *zone = NULL;
        if (self->zones && chash_py_dict_get_ref(self->zones, node, &zone) < 0) {
            Py_CLEAR(out);
            break;
        }
        /* No zone: the node stands for itself (a tuple never equals a zone str). */
        PyObject *label = zone ? zone : PyTuple_Pack(1, node);
        int dup = label ? PySet_Contains(seen, label) : -1;
        if (dup < 0 || (dup == 0 && (PySet_Add(seen, label) < 0 || PyList_Append(out, node) < 0)))
            Py_CLEAR(out);
        Py_XDECREF(label);
    }
    if (!seen)
        Py_CLEAR(out);
    Py_XDECREF(seen);
    return out;
}

PyObject *zones_reduce(RouterObject *self, PyObject *plain)
{
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

PyObject *zones_setstate(RouterObject *self, PyObject *state)
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
        int in = PyUnicode_CheckExact(node) ? self->family->contains(router_state(self), node) : 0;
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
