/*
 * scheme.c - hash functions and layouts turned into ring points.
 * See scheme.h for the rules; this file only spells them out.
 */
#include "scheme.h"

#include "chash.h"
#include "alloc.h"
#include "hash/hash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const hash_names[CHASH_HASH_COUNT] = {
    "md5", "sha1", "murmur2", "murmur3", "xxh32", "xxh64", "xxh3", "fnv1a", "crc32",
    "one_at_a_time", "sdbm", "djb2", "wt6", "sdbm_avalanche", "djb2_avalanche",
    "wt6_avalanche", "crc32_avalanche", "sha256", "murmur3_128",
};

static const char *const layout_names[CHASH_LAYOUT_COUNT] = {
    "python", "node", "ketama", "nginx", "libmemcached", "haproxy", "varnish", "nghttpx",
};

/* Virtual-key infixes: "{node}{infix}{i}" (nginx has no virtual keys). */
static const char *const layout_infix[CHASH_LAYOUT_COUNT] = {"_virtual_", "#vnode", "-", "", "-", "",
                                                            "", ""};

static const size_t layout_points[CHASH_LAYOUT_COUNT] = {100, 150, 160, 160, 100,
                                                               CHASH_HAPROXY_WEIGHT_SCALE, 67,
                                                               CHASH_NGHTTPX_POINTS};

/* libketama takes four points out of each MD5 digest. */
#define KETAMA_POINTS_PER_DIGEST 4

int chash_hash_by_name(const char *name, chash_hash_id *out)
{
    for (int i = 0; i < CHASH_HASH_COUNT; i++) {
        if (strcmp(name, hash_names[i]) == 0) {
            *out = (chash_hash_id)i;
            return CHASH_OK;
        }
    }
    return CHASH_EINVAL;
}

const char *chash_hash_name(chash_hash_id hash)
{
    return (unsigned)hash < CHASH_HASH_COUNT ? hash_names[hash] : NULL;
}

int chash_layout_by_name(const char *name, chash_layout_id *out)
{
    for (int i = 0; i < CHASH_LAYOUT_COUNT; i++) {
        if (strcmp(name, layout_names[i]) == 0) {
            *out = (chash_layout_id)i;
            return CHASH_OK;
        }
    }
    return CHASH_EINVAL;
}

const char *chash_layout_name(chash_layout_id layout)
{
    return (unsigned)layout < CHASH_LAYOUT_COUNT ? layout_names[layout] : NULL;
}

size_t chash_layout_default_points(chash_layout_id layout)
{
    return (unsigned)layout < CHASH_LAYOUT_COUNT ? layout_points[layout] : 0;
}

chash_hash_id chash_layout_default_hash(chash_layout_id layout)
{
    switch (layout) {
    case CHASH_LAYOUT_NGINX: return CHASH_HASH_CRC32;
    case CHASH_LAYOUT_LIBMEMCACHED: return CHASH_HASH_ONE_AT_A_TIME;
    case CHASH_LAYOUT_HAPROXY: return CHASH_HASH_SDBM_AVALANCHE;
    case CHASH_LAYOUT_VARNISH:
    case CHASH_LAYOUT_NGHTTPX: return CHASH_HASH_SHA256;
    default: return CHASH_HASH_MD5;
    }
}

int chash_layout_ties(chash_layout_id layout)
{
    return layout == CHASH_LAYOUT_KETAMA || layout == CHASH_LAYOUT_NGINX
        || layout == CHASH_LAYOUT_LIBMEMCACHED || layout == CHASH_LAYOUT_HAPROXY
        || layout == CHASH_LAYOUT_VARNISH || layout == CHASH_LAYOUT_NGHTTPX;
}

int chash_layout_rule(chash_layout_id layout)
{
    if (layout == CHASH_LAYOUT_HAPROXY)
        return CHASH_RULE_NEAREST;
    return layout == CHASH_LAYOUT_VARNISH ? CHASH_RULE_VARNISH : CHASH_RULE_SUCCESSOR;
}

/* The key hashes HAProxy's hash-type offers. */
static int is_haproxy_hash(chash_hash_id hash)
{
    return hash == CHASH_HASH_CRC32 || (hash >= CHASH_HASH_SDBM && hash <= CHASH_HASH_CRC32_AVALANCHE);
}

