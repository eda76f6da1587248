/*
 * md5.c - MD5 message digest, as specified by RFC 1321.
 *
 * One-shot only: the whole message is in memory, so there is no streaming
 * context.  Full 64-byte blocks are compressed straight from the caller's
 * buffer; only the last one or two (padded) blocks are built on the stack.
 * A message of at most 55 bytes fits, with its padding and length, in a
 * single block, which is the common case for ring keys.
 */
#include "hash.h"

#include <string.h>

/* Words are little-endian (RFC 1321 section 2); decode byte by byte so the
 * result does not depend on the host's byte order or alignment. */
static inline uint32_t md5_load32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline void md5_store32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* The initial buffer, words A B C D of section 3.3. */
#define MD5_A0 0x67452301u
#define MD5_B0 0xefcdab89u
#define MD5_C0 0x98badcfeu
#define MD5_D0 0x10325476u

/* The four auxiliary functions of section 3.4.  F is written in the
 * equivalent select form, one operation fewer than the RFC's and/or/not. */
#define MD5_F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
/* G as a sum: its two terms share no bit, and (y & ~z) does not wait for
 * x, the value the previous step just produced, so one operation leaves
 * the critical path of every round-2 step. */
#define MD5_G(x, y, z) (((x) & (z)) + ((y) & ~(z)))
#define MD5_H(x, y, z) ((x) ^ (y) ^ (z))
#define MD5_I(x, y, z) ((y) ^ ((x) | ~(z)))

/* a = b + ((a + f(b,c,d) + X[k] + T[i]) <<< s); every shift is 4..23. */
#define MD5_STEP1(f, a, b, c, d, k, t, s)                      \
    do {                                                       \
        (a) += f((b), (c), (d)) + x[k] + (uint32_t)(t);        \
        (a) = ((a) << (s)) | ((a) >> (32 - (s)));              \
        (a) += (b);                                            \
    } while (0);

/* The same step on MD5_LANES independent lanes (an enum of the function
 * MD5_MANY defines); the lane loop has no dependencies across lanes, so the
 * compiler runs them side by side. */
#define MD5_STEP_LANES(f, a, b, c, d, k, t, s)                             \
    for (int l = 0; l < MD5_LANES; l++) {                                  \
        a[l] += f(b[l], c[l], d[l]) + x[k][l] + (uint32_t)(t);             \
        a[l] = (a[l] << (s)) | (a[l] >> (32 - (s)));                       \
        a[l] += b[l];                                                      \
    }

/* The 64 steps of section 3.4: STEP(f, a, b, c, d, k, T[i], s), with
 * T[i] = floor(2^32 * |sin(i)|).  Written once, expanded for one lane
 * (md5_block) and for many (MD5_MANY). */
