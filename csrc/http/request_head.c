/*
 * request_head.c - the gateway's policy over a request head llhttp
 * accepted; see request_head.h.  The rules and their order are those of
 * chash/gateway/parser.py's module docstring.
 */
#include "request_head.h"

#include <string.h>

static int is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* Whether s (n bytes) is word, ASCII case aside. */
static int same_word(const char *s, size_t n, const char *word)
{
    size_t wn = strlen(word);
    if (n != wn)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != (unsigned char)word[i])
            return 0;
    return 1;
}

/* Where the CRLF at or after from begins, or len if none. */
static size_t find_crlf(const char *head, size_t len, size_t from)
{
    for (size_t i = from; i + 1 < len; i++)
        if (head[i] == '\r' && head[i + 1] == '\n')
            return i;
    return len;
}

size_t chash_http_field_count(const char *head, size_t len)
{
    size_t count = 0;
    size_t at = find_crlf(head, len, 0);
    while (at < len) {
        size_t start = at + 2;
        size_t end = find_crlf(head, len, start);
        if (end == start || end >= len)
            break;
        count++;
        at = end;
    }
    return count;
}

static void refuse(chash_http_request *out, int status, const char *why)
{
    out->status = status;
    out->refusal = why;
}

/* The scheme "://" authority rest form of an absolute target (no '#'
 * after the scheme), as RFC 3986 spells a scheme. */
static int read_absolute(const char *t, size_t n, chash_http_request *out, size_t base)
{
    size_t i = 0;
    if (n == 0 || !((t[0] >= 'A' && t[0] <= 'Z') || (t[0] >= 'a' && t[0] <= 'z')))
        return 0;
    while (i < n && ((t[i] >= 'A' && t[i] <= 'Z') || (t[i] >= 'a' && t[i] <= 'z')
                     || (t[i] >= '0' && t[i] <= '9') || t[i] == '+' || t[i] == '.'
                     || t[i] == '-'))
        i++;
    if (n - i < 3 || memcmp(t + i, "://", 3) != 0)
        return 0;
    size_t auth = i + 3, rest = auth;
    while (rest < n && t[rest] != '/' && t[rest] != '?' && t[rest] != '#')
        rest++;
    if (memchr(t + rest, '#', n - rest))
        return 0;
    out->has_authority = 1;
    out->authority = (chash_http_span){base + auth, rest - auth};
    out->target = (chash_http_span){base + rest, n - rest};
    out->target_slash = rest == n || t[rest] != '/';
    return 1;
}

/* The request line's method, target and version; 0 when refused. */
static int read_request_line(const char *head, size_t len, int upgrade,
                             chash_http_request *out, size_t *line_end)
{
    size_t end = find_crlf(head, len, 0);
    size_t sp1 = len, sp2 = len, spaces = 0;
    for (size_t i = 0; i < end; i++) {
        if (head[i] != ' ')
            continue;
        if (++spaces == 1)
            sp1 = i;
        else if (spaces == 2)
            sp2 = i;
    }
    *line_end = end;
    if (end == len || spaces != 2) {
        refuse(out, 400, "malformed request line");
        return 0;
    }
    const char *version = head + sp2 + 1;
    size_t vlen = end - sp2 - 1;
    if (vlen != 8 || (memcmp(version, "HTTP/1.1", 8) != 0 && memcmp(version, "HTTP/1.0", 8) != 0)) {
        refuse(out, 505, "only HTTP/1.0 and HTTP/1.1 are served");
        return 0;
    }
    out->http10 = version[7] == '0';
    /* llhttp skips empty lines before a request line (RFC 9112 section
     * 2.2), which a bare LF begins: the method follows them. */
    size_t m = 0;
    while (m < sp1 && (head[m] == '\r' || head[m] == '\n'))
        m++;
    out->method = (chash_http_span){m, sp1 - m};
    for (size_t i = m; i < sp1; i++) {  /* llhttp passes token bytes only */
        if ((unsigned char)head[i] <= 0x20 || (unsigned char)head[i] >= 0x7f) {
            refuse(out, 400, "malformed request line");
            return 0;
        }
    }
    if (m == sp1) {
        refuse(out, 400, "malformed request line");
        return 0;
    }
    /* llhttp reads "GET /a<LF>b: c HTTP/1.1" as a line without a version
     * and a field: a bare CR or LF inside the line is refused. */
    if (memchr(head + m, '\n', end - m) || memchr(head + m, '\r', end - m)) {
        refuse(out, 400, "malformed request line");
        return 0;
    }
    if (upgrade && sp1 - m == 7 && memcmp(head + m, "CONNECT", 7) == 0) {
        refuse(out, 501, "CONNECT is not supported");
        return 0;
    }
    for (size_t i = 0; i + 1 < len; i++) {
        if (head[i] == '\n' && is_ows((unsigned char)head[i + 1])) {
            refuse(out, 400, "obsolete line folding");
            return 0;
        }
    }
    const char *target = head + sp1 + 1;
    size_t tlen = sp2 - sp1 - 1;
    for (size_t i = 0; i < tlen; i++) {
        /* Control bytes, DEL and raw non-ASCII: llhttp refuses them too. */
        if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] >= 0x7f) {
            refuse(out, 400, "malformed request target");
            return 0;
        }
    }
    out->target = (chash_http_span){sp1 + 1, tlen};
    if (tlen && target[0] == '/')
        return 1;
    if (read_absolute(target, tlen, out, sp1 + 1))
        return 1;
    if (tlen == 1 && target[0] == '*' && sp1 - m == 7 && memcmp(head + m, "OPTIONS", 7) == 0)
        return 1;
    refuse(out, 400, "malformed request target");
    return 0;
}

