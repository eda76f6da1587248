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
    if (slots > (PY_SSIZE_T_MAX - sizeof(NodeIndex)) /
                    (sizeof(NodeIndexNamed) + sizeof(NodeIndexSlot))) {
        PyErr_NoMemory();
        return NULL;
    }
    NodeIndex *ix = PyMem_Calloc(1, sizeof *ix + slots * (sizeof(NodeIndexNamed) +
                                                          sizeof(NodeIndexSlot)));
    if (!ix) {
        PyErr_NoMemory();
        return NULL;
    }
    ix->mask = slots - 1;
    ix->shift = 64 - bits;
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
        ix->by_value[i] = (NodeIndexNamed){node, w, k, h};
        for (i = node_index_home(ix, node); ix->by_address[i].node; i = (i + 1) & ix->mask) {
        }
        ix->by_address[i] = (NodeIndexSlot){node, w, k};
        ix->total += w;
    }
    return ix;
}

void node_index_free(NodeIndex *ix)
{
    if (ix != NODE_INDEX_NONE)
        PyMem_Free(ix);
}

/* A router state's nodes, in its order (node_index_next). */
static PyObject *state_next(void *ctx, size_t *at, double *weight)
{
    RouterObject *state = ctx;
    return state->family->node_at(state, at, weight);
}

const NodeIndex *node_index_of(RouterObject *state)
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
