/* One MD5 of a key and nothing else, in C: what no get_node of an MD5 ring
 * can go below.  bench_uhashring.py builds this with the extension's
 * release flags and drives it as a coprocess, so its samples interleave
 * with the Python rows of the same run.
 *
 * stdin: the keys, one a line, then an empty line; then commands, one a
 * line, "chash|openssl START COUNT PASSES", each answered on stdout with
 * "WALL_NS CPU_NS" for PASSES passes over COUNT keys from START (wrapping),
 * one MD5 each.  "openssl" is OpenSSL's MD5 (hand-written assembly on
 * x86-64), there only when built with CHASH_WITH_OPENSSL; without it the
 * answer is "none".  End of input ends the program. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash/hash.h"
#ifdef CHASH_WITH_OPENSSL
#include <openssl/md5.h>
#endif

typedef struct {
    char *text;
    size_t len;
} Key;

static int64_t ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Every digest's first byte goes here, so no pass can be left out. */
static volatile uint8_t sink;

static void run_chash(const Key *keys, size_t n, size_t start, size_t count, long passes)
{
    uint8_t digest[CHASH_MD5_DIGEST_SIZE], acc = 0;
    for (long p = 0; p < passes; p++)
        for (size_t i = 0; i < count; i++) {
            const Key *k = &keys[(start + i) % n];
            chash_md5(k->text, k->len, digest);
            acc ^= digest[0];
        }
    sink = acc;
}

#ifdef CHASH_WITH_OPENSSL
static void run_openssl(const Key *keys, size_t n, size_t start, size_t count, long passes)
{
    unsigned char digest[MD5_DIGEST_LENGTH];
    uint8_t acc = 0;
    for (long p = 0; p < passes; p++)
        for (size_t i = 0; i < count; i++) {
            const Key *k = &keys[(start + i) % n];
            MD5((const unsigned char *)k->text, k->len, digest);
            acc ^= digest[0];
        }
    sink = acc;
}
#endif

int main(void)
{
    Key *keys = NULL;
    size_t n = 0, cap = 0, size = 0;
    char *line = NULL;
    ssize_t got;
    while ((got = getline(&line, &size, stdin)) > 0) {
        size_t len = (size_t)got;
        if (line[len - 1] == '\n')
            len--;
        if (len == 0)
            break;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            Key *grown = realloc(keys, cap * sizeof *keys);
            if (grown == NULL)
                return 1;
            keys = grown;
        }
        keys[n].text = malloc(len);
        if (keys[n].text == NULL)
            return 1;
        memcpy(keys[n].text, line, len);
        keys[n++].len = len;
    }
    if (n == 0)
        return 2;
    char which[16];
    size_t start, count;
    long passes;
    while ((got = getline(&line, &size, stdin)) > 0) {
        if (sscanf(line, "%15s %zu %zu %ld", which, &start, &count, &passes) != 4 || passes < 1)
            return 2;
        void (*run)(const Key *, size_t, size_t, size_t, long) = NULL;
        if (strcmp(which, "chash") == 0)
            run = run_chash;
#ifdef CHASH_WITH_OPENSSL
        else if (strcmp(which, "openssl") == 0)
            run = run_openssl;
#endif
        if (run == NULL) {
            printf("none\n");
            fflush(stdout);
            continue;
        }
        int64_t cpu = ns(CLOCK_THREAD_CPUTIME_ID), wall = ns(CLOCK_MONOTONIC);
        run(keys, n, start % n, count, passes);
        wall = ns(CLOCK_MONOTONIC) - wall;
        cpu = ns(CLOCK_THREAD_CPUTIME_ID) - cpu;
        printf("%lld %lld\n", (long long)wall, (long long)cpu);
        fflush(stdout);
    }
    free(line);
    for (size_t i = 0; i < n; i++)
        free(keys[i].text);
    free(keys);
    return 0;
}
