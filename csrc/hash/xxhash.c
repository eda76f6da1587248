/*
 * xxhash.c - XXH32, XXH64 and XXH3-64, as described in the xxHash
 * specification document ("xxHash fast digest algorithm", v0.2.0, which
 * covers XXH32, XXH64 and XXH3).
 *
 * One-shot, scalar code.  XXH3 uses the default 192-byte secret; with a
 * non-zero seed and more than 240 bytes of input it derives a secret from
 * the seed, as the specification requires, in a stack buffer.  All input
 * and secret words are decoded explicitly as little-endian, so results do
 * not depend on the host.
 */
#include "hash.h"

/* ---- Shared helpers ------------------------------------------------------ */

static inline uint32_t xxh_load32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline uint64_t xxh_load64(const uint8_t *p)
{
    return (uint64_t)xxh_load32(p) | ((uint64_t)xxh_load32(p + 4) << 32);
}

static inline void xxh_store64(uint8_t *p, uint64_t v)
{
    int i;
    for (i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Rotations are only ever by constants in 1..63, never 0. */
static inline uint32_t xxh_rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32u - r));
}

static inline uint64_t xxh_rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64u - r));
}

static inline uint32_t xxh_bswap32(uint32_t x)
{
    return (x >> 24) | ((x >> 8) & 0x0000ff00u) | ((x << 8) & 0x00ff0000u) |
           (x << 24);
}

static inline uint64_t xxh_bswap64(uint64_t x)
{
    return ((uint64_t)xxh_bswap32((uint32_t)x) << 32) |
           (uint64_t)xxh_bswap32((uint32_t)(x >> 32));
}

#define XXH_PRIME32_1 0x9E3779B1u
#define XXH_PRIME32_2 0x85EBCA77u
#define XXH_PRIME32_3 0xC2B2AE3Du
#define XXH_PRIME32_4 0x27D4EB2Fu
#define XXH_PRIME32_5 0x165667B1u

#define XXH_PRIME64_1 0x9E3779B185EBCA87u
#define XXH_PRIME64_2 0xC2B2AE3D27D4EB4Fu
#define XXH_PRIME64_3 0x165667B19E3779F9u
#define XXH_PRIME64_4 0x85EBCA77C2B2AE63u
#define XXH_PRIME64_5 0x27D4EB2F165667C5u

#define XXH_PRIME_MX1 0x165667919E3779F9u
#define XXH_PRIME_MX2 0x9FB21C651E98DF25u

/* ---- XXH32 --------------------------------------------------------------- */

static inline uint32_t xxh32_round(uint32_t acc, uint32_t lane)
{
    acc += lane * XXH_PRIME32_2;
    acc = xxh_rotl32(acc, 13);
    return acc * XXH_PRIME32_1;
}

uint32_t chash_xxh32(const void *data, size_t len, uint32_t seed)
{
    const uint8_t *p = (const uint8_t *)data;
    size_t rest = len;
    uint32_t acc;

    if (len >= 16) {
        /* Four lanes over 16-byte stripes (spec steps 1 and 2). */
        uint32_t v1 = seed + XXH_PRIME32_1 + XXH_PRIME32_2;
        uint32_t v2 = seed + XXH_PRIME32_2;
        uint32_t v3 = seed;
        uint32_t v4 = seed - XXH_PRIME32_1;
        do {
            v1 = xxh32_round(v1, xxh_load32(p));
            v2 = xxh32_round(v2, xxh_load32(p + 4));
            v3 = xxh32_round(v3, xxh_load32(p + 8));
            v4 = xxh32_round(v4, xxh_load32(p + 12));
            p += 16;
            rest -= 16;
        } while (rest >= 16);
        acc = xxh_rotl32(v1, 1) + xxh_rotl32(v2, 7) + xxh_rotl32(v3, 12) +
              xxh_rotl32(v4, 18);
    } else {
        acc = seed + XXH_PRIME32_5;
    }

    /* The length is added modulo 2^32 (step 4). */
    acc += (uint32_t)len;

    while (rest >= 4) {
        acc += xxh_load32(p) * XXH_PRIME32_3;
        acc = xxh_rotl32(acc, 17) * XXH_PRIME32_4;
        p += 4;
        rest -= 4;
    }
    while (rest > 0) {
        acc += (uint32_t)*p * XXH_PRIME32_5;
        acc = xxh_rotl32(acc, 11) * XXH_PRIME32_1;
        p++;
        rest--;
    }

    acc ^= acc >> 15;
    acc *= XXH_PRIME32_2;
    acc ^= acc >> 13;
    acc *= XXH_PRIME32_3;
    acc ^= acc >> 16;
    return acc;
}

