/*
 * router.c - the shell of every router class (router.h): one object
 * layout (family.h's RouterObject) and one set of slot functions, the
 * master method and property tables, argument parsing, the change counter
 * and the zones' bookkeeping, each written once; every call then goes to
 * the router's family, which does the ring work.  Each public class
 * (family.h's router_class: ConsistentHashRouter in ring_class.c,
 * MaglevRouter in maglev.c, JumpRouter in jump.c, RendezvousRouter in
 * rendezvous.c, AnchorRouter in anchor.c) becomes one heap type here, its tables the master
 * tables filtered by its family's descriptor.  Part of chash._chash.
 *
 * Sharing a router between threads (docs/reliability.md): a family's
 * functions are handed one state, never the object while it changes.
 * Readers open an epoch read section (epoch.h), load the published state
 * (router_state(): the object itself until its first change, then a
 * snapshot) and run the family's function on it; they take no lock and
 * write nothing shared.  A change takes the router's lock (a PyMutex from
 * 3.13, a PyThread lock before), copies the published state (the family's
 * copy), changes the copy, and publishes it with one atomic store, or
 * drops it: all-or-nothing, and a reader sees the state before or after,
 * whole.  The replaced state is retired at the epoch epoch_advance()
 * gives and freed by a later change (or the object's end) once no reader
 * can still hold it; freeing runs after the lock is let go, since
 * releasing node objects may run Python code.
 */
#include "router.h"

#include <time.h>

#include "args.h"
#include "diff.h"
#include "get_bounded.h"
#include "node_index.h"
#include "epoch.h"
#include "state.h"
#include "zones.h"

#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Construction and lifetime                                          */

/* Whether the object's own state is still held: before its first change
 * (it is the published one), or replaced but not yet released. */
static int own_state_held(RouterObject *self)
{
    return !self->current || self->retired_at != 0;
}

static int router_traverse(RouterObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->zones);
    if (!self->family)
        return 0;
    if (own_state_held(self)) {
        int r = self->family->traverse(self, visit, arg);
        if (r)
            return r;
    }
    if (self->current) {
        int r = self->family->traverse(self->current, visit, arg);
        if (r)
            return r;
    }
    for (RouterObject *old = self->retired; old; old = old->retired) {
        int r = self->family->traverse(old, visit, arg);
        if (r)
            return r;
    }
    return 0;
}

/* Drops what of a state may hold a cycle: its node index first (it
 * borrows the nodes the family's clear lets go), then the family's. */
static void clear_state(const router_family *family, RouterObject *state)
{
    node_index_drop(state);
    family->clear(state);
}

static int router_clear(RouterObject *self)
{
    Py_CLEAR(self->zones);
    if (!self->family)
        return 0;
    if (own_state_held(self))
        clear_state(self->family, self);
    if (self->current)
        clear_state(self->family, self->current);
    for (RouterObject *old = self->retired; old; old = old->retired)
        clear_state(self->family, old);
    return 0;
}

/* Releases a state's family state and what the shell keeps beside it
 * (its node index); the object's memory is the caller's. */
static void release_state(const router_family *family, RouterObject *state)
{
    node_index_drop(state);
    family->release(state);
}

/* Frees a snapshot (never the object). */
static void free_snapshot(const router_family *family, RouterObject *snap)
{
    release_state(family, snap);
    Py_CLEAR(snap->zones);
    PyMem_Free(snap);
}

/* The classes, in the module state's order of their types. */
static const router_class *const classes[ROUTER_CLASSES] = {
    &ring_class, &maglev_class, &jump_class, &rendezvous_class, &anchor_class};

static size_t class_index(const router_class *cls)
{
    size_t k = 0;
    while (k + 1 < ROUTER_CLASSES && classes[k] != cls)
        k++;
    return k;
}

static void router_dealloc(RouterObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->zones);
    /* No reader is left: each held a reference to the object. */
    if (self->family) {
        while (self->retired) {
            RouterObject *old = self->retired;
            self->retired = old->retired;
            free_snapshot(self->family, old);
        }
        if (own_state_held(self))
            release_state(self->family, self);
        if (self->current)
            free_snapshot(self->family, self->current);
    }
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* ------------------------------------------------------------------ */
/* Changes: the lock, the copy, publishing and reclaiming             */

/* Takes the router's lock (waiting without the GIL); 0, or -1 with
 * RuntimeError when this thread already holds it (a change reentered
 * through Python code it ran, as a hash callable or a node's __del__). */
