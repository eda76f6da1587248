/*
 * one_at_a_time.c - Bob Jenkins's one-at-a-time hash.
 *
 * For each byte add it, add the sum shifted left 10, xor the sum shifted
 * right 6; finally add << 3, xor >> 11, add << 15.  Bytes enter as signed
 * chars, as in libmemcached on x86.
 */
#include "hash.h"

uint32_t chash_one_at_a_time(const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t h = 0;
    for (size_t i = 0; i < len; i++) {
        /* A char of libmemcached's key, signed on x86, widened to 32 bits. */
        int32_t c = p[i] < 0x80 ? (int32_t)p[i] : (int32_t)p[i] - 256;
        h += (uint32_t)c;
        h += h << 10;
        h ^= h >> 6;
    }
    h += h << 3;
    h ^= h >> 11;
    h += h << 15;
    return h;
}
