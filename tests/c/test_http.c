/*
 * test_http.c - the request-head policy (http/request_head.h) on its own:
 * what it reads of accepted heads, each refusal and its status, fields
 * past the capacity, and bytes llhttp would never pass (no read outside
 * the head, every one refused or read).
 */
#include <string.h>

#include "check.h"
#include "http/request_head.h"

static chash_http_request read_head(const char *head, chash_http_field *fields, size_t cap)
{
    chash_http_request req;
    chash_http_read_request(head, strlen(head), 0, fields, cap, &req);
    return req;
}

static int span_is(const char *head, chash_http_span span, const char *text)
{
    return span.len == strlen(text) && memcmp(head + span.start, text, span.len) == 0;
}

static void test_plain_get(void)
{
    const char *head = "GET /a?b HTTP/1.1\r\nHost: h:1\r\nX-User-Id:  u7 \t\r\n\r\n";
    chash_http_field fields[4];
    chash_http_request req = read_head(head, fields, 4);
    CHECK(req.refusal == NULL);
    CHECK(span_is(head, req.method, "GET"));
    CHECK(span_is(head, req.target, "/a?b") && !req.target_slash && !req.has_authority);
    CHECK(!req.http10 && req.keep_alive && !req.chunked && req.content_length == 0);
    CHECK(req.field_count == 2 && chash_http_field_count(head, strlen(head)) == 2);
    CHECK(span_is(head, fields[0].name, "Host") && span_is(head, fields[0].value, "h:1"));
    CHECK(span_is(head, fields[1].name, "X-User-Id") && span_is(head, fields[1].value, "u7"));
}

static void test_framing(void)
{
    chash_http_field fields[8];
    const char *post = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0042\r\n"
                       "Expect: 100-Continue\r\nConnection: x, CLOSE\r\n\r\n";
    chash_http_request req = read_head(post, fields, 8);
    CHECK(req.refusal == NULL && req.content_length == 42 && req.expect_continue);
    CHECK(!req.keep_alive);
    req = read_head("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n", fields, 8);
    CHECK(req.refusal == NULL && req.chunked);
    req = read_head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", fields, 8);
    CHECK(req.refusal == NULL && req.http10 && req.keep_alive);
    req = read_head("GET / HTTP/1.0\r\n\r\n", fields, 8);
    CHECK(req.refusal == NULL && !req.keep_alive);
    req = read_head("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n",
                    fields, 8);
    CHECK(req.refusal == NULL && req.content_length == UINT64_MAX);
}

static void test_targets(void)
{
    chash_http_field fields[2];
    const char *head = "GET http://a.b:80?q HTTP/1.1\r\nHost: x\r\n\r\n";
    chash_http_request req = read_head(head, fields, 2);
    CHECK(req.refusal == NULL && req.has_authority && span_is(head, req.authority, "a.b:80"));
    CHECK(req.target_slash && span_is(head, req.target, "?q"));
    head = "GET h-1+x.y://a/p HTTP/1.1\r\nHost: x\r\n\r\n";
    req = read_head(head, fields, 2);
    CHECK(req.refusal == NULL && !req.target_slash && span_is(head, req.target, "/p"));
    head = "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n";
    req = read_head(head, fields, 2);
    CHECK(req.refusal == NULL && span_is(head, req.target, "*"));
    head = "\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";  /* an empty line first, skipped */
    req = read_head(head, fields, 2);
    CHECK(req.refusal == NULL && span_is(head, req.method, "GET"));
}

static void expect_refusal(const char *head, int upgrade, int status, const char *why)
{
    chash_http_field fields[4];
    chash_http_request req;
    chash_http_read_request(head, strlen(head), upgrade, fields, 4, &req);
    CHECK(req.refusal != NULL && req.status == status && strcmp(req.refusal, why) == 0);
}

static void test_refusals(void)
{
    expect_refusal("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400, "malformed request line");
    expect_refusal("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 0, 505,
                   "only HTTP/1.0 and HTTP/1.1 are served");
    expect_refusal("GET /a\nb: c HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400, "malformed request line");
    expect_refusal("CONNECT h:1 HTTP/1.1\r\nHost: h\r\n\r\n", 1, 501, "CONNECT is not supported");
    expect_refusal("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 0, 400,
                   "obsolete line folding");
    expect_refusal("GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400, "malformed request target");
    expect_refusal("GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400, "malformed request target");
    expect_refusal("GET * HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400, "malformed request target");
    expect_refusal("GET http://h/#f HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400,
                   "malformed request target");
    expect_refusal("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 400,
                   "Transfer-Encoding in an HTTP/1.0 request");
    expect_refusal("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0,
                   501, "only the chunked transfer coding is supported");
    expect_refusal("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n", 0, 501,
                   "only the chunked transfer coding is supported");
    expect_refusal("GET / HTTP/1.1\r\n\r\n", 0, 400, "a request needs exactly one Host header");
    expect_refusal("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 0, 400,
                   "a request needs exactly one Host header");
    expect_refusal("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n", 0, 400,
                   "malformed Content-Length");
    expect_refusal("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n",
                   0, 400, "malformed Content-Length");
    expect_refusal("GET / HTTP/1.1\r\nnocolon\r\n\r\n", 0, 400, "malformed header field");
    expect_refusal("", 0, 400, "malformed request line");
    expect_refusal(" / HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400, "malformed request line");
    expect_refusal("G\x01T / HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400, "malformed request line");
    expect_refusal("GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n", 0, 400, "malformed request target");
}

static void test_fields_past_the_capacity(void)
{
    const char *head = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nHost: h\r\nC: 3\r\n\r\n";
    chash_http_field fields[2];
    chash_http_request req = read_head(head, fields, 2);
    CHECK(req.refusal == NULL && req.field_count == 4);
    CHECK(span_is(head, fields[1].name, "B"));
    req = read_head(head, NULL, 0);
    CHECK(req.refusal == NULL && req.field_count == 4);
}

static void test_list_items(void)
{
    const char *v = " a ,, Keep-Alive\t,close";
    size_t pos = 0, count = 0;
    chash_http_span item;
    const char *want[] = {"a", "", "Keep-Alive", "close"};
    while (chash_http_next_item(v, strlen(v), &pos, &item)) {
        CHECK(count < 4 && span_is(v, item, want[count]));
        count++;
    }
    CHECK(count == 4);
    pos = 0;
    CHECK(chash_http_next_item("", 0, &pos, &item) && item.len == 0);
    CHECK(!chash_http_next_item("", 0, &pos, &item));
}

int main(void)
{
    test_plain_get();
    test_framing();
    test_targets();
    test_refusals();
    test_fields_past_the_capacity();
    test_list_items();
    return check_report();
}
