/*
 * alloc.h - the engine's allocator hook (private to the C sources).
 *
 * Every engine allocation goes through CHASH_MALLOC, CHASH_REALLOC and
 * CHASH_FREE.  Each defaults to the C library's function; a build (or a
 * test that includes an engine .c file directly) may define any of them
 * first, e.g. to make allocations fail on purpose.  Not part of the public
 * API: chash.h never includes it.
 */
#ifndef CHASH_ALLOC_H
#define CHASH_ALLOC_H

#include <stdlib.h>

#ifndef CHASH_MALLOC
#define CHASH_MALLOC malloc
#endif
#ifndef CHASH_REALLOC
#define CHASH_REALLOC realloc
#endif
#ifndef CHASH_FREE
#define CHASH_FREE free
#endif

#endif /* CHASH_ALLOC_H */
