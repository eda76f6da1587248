/*
 * get_bounded.c - every router's get_bounded(key, loads, balance_factor)
 * (get_bounded.h), a part of the shell (router.c lists it in its master
 * table): bounded loads over loads the caller tracks, with nothing
 * acquired or released.
 *
 * The rule is the one chash.BoundedLoadRouter uses, written once in the
 * engine (strategies/bounded.h, chash_bounded_slots_real): with the loads
 * of the router's nodes summing to s, T = ceil(c * (s + 1)), and a node
 * of weight w out of a total W may hold max(ceil(T * w / W), 1); the
 * answer is the first node of the key's preference list whose load is
 * below that.  Loads may be real numbers; a node missing from loads has
 * load 0; an entry for a node the router does not hold is ignored, its
 * value unread.  s is a sum of doubles in whichever order loads is read
 * (exact for whole numbers below 2**53).  Some node is always below its
 * bound (the bounds sum to at least T > s), so with a router that holds a
 * node there is an answer.
 *
 * The walk is lazy: the key's owner first (get_target_node's lookup, the
 * preference list's first node), which nearly always fits; then the
 * preference list in windows of 4, 16, 64, ... nodes, each asked of the
 * family (a ring walks clockwise only as far as the window, jump and
 * Maglev step only that many times), never the whole list unless the
 * walk gets there.  A family that can locate a key (family.h's locate)
 * hashes it once for the owner and the walk both.
 *
 * Reading loads is most of the cost at 100 nodes (read_loads): each entry
 * of loads is found among the router's nodes with one probe of the
 * state's node index (node_index.h, made by the first call on a state),
 * its value read straight from the int or float; a dict lookup a node
 * only when loads is much larger than the router.
 *
 * Only reads, in one read section (epoch.h) on one published state: the
 * family's state through its lookups and its weight_of / node_at (which
 * run no Python code), and the state's node index (which get_bounded
 * makes); every value is an int or float read without calling Python.  A
 * node's load found with a dict lookup (the walk's, or loads much larger
 * than the router) may run a key's __eq__ (a caller's key of its own
 * type): the nodes in hand are then strong references, the index is not
 * used after it, and a router changed meanwhile only changes the answer.
 */
#include "get_bounded.h"

#include "args.h"
#include "epoch.h"
#include "node_index.h"
#include "strategies/bounded.h"

#include <float.h>
#include <math.h>

/* A load as a double, into *out: an int or float (not a bool), finite and
 * >= 0; 0, or -1 with TypeError / ValueError naming node.  Runs no Python
 * code but on the error path (the messages' reprs). */
