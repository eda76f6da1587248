/*
 * scheme_nghttpx.c - the points of nghttpx 1.52's affinity ring
 * (shrpx_config.cc, compute_affinity_hash): a backend is hashed by its
 * address as nghttpx holds it, the struct sockaddr its numeric host
 * resolves to (or, with the dns flag, its "host:port" text), and owns 160
 * points: for d = 0..19 the SHA-256 of those bytes followed by the byte d,
 * each digest read as 8 big-endian 32-bit words.
 *
 * The sockaddr bytes are Linux's on a little-endian machine: sa_family in
 * host order (AF_INET 2, AF_INET6 10), sin_port in network order, the
 * address, zeros (sin_zero; sin6_flowinfo and sin6_scope_id).  Addresses
 * are parsed here (a dotted quad of decimals without leading zeros; RFC
 * 4291 text with "::" and an embedded dotted quad), so the engine needs no
 * resolver.
 */
#include "scheme_nghttpx.h"

#include "alloc.h"
#include "chash.h"
#include "hash/hash.h"

#include <string.h>

enum { AF_INET_LINUX = 2, AF_INET6_LINUX = 10, SOCKADDR_IN = 16, SOCKADDR_IN6 = 28 };

static const char dns_suffix[] = ";dns";

/* Parses a decimal 0..65535 of 1..5 digits spanning [s, s + n); 0 or -1. */
static int parse_port(const char *s, size_t n, unsigned *port)
{
    if (n == 0 || n > 5)
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *port = v;
    return 0;
}

