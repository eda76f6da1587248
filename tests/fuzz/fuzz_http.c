/*
 * fuzz_http.c - libFuzzer target for the request-head policy
 * (http/request_head.h), over any bytes, not only those llhttp passes.
 *
 * The first byte gives the upgrade flag and the capacity of the field
 * array (0 to 7, so that heads with more fields than room are common);
 * the rest is the head.  A refusal must carry a status of 400, 501 or 505
 * and a reason; an accepted head must have every span inside the head, a
 * non-empty method, a field count equal to chash_http_field_count(), each
 * field's name non-empty and free of ':' and its value without optional
 * whitespace at either end, and a target that begins with '/', is '*',
 * or is the path of an absolute target.  The head read as a comma-separated
 * list (chash_http_next_item) must give one item more than it has commas,
 * each inside it and without optional whitespace at either end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/request_head.h"

#define FZ_NAME "fuzz_http"
#include "fuzz_support.h"

static int inside(chash_http_span span, size_t len)
{
    return span.start <= len && span.len <= len - span.start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int upgrade = data[0] & 1;
    size_t capacity = (data[0] >> 1) & 7;
    size_t len = size - 1;
    /* A copy of exactly len bytes, so that ASan sees any read past it. */
    char *head = malloc(len ? len : 1);
    if (!head)
        return 0;
    memcpy(head, data + 1, len);
    chash_http_field *fields = capacity ? malloc(capacity * sizeof *fields) : NULL;
    chash_http_request req;
    chash_http_read_request(head, len, upgrade, fields, capacity, &req);
    if (req.refusal) {
        FZ_ASSERT(req.status == 400 || req.status == 501 || req.status == 505);
        FZ_ASSERT(req.refusal[0] != '\0');
    } else {
        FZ_ASSERT(req.status == 0);
        FZ_ASSERT(inside(req.method, len) && req.method.len > 0);
        FZ_ASSERT(inside(req.target, len));
        FZ_ASSERT(!req.has_authority || inside(req.authority, len));
        FZ_ASSERT(req.field_count == chash_http_field_count(head, len));
        const char *t = head + req.target.start;
        FZ_ASSERT(req.has_authority ? (req.target_slash || t[0] == '/')
                                    : (req.target.len > 0 && (t[0] == '/' || t[0] == '*')));
        size_t kept = req.field_count < capacity ? req.field_count : capacity;
        for (size_t i = 0; i < kept; i++) {
            chash_http_span name = fields[i].name, value = fields[i].value;
            FZ_ASSERT(inside(name, len) && inside(value, len) && name.len > 0);
            FZ_ASSERT(memchr(head + name.start, ':', name.len) == NULL);
            if (value.len) {
                char first = head[value.start], last = head[value.start + value.len - 1];
                FZ_ASSERT(first != ' ' && first != '\t' && last != ' ' && last != '\t');
            }
        }
    }
    size_t pos = 0, items = 0, commas = 0;
    chash_http_span item;
    while (chash_http_next_item(head, len, &pos, &item)) {
        FZ_ASSERT(inside(item, len) && items <= len);
        if (item.len) {
            char first = head[item.start], last = head[item.start + item.len - 1];
            FZ_ASSERT(first != ' ' && first != '\t' && last != ' ' && last != '\t');
            FZ_ASSERT(memchr(head + item.start, ',', item.len) == NULL);
        }
        items++;
    }
    for (size_t i = 0; i < len; i++)
        commas += head[i] == ',';
    FZ_ASSERT(items == commas + 1);
    free(fields);
    free(head);
    return 0;
}
