/*
 * test_scheme.c - the point schemes: virtual-key spelling and digest cuts
 * for each layout, checked against values computed with Python's hashlib
 * (the commands are beside each vector), and weight-to-point rounding.
 */
#include "engine/chash.h"
#include "engine/scheme.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static chash_scheme scheme(chash_layout_id layout, chash_hash_id hash)
{
    chash_scheme s;
    int status = chash_scheme_init(&s, layout, hash);
    CHECK(status == CHASH_OK);
    return s;
}

static void test_python_layout(void)
{
    chash_scheme s = scheme(CHASH_LAYOUT_PYTHON, CHASH_HASH_MD5);
    uint32_t p[1];
    CHECK(chash_scheme_points(&s, "order-service-v1", 16, 0, 1, p) == CHASH_OK);
    /* int(md5(b"order-service-v1_virtual_0").hexdigest(), 16) % 2**32 */
    CHECK(p[0] == 2434236162u);
    /* int(md5(b"user_7").hexdigest(), 16) % 2**32 */
    CHECK(chash_scheme_key_hash(&s, "user_7", 6) == 2838848089u);
    char buf[64];
    size_t n = chash_scheme_vkey(&s, "n", 1, 12345, buf, sizeof buf);
    CHECK(n == 15 && memcmp(buf, "n_virtual_12345", n) == 0);
    CHECK(chash_scheme_vkey(&s, "n", 1, 0, buf, 3) == 11); /* too small: length only */

    chash_scheme sha = scheme(CHASH_LAYOUT_PYTHON, CHASH_HASH_SHA1);
    CHECK(chash_scheme_points(&sha, "n", 1, 3, 1, p) == CHASH_OK);
    /* int(sha1(b"n_virtual_3").hexdigest(), 16) % 2**32 */
    CHECK(p[0] == 1058680566u);
}

static void test_node_layout(void)
{
    chash_scheme s = scheme(CHASH_LAYOUT_NODE, CHASH_HASH_MD5);
    uint32_t p[1];
    CHECK(chash_scheme_points(&s, "api-1", 5, 0, 1, p) == CHASH_OK);
    /* int(md5(b"api-1#vnode0").hexdigest()[:8], 16) */
    CHECK(p[0] == 1553728596u);
    CHECK(chash_scheme_key_hash(&s, "user:10086:profile", 18) == 1587001264u);
}

static void test_ketama_layout(void)
{
    chash_scheme s = scheme(CHASH_LAYOUT_KETAMA, CHASH_HASH_MD5);
    uint32_t p[6];
    CHECK(chash_scheme_points(&s, "10.0.0.1:11211", 14, 0, 4, p) == CHASH_OK);
    /* d = md5(b"10.0.0.1:11211-0").digest(); int.from_bytes(d[4g:4g+4], "little") */
    CHECK(p[0] == 1644766326u && p[1] == 266575842u && p[2] == 1549369152u && p[3] == 2004188753u);
    /* Starting mid-digest gives the same points as starting at 0. */
    uint32_t q[3];
    CHECK(chash_scheme_points(&s, "10.0.0.1:11211", 14, 1, 3, q) == CHASH_OK);
    CHECK(q[0] == p[1] && q[1] == p[2] && q[2] == p[3]);
    CHECK(chash_scheme_key_hash(&s, "key", 3) == 2316004924u);
    chash_scheme bad;
    CHECK(chash_scheme_init(&bad, CHASH_LAYOUT_KETAMA, CHASH_HASH_XXH3) == CHASH_EINVAL);
}

