/*
 * scheme.h - how keys and nodes become 32-bit ring points.
 *
 * A scheme is a layout (how a node's virtual keys are spelled and how a
 * digest is cut to 32 bits) plus a hash function.  Every hash's result is
 * first written as its big-endian digest bytes (MD5 16, SHA-1 20, SHA-256
 * 32, MurmurHash3 x64_128 16 (its bytes as mmh3.hash_bytes gives them),
 * 32-bit hashes 4, 64-bit hashes 8), then cut by the layout:
 *
 *   python  "{node}_virtual_{i}", point = last 4 digest bytes, big-endian
 *           (= int(hexdigest, 16) % 2**32, the documented Python router);
 *   node    "{node}#vnode{i}",    point = first 4 digest bytes, big-endian
 *           (= parseInt(hexdigest.slice(0, 8), 16), the documented Node ring);
 *   ketama  "{node}-{i / 4}",     MD5 only; point i = digest bytes
 *           4g..4g+3 little-endian with g = i % 4 (libketama); a key's
 *           hash is the first group.  How many points each node gets
 *           depends on every node's weight: chash_ketama_counts();
 *   nginx   CRC-32 only; the id is split as nginx splits a server address
 *           (host, port: the digits after the last ':'; "unix:" + path is
 *           all host) and point i = crc32(host "\0" port prev), prev being
 *           point i-1 as 4 little-endian bytes (0 for point 0): the ring of
 *           nginx's "hash ... consistent";
 *   libmemcached "{node}-{i}", one-at-a-time or MD5; point = the hash's
 *           value (one-at-a-time) or digest bytes 0..3 little-endian (MD5),
 *           the same cut for keys: libmemcached's plain ketama ring;
 *   haproxy HAProxy's "hash-type consistent": point j of the server with
 *           puid p is full_hash(p * 4096 + j) (chash_haproxy_points(),
 *           scheme_haproxy.c; a node's points come from its puid, not its
 *           id), 16 points per unit of weight; a key's hash is the hash
 *           function's value (sdbm, djb2, wt6, crc32, with or without
 *           avalanche), and its rings use the nearest-point lookup rule
 *           (chash_layout_rule()).
 *   varnish Varnish 7.1's shard director: "{node}{i}" (the backend's ident,
 *           then i in decimal), SHA-256 only, point = last 4 digest bytes
 *           little-endian (VRT_HashStrands32); a key's hash is the same
 *           cut (the director's key()).  67 points at weight 1 (its
 *           replicas), trunc(replicas * weight) at weight >= 1.  Its rings
 *           use the shard director's own lookup (CHASH_RULE_VARNISH);
 *   nghttpx nghttpx 1.52's affinity ring: SHA-256 only, 160 points from
 *           the backend's address as nghttpx encodes it
 *           (chash_nghttpx_points(), scheme_nghttpx.h): 20 digests of the
 *           address bytes followed by one byte 0..19, each cut into 8
 *           big-endian words; a key's hash is the first 4 digest bytes
 *           big-endian (nghttpx's affinity=ip over the client's address).
 *
 * Point i of a node depends only on (node, i) (and, for nginx, on the
 * points before it), so a node with more points owns a superset of the
 * points of the same node with fewer.
 *
 * Ties: the nginx, ketama and libmemcached references give a point that two
 * servers share to the server listed first, so rings of these layouts
 * break ties by insertion order (chash_layout_ties()); python and node by
 * node id.
 */
#ifndef CHASH_SCHEME_H
#define CHASH_SCHEME_H

#include <stddef.h>
#include <stdint.h>

#include "scheme_nghttpx.h"