int chash_scheme_init(chash_scheme *scheme, chash_layout_id layout, chash_hash_id hash)
{
    if ((unsigned)layout >= CHASH_LAYOUT_COUNT || (unsigned)hash >= CHASH_HASH_COUNT)
        return CHASH_EINVAL;
    if (layout == CHASH_LAYOUT_KETAMA && hash != CHASH_HASH_MD5)
        return CHASH_EINVAL;
    if (layout == CHASH_LAYOUT_NGINX && hash != CHASH_HASH_CRC32)
        return CHASH_EINVAL;
    if (layout == CHASH_LAYOUT_LIBMEMCACHED && hash != CHASH_HASH_ONE_AT_A_TIME
        && hash != CHASH_HASH_MD5)
        return CHASH_EINVAL;
    if (layout == CHASH_LAYOUT_HAPROXY && !is_haproxy_hash(hash))
        return CHASH_EINVAL;
    if ((layout == CHASH_LAYOUT_VARNISH || layout == CHASH_LAYOUT_NGHTTPX)
        && hash != CHASH_HASH_SHA256)
        return CHASH_EINVAL;
    scheme->layout = layout;
    scheme->hash = hash;
    return CHASH_OK;
}

static void store_be32(uint8_t *out, uint32_t v)
{
    out[0] = (uint8_t)(v >> 24);
    out[1] = (uint8_t)(v >> 16);
    out[2] = (uint8_t)(v >> 8);
    out[3] = (uint8_t)v;
}

static void store_be64(uint8_t *out, uint64_t v)
{
    store_be32(out, (uint32_t)(v >> 32));
    store_be32(out + 4, (uint32_t)v);
}

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | (uint32_t)p[0];
}

size_t chash_digest(chash_hash_id hash, const void *data, size_t len, uint64_t seed,
                    uint8_t out[CHASH_MAX_DIGEST])
{
    switch (hash) {
    case CHASH_HASH_MD5: chash_md5(data, len, out); return CHASH_MD5_DIGEST_SIZE;
    case CHASH_HASH_SHA1: chash_sha1(data, len, out); return CHASH_SHA1_DIGEST_SIZE;
    case CHASH_HASH_MURMUR2: store_be32(out, chash_murmur2(data, len, (uint32_t)seed)); return 4;
    case CHASH_HASH_MURMUR3: store_be32(out, chash_murmur3_32(data, len, (uint32_t)seed)); return 4;
    case CHASH_HASH_XXH32: store_be32(out, chash_xxh32(data, len, (uint32_t)seed)); return 4;
    case CHASH_HASH_XXH64: store_be64(out, chash_xxh64(data, len, seed)); return 8;
    case CHASH_HASH_XXH3: store_be64(out, chash_xxh3_64(data, len, seed)); return 8;
    case CHASH_HASH_FNV1A: store_be32(out, chash_fnv1a_32(data, len)); return 4;
    case CHASH_HASH_CRC32: store_be32(out, chash_crc32(data, len)); return 4;
    case CHASH_HASH_ONE_AT_A_TIME: store_be32(out, chash_one_at_a_time(data, len)); return 4;
    case CHASH_HASH_SDBM: store_be32(out, chash_sdbm(data, len)); return 4;
    case CHASH_HASH_DJB2: store_be32(out, chash_djb2(data, len)); return 4;
    case CHASH_HASH_WT6: store_be32(out, chash_wt6(data, len)); return 4;
    case CHASH_HASH_SDBM_AVALANCHE: store_be32(out, chash_full_hash(chash_sdbm(data, len))); return 4;
    case CHASH_HASH_DJB2_AVALANCHE: store_be32(out, chash_full_hash(chash_djb2(data, len))); return 4;
    case CHASH_HASH_WT6_AVALANCHE: store_be32(out, chash_full_hash(chash_wt6(data, len))); return 4;
    case CHASH_HASH_CRC32_AVALANCHE: store_be32(out, chash_full_hash(chash_crc32(data, len))); return 4;
    case CHASH_HASH_SHA256: chash_sha256(data, len, out); return CHASH_SHA256_DIGEST_SIZE;
    case CHASH_HASH_MURMUR3_128:
        chash_murmur3_128(data, len, (uint32_t)seed, out);
        return CHASH_MURMUR3_128_SIZE;
    default: break;
    }
    return 0;
}

int chash_hash_is_bytes(chash_hash_id hash)
{
    if ((unsigned)hash >= CHASH_HASH_COUNT)
        return -1;
    return hash == CHASH_HASH_MD5 || hash == CHASH_HASH_SHA1 || hash == CHASH_HASH_SHA256
        || hash == CHASH_HASH_MURMUR3_128;
}

