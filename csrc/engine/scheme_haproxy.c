/*
 * scheme_haproxy.c - the points of HAProxy's "hash-type consistent" ring
 * (lb_chash.c of HAProxy 2.6, chash_init_server_tree): a server of weight
 * w owns w * 16 points (BE_WEIGHT_SCALE), point j being
 * full_hash(puid * 4096 + j) with 4096 = SRV_EWGHT_RANGE, the largest
 * point count a server can have (weight 256).  The arithmetic is unsigned
 * 32-bit, as HAProxy's.
 *
 * full_hash is a bijection, so the points of servers whose puids are below
 * 2**20 never collide; larger puids wrap and may.
 */
#include "scheme.h"

#include "chash.h"
#include "hash/hash.h"

int chash_haproxy_points(uint32_t puid, size_t first, size_t count, uint32_t *out)
{
    const size_t most = (size_t)CHASH_HAPROXY_MAX_WEIGHT * CHASH_HAPROXY_WEIGHT_SCALE;
    if (puid == 0 || first > most || count > most - first)
        return CHASH_EINVAL;
    uint32_t base = puid * (uint32_t)CHASH_HAPROXY_PUID_STRIDE;
    for (size_t j = 0; j < count; j++)
        out[j] = chash_full_hash(base + (uint32_t)(first + j));
    return CHASH_OK;
}
