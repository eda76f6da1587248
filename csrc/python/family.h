/*
 * family.h - what every router is made of: the one object layout (its
 * family pointer, its zones, its change counter, its family's state) and
 * the const family descriptor it points at (as CPython's array points at
 * its arraydescr): the functions that differ between
 *
 *   ring32_family  the 32-bit ring changed in place (ring32/): the python,
 *                  node, ketama, nginx, libmemcached, haproxy, varnish and
 *                  nghttpx layouts of ConsistentHashRouter;
 *   ring64_family  the 64-bit ring rebuilt whole (ring64.c): its envoy and
 *                  grpc layouts;
 *   maglev_family  MaglevRouter's table (maglev.c);
 *   jump_family    JumpRouter's buckets (jump.c);
 *   rendezvous_family  RendezvousRouter's scored node set (rendezvous.c,
 *                  rendezvous_nodes.c);
 *   anchor_family  AnchorRouter's JumpBackAnchor set and its node of every
 *                  bucket id (anchor.c).
 *
 * and the const class descriptor of each public class (router_class):
 * its name, constructor and docstrings.  The shell (router.c, router.h)
 * makes one type per class over the same slot functions, parses every
 * shared argument, keeps the zones (zones.c) and the change counter, and
 * derives each class's method and property tables from its family's
 * descriptor: a method the family lacks is a NULL entry there (and a NULL
 * docstring in its class), so the class has no such attribute.  A router's
 * family is fixed when it is made.  This header is a leaf the shell and the
 * families both read: no function of the shell is declared here, so a
 * family never calls back up into it.
 *
 * Thread safety is the shell's (router.c): a family's functions see one
 * state, which the shell hands them in place of the object (a snapshot:
 * RouterObject-shaped, not a Python object; Py_TYPE of it is the router's
 * type).  Lookups only read it; a change is made to a fresh copy (copy)
 * that the shell publishes whole, under the router's lock.  So a family
 * never writes its state during a lookup (no lazy cache: the one a state
 * has is the shell's node index for get_bounded, node_index.h), and never
 * uses a state argument as a Python object.
 */
#ifndef CHASH_PY_FAMILY_H
#define CHASH_PY_FAMILY_H

#include "binding.h"
#include "engine/chash.h"
#include "engine/envoy.h"
#include "engine/haproxy_ids.h"
#include "engine/scheme.h"
#include "engine/wide.h"
#include "epoch.h"
#include "node_list.h"
#include "strategies/anchor.h"
#include "strategies/jump.h"
#include "strategies/rendezvous.h"

/* The haproxy layout's server ids in use, sorted, and HAProxy's counter
 * for the next automatic one (engine/haproxy_ids.h, used by ring32/haproxy.c). */
typedef chash_haproxy_ids HaproxyIds;

/* The 32-bit ring family's state (ring32/). */
typedef struct {
    chash_ring *ring;
    chash_scheme scheme;
    PyObject *hash_fn;  /* a Python callable bytes -> int, or NULL */
    size_t base_points; /* virtual_node_count: points at weight 1 */
    HaproxyIds ids;     /* the haproxy layout's puids (empty otherwise) */
} Ring32State;

typedef enum { RING64_ENVOY, RING64_GRPC } ring64_kind;

/* The 64-bit ring family's state (ring64.c). */
typedef struct {
    NodeList list;
    chash_wide *wide;       /* the points; never NULL once made */
    ring64_kind kind;
    chash_point_hash hash;  /* how points are hashed */
    uint64_t min_ring;      /* the ring sizes given (before gRPC's cap) */
    uint64_t max_ring;
} Ring64State;

/* JumpRouter's state (jump.c): buckets in add order, one a node. */
typedef struct {
    NodeList list;
    chash_jump_rule rule;
    chash_hash_id hash;
    void *structure; /* the node list's structure slot: jump keeps none (NULL) */
} JumpState;

/* MaglevRouter's state (maglev.c): the node list and Envoy's table. */
typedef struct {
    NodeList list;
    size_t table_size;     /* M, a prime */
    uint64_t mod_magic[2]; /* ceil(2**128 / M), high and low halves, for h % M */
    uint32_t *table;       /* node position per entry; PyMem, NULL with no node */
} MaglevState;