uint64_t chash_hash64(chash_hash_id hash, const void *data, size_t len)
{
    uint8_t digest[CHASH_MAX_DIGEST];
    size_t size = chash_digest(hash, data, len, 0, digest);
    uint64_t v = 0;
    if (chash_hash_is_bytes(hash) == 1) {
        for (size_t i = 8; i-- > 0;)
            v = v << 8 | digest[i]; /* every byte digest has >= 8 bytes */
        return v;
    }
    for (size_t i = 0; i < size; i++)
        v = v << 8 | digest[i];
    return v;
}

/* Point `group` of a digest under the scheme's cut. */
static uint32_t cut(const chash_scheme *scheme, const uint8_t *digest, size_t size, size_t group)
{
    switch (scheme->layout) {
    case CHASH_LAYOUT_NODE:
    case CHASH_LAYOUT_NGHTTPX: return load_be32(digest);
    case CHASH_LAYOUT_VARNISH: return load_le32(digest + size - 4); /* VRT_HashStrands32 */
    case CHASH_LAYOUT_KETAMA: return load_le32(digest + 4 * group);
    case CHASH_LAYOUT_LIBMEMCACHED:
        /* libmemcached reads an MD5 digest's first 4 bytes little-endian. */
        return scheme->hash == CHASH_HASH_MD5 ? load_le32(digest) : load_be32(digest);
    case CHASH_LAYOUT_NGINX:
    case CHASH_LAYOUT_PYTHON:
    default: return load_be32(digest + size - 4);
    }
}

uint32_t chash_scheme_key_hash(const chash_scheme *scheme, const void *key, size_t len)
{
    uint8_t digest[CHASH_MAX_DIGEST];
    size_t size = chash_digest(scheme->hash, key, len, 0, digest);
    return cut(scheme, digest, size, 0);
}

void chash_scheme_key_hash_x4(const chash_scheme *scheme, const void *const keys[4],
                              const size_t lens[4], uint32_t out[4])
{
    if (scheme->hash != CHASH_HASH_MD5) {
        for (int l = 0; l < 4; l++)
            out[l] = chash_scheme_key_hash(scheme, keys[l], lens[l]);
        return;
    }
    uint8_t digest[4][CHASH_MD5_DIGEST_SIZE];
    chash_md5_x4(keys, lens, digest);
    for (int l = 0; l < 4; l++)
        out[l] = cut(scheme, digest[l], CHASH_MD5_DIGEST_SIZE, 0);
}

uint32_t chash_scheme_cut_int(uint64_t low_bits) { return (uint32_t)low_bits; }

/* Decimal digits of v, written backwards into the end of buf[20]. */
static size_t format_decimal(size_t v, char *end)
{
    size_t n = 0;
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
        n++;
    } while (v);
    return n;
}

/* Writes "{id}{infix}" to buf (room checked by the caller); its length. */
static size_t vkey_prefix(const chash_scheme *scheme, const char *id, size_t id_len, char *buf)
{
    const char *infix = layout_infix[scheme->layout];
    size_t infix_len = strlen(infix);
    if (id_len)
        memcpy(buf, id, id_len);
    memcpy(buf + id_len, infix, infix_len);
    return id_len + infix_len;
}

/* The number a virtual key ends with: ketama spells one key a digest. */
static size_t vkey_number(const chash_scheme *scheme, size_t index)
{
    return scheme->layout == CHASH_LAYOUT_KETAMA ? index / KETAMA_POINTS_PER_DIGEST : index;
}

/* Writes the decimal digits of v at buf; returns how many. */
static size_t put_decimal(size_t v, char *buf)
{
    char digits[20];
    size_t n = format_decimal(v, digits + sizeof digits);
    memcpy(buf, digits + sizeof digits - n, n);
    return n;
}

size_t chash_scheme_vkey(const chash_scheme *scheme, const char *id, size_t id_len,
                         size_t index, char *buf, size_t cap)
{
    if (scheme->layout == CHASH_LAYOUT_NGINX || scheme->layout == CHASH_LAYOUT_HAPROXY
        || scheme->layout == CHASH_LAYOUT_NGHTTPX)
        return 0; /* chained points, points of a puid or of an address: no virtual keys */
    size_t infix_len = strlen(layout_infix[scheme->layout]);
    char digits[20];
    size_t ndigits = format_decimal(vkey_number(scheme, index), digits + sizeof digits);
    size_t total = id_len + infix_len + ndigits;
    if (total <= cap) {
        size_t at = vkey_prefix(scheme, id, id_len, buf);
        memcpy(buf + at, digits + sizeof digits - ndigits, ndigits);
    }
    return total;
}

/* Points of the python and node layouts, four virtual keys per MD5 call.
 * Each of the four lanes of buf (cap bytes each) holds the key prefix
 * once; only the number after it is rewritten per key. */
