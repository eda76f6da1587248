/*
 * failing_alloc.h - an allocator that fails on demand, for tests that
 * include an engine .c file directly: set fail_countdown to n and the
 * (n + 1)-th allocation from then on returns NULL; < 0 never fails.
 * Include before the .c file; it defines CHASH_MALLOC and CHASH_REALLOC.
 */
#ifndef CHASH_TEST_FAILING_ALLOC_H
#define CHASH_TEST_FAILING_ALLOC_H

#include <stdlib.h>

static long fail_countdown = -1;

static inline int allocation_allowed(void)
{
    if (fail_countdown == 0)
        return 0;
    if (fail_countdown > 0)
        fail_countdown--;
    return 1;
}

static inline void *test_malloc(size_t size)
{
    return allocation_allowed() ? malloc(size) : NULL;
}

static inline void *test_realloc(void *p, size_t size)
{
    return allocation_allowed() ? realloc(p, size) : NULL;
}

#define CHASH_MALLOC test_malloc
#define CHASH_REALLOC test_realloc

#endif /* CHASH_TEST_FAILING_ALLOC_H */
