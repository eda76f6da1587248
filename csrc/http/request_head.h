/*
 * request_head.h - the gateway's policy over a request head that llhttp
 * (through httptools) accepted: what the head says (method, target,
 * framing, keep-alive, fields) and what the gateway refuses on top of
 * llhttp's grammar, so that no backend behind it can read the head
 * differently.
 *
 * llhttp validates the grammar first (CRLF line ends, token names, one
 * Content-Length, no control bytes); this reads the same bytes again,
 * without llhttp's callbacks, and applies the rules in the order the
 * gateway documents them (chash/gateway/parser.py).  It is total over any
 * bytes: a head llhttp would refuse still gets a refusal or an answer,
 * never a read out of bounds.
 *
 * Plain C11, no Python, no allocation: fields go to an array the caller
 * gives (chash_http_field_count() says how large).
 */
#ifndef CHASH_HTTP_REQUEST_HEAD_H
#define CHASH_HTTP_REQUEST_HEAD_H

#include <stddef.h>
#include <stdint.h>

/* Bytes [start, start + len) of the head. */
typedef struct chash_http_span {
    size_t start, len;
} chash_http_span;

/* One header field: its name as sent, its value without the optional
 * whitespace around it. */
typedef struct chash_http_field {
    chash_http_span name, value;
} chash_http_field;

/* What chash_http_read_request() makes of a head. */
typedef struct chash_http_request {
    /* NULL when the head is accepted; else why not, and the status to
     * answer (400, 501 or 505); the other members are then unspecified. */
    const char *refusal;
    int status;
    chash_http_span method;
    /* The origin-form target the backend gets: "/" followed by target
     * when target_slash (an absolute-form target with an empty path),
     * else target alone. */
    chash_http_span target;
    int target_slash;
    /* The authority of an absolute-form target (has_authority), which
     * replaces Host (RFC 9112 section 3.2.2). */
    chash_http_span authority;
    int has_authority;
    int http10;                 /* HTTP/1.0, else HTTP/1.1 */
    size_t field_count;         /* every field, even past the capacity */
    uint64_t content_length;    /* 0 without the field */
    int chunked;
    int keep_alive;
    int expect_continue;
} chash_http_request;

/* The comma-separated list value (n bytes) item by item: from *pos (0 to
 * begin), the next item without the optional whitespace around it (maybe
 * empty) as a span of value; 0 once every item was given.  Used for
 * Connection's tokens here and in the binding. */
int chash_http_next_item(const char *value, size_t n, size_t *pos, chash_http_span *item);

/* How many header fields head (len bytes, up to and including its empty
 * line) holds: the capacity chash_http_read_request() needs. */
size_t chash_http_field_count(const char *head, size_t len);

/* Read head (len bytes); upgrade: llhttp reported an upgrade (CONNECT, or
 * Upgrade asked for).  The first min(capacity, out->field_count) fields
 * go to fields (may be NULL when capacity is 0). */
void chash_http_read_request(const char *head, size_t len, int upgrade,
                             chash_http_field *fields, size_t capacity,
                             chash_http_request *out);

#endif