static void md5_points_x4(const chash_scheme *scheme, const char *id, size_t id_len,
                          size_t first, size_t count, uint32_t *out, char *buf, size_t cap)
{
    size_t prefix = 0;
    for (int l = 0; l < 4; l++)
        prefix = vkey_prefix(scheme, id, id_len, buf + (size_t)l * cap);
    size_t k = 0;
    for (; k + 4 <= count; k += 4) {
        const void *keys[4];
        size_t lens[4];
        for (int l = 0; l < 4; l++) {
            char *lane = buf + (size_t)l * cap;
            lens[l] = prefix + put_decimal(first + k + (size_t)l, lane + prefix);
            keys[l] = lane;
        }
        chash_scheme_key_hash_x4(scheme, keys, lens, out + k);
    }
    for (; k < count; k++) {
        size_t len = prefix + put_decimal(first + k, buf + prefix);
        out[k] = chash_scheme_key_hash(scheme, buf, len);
    }
}

/* Points of the ketama layout, four digests (sixteen points) per MD5
 * call: point i is word i % 4 of the digest of virtual key i / 4.  A run
 * that starts or ends inside a digest takes its words one digest at a
 * time. */
static void ketama_points_x4(const chash_scheme *scheme, const char *id, size_t id_len,
                             size_t first, size_t count, uint32_t *out, char *buf, size_t cap)
{
    size_t prefix = 0;
    for (int l = 0; l < 4; l++)
        prefix = vkey_prefix(scheme, id, id_len, buf + (size_t)l * cap);
    uint8_t digest[4][CHASH_MD5_DIGEST_SIZE];
    size_t k = 0;
    while (k < count) {
        size_t index = first + k, group = index % KETAMA_POINTS_PER_DIGEST;
        size_t number = index / KETAMA_POINTS_PER_DIGEST;
        if (group == 0 && count - k >= 4 * KETAMA_POINTS_PER_DIGEST) {
            const void *keys[4];
            size_t lens[4];
            for (int l = 0; l < 4; l++) {
                char *lane = buf + (size_t)l * cap;
                lens[l] = prefix + put_decimal(number + (size_t)l, lane + prefix);
                keys[l] = lane;
            }
            chash_md5_x4(keys, lens, digest);
            for (size_t l = 0; l < 4; l++)
                for (size_t g = 0; g < KETAMA_POINTS_PER_DIGEST; g++)
                    out[k++] = cut(scheme, digest[l], CHASH_MD5_DIGEST_SIZE, g);
            continue;
        }
        size_t len = prefix + put_decimal(number, buf + prefix);
        chash_md5(buf, len, digest[0]);
        for (; group < KETAMA_POINTS_PER_DIGEST && k < count; group++)
            out[k++] = cut(scheme, digest[0], CHASH_MD5_DIGEST_SIZE, group);
    }
}

/* Where nginx splits a server address: host, then port.  "unix:" (any
 * case) + path is all host; otherwise the port is the run of digits after
 * the last ':' that ends the address, and the host what comes before that
 * ':'; an address not ending in ":digits" is all host. */
