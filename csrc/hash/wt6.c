/*
 * wt6.c - Willy Tarreau's wt6 string hash (HAProxy's "hash-type ... wt6").
 *
 * Two 32-bit lanes h0 = 0xa53c965a, h1 = 0x5ca6953a and two rotation
 * counts s0 = 6, s1 = 18.  For each byte t (unsigned):
 *     h0 = ~(h0 ^ t);   h1 = ~(h1 + t);
 *     (h0, h1) = (rotl(h1, s0), rotl(h0, s1));
 *     u = ((h0 >> 16) ^ h1) & 0xffff;   s0 = u & 31;   s1 = u >> 11;
 * and the hash is h0 ^ h1.  A count can be 0, where rotl is the identity.
 */
#include "hash.h"

/* Left rotation by k in [0, 31]; k == 0 never shifts by 32. */
static uint32_t rotl32(uint32_t v, unsigned k)
{
    return k ? (v << k) | (v >> (32u - k)) : v;
}

uint32_t chash_wt6(const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t h0 = 0xa53c965au, h1 = 0x5ca6953au;
    unsigned s0 = 6, s1 = 18;
    for (size_t i = 0; i < len; i++) {
        uint32_t t = p[i];
        h0 = ~(h0 ^ t);
        h1 = ~(h1 + t);
        uint32_t r0 = rotl32(h1, s0);
        h1 = rotl32(h0, s1);
        h0 = r0;
        uint32_t u = ((h0 >> 16) ^ h1) & 0xffffu;
        s0 = (unsigned)(u & 31u);
        s1 = (unsigned)(u >> 11);
    }
    return h0 ^ h1;
}
