/*
 * chash.h - the consistent-hash ring engine.
 *
 * A ring is a sorted array of 32-bit points, each owned by one node.  A key
 * is routed to the owner of the first point whose value is >= the key's
 * hash, wrapping around to the first point of the ring (the successor rule;
 * it lives in one place, chash_ring_successor()), or, in a ring set to
 * CHASH_RULE_NEAREST, to the owner of the point nearest the hash in either
 * direction, a tie going to the point before it (the nearest rule of
 * HAProxy's consistent hashing; it lives in one place too,
 * chash_ring_nearest(), beside the successor), or, in a ring set to
 * CHASH_RULE_VARNISH, to the point Varnish's shard director finds
 * (chash_ring_varnish(), beside them: the successor but for a hash above
 * the last point, which stays at the last point, and an exact hit on a
 * value shared by several points, which lands where its bisection does).
 *
 * The engine is plain C11 and knows nothing of Python: nodes are byte
 * strings (their ids) carrying an opaque pointer that the caller owns.  How
 * a node's points are derived from its id (hash function, virtual-key
 * format) is scheme.h's business; this file only keeps them sorted.
 *
 * Invariants (checked by chash_ring_check()):
 *  - points are sorted by (value, owner id bytes), so the owner of a value
 *    shared by several nodes is the node with the smallest id, whatever the
 *    order in which nodes were added or removed; or, in a ring set to
 *    CHASH_TIES_BY_ORDER, by (value, owner's place in insertion order), so
 *    the owner is the node added first (as nginx, twemproxy and libmemcached
 *    give a shared point to the server listed first);
 *  - every point's owner is a live node, and each node owns exactly as many
 *    points as it declares;
 *  - node ids are distinct; nodes are kept in the order they were added;
 *  - the id index finds every node at its position, so finding a node by
 *    id costs O(1) expected whatever the node count;
 *  - the bucket index maps the top bits of a value to the first point whose
 *    top bits are not smaller.
 *
 * Every mutation is all-or-nothing: when a call returns an error the ring is
 * exactly as it was before the call.
 *
 * Not thread-safe by itself: callers serialise mutations against lookups
 * (the Python binding changes a copy of a shared ring and publishes it
 * whole, or, holding the GIL with no lookup running without it, changes
 * the ring in place, never calling back into Python meanwhile).
 */
#ifndef CHASH_H
#define CHASH_H

#include <stddef.h>
#include <stdint.h>

/* Status codes: 0 for success, a negative value for each failure. */
typedef enum chash_status {
    CHASH_OK = 0,
    CHASH_ENOMEM = -1, /* an allocation failed; nothing was changed */
    CHASH_EINVAL = -2, /* an argument is out of its documented range */
    CHASH_EEXIST = -3, /* the node is already in the ring */
    CHASH_ENOENT = -4, /* the node (or one of its points) is not in the ring */
    CHASH_ERANGE = -5, /* the ring would exceed CHASH_MAX_POINTS or CHASH_MAX_NODES */
    CHASH_ECORRUPT = -6 /* chash_ring_check() found a broken invariant */
} chash_status;

/* Largest ring this engine builds: 2**28 points (8 bytes each, 2 GiB). */
#define CHASH_MAX_POINTS ((size_t)1 << 28)
/* Largest number of points one node may own. */
#define CHASH_MAX_NODE_POINTS ((size_t)1 << 24)
/* Largest number of nodes in one ring. */
#define CHASH_MAX_NODES ((size_t)1 << 20)

typedef struct chash_ring chash_ring;

/* Which node owns a point that several nodes share. */
typedef enum chash_ties {
    CHASH_TIES_BY_ID = 0,   /* the node with the smallest id (bytewise) */
    CHASH_TIES_BY_ORDER = 1 /* the node added first */
} chash_ties;

/* Which point a hash is routed to (every lookup, preference walk and
 * ownership follows the ring's rule). */
typedef enum chash_rule {
    CHASH_RULE_SUCCESSOR = 0, /* the first point >= hash, wrapping */
    CHASH_RULE_NEAREST = 1,   /* the nearest point either way; a tie goes to the one before */
    CHASH_RULE_VARNISH = 2    /* Varnish 7.1's shard_lookup(): chash_ring_varnish() */
} chash_rule;

/* A node as the engine sees it; valid until the next mutation. */
typedef struct chash_node_view {
    const char *id;
    size_t id_len;
    void *data;       /* the caller's pointer, never touched by the engine */
    size_t npoints;   /* how many points the node owns */
} chash_node_view;

