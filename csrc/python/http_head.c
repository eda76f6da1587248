/*
 * http_head.c - _request_head(head, upgrade, factory): a request head
 * llhttp accepted, read by the gateway's policy in C (the Python objects
 * are made here, the rules are in csrc/http/request_head.c).  One call per
 * request instead of a Python callback per header field and a Python pass
 * over them.
 */
#include "http_head.h"

#include "http/request_head.h"

const char request_head_doc[] = PyDoc_STR(
"_request_head(head, upgrade, factory, /)\n--\n\n"
"Read a request head llhttp accepted (bytes, up to and including its empty\n"
"line; upgrade: llhttp reported an upgrade).  factory(method, target,\n"
"authority, version, fields, lines, content_length, chunked, keep_alive,\n"
"expect_continue) when the gateway's policy accepts it, else the tuple\n"
"(status, reason) to refuse it with.");

/* Fields read on the stack up to this many; more take one allocation. */
#define STACK_FIELDS 32

static PyObject *span_bytes(const char *head, chash_http_span span)
{
    return PyBytes_FromStringAndSize(head + span.start, (Py_ssize_t)span.len);
}

/* (lower-case name, value) and the line "Name: value" of one field. */
static int add_field(const char *head, const chash_http_field *field, PyObject *fields,
                     PyObject *lines, Py_ssize_t i)
{
    size_t nlen = field->name.len, vlen = field->value.len;
    const char *name = head + field->name.start, *value = head + field->value.start;
    PyObject *lname = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nlen);
    PyObject *pvalue = PyBytes_FromStringAndSize(value, (Py_ssize_t)vlen);
    PyObject *line = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(nlen + 2 + vlen));
    if (!lname || !pvalue || !line)
        goto fail;
    char *low = PyBytes_AS_STRING(lname), *out = PyBytes_AS_STRING(line);
    for (size_t k = 0; k < nlen; k++) {
        char c = name[k];
        low[k] = (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
    }
    memcpy(out, name, nlen);
    memcpy(out + nlen, ": ", 2);
    memcpy(out + nlen + 2, value, vlen);
    PyObject *pair = PyTuple_Pack(2, lname, pvalue);
    Py_DECREF(lname);
    Py_DECREF(pvalue);
    if (!pair) {
        Py_DECREF(line);
        return -1;
    }
    PyList_SET_ITEM(fields, i, pair);
    PyList_SET_ITEM(lines, i, line);
    return 0;
fail:
    Py_XDECREF(lname);
    Py_XDECREF(pvalue);
    Py_XDECREF(line);
    return -1;
}

static PyObject *target_bytes(const char *head, const chash_http_request *req)
{
    if (!req->target_slash)
        return span_bytes(head, req->target);
    PyObject *target = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)req->target.len + 1);
    if (target) {
        PyBytes_AS_STRING(target)[0] = '/';
        memcpy(PyBytes_AS_STRING(target) + 1, head + req->target.start, req->target.len);
    }
    return target;
}

static PyObject *build(const char *head, const chash_http_request *req,
                       const chash_http_field *found, PyObject *factory)
{
    Py_ssize_t n = (Py_ssize_t)req->field_count;
    PyObject *args[10] = {NULL};
    PyObject *result = NULL;
    args[0] = PyUnicode_DecodeASCII(head + req->method.start, (Py_ssize_t)req->method.len,
                                    "strict");
    args[1] = target_bytes(head, req);
    if (req->has_authority) {
        args[2] = span_bytes(head, req->authority);
    } else {
        args[2] = Py_None;
        Py_INCREF(Py_None);
    }
    args[3] = PyBytes_FromString(req->http10 ? "HTTP/1.0" : "HTTP/1.1");
    args[4] = PyList_New(n);
    args[5] = PyList_New(n);
    args[6] = PyLong_FromUnsignedLongLong((unsigned long long)req->content_length);
    args[7] = PyBool_FromLong(req->chunked);
    args[8] = PyBool_FromLong(req->keep_alive);
    args[9] = PyBool_FromLong(req->expect_continue);
    for (int i = 0; i < 10; i++)
        if (!args[i])
            goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        if (add_field(head, &found[i], args[4], args[5], i) < 0)
            goto done;
    result = PyObject_Vectorcall(factory, args, 10, NULL);
done:
    for (int i = 0; i < 10; i++)
        Py_XDECREF(args[i]);
    return result;
}