static int lock_router(RouterObject *self)
{
    unsigned long me = PyThread_get_thread_ident();
    if (__atomic_load_n(&self->writer, __ATOMIC_RELAXED) == me) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a router cannot be changed from inside one of its own changes");
        return -1;
    }
#ifdef Py_GIL_DISABLED
    PyMutex_Lock(&self->lock);
#else
    /* With the GIL the writer field is the lock, tested and set with no
     * Python code between: no lock call on an uncontended change.  A
     * writer lets the GIL go only while its change runs Python code (a
     * hash callable, a node's __str__), so another waits briefly, letting
     * the GIL go between looks. */
    while (self->writer != 0) {
        Py_BEGIN_ALLOW_THREADS
        struct timespec pause = {0, 20000};
        (void)nanosleep(&pause, NULL);
        Py_END_ALLOW_THREADS
    }
#endif
    __atomic_store_n(&self->writer, me, __ATOMIC_RELAXED);
    return 0;
}

static void unlock_router(RouterObject *self)
{
    __atomic_store_n(&self->writer, 0, __ATOMIC_RELAXED);
#ifdef Py_GIL_DISABLED
    PyMutex_Unlock(&self->lock);
#endif
}

/* Begins a change: the lock taken and the state to change, NULL with an
 * exception (the lock let go).  Without the GIL, and with it while a batch
 * routes without it, a copy of the published state (a snapshot no reader
 * sees until it is published).  Else, with the GIL, the published state
 * itself: every reader then holds the GIL, and a family changes its state
 * all-or-nothing running no Python code between its first write and its
 * last, so a reader sees it before or after (the families' own rule, as
 * before snapshots); this keeps a change as cheap as the family makes it
 * (a jump add O(1) amortized, a ring's add no copy of the ring). */
static RouterObject *change_begin(RouterObject *self)
{
    if (lock_router(self) < 0)
        return NULL;
#ifndef Py_GIL_DISABLED
    if (self->unlocked_readers == 0)
        return router_state(self);
#endif
    RouterObject *next = PyMem_Calloc(1, sizeof *next);
    if (!next) {
        unlock_router(self);
        PyErr_NoMemory();
        return NULL;
    }
    /* Not a Python object, but shaped as one: Py_TYPE of it is the
     * router's type (its repr names it), and a count that never falls to
     * zero should anything take and drop a reference to it. */
    Py_SET_TYPE((PyObject *)next, Py_TYPE(self));
    Py_SET_REFCNT((PyObject *)next, (Py_ssize_t)1 << 30);
    next->family = self->family;
    next->owner = self;
    if (self->family->copy(next, router_state(self)) < 0) {
        unlock_router(self);
        free_snapshot(self->family, next);
        return NULL;
    }
    return next;
}

/* Drops a change begun (next unpublished); the exception is kept. */
static void change_abort(RouterObject *self, RouterObject *next)
{
    unlock_router(self);
    if (next == router_state(self))
        return; /* changed in place: the family left it as it was */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    free_snapshot(self->family, next);
    PyErr_Restore(type, value, tb);
}

/* Publishes next (the lock held) and counts the change; the replaced
 * state is retired at the epoch of the publication. */
static void change_publish(RouterObject *self, RouterObject *next)
{
    RouterObject *old = self->current;
    if (next == router_state(self)) { /* changed in place */
        node_index_drop(next); /* it described the nodes before */
        self->changes++;
        return;
    }
    __atomic_store_n(&self->current, next, __ATOMIC_SEQ_CST);
    uint64_t at = epoch_advance();
    if (old) {
        old->retired_at = at;
        old->retired = self->retired;
        self->retired = old;
    } else {
        self->retired_at = at;
    }
    __atomic_store_n(&self->changes, self->changes + 1, __ATOMIC_RELAXED);
}

/* Lets the lock go and frees what no reader can hold. */
static void change_end(RouterObject *self)
{
    if (!self->retired && self->retired_at == 0) {
        unlock_router(self);
        return;
    }
    uint64_t oldest = epoch_oldest();
    RouterObject *done = NULL, **link = &self->retired;
    while (*link) {
        RouterObject *old = *link;
        if (old->retired_at < oldest) {
            *link = old->retired;
            old->retired = done;
            done = old;
        } else {
            link = &old->retired;
        }
    }
    int own = self->retired_at != 0 && self->retired_at < oldest;
    if (own)
        self->retired_at = 0;
    unlock_router(self);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    while (done) {
        RouterObject *old = done;
        done = old->retired;
        free_snapshot(self->family, old);
    }
    if (own)
        release_state(self->family, self);
    PyErr_Restore(type, value, tb);
}

