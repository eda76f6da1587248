/*
 * djb2.c - Daniel J. Bernstein's "times 33" string hash, djb2.
 *
 * From h = 5381, for each byte c: h = h * 33 + c (the additive form, not
 * the xor variant), modulo 2**32; bytes are taken unsigned.  This is
 * HAProxy's "hash-type ... djb2".
 */
#include "hash.h"

uint32_t chash_djb2(const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t h = 5381;
    for (size_t i = 0; i < len; i++)
        h = (h << 5) + h + (uint32_t)p[i];
    return h;
}
