/*
 * sdbm.c - the sdbm string hash (the public-domain sdbm database library's
 * hash, as HAProxy's "hash-type ... sdbm" computes it).
 *
 * For each byte c: h = c + (h << 6) + (h << 16) - h, i.e. h * 65599 + c,
 * modulo 2**32, from h = 0.  Bytes are taken unsigned.
 */
#include "hash.h"

uint32_t chash_sdbm(const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t h = 0;
    for (size_t i = 0; i < len; i++)
        h = (uint32_t)p[i] + (h << 6) + (h << 16) - h;
    return h;
}