/* Reads: a read section around one family call on the published state.
 * fail is what the method returns when the section cannot open. */
#define READ(type, fail, call)                                                  \
    do {                                                                        \
        if (epoch_enter() < 0)                                                  \
            return fail;                                                        \
        RouterObject *state = router_state(self);                               \
        type result_ = (call);                                                  \
        epoch_exit();                                                           \
        return result_;                                                         \
    } while (0)

/* ------------------------------------------------------------------ */
/* Membership                                                         */

/* A weight argument (NULL: none given), read by the family's own rule
 * when it has one (of state, the change's copy); 0 or -1. */
static int read_weight(RouterObject *state, PyObject *obj, double *weight)
{
    if (state->family->read_weight)
        return state->family->read_weight(state, obj, weight);
    return parse_weight(obj, weight);
}

static PyObject *router_add(RouterObject *self, PyObject *args, PyObject *kwds)
{
    static char *with_zones[] = {"real_node_id", "weight", "id", "zone", NULL};
    static char *plain[] = {"real_node_id", "weight", NULL};
    PyObject *node, *weight_obj = NULL, *id = Py_None, *zone = Py_None;
    /* A class without zones takes neither id= nor zone=. */
    int zones = self->family->cls->zones;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, zones ? "O|O$OO:add_service_node" : "O|O:add_service_node",
                                     zones ? with_zones : plain, &node, &weight_obj, &id, &zone))
        return NULL;
    double weight;
    if (check_zone(zone) < 0)
        return NULL;
    RouterObject *next = change_begin(self);
    if (!next)
        return NULL;
    if (read_weight(next, weight_obj, &weight) < 0) {
        change_abort(self, next);
        return NULL;
    }
    ZoneUndo undo = {NULL, NULL};
    if (zone != Py_None && zones_set(self, node, zone, &undo) < 0) {
        change_abort(self, next);
        return NULL;
    }
    if (self->family->add(next, node, weight, id) < 0) {
        zones_undo(self, &undo);
        change_abort(self, next);
        return NULL;
    }
    zones_keep(&undo);
    change_publish(self, next);
    change_end(self);
    Py_RETURN_NONE;
}

static PyObject *router_add_many(RouterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nodes", "weight", NULL};
    PyObject *nodes, *weight_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:add_service_nodes", kwlist, &nodes, &weight_obj))
        return NULL;
    double weight;
    RouterObject *next = change_begin(self);
    if (!next)
        return NULL;
    if (read_weight(next, weight_obj, &weight) < 0 || self->family->add_many(next, nodes, weight) < 0) {
        change_abort(self, next);
        return NULL;
    }
    change_publish(self, next);
    change_end(self);
    Py_RETURN_NONE;
}

/* Removes node; 1, 0 (absent) or -1.  Its zone goes with it. */
static int remove_node(RouterObject *self, PyObject *node)
{
    PyObject *key;
    RouterObject *next = change_begin(self);
    if (!next)
        return -1;
    if (zones_key(self, node, &key) < 0) {
        change_abort(self, next);
        return -1;
    }
    int removed = self->family->remove(next, node);
    if (removed == 1) {
        zones_forget(self, key);
        change_publish(self, next);
        change_end(self);
    } else {
        Py_XDECREF(key);
        change_abort(self, next);
    }
    return removed;
}