/* RendezvousRouter's state (rendezvous.c, rendezvous_nodes.c). */
typedef struct {
    chash_rdv_layout layout;
    PyObject *nodes;    /* tuple of exact str, in add order */
    double *weights;    /* PyMem, one a node */
    PyObject *index;    /* dict: node -> its position in nodes */
    chash_rdv_set *set; /* the engine's node set, always built */
} RdvState;

/* AnchorRouter's state (anchor.c): the engine's set of bucket ids and
 * the node of each live one. */
typedef struct {
    chash_anchor *set;    /* never NULL once made */
    PyObject **by_bucket; /* PyMem, cap entries: the node (exact str) of live
                           * bucket b, a strong reference; NULL elsewhere */
    size_t cap;
    PyObject *index;      /* dict: node -> its bucket id (int) */
    chash_hash_id hash;
} AnchorState;

typedef struct router_family router_family;
typedef struct router_class router_class;
/* A state's nodes by address and by str value, get_bounded's (node_index.h). */
typedef struct NodeIndex NodeIndex;

/* The lock that serialises a router's changes without the GIL
 * (router.c); with the GIL, the writer field is the lock. */
#ifdef Py_GIL_DISABLED
typedef PyMutex router_lock;
#endif

typedef struct RouterObject {
    PyObject_HEAD
    const router_family *family;
    PyObject *zones; /* dict node -> zone (zones.c), or NULL */
    uint64_t changes; /* membership changes made (router.c): bounded loads re-read weights */
    /* The published state (router.c): NULL while it is this object's own
     * (no change made yet), else a snapshot, a plain block of this layout
     * whose family and state are set (not a Python object).  Readers load
     * it, writers replace it; see the shell's comment. */
    struct RouterObject *current;
    /* In the object: the replaced snapshots not yet freed (linked through
     * their own retired field).  In a replaced snapshot: the next one. */
    struct RouterObject *retired;
    /* In a replaced snapshot: the epoch it was replaced at (epoch.h).  In
     * the object: that of its own state once replaced, 0 before and after
     * that state is released. */
    uint64_t retired_at;
#ifdef Py_GIL_DISABLED
    router_lock lock;
#endif
    unsigned long writer; /* the thread changing the router, 0 for none */
    /* With the GIL: batch lookups under way on the published state without
     * the GIL (counted under the GIL); a change copies only while some are. */
    unsigned unlocked_readers;
    /* In a snapshot: the router object it belongs to (NULL in the object). */
    struct RouterObject *owner;
    /* This state's nodes by address and by str value, made by the first
     * get_bounded that reads it (node_index.h), or NULL; dropped with the
     * state, and at a change made in place. */
    NodeIndex *node_index;
    union {
        Ring32State r32;
        Ring64State r64;
        JumpState jump;
        MaglevState mg;
        RdvState rdv;
        AnchorState anchor;
    };
} RouterObject;

/*
 * What a family does.  Every function returns a new reference, 0, or a
 * count, and NULL / -1 with an exception set; a mutation that fails leaves
 * the ring as it was.  The type has checked the argument types it parses
 * (weights are numbers, n is a count, zones are valid); node and key
 * arguments are the caller's objects, checked by the family.
 */
