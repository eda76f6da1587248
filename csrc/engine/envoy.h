/*
 * envoy.h - how Envoy's RING_HASH and gRPC's ring_hash place hosts on a
 * ring of 64-bit points (wide.h).  Envoy's Maglev is strategies/maglev.h's.
 *
 * Point counts (chash_envoy_counts): weights are normalised by their sum,
 * w / sum in double precision; the ring is scaled so the lightest host gets
 * a whole share of the minimum size,
 *     scale = min(ceil(min_w * min_ring) / min_w, max_ring),
 * and hosts take points by running sums in their (add) order: target +=
 * scale * w, then one point while current < target, current += 1.  So a
 * host may get no point at all when the maximum is small.  gRPC runs the
 * same rule with both sizes first capped at its ring_size_cap (4096).
 *
 * Point keys: host i's point j hashes the bytes "{id}_{j}" (j in decimal)
 * with XXH64 seed 0, or with Envoy's MURMUR_HASH_2 (libstdc++'s 64-bit
 * _Hash_bytes, seed 0xc70f6907).
 *
 * Plain C11, no Python.
 */
#ifndef CHASH_ENVOY_H
#define CHASH_ENVOY_H

#include <stddef.h>
#include <stdint.h>

/* How point keys are hashed. */
typedef enum chash_point_hash {
    CHASH_POINT_XXH64 = 0,     /* XXH64, seed 0 */
    CHASH_POINT_MURMUR2_64 = 1 /* libstdc++ _Hash_bytes, seed 0xc70f6907 */
} chash_point_hash;

/* Envoy's MurmurHash::STD_HASH_SEED. */
#define CHASH_ENVOY_MURMUR_SEED UINT64_C(0xc70f6907)

/* The hash of data under kind (XXH64 seed 0, or murmur2_64 with Envoy's seed). */
uint64_t chash_point_hash_bytes(chash_point_hash kind, const void *data, size_t len);

/*
 * Point counts of n hosts of weights[0..n) (each >= 1) for a ring of
 * min_ring .. max_ring points (1 <= min_ring <= max_ring), into counts
 * (a count may be 0); *total receives their sum.  Returns 0, CHASH_EINVAL
 * (a weight of 0, sizes out of order or 0, or a weight total above
 * UINT64_MAX) or CHASH_ERANGE (a total above CHASH_WIDE_MAX_POINTS).
 */
int chash_envoy_counts(const uint64_t *weights, size_t n, uint64_t min_ring, uint64_t max_ring,
                       size_t *counts, size_t *total);

/*
 * Points 0 .. count - 1 of host id into out.  Returns 0, or CHASH_ENOMEM
 * when the key buffer of a long id cannot be allocated.
 */
int chash_envoy_points(chash_point_hash kind, const char *id, size_t id_len, size_t count,
                       uint64_t *out);

#endif /* CHASH_ENVOY_H */
