/*
 * bounded.c - chash._chash.BoundedLoads, the C base of
 * chash.BoundedLoadRouter: bounded loads over any router, each walked in
 * its own preference order, the bound weighted as Envoy's
 * hash_balance_factor weighs it (strategies/bounded.h).
 *
 * What it holds: the router, its bound get_target_node and
 * get_preference_list (called through vectorcall: the router's own C
 * methods for the routers of this extension), and a load table
 * (chash_loads) with one slot a node: a slot per node of the router, at
 * its weight, and one at weight 0 per node that left the router while it
 * still held requests (never chosen again, released as any other).  index
 * maps a node to its slot, nodes a slot to its node; beside index, a table
 * by object identity (the node objects of nodes, which are the router's
 * own, the ones its lookups return and a caller releases) answers the hot
 * path without hashing a string, index answering only the equal strings
 * that are other objects.
 *
 * The table follows the router: a ConsistentHashRouter, MaglevRouter,
 * JumpRouter or RendezvousRouter counts its membership changes
 * (the shell's one counter, read by router_changes()); when it moved since the
 * table was built, the next acquire rebuilds it from router.weights,
 * carrying every held load over.  Any other router (an object with
 * get_target_node, get_preference_list and weights, or iterable nodes) is
 * re-read whenever its weights matter: its owner unknown or at its bound.
 *
 * Shared between threads, every call (acquire, release, bound, loads,
 * in_flight, _check, repr) runs under the object's own lock (CHASH_LOCKED:
 * a critical section from Python 3.13, the GIL before), since each changes
 * or reads the whole table: calls on one BoundedLoads are serialised, and
 * calls on different ones run in parallel.  The router's methods are
 * called first (a Python hash callable may run there), then the table is
 * brought up to date, the slot chosen and taken with no Python code in
 * between.  A failed acquire or release leaves every load as it was.
 */
#include "bounded.h"

#include "args.h"
#include "router.h"
#include "strategies/bounded.h"

#include <math.h>

/*
 * Open addressing over object addresses: keys are borrowed from the node
 * list the table was built with (it lives exactly as long), linear
 * probing, at most half full; mask + 1 entries, a power of two.  An
 * entry holds its object and its slot side by side, so a lookup that
 * hits at once reads one cache line.
 */
typedef struct {
    PyObject *node;
    size_t slot;
} IdentityEntry;

typedef struct {
    IdentityEntry *entries;
    size_t mask;
    unsigned shift; /* 64 - log2(mask + 1): the hash's top bits index the table */
} IdentityTable;

static size_t identity_home(const IdentityTable *table, const PyObject *p)
{
    /* Fibonacci hashing: multiply, keep the top bits.  The low bits of the
     * product depend only on the address's low bits, which objects of one
     * size class share, so they would pile the nodes onto a few entries. */
    return (size_t)(((uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15)) >> table->shift);
}

/* The table of the objects of nodes (a list); 0, or -1 with MemoryError
 * and *out untouched. */
static int identity_build(PyObject *nodes, IdentityTable *out)
{
    size_t n = (size_t)PyList_GET_SIZE(nodes), size = 8;
    unsigned bits = 3;
    while (size < 2 * n) {
        size *= 2;
        bits++;
    }
    IdentityEntry *entries = PyMem_Calloc(size, sizeof *entries);
    if (!entries) {
        PyErr_NoMemory();
        return -1;
    }
    IdentityTable table = {entries, size - 1, 64 - bits};
    for (size_t k = 0; k < n; k++) {
        PyObject *node = PyList_GET_ITEM(nodes, (Py_ssize_t)k);
        size_t i = identity_home(&table, node);
        while (entries[i].node)
            i = (i + 1) & table.mask;
        entries[i].node = node;
        entries[i].slot = k;
    }
    *out = table;
    return 0;
}

static void identity_free(IdentityTable *table)
{
    PyMem_Free(table->entries);
    table->entries = NULL;
    table->mask = 0;
    table->shift = 0;
}

