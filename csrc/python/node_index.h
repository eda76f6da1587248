/*
 * node_index.h - a set of nodes found by their address or their str value
 * (node_index.c): what get_bounded (get_bounded.c; HashRing's in
 * uhashring.c) tests each entry of the caller's loads against, so that
 * reading 100 loads costs a probe an entry rather than a dict lookup a
 * node.  node_index_make builds one over any nodes; the rest of this
 * comment is about a router state's.
 *
 * An index belongs to one state (family.h's RouterObject: the object's
 * own or a snapshot) and is made the first time get_bounded reads that
 * state: a lazy cache, the one place a lookup writes a state, and only
 * this field.  With the GIL a reader makes it with nothing else running;
 * without it, readers race to make one and the first to publish it (one
 * compare-and-swap) wins, the others free theirs.  It borrows the state's
 * node objects, so it lives no longer than they do: the shell drops it
 * where it releases or clears a state, and where it changes one in place
 * (router.c), so an index never describes nodes other than its state's.
 *
 * With the GIL an index also learns: the first caller's str found by
 * value that equals a node with no alias yet becomes that node's alias (a
 * strong reference, let go with the index), entered in the table by
 * address, so a caller that keeps one dict of loads, or builds each from
 * the same name objects (engine stats keyed by URL), pays the comparison
 * of names once a state.  Holding the alias is what makes the address
 * proof: the object cannot be freed and its address reused while the
 * index lives.  Without the GIL the index is read by many threads at once
 * and never written after it is published.
 */
#ifndef CHASH_PY_NODE_INDEX_H
#define CHASH_PY_NODE_INDEX_H

#include "family.h"

/* A node in the table by address: under its own address, and under its
 * alias's once it has one. */
typedef struct {
    PyObject *key;  /* the address: the node, or its alias; NULL: free */
    PyObject *node; /* the node (an exact str), borrowed */
    double weight;
    size_t at;      /* its position, as node_index_make's next gave it */
} NodeIndexSlot;

/* A node in the table by value: its str hash beside it. */
typedef struct {
    PyObject *node; /* the node, borrowed; NULL: free */
    double weight;
    size_t at;
    Py_hash_t hash;
    PyObject *alias; /* an equal str the index learned (strong), or NULL */
} NodeIndexNamed;

/* A str's data size in bytes and its kind (bytes a code point, PEP 393:
 * 1, 2 or 4) in one word: equal strs have equal shapes. */
static inline uint64_t node_index_shape(PyObject *s)
{
    return (uint64_t)PyUnicode_GET_LENGTH(s) * PyUnicode_KIND(s) << 3 | PyUnicode_KIND(s);
}

/* Two open-addressed tables of the same nodes, linear probing: by the
 * node object's address or its alias's (a caller's loads keyed by the very
 * objects the router was given, or by ones it learned, answered without
 * reading the key object), and by str value (any equal str). */
struct NodeIndex {
    size_t mask;    /* by_value's slots - 1: a power of two at least twice the nodes */
    size_t address_mask; /* by_address's slots - 1: twice by_value's, room for the aliases */
    unsigned shift; /* 64 - log2(by_address's slots), for the address's Fibonacci hash */
    double total;   /* W: every node's weight, summed in the state's order */
    NodeIndexSlot *by_address; /* address_mask + 1 slots, after by_value in the block */
    NodeIndexNamed by_value[];  /* mask + 1 slots */
};

/* Where an address starts its probe: the high bits of its Fibonacci hash
 * (an object's low bits are the allocator's alignment). */
static inline size_t node_index_home(const NodeIndex *ix, const void *p)
{
    return (size_t)(((uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15)) >> ix->shift);
}

/* The slot by address where key is, or the free one its probe ends at. */
static inline NodeIndexSlot *node_index_slot(const NodeIndex *ix, const void *key)
{
    size_t i = node_index_home(ix, key);
    while (ix->by_address[i].key && ix->by_address[i].key != key)
        i = (i + 1) & ix->address_mask;
    return &ix->by_address[i];
}

/* The nodes to index, one a call: the first at position *at or after it
 * (borrowed; *at set to its position, its weight in *weight), or NULL past
 * the last.  Runs no Python code. */
typedef PyObject *(*node_index_next)(void *ctx, size_t *at, double *weight);

/* A new index of the nodes next gives; NODE_INDEX_NONE when some node is
 * not an exact str (the index could not answer for it); NULL with
 * MemoryError.  Runs no Python code.  Freed with node_index_free. */
NodeIndex *node_index_make(node_index_next next, void *ctx);
void node_index_free(NodeIndex *ix);
extern NodeIndex node_index_none;
#define NODE_INDEX_NONE (&node_index_none)