static void test_nginx_layout(void)
{
    chash_scheme s = scheme(CHASH_LAYOUT_NGINX, CHASH_HASH_CRC32);
    uint32_t p[3];
    /* prev = 0; p = zlib.crc32(host + b"\0" + port + prev.to_bytes(4, "little")) */
    CHECK(chash_scheme_points(&s, "127.0.0.1:8080", 14, 0, 3, p) == CHASH_OK);
    CHECK(p[0] == 1841993031u && p[1] == 2462559737u && p[2] == 3720262072u);
    /* Chained: starting later still derives from point 0. */
    uint32_t q[1];
    CHECK(chash_scheme_points(&s, "127.0.0.1:8080", 14, 2, 1, q) == CHASH_OK && q[0] == p[2]);
    /* "unix:" (any case) + path: all host, no port. */
    CHECK(chash_scheme_points(&s, "unix:/run/a.sock", 16, 0, 2, p) == CHASH_OK);
    CHECK(p[0] == 4086230301u && p[1] == 1903376335u);
    CHECK(chash_scheme_points(&s, "UNIX:/run/a.sock", 16, 0, 1, q) == CHASH_OK && q[0] == p[0]);
    /* The port is the digits after the last ':'; without them all is host. */
    CHECK(chash_scheme_points(&s, "[::1]:80", 8, 0, 1, p) == CHASH_OK && p[0] == 1028208324u);
    CHECK(chash_scheme_points(&s, "cache.local", 11, 0, 1, p) == CHASH_OK && p[0] == 2201122176u);
    CHECK(chash_scheme_key_hash(&s, "user_7", 6) == 2320300117u); /* zlib.crc32(b"user_7") */
    char buf[8];
    CHECK(chash_scheme_vkey(&s, "a", 1, 0, buf, sizeof buf) == 0); /* no virtual keys */
    chash_scheme bad;
    CHECK(chash_scheme_init(&bad, CHASH_LAYOUT_NGINX, CHASH_HASH_MD5) == CHASH_EINVAL);
    CHECK(chash_layout_ties(CHASH_LAYOUT_NGINX) && !chash_layout_ties(CHASH_LAYOUT_PYTHON));
}

static void test_libmemcached_layout(void)
{
    chash_scheme s = scheme(CHASH_LAYOUT_LIBMEMCACHED, CHASH_HASH_ONE_AT_A_TIME);
    uint32_t p[2];
    /* one_at_a_time(b"10.0.0.1-0"), (b"10.0.0.1-1"): tests/_support/hashes.py */
    CHECK(chash_scheme_points(&s, "10.0.0.1", 8, 0, 2, p) == CHASH_OK);
    CHECK(p[0] == 4128832250u && p[1] == 130129487u);
    CHECK(chash_scheme_key_hash(&s, "\xc3\xa9", 2) == 26298542u); /* "é": signed chars */
    chash_scheme md5 = scheme(CHASH_LAYOUT_LIBMEMCACHED, CHASH_HASH_MD5);
    /* int.from_bytes(md5(b"10.0.0.1:22122-0").digest()[:4], "little") */
    CHECK(chash_scheme_points(&md5, "10.0.0.1:22122", 14, 0, 1, p) == CHASH_OK && p[0] == 4063051127u);
    chash_scheme bad;
    CHECK(chash_scheme_init(&bad, CHASH_LAYOUT_LIBMEMCACHED, CHASH_HASH_CRC32) == CHASH_EINVAL);
    CHECK(chash_layout_default_hash(CHASH_LAYOUT_LIBMEMCACHED) == CHASH_HASH_ONE_AT_A_TIME);
}

/* Varnish's shard director: "{ident}{i}", last 4 SHA-256 bytes
 * little-endian (values from hashlib). */
static void test_varnish_layout(void)
{
    chash_scheme s = scheme(CHASH_LAYOUT_VARNISH, CHASH_HASH_SHA256);
    uint32_t p[67];
    CHECK(chash_scheme_points(&s, "b1", 2, 0, 67, p) == CHASH_OK);
    CHECK(p[0] == 32168084u);    /* sha256(b"b10") */
    CHECK(p[66] == 4084389761u); /* sha256(b"b166") */
    CHECK(chash_scheme_key_hash(&s, "abc", 3) == 2903834866u);
    char buf[16];
    CHECK(chash_scheme_vkey(&s, "b1", 2, 66, buf, sizeof buf) == 4 && memcmp(buf, "b166", 4) == 0);
    CHECK(chash_layout_default_points(CHASH_LAYOUT_VARNISH) == 67);
    CHECK(chash_layout_default_hash(CHASH_LAYOUT_VARNISH) == CHASH_HASH_SHA256);
    CHECK(chash_layout_rule(CHASH_LAYOUT_VARNISH) == CHASH_RULE_VARNISH);
    CHECK(chash_layout_ties(CHASH_LAYOUT_VARNISH));
    chash_scheme bad;
    CHECK(chash_scheme_init(&bad, CHASH_LAYOUT_VARNISH, CHASH_HASH_MD5) == CHASH_EINVAL);
    size_t n = 0;
    CHECK(chash_varnish_points_for_weight(67, 1.0, 1000, &n) == CHASH_OK && n == 67);
    CHECK(chash_varnish_points_for_weight(67, 2.5, 1000, &n) == CHASH_OK && n == 167); /* 167.5 */
    CHECK(chash_varnish_points_for_weight(67, 1.99, 1000, &n) == CHASH_OK && n == 133);
    CHECK(chash_varnish_points_for_weight(67, 0.5, 1000, &n) == CHASH_EINVAL);
    CHECK(chash_varnish_points_for_weight(67, NAN, 1000, &n) == CHASH_EINVAL);
    CHECK(chash_varnish_points_for_weight(67, INFINITY, SIZE_MAX, &n) == CHASH_EINVAL);
    CHECK(chash_varnish_points_for_weight(67, 20.0, 1000, &n) == CHASH_EINVAL);
    CHECK(chash_varnish_points_for_weight(1, 1e300, SIZE_MAX, &n) == CHASH_EINVAL); /* past any size */
    CHECK(chash_varnish_points_for_weight(1, 18446744073709551616.0, SIZE_MAX, &n) == CHASH_EINVAL);
}

