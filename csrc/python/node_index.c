/*
 * node_index.c - the nodes of one router state by address and by str value,
 * made once a state and published (node_index.h).
 */
#include "node_index.h"

/* What nodes that cannot be indexed get (a state keeps it, so that it
 * is not tried again at every call); never freed. */
NodeIndex node_index_none;

/* Runs no Python code: every node is an exact str, whose hash is str's. */
NodeIndex *node_index_make(node_index_next next, void *ctx)
{
    size_t count = 0;
    double w;
    for (size_t k = 0; next(ctx, &k, &w) != NULL; k++) {
        count++;
    }
    size_t slots = 8;
    unsigned bits = 3;
    while (slots < 2 * count) {
        slots *= 2;
        bits++;
    }
    /* The table by address has twice the slots: each node may add its
     * alias, and it stays at most half full. */
    if (slots > (PY_SSIZE_T_MAX - sizeof(NodeIndex)) /
                    (sizeof(NodeIndexNamed) + 2 * sizeof(NodeIndexSlot))) {
        PyErr_NoMemory();
        return NULL;
    }
    NodeIndex *ix = PyMem_Calloc(1, sizeof *ix + slots * (sizeof(NodeIndexNamed) +
                                                          2 * sizeof(NodeIndexSlot)));
    if (!ix) {
        PyErr_NoMemory();
        return NULL;
    }
    ix->mask = slots - 1;
    ix->address_mask = 2 * slots - 1;
    ix->shift = 64 - (bits + 1);
    ix->by_address = (NodeIndexSlot *)(ix->by_value + slots);
    PyObject *node;
    for (size_t k = 0; (node = next(ctx, &k, &w)) != NULL; k++) {
        if (!PyUnicode_CheckExact(node)) {
            PyMem_Free(ix);
            return NODE_INDEX_NONE;
        }
        Py_hash_t h = node_index_str_hash(node);
        size_t i = (size_t)h & ix->mask;
        while (ix->by_value[i].node)
            i = (i + 1) & ix->mask;
        ix->by_value[i] = (NodeIndexNamed){node, w, k, h, NULL};
        *node_index_slot(ix, node) = (NodeIndexSlot){node, node, w, k};
        ix->total += w;
    }
    return ix;
}

int node_index_learn(NodeIndex *ix, NodeIndexNamed *named, PyObject *key)
{
#ifdef Py_GIL_DISABLED
    /* Read by many threads at once: never written once published. */
    (void)ix, (void)named, (void)key;
    return 0;
#else
    if (named->alias)
        return 0;
    /* key is no object the table holds (its probe missed), and the table
     * has room: at most two addresses a node in twice as many slots. */
    named->alias = Py_NewRef(key);
    *node_index_slot(ix, key) = (NodeIndexSlot){key, named->node, named->weight, named->at};
    return 1;
#endif
}

/* Needs what a state's release needs (the GIL where there is one): it
 * lets go of the aliases. */
void node_index_free(NodeIndex *ix)
{
    if (!ix || ix == NODE_INDEX_NONE)
        return;
    for (size_t i = 0; i <= ix->mask; i++)
        Py_XDECREF(ix->by_value[i].alias);
    PyMem_Free(ix);
}

/* A router state's nodes, in its order (node_index_next). */
static PyObject *state_next(void *ctx, size_t *at, double *weight)
{
    RouterObject *state = ctx;
    return state->family->node_at(state, at, weight);
}

NodeIndex *node_index_of(RouterObject *state)
{
    NodeIndex *ix = __atomic_load_n(&state->node_index, __ATOMIC_ACQUIRE);
    if (!ix) {
        NodeIndex *mine = node_index_make(state_next, state);
        if (!mine)
            return NULL;
        ix = NULL;
        /* Readers of one snapshot without the GIL may race here: the first
         * index published is every reader's. */
        if (__atomic_compare_exchange_n(&state->node_index, &ix, mine, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            ix = mine;
        } else {
            node_index_free(mine);
        }
    }
    return ix == NODE_INDEX_NONE ? NULL : ix;
}

void node_index_drop(RouterObject *state)
{
    NodeIndex *ix = state->node_index;
    state->node_index = NULL;
    node_index_free(ix);
}