typedef enum chash_hash_id {
    CHASH_HASH_MD5,
    CHASH_HASH_SHA1,
    CHASH_HASH_MURMUR2,
    CHASH_HASH_MURMUR3,
    CHASH_HASH_XXH32,
    CHASH_HASH_XXH64,
    CHASH_HASH_XXH3,
    CHASH_HASH_FNV1A,
    CHASH_HASH_CRC32,
    CHASH_HASH_ONE_AT_A_TIME,
    /* HAProxy's key hashes (hash-type ... sdbm|djb2|wt6|crc32 [avalanche]);
     * *_AVALANCHE is the hash passed through chash_full_hash(). */
    CHASH_HASH_SDBM,
    CHASH_HASH_DJB2,
    CHASH_HASH_WT6,
    CHASH_HASH_SDBM_AVALANCHE,
    CHASH_HASH_DJB2_AVALANCHE,
    CHASH_HASH_WT6_AVALANCHE,
    CHASH_HASH_CRC32_AVALANCHE,
    /* Byte digests like MD5's: FIPS 180-4 SHA-256, and MurmurHash3
     * x64_128 as its 16 bytes (h1, h2, each little-endian). */
    CHASH_HASH_SHA256,
    CHASH_HASH_MURMUR3_128,
    CHASH_HASH_COUNT
} chash_hash_id;

typedef enum chash_layout_id {
    CHASH_LAYOUT_PYTHON,
    CHASH_LAYOUT_NODE,
    CHASH_LAYOUT_KETAMA,
    CHASH_LAYOUT_NGINX,
    CHASH_LAYOUT_LIBMEMCACHED,
    CHASH_LAYOUT_HAPROXY,
    CHASH_LAYOUT_VARNISH,
    CHASH_LAYOUT_NGHTTPX,
    CHASH_LAYOUT_COUNT
} chash_layout_id;

typedef struct chash_scheme {
    chash_layout_id layout;
    chash_hash_id hash;
} chash_scheme;

/* Longest digest any hash writes. */
#define CHASH_MAX_DIGEST 32

/* Name <-> id; the *_by_name functions return 0 or CHASH_EINVAL. */
int chash_hash_by_name(const char *name, chash_hash_id *out);
const char *chash_hash_name(chash_hash_id hash);
int chash_layout_by_name(const char *name, chash_layout_id *out);
const char *chash_layout_name(chash_layout_id layout);

/* Points per node at weight 1 that match the reference implementation of
 * each layout: python 100, node 150, ketama 160 (40 digests x 4), nginx
 * 160, libmemcached 100, haproxy 16, varnish 67, nghttpx 160. */
size_t chash_layout_default_points(chash_layout_id layout);

/* The hash a layout uses when none is named: nginx crc32, libmemcached
 * one_at_a_time, haproxy sdbm_avalanche, varnish and nghttpx sha256, the
 * others md5. */
chash_hash_id chash_layout_default_hash(chash_layout_id layout);

/* The lookup rule of this layout's rings: CHASH_RULE_NEAREST for haproxy,
 * CHASH_RULE_VARNISH for varnish, CHASH_RULE_SUCCESSOR for the others (an
 * int: chash_rule is chash.h's). */
int chash_layout_rule(chash_layout_id layout);

/* HAProxy's points per unit of weight (BE_WEIGHT_SCALE) and the puid
 * stride (SRV_EWGHT_RANGE = 256 * 16, so weights go up to 256). */
#define CHASH_HAPROXY_WEIGHT_SCALE 16
#define CHASH_HAPROXY_MAX_WEIGHT 256
#define CHASH_HAPROXY_PUID_STRIDE 4096

/*
 * Points first .. first + count - 1 of the HAProxy server with this puid:
 * full_hash(puid * 4096 + j), computed modulo 2**32 as HAProxy's unsigned
 * arithmetic does.  Returns 0, or CHASH_EINVAL when puid is 0 or
 * first + count exceeds CHASH_HAPROXY_MAX_WEIGHT * 16.
 */
int chash_haproxy_points(uint32_t puid, size_t first, size_t count, uint32_t *out);

/* 1 when rings of this layout give a shared point to the node added first
 * (nginx, ketama, libmemcached, haproxy, varnish, nghttpx), 0 when to the
 * smallest id (python, node). */
int chash_layout_ties(chash_layout_id layout);

/* 0, or CHASH_EINVAL for an unknown id or a layout/hash pair that does not
 * exist (ketama is defined over MD5 only, nginx over CRC-32, libmemcached
 * over one_at_a_time and MD5, haproxy over its eight key hashes, varnish
 * and nghttpx over SHA-256). */
int chash_scheme_init(chash_scheme *scheme, chash_layout_id layout, chash_hash_id hash);

