/*
 * murmur.c - MurmurHash2 (32-bit) and MurmurHash3 x86_32, after
 * Austin Appleby's algorithm descriptions.
 *
 * Both read the input as little-endian 32-bit blocks followed by a 0-3
 * byte tail.  The original code reads blocks in host order; decoding them
 * explicitly as little-endian gives the published (x86) values on every
 * host.  The length enters the hash as a 32-bit value, as in the original
 * 32-bit interfaces.
 *
 * chash_murmur2_64 is the 64-bit MurmurHash2 variant that libstdc++ uses for
 * std::hash (its _Hash_bytes on 64-bit targets), which Envoy's ring hash
 * calls MURMUR_HASH_2: 8-byte little-endian blocks, a 1-7 byte tail read as
 * a little-endian integer, and a final two shift-xors around a multiply.
 */
#include "hash.h"

static inline uint32_t murmur_load32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline uint32_t murmur_rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32u - r));
}

/* The tail bytes as a little-endian integer of 1-3 bytes. */
static inline uint32_t murmur_tail(const uint8_t *p, size_t n)
{
    uint32_t k = 0;
    switch (n) {
    case 3:
        k ^= (uint32_t)p[2] << 16;
        /* fall through */
    case 2:
        k ^= (uint32_t)p[1] << 8;
        /* fall through */
    case 1:
        k ^= (uint32_t)p[0];
        break;
    default:
        break;
    }
    return k;
}

uint32_t chash_murmur2(const void *data, size_t len, uint32_t seed)
{
    /* m and r are the mixing constants of MurmurHash2. */
    const uint32_t m = 0x5bd1e995u;
    const uint8_t *p = (const uint8_t *)data;
    size_t nblocks = len / 4;
    uint32_t h = seed ^ (uint32_t)len;
    size_t i;

    for (i = 0; i < nblocks; i++) {
        uint32_t k = murmur_load32le(p + 4 * i);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }

    if ((len & 3) != 0) {
        h ^= murmur_tail(p + 4 * nblocks, len & 3);
        h *= m;
    }

    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* MurmurHash3's 32-bit finalizer: forces every input bit to affect every
 * output bit. */
static inline uint32_t murmur3_fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

uint32_t chash_murmur3_32(const void *data, size_t len, uint32_t seed)
{
    const uint32_t c1 = 0xcc9e2d51u;
    const uint32_t c2 = 0x1b873593u;
    const uint8_t *p = (const uint8_t *)data;
    size_t nblocks = len / 4;
    uint32_t h = seed;
    size_t i;

    for (i = 0; i < nblocks; i++) {
        uint32_t k = murmur_load32le(p + 4 * i);
        k *= c1;
        k = murmur_rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = murmur_rotl32(h, 13);
        h = h * 5u + 0xe6546b64u;
    }

    if ((len & 3) != 0) {
        uint32_t k = murmur_tail(p + 4 * nblocks, len & 3);
        k *= c1;
        k = murmur_rotl32(k, 15);
        k *= c2;
        h ^= k;
    }

    h ^= (uint32_t)len;
    return murmur3_fmix32(h);
}

/* v ^ (v >> 47): the shift-mix of the 64-bit variant. */
static inline uint64_t murmur_shift_mix(uint64_t v)
{
    return v ^ (v >> 47);
}

uint64_t chash_murmur2_64(const void *data, size_t len, uint64_t seed)
{
    const uint64_t mul = (UINT64_C(0xc6a4a793) << 32) + UINT64_C(0x5bd1e995);
    const uint8_t *p = (const uint8_t *)data;
    size_t whole = len & ~(size_t)7;
    uint64_t h = seed ^ ((uint64_t)len * mul);

    for (size_t i = 0; i < whole; i += 8) {
        uint64_t k = 0;
        for (unsigned b = 0; b < 8; b++)
            k |= (uint64_t)p[i + b] << (8 * b);
        k = murmur_shift_mix(k * mul) * mul;
        h ^= k;
        h *= mul;
    }
    if ((len & 7) != 0) {
        uint64_t k = 0;
        for (size_t b = 0; b < (len & 7); b++)
            k |= (uint64_t)p[whole + b] << (8 * b);
        h ^= k;
        h *= mul;
    }
    h = murmur_shift_mix(h) * mul;
    return murmur_shift_mix(h);
}