#define MD5_STEPS(STEP) \
    STEP(MD5_F, a, b, c, d, 0, 0xd76aa478u, 7) \
    STEP(MD5_F, d, a, b, c, 1, 0xe8c7b756u, 12) \
    STEP(MD5_F, c, d, a, b, 2, 0x242070dbu, 17) \
    STEP(MD5_F, b, c, d, a, 3, 0xc1bdceeeu, 22) \
    STEP(MD5_F, a, b, c, d, 4, 0xf57c0fafu, 7) \
    STEP(MD5_F, d, a, b, c, 5, 0x4787c62au, 12) \
    STEP(MD5_F, c, d, a, b, 6, 0xa8304613u, 17) \
    STEP(MD5_F, b, c, d, a, 7, 0xfd469501u, 22) \
    STEP(MD5_F, a, b, c, d, 8, 0x698098d8u, 7) \
    STEP(MD5_F, d, a, b, c, 9, 0x8b44f7afu, 12) \
    STEP(MD5_F, c, d, a, b, 10, 0xffff5bb1u, 17) \
    STEP(MD5_F, b, c, d, a, 11, 0x895cd7beu, 22) \
    STEP(MD5_F, a, b, c, d, 12, 0x6b901122u, 7) \
    STEP(MD5_F, d, a, b, c, 13, 0xfd987193u, 12) \
    STEP(MD5_F, c, d, a, b, 14, 0xa679438eu, 17) \
    STEP(MD5_F, b, c, d, a, 15, 0x49b40821u, 22) \
    STEP(MD5_G, a, b, c, d, 1, 0xf61e2562u, 5) \
    STEP(MD5_G, d, a, b, c, 6, 0xc040b340u, 9) \
    STEP(MD5_G, c, d, a, b, 11, 0x265e5a51u, 14) \
    STEP(MD5_G, b, c, d, a, 0, 0xe9b6c7aau, 20) \
    STEP(MD5_G, a, b, c, d, 5, 0xd62f105du, 5) \
    STEP(MD5_G, d, a, b, c, 10, 0x02441453u, 9) \
    STEP(MD5_G, c, d, a, b, 15, 0xd8a1e681u, 14) \
    STEP(MD5_G, b, c, d, a, 4, 0xe7d3fbc8u, 20) \
    STEP(MD5_G, a, b, c, d, 9, 0x21e1cde6u, 5) \
    STEP(MD5_G, d, a, b, c, 14, 0xc33707d6u, 9) \
    STEP(MD5_G, c, d, a, b, 3, 0xf4d50d87u, 14) \
    STEP(MD5_G, b, c, d, a, 8, 0x455a14edu, 20) \
    STEP(MD5_G, a, b, c, d, 13, 0xa9e3e905u, 5) \
    STEP(MD5_G, d, a, b, c, 2, 0xfcefa3f8u, 9) \
    STEP(MD5_G, c, d, a, b, 7, 0x676f02d9u, 14) \
    STEP(MD5_G, b, c, d, a, 12, 0x8d2a4c8au, 20) \
    STEP(MD5_H, a, b, c, d, 5, 0xfffa3942u, 4) \
    STEP(MD5_H, d, a, b, c, 8, 0x8771f681u, 11) \
    STEP(MD5_H, c, d, a, b, 11, 0x6d9d6122u, 16) \
    STEP(MD5_H, b, c, d, a, 14, 0xfde5380cu, 23) \
    STEP(MD5_H, a, b, c, d, 1, 0xa4beea44u, 4) \
    STEP(MD5_H, d, a, b, c, 4, 0x4bdecfa9u, 11) \
    STEP(MD5_H, c, d, a, b, 7, 0xf6bb4b60u, 16) \
    STEP(MD5_H, b, c, d, a, 10, 0xbebfbc70u, 23) \
    STEP(MD5_H, a, b, c, d, 13, 0x289b7ec6u, 4) \
    STEP(MD5_H, d, a, b, c, 0, 0xeaa127fau, 11) \
    STEP(MD5_H, c, d, a, b, 3, 0xd4ef3085u, 16) \
    STEP(MD5_H, b, c, d, a, 6, 0x04881d05u, 23) \
    STEP(MD5_H, a, b, c, d, 9, 0xd9d4d039u, 4) \
    STEP(MD5_H, d, a, b, c, 12, 0xe6db99e5u, 11) \
    STEP(MD5_H, c, d, a, b, 15, 0x1fa27cf8u, 16) \
    STEP(MD5_H, b, c, d, a, 2, 0xc4ac5665u, 23) \
    STEP(MD5_I, a, b, c, d, 0, 0xf4292244u, 6) \
    STEP(MD5_I, d, a, b, c, 7, 0x432aff97u, 10) \
    STEP(MD5_I, c, d, a, b, 14, 0xab9423a7u, 15) \
    STEP(MD5_I, b, c, d, a, 5, 0xfc93a039u, 21) \
    STEP(MD5_I, a, b, c, d, 12, 0x655b59c3u, 6) \
    STEP(MD5_I, d, a, b, c, 3, 0x8f0ccc92u, 10) \
    STEP(MD5_I, c, d, a, b, 10, 0xffeff47du, 15) \
    STEP(MD5_I, b, c, d, a, 1, 0x85845dd1u, 21) \
    STEP(MD5_I, a, b, c, d, 8, 0x6fa87e4fu, 6) \
    STEP(MD5_I, d, a, b, c, 15, 0xfe2ce6e0u, 10) \
    STEP(MD5_I, c, d, a, b, 6, 0xa3014314u, 15) \
    STEP(MD5_I, b, c, d, a, 13, 0x4e0811a1u, 21) \
    STEP(MD5_I, a, b, c, d, 4, 0xf7537e82u, 6) \
    STEP(MD5_I, d, a, b, c, 11, 0xbd3af235u, 10) \
    STEP(MD5_I, c, d, a, b, 2, 0x2ad7d2bbu, 15) \
    STEP(MD5_I, b, c, d, a, 9, 0xeb86d391u, 21)

/* Applies the compression function to one 64-byte block. */
static inline void md5_block(uint32_t st[4], const uint8_t *blk)
{
    uint32_t x[16];
    uint32_t a = st[0], b = st[1], c = st[2], d = st[3];
    int i;

    for (i = 0; i < 16; i++)
        x[i] = md5_load32le(blk + 4 * i);

    MD5_STEPS(MD5_STEP1)

    st[0] += a;
    st[1] += b;
    st[2] += c;
    st[3] += d;
}

/* The digest: the four state words, little-endian.  Where the host is
 * little-endian that is one 16-byte store, from which a reader's loads of
 * the digest are served; byte stores (which a compiler may merge into two
 * 8-byte ones and a 16-byte reload) left a caller waiting about 10 ns. */
static inline void md5_put_digest(uint8_t out[CHASH_MD5_DIGEST_SIZE], uint32_t a, uint32_t b,
                                  uint32_t c, uint32_t d)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint32_t words[4] = {a, b, c, d};
    memcpy(out, words, sizeof words);
#else
    md5_store32le(out, a);
    md5_store32le(out + 4, b);
    md5_store32le(out + 8, c);
    md5_store32le(out + 12, d);
#endif
}

