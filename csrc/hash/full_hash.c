/*
 * full_hash.c - Bob Jenkins' 32-bit integer "full avalanche" hash, times
 * 3221225473, as HAProxy's full_hash() computes it: the avalanche modifier
 * of "hash-type ... avalanche" and the hash of its consistent-hash points.
 *
 * Six invertible add/xor-shift steps (burtleburtle.net/bob/hash/integer.html)
 * and a multiplication by an odd constant, all modulo 2**32: the function
 * is a bijection of the 32-bit integers, so distinct inputs never collide.
 */
#include "hash.h"

uint32_t chash_full_hash(uint32_t a)
{
    a = (a + 0x7ed55d16u) + (a << 12);
    a = (a ^ 0xc761c23cu) ^ (a >> 19);
    a = (a + 0x165667b1u) + (a << 5);
    a = (a + 0xd3a2646cu) ^ (a << 9);
    a = (a + 0xfd7046c5u) + (a << 3);
    a = (a ^ 0xb55a4f09u) ^ (a >> 16);
    return a * 3221225473u;
}
