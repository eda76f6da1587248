/*
 * check.h - the C tests' one assertion macro.  CHECK counts a pass or
 * prints the failed condition and counts a failure; check_report() prints
 * the closing "N passed, M failed" line and gives the exit status.
 */
#ifndef CHASH_TEST_CHECK_H
#define CHASH_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (cond) {                                                          \
            passed++;                                                        \
        } else {                                                             \
            failed++;                                                        \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                    \
    } while (0)

static inline int check_report(void)
{
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}

#endif /* CHASH_TEST_CHECK_H */