/* nghttpx's affinity points: 20 SHA-256 digests of the address bytes and
 * a byte 0..19, 8 big-endian words each (values from hashlib, over bytes
 * built with struct and socket.inet_pton). */
static void test_nghttpx_layout(void)
{
    chash_scheme s = scheme(CHASH_LAYOUT_NGHTTPX, CHASH_HASH_SHA256);
    uint32_t p[CHASH_NGHTTPX_POINTS];
    const char *v4 = "10.1.2.3:8080";
    CHECK(chash_scheme_points(&s, v4, strlen(v4), 0, 160, p) == CHASH_OK);
    CHECK(p[0] == 1908294657u && p[9] == 3486991739u && p[159] == 2924169469u);
    uint32_t mid[3];
    CHECK(chash_nghttpx_points(v4, strlen(v4), 7, 3, mid) == CHASH_OK); /* across a digest */
    CHECK(memcmp(mid, p + 7, sizeof mid) == 0);
    const char *v6 = "[2001:db8::7:1]:443";
    CHECK(chash_scheme_points(&s, v6, strlen(v6), 0, 160, p) == CHASH_OK);
    CHECK(p[0] == 1603888272u && p[159] == 1411816353u);
    const char *dns = "backend.test:80;dns";
    CHECK(chash_scheme_points(&s, dns, strlen(dns), 0, 160, p) == CHASH_OK);
    CHECK(p[0] == 1727426824u && p[37] == 2151611778u);
    CHECK(chash_scheme_key_hash(&s, "127.0.0.5", 9) == 573091189u); /* affinity=ip */
    CHECK(chash_nghttpx_points(v4, strlen(v4), 150, 11, p) == CHASH_EINVAL);
    CHECK(chash_nghttpx_points(v4, strlen(v4), 161, 0, p) == CHASH_EINVAL);

    uint8_t key[CHASH_NGHTTPX_KEY_MAX];
    size_t len = 0;
    CHECK(chash_nghttpx_key("1.2.3.4:65535", 13, key, &len) == CHASH_OK && len == 16);
    CHECK(key[0] == 2 && key[1] == 0 && key[2] == 0xff && key[3] == 0xff && key[4] == 1 && key[7] == 4);
    CHECK(chash_nghttpx_key("[::]:1", 6, key, &len) == CHASH_OK && len == 28 && key[0] == 10);
    CHECK(chash_nghttpx_key("[::ffff:1.2.3.4]:1", 18, key, &len) == CHASH_OK && key[18] == 0xff
          && key[20] == 1 && key[23] == 4);
    CHECK(chash_nghttpx_key("[1:2:3:4:5:6:7:8]:1", 19, key, &len) == CHASH_OK && key[23] == 8);
    CHECK(chash_nghttpx_key("[1::]:1", 7, NULL, &len) == CHASH_OK);
    static const char *const bad[] = {
        "", ":80", "1.2.3.4", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:123456", "1.2.3:80",
        "1.2.3.4.5:80", "256.1.1.1:80", "1.2.3.04a:80", "1..2.3:80", "localhost:80", "::1:80",
        "[::1:80", "[]:80", "[::1::2]:80", "[1:2:3:4:5:6:7:8:9]:80", "[12345::]:80", "[:1]:80",
        "[1:]:80", "[g::]:80", "[1:2:3:4:5:6:7::8]:80", "1.2.3.4:8a", "[1.2.3.4]:80", "a;b:80",
        "1.2.3.4:80;dn", ";dns", ":80;dns", "[x]:80;dns", "h:p;dns", "[::1]]:80",
        "[1:2:3:4:5:6:1.2.3.4:5]:80", "[1:2:3:4:5:6:7:1.2.3.4]:80", "01.2.3.4:80", "1.2.3.00:80",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (chash_nghttpx_key(bad[i], strlen(bad[i]), key, &len) != CHASH_EINVAL) {
            fprintf(stderr, "accepted nghttpx id %s\n", bad[i]);
            CHECK(0);
        }
    }
    CHECK(chash_nghttpx_key("[::1]:80;dns", 12, key, &len) == CHASH_OK && len == 8);
    CHECK(chash_layout_default_points(CHASH_LAYOUT_NGHTTPX) == 160);
    CHECK(chash_layout_rule(CHASH_LAYOUT_NGHTTPX) == CHASH_RULE_SUCCESSOR);
    CHECK(chash_scheme_vkey(&s, v4, strlen(v4), 0, (char *)key, sizeof key) == 0);
}

