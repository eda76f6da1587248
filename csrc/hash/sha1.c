/*
 * sha1.c - SHA-1 message digest, as specified by FIPS 180-4
 * (sections 4.1.1, 4.2.1, 5.1.1, 5.3.1 and 6.1).
 *
 * One-shot only: full 64-byte blocks are compressed straight from the
 * caller's buffer; the padded last one or two blocks are built on the
 * stack.  The message schedule is kept as a rolling window of 16 words
 * instead of the 80-word array of the standard (same values, less memory).
 */
#include "hash.h"

#include <string.h>

/* SHA-1 words are big-endian (FIPS 180-4 section 3.1). */
static inline uint32_t sha1_load32be(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline void sha1_store32be(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* ROTL^n for 0 < n < 32. */
static inline uint32_t sha1_rotl(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32u - n));
}

/* Section 6.1.2, step 2: W[t] for t >= 16, computed in the window. */
static inline uint32_t sha1_schedule(uint32_t w[16], unsigned t)
{
    uint32_t v = w[(t - 3) & 15] ^ w[(t - 8) & 15] ^ w[(t - 14) & 15] ^
                 w[t & 15];
    v = sha1_rotl(v, 1);
    w[t & 15] = v;
    return v;
}

/* Section 6.1.2, steps 3 and 4, for one round t with f(b,c,d) + K_t
 * already computed as fk. */
#define SHA1_ROUND(fk, wt)                                          \
    do {                                                            \
        uint32_t tmp_ = sha1_rotl(a, 5) + (fk) + e + (wt);          \
        e = d;                                                      \
        d = c;                                                      \
        c = sha1_rotl(b, 30);                                       \
        b = a;                                                      \
        a = tmp_;                                                   \
    } while (0)

/* Functions of section 4.1.1: Ch, Parity and Maj (Ch and Maj in the
 * equivalent forms that need fewer operations). */
#define SHA1_CH(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define SHA1_PARITY(x, y, z) ((x) ^ (y) ^ (z))
#define SHA1_MAJ(x, y, z) (((x) & (y)) | ((z) & ((x) | (y))))

static inline void sha1_block(uint32_t h[5], const uint8_t *blk)
{
    uint32_t w[16];
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    unsigned t;

    for (t = 0; t < 16; t++) {
        w[t] = sha1_load32be(blk + 4 * t);
        SHA1_ROUND(SHA1_CH(b, c, d) + 0x5a827999u, w[t]);
    }
    for (; t < 20; t++)
        SHA1_ROUND(SHA1_CH(b, c, d) + 0x5a827999u, sha1_schedule(w, t));
    for (; t < 40; t++)
        SHA1_ROUND(SHA1_PARITY(b, c, d) + 0x6ed9eba1u, sha1_schedule(w, t));
    for (; t < 60; t++)
        SHA1_ROUND(SHA1_MAJ(b, c, d) + 0x8f1bbcdcu, sha1_schedule(w, t));
    for (; t < 80; t++)
        SHA1_ROUND(SHA1_PARITY(b, c, d) + 0xca62c1d6u, sha1_schedule(w, t));

    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void chash_sha1(const void *data, size_t len, uint8_t out[CHASH_SHA1_DIGEST_SIZE])
{
    /* Initial hash value, section 5.3.1. */
    uint32_t h[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u,
                     0xc3d2e1f0u};
    const uint8_t *p = (const uint8_t *)data;
    uint8_t tail[128];
    size_t rest = len;
    size_t ntail;
    uint64_t bits;
    int i;

    while (rest >= 64) {
        sha1_block(h, p);
        p += 64;
        rest -= 64;
    }

    /* Padding, section 5.1.1: a 1 bit, zeros up to 56 mod 64, then the
     * 64-bit big-endian bit length. */
    ntail = rest <= 55 ? 64 : 128;
    if (rest > 0)
        memcpy(tail, p, rest);
    tail[rest] = 0x80;
    memset(tail + rest + 1, 0, ntail - 8 - rest - 1);
    bits = (uint64_t)len << 3;
    sha1_store32be(tail + ntail - 8, (uint32_t)(bits >> 32));
    sha1_store32be(tail + ntail - 4, (uint32_t)bits);

    sha1_block(h, tail);
    if (ntail == 128)
        sha1_block(h, tail + 64);

    for (i = 0; i < 5; i++)
        sha1_store32be(out + 4 * i, h[i]);
}