/* ---- XXH64 --------------------------------------------------------------- */

static inline uint64_t xxh64_round(uint64_t acc, uint64_t lane)
{
    acc += lane * XXH_PRIME64_2;
    acc = xxh_rotl64(acc, 31);
    return acc * XXH_PRIME64_1;
}

static inline uint64_t xxh64_merge(uint64_t acc, uint64_t v)
{
    acc ^= xxh64_round(0, v);
    return acc * XXH_PRIME64_1 + XXH_PRIME64_4;
}

/* The XXH64 final mix; XXH3 uses it too. */
static inline uint64_t xxh64_avalanche(uint64_t h)
{
    h ^= h >> 33;
    h *= XXH_PRIME64_2;
    h ^= h >> 29;
    h *= XXH_PRIME64_3;
    h ^= h >> 32;
    return h;
}

uint64_t chash_xxh64(const void *data, size_t len, uint64_t seed)
{
    const uint8_t *p = (const uint8_t *)data;
    size_t rest = len;
    uint64_t acc;

    if (len >= 32) {
        uint64_t v1 = seed + XXH_PRIME64_1 + XXH_PRIME64_2;
        uint64_t v2 = seed + XXH_PRIME64_2;
        uint64_t v3 = seed;
        uint64_t v4 = seed - XXH_PRIME64_1;
        do {
            v1 = xxh64_round(v1, xxh_load64(p));
            v2 = xxh64_round(v2, xxh_load64(p + 8));
            v3 = xxh64_round(v3, xxh_load64(p + 16));
            v4 = xxh64_round(v4, xxh_load64(p + 24));
            p += 32;
            rest -= 32;
        } while (rest >= 32);
        acc = xxh_rotl64(v1, 1) + xxh_rotl64(v2, 7) + xxh_rotl64(v3, 12) +
              xxh_rotl64(v4, 18);
        acc = xxh64_merge(acc, v1);
        acc = xxh64_merge(acc, v2);
        acc = xxh64_merge(acc, v3);
        acc = xxh64_merge(acc, v4);
    } else {
        acc = seed + XXH_PRIME64_5;
    }

    acc += (uint64_t)len;

    while (rest >= 8) {
        acc ^= xxh64_round(0, xxh_load64(p));
        acc = xxh_rotl64(acc, 27) * XXH_PRIME64_1 + XXH_PRIME64_4;
        p += 8;
        rest -= 8;
    }
    if (rest >= 4) {
        acc ^= (uint64_t)xxh_load32(p) * XXH_PRIME64_1;
        acc = xxh_rotl64(acc, 23) * XXH_PRIME64_2 + XXH_PRIME64_3;
        p += 4;
        rest -= 4;
    }
    while (rest > 0) {
        acc ^= (uint64_t)*p * XXH_PRIME64_5;
        acc = xxh_rotl64(acc, 11) * XXH_PRIME64_1;
        p++;
        rest--;
    }

    return xxh64_avalanche(acc);
}

/* ---- XXH3-64 ------------------------------------------------------------- */

#define XXH3_SECRET_SIZE 192
#define XXH3_STRIPE_LEN 64
/* Each stripe of a block moves 8 bytes further into the secret. */
#define XXH3_STRIPES_PER_BLOCK ((XXH3_SECRET_SIZE - XXH3_STRIPE_LEN) / 8)
#define XXH3_BLOCK_LEN (XXH3_STRIPE_LEN * XXH3_STRIPES_PER_BLOCK)

static const uint8_t xxh3_default_secret[XXH3_SECRET_SIZE] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c,
    0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb,
    0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e,
    0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6,
    0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb,
    0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97,
    0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7,
    0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31,
    0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83,
    0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26,
    0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc,
    0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f,
    0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

/* The 64x64 -> 128-bit product, folded to 64 bits by xoring its halves.
 * Uses the compiler's 128-bit integer where there is one; the portable
 * version builds the product from four 32x32 -> 64 partial products. */
#if defined(__SIZEOF_INT128__) && !defined(CHASH_XXH_NO_INT128)
__extension__ typedef unsigned __int128 xxh_u128;