static void test_ketama_counts(void)
{
    size_t out[25];
    uint64_t w[25];
    /* Values from a float32 emulation (struct.pack("f")) of
     * floorf(w / total * 160 / 4 * n) * 4. */
    uint64_t five[5] = {1, 2, 3, 1, 2};
    CHECK(chash_ketama_counts(160, five, 5, out) == CHASH_OK);
    CHECK(out[0] == 88 && out[1] == 176 && out[2] == 264 && out[3] == 88 && out[4] == 176);
    /* 25 equal weights: 39.99999 groups in single precision, so 156 points. */
    for (int i = 0; i < 25; i++)
        w[i] = 1;
    CHECK(chash_ketama_counts(160, w, 25, out) == CHASH_OK && out[0] == 156 && out[24] == 156);
    CHECK(chash_ketama_counts(160, w, 24, out) == CHASH_OK && out[0] == 160);
    uint64_t skew[2] = {1, 100}; /* the light node gets no point at all */
    CHECK(chash_ketama_counts(160, skew, 2, out) == CHASH_OK && out[0] == 0 && out[1] == 316);
    uint64_t zero[2] = {1, 0};
    CHECK(chash_ketama_counts(160, zero, 2, out) == CHASH_EINVAL);
    uint64_t huge[2] = {UINT64_MAX, 1};
    CHECK(chash_ketama_counts(160, huge, 2, out) == CHASH_EINVAL);
    CHECK(chash_ketama_counts(160, NULL, 0, out) == CHASH_OK);
}

static void test_prefix_property(void)
{
    /* Point i depends only on (node, i): the first 10 of 30 equal the 10. */
    for (int layout = 0; layout < CHASH_LAYOUT_COUNT; layout++) {
        chash_scheme s = scheme((chash_layout_id)layout,
                                chash_layout_default_hash((chash_layout_id)layout));
        uint32_t many[30], few[10];
        if (layout == CHASH_LAYOUT_NGHTTPX) { /* points of an address */
            CHECK(chash_scheme_points(&s, "node-a", 6, 0, 30, many) == CHASH_EINVAL);
            CHECK(chash_scheme_points(&s, "10.0.0.1:80", 11, 0, 30, many) == CHASH_OK);
            CHECK(chash_scheme_points(&s, "10.0.0.1:80", 11, 0, 10, few) == CHASH_OK);
        } else if (layout == CHASH_LAYOUT_HAPROXY) { /* points of a puid, not of an id */
            CHECK(chash_scheme_points(&s, "node-a", 6, 0, 30, many) == CHASH_EINVAL);
            CHECK(chash_haproxy_points(7, 0, 30, many) == CHASH_OK);
            CHECK(chash_haproxy_points(7, 0, 10, few) == CHASH_OK);
        } else {
            CHECK(chash_scheme_points(&s, "node-a", 6, 0, 30, many) == CHASH_OK);
            CHECK(chash_scheme_points(&s, "node-a", 6, 0, 10, few) == CHASH_OK);
        }
        CHECK(memcmp(many, few, sizeof few) == 0);
    }
}

static void test_long_ids(void)
{
    static char id[5000];
    memset(id, 'x', sizeof id);
    chash_scheme s = scheme(CHASH_LAYOUT_PYTHON, CHASH_HASH_MURMUR3);
    uint32_t p[2];
    CHECK(chash_scheme_points(&s, id, sizeof id, 0, 2, p) == CHASH_OK);
    CHECK(p[0] != p[1]);
}