PyObject *module_request_head(PyObject *Py_UNUSED(module), PyObject *const *args,
                              Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "_request_head takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "head must be bytes, not %.100s", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    int upgrade = PyObject_IsTrue(args[1]);
    if (upgrade < 0)
        return NULL;
    const char *head = PyBytes_AS_STRING(args[0]);
    size_t len = (size_t)PyBytes_GET_SIZE(args[0]);
    chash_http_field stack[STACK_FIELDS];
    chash_http_field *fields = stack;
    size_t count = chash_http_field_count(head, len);
    if (count > STACK_FIELDS) {
        fields = PyMem_Malloc(count * sizeof *fields);
        if (!fields)
            return PyErr_NoMemory();
    }
    chash_http_request req;
    chash_http_read_request(head, len, upgrade, fields, count, &req);
    PyObject *result;
    if (req.refusal)
        result = Py_BuildValue("(is)", req.status, req.refusal);
    else
        result = build(head, &req, fields, args[2]);
    if (fields != stack)
        PyMem_Free(fields);
    return result;
}

const char backend_head_doc[] = PyDoc_STR(
"_backend_head(fields, lines, remote, host, chunked, content_length, bodyless, secure, /)\n--\n\n"
"Everything after the Host line of the request to a backend (see\n"
"chash.gateway.messages.backend_head): the lines of the fields that are\n"
"neither hop-by-hop, nor named by Connection, nor recomputed; the\n"
"X-Forwarded-* fields; the framing; the empty line.  bodyless: a GET or\n"
"HEAD, which needs no Content-Length: 0; secure: the client came over TLS\n"
"(X-Forwarded-Proto: https).");

/* The fields never forwarded: hop-by-hop ones (RFC 9110 section 7.6.1) and
 * those the gateway writes itself. */
static const char *const not_forwarded[] = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "trailers", "transfer-encoding", "upgrade",
    "host", "content-length", "expect", "x-forwarded-for", "x-forwarded-proto",
    "x-forwarded-host",
};

/* Adds the comma-separated tokens of a Connection value to named,
 * lower-case and without whitespace; -1 on error. */
static int add_tokens(PyObject *named, const char *value, Py_ssize_t vlen)
{
    size_t pos = 0;
    chash_http_span item;
    while (chash_http_next_item(value, (size_t)vlen, &pos, &item)) {
        PyObject *token = PyBytes_FromStringAndSize(value + item.start, (Py_ssize_t)item.len);
        if (!token)
            return -1;
        char *t = PyBytes_AS_STRING(token);
        for (size_t k = 0; k < item.len; k++)
            if (t[k] >= 'A' && t[k] <= 'Z')
                t[k] = (char)(t[k] + ('a' - 'A'));
        int added = PySet_Add(named, token);
        Py_DECREF(token);
        if (added < 0)
            return -1;
    }
    return 0;
}

static int is_not_forwarded(const char *name, Py_ssize_t n)
{
    for (size_t i = 0; i < sizeof not_forwarded / sizeof not_forwarded[0]; i++)
        if ((Py_ssize_t)strlen(not_forwarded[i]) == n && memcmp(not_forwarded[i], name, (size_t)n) == 0)
            return 1;
    return 0;
}

/* A field's (name, value) pair as two byte strings; -1 with TypeError. */
static int field_parts(PyObject *pair, PyObject **name, PyObject **value)
{
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2
        || !PyBytes_Check(PyTuple_GET_ITEM(pair, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(pair, 1))) {
        PyErr_SetString(PyExc_TypeError, "fields must be (bytes, bytes) pairs");
        return -1;
    }
    *name = PyTuple_GET_ITEM(pair, 0);
    *value = PyTuple_GET_ITEM(pair, 1);
    return 0;
}

/* The tokens of the Connection fields (the fields they name are not
 * forwarded): a new set, or NULL with *error set when there are none or
 * on error.  Built only when such a field is there, as it seldom is. */
static PyObject *connection_tokens(PyObject *fields, int *error)
{
    PyObject *named = NULL;
    *error = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(fields); i++) {
        PyObject *name, *value;
        if (field_parts(PyList_GET_ITEM(fields, i), &name, &value) < 0)
            goto fail;
        if (PyBytes_GET_SIZE(name) != 10 || memcmp(PyBytes_AS_STRING(name), "connection", 10) != 0)
            continue;
        if (!named && !(named = PySet_New(NULL)))
            goto fail;
        if (add_tokens(named, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value)) < 0)
            goto fail;
    }
    return named;
fail:
    Py_XDECREF(named);
    *error = 1;
    return NULL;
}

/* Whether field i goes to the backend; -1 on a bad field.  *xff is set to
 * the value of an X-Forwarded-For field (the last one wins). */
