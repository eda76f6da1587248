/*
 * fuzz_support.h - what the fuzz targets that include the files under test
 * share: an allocator that fails on demand and FZ_ASSERT.
 *
 * A target defines FZ_NAME (its name, as a string) before including this,
 * then points CHASH_MALLOC / CHASH_REALLOC at fz_malloc / fz_realloc (those
 * of them the files under test should fail) before including them.
 *
 *   fz_countdown  allocations left before one fails; < 0 never.  The one
 *                 that fails sets it back to -1, so only one fails.
 *   FZ_ASSERT     prints "FZ_NAME: file:line: assertion failed: cond" and
 *                 aborts (tests/fuzz/run.sh looks for "FZ_NAME: ").
 */
#ifndef CHASH_FUZZ_SUPPORT_H
#define CHASH_FUZZ_SUPPORT_H

#include <stdio.h>
#include <stdlib.h>

#ifndef FZ_NAME
#error "define FZ_NAME (the target's name) before including fuzz_support.h"
#endif

static long fz_countdown = -1; /* allocations left before one fails; < 0 never */

/* Whether the next allocation may succeed: the countdown's last one fails
 * (once), the others pass. */
static inline int fz_allowed(void)
{
    if (fz_countdown == 0) {
        fz_countdown = -1;
        return 0;
    }
    if (fz_countdown > 0)
        fz_countdown--;
    return 1;
}

static inline void *fz_malloc(size_t size)
{
    return fz_allowed() ? malloc(size) : NULL;
}

static inline void *fz_realloc(void *p, size_t size)
{
    return fz_allowed() ? realloc(p, size) : NULL;
}

#define FZ_ASSERT(cond)                                                              \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, FZ_NAME ": %s:%d: assertion failed: %s\n", __FILE__,     \
                    __LINE__, #cond);                                                \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#endif