static void test_weights(void)
{
    size_t n = 0;
    CHECK(chash_points_for_weight(100, 1.0, 1000, &n) == CHASH_OK && n == 100);
    CHECK(chash_points_for_weight(100, 0.025, 1000, &n) == CHASH_OK && n == 2); /* 2.5: to even */
    CHECK(chash_points_for_weight(100, 0.035, 1000, &n) == CHASH_OK && n == 4); /* 3.5 */
    CHECK(chash_points_for_weight(100, 0.001, 1000, &n) == CHASH_OK && n == 1); /* at least one */
    CHECK(chash_points_for_weight(100, 0.0, 1000, &n) == CHASH_EINVAL);
    CHECK(chash_points_for_weight(100, -1.0, 1000, &n) == CHASH_EINVAL);
    CHECK(chash_points_for_weight(100, NAN, 1000, &n) == CHASH_EINVAL);
    CHECK(chash_points_for_weight(100, INFINITY, 1000, &n) == CHASH_EINVAL);
    CHECK(chash_points_for_weight(100, 10.01, 1000, &n) == CHASH_EINVAL);
    CHECK(chash_points_for_weight(100, 1.0, 0, &n) == CHASH_EINVAL);       /* even one is too many */
    CHECK(chash_points_for_weight(1, 1e300, SIZE_MAX, &n) == CHASH_EINVAL); /* past any size */
    CHECK(chash_points_for_weight(1, 18446744073709551616.0, SIZE_MAX, &n) == CHASH_EINVAL);
}

/* The new byte digests cut as MD5's and SHA-1's are, and the 64-bit key
 * hash of the jump routers (Guava's padToLong). */
static void test_wide_digests(void)
{
    uint32_t p[1];
    chash_scheme sha = scheme(CHASH_LAYOUT_PYTHON, CHASH_HASH_SHA256);
    CHECK(chash_scheme_points(&sha, "n", 1, 3, 1, p) == CHASH_OK);
    /* int(sha256(b"n_virtual_3").hexdigest(), 16) % 2**32 */
    CHECK(p[0] == 1916494161u);
    chash_scheme m = scheme(CHASH_LAYOUT_PYTHON, CHASH_HASH_MURMUR3_128);
    CHECK(chash_scheme_points(&m, "n", 1, 3, 1, p) == CHASH_OK);
    /* int.from_bytes(mmh3.hash_bytes(b"n_virtual_3"), "big") % 2**32 */
    CHECK(p[0] == 2537579360u);
    chash_scheme node = scheme(CHASH_LAYOUT_NODE, CHASH_HASH_SHA256);
    CHECK(chash_scheme_points(&node, "n", 1, 3, 1, p) == CHASH_OK);
    /* int(sha256(b"n#vnode3").hexdigest()[:8], 16) */
    CHECK(p[0] == 3171972560u);

    /* mmh3.hash64(b"user_7", signed=False)[0]: h1, Guava's asLong() */
    CHECK(chash_hash64(CHASH_HASH_MURMUR3_128, "user_7", 6) == UINT64_C(0x8449300558089ee8));
    /* int.from_bytes(sha256(b"user_7").digest()[:8], "little") */
    CHECK(chash_hash64(CHASH_HASH_SHA256, "user_7", 6) == UINT64_C(0x52e04cad153bd6ee));
    /* xxhash.xxh64_intdigest(b"user_7"); mmh3.hash(b"user_7", signed=False) */
    CHECK(chash_hash64(CHASH_HASH_XXH64, "user_7", 6) == UINT64_C(0xfbec03825709ad35));
    CHECK(chash_hash64(CHASH_HASH_MURMUR3, "user_7", 6) == UINT64_C(0xdf83f340));
    CHECK(chash_hash_is_bytes(CHASH_HASH_MD5) == 1 && chash_hash_is_bytes(CHASH_HASH_XXH3) == 0);
    CHECK(chash_hash_is_bytes(CHASH_HASH_COUNT) == -1);
    CHECK(chash_hash64(CHASH_HASH_COUNT, "x", 1) == 0);
}

static void test_names(void)
{
    chash_hash_id h;
    chash_layout_id l;
    for (int i = 0; i < CHASH_HASH_COUNT; i++)
        CHECK(chash_hash_by_name(chash_hash_name((chash_hash_id)i), &h) == CHASH_OK && (int)h == i);
    for (int i = 0; i < CHASH_LAYOUT_COUNT; i++)
        CHECK(chash_layout_by_name(chash_layout_name((chash_layout_id)i), &l) == CHASH_OK && (int)l == i);
    CHECK(chash_hash_by_name("md6", &h) == CHASH_EINVAL);
    CHECK(chash_layout_by_name("java", &l) == CHASH_EINVAL);
}

int main(void)
{
    test_python_layout();
    test_node_layout();
    test_ketama_layout();
    test_nginx_layout();
    test_libmemcached_layout();
    test_varnish_layout();
    test_nghttpx_layout();
    test_ketama_counts();
    test_prefix_property();
    test_long_ids();
    test_weights();
    test_names();
    test_wide_digests();
    return check_report();
}