/* The slot of this very object, or -1. */
static Py_ssize_t identity_find(const IdentityTable *table, const PyObject *node)
{
    if (!table->entries)
        return -1;
    for (size_t i = identity_home(table, node); table->entries[i].node;
         i = (i + 1) & table->mask)
        if (table->entries[i].node == node)
            return (Py_ssize_t)table->entries[i].slot;
    return -1;
}

typedef struct {
    PyObject_HEAD
    PyObject *router;
    PyObject *get;           /* router.get_target_node */
    PyObject *preference;    /* router.get_preference_list */
    const uint64_t *changes; /* the router's change count, or NULL for another kind */
    uint64_t seen;           /* *changes when the table was built */
    double balance;
    PyObject *index;         /* dict: node -> slot (int) */
    PyObject *nodes;         /* list: slot -> node */
    IdentityTable same;      /* node object -> slot, for the objects of nodes */
    chash_loads *loads;      /* never NULL once made */
    /* router.get_target_node's C function when it is a METH_O builtin of
     * the router (every router of this extension), called directly. */
    PyCFunction get_fn;
    PyObject *get_self;
} BoundedObject;

/* The first preference list asked for when the owner is at its bound:
 * enough for nearly every walk, short enough to stay cheap at 1,000 nodes. */
#define FIRST_WALK 8

/* ------------------------------------------------------------------ */
/* The table                                                          */

/* The slot of node, or -1 when it has none (-1 with an exception on error:
 * check PyErr_Occurred). */
static Py_ssize_t slot_of(BoundedObject *self, PyObject *node)
{
    Py_ssize_t same = identity_find(&self->same, node);
    if (same >= 0)
        return same;
    PyObject *at = PyDict_GetItemWithError(self->index, node);
    return at ? PyLong_AsSsize_t(at) : -1;
}

/* The router's {node: weight}: router.weights, or 1.0 for every node it
 * iterates over; a new dict, or NULL with an exception. */
static PyObject *router_weights(PyObject *router)
{
    PyObject *weights = PyObject_GetAttrString(router, "weights");
    if (weights) {
        if (PyDict_Check(weights))
            return weights;
        PyObject *copy = PyDict_New();
        if (copy && PyDict_Merge(copy, weights, 1) < 0)
            Py_CLEAR(copy);
        Py_DECREF(weights);
        return copy;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return NULL;
    PyErr_Clear();
    PyObject *all = PyDict_New(), *it = all ? PyObject_GetIter(router) : NULL;
    if (!it) {
        Py_XDECREF(all);
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError,
                            "BoundedLoadRouter: the router has neither weights nor nodes to iterate");
        }
        return NULL;
    }
    PyObject *one = PyFloat_FromDouble(1.0), *node;
    while (one && (node = PyIter_Next(it))) {
        int failed = PyDict_SetItem(all, node, one);
        Py_DECREF(node);
        if (failed)
            break;
    }
    Py_DECREF(it);
    Py_XDECREF(one);
    if (PyErr_Occurred())
        Py_CLEAR(all);
    return all;
}

/*
 * Builds the table again from the router's weights, every held load
 * carried over (a held node the router no longer has keeps a slot at
 * weight 0).  All-or-nothing: the new index, node list and table are made
 * aside and swapped in whole; 0, or -1 with an exception and the old ones
 * in place.
 */
