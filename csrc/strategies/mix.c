/*
 * mix.c - MurmurHash3's 64-bit finaliser (mix.h), from its published
 * constants.  A leaf: it calls nothing.
 */
#include "mix.h"

uint64_t chash_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xFF51AFD7ED558CCD);
    x ^= x >> 33;
    x *= UINT64_C(0xC4CEB9FE1A85EC53);
    x ^= x >> 33;
    return x;
}