/* Writes the digest of data (big-endian bytes) to out; returns its size.
 * seed goes to the seeded hashes (murmur2, murmur3, murmur3_128, xxh32,
 * xxh64, xxh3; cut to 32 bits for the 32-bit seeds); the others ignore it.
 * Rings use 0. */
size_t chash_digest(chash_hash_id hash, const void *data, size_t len, uint64_t seed,
                    uint8_t out[CHASH_MAX_DIGEST]);

/* 1 for the hashes whose result is a byte string (md5, sha1, sha256,
 * murmur3_128), 0 for those whose result is an integer; -1 for an unknown
 * id. */
int chash_hash_is_bytes(chash_hash_id hash);

/*
 * The hash of data as a 64-bit integer, the way Guava's HashCode.padToLong
 * reads a hash code: an integer result as itself (a 32-bit one
 * zero-extended), a byte string's first 8 bytes little-endian (so
 * murmur3_128 gives its h1, Guava's asLong()).  Seed 0.  The key hash of
 * the jump routers; 0 for an unknown id.
 */
uint64_t chash_hash64(chash_hash_id hash, const void *data, size_t len);

/* The ring position of a key. */
uint32_t chash_scheme_key_hash(const chash_scheme *scheme, const void *key, size_t len);

/* The ring positions of four keys at once: the same values as four
 * chash_scheme_key_hash calls, faster where the hash has a 4-lane form. */
void chash_scheme_key_hash_x4(const chash_scheme *scheme, const void *const keys[4],
                              const size_t lens[4], uint32_t out[4]);

/* Cuts an arbitrary non-negative integer (a caller-supplied hash) to a ring
 * position the way this scheme cuts digests: its low 32 bits. */
uint32_t chash_scheme_cut_int(uint64_t low_bits);

/*
 * Spells the virtual key behind point index (the nginx layout has none:
 * its points are chained, and 0 is returned; nor has haproxy) of node id into buf (cap bytes,
 * no terminating NUL) and returns its length; when the length exceeds cap
 * nothing useful is written and the caller retries with a bigger buffer.
 */
size_t chash_scheme_vkey(const chash_scheme *scheme, const char *id, size_t id_len,
                         size_t index, char *buf, size_t cap);

/*
 * Writes points first .. first + count - 1 of node id to out.
 * Returns 0, CHASH_ENOMEM (only for ids too long for the stack buffer) or,
 * for the nginx layout, whose points are chained from point 0,
 * CHASH_EINVAL when first + count exceeds CHASH_MAX_NODE_POINTS; always
 * CHASH_EINVAL for the haproxy layout (its points come from a puid:
 * chash_haproxy_points()); the nghttpx layout's are chash_nghttpx_points()'s,
 * with its errors.
 */
int chash_scheme_points(const chash_scheme *scheme, const char *id, size_t id_len,
                        size_t first, size_t count, uint32_t *out);

/*
 * Points a varnish-layout backend of this weight owns: replicas * weight
 * truncated, as the shard director counts them (it takes weights >= 1
 * only).  Returns 0, or CHASH_EINVAL when weight is not a finite number
 * >= 1 or the count exceeds max_points.
 */
int chash_varnish_points_for_weight(size_t replicas, double weight, size_t max_points,
                                    size_t *out);

/*
 * Points a node of this weight owns: round-half-even(base * weight), at
 * least 1.  Returns 0, or CHASH_EINVAL when weight is not a finite number
 * > 0 or the count exceeds max_points.
 */
int chash_points_for_weight(size_t base, double weight, size_t max_points, size_t *out);

/*
 * libketama's point counts (twemproxy, libmemcached ketama_weighted): node
 * k of n gets floorf(pct * base / 4 * n) * 4 points with pct = (float)
 * weights[k] / (float)total, every step in single precision as their C code
 * computes it, so every count depends on every weight.  Writes n counts to
 * out (a count may be 0); returns 0, or CHASH_EINVAL when a weight is 0 or
 * the total exceeds UINT64_MAX.
 */
int chash_ketama_counts(size_t base, const uint64_t *weights, size_t n, size_t *out);

#endif /* CHASH_SCHEME_H */