static int rebuild(BoundedObject *self)
{
    uint64_t seen = self->changes ? __atomic_load_n(self->changes, __ATOMIC_RELAXED) : 0;
    PyObject *weights = router_weights(self->router);
    if (!weights)
        return -1;
    size_t old_n = chash_loads_size(self->loads);
    size_t cap = (size_t)PyDict_GET_SIZE(weights) + old_n + 1;
    double *w = PyMem_New(double, cap);
    uint64_t *l = PyMem_New(uint64_t, cap);
    PyObject *index = PyDict_New(), *nodes = PyList_New(0);
    int result = w && l && index && nodes ? 0 : -1;
    if (result < 0 && !PyErr_Occurred())
        PyErr_NoMemory();
    size_t n = 0;
    Py_ssize_t pos = 0;
    PyObject *node, *weight;
    while (result == 0 && PyDict_Next(weights, &pos, &node, &weight)) {
        double value = PyFloat_AsDouble(weight);
        if (value == -1.0 && PyErr_Occurred()) {
            result = -1;
            break;
        }
        if (!isfinite(value) || value < 0.0) {
            PyErr_Format(PyExc_ValueError, "BoundedLoadRouter: node %R has weight %R", node, weight);
            result = -1;
            break;
        }
        Py_ssize_t old = slot_of(self, node);
        PyObject *at = PyLong_FromSize_t(n);
        if (PyErr_Occurred() || !at || PyDict_SetItem(index, node, at) < 0
            || PyList_Append(nodes, node) < 0)
            result = -1;
        Py_XDECREF(at);
        w[n] = value;
        l[n] = old >= 0 ? chash_loads_load(self->loads, (size_t)old) : 0;
        n++;
    }
    for (size_t k = 0; result == 0 && k < old_n; k++) {
        uint64_t held = chash_loads_load(self->loads, k);
        if (held == 0)
            continue;
        node = PyList_GET_ITEM(self->nodes, (Py_ssize_t)k);
        int present = PyDict_Contains(index, node);
        if (present != 0) {
            result = present < 0 ? -1 : 0;
            continue;
        }
        PyObject *at = PyLong_FromSize_t(n);
        if (!at || PyDict_SetItem(index, node, at) < 0 || PyList_Append(nodes, node) < 0)
            result = -1;
        Py_XDECREF(at);
        w[n] = 0.0;
        l[n] = held;
        n++;
    }
    IdentityTable same = {NULL, 0, 0};
    if (result == 0)
        result = identity_build(nodes, &same);
    chash_loads *loads = NULL;
    if (result == 0) {
        int status = chash_loads_create(&loads, self->balance, n, w, l);
        if (status != CHASH_OK) {
            chash_py_error(status, NULL, "BoundedLoadRouter: the router's weights");
            result = -1;
        }
    }
    PyMem_Free(w);
    PyMem_Free(l);
    Py_DECREF(weights);
    if (result < 0) {
        identity_free(&same);
        Py_XDECREF(index);
        Py_XDECREF(nodes);
        return -1;
    }
    /* Nothing can fail from here: swap the new table in whole (the old
     * identity table's keys are the old list's: freed before it). */
    chash_loads_free(self->loads);
    self->loads = loads;
    identity_free(&self->same);
    self->same = same;
    Py_SETREF(self->index, index);
    Py_SETREF(self->nodes, nodes);
    self->seen = seen;
    return 0;
}

static int stale(const BoundedObject *self)
{
    return self->changes && __atomic_load_n(self->changes, __ATOMIC_RELAXED) != self->seen;
}

/* ------------------------------------------------------------------ */
/* Acquire and release                                                */

/*
 * The owner is at its bound: the first node of the router's preference
 * list for key that is below its own, asked for FIRST_WALK nodes, then
 * for all of them.  Some node is always below (bounded.h); should the
 * router list none, the owner's slot is kept.  Returns the slot, or -1
 * with an exception.
 */