int chash_http_next_item(const char *value, size_t n, size_t *pos, chash_http_span *item)
{
    size_t start = *pos;
    if (start > n)
        return 0;
    size_t end = start;
    while (end < n && value[end] != ',')
        end++;
    size_t a = start, b = end;
    while (a < b && is_ows((unsigned char)value[a]))
        a++;
    while (b > a && is_ows((unsigned char)value[b - 1]))
        b--;
    *item = (chash_http_span){a, b - a};
    *pos = end + 1;
    return 1;
}

/* Whether the comma-separated list value names token (case aside). */
static int lists_token(const char *v, size_t n, const char *token)
{
    size_t pos = 0;
    chash_http_span item;
    while (chash_http_next_item(v, n, &pos, &item))
        if (same_word(v + item.start, item.len, token))
            return 1;
    return 0;
}

/* The framing fields' verdicts, read while the fields are listed. */
typedef struct framing {
    size_t hosts, codings;
    int chunked_value;     /* the one coding field says chunked */
    int close, keep_alive;
} framing;

/* One field line [start, end): its spans and what it says of the framing;
 * 0 when refused. */
static int read_field(const char *head, size_t start, size_t end, chash_http_field *field,
                      framing *f, chash_http_request *out)
{
    size_t colon = start;
    while (colon < end && head[colon] != ':')
        colon++;
    if (colon == end || colon == start) {
        refuse(out, 400, "malformed header field");
        return 0;
    }
    size_t v = colon + 1, ve = end;
    while (v < ve && is_ows((unsigned char)head[v]))
        v++;
    while (ve > v && is_ows((unsigned char)head[ve - 1]))
        ve--;
    field->name = (chash_http_span){start, colon - start};
    field->value = (chash_http_span){v, ve - v};
    const char *name = head + start, *value = head + v;
    size_t nlen = colon - start, vlen = ve - v;
    if (same_word(name, nlen, "host")) {
        f->hosts++;
    } else if (same_word(name, nlen, "content-length")) {
        uint64_t length = 0;
        if (vlen == 0) {
            refuse(out, 400, "malformed Content-Length");
            return 0;
        }
        for (size_t i = 0; i < vlen; i++) {
            unsigned digit = (unsigned)((unsigned char)value[i] - '0');
            if (digit > 9 || length > (UINT64_MAX - digit) / 10) {
                refuse(out, 400, "malformed Content-Length");
                return 0;
            }
            length = length * 10 + digit;
        }
        out->content_length = length;
    } else if (same_word(name, nlen, "transfer-encoding")) {
        f->codings++;
        f->chunked_value = same_word(value, vlen, "chunked");
    } else if (same_word(name, nlen, "connection")) {
        f->close |= lists_token(value, vlen, "close");
        f->keep_alive |= lists_token(value, vlen, "keep-alive");
    } else if (same_word(name, nlen, "expect")) {
        out->expect_continue = same_word(value, vlen, "100-continue");
    }
    return 1;
}

void chash_http_read_request(const char *head, size_t len, int upgrade,
                             chash_http_field *fields, size_t capacity,
                             chash_http_request *out)
{
    memset(out, 0, sizeof *out);
    size_t at;
    if (!read_request_line(head, len, upgrade, out, &at))
        return;
    framing f = {0, 0, 0, 0, 0};
    size_t count = 0;
    while (at < len) {
        size_t start = at + 2;
        size_t end = find_crlf(head, len, start);
        if (end == start || end >= len)
            break;
        chash_http_field scratch;
        if (!read_field(head, start, end, count < capacity ? &fields[count] : &scratch, &f, out))
            return;
        count++;
        at = end;
    }
    out->field_count = count;
    if (f.codings) {
        if (out->http10) {
            refuse(out, 400, "Transfer-Encoding in an HTTP/1.0 request");
            return;
        }
        /* The codings, joined, must be exactly "chunked": one field. */
        if (f.codings != 1 || !f.chunked_value) {
            refuse(out, 501, "only the chunked transfer coding is supported");
            return;
        }
        out->chunked = 1;
    }
    if (f.hosts > 1 || (!out->http10 && f.hosts == 0)) {
        refuse(out, 400, "a request needs exactly one Host header");
        return;
    }
    out->keep_alive = out->http10 ? f.keep_alive : !f.close;
}