/* Human-readable name of a status code (a static string). */
const char *chash_strerror(int status);

/* A new empty ring, or NULL when out of memory.  Free with chash_ring_free(). */
chash_ring *chash_ring_new(void);

/* Sets the tie rule of an empty ring (a new ring breaks ties by id).
 * Returns 0, or CHASH_EINVAL if the ring holds nodes or ties is unknown. */
int chash_ring_set_ties(chash_ring *ring, chash_ties ties);

/* The ring's tie rule. */
chash_ties chash_ring_ties(const chash_ring *ring);

/* Sets the lookup rule of an empty ring (a new ring uses the successor).
 * Returns 0, or CHASH_EINVAL if the ring holds nodes or rule is unknown. */
int chash_ring_set_rule(chash_ring *ring, chash_rule rule);

/* The ring's lookup rule. */
chash_rule chash_ring_rule(const chash_ring *ring);

/* Frees the ring and its copies of node ids; never touches nodes' data. */
void chash_ring_free(chash_ring *ring);

size_t chash_ring_node_count(const chash_ring *ring);
size_t chash_ring_point_count(const chash_ring *ring);

/* Bytes the ring asked the allocator for: points, bucket index, node
 * table, id index and ids (the allocator's own overhead not included). */
size_t chash_ring_memory(const chash_ring *ring);

/*
 * Adds a node with the given points (any order, duplicates allowed).
 * The engine copies id and points; data is stored as is.
 * Returns 0, CHASH_EEXIST, CHASH_EINVAL (npoints == 0 or above
 * CHASH_MAX_NODE_POINTS), CHASH_ERANGE or CHASH_ENOMEM; on error the ring
 * is unchanged.
 */
int chash_ring_add(chash_ring *ring, const char *id, size_t id_len, void *data,
                   const uint32_t *points, size_t npoints);

/* One node of a chash_ring_add_many() call. */
typedef struct chash_node_spec {
    const char *id;
    size_t id_len;
    void *data;
    const uint32_t *points; /* any order, duplicates allowed */
    size_t npoints;
} chash_node_spec;

/*
 * Adds count nodes at once, in the given order (which is their insertion
 * order for CHASH_TIES_BY_ORDER): one sort and one merge
 * instead of count of each, for building a ring.  The same errors as
 * chash_ring_add (CHASH_EEXIST also for an id given twice); all-or-nothing.
 */
int chash_ring_add_many(chash_ring *ring, const chash_node_spec *nodes, size_t count);

/*
 * Removes a node and all its points; *data_out (if not NULL) receives the
 * node's data so the caller can release it.  Cannot fail but for
 * CHASH_ENOENT, and never asks for memory (it may hand spare room back,
 * and a failure to do so changes nothing).
 */
int chash_ring_remove(chash_ring *ring, const char *id, size_t id_len, void **data_out);

/*
 * Gives an existing node more points (a higher weight).  Same errors as
 * chash_ring_add but CHASH_ENOENT for an absent node; all-or-nothing.
 */
int chash_ring_grow(chash_ring *ring, const char *id, size_t id_len,
                    const uint32_t *points, size_t npoints);

/*
 * Takes the given points (a multiset; each must be owned by the node) away
 * from an existing node, which must keep at least one point.  Returns 0,
 * CHASH_ENOENT (node or a point absent), CHASH_EINVAL (would leave no
 * point) or CHASH_ENOMEM; all-or-nothing.
 */
int chash_ring_shrink(chash_ring *ring, const char *id, size_t id_len,
                      const uint32_t *points, size_t npoints);

/* One node's change in a chash_ring_change_points() call. */
typedef struct chash_point_change {
    const char *id;         /* an existing node */
    size_t id_len;
    const uint32_t *add;    /* points it gains, any order (NULL when nadd is 0) */
    size_t nadd;
    const uint32_t *drop;   /* points of its own it loses, a multiset */
    size_t ndrop;
} chash_point_change;

/*
 * Grows and shrinks count existing nodes at once (a recount of several
 * nodes' points, as a weighted layout needs when one weight changes): the
 * dropped points go in one compacting pass and the added ones come in by
 * one sort and one merge, so the cost is the ring's size once plus the
 * points that move, not a rebuild.  Returns 0, CHASH_ENOENT (a node, or a
 * point to drop, absent), CHASH_EEXIST (a node named twice), CHASH_EINVAL
 * (a node would keep no point, or more than CHASH_MAX_NODE_POINTS),
 * CHASH_ERANGE or CHASH_ENOMEM; all-or-nothing.
 */