static Py_ssize_t walk(BoundedObject *self, PyObject *key, PyObject *owner, Py_ssize_t slot)
{
    Py_ssize_t count = PyObject_Length(self->router);
    if (count < 0)
        return -1;
    Py_ssize_t ask = count < FIRST_WALK ? count : FIRST_WALK;
    for (;;) {
        PyObject *n = PyLong_FromSsize_t(ask);
        if (!n)
            return -1;
        PyObject *args[2] = {key, n};
        PyObject *list = PyObject_Vectorcall(self->preference, args, 2, NULL);
        Py_DECREF(n);
        if (!list)
            return -1;
        PyObject *seq = PySequence_Fast(list, "get_preference_list must return a sequence");
        Py_DECREF(list);
        if (!seq)
            return -1;
        /* The router ran: the table is brought up to date only now, and
         * nothing below runs Python code until the slot is taken. */
        if ((stale(self) || !self->changes) && rebuild(self) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
        uint32_t *order = PyMem_New(uint32_t, (size_t)len + 1);
        if (!order) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
        size_t m = 0;
        for (Py_ssize_t i = 0; i < len; i++) {
            Py_ssize_t at = slot_of(self, PySequence_Fast_GET_ITEM(seq, i));
            if (at < 0 && PyErr_Occurred()) {
                PyMem_Free(order);
                Py_DECREF(seq);
                return -1;
            }
            if (at >= 0)
                order[m++] = (uint32_t)at;
        }
        Py_DECREF(seq);
        size_t pick = chash_loads_pick(self->loads, order, m);
        Py_ssize_t chosen = pick < m ? (Py_ssize_t)order[pick] : -1;
        PyMem_Free(order);
        if (chosen >= 0)
            return chosen;
        if (ask >= count || len < ask)
            break;
        ask = count;
    }
    /* The owner's slot, looked up again: the table may have been rebuilt. */
    slot = slot_of(self, owner);
    if (slot < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "BoundedLoadRouter: the owner left the router");
    return slot;
}

PyDoc_STRVAR(acquire_doc,
"acquire($self, key, /)\n--\n\n"
"The node to serve key now; its load goes up by one.\n\n"
"The key's owner when it is below its bound, else the first node of the\n"
"router's preference list for key that is.  LookupError when the router\n"
"has no nodes; the router's own exception for a bad key.");

/*
 * acquire past its fast path: the table rebuilt if the router changed, the
 * owner's slot found by equality when it is not the table's own object
 * (or the table re-read for another kind of router), the preference order
 * walked when the owner is at its bound.  Takes over the reference to
 * owner; the chosen node (a new reference), or NULL with an exception and
 * every load as it was.  Kept out of line so that the fast path stays a
 * leaf-like function with few registers to save.
 */
Py_NO_INLINE static PyObject *acquire_slow(BoundedObject *self, PyObject *key, PyObject *owner)
{
    if (stale(self) && rebuild(self) < 0)
        goto error;
    Py_ssize_t slot = slot_of(self, owner);
    /* Not listed: a router of another kind changed, or another thread
     * changed this one between the lookup and the count read: the table is
     * re-read, and the key routed again against the router as it is now. */
    for (int tries = 0; slot < 0 && !PyErr_Occurred() && tries < 3; tries++) {
        if (tries) {
            PyObject *again = self->get_fn ? self->get_fn(self->get_self, key)
                                           : PyObject_CallOneArg(self->get, key);
            if (!again)
                goto error;
            Py_SETREF(owner, again);
        }
        if (rebuild(self) < 0)
            goto error;
        slot = slot_of(self, owner);
    }
    if (slot < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError,
                         "BoundedLoadRouter: the router routed to %R, which it does not list",
                         owner);
        goto error;
    }
    if (!chash_loads_admits(self->loads, (size_t)slot)) {
        slot = walk(self, key, owner, slot);
        if (slot < 0)
            goto error;
    }
    int status = chash_loads_take(self->loads, (size_t)slot);
    if (status != CHASH_OK) {
        chash_py_error(status, NULL, "BoundedLoadRouter.acquire");
        goto error;
    }
    Py_DECREF(owner);
    return Py_NewRef(PyList_GET_ITEM(self->nodes, slot));
error:
    Py_DECREF(owner);
    return NULL;
}

