/*
 * haproxy_ids.h - the server ids (HAProxy's puids) of the haproxy layout,
 * numbered as HAProxy 2.6 numbers a backend's servers.
 *
 * Numbering (cfgparse.c, check_config_validity): a counter starts at 1;
 * for each server in config order, one without an explicit id takes the
 * first id not in use at or after the counter, and the counter then moves
 * one past the server's position: past the id taken, or, for a server with
 * an explicit id, one step.  The counter never passes CHASH_HAPROXY_MAX_ID.
 * An explicit id already in use is an error, as in HAProxy.
 *
 * The ids in use are kept sorted, so checking an id and finding the first
 * free one cost a binary search, not a scan of the servers.
 *
 * Invariants (checked by chash_haproxy_ids_check()):
 *  - used[0..count) is strictly increasing, every id in
 *    [1, CHASH_HAPROXY_MAX_ID];
 *  - count <= cap, and used is NULL when cap is 0;
 *  - next is in [1, CHASH_HAPROXY_MAX_ID], or 0, read as 1 (a set zeroed
 *    by its owner's allocation rather than initialised).
 *
 * The struct is open so that its owner can embed, move and swap it, and
 * read or restore next (a pickle carries the counter); the ids are changed
 * only through the functions below.  Allocations go through CHASH_MALLOC,
 * CHASH_REALLOC and CHASH_FREE (alloc.h).  Every call that can fail is
 * all-or-nothing.  Plain C11, no Python; not thread-safe by itself.
 */
#ifndef CHASH_HAPROXY_IDS_H
#define CHASH_HAPROXY_IDS_H

#include <stddef.h>
#include <stdint.h>

/* HAProxy's ids are positive C ints. */
#define CHASH_HAPROXY_MAX_ID 2147483647u

typedef struct chash_haproxy_ids {
    uint32_t *used;    /* the ids in use, sorted */
    size_t count, cap; /* ids in use, room allocated */
    uint32_t next;     /* HAProxy's counter for the next automatic id (0: 1) */
} chash_haproxy_ids;

/* An empty set whose counter is 1.  Allocates nothing. */
void chash_haproxy_ids_init(chash_haproxy_ids *ids);

/* Frees the ids' block; the set is then as chash_haproxy_ids_init leaves it. */
void chash_haproxy_ids_free(chash_haproxy_ids *ids);

/* The counter: next, or 1 for a zeroed set. */
uint32_t chash_haproxy_ids_next(const chash_haproxy_ids *ids);

/* 1 when id is in use, else 0. */
int chash_haproxy_ids_contains(const chash_haproxy_ids *ids, uint32_t id);

/* The first id >= from that is not in use, or 0 when none is left up to
 * CHASH_HAPROXY_MAX_ID (from 0 is read as 1). */
uint32_t chash_haproxy_ids_first_free(const chash_haproxy_ids *ids, uint32_t from);

/*
 * Room for n more ids, so that the next n successful takes cannot fail for
 * memory.  Returns 0, or CHASH_ENOMEM (the set unchanged) when the block
 * cannot grow or its size would overflow.
 */
int chash_haproxy_ids_reserve(chash_haproxy_ids *ids, size_t n);

/*
 * Numbers one server: the explicit id (1 .. CHASH_HAPROXY_MAX_ID), or, for
 * id 0, the first free id at or after the counter; marks it used, moves the
 * counter as HAProxy does and writes the id to *taken.  Returns 0,
 * CHASH_EINVAL (id above CHASH_HAPROXY_MAX_ID), CHASH_EEXIST (the explicit
 * id is in use), CHASH_ERANGE (no free id is left) or CHASH_ENOMEM; on
 * error the set is unchanged and *taken is 0.
 */
int chash_haproxy_ids_take(chash_haproxy_ids *ids, uint32_t id, uint32_t *taken);

/*
 * Gives id back (a server removed, or a take undone).  The counter stays
 * where it is, as HAProxy's does; a caller undoing takes restores next
 * itself.  Returns 0, or CHASH_ENOENT when id is not in use (nothing
 * changed).  Never allocates; the block keeps its room.
 */
int chash_haproxy_ids_release(chash_haproxy_ids *ids, uint32_t id);

/* 0 when every invariant above holds, else CHASH_ECORRUPT. */
int chash_haproxy_ids_check(const chash_haproxy_ids *ids);

#endif /* CHASH_HAPROXY_IDS_H */