static PyObject *router_remove(RouterObject *self, PyObject *node)
{
    int removed = remove_node(self, node);
    if (removed == 0)
        PyErr_SetObject(PyExc_KeyError, node);
    if (removed <= 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *router_discard(RouterObject *self, PyObject *node)
{
    if (remove_node(self, node) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *router_replace(RouterObject *self, PyObject *pairs)
{
    RouterObject *next = change_begin(self);
    if (!next)
        return NULL;
    if (self->family->replace(next, pairs) < 0) {
        change_abort(self, next);
        return NULL;
    }
    change_publish(self, next);
    /* The ring has changed even when pruning the zones fails. */
    int failed = zones_prune(self) < 0;
    change_end(self);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */
/* Lookups                                                            */

/* The single lookups: the family's own methods (family.h's READ_METHOD,
 * HASHED_READ_METHOD), which a one-family class's method table calls
 * directly (the direct entries of master_methods). */
static PyObject *router_get(RouterObject *self, PyObject *key)
{
    return self->family->read_get(self, key);
}

static PyObject *router_get_many(RouterObject *self, PyObject *keys)
{
    READ(PyObject *, NULL, self->family->get_many(state, keys));
}

static PyObject *router_get_by_hash(RouterObject *self, PyObject *hash)
{
    return self->family->read_get_by_hash(self, hash);
}

static PyObject *router_get_many_by_hash(RouterObject *self, PyObject *hashes)
{
    READ(PyObject *, NULL, self->family->get_many_by_hash(state, hashes));
}

/* get_preference_list(key, n, /, *, distinct_zones=False) */
static PyObject *router_preference(RouterObject *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int distinct = 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw && !self->family->cls->zones) {
        PyErr_SetString(PyExc_TypeError, "get_preference_list() takes no keyword arguments");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(name, "distinct_zones") != 0) {
            PyErr_Format(PyExc_TypeError,
                         "get_preference_list() got an unexpected keyword argument %R", name);
            return NULL;
        }
        distinct = PyObject_IsTrue(args[nargs + i]);
        if (distinct < 0)
            return NULL;
    }
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "get_preference_list expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    size_t n;
    if (parse_count(args[1], &n) < 0)
        return NULL;
    if (!distinct)
        READ(PyObject *, NULL, self->family->preference(state, args[0], n));
    PyObject *all;
    if (epoch_enter() < 0)
        return NULL;
    all = self->family->preference(router_state(self), args[0], SIZE_MAX);
    epoch_exit();
    PyObject *result = all ? zones_distinct(self, all, n) : NULL;
    Py_XDECREF(all);
    return result;
}

static PyObject *router_calculate_hash(RouterObject *self, PyObject *key)
{
    READ(PyObject *, NULL, self->family->calculate_hash(state, key));
}

/* ------------------------------------------------------------------ */
/* What the router tells about itself                                 */

static PyObject *router_ownership(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    READ(PyObject *, NULL, self->family->ownership(state));
}

static PyObject *router_key_distribution(RouterObject *self, PyObject *keys)
{
    READ(PyObject *, NULL, self->family->key_distribution(state, keys));
}

static PyObject *router_fingerprint(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    READ(PyObject *, NULL, self->family->fingerprint(state));
}

static PyObject *router_check(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    if (epoch_enter() < 0)
        return NULL;
    int r = self->family->check(router_state(self));
    epoch_exit();
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *router_diff(RouterObject *self, PyObject *other)
{
    module_state *state = state_of_type(Py_TYPE(self));
    if (!state)
        return NULL;
    const router_class *cls = self->family->cls;
    PyTypeObject *type = state->types[class_index(cls)];
    if (!PyObject_TypeCheck(other, type)) {
        PyErr_Format(PyExc_TypeError, "diff() needs a %s, not %.200s", cls->name + 6,
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    RouterObject *to = (RouterObject *)other;
    if (to->family != self->family)
        return diff_mismatch((PyObject *)self, other);
    if (epoch_enter() < 0)
        return NULL;
    PyObject *list = self->family->diff(router_state(self), router_state(to));
    epoch_exit();
    if (list && diff_as_moves(list, state->move_type) < 0)
        Py_CLEAR(list);
    return list;
}

/* Every family pickles through one function, _reconstruct(cls, family,
 * settings, nodes) (as arraymodule.c's _array_reconstructor does every
 * typecode), the zones as the state. */
static PyObject *router_reduce(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    if (epoch_enter() < 0)
        return NULL;
    PyObject *parts = self->family->reduce(router_state(self));
    epoch_exit();
    PyObject *module = parts ? PyType_GetModuleByDef(Py_TYPE(self), &chash_module) : NULL;
    PyObject *fn = module ? PyObject_GetAttrString(module, "_reconstruct") : NULL;
    PyObject *plain = NULL;
    if (fn)
        plain = Py_BuildValue("(O(OsOO))", fn, (PyObject *)Py_TYPE(self), self->family->name,
                              PyTuple_GET_ITEM(parts, 0), PyTuple_GET_ITEM(parts, 1));
    Py_XDECREF(fn);
    Py_XDECREF(parts);
    return zones_reduce(self, plain);
}

/* Every family, for _reconstruct to find one by name. */
static const router_family *const families[] = {&ring32_family, &ring64_family, &maglev_family,
                                                &jump_family, &rendezvous_family, &anchor_family};

const char reconstruct_doc[] = PyDoc_STR(
"_reconstruct(cls, family, settings, nodes, /)\n--\n\n"
"A router of class cls (a router class, or a subclass of\n"
"ConsistentHashRouter) of the named family, made with settings and\n"
"holding nodes, as __reduce__ gave them: what every router's pickle is\n"
"read by.  The arguments are checked as a call's.");

PyObject *router_reconstruct(PyObject *module, PyObject *args)
{
    PyTypeObject *cls;
    const char *name;
    PyObject *settings, *nodes;
    if (!PyArg_ParseTuple(args, "O!sO!O:_reconstruct", &PyType_Type, &cls, &name, &PyTuple_Type,
                          &settings, &nodes))
        return NULL;
    module_state *state = get_state(module);
    for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
        const router_family *family = families[f];
        if (strcmp(family->name, name) != 0)
            continue;
        if (!PyType_IsSubtype(cls, state->types[class_index(family->cls)])) {
            PyErr_Format(PyExc_TypeError, "_reconstruct: cls must be a %s type for the %s family",
                         family->cls->name + 6, name);
            return NULL;
        }
        return family->unpickle(cls, settings, nodes);
    }
    PyErr_Format(PyExc_ValueError, "_reconstruct: no router family %R", PyTuple_GET_ITEM(args, 1));
    return NULL;
}

/* _rebuild(cls, ...): the class method old pickles of a class name. */
static PyObject *router_class_rebuild(PyObject *cls, PyObject *args)
{
    module_state *state = state_of_type((PyTypeObject *)cls);
    if (!state)
        return NULL;
    for (size_t k = 0; k < ROUTER_CLASSES; k++)
        if (PyType_IsSubtype((PyTypeObject *)cls, state->types[k]))
            return classes[k]->family->rebuild((PyTypeObject *)cls, args);
    PyErr_SetString(PyExc_TypeError, "_rebuild: cls must be a router class");
    return NULL;
}

static PyObject *router_bucket_of(RouterObject *self, PyObject *node)
{
    READ(PyObject *, NULL, self->family->bucket_of(state, node));
}

/* state(): the family's state as bytes (AnchorRouter's, hash4j's layout). */
static PyObject *router_state_bytes(RouterObject *self, PyObject *Py_UNUSED(ignored))
{
    READ(PyObject *, NULL, self->family->state(state));
}

/* from_state(...): a class method of the classes whose family has one. */
static PyObject *router_class_from_state(PyObject *cls, PyObject *args, PyObject *kwds)
{
    module_state *state = state_of_type((PyTypeObject *)cls);
    if (!state)
        return NULL;
    for (size_t k = 0; k < ROUTER_CLASSES; k++)
        if (PyType_IsSubtype((PyTypeObject *)cls, state->types[k]) && classes[k]->family->from_state)
            return classes[k]->family->from_state((PyTypeObject *)cls, args, kwds);
    PyErr_SetString(PyExc_TypeError, "from_state: cls must be a router class that has one");
    return NULL;
}

static PyObject *router_setstate(RouterObject *self, PyObject *state)
{
    RouterObject *next = change_begin(self);
    if (!next)
        return NULL;
    PyObject *result = self->family->setstate(next, state);
    /* Zones the family's __setstate__ read go to the object, in place. */
    if (result && next != self && next->zones) {
        if (!self->zones)
            self->zones = Py_NewRef(next->zones);
        else if (PyDict_Update(self->zones, next->zones) < 0)
            Py_CLEAR(result);
        Py_CLEAR(next->zones);
    }
    if (!result) {
        change_abort(self, next);
        return NULL;
    }
    change_publish(self, next);
    change_end(self);
    return result;
}

static PyObject *get_vnodes(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->settings(state, SETTING_VNODES));
}

static PyObject *get_min_ring(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->settings(state, SETTING_MIN_RING));
}

static PyObject *get_max_ring(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->settings(state, SETTING_MAX_RING));
}

static PyObject *get_hash_ring(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->hash_ring(state));
}

static PyObject *get_node_map(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->node_map(state));
}