static PyObject *bounded_acquire_unlocked(BoundedObject *self, PyObject *key)
{
    if (!self->get) {
        PyErr_SetString(PyExc_RuntimeError, "BoundedLoadRouter: cleared");
        return NULL;
    }
    PyObject *owner = self->get_fn ? self->get_fn(self->get_self, key)
                                   : PyObject_Vectorcall(self->get, &key, 1, NULL);
    if (!owner)
        return NULL;
    if (owner == Py_None) {
        Py_DECREF(owner);
        PyErr_SetString(PyExc_LookupError, "cannot route: the ring has no nodes");
        return NULL;
    }
    /* The path of nearly every request: the table is current, the owner
     * is its own object (the routers of this extension return their
     * stored ones) and below its bound.  The reference get returned is
     * the one handed back: it is the table's node. */
    if (!stale(self)) {
        Py_ssize_t slot = identity_find(&self->same, owner);
        if (slot >= 0 && chash_loads_try_take(self->loads, (size_t)slot) == 1)
            return owner;
    }
    return acquire_slow(self, key, owner);
}

static PyObject *bounded_acquire(BoundedObject *self, PyObject *key)
{
    PyObject *result;
    CHASH_LOCKED(self, result = bounded_acquire_unlocked(self, key));
    return result;
}

PyDoc_STRVAR(release_doc,
"release($self, node, /)\n--\n\n"
"Ends one request on node; ValueError if it holds none.");

static PyObject *bounded_release_unlocked(BoundedObject *self, PyObject *node)
{
    Py_ssize_t slot = slot_of(self, node);
    if (slot < 0 && PyErr_Occurred())
        return NULL;
    if (slot < 0 || chash_loads_put(self->loads, (size_t)slot) != CHASH_OK) {
        PyErr_Format(PyExc_ValueError, "node %R holds no acquired request", node);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bounded_release(BoundedObject *self, PyObject *node)
{
    PyObject *result;
    CHASH_LOCKED(self, result = bounded_release_unlocked(self, node));
    return result;
}

/* ------------------------------------------------------------------ */
/* What it tells                                                      */

PyDoc_STRVAR(bound_doc,
"bound($self, node=None, /)\n--\n\n"
"The most in-flight requests node may hold after the next acquire (its\n"
"weight's share of ceil(balance_factor * (in_flight + 1)), at least 1);\n"
"without a node, the largest of every node's.  KeyError for a node not in\n"
"the router.");

static PyObject *bounded_bound_unlocked(BoundedObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "bound() takes at most 1 argument (%zd given)", nargs);
        return NULL;
    }
    PyObject *node = nargs ? args[0] : Py_None;
    if (!self->router)
        return PyLong_FromLong(0);
    if ((stale(self) || !self->changes) && rebuild(self) < 0)
        return NULL;
    size_t n = chash_loads_size(self->loads);
    if (node != Py_None) {
        Py_ssize_t slot = slot_of(self, node);
        if (slot < 0 && PyErr_Occurred())
            return NULL;
        uint64_t value = slot < 0 ? 0 : chash_loads_bound(self->loads, (size_t)slot);
        if (value == 0) {
            PyErr_SetObject(PyExc_KeyError, node);
            return NULL;
        }
        return PyLong_FromUnsignedLongLong(value);
    }
    uint64_t most = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t value = chash_loads_bound(self->loads, k);
        most = value > most ? value : most;
    }
    if (most == 0) /* no node: the whole cluster's slots */
        most = chash_bounded_slots(self->balance, chash_loads_in_flight(self->loads), 1.0, 1.0);
    return PyLong_FromUnsignedLongLong(most);
}

static PyObject *bounded_bound(BoundedObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *result;
    CHASH_LOCKED(self, result = bounded_bound_unlocked(self, args, nargs));
    return result;
}

