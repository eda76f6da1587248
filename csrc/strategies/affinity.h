/*
 * affinity.h - prefix-cache affinity for LLM inference routing (affinity.c):
 * the chained block hashes of a prompt, a bounded LRU a node of the blocks
 * routed to it, and the choice of a node along a preference order that
 * weighs queued work, load and expected cache hits.  Plain C11, no Python,
 * no global state; allocations through CHASH_MALLOC / CHASH_FREE.
 *
 * Block hashes are chained: block i's hash is computed from block i's
 * content and block i-1's hash, so it stands for blocks 0..i; equal hashes
 * at a position mean an equal prefix (but for 64-bit collisions).  A
 * trailing partial block is hashed too (it matches only an equal partial
 * block).
 *
 * A chash_affinity holds nodes by slot (0, 1, ... as added; a forgotten
 * slot is reused by the next node added); each slot's LRU holds at most
 * `capacity` block hashes, all its memory allocated when the slot is
 * added, so recording never fails.  Invariants (chash_affinity_check): in
 * each LRU the recency list and the hash chains hold the same entries, each
 * key once, size <= capacity.  Not thread-safe: the binding serialises.
 */
#ifndef CHASH_AFFINITY_H
#define CHASH_AFFINITY_H

#include <stddef.h>
#include <stdint.h>

/* The seeds the two kinds of data start their chains from, so that a text
 * and a token sequence never share a chain by construction. */
#define CHASH_PREFIX_TEXT_SEED 0x6368617368545854ULL  /* "chashTXT" */
#define CHASH_PREFIX_TOKEN_SEED 0x6368617368544f4bULL /* "chashTOK" */

/* Most block hashes a slot may hold (entry indexes are 32-bit). */
#define CHASH_AFFINITY_MAX_CAPACITY (1u << 30)

/*
 * The chained hashes of UTF-8 text cut into blocks of `block` code points
 * (a code point starts at every byte that is not 10xxxxxx; the text is not
 * validated), at most `limit` of them, written to out (room for `limit`).
 * *count receives how many.  Returns 0, or CHASH_EINVAL when block == 0.
 */
int chash_prefix_blocks_utf8(const char *text, size_t len, size_t block, size_t limit,
                             uint64_t *out, size_t *count);

/*
 * The chained hashes of a token-id sequence cut into blocks of `block`
 * tokens, as chash_prefix_blocks_utf8.  Returns 0 or CHASH_EINVAL
 * (block == 0).
 */
int chash_prefix_blocks_tokens(const uint64_t *tokens, size_t n, size_t block, size_t limit,
                               uint64_t *out, size_t *count);

typedef struct chash_affinity chash_affinity;

/* A new, empty table whose slots each hold at most `capacity` blocks
 * (1 .. CHASH_AFFINITY_MAX_CAPACITY); NULL when capacity is out of range or
 * memory runs out.  Free it with chash_affinity_free. */
chash_affinity *chash_affinity_new(size_t capacity);
void chash_affinity_free(chash_affinity *table);

/* The capacity a slot. */
size_t chash_affinity_capacity(const chash_affinity *table);

/* A new slot, its LRU allocated whole, its index in *slot (the lowest
 * free one).  Returns 0 or CHASH_ENOMEM (the table unchanged). */
int chash_affinity_add(chash_affinity *table, size_t *slot);

/* The slot freed with all it holds, for reuse.  Returns 0 or CHASH_ENOENT
 * (no such slot in use). */
int chash_affinity_remove(chash_affinity *table, size_t slot);

/* How many of blocks[0..n), from the first, slot holds (0 for a slot not
 * in use). */
size_t chash_affinity_match(const chash_affinity *table, size_t slot, const uint64_t *blocks,
                            size_t n);

/* How many blocks slot holds (0 for a slot not in use). */
size_t chash_affinity_held(const chash_affinity *table, size_t slot);

/* blocks[0..n) recorded in slot in order, each made most recent, the
 * least recent evicted beyond the capacity.  Never allocates.  Returns 0
 * or CHASH_ENOENT (slot not in use). */
int chash_affinity_record(chash_affinity *table, size_t slot, const uint64_t *blocks, size_t n);

/* One candidate of a choice: its slot, in-flight requests and queued work
 * (in tokens of prefill still ahead of a new request there). */
typedef struct {
    size_t slot;
    double load;
    double queued;
} chash_affinity_candidate;

/* How a choice weighs its terms, every one in tokens of prefill:
 * tokens: the prompt's length (0: n x block_tokens);
 * block_tokens: the tokens a block stands for;
 * miss_cost: what each token to prefill (not expected in cache) costs, in
 *   tokens of queued work: above 1 when a miss also costs the requests
 *   queued behind it and the hits a prefix's later requests lose;
 * rank_cost: what each step down the preference order costs;
 * load_cost: what each in-flight request costs. */
typedef struct {
    double tokens;
    double block_tokens;
    double miss_cost;
    double rank_cost;
    double load_cost;
} chash_affinity_weights;

/*
 * The candidate (index into candidates, given in preference order) with
 * the lowest estimated cost: queued + miss_cost x the prompt's tokens not
 * expected in cache (those past the blocks its slot holds) +
 * rank x rank_cost + load x load_cost; ties to the earlier candidate.  A candidate whose
 * cost cannot beat the best so far even with every block cached is not
 * matched at all.  Returns 0 with *choice set, or CHASH_EINVAL (no
 * candidate, a slot not in use, a weight or term negative or not finite).
 */
int chash_affinity_choose(const chash_affinity *table, const chash_affinity_candidate *candidates,
                          size_t count, const uint64_t *blocks, size_t n,
                          const chash_affinity_weights *weights, size_t *choice);

/* 0 when every invariant holds, else CHASH_ECORRUPT. */
int chash_affinity_check(const chash_affinity *table);

#endif /* CHASH_AFFINITY_H */
