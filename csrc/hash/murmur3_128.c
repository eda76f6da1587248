/*
 * murmur3_128.c - MurmurHash3 x64_128, after Austin Appleby's algorithm
 * description (the x64 variant: two 64-bit lanes h1, h2).
 *
 * The input is read as 16-byte blocks of two little-endian 64-bit words
 * k1, k2, then a 0-15 byte tail (bytes 0-7 into k1, 8-15 into k2, each a
 * little-endian integer).  The length enters as a 64-bit value.  The
 * result is the 16 bytes h1, h2, each little-endian: the bytes the
 * original code writes on x86-64, mmh3.hash_bytes(data, seed) and Guava's
 * Hashing.murmur3_128(seed).hashBytes(data).asBytes().
 */
#include "hash.h"

static inline uint64_t m128_load64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline void m128_store64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t m128_rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64u - r));
}

/* The 64-bit finalisation mix: every input bit affects every output bit. */
static inline uint64_t m128_fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

#define M128_C1 UINT64_C(0x87c37b91114253d5)
#define M128_C2 UINT64_C(0x4cf5ad432745937f)

static inline uint64_t m128_mix_k1(uint64_t k1)
{
    k1 *= M128_C1;
    k1 = m128_rotl64(k1, 31);
    return k1 * M128_C2;
}

static inline uint64_t m128_mix_k2(uint64_t k2)
{
    k2 *= M128_C2;
    k2 = m128_rotl64(k2, 33);
    return k2 * M128_C1;
}

/* The first n (< 8) bytes at p as a little-endian integer. */
static inline uint64_t m128_tail(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    while (n > 0) {
        n--;
        v = (v << 8) | p[n];
    }
    return v;
}

void chash_murmur3_128(const void *data, size_t len, uint32_t seed,
                       uint8_t out[CHASH_MURMUR3_128_SIZE])
{
    const uint8_t *p = (const uint8_t *)data;
    uint64_t h1 = seed, h2 = seed;
    size_t nblocks = len / 16;

    for (size_t i = 0; i < nblocks; i++, p += 16) {
        h1 ^= m128_mix_k1(m128_load64le(p));
        h1 = m128_rotl64(h1, 27);
        h1 += h2;
        h1 = h1 * 5 + 0x52dce729u;
        h2 ^= m128_mix_k2(m128_load64le(p + 8));
        h2 = m128_rotl64(h2, 31);
        h2 += h1;
        h2 = h2 * 5 + 0x38495ab5u;
    }

    size_t rest = len & 15;
    if (rest > 8)
        h2 ^= m128_mix_k2(m128_tail(p + 8, rest - 8));
    if (rest > 0)
        h1 ^= m128_mix_k1(m128_tail(p, rest < 8 ? rest : 8));

    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = m128_fmix64(h1);
    h2 = m128_fmix64(h2);
    h1 += h2;
    h2 += h1;

    m128_store64le(out, h1);
    m128_store64le(out + 8, h2);
}