/* A dotted quad (four decimals 0..255, 1..3 digits each) into out[4]. */
static int parse_ipv4(const char *s, size_t n, uint8_t out[4])
{
    size_t at = 0;
    for (int part = 0; part < 4; part++) {
        if (part) {
            if (at >= n || s[at] != '.')
                return -1;
            at++;
        }
        size_t digits = 0;
        unsigned v = 0;
        while (at < n && s[at] >= '0' && s[at] <= '9' && digits < 4) {
            v = v * 10 + (unsigned)(s[at] - '0');
            at++;
            digits++;
        }
        /* No leading zero: "010" is octal to inet_aton, decimal to others. */
        if (digits == 0 || digits > 3 || v > 255 || (digits > 1 && s[at - digits] == '0'))
            return -1;
        out[part] = (uint8_t)v;
    }
    return at == n ? 0 : -1;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* RFC 4291 text (groups of 1..4 hex digits, one "::" at most, a dotted
 * quad as the last 32 bits) into out[16]. */
static int parse_ipv6(const char *s, size_t n, uint8_t out[16])
{
    uint8_t words[16];
    size_t nbytes = 0, gap = SIZE_MAX, at = 0;
    if (n >= 2 && s[0] == ':' && s[1] == ':') {
        gap = 0;
        at = 2;
    } else if (n && s[0] == ':') {
        return -1;
    }
    while (at < n) {
        /* A dotted quad ends the address. */
        size_t end = at;
        while (end < n && s[end] != ':')
            end++;
        int dotted = 0;
        for (size_t k = at; k < end; k++)
            dotted |= s[k] == '.';
        if (dotted) {
            if (end != n || nbytes + 4 > 16 || parse_ipv4(s + at, end - at, words + nbytes) < 0)
                return -1;
            nbytes += 4;
            at = n;
            break;
        }
        if (end == at || end - at > 4 || nbytes + 2 > 16)
            return -1;
        unsigned v = 0;
        for (size_t k = at; k < end; k++) {
            int h = hex_value(s[k]);
            if (h < 0)
                return -1;
            v = v << 4 | (unsigned)h;
        }
        words[nbytes++] = (uint8_t)(v >> 8);
        words[nbytes++] = (uint8_t)v;
        at = end;
        if (at == n)
            break;
        at++; /* the ':' */
        if (at < n && s[at] == ':') {
            if (gap != SIZE_MAX)
                return -1;
            gap = nbytes;
            at++;
        } else if (at == n) {
            return -1; /* a trailing single ':' */
        }
    }
    if (gap == SIZE_MAX) {
        if (nbytes != 16)
            return -1;
        memcpy(out, words, 16);
        return 0;
    }
    if (nbytes > 14)
        return -1; /* "::" stands for one group at least */
    memset(out, 0, 16);
    memcpy(out, words, gap);
    memcpy(out + 16 - (nbytes - gap), words + gap, nbytes - gap);
    return 0;
}

int chash_nghttpx_key(const char *id, size_t id_len, uint8_t *out, size_t *len)
{
    size_t suffix = sizeof dns_suffix - 1;
    int dns = id_len > suffix && memcmp(id + id_len - suffix, dns_suffix, suffix) == 0;
    size_t addr_len = dns ? id_len - suffix : id_len;
    /* HOST:PORT, the port after the last ':'. */
    size_t colon = addr_len;
    while (colon > 0 && id[colon - 1] != ':')
        colon--;
    if (colon < 2)
        return CHASH_EINVAL; /* no ':' or an empty host */
    unsigned port;
    if (parse_port(id + colon, addr_len - colon, &port) < 0)
        return CHASH_EINVAL;
    const char *host = id;
    size_t host_len = colon - 1;
    int bracketed = host[0] == '[';
    if (bracketed && (host_len < 3 || host[host_len - 1] != ']'))
        return CHASH_EINVAL;
    for (size_t k = 0; k < host_len; k++)
        if (host[k] == ';' || host[k] == '\0' || (!bracketed && host[k] == ':')
            || (bracketed && k && k + 1 < host_len && (host[k] == '[' || host[k] == ']')))
            return CHASH_EINVAL;
    if (dns) {
        uint8_t scratch[16];
        /* A bracketed host must be an IPv6 address (nghttpx brackets those only). */
        if (bracketed && parse_ipv6(host + 1, host_len - 2, scratch) < 0)
            return CHASH_EINVAL;
        if (out)
            memcpy(out, id, addr_len);
        *len = addr_len;
        return CHASH_OK;
    }
    uint8_t bytes[CHASH_NGHTTPX_KEY_MAX];
    memset(bytes, 0, sizeof bytes);
    bytes[2] = (uint8_t)(port >> 8);
    bytes[3] = (uint8_t)port;
    size_t n;
    if (bracketed) {
        if (parse_ipv6(host + 1, host_len - 2, bytes + 8) < 0)
            return CHASH_EINVAL;
        bytes[0] = AF_INET6_LINUX;
        n = SOCKADDR_IN6;
    } else {
        if (parse_ipv4(host, host_len, bytes + 4) < 0)
            return CHASH_EINVAL;
        bytes[0] = AF_INET_LINUX;
        n = SOCKADDR_IN;
    }
    if (out)
        memcpy(out, bytes, n);
    *len = n;
    return CHASH_OK;
}

int chash_nghttpx_points(const char *id, size_t id_len, size_t first, size_t count,
                         uint32_t *out)
{
    if (first > CHASH_NGHTTPX_POINTS || count > CHASH_NGHTTPX_POINTS - first)
        return CHASH_EINVAL;
    size_t len;
    int status = chash_nghttpx_key(id, id_len, NULL, &len);
    if (status != CHASH_OK)
        return status;
    uint8_t stack[256];
    uint8_t *buf = stack;
    if (len + 1 > sizeof stack) {
        buf = CHASH_MALLOC(len + 1);
        if (!buf)
            return CHASH_ENOMEM;
    }
    (void)chash_nghttpx_key(id, id_len, buf, &len); /* checked above */
    uint8_t digest[CHASH_SHA256_DIGEST_SIZE];
    size_t done = 0;
    for (size_t d = first / 8; done < count; d++) {
        buf[len] = (uint8_t)d;
        chash_sha256(buf, len + 1, digest);
        for (size_t w = d == first / 8 ? first % 8 : 0; w < 8 && done < count; w++) {
            const uint8_t *p = digest + 4 * w;
            out[done++] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8
                          | (uint32_t)p[3];
        }
    }
    if (buf != stack)
        CHASH_FREE(buf);
    return CHASH_OK;
}