static void nginx_split(const char *id, size_t id_len, size_t *host_at, size_t *host_len,
                        size_t *port_at, size_t *port_len)
{
    static const char unix_prefix[] = "unix:";
    size_t prefix = sizeof unix_prefix - 1;
    int is_unix = id_len >= prefix;
    for (size_t i = 0; is_unix && i < prefix; i++) {
        char c = id[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        is_unix = c == unix_prefix[i];
    }
    *port_at = id_len;
    *port_len = 0;
    if (is_unix) {
        *host_at = prefix;
        *host_len = id_len - prefix;
        return;
    }
    *host_at = 0;
    *host_len = id_len;
    for (size_t j = 0; j < id_len; j++) {
        char c = id[id_len - j - 1];
        if (c == ':') {
            *host_len = id_len - j - 1;
            *port_at = id_len - j;
            *port_len = j;
            return;
        }
        if (c < '0' || c > '9')
            return;
    }
}

/* nginx's chained points: hashes host "\0" port + the previous point (4
 * bytes, little-endian) for every point up to first + count - 1, writing
 * those from first on.  buf has room for id_len + 5 bytes. */
static void nginx_points(const char *id, size_t id_len, size_t first, size_t count,
                         uint32_t *out, char *buf)
{
    size_t host_at, host_len, port_at, port_len;
    nginx_split(id, id_len, &host_at, &host_len, &port_at, &port_len);
    if (host_len)
        memcpy(buf, id + host_at, host_len);
    buf[host_len] = '\0';
    if (port_len)
        memcpy(buf + host_len + 1, id + port_at, port_len);
    size_t head = host_len + 1 + port_len;
    uint32_t prev = 0;
    for (size_t i = 0; i < first + count; i++) {
        buf[head] = (char)(uint8_t)prev;
        buf[head + 1] = (char)(uint8_t)(prev >> 8);
        buf[head + 2] = (char)(uint8_t)(prev >> 16);
        buf[head + 3] = (char)(uint8_t)(prev >> 24);
        prev = chash_crc32(buf, head + 4);
        if (i >= first)
            out[i - first] = prev;
    }
}

int chash_scheme_points(const chash_scheme *scheme, const char *id, size_t id_len,
                        size_t first, size_t count, uint32_t *out)
{
    if (scheme->layout == CHASH_LAYOUT_HAPROXY)
        return CHASH_EINVAL; /* points of a puid: chash_haproxy_points() */
    if (scheme->layout == CHASH_LAYOUT_NGHTTPX)
        return chash_nghttpx_points(id, id_len, first, count, out);
    /* Room for four virtual keys: the id, the longest infix, 20 digits. */
    char stack[4 * 128];
    size_t cap = id_len + 40;
    char *buf = stack;
    if (4 * cap > sizeof stack) {
        buf = CHASH_MALLOC(4 * cap);
        if (!buf)
            return CHASH_ENOMEM;
    } else {
        cap = sizeof stack / 4;
    }
    if (scheme->layout == CHASH_LAYOUT_NGINX) {
        if (first > CHASH_MAX_NODE_POINTS || count > CHASH_MAX_NODE_POINTS - first) {
            if (buf != stack)
                CHASH_FREE(buf);
            return CHASH_EINVAL; /* chained from point 0: bounded work only */
        }
        nginx_points(id, id_len, first, count, out, buf);
    } else if (scheme->layout == CHASH_LAYOUT_KETAMA) {
        ketama_points_x4(scheme, id, id_len, first, count, out, buf, cap);
    } else if (scheme->hash == CHASH_HASH_MD5) {
        md5_points_x4(scheme, id, id_len, first, count, out, buf, cap);
    } else {
        size_t prefix = vkey_prefix(scheme, id, id_len, buf);
        uint8_t digest[CHASH_MAX_DIGEST];
        size_t size = 0;
        for (size_t k = 0; k < count; k++) {
            size_t len = prefix + put_decimal(first + k, buf + prefix);
            size = chash_digest(scheme->hash, buf, len, 0, digest);
            out[k] = cut(scheme, digest, size, 0);
        }
    }
    if (buf != stack)
        CHASH_FREE(buf);
    return CHASH_OK;
}

int chash_varnish_points_for_weight(size_t replicas, double weight, size_t max_points,
                                    size_t *out)
{
    if (!(weight >= 1.0) || !isfinite(weight))
        return CHASH_EINVAL;
    double want = trunc((double)replicas * weight); /* (uint32_t)(replicas * weight) */
    /* Compared as a size only once it fits one (as chash_points_for_weight). */
    if (!(want < 18446744073709551616.0) || (size_t)want > max_points)
        return CHASH_EINVAL;
    *out = (size_t)want;
    return CHASH_OK;
}

int chash_points_for_weight(size_t base, double weight, size_t max_points, size_t *out)
{
    if (!(weight > 0.0) || !isfinite(weight))
        return CHASH_EINVAL;
    double want = nearbyint((double)base * weight); /* ties to even, as Python's round() */
    /* Compared as a size only once it is known to fit one: (double)SIZE_MAX
     * rounds up to 2**64, and converting that back is undefined. */
    if (!(want < 18446744073709551616.0))
        return CHASH_EINVAL;
    size_t count = want < 1.0 ? 1 : (size_t)want;
    if (count > max_points)
        return CHASH_EINVAL;
    *out = count;
    return CHASH_OK;
}

int chash_ketama_counts(size_t base, const uint64_t *weights, size_t n, size_t *out)
{
    uint64_t total = 0;
    for (size_t k = 0; k < n; k++) {
        if (weights[k] == 0 || weights[k] > UINT64_MAX - total)
            return CHASH_EINVAL;
        total += weights[k];
    }
    /* Single precision throughout, in the references' order of operations:
     * ((pct * base) / 4) * n, each step rounded to float. */
    for (size_t k = 0; k < n; k++) {
        float pct = (float)weights[k] / (float)total;
        float groups = pct * (float)base;
        groups = groups / 4.0f;
        groups = groups * (float)n;
        float whole = floorf(groups);
        out[k] = whole >= 1.0f ? (size_t)whole * 4 : 0;
    }
    return CHASH_OK;
}