static PyObject *get_nodes(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->nodes(state));
}

static PyObject *get_weights(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->weights(state));
}

static PyObject *get_points(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->points(state));
}

static PyObject *get_hash(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->hash_name(state));
}

static PyObject *get_layout(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->layout(state));
}

static PyObject *get_memory(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, PyLong_FromSize_t(self->family->memory(state)));
}

static PyObject *get_ids(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->ids(state));
}

static PyObject *get_zones(RouterObject *self, void *Py_UNUSED(closure))
{
    return zones_get(self);
}

static PyObject *get_table(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->table(state));
}

static PyObject *get_table_size(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, self->family->settings(state, SETTING_TABLE_SIZE));
}

static PyObject *get_weight_rule(RouterObject *self, void *Py_UNUSED(closure))
{
    READ(PyObject *, NULL, PyUnicode_FromString(self->family->weight_rule(state)));
}

/* ------------------------------------------------------------------ */
/* Protocols: len, in, iter, repr, ==                                 */

static Py_ssize_t router_len(RouterObject *self)
{
    READ(Py_ssize_t, -1, self->family->len(state));
}

static int router_contains(RouterObject *self, PyObject *node)
{
    READ(int, -1, self->family->contains(state, node));
}

static PyObject *router_iter(RouterObject *self)
{
    if (epoch_enter() < 0)
        return NULL;
    PyObject *nodes = self->family->nodes(router_state(self));
    epoch_exit();
    if (!nodes)
        return NULL;
    PyObject *it = PyObject_GetIter(nodes);
    Py_DECREF(nodes);
    return it;
}