static int load_value(PyObject *node, PyObject *value, double *out)
{
    double v;
    /* Exact types first: a subtype check on every entry costs more than
     * reading it. */
    if (PyLong_CheckExact(value) || (PyLong_Check(value) && !PyBool_Check(value))) {
        v = PyLong_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return -1;
            PyErr_Clear();
            v = HUGE_VAL;
        }
    } else if (PyFloat_Check(value)) {
        v = PyFloat_AS_DOUBLE(value);
    } else {
        PyErr_Format(PyExc_TypeError,
                     "get_bounded: the load of %R must be an int or float, not %.200s", node,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    if (!(v >= 0.0) || !isfinite(v)) {
        PyErr_Format(PyExc_ValueError,
                     "get_bounded: the load of %R must be a finite number >= 0, not %R", node,
                     value);
        return -1;
    }
    *out = v;
    return 0;
}

/* What every candidate's bound is computed from. */
typedef struct {
    PyObject *loads; /* a dict */
    double balance;  /* c */
    double sum;      /* the held load s */
    double total;    /* W, or -1 until first needed */
    /* The owner's load and weight when the reading met it (-1: not met). */
    double owner_load;
    double owner_weight;
} Bounds;

/* load_value for the common case, inline: an exact int or float that is
 * finite and >= 0 into *out, 0; anything else through load_value (its
 * checks and messages). */
static inline int read_load(PyObject *node, PyObject *value, double *out)
{
    double v;
    if (PyLong_CheckExact(value)) {
        if (chash_py_small_int(value, out))
            return 0;
        v = PyLong_AsDouble(value);
    } else if (PyFloat_CheckExact(value)) {
        v = PyFloat_AS_DOUBLE(value);
    } else {
        return load_value(node, value, out);
    }
    if (!(v >= 0.0 && v <= DBL_MAX)) { /* also NaN, and -1.0 for an overflow */
        PyErr_Clear(); /* load_value reads it again and names it */
        return load_value(node, value, out);
    }
    *out = v;
    return 0;
}

/* The load of node in loads (0 when missing), checked; 0, or -1 with an
 * exception.  A key's __eq__ may run in the lookup: node is the caller's
 * strong reference, and the value found is held while it is read. */
static int load_of(PyObject *loads, PyObject *node, double *out)
{
    PyObject *value = PyDict_GetItemWithError(loads, node);
    *out = 0.0;
    if (!value)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(value);
    int result = read_load(node, value, out);
    Py_DECREF(value);
    return result;
}

/* W: every node's weight, summed in the router's order. */
static double total_weight(RouterObject *self)
{
    double total = 0.0, w;
    for (size_t k = 0; self->family->node_at(self, &k, &w); k++)
        total += w;
    return total;
}

/* Records the owner's load and weight when node is the owner. */
static inline void note_owner(Bounds *b, PyObject *node, PyObject *owner, double v, double w)
{
    if (node == owner) {
        b->owner_load = v;
        b->owner_weight = w;
    }
}

/* s read entry by entry: each entry of loads found among the router's
 * nodes by one probe of ix (by address for the router's own objects, by
 * str value for an equal str), or through the family's weight_of
 * for a key the index cannot answer (not an exact str; every key when ix
 * is NULL).  Runs no Python code but on an error's path (its message), so
 * ix stays valid throughout.  0, or -1 with an exception. */
static int sum_entries(RouterObject *self, Bounds *b, PyObject *owner, NodeIndex *ix)
{
    /* Small ints (in-flight counts) summed apart, as integers: exact, as
     * their double sum is, and kept in a register across the dict's
     * calls, where a double must go through memory. */
    uint64_t whole = 0;
    double sum = 0.0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    NodeIndexProbe probe = {!ix, 0};
    while (PyDict_Next(b->loads, &pos, &key, &value)) {
        double w, v;
        size_t at;
        PyObject *node = ix ? node_index_find(ix, key, &w, &at, &probe) : NULL;
        if (node) {
            key = node; /* the router's object, to meet the owner */
        } else if (!probe.unknown) {
            continue; /* a str that is no node of the router */
        } else if ((w = self->family->weight_of(self, key)) <= 0.0) {
            if (w < 0.0)
                return -1;
            continue;
        }
        if (PyLong_CheckExact(value) && chash_py_small_int(value, &v)) {
            whole += (uint64_t)v;
        } else if (read_load(key, value, &v) < 0) {
            return -1;
        } else {
            sum += v;
        }
        note_owner(b, key, owner, v, w);
    }
    b->sum = (double)whole + sum;
    if (ix)
        b->total = ix->total;
    return 0;
}

/* s read node by node, for loads much larger than the router: each node
 * of the router looked up in loads (W summed on the way).  A lookup may
 * run a key's __eq__ (a caller's key of its own type): each node is held
 * meanwhile, and a router changed meanwhile only changes the answer.  0,
 * or -1 with an exception. */
static int sum_nodes(RouterObject *self, Bounds *b, PyObject *owner)
{
    double sum = 0.0, total = 0.0, w;
    PyObject *node;
    for (size_t k = 0; (node = self->family->node_at(self, &k, &w)) != NULL; k++) {
        double v;
        total += w;
        Py_INCREF(node);
        int failed = load_of(b->loads, node, &v);
        note_owner(b, node, owner, v, w);
        Py_DECREF(node);
        if (failed)
            return -1;
        sum += v;
    }
    b->sum = sum;
    b->total = total;
    return 0;
}

/*
 * s, the sum of the loads of the nodes the router holds, into b->sum (and
 * W into b->total, the owner's load and weight into b when met), read the
 * cheaper way round: entry by entry (sum_entries) unless loads has more
 * than three times as many entries as the router has nodes, node by node
 * (sum_nodes) then.  Either way an entry for a node the router does not
 * hold is never read, and the value of one it holds is checked.  Without
 * the GIL, loads is read under its critical section (another thread may be
 * changing it).  0, or -1 with an exception.
 */
static int read_loads(RouterObject *self, Bounds *b, PyObject *owner)
{
    int result;
    if (PyDict_GET_SIZE(b->loads) > 3 * self->family->len(self)) {
        result = sum_nodes(self, b, owner);
    } else {
        NodeIndex *ix = node_index_of(self);
        if (!ix && PyErr_Occurred())
            return -1;
        CHASH_LOCKED(b->loads, result = sum_entries(self, b, owner, ix));
    }
    return result;
}

/* The weight of node (the router's) as weight_of gives it, through the
 * state's node index when it has one: fetched again here, since Python
 * code may have run since the last use (a dict lookup's __eq__), and a
 * change made in place meanwhile drops it. */
static double indexed_weight(RouterObject *self, PyObject *node)
{
    NodeIndex *ix = node_index_of(self);
    if (ix) {
        NodeIndexProbe probe = {0, 0};
        double w;
        size_t at;
        if (node_index_find(ix, node, &w, &at, &probe))
            return w;
        if (!probe.unknown)
            return 0.0;
    } else if (PyErr_Occurred()) {
        return -1.0;
    }
    return self->family->weight_of(self, node);
}

/* 1 when node (the router's, load known or -1) is below its bound, 0 when
 * not, -1 with an exception. */
static int admits(RouterObject *self, Bounds *b, PyObject *node, double load, double w)
{
    if (load < 0.0 && load_of(b->loads, node, &load) < 0)
        return -1;
    if (load == 0.0)
        return 1; /* every bound is at least 1 */
    if (w < 0.0 && (w = indexed_weight(self, node)) < 0.0)
        return -1;
    if (b->total < 0.0)
        b->total = total_weight(self);
    return load < chash_bounded_slots_real(b->balance, b->sum, w, b->total);
}

/* The key, and its place when the family can locate it (family.h's
 * locate): hashed once for the owner and the walk both. */
typedef struct {
    PyObject *key;
    uint64_t place;
    int located;
} Key;

/* The key's owner (a new reference, Py_None for an empty router), NULL
 * with an exception; the key located on the way when the family can. */
static PyObject *owner_of(RouterObject *self, Key *k)
{
    const router_family *family = self->family;
    if (!family->locate)
        return family->get(self, k->key);
    if (family->locate(self, k->key, &k->place) < 0)
        return NULL;
    k->located = 1;
    return family->get_at(self, k->place);
}

/* The key's preference list, at most n nodes. */
static PyObject *preference_of(RouterObject *self, const Key *k, size_t n)
{
    return k->located ? self->family->preference_at(self, k->place, n)
                      : self->family->preference(self, k->key, n);
}

/*
 * The owner is at its bound: the preference list in windows of 4, 16,
 * 64, ... nodes, the first node that admits one more.  Returns a new
 * reference, or NULL with an exception.  Should none admit (the router
 * changed while a key's __eq__ ran), the owner is the answer.
 */
static PyObject *walk(RouterObject *self, const Key *key, PyObject *owner, Bounds *b)
{
    Py_ssize_t have = 0;
    for (size_t want = 4;; want = want > SIZE_MAX / 4 ? SIZE_MAX : want * 4) {
        PyObject *list = preference_of(self, key, want);
        if (!list)
            return NULL;
        Py_ssize_t len = PyList_GET_SIZE(list);
        for (Py_ssize_t i = have; i < len; i++) {
            PyObject *node = Py_NewRef(PyList_GET_ITEM(list, i));
            int fits = node == owner ? 0 : admits(self, b, node, -1.0, -1.0);
            if (fits != 0) {
                Py_DECREF(list);
                if (fits < 0)
                    Py_CLEAR(node);
                return node;
            }
            Py_DECREF(node);
        }
        Py_DECREF(list);
        if ((size_t)len < want || want == SIZE_MAX)
            return Py_NewRef(owner);
        have = len;
    }
}

/* get_bounded(key, loads, /, balance_factor=1.25) */
PyObject *router_get_bounded(RouterObject *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *factor = nargs == 3 ? args[2] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(name, "balance_factor") != 0) {
            PyErr_Format(PyExc_TypeError, "get_bounded() got an unexpected keyword argument %R",
                         name);
            return NULL;
        }
        if (factor) {
            PyErr_SetString(PyExc_TypeError,
                            "get_bounded() got multiple values for argument 'balance_factor'");
            return NULL;
        }
        factor = args[nargs + i];
    }
    if (nargs < 2 || nargs > 3) {
        PyErr_Format(PyExc_TypeError, "get_bounded expected 2 or 3 arguments, got %zd", nargs);
        return NULL;
    }
    Bounds b = {NULL, 1.25, 0.0, -1.0, -1.0, -1.0};
    if (factor && parse_balance_factor(factor, &b.balance) < 0)
        return NULL;
    PyObject *loads = args[1];
    if (PyDict_Check(loads)) {
        b.loads = Py_NewRef(loads);
    } else if (PyMapping_Check(loads) && PyObject_HasAttrString(loads, "keys")) {
        /* Another mapping: read once into a dict (its own __getitem__). */
        b.loads = PyDict_New();
        if (b.loads && PyDict_Merge(b.loads, loads, 1) < 0)
            Py_CLEAR(b.loads);
        if (!b.loads)
            return NULL;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "get_bounded: loads must be a mapping of node to load, not %.200s",
                     Py_TYPE(loads)->tp_name);
        return NULL;
    }
    /* One published state for the whole call (a read section: a change
     * meanwhile publishes another, freed only after this section ends). */
    if (epoch_enter() < 0) {
        Py_DECREF(b.loads);
        return NULL;
    }
    RouterObject *state = router_state(self);
    /* The key first: a Python hash callable runs before loads is read. */
    Key key = {args[0], 0, 0};
    PyObject *owner = owner_of(state, &key);
    PyObject *result = NULL;
    if (owner && read_loads(state, &b, owner) == 0) {
        int fits = owner == Py_None || b.sum == 0.0
                   ? 1 : admits(state, &b, owner, b.owner_load, b.owner_weight);
        if (fits > 0)
            result = Py_NewRef(owner);
        else if (fits == 0)
            result = walk(state, &key, owner, &b);
    }
    epoch_exit();
    Py_XDECREF(owner);
    Py_DECREF(b.loads);
    return result;
}