struct router_family {
    const char *name;
    unsigned bits; /* point width: 32 or 64 */
    const router_class *cls; /* the public class of its routers */
    /* Lifetime: release frees the family's state (the object's memory is
     * the type's); traverse visits its Python references. */
    void (*release)(RouterObject *self);
    int (*traverse)(RouterObject *self, visitproc visit, void *arg);
    void (*clear)(RouterObject *self); /* drops what may hold a cycle */
    /* A deep copy of src's family state into dst, zeroed and of the same
     * family (dst->family set): new references for every Python object,
     * no memory shared with src, so that src can be released while dst
     * lives and dst changed while src is read.  0, or -1 with an
     * exception and dst releasable by release(). */
    int (*copy)(RouterObject *dst, RouterObject *src);
    /* Membership.  id is the haproxy layout's server id object (None for
     * none); remove returns 1 (removed), 0 (absent) or -1. */
    int (*add)(RouterObject *self, PyObject *node, double weight, PyObject *id);
    /* A weight argument (NULL: none given) as the family reads it, when
     * it reads its own (NULL: the shell's parse_weight); 0 or -1. */
    int (*read_weight)(RouterObject *self, PyObject *obj, double *weight);
    int (*add_many)(RouterObject *self, PyObject *nodes, double weight);
    int (*remove)(RouterObject *self, PyObject *node);
    int (*replace)(RouterObject *self, PyObject *pairs);
    int (*contains)(RouterObject *self, PyObject *node);
    Py_ssize_t (*len)(RouterObject *self);
    /* Lookups; preference lists at most n nodes (SIZE_MAX: all). */
    PyObject *(*get)(RouterObject *self, PyObject *key);
    PyObject *(*get_many)(RouterObject *self, PyObject *keys);
    PyObject *(*get_by_hash)(RouterObject *self, PyObject *hash);
    PyObject *(*get_many_by_hash)(RouterObject *self, PyObject *hashes);
    /* get and get_by_hash as the methods the interpreter calls: in a read
     * section on the router's published state (READ_METHOD, below). */
    PyObject *(*read_get)(RouterObject *self, PyObject *key);
    PyObject *(*read_get_by_hash)(RouterObject *self, PyObject *hash);
    PyObject *(*preference)(RouterObject *self, PyObject *key, size_t n);
    PyObject *(*calculate_hash)(RouterObject *self, PyObject *key);
    /* get and preference from a key hashed once (optional, all three or
     * none): locate hashes key into *place (the family's own position of
     * it; may run a Python hash), 0 or -1; get_at and preference_at answer
     * as get and preference would for that key.  get_bounded asks for the
     * owner and, when the owner is full, for the preference list: with
     * these, its walk does not hash the key again (an MD5, on a ring). */
    int (*locate)(RouterObject *self, PyObject *key, uint64_t *place);
    PyObject *(*get_at)(RouterObject *self, uint64_t place);
    PyObject *(*preference_at)(RouterObject *self, uint64_t place, size_t n);
    /* get_bounded (get_bounded.c): the weight of node as weights gives it
     * (> 0), 0.0 when the router does not hold it, or -1.0 with an
     * exception; and the first node at position *at or after it in
     * weights' order (borrowed), *at set to its position and its weight in
     * *weight, or NULL (no exception) past the last: a family whose
     * positions have holes (AnchorRouter's removed ids) steps over them.
     * Both only read the family's state and run no Python code. */
    double (*weight_of)(RouterObject *self, PyObject *node);
    PyObject *(*node_at)(RouterObject *self, size_t *at, double *weight);
    /* What the router tells about itself. */
    PyObject *(*ownership)(RouterObject *self);
    PyObject *(*key_distribution)(RouterObject *self, PyObject *keys);
    PyObject *(*fingerprint)(RouterObject *self);
    int (*check)(RouterObject *self);
    PyObject *(*nodes)(RouterObject *self);
    PyObject *(*weights)(RouterObject *self);
    PyObject *(*points)(RouterObject *self);
    PyObject *(*hash_ring)(RouterObject *self);
    PyObject *(*node_map)(RouterObject *self);
    PyObject *(*table)(RouterObject *self); /* a lookup table's owners, entry by entry */
    PyObject *(*hash_name)(RouterObject *self);
    PyObject *(*layout)(RouterObject *self);
    PyObject *(*settings)(RouterObject *self, int which); /* a router_setting */
    size_t (*memory)(RouterObject *self);
    PyObject *(*ids)(RouterObject *self);
    PyObject *(*repr)(RouterObject *self);
    /* other is of the same family; 1, 0 or -1. */
    int (*equal)(RouterObject *self, RouterObject *other);
    /* Pickling, through the shell's one reconstructor (router.c's
     * _reconstruct): reduce gives (settings, nodes), a tuple of what the
     * family's constructor took and the nodes with their weights (as
     * _replace_nodes reads them); unpickle makes a router of cls (the
     * family's class or a subclass) from those again, checking them as a
     * call's arguments.  Zones aside (the shell's). */
    PyObject *(*reduce)(RouterObject *self);
    PyObject *(*unpickle)(PyTypeObject *cls, PyObject *settings, PyObject *nodes);
    /* other is of the same family: the moves as plain (start, end, source,
     * target) tuples, or ValueError when the two cannot be compared. */
    PyObject *(*diff)(RouterObject *self, RouterObject *other);
    /* _rebuild(cls, *args), a class method reading old pickles. */
    PyObject *(*rebuild)(PyTypeObject *cls, PyObject *args);
    /* __setstate__: None, or NULL with an exception. */
    PyObject *(*setstate)(RouterObject *self, PyObject *state);
    /* AnchorRouter's own: a node's bucket id; the state's bytes; a router
     * of cls made from a state and the node of each bucket id (a class
     * method: its arguments as the call gave them). */
    PyObject *(*bucket_of)(RouterObject *self, PyObject *node);
    PyObject *(*state)(RouterObject *self);
    PyObject *(*from_state)(PyTypeObject *cls, PyObject *args, PyObject *kwds);
    /* The weights the family (in self's layout) takes: "real" (any weight
     * > 0), "whole" (whole numbers >= 1), "at_least_one" (real numbers
     * >= 1), "none" (no weights: every node's is 1). */
    const char *(*weight_rule)(RouterObject *self);
};