static PyObject *router_repr(RouterObject *self)
{
    READ(PyObject *, NULL, self->family->repr(state));
}

static PyObject *router_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || Py_TYPE(a) != Py_TYPE(b))
        Py_RETURN_NOTIMPLEMENTED;
    RouterObject *x = (RouterObject *)a, *y = (RouterObject *)b;
    if (x->family != y->family)
        return PyBool_FromLong(op == Py_NE);
    if (epoch_enter() < 0)
        return NULL;
    int equal = x->family->equal(router_state(x), router_state(y));
    epoch_exit();
    if (equal < 0)
        return NULL;
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

/* ------------------------------------------------------------------ */
/* The tables                                                         */

const uint64_t *router_changes(PyObject *obj)
{
    if (!chash_py_made_by(obj, (void *)router_dealloc))
        return NULL;
    return &((RouterObject *)obj)->changes;
}

/* ------------------------------------------------------------------ */
/* The master tables, and each class's tables derived from them       */

/* What a master entry needs of the family: the offset of its function
 * in router_family (a NULL there: the class has no such attribute). */
#define NEEDS(field) offsetof(router_family, field)

typedef struct {
    PyMethodDef def; /* doc from the class */
    size_t needs;
    /* 0, or (NEEDS) the family's own method of the same arguments, which
     * reads the state itself: what a one-family class's table calls
     * instead of def's. */
    size_t direct;
} MasterMethod;