/* state's index, made now when it has none; NULL with no exception when
 * its nodes cannot be indexed so (a node not an exact str, which no family
 * makes today), NULL with MemoryError.  The caller is in a read section on
 * state and runs no Python code while it uses the index. */
NodeIndex *node_index_of(RouterObject *state);

/* Makes key, a str equal to named's node and no object the index holds,
 * its alias, when the node has none and the GIL is what serialises
 * readers (see above); a caller's strs may be many copies of one name, and
 * the first is kept.  1 when learned, else 0.  Runs no Python code. */
int node_index_learn(NodeIndex *ix, NodeIndexNamed *named, PyObject *key);

/* Frees state's index, if any (the shell: a state released, cleared or
 * changed in place). */
void node_index_drop(RouterObject *state);

/* A str's hash as a dict has it: cached in the object once computed, as
 * every key of a dict's has been. */
static inline Py_hash_t node_index_str_hash(PyObject *s)
{
#ifndef Py_GIL_DISABLED
    Py_hash_t h = ((PyASCIIObject *)s)->hash;
    if (h != -1)
        return h;
#endif
    return PyObject_Hash(s);
}

/* The 8 or 4 bytes at p, as they lie in memory. */
static inline uint64_t node_index_load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t node_index_load4(const char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Whether n bytes at a and b are the same: inline, and for the short
 * names nodes have with no loop over single bytes (whose exit, at a
 * length that differs name to name, the CPU mispredicts): words of 8, the
 * last one overlapping the one before, or two overlapping words of 4, or
 * the first, middle and last bytes.  Reads only the n bytes. */
static inline int node_index_same_bytes(const char *a, const char *b, size_t n)
{
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            if (node_index_load8(a + i) != node_index_load8(b + i))
                return 0;
        }
        return node_index_load8(a + n - 8) == node_index_load8(b + n - 8);
    }
    if (n >= 4)
        return (node_index_load4(a) == node_index_load4(b)) &
               (node_index_load4(a + n - 4) == node_index_load4(b + n - 4));
    if (n == 0)
        return 1;
    return (a[0] == b[0]) & (a[n / 2] == b[n / 2]) & (a[n - 1] == b[n - 1]);
}

/* Whether slot's node equals key, an exact str of hash h. */
static inline int node_index_names(const NodeIndexNamed *slot, PyObject *key, Py_hash_t h)
{
    /* Equal strs have one kind (PEP 393's canonical form), so equal kinds,
     * lengths and bytes are equality. */
    uint64_t shape = node_index_shape(key);
    return slot->hash == h && node_index_shape(slot->node) == shape &&
           node_index_same_bytes(PyUnicode_DATA(slot->node), PyUnicode_DATA(key),
                                 (size_t)(shape >> 3));
}

/* What one call's probes learn about its loads' keys. */
typedef struct {
    int unknown;  /* set: the last key is none the index can answer */
    int by_value; /* set once a key was found by value and could not be
                   * learned: the caller's keys are objects the index does
                   * not know, so the rest go straight to the table by
                   * value (which finds the nodes themselves too) */
} NodeIndexProbe;

/*
 * The indexed node equal to key (borrowed), its weight in *weight and its
 * position in *at, key learned as its alias when it can be (found by value
 * while probe->by_value was clear); NULL when key is an exact str the
 * index does not hold.  probe->unknown set (and NULL returned) when key is
 * not an exact str, which the index cannot answer (a str subclass may hash
 * and compare its own way): the family's weight_of must then.  Runs no
 * Python code.
 */
static inline PyObject *node_index_find(NodeIndex *ix, PyObject *key, double *weight,
                                        size_t *at, NodeIndexProbe *probe)
{
    probe->unknown = 0;
    if (!probe->by_value) {
        const NodeIndexSlot *slot = node_index_slot(ix, key);
        if (slot->key) {
            *weight = slot->weight;
            *at = slot->at;
            return slot->node;
        }
    }
    if (!PyUnicode_CheckExact(key)) {
        probe->unknown = 1;
        return NULL;
    }
    Py_hash_t h = node_index_str_hash(key);
    for (size_t i = (size_t)h & ix->mask;; i = (i + 1) & ix->mask) {
        NodeIndexNamed *slot = &ix->by_value[i];
        if (!slot->node)
            return NULL;
        if (slot->node == key || node_index_names(slot, key, h)) {
            if (slot->node != key && !probe->by_value)
                probe->by_value = !node_index_learn(ix, slot, key);
            *weight = slot->weight;
            *at = slot->at;
            return slot->node;
        }
    }
}

#endif /* CHASH_PY_NODE_INDEX_H */