/* The settings a family reports (None where it has no such setting). */
enum router_setting { SETTING_VNODES, SETTING_MIN_RING, SETTING_MAX_RING, SETTING_TABLE_SIZE };

/* The methods and properties a class may have, in the shell's master
 * tables' order (router.c). */
enum router_method {
    RM_ADD, RM_ADD_MANY, RM_REMOVE, RM_DISCARD, RM_GET, RM_GET_MANY, RM_GET_BY_HASH,
    RM_GET_MANY_BY_HASH, RM_PREFERENCE, RM_OWNERSHIP, RM_DISTRIBUTION, RM_FINGERPRINT, RM_DIFF,
    RM_CALCULATE_HASH, RM_CHECK, RM_REDUCE, RM_SETSTATE, RM_REPLACE, RM_REBUILD,
    RM_GET_BOUNDED, RM_BUCKET_OF, RM_STATE, RM_FROM_STATE, RM_COUNT
};
enum router_property {
    RP_VNODES, RP_MIN_RING, RP_MAX_RING, RP_HASH_RING, RP_NODE_MAP, RP_NODES, RP_WEIGHTS,
    RP_POINTS, RP_HASH, RP_LAYOUT, RP_MEMORY, RP_IDS, RP_ZONES, RP_TABLE, RP_TABLE_SIZE,
    RP_WEIGHT_RULE, RP_COUNT
};

/*
 * A public class: one heap type made by the shell from this.  make is its
 * tp_new (it parses the constructor's arguments, picks the family, and
 * makes the object with router_alloc); family is the family whose
 * descriptor decides the tables (every family of the class must have the
 * same NULL entries); methods and properties hold the docstrings, NULL
 * where the class has no such attribute, which the shell checks against
 * the family's NULL entries when it makes the type.  zones: the class
 * takes id= and zone= in add_service_node and distinct_zones= in
 * get_preference_list (else those keywords are refused as unknown).
 */
struct router_class {
    const char *name; /* the type's qualified name: "chash.JumpRouter" */
    const char *doc;
    int subclassable;
    int zones;
    /* Every router of the class is of family: its single lookups are the
     * family's read_get and read_get_by_hash, straight from the method
     * table (the shell calls every other function through its own
     * wrappers, which open the read section and hand the family the
     * published state). */
    int one_family;
    newfunc make;
    const router_family *family;
    const char *methods[RM_COUNT];
    const char *properties[RP_COUNT];
};

/* The methods every class has, in a class's .methods: each class's file
 * names their docstrings so (add_doc, ...) and adds its own entries. */