static const MasterMethod master_methods[RM_COUNT] = {
    [RM_ADD] = {{"add_service_node", (PyCFunction)(void (*)(void))router_add, METH_VARARGS | METH_KEYWORDS, NULL}, NEEDS(add)},
    [RM_ADD_MANY] = {{"add_service_nodes", (PyCFunction)(void (*)(void))router_add_many, METH_VARARGS | METH_KEYWORDS, NULL}, NEEDS(add_many)},
    [RM_REMOVE] = {{"remove_service_node", (PyCFunction)router_remove, METH_O, NULL}, NEEDS(remove)},
    [RM_DISCARD] = {{"discard_service_node", (PyCFunction)router_discard, METH_O, NULL}, NEEDS(remove)},
    [RM_GET] = {{"get_target_node", (PyCFunction)router_get, METH_O, NULL}, NEEDS(get), NEEDS(read_get)},
    [RM_GET_MANY] = {{"get_target_nodes", (PyCFunction)router_get_many, METH_O, NULL}, NEEDS(get_many)},
    [RM_GET_BY_HASH] = {{"get_target_node_by_hash", (PyCFunction)router_get_by_hash, METH_O, NULL}, NEEDS(get_by_hash), NEEDS(read_get_by_hash)},
    [RM_GET_MANY_BY_HASH] = {{"get_target_nodes_by_hash", (PyCFunction)router_get_many_by_hash, METH_O, NULL}, NEEDS(get_many_by_hash)},
    [RM_PREFERENCE] = {{"get_preference_list", (PyCFunction)(void (*)(void))router_preference, METH_FASTCALL | METH_KEYWORDS, NULL}, NEEDS(preference)},
    [RM_OWNERSHIP] = {{"ownership", (PyCFunction)router_ownership, METH_NOARGS, NULL}, NEEDS(ownership)},
    [RM_DISTRIBUTION] = {{"key_distribution", (PyCFunction)router_key_distribution, METH_O, NULL}, NEEDS(key_distribution)},
    [RM_FINGERPRINT] = {{"fingerprint", (PyCFunction)router_fingerprint, METH_NOARGS, NULL}, NEEDS(fingerprint)},
    [RM_DIFF] = {{"diff", (PyCFunction)router_diff, METH_O, NULL}, NEEDS(diff)},
    [RM_CALCULATE_HASH] = {{"_calculate_hash", (PyCFunction)router_calculate_hash, METH_O, NULL}, NEEDS(calculate_hash)},
    [RM_CHECK] = {{"_check", (PyCFunction)router_check, METH_NOARGS, NULL}, NEEDS(check)},
    [RM_REDUCE] = {{"__reduce__", (PyCFunction)router_reduce, METH_NOARGS, NULL}, NEEDS(reduce)},
    [RM_SETSTATE] = {{"__setstate__", (PyCFunction)router_setstate, METH_O, NULL}, NEEDS(setstate)},
    [RM_REPLACE] = {{"_replace_nodes", (PyCFunction)router_replace, METH_O, NULL}, NEEDS(replace)},
    [RM_REBUILD] = {{"_rebuild", (PyCFunction)router_class_rebuild, METH_VARARGS | METH_CLASS, NULL}, NEEDS(rebuild)},
    [RM_GET_BOUNDED] = {{"get_bounded", (PyCFunction)(void (*)(void))router_get_bounded, METH_FASTCALL | METH_KEYWORDS, NULL}, NEEDS(weight_of)},
    [RM_BUCKET_OF] = {{"bucket_of", (PyCFunction)router_bucket_of, METH_O, NULL}, NEEDS(bucket_of)},
    [RM_STATE] = {{"state", (PyCFunction)router_state_bytes, METH_NOARGS, NULL}, NEEDS(state)},
    [RM_FROM_STATE] = {{"from_state", (PyCFunction)(void (*)(void))router_class_from_state, METH_VARARGS | METH_KEYWORDS | METH_CLASS, NULL}, NEEDS(from_state)},
};

typedef struct {
    const char *name;
    getter get;
    size_t needs;
} MasterProperty;

static const MasterProperty master_properties[RP_COUNT] = {
    [RP_VNODES] = {"virtual_node_count", (getter)get_vnodes, NEEDS(settings)},
    [RP_MIN_RING] = {"minimum_ring_size", (getter)get_min_ring, NEEDS(settings)},
    [RP_MAX_RING] = {"maximum_ring_size", (getter)get_max_ring, NEEDS(settings)},
    [RP_HASH_RING] = {"hash_ring", (getter)get_hash_ring, NEEDS(hash_ring)},
    [RP_NODE_MAP] = {"node_map", (getter)get_node_map, NEEDS(node_map)},
    [RP_NODES] = {"nodes", (getter)get_nodes, NEEDS(nodes)},
    [RP_WEIGHTS] = {"weights", (getter)get_weights, NEEDS(weights)},
    [RP_POINTS] = {"points", (getter)get_points, NEEDS(points)},
    [RP_HASH] = {"hash", (getter)get_hash, NEEDS(hash_name)},
    [RP_LAYOUT] = {"layout", (getter)get_layout, NEEDS(layout)},
    [RP_MEMORY] = {"memory_bytes", (getter)get_memory, NEEDS(memory)},
    [RP_IDS] = {"ids", (getter)get_ids, NEEDS(ids)},
    [RP_ZONES] = {"zones", (getter)get_zones, NEEDS(contains)},
    [RP_TABLE] = {"table", (getter)get_table, NEEDS(table)},
    [RP_TABLE_SIZE] = {"table_size", (getter)get_table_size, NEEDS(settings)},
    [RP_WEIGHT_RULE] = {"weight_rule", (getter)get_weight_rule, NEEDS(weight_rule)},
};

static int family_has(const router_family *family, size_t needs)
{
    void (*fn)(void);
    memcpy(&fn, (const char *)family + needs, sizeof fn);
    return fn != NULL;
}