static int forwarded(PyObject *fields, Py_ssize_t i, PyObject *named, PyObject **xff)
{
    PyObject *name, *value;
    if (field_parts(PyList_GET_ITEM(fields, i), &name, &value) < 0)
        return -1;
    const char *n = PyBytes_AS_STRING(name);
    Py_ssize_t nlen = PyBytes_GET_SIZE(name);
    if (nlen == 15 && memcmp(n, "x-forwarded-for", 15) == 0)
        *xff = value;
    if (is_not_forwarded(n, nlen))
        return 0;
    if (!named)
        return 1;
    int in = PySet_Contains(named, name);
    return in < 0 ? -1 : !in;
}

/* Appends prefix, text (n bytes) and a CRLF at *out. */
static void put_line(char **out, const char *prefix, const char *text, size_t n)
{
    size_t p = strlen(prefix);
    memcpy(*out, prefix, p);
    memcpy(*out + p, text, n);
    memcpy(*out + p + n, "\r\n", 2);
    *out += p + n + 2;
}

PyObject *module_backend_head(PyObject *Py_UNUSED(module), PyObject *const *args,
                              Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "_backend_head takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *fields = args[0], *lines = args[1];
    if (!PyList_Check(fields) || !PyList_Check(lines)
        || PyList_GET_SIZE(fields) != PyList_GET_SIZE(lines)) {
        PyErr_SetString(PyExc_TypeError, "fields and lines must be lists of one length");
        return NULL;
    }
    Py_ssize_t rlen, hlen;
    const char *remote = PyUnicode_AsUTF8AndSize(args[2], &rlen);
    if (!remote)
        return NULL;
    if (!PyBytes_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "host must be bytes");
        return NULL;
    }
    const char *host = PyBytes_AS_STRING(args[3]);
    hlen = PyBytes_GET_SIZE(args[3]);
    int chunked = PyObject_IsTrue(args[4]);
    unsigned long long length = PyLong_AsUnsignedLongLong(args[5]);
    int bodyless = PyObject_IsTrue(args[6]);
    int secure = PyObject_IsTrue(args[7]);
    if (chunked < 0 || bodyless < 0 || secure < 0 || PyErr_Occurred())
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(fields);
    int error;
    PyObject *named = connection_tokens(fields, &error);
    if (error)
        return NULL;
    unsigned char small[64];
    unsigned char *keep = count <= 64 ? small : PyMem_Malloc((size_t)count);
    if (!keep) {
        Py_XDECREF(named);
        return PyErr_NoMemory();
    }
    PyObject *xff = NULL;
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int k = forwarded(fields, i, named, &xff);
        PyObject *line = PyList_GET_ITEM(lines, i);
        if (k > 0 && !PyBytes_Check(line)) {
            PyErr_SetString(PyExc_TypeError, "lines must be bytes");
            k = -1;
        }
        if (k < 0) {
            if (keep != small)
                PyMem_Free(keep);
            Py_XDECREF(named);
            return NULL;
        }
        keep[i] = (unsigned char)k;
        if (k)
            size += PyBytes_GET_SIZE(line) + 2;
    }
    Py_ssize_t xlen = xff ? PyBytes_GET_SIZE(xff) : 0;
    char number[24];
    int nlen = snprintf(number, sizeof number, "%llu", length);
    int has_length = !chunked && (length || !bodyless);
    size += (xlen || rlen) ? 17 + xlen + (xlen && rlen ? 2 : 0) + rlen + 2 : 0;
    size += 25 + secure + (hlen ? 18 + hlen + 2 : 0) + (chunked ? 28 : 0)
            + (has_length ? 16 + nlen + 2 : 0) + 2;
    PyObject *result = PyBytes_FromStringAndSize(NULL, size);
    if (result) {
        char *out = PyBytes_AS_STRING(result);
        for (Py_ssize_t i = 0; i < count; i++)
            if (keep[i]) {
                PyObject *line = PyList_GET_ITEM(lines, i);
                put_line(&out, "", PyBytes_AS_STRING(line), (size_t)PyBytes_GET_SIZE(line));
            }
        if (xlen || rlen) {
            memcpy(out, "X-Forwarded-For: ", 17);
            out += 17;
            if (xlen) {
                memcpy(out, PyBytes_AS_STRING(xff), (size_t)xlen);
                out += xlen;
            }
            put_line(&out, xlen && rlen ? ", " : "", remote, (size_t)rlen);
        }
        put_line(&out, secure ? "X-Forwarded-Proto: https" : "X-Forwarded-Proto: http", "", 0);
        if (hlen)
            put_line(&out, "X-Forwarded-Host: ", host, (size_t)hlen);
        if (chunked)
            put_line(&out, "Transfer-Encoding: chunked", "", 0);
        else if (has_length)
            put_line(&out, "Content-Length: ", number, (size_t)nlen);
        memcpy(out, "\r\n", 2);
    }
    if (keep != small)
        PyMem_Free(keep);
    Py_XDECREF(named);
    return result;
}
