/*
 * envoy.c - Envoy's and gRPC's ring rules spelled out (envoy.h).
 */
#include "envoy.h"

#include "alloc.h"
#include "chash.h"
#include "wide.h"
#include "hash/hash.h"

#include <math.h>
#include <string.h>

uint64_t chash_point_hash_bytes(chash_point_hash kind, const void *data, size_t len)
{
    if (kind == CHASH_POINT_MURMUR2_64)
        return chash_murmur2_64(data, len, CHASH_ENVOY_MURMUR_SEED);
    return chash_xxh64(data, len, 0);
}

int chash_envoy_counts(const uint64_t *weights, size_t n, uint64_t min_ring, uint64_t max_ring,
                       size_t *counts, size_t *total)
{
    *total = 0;
    if (min_ring == 0 || max_ring == 0 || min_ring > max_ring)
        return CHASH_EINVAL;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (weights[i] == 0 || weights[i] > UINT64_MAX - sum)
            return CHASH_EINVAL;
        sum += weights[i];
    }
    if (n == 0)
        return CHASH_OK;
    /* The references' arithmetic, step for step, in double precision. */
    double min_w = 1.0;
    for (size_t i = 0; i < n; i++) {
        double w = (double)weights[i] / (double)sum;
        min_w = w < min_w ? w : min_w;
    }
    double scale = ceil(min_w * (double)min_ring) / min_w;
    if ((double)max_ring < scale)
        scale = (double)max_ring;
    double current = 0.0, target = 0.0;
    size_t all = 0;
    for (size_t i = 0; i < n; i++) {
        target += scale * ((double)weights[i] / (double)sum);
        size_t count = 0;
        while (current < target) {
            count++;
            current += 1.0;
        }
        counts[i] = count;
        all += count;
        if (all > CHASH_WIDE_MAX_POINTS)
            return CHASH_ERANGE;
    }
    *total = all;
    return CHASH_OK;
}

/* Writes the decimal digits of v to buf (room for 20); returns how many. */
static size_t decimal(size_t v, char *buf)
{
    char tmp[20];
    size_t len = 0;
    do {
        tmp[len++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < len; i++)
        buf[i] = tmp[len - 1 - i];
    return len;
}

int chash_envoy_points(chash_point_hash kind, const char *id, size_t id_len, size_t count,
                       uint64_t *out)
{
    char stack[256];
    size_t cap = id_len + 1 + 20;
    char *key = cap <= sizeof stack ? stack : CHASH_MALLOC(cap);
    if (!key)
        return CHASH_ENOMEM;
    if (id_len)
        memcpy(key, id, id_len);
    key[id_len] = '_';
    for (size_t j = 0; j < count; j++) {
        size_t len = id_len + 1 + decimal(j, key + id_len + 1);
        out[j] = chash_point_hash_bytes(kind, key, len);
    }
    if (key != stack)
        CHASH_FREE(key);
    return CHASH_OK;
}
