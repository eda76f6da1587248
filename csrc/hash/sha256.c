/*
 * sha256.c - SHA-256 message digest, as specified by FIPS 180-4
 * (sections 4.1.2, 4.2.2, 5.1.1, 5.3.3 and 6.2).
 *
 * One-shot only, shaped as sha1.c: full 64-byte blocks are compressed
 * straight from the caller's buffer, the padded last one or two blocks are
 * built on the stack, and the message schedule is a rolling window of 16
 * words instead of the standard's 64 (same values, less memory).
 */
#include "hash.h"

#include <string.h>

/* SHA-256 words are big-endian (FIPS 180-4 section 3.1). */
static inline uint32_t sha256_load32be(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline void sha256_store32be(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* ROTR^n for 0 < n < 32. */
static inline uint32_t sha256_rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32u - n));
}

/* The functions of section 4.1.2 (Ch and Maj in the equivalent forms that
 * need fewer operations). */
#define SHA256_CH(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define SHA256_MAJ(x, y, z) (((x) & (y)) | ((z) & ((x) | (y))))
#define SHA256_BSIG0(x) (sha256_rotr((x), 2) ^ sha256_rotr((x), 13) ^ sha256_rotr((x), 22))
#define SHA256_BSIG1(x) (sha256_rotr((x), 6) ^ sha256_rotr((x), 11) ^ sha256_rotr((x), 25))
#define SHA256_SSIG0(x) (sha256_rotr((x), 7) ^ sha256_rotr((x), 18) ^ ((x) >> 3))
#define SHA256_SSIG1(x) (sha256_rotr((x), 17) ^ sha256_rotr((x), 19) ^ ((x) >> 10))

/* The constants K of section 4.2.2: the first 32 bits of the fractional
 * parts of the cube roots of the first 64 primes. */
static const uint32_t sha256_k[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u,
    0x923f82a4u, 0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u,
    0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u,
    0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u,
    0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u,
    0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au,
    0x5b9cca4fu, 0x682e6ff3u, 0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u,
    0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

/* Section 6.2.2, step 1: W[t] for t >= 16, computed in the window. */
static inline uint32_t sha256_schedule(uint32_t w[16], unsigned t)
{
    uint32_t v = SHA256_SSIG1(w[(t - 2) & 15]) + w[(t - 7) & 15] +
                 SHA256_SSIG0(w[(t - 15) & 15]) + w[t & 15];
    w[t & 15] = v;
    return v;
}

/* Section 6.2.2, steps 2 to 4, for one 64-byte block. */
static void sha256_block(uint32_t h[8], const uint8_t *blk)
{
    uint32_t w[16];
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    uint32_t e = h[4], f = h[5], g = h[6], hh = h[7];
    unsigned t;

    for (t = 0; t < 64; t++) {
        uint32_t wt;
        if (t < 16) {
            wt = sha256_load32be(blk + 4 * t);
            w[t] = wt;
        } else {
            wt = sha256_schedule(w, t);
        }
        uint32_t t1 = hh + SHA256_BSIG1(e) + SHA256_CH(e, f, g) + sha256_k[t] + wt;
        uint32_t t2 = SHA256_BSIG0(a) + SHA256_MAJ(a, b, c);
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }

    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void chash_sha256(const void *data, size_t len, uint8_t out[CHASH_SHA256_DIGEST_SIZE])
{
    /* Initial hash value, section 5.3.3: the first 32 bits of the
     * fractional parts of the square roots of the first 8 primes. */
    uint32_t h[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                     0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    const uint8_t *p = (const uint8_t *)data;
    uint8_t tail[128];
    size_t rest = len;
    size_t ntail;
    uint64_t bits;
    int i;

    while (rest >= 64) {
        sha256_block(h, p);
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
    sha256_store32be(tail + ntail - 8, (uint32_t)(bits >> 32));
    sha256_store32be(tail + ntail - 4, (uint32_t)bits);

    sha256_block(h, tail);
    if (ntail == 128)
        sha256_block(h, tail + 64);

    for (i = 0; i < 8; i++)
        sha256_store32be(out + 4 * i, h[i]);
}