#define ROUTER_COMMON_METHODS                                                             \
    [RM_ADD] = add_doc, [RM_ADD_MANY] = add_many_doc, [RM_REMOVE] = remove_doc,           \
    [RM_DISCARD] = discard_doc, [RM_GET] = get_doc, [RM_GET_MANY] = get_many_doc,         \
    [RM_GET_BY_HASH] = get_by_hash_doc, [RM_PREFERENCE] = preference_doc,                 \
    [RM_OWNERSHIP] = ownership_doc, [RM_DISTRIBUTION] = distribution_doc,                 \
    [RM_FINGERPRINT] = fingerprint_doc, [RM_CHECK] = check_doc, [RM_REDUCE] = reduce_doc,     \
    [RM_GET_BOUNDED] = GET_BOUNDED_DOC

/* get_bounded's docstring (get_bounded.c), one for every class. */
#define GET_BOUNDED_DOC                                                                   \
    "get_bounded($self, key, loads, /, balance_factor=1.25)\n--\n\n"                       \
    "The node for key under bounded loads, over loads the caller tracks.\n\n"             \
    "loads maps a node to its current load (an int or float >= 0); a node\n"            \
    "missing from it has load 0, and an entry for a node this router does not\n"       \
    "hold is ignored, in the sum too.  With s the sum of the loads of the\n"          \
    "router's nodes, T = ceil(balance_factor * (s + 1)) and a node of weight w\n"      \
    "out of a total W may hold max(ceil(T * w / W), 1): the answer is the first\n"     \
    "node of get_preference_list(key, ...) whose load is below its bound\n"          \
    "(BoundedLoadRouter's rule).  With every load 0 it is get_target_node(key);\n"     \
    "None when the router is empty.  Stateless: nothing is acquired or\n"              \
    "released, and the router is only read.\n\n"                                      \
    "TypeError for a load of a node it holds that is not an int or float (a\n"       \
    "bool included) or loads not a mapping; ValueError for such a load that is\n"    \
    "negative, NaN or infinite, or a balance_factor below 1 or not finite; the\n"    \
    "key's errors are get_target_node's.\n\n"                                           \
    "Cost: the owner's lookup, one probe of a table of the router's nodes an\n"     \
    "entry of loads (a dict lookup a node when loads is more than three times\n"    \
    "the router's size), and the preference list only when the owner is at\n"      \
    "its bound."

/* The weight_rule property's docstring, one for every class. */
#define WEIGHT_RULE_DOC                                                                   \
    "The weights this router's layout takes: 'real' (any weight > 0), 'whole'\n"         \
    "(whole numbers >= 1), 'at_least_one' (real numbers >= 1, as Varnish's) or\n"        \
    "'none' (no weights: every node's is 1, and any other is a ValueError)."

extern const router_family ring32_family;
extern const router_family ring64_family;
extern const router_family jump_family;
extern const router_family maglev_family;
extern const router_family rendezvous_family;
extern const router_family anchor_family;

extern const router_class ring_class; /* ConsistentHashRouter (ring_class.c) */
extern const router_class jump_class; /* JumpRouter (jump.c) */
extern const router_class maglev_class; /* MaglevRouter (maglev.c) */
extern const router_class rendezvous_class; /* RendezvousRouter (rendezvous.c) */
extern const router_class anchor_class; /* AnchorRouter (anchor.c) */

/*
 * The families' constructors, on an object of the type freshly allocated
 * (zeroed, family unset): they check their own arguments, set the family
 * and its state; 0, or -1 with an exception (the object is then released
 * by the type with no family state to free).
 */
int ring32_init(RouterObject *self, Py_ssize_t vnodes, int vnodes_given, PyObject *hash,
                PyObject *layout);
int ring64_init(RouterObject *self, PyObject *layout, PyObject *hash, PyObject *min_ring,
                PyObject *max_ring);

/* 1 when layout names a layout of the 64-bit ring (envoy, grpc). */
int ring64_layout(PyObject *layout);
/* A router of cls (ConsistentHashRouter or a subclass) of a 64-bit ring
 * layout holding the (node, weight) pairs: what the pickles of these
 * layouts are read by (module.c's _rebuild_table); NULL with an exception. */
