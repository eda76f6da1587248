/*
 * epoch.h - epoch-based reclamation of the routers' replaced states
 * (epoch.c), the one place the binding decides when memory a concurrent
 * reader may still read can be freed.
 *
 * A reader brackets every use of a router's published state with
 * epoch_enter() / epoch_exit(): enter writes the global epoch into the
 * calling thread's own record (one record a thread, on its own cache
 * line: no memory another reader writes), exit writes 0 there.  A writer
 * publishes its new state first, then takes epoch_advance()'s value E for
 * the state it replaced; that state may be freed once epoch_oldest() > E,
 * i.e. once no record shows an epoch <= E.  Why this is safe: a reader
 * whose record shows an epoch > E read the global epoch after the writer
 * advanced it, so after the new state was published, and loads only the
 * new one (or a later); a reader whose record showed 0 when the writer
 * looked stored its epoch later, in the same total order of sequentially
 * consistent operations, so it too loads the state after the one
 * replaced.  Neither wait: enter and exit never block, and a writer that
 * finds a replaced state still in use keeps it for a later try.  Enter's
 * store, the writer's advance and look, and both sides' loads of the
 * state pointer are sequentially consistent.  Sections nest (a reader's
 * key may call Python code that reads another router): only the
 * outermost writes the record.  A thread's record is taken at its first
 * read and handed back, for another thread to reuse, when the thread
 * ends; records are never freed.
 *
 * With the GIL (a build without Py_GIL_DISABLED) there are no records: a
 * read section adds one to a process-wide count on entry and takes it off
 * on exit, both under the GIL, and a writer (holding the GIL) frees
 * replaced states only when the count is 0.  A reader holding a state
 * holds its section open, even while it runs Python code that lets the GIL
 * go, or routes a batch without the GIL; so a count of 0 means no reader
 * holds any state.  Every interpreter that imports the module shares the
 * main GIL (the module does not declare a GIL of its own per interpreter).
 */
#ifndef CHASH_PY_EPOCH_H
#define CHASH_PY_EPOCH_H

#include "binding.h"

#include <stdint.h>

#ifdef Py_GIL_DISABLED

typedef struct epoch_record {
    uint64_t epoch;     /* the epoch the thread read in, 0 outside a read */
    unsigned depth;     /* read sections open in the thread */
    int in_use;         /* owned by a live thread */
    struct epoch_record *next;
    char pad[64 - 2 * sizeof(uint64_t) - sizeof(void *)]; /* its own cache line */
} epoch_record;

/* The calling thread's record, claimed at its first read (NULL when out
 * of memory; no exception is set: the caller sets MemoryError). */
epoch_record *epoch_claim(void);

/* The calling thread's record.  Initial-exec TLS: an offset from the
 * thread pointer, where the default model for a shared object calls
 * __tls_get_addr on every read section (a tenth of a single lookup).  It
 * takes 8 bytes of the static TLS that glibc keeps for modules loaded
 * later (hundreds of bytes). */
#if defined(__GNUC__) && defined(__linux__)
#define EPOCH_TLS __attribute__((tls_model("initial-exec")))
#else
#define EPOCH_TLS
#endif
extern _Thread_local epoch_record *epoch_mine EPOCH_TLS;
extern uint64_t epoch_global;

/* Opens a read section; 0, or -1 with MemoryError (no record). */
static inline int epoch_enter(void)
{
    epoch_record *r = epoch_mine;
    if (!r && !(r = epoch_claim())) {
        PyErr_NoMemory();
        return -1;
    }
    if (r->depth++ == 0)
        __atomic_store_n(&r->epoch, __atomic_load_n(&epoch_global, __ATOMIC_SEQ_CST),
                         __ATOMIC_SEQ_CST);
    return 0;
}

/* Closes the section epoch_enter() opened (it succeeded). */
static inline void epoch_exit(void)
{
    epoch_record *r = epoch_mine;
    if (--r->depth == 0)
        __atomic_store_n(&r->epoch, 0, __ATOMIC_RELEASE);
}

/* After publishing a new state: the epoch to retire the old one at. */
uint64_t epoch_advance(void);

/* The smallest epoch any reader is in (UINT64_MAX: none): a state
 * retired at E may be freed when E < epoch_oldest(). */
uint64_t epoch_oldest(void);

#else /* the GIL */

/* Read sections open in the process, counted under the GIL. */
extern unsigned long epoch_readers;

static inline int epoch_enter(void)
{
    epoch_readers++;
    return 0;
}

static inline void epoch_exit(void)
{
    epoch_readers--;
}

/* Every state is retired at 1, and may be freed when no section is open. */
static inline uint64_t epoch_advance(void)
{
    return 1;
}

static inline uint64_t epoch_oldest(void)
{
    return epoch_readers ? 0 : UINT64_MAX;
}

#endif

#endif /* CHASH_PY_EPOCH_H */