static PyObject *get_loads_unlocked(BoundedObject *self, void *Py_UNUSED(closure))
{
    PyObject *out = PyDict_New();
    size_t n = chash_loads_size(self->loads);
    for (size_t k = 0; out && k < n; k++) {
        uint64_t held = chash_loads_load(self->loads, k);
        if (held == 0)
            continue;
        PyObject *value = PyLong_FromUnsignedLongLong(held);
        if (!value || PyDict_SetItem(out, PyList_GET_ITEM(self->nodes, (Py_ssize_t)k), value) < 0)
            Py_CLEAR(out);
        Py_XDECREF(value);
    }
    return out;
}

static PyObject *get_loads(BoundedObject *self, void *closure)
{
    PyObject *result;
    CHASH_LOCKED(self, result = get_loads_unlocked(self, closure));
    return result;
}

static PyObject *get_in_flight_unlocked(BoundedObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(chash_loads_in_flight(self->loads));
}

static PyObject *get_in_flight(BoundedObject *self, void *closure)
{
    PyObject *result;
    CHASH_LOCKED(self, result = get_in_flight_unlocked(self, closure));
    return result;
}

static PyObject *get_balance(BoundedObject *self, void *Py_UNUSED(closure))
{
    return PyFloat_FromDouble(self->balance);
}

static PyObject *get_router(BoundedObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->router ? self->router : Py_None);
}

PyDoc_STRVAR(check_doc,
"_check($self, /)\n--\n\n"
"Verify every invariant of the load table and its index; AssertionError\n"
"if one is broken.");

static PyObject *bounded_check_unlocked(BoundedObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t n = chash_loads_size(self->loads);
    int ok = chash_loads_check(self->loads) == CHASH_OK
             && (size_t)PyList_GET_SIZE(self->nodes) == n
             && (size_t)PyDict_GET_SIZE(self->index) == n;
    for (size_t k = 0; ok && k < n; k++) {
        Py_ssize_t slot = slot_of(self, PyList_GET_ITEM(self->nodes, (Py_ssize_t)k));
        if (slot < 0 && PyErr_Occurred())
            return NULL;
        ok = slot == (Py_ssize_t)k;
    }
    if (!ok) {
        PyErr_SetString(PyExc_AssertionError, "bounded loads invariant broken");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bounded_check(BoundedObject *self, PyObject *ignored)
{
    PyObject *result;
    CHASH_LOCKED(self, result = bounded_check_unlocked(self, ignored));
    return result;
}

static PyObject *bounded_repr_unlocked(BoundedObject *self)
{
    PyObject *name = PyType_GetName(Py_TYPE(self));
    PyObject *balance = PyFloat_FromDouble(self->balance);
    Py_ssize_t count = self->router ? PyObject_Length(self->router) : 0;
    PyObject *repr = NULL;
    if (name && balance && count >= 0)
        repr = PyUnicode_FromFormat("%U(balance_factor=%R, in_flight=%llu, nodes=%zd)", name,
                                    balance,
                                    (unsigned long long)chash_loads_in_flight(self->loads), count);
    Py_XDECREF(name);
    Py_XDECREF(balance);
    return repr;
}

static PyObject *bounded_repr(BoundedObject *self)
{
    PyObject *result;
    CHASH_LOCKED(self, result = bounded_repr_unlocked(self));
    return result;
}

/* ------------------------------------------------------------------ */
/* Lifetime                                                           */

static PyObject *bounded_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"router", "balance_factor", NULL};
    PyObject *router, *factor = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:BoundedLoadRouter", kwlist, &router, &factor))
        return NULL;
    double balance = 1.25;
    if (factor && parse_balance_factor(factor, &balance) < 0)
        return NULL;
    BoundedObject *self = (BoundedObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->router = Py_NewRef(router);
    self->balance = balance;
    self->changes = router_changes(router); /* the shell's one counter, or NULL */
    self->get = PyObject_GetAttrString(router, "get_target_node");
    if (self->get && PyCFunction_Check(self->get) && PyCFunction_GET_SELF(self->get) == router
        && PyCFunction_GET_FLAGS(self->get) == METH_O) {
        /* The router's own C method: called without the call protocol
         * (get holds the reference that keeps it alive). */
        self->get_fn = PyCFunction_GET_FUNCTION(self->get);
        self->get_self = router;
    }
    self->preference = self->get ? PyObject_GetAttrString(router, "get_preference_list") : NULL;
    self->index = PyDict_New();
    self->nodes = PyList_New(0);
    int status = chash_loads_create(&self->loads, balance, 0, NULL, NULL);
    if (status != CHASH_OK && !PyErr_Occurred())
        chash_py_error(status, NULL, "BoundedLoadRouter");
    if (!self->get || !self->preference || !self->index || !self->nodes || !self->loads
        || rebuild(self) < 0) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "BoundedLoadRouter needs a router with get_target_node and "
                         "get_preference_list, not %.200s", Py_TYPE(router)->tp_name);
        }
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int bounded_traverse(BoundedObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->router);
    Py_VISIT(self->get);
    Py_VISIT(self->preference);
    Py_VISIT(self->index);
    Py_VISIT(self->nodes);
    return 0;
}

