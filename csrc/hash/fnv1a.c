/*
 * fnv1a.c - FNV-1a, 32-bit.
 *
 * FNV-1a follows the FNV description of Fowler, Noll and Vo: for each
 * byte, xor it into the hash, then multiply by the FNV prime.
 */
#include "hash.h"

#define FNV32_OFFSET_BASIS 2166136261u
#define FNV32_PRIME 16777619u

uint32_t chash_fnv1a_32(const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t h = FNV32_OFFSET_BASIS;
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= (uint32_t)p[i];
        h *= FNV32_PRIME;
    }
    return h;
}