static inline uint64_t xxh_mul128_fold64(uint64_t a, uint64_t b)
{
    xxh_u128 prod = (xxh_u128)a * (xxh_u128)b;
    return (uint64_t)prod ^ (uint64_t)(prod >> 64);
}
#else
static inline uint64_t xxh_mul128_fold64(uint64_t a, uint64_t b)
{
    const uint64_t m32 = 0xFFFFFFFFu;
    uint64_t lo_lo = (a & m32) * (b & m32);
    uint64_t hi_lo = (a >> 32) * (b & m32);
    uint64_t lo_hi = (a & m32) * (b >> 32);
    uint64_t hi_hi = (a >> 32) * (b >> 32);
    /* Cannot overflow: at most 2 * (2^32 - 1) + (2^32 - 1)^2 = 2^64 - 1. */
    uint64_t cross = (lo_lo >> 32) + (hi_lo & m32) + lo_hi;
    uint64_t upper = (hi_lo >> 32) + (cross >> 32) + hi_hi;
    uint64_t lower = (cross << 32) | (lo_lo & m32);
    return lower ^ upper;
}
#endif

static inline uint64_t xxh3_avalanche(uint64_t h)
{
    h ^= h >> 37;
    h *= XXH_PRIME_MX1;
    h ^= h >> 32;
    return h;
}

/* 4-8 bytes: a stronger final mix, since the input is not multiplied. */
static inline uint64_t xxh3_rrmxmx(uint64_t h, uint64_t len)
{
    h ^= xxh_rotl64(h, 49) ^ xxh_rotl64(h, 24);
    h *= XXH_PRIME_MX2;
    h ^= (h >> 35) + len;
    h *= XXH_PRIME_MX2;
    return h ^ (h >> 28);
}

static inline uint64_t xxh3_len_0to16(const uint8_t *p, size_t len,
                                      const uint8_t *sec, uint64_t seed)
{
    if (len > 8) {
        uint64_t lo = ((xxh_load64(sec + 24) ^ xxh_load64(sec + 32)) + seed) ^
                      xxh_load64(p);
        uint64_t hi = ((xxh_load64(sec + 40) ^ xxh_load64(sec + 48)) - seed) ^
                      xxh_load64(p + len - 8);
        uint64_t acc = (uint64_t)len + xxh_bswap64(lo) + hi +
                       xxh_mul128_fold64(lo, hi);
        return xxh3_avalanche(acc);
    }
    if (len >= 4) {
        uint64_t s = seed ^ ((uint64_t)xxh_bswap32((uint32_t)seed) << 32);
        uint64_t first = xxh_load32(p);
        uint64_t last = xxh_load32(p + len - 4);
        uint64_t v = ((xxh_load64(sec + 8) ^ xxh_load64(sec + 16)) - s) ^
                     (last | (first << 32));
        return xxh3_rrmxmx(v, (uint64_t)len);
    }
    if (len > 0) {
        /* last byte | length | first byte | middle byte, LSB first. */
        uint32_t combined = (uint32_t)p[len - 1] | ((uint32_t)len << 8) |
                            ((uint32_t)p[0] << 16) |
                            ((uint32_t)p[len >> 1] << 24);
        uint64_t v = ((uint64_t)(xxh_load32(sec) ^ xxh_load32(sec + 4)) +
                      seed) ^ (uint64_t)combined;
        return xxh64_avalanche(v);
    }
    return xxh64_avalanche(seed ^ xxh_load64(sec + 56) ^ xxh_load64(sec + 64));
}

/* The mixing step of the 17-240 byte paths. */
static inline uint64_t xxh3_mix16(const uint8_t *p, const uint8_t *sec,
                                  uint64_t seed)
{
    return xxh_mul128_fold64(xxh_load64(p) ^ (xxh_load64(sec) + seed),
                             xxh_load64(p + 8) ^ (xxh_load64(sec + 8) - seed));
}

static inline uint64_t xxh3_len_17to128(const uint8_t *p, size_t len,
                                        const uint8_t *sec, uint64_t seed)
{
    /* Chunks from both ends, paired; the sum is order-independent. */
    uint64_t acc = (uint64_t)len * XXH_PRIME64_1;
    if (len > 32) {
        if (len > 64) {
            if (len > 96) {
                acc += xxh3_mix16(p + 48, sec + 96, seed);
                acc += xxh3_mix16(p + len - 64, sec + 112, seed);
            }
            acc += xxh3_mix16(p + 32, sec + 64, seed);
            acc += xxh3_mix16(p + len - 48, sec + 80, seed);
        }
        acc += xxh3_mix16(p + 16, sec + 32, seed);
        acc += xxh3_mix16(p + len - 32, sec + 48, seed);
    }
    acc += xxh3_mix16(p, sec, seed);
    acc += xxh3_mix16(p + len - 16, sec + 16, seed);
    return xxh3_avalanche(acc);
}