/* The MD5 of a message of at most 55 bytes: one block, compressed in this
 * frame with the state in locals.  The key and its 0x80 go into the zeroed
 * words (a copy where the host is little-endian, the words' own order), the
 * bit length straight into word 14 (word 15 stays 0 below 2^29 bytes). */
static void md5_single(const uint8_t *p, size_t len, uint8_t out[CHASH_MD5_DIGEST_SIZE])
{
    uint32_t x[16] = {0};
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (len)
        memcpy(x, p, len);
    ((uint8_t *)x)[len] = 0x80;
#else
    uint8_t blk[56] = {0};
    if (len)
        memcpy(blk, p, len);
    blk[len] = 0x80;
    for (int i = 0; i < 14; i++)
        x[i] = md5_load32le(blk + 4 * i);
#endif
    x[14] = (uint32_t)(len << 3);
    uint32_t a = MD5_A0, b = MD5_B0, c = MD5_C0, d = MD5_D0;
    MD5_STEPS(MD5_STEP1)
    md5_put_digest(out, a + MD5_A0, b + MD5_B0, c + MD5_C0, d + MD5_D0);
}

/* Pads a message of at most 55 bytes into one block. */
static void md5_pad_single(uint8_t blk[64], const uint8_t *p, size_t len)
{
    /* blk arrives zeroed. */
    if (len)
        memcpy(blk, p, len);
    blk[len] = 0x80;
    uint64_t bits = (uint64_t)len << 3;
    md5_store32le(blk + 56, (uint32_t)bits);
    md5_store32le(blk + 60, (uint32_t)(bits >> 32));
}

void chash_md5(const void *data, size_t len, uint8_t out[CHASH_MD5_DIGEST_SIZE])
{
    uint32_t st[4] = {MD5_A0, MD5_B0, MD5_C0, MD5_D0};
    const uint8_t *p = (const uint8_t *)data;
    uint8_t tail[128];
    size_t rest = len;
    size_t ntail;
    uint64_t bits;

    if (len <= 55) {
        /* One block: the common case for keys. */
        md5_single(p, len, out);
        return;
    }

    while (rest >= 64) {
        md5_block(st, p);
        p += 64;
        rest -= 64;
    }

    /* Padding (section 3.1): a 1 bit, zeros up to 56 mod 64, then the bit
     * length modulo 2^64 (section 3.2), little-endian.  With rest <= 55 it
     * all fits in one block, otherwise it spills into a second one. */
    ntail = rest <= 55 ? 64 : 128;
    if (rest > 0)
        memcpy(tail, p, rest);
    tail[rest] = 0x80;
    memset(tail + rest + 1, 0, ntail - 8 - rest - 1);
    bits = (uint64_t)len << 3;
    md5_store32le(tail + ntail - 8, (uint32_t)bits);
    md5_store32le(tail + ntail - 4, (uint32_t)(bits >> 32));

    md5_block(st, tail);
    if (ntail == 128)
        md5_block(st, tail + 64);
    md5_put_digest(out, st[0], st[1], st[2], st[3]);
}

/* Defines name(data, len, out): the MD5 of n messages at once, one block
 * each when every message is <= 55 bytes (the common case for keys and
 * point names), else each on its own. */
#define MD5_MANY(name, n)                                                        \
    void name(const void *const data[n], const size_t len[n],                   \
              uint8_t out[n][CHASH_MD5_DIGEST_SIZE])                            \
    {                                                                           \
        enum { MD5_LANES = n };                                                 \
        for (int l = 0; l < MD5_LANES; l++) {                                   \
            if (len[l] > 55) {                                                  \
                for (int m = 0; m < MD5_LANES; m++)                             \
                    chash_md5(data[m], len[m], out[m]);                         \
                return;                                                         \
            }                                                                   \
        }                                                                       \
        uint8_t blk[MD5_LANES][64] = {{0}};                                     \
        uint32_t x[16][MD5_LANES];                                              \
        for (int l = 0; l < MD5_LANES; l++) {                                   \
            md5_pad_single(blk[l], (const uint8_t *)data[l], len[l]);           \
            for (int i = 0; i < 16; i++)                                        \
                x[i][l] = md5_load32le(blk[l] + 4 * i);                         \
        }                                                                       \
        uint32_t a[MD5_LANES], b[MD5_LANES], c[MD5_LANES], d[MD5_LANES];        \
        for (int l = 0; l < MD5_LANES; l++) {                                   \
            a[l] = MD5_A0;                                                      \
            b[l] = MD5_B0;                                                      \
            c[l] = MD5_C0;                                                      \
            d[l] = MD5_D0;                                                      \
        }                                                                       \
        MD5_STEPS(MD5_STEP_LANES)                                               \
        for (int l = 0; l < MD5_LANES; l++)                                     \
            md5_put_digest(out[l], a[l] + MD5_A0, b[l] + MD5_B0, c[l] + MD5_C0,  \
                           d[l] + MD5_D0);                                      \
    }

/* Four lanes: one vector a step.  Sixteen: four vectors a step, whose
 * dependency chains the processor runs side by side. */
MD5_MANY(chash_md5_x4, 4)
MD5_MANY(chash_md5_x16, 16)