static int bounded_clear(BoundedObject *self)
{
    /* The router goes with its change count: none is read after this. */
    self->changes = NULL;
    self->get_fn = NULL;
    self->get_self = NULL;
    Py_CLEAR(self->router);
    Py_CLEAR(self->get);
    Py_CLEAR(self->preference);
    return 0;
}

static void bounded_dealloc(BoundedObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    bounded_clear(self);
    identity_free(&self->same);
    Py_CLEAR(self->index);
    Py_CLEAR(self->nodes);
    chash_loads_free(self->loads);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyMethodDef bounded_methods[] = {
    {"acquire", (PyCFunction)bounded_acquire, METH_O, acquire_doc},
    {"release", (PyCFunction)bounded_release, METH_O, release_doc},
    {"bound", (PyCFunction)(void (*)(void))bounded_bound, METH_FASTCALL, bound_doc},
    {"_check", (PyCFunction)bounded_check, METH_NOARGS, check_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef bounded_getset[] = {
    {"router", (getter)get_router, NULL, "The router whose preference order is walked.", NULL},
    {"balance_factor", (getter)get_balance, NULL, "The balance factor c (>= 1).", NULL},
    {"loads", (getter)get_loads, NULL,
     "In-flight requests per node (nodes holding none are left out).", NULL},
    {"in_flight", (getter)get_in_flight, NULL, "In-flight requests over all nodes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(bounded_doc,
"BoundedLoads(router, balance_factor=1.25)\n--\n\n"
"Bounded loads over router (chash.BoundedLoadRouter adds route()): with t\n"
"requests in flight, a node of weight w out of a total W may hold\n"
"max(ceil(ceil(balance_factor * (t + 1)) * w / W), 1) of them, Envoy's\n"
"hash_balance_factor rule; a key goes to the first node of the router's\n"
"preference list for it that is below its bound.\n\n"
"Safe to share between threads: every call takes the object's own lock\n"
"(each changes the load table), so calls on one object run one at a time.");

static PyType_Slot bounded_slots[] = {
    {Py_tp_doc, (void *)bounded_doc},
    {Py_tp_new, bounded_new},
    {Py_tp_dealloc, bounded_dealloc},
    {Py_tp_traverse, bounded_traverse},
    {Py_tp_clear, bounded_clear},
    {Py_tp_methods, bounded_methods},
    {Py_tp_getset, bounded_getset},
    {Py_tp_repr, bounded_repr},
    {0, NULL},
};

static PyType_Spec bounded_spec = {
    .name = "chash._chash.BoundedLoads",
    .basicsize = sizeof(BoundedObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = bounded_slots,
};

int bounded_type_setup(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &bounded_spec, NULL);
    if (!type)
        return -1;
    int result = PyModule_AddObjectRef(module, "BoundedLoads", type);
    Py_DECREF(type);
    return result;
}