static inline uint64_t xxh3_len_129to240(const uint8_t *p, size_t len,
                                         const uint8_t *sec, uint64_t seed)
{
    uint64_t acc = (uint64_t)len * XXH_PRIME64_1;
    size_t nchunks = len / 16;
    size_t i;

    for (i = 0; i < 8; i++)
        acc += xxh3_mix16(p + 16 * i, sec + 16 * i, seed);
    acc = xxh3_avalanche(acc);
    /* Later chunks reuse the secret from offset 3 on. */
    for (i = 8; i < nchunks; i++)
        acc += xxh3_mix16(p + 16 * i, sec + 16 * (i - 8) + 3, seed);
    /* The last 16 bytes, with the secret at offset 136 - 17. */
    acc += xxh3_mix16(p + len - 16, sec + 119, seed);
    return xxh3_avalanche(acc);
}

/* One 64-byte stripe into the eight accumulators. */
static inline void xxh3_accumulate_512(uint64_t acc[8], const uint8_t *p,
                                       const uint8_t *sec)
{
    int i;
    for (i = 0; i < 8; i++) {
        uint64_t v = xxh_load64(p + 8 * i);
        uint64_t k = v ^ xxh_load64(sec + 8 * i);
        acc[i ^ 1] += v;
        acc[i] += (k & 0xFFFFFFFFu) * (k >> 32);
    }
}

static inline void xxh3_scramble(uint64_t acc[8], const uint8_t *sec)
{
    int i;
    for (i = 0; i < 8; i++) {
        uint64_t a = acc[i];
        a ^= a >> 47;
        a ^= xxh_load64(sec + 8 * i);
        acc[i] = a * XXH_PRIME32_1;
    }
}

static uint64_t xxh3_hash_long(const uint8_t *p, size_t len,
                               const uint8_t *sec)
{
    uint64_t acc[8] = {XXH_PRIME32_3, XXH_PRIME64_1, XXH_PRIME64_2,
                       XXH_PRIME64_3, XXH_PRIME64_4, XXH_PRIME32_2,
                       XXH_PRIME64_5, XXH_PRIME32_1};
    /* The last block is left for the final step even when it is full. */
    size_t nblocks = (len - 1) / XXH3_BLOCK_LEN;
    size_t nstripes;
    size_t b, s;
    uint64_t result;
    int i;

    for (b = 0; b < nblocks; b++) {
        const uint8_t *blk = p + b * XXH3_BLOCK_LEN;
        for (s = 0; s < XXH3_STRIPES_PER_BLOCK; s++)
            xxh3_accumulate_512(acc, blk + s * XXH3_STRIPE_LEN, sec + s * 8);
        xxh3_scramble(acc, sec + XXH3_SECRET_SIZE - XXH3_STRIPE_LEN);
    }

    /* Full stripes of the last block except its last one, then the last
     * 64 bytes of the input (which may overlap the previous stripe). */
    nstripes = ((len - 1) - nblocks * XXH3_BLOCK_LEN) / XXH3_STRIPE_LEN;
    for (s = 0; s < nstripes; s++)
        xxh3_accumulate_512(acc, p + nblocks * XXH3_BLOCK_LEN +
                                     s * XXH3_STRIPE_LEN,
                            sec + s * 8);
    xxh3_accumulate_512(acc, p + len - XXH3_STRIPE_LEN,
                        sec + XXH3_SECRET_SIZE - XXH3_STRIPE_LEN - 7);

    result = (uint64_t)len * XXH_PRIME64_1;
    for (i = 0; i < 4; i++)
        result += xxh_mul128_fold64(acc[2 * i] ^ xxh_load64(sec + 11 + 16 * i),
                                    acc[2 * i + 1] ^
                                        xxh_load64(sec + 11 + 16 * i + 8));
    return xxh3_avalanche(result);
}

uint64_t chash_xxh3_64(const void *data, size_t len, uint64_t seed)
{
    const uint8_t *p = (const uint8_t *)data;
    const uint8_t *sec = xxh3_default_secret;

    if (len <= 16)
        return xxh3_len_0to16(p, len, sec, seed);
    if (len <= 128)
        return xxh3_len_17to128(p, len, sec, seed);
    if (len <= 240)
        return xxh3_len_129to240(p, len, sec, seed);

    if (seed != 0) {
        /* Long inputs take the seed through a derived secret: even 64-bit
         * words plus the seed, odd ones minus it. */
        uint8_t derived[XXH3_SECRET_SIZE];
        int i;
        for (i = 0; i < XXH3_SECRET_SIZE / 16; i++) {
            xxh_store64(derived + 16 * i, xxh_load64(sec + 16 * i) + seed);
            xxh_store64(derived + 16 * i + 8,
                        xxh_load64(sec + 16 * i + 8) - seed);
        }
        return xxh3_hash_long(p, len, derived);
    }
    return xxh3_hash_long(p, len, sec);
}