PyObject *ring64_rebuild(PyTypeObject *cls, PyObject *layout, PyObject *hash, PyObject *min_ring,
                         PyObject *max_ring, PyObject *pairs);

/* The state a router's readers use now: its published snapshot, or the
 * object itself before its first change.  A reader holds an epoch read
 * section (epoch.h) while it uses it; a writer holds the router's lock. */
static inline RouterObject *router_state(RouterObject *self)
{
    RouterObject *s = __atomic_load_n(&self->current, __ATOMIC_SEQ_CST);
    return s ? s : self;
}

/* Defines method(self, arg): the family's fn(state, arg) on self's
 * published state, in a read section (epoch.h).  Written in the family's
 * own file, where fn is inlined into it (static READ_METHOD(...) for a
 * file's own), and called by the interpreter
 * straight from a one-family class's method table: a single lookup pays
 * the section and no call through the shell. */
#define READ_METHOD(method, fn)                                                 \
    PyObject *method(RouterObject *self, PyObject *arg)                         \
    {                                                                           \
        if (epoch_enter() < 0)                                                  \
            return NULL;                                                        \
        PyObject *result = fn(router_state(self), arg);                         \
        epoch_exit();                                                           \
        return result;                                                          \
    }

/* Defines method(self, arg) for a family whose lookups are one 64-bit
 * hash: hash(self, arg, &h) (0 or -1), computed with the object's own
 * settings (plain values no change or release touches), then owner(state,
 * h) on the published state, which reads it and runs no Python code.  The
 * hash comes first, so Python code it runs (a key's __str__, an int's
 * __index__) runs outside any read section.  With the GIL nothing else
 * runs between the load of the state and the answer, so no writer can
 * change or free it meanwhile: no section is needed, and the lookup costs
 * what it did before routers were shared without the GIL.  Without the
 * GIL, the section of epoch.h around the load and the answer. */
#ifdef Py_GIL_DISABLED
#define HASHED_READ_OPEN() epoch_enter()
#define HASHED_READ_CLOSE() epoch_exit()
#else
#define HASHED_READ_OPEN() 0
#define HASHED_READ_CLOSE() ((void)0)
#endif
#define HASHED_READ_METHOD(method, hash, owner)                                 \
    PyObject *method(RouterObject *self, PyObject *arg)                         \
    {                                                                           \
        uint64_t h_;                                                            \
        if (hash(self, arg, &h_) < 0 || HASHED_READ_OPEN() < 0)                 \
            return NULL;                                                        \
        PyObject *result = owner(router_state(self), h_);                       \
        HASHED_READ_CLOSE();                                                    \
        return result;                                                          \
    }

/* locate, get_at and preference (above) of a family whose key's place is
 * its 64-bit hash, from its hash_of_key, owner_of and preference_at. */
#define LOCATED_BY_HASH(locate, get_at, preference, preference_at, hash, owner) \
    static int locate(RouterObject *self, PyObject *key, uint64_t *place)       \
    {                                                                           \
        return hash(self, key, place);                                          \
    }                                                                           \
    static PyObject *get_at(RouterObject *self, uint64_t place)                 \
    {                                                                           \
        return owner(self, place);                                              \
    }                                                                           \
    static PyObject *preference(RouterObject *self, PyObject *key, size_t want) \
    {                                                                           \
        uint64_t h_;                                                            \
        if (hash(self, key, &h_) < 0)                                           \
            return NULL;                                                        \
        return preference_at(self, h_, want);                                   \
    }

/* The router object a state (the object's own, or a snapshot) belongs to. */
static inline RouterObject *router_object(RouterObject *state)
{
    return state->owner ? state->owner : state;
}

/* A new object of type (a router class, or a subclass), zeroed, with no
 * family yet, for a family's init; NULL with an exception. */
static inline RouterObject *router_alloc(PyTypeObject *type)
{
    return (RouterObject *)type->tp_alloc(type, 0);
}

#endif /* CHASH_PY_FAMILY_H */