int chash_ring_change_points(chash_ring *ring, const chash_point_change *changes, size_t count);

/*
 * Finds the node with this id through the id index, O(1) expected: returns
 * 0 and writes its position in insertion order to *index (if index is not
 * NULL), or CHASH_ENOENT when no node has this id.
 */
int chash_ring_find(const chash_ring *ring, const char *id, size_t id_len, size_t *index);

/* The node at position index (0 <= index < node count), in insertion order. */
chash_node_view chash_ring_node(const chash_ring *ring, size_t index);

/*
 * The successor rule: index of the first point whose value is >= hash,
 * wrapping to 0.  The ring must not be empty.
 */
size_t chash_ring_successor(const chash_ring *ring, uint32_t hash);

/*
 * The nearest rule: with s = chash_ring_successor(ring, hash) and p the
 * point before it (the last point when s is 0), the index of p when
 * hash - p <= s - hash (both distances modulo 2**32), else s.  So an
 * exact hit is s (the first of the points of that value), a tie goes
 * back to p (the last of the points of its value), and both distances
 * wrap around the ring's end.  This is HAProxy 2.6's
 * chash_get_server_hash().  The ring must not be empty.
 */
size_t chash_ring_nearest(const chash_ring *ring, uint32_t hash);

/*
 * Varnish 7.1's shard director lookup (shard_lookup() in
 * vmod_directors_shard_dir.c), over the points in the order Varnish sorts
 * them (by value, then backend order: CHASH_TIES_BY_ORDER): a bisection
 * over [0, n) that stops at a point equal to hash (so, on a run of equal
 * values, at the run's point it probes first), at i + 1 when point i <
 * hash <= point i + 1, at 0 when hash is below every point, and at the
 * last point n - 1 when hash is above every point: no wrap to 0.  (A ring
 * of exactly two points sends every hash to the second: the first probe is
 * the last point.)  The ring must not be empty.
 */
size_t chash_ring_varnish(const chash_ring *ring, uint32_t hash);

/* The point a hash is routed to under the ring's rule: chash_ring_successor,
 * chash_ring_nearest or chash_ring_varnish.  The ring must not be empty. */
size_t chash_ring_route(const chash_ring *ring, uint32_t hash);

/*
 * The data of the node owning the routed point (chash_ring_route) of hash into *data: returns 0,
 * or CHASH_ENOENT on an empty ring (*data untouched).
 */
int chash_ring_lookup(const chash_ring *ring, uint32_t hash, void **data);

/*
 * The owner (node index) of the routed point of each of hashes[0..n) into
 * owners (which may be hashes itself); the ring must not be empty.  Faster
 * than n lookups on rings that
 * do not fit in the cache: the memory reads of later keys are started
 * while earlier keys are resolved.
 */
void chash_ring_owners(const chash_ring *ring, const uint32_t *hashes, size_t n, uint32_t *owners);

/* Value and owner (node index) of point i, 0 <= i < point count. */
uint32_t chash_ring_point(const chash_ring *ring, size_t i);
size_t chash_ring_point_owner(const chash_ring *ring, size_t i);

/*
 * The first n distinct nodes met walking clockwise from the routed point of
 * hash (chash_ring_route), owner first.
 * Writes node indices to out (room for n) and how many were found,
 * min(n, node count), to *found.  Returns 0, or CHASH_ENOMEM (*found is
 * then 0).
 */
int chash_ring_preference(const chash_ring *ring, uint32_t hash, size_t n, size_t *out,
                          size_t *found);

/*
 * Fraction of the 2**32 values each node owns, written to share[node index]
 * (room for the node count).  Under the successor rule a value v belongs
 * to the owner of its successor, so the arc (previous point, point] goes
 * to that point's owner; under the nearest rule each gap between two
 * neighbouring point values is split at its middle, as the rule splits it;
 * under the varnish rule the arcs are the successor's but for the values
 * above the last point, which go to the last point's owner (an exact hit
 * on a shared value, 1 / 2**32 of the space, is counted with its run's
 * first point; a ring of two points is all the second's).
 */
void chash_ring_ownership(const chash_ring *ring, double *share);

/* Checks every invariant above in O(points + nodes); 0, CHASH_ECORRUPT, or
 * CHASH_ENOMEM when its scratch counters cannot be allocated. */
int chash_ring_check(const chash_ring *ring);

#endif /* CHASH_H */
