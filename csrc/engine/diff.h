/*
 * diff.h - the arcs of the hash space whose owner differs between two
 * rings: what moves when a ring changes.
 *
 * Each ring's routing is a step function over the hash space [0, 2**bits)
 * (bits 32 for chash_ring, 64 for chash_wide): the successor rule gives a
 * run of equal point values the hashes after the previous value up to its
 * own, owned by the first point of the run (the one the sort by (value,
 * node identity) puts first); the nearest rule splits each gap between
 * two neighbouring values at its middle (a tie going to the point before).
 * Both step functions are walked together in one merge, O(points of both
 * rings), and every stretch where the owners differ is reported, with
 * neighbouring stretches of the same (source, target) joined.
 *
 * An arc is (start, end]: the hashes h with start < h <= end, wrapping past
 * the top of the hash space when start > end; start == end is the whole
 * space (only when every hash moves).  Arcs come in ring order, sorted by
 * end, an arc that wraps first; none is empty and no two overlap.
 *
 * chash_table_diff() does the same for two lookup tables (Maglev's), whose
 * space is the table's entries rather than hashes.
 *
 * Plain C11, no Python; allocation through CHASH_MALLOC (alloc.h).  Reads
 * the rings only: callers serialise it against mutations, as for lookups.
 */
#ifndef CHASH_DIFF_H
#define CHASH_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "chash.h"
#include "wide.h"

/* No node: an entry of chash_wide_diff()'s same[] for a node that is not
 * in the other ring. */
#define CHASH_DIFF_NONE UINT32_MAX

/* One arc that changes owner. */
typedef struct chash_move {
    uint64_t start;  /* exclusive */
    uint64_t end;    /* inclusive */
    uint32_t source; /* node index in the old ring (insertion order) */
    uint32_t target; /* node index in the new ring */
} chash_move;

/*
 * The arcs whose owner differs between from and to, two rings of the same
 * lookup rule (nodes are the same node when their ids are equal bytes).
 * On success *moves is an array of *count moves the caller frees with
 * chash_moves_free() (NULL when *count is 0).  Returns 0, CHASH_EINVAL
 * (the rules differ, or exactly one ring is empty: its hashes have no
 * owner) or CHASH_ENOMEM; on error *moves is NULL and *count 0.
 */
int chash_ring_diff(const chash_ring *from, const chash_ring *to, chash_move **moves,
                    size_t *count);

/*
 * The same for two 64-bit rings, whose owners are the caller's node
 * indices: same[k], for each node k < chash_wide_nodes(from), is that
 * node's index in to, or CHASH_DIFF_NONE when to does not hold it.  The
 * same results and errors as chash_ring_diff (CHASH_EINVAL also for an
 * entry of same[] that is neither CHASH_DIFF_NONE nor below
 * chash_wide_nodes(to)).
 */
int chash_wide_diff(const chash_wide *from, const chash_wide *to, const uint32_t *same,
                    chash_move **moves, size_t *count);

/*
 * The entries of two lookup tables of one size (Maglev's) whose owner
 * differs: from[e] and to[e] are entry e's node indices (below from_nodes
 * and to_nodes), same[k] maps node k of from to its index in to, or
 * CHASH_DIFF_NONE.  The space is the entries 0 to size - 1 (max = size -
 * 1), with the arcs' shape above: (start, end] holds the entries e with
 * start < e <= end, wrapping past size - 1; start == end is every entry.
 * Returns 0, CHASH_EINVAL (size 0, a NULL array, an index out of range;
 * nothing returned) or CHASH_ENOMEM.
 */
int chash_table_diff(const uint32_t *from, const uint32_t *to, size_t size, const uint32_t *same,
                     size_t from_nodes, size_t to_nodes, chash_move **moves, size_t *count);

/* Frees what a diff returned (NULL is fine). */
void chash_moves_free(chash_move *moves);

#endif /* CHASH_DIFF_H */