/* Each class's tables and slots, filled when its type is first made (the
 * same content every time: a second module object reuses them). */
static PyMethodDef class_methods[ROUTER_CLASSES][RM_COUNT + 1];
static PyGetSetDef class_getset[ROUTER_CLASSES][RP_COUNT + 1];
static PyType_Slot class_slots[ROUTER_CLASSES][16];
static PyType_Spec class_specs[ROUTER_CLASSES];

/* The class's method table: every master method whose function the family
 * has, with the class's docstring; SystemError when a class's docstrings
 * and its family's NULL entries disagree (a table that could call NULL).
 * Properties likewise; zones only for a class with zones.  0 or -1. */
static int derive_tables(size_t k)
{
    const router_class *cls = classes[k];
    const router_family *family = cls->family;
    size_t m = 0, g = 0;
    for (size_t i = 0; i < RM_COUNT; i++) {
        if (family_has(family, master_methods[i].needs) != (cls->methods[i] != NULL))
            goto mismatch;
        if (cls->methods[i] && master_methods[i].direct &&
            !family_has(family, master_methods[i].direct))
            goto mismatch;
        if (!cls->methods[i])
            continue;
        class_methods[k][m] = master_methods[i].def;
        if (cls->one_family && master_methods[i].direct)
            memcpy(&class_methods[k][m].ml_meth, (const char *)family + master_methods[i].direct,
                   sizeof class_methods[k][m].ml_meth);
        class_methods[k][m++].ml_doc = cls->methods[i];
    }
    class_methods[k][m] = (PyMethodDef){NULL, NULL, 0, NULL};
    for (size_t i = 0; i < RP_COUNT; i++) {
        int has = family_has(family, master_properties[i].needs) && (i != RP_ZONES || cls->zones);
        if (i == RP_VNODES || i == RP_MIN_RING || i == RP_MAX_RING || i == RP_TABLE_SIZE)
            has = has && cls->properties[i] != NULL; /* settings: the class says which */
        if (has != (cls->properties[i] != NULL))
            goto mismatch;
        if (!has)
            continue;
        class_getset[k][g++] = (PyGetSetDef){master_properties[i].name, master_properties[i].get,
                                             NULL, cls->properties[i], NULL};
    }
    class_getset[k][g] = (PyGetSetDef){NULL, NULL, NULL, NULL, NULL};
    return 0;
mismatch:
    PyErr_Format(PyExc_SystemError, "%s: its docstrings and its family's functions disagree",
                 cls->name);
    return -1;
}

static int make_type(PyObject *module, size_t k)
{
    const router_class *cls = classes[k];
    if (derive_tables(k) < 0)
        return -1;
    PyType_Slot slots[] = {
        {Py_tp_doc, (void *)cls->doc},
        {Py_tp_new, (void *)cls->make},
        {Py_tp_dealloc, router_dealloc},
        {Py_tp_traverse, router_traverse},
        {Py_tp_clear, router_clear},
        {Py_tp_methods, class_methods[k]},
        {Py_tp_getset, class_getset[k]},
        {Py_tp_repr, router_repr},
        {Py_tp_richcompare, router_richcompare},
        {Py_tp_hash, PyObject_HashNotImplemented},
        {Py_tp_iter, router_iter},
        {Py_sq_length, router_len},
        {Py_sq_contains, router_contains},
        {Py_mp_length, router_len},
        {0, NULL},
    };
    memcpy(class_slots[k], slots, sizeof slots);
    class_specs[k] = (PyType_Spec){
        .name = cls->name,
        .basicsize = sizeof(RouterObject),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
                 | (cls->subclassable ? Py_TPFLAGS_BASETYPE : 0),
        .slots = class_slots[k],
    };
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &class_specs[k], NULL);
    if (!type)
        return -1;
    get_state(module)->types[k] = type;
    return PyModule_AddType(module, type);
}

int router_type_setup(PyObject *module)
{
    for (size_t k = 0; k < ROUTER_CLASSES; k++)
        if (make_type(module, k) < 0)
            return -1;
    get_state(module)->router_type = (PyTypeObject *)Py_NewRef(get_state(module)->types[0]);
    get_state(module)->maglev_type = (PyTypeObject *)Py_NewRef(get_state(module)->types[1]);
    get_state(module)->rendezvous_type = (PyTypeObject *)Py_NewRef(get_state(module)->types[3]);
    return 0;
}
