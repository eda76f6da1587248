/*
 * epoch.c - the records and the global epoch of epoch-based reclamation
 * (epoch.h).  Part of chash._chash.
 */
#include "epoch.h"

#ifndef Py_GIL_DISABLED

unsigned long epoch_readers;

#else

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

_Thread_local epoch_record *epoch_mine EPOCH_TLS;
uint64_t epoch_global = 1;

/* Every record ever made, newest first; only ever pushed onto. */
static epoch_record *records;
static pthread_key_t record_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_made;

/* At a thread's end: its record is free for another thread (outside any
 * read: a thread ends with no read section open). */
static void hand_back(void *record)
{
    epoch_record *r = record;
    __atomic_store_n(&r->epoch, 0, __ATOMIC_RELEASE);
    r->depth = 0;
    __atomic_store_n(&r->in_use, 0, __ATOMIC_RELEASE);
}

static void make_key(void)
{
    key_made = pthread_key_create(&record_key, hand_back) == 0;
}

epoch_record *epoch_claim(void)
{
    (void)pthread_once(&key_once, make_key);
    epoch_record *r;
    for (r = __atomic_load_n(&records, __ATOMIC_ACQUIRE); r; r = r->next) {
        int free_one = 0;
        if (__atomic_load_n(&r->in_use, __ATOMIC_RELAXED) == 0
            && __atomic_compare_exchange_n(&r->in_use, &free_one, 1, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_RELAXED))
            break;
    }
    if (!r) {
        r = aligned_alloc(64, sizeof *r);
        if (!r)
            return NULL;
        memset(r, 0, sizeof *r);
        r->in_use = 1;
        r->next = __atomic_load_n(&records, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&records, &r->next, r, 1, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED))
            ;
    }
    /* Without the key the record stays with the thread past its end
     * (never reused): memory kept, never a reader missed. */
    if (key_made)
        (void)pthread_setspecific(record_key, r);
    epoch_mine = r;
    return r;
}

uint64_t epoch_advance(void)
{
    return __atomic_fetch_add(&epoch_global, 1, __ATOMIC_SEQ_CST);
}

uint64_t epoch_oldest(void)
{
    uint64_t oldest = UINT64_MAX;
    for (epoch_record *r = __atomic_load_n(&records, __ATOMIC_ACQUIRE); r; r = r->next) {
        uint64_t e = __atomic_load_n(&r->epoch, __ATOMIC_SEQ_CST);
        if (e && e < oldest)
            oldest = e;
    }
    return oldest;
}

#endif
