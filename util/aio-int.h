/*
 * AioContext internals shared by async.c (contexts, bottom halves,
 * coroutine scheduling), aio-posix.c (fd handlers, aio_poll) and
 * qemu-timer.c (timers).
 *
 * Guards:
 *  - "atomic": written from any thread with __atomic builtins;
 *  - "home": only the thread that polls the context touches it.
 */
#ifndef QBLOCK_AIO_INT_H
#define QBLOCK_AIO_INT_H

#include "util/aio.h"

#include <sys/queue.h>

typedef struct AioHandler AioHandler;

/*
 * A batch of bottom halves taken from the context's list by one
 * aio_bh_poll().  Slices of nested polls are chained so that a nested
 * aio_poll() also runs what its caller took but has not run yet.
 */
typedef struct BHListSlice {
    QEMUBH *head;
    TAILQ_ENTRY(BHListSlice) next;
} BHListSlice;

struct AioContext {
    int refcnt;                     /* atomic */

    /* Bottom halves. */
    QEMUBH *bh_list;                /* atomic: LIFO stack of pending BHs */
    TAILQ_HEAD(, BHListSlice) bh_slices;    /* home */

    /*
     * Wake-ups.  notify_me is set while aio_poll() may sleep in
     * epoll_wait(); aio_notify() writes the eventfd only then.  notified
     * records that aio_notify() was called since the last poll, so that a
     * poll about to sleep does not miss it.
     */
    EventNotifier notifier;
    bool notify_me;                 /* atomic */
    bool notified;                  /* atomic */

    /* fd handlers (aio-posix.c). */
    int epollfd;
    TAILQ_HEAD(, AioHandler) handlers;          /* home */
    TAILQ_HEAD(, AioHandler) deleted_handlers;  /* home */
    unsigned int walking_handlers;  /* home: dispatch nesting depth */
    unsigned int epoll_skips;       /* home: see aio_poll() */

    /*
     * Busy-polling (aio-posix.c invariants 4-6).  The parameters are
     * written by any thread (aio_context_set_poll_params()), read by the
     * home at each aio_poll(); the rest is the home's.
     */
    int64_t poll_max_ns;            /* atomic */
    int64_t poll_grow;              /* atomic */
    int64_t poll_shrink;            /* atomic */
    int64_t poll_ns;                /* home: the current window */
    bool poll_mode;                 /* home: invariant 7 */
    unsigned int epoll_only_cnt;    /* home: handlers epoll alone sees */
    AioPollStats poll_stats;        /* home */

    /* aio_context_set_aio_params(): 0, or the most requests a batch has */
    int64_t aio_max_batch;          /* atomic */

    /* Timers, earliest first (qemu-timer.c). */
    TAILQ_HEAD(, QEMUTimer) timers; /* home */

    /* Coroutines scheduled with aio_co_schedule(). */
    Coroutine *scheduled_coroutines;    /* atomic: LIFO stack */
    QEMUBH *co_schedule_bh;

    /*
     * The worker pool, made at its first use (aio_get_thread_pool()), and
     * the limits it takes (aio_context_set_thread_pool_params()), under
     * thread_pool_lock: whether the limits are set before the pool is
     * made or after, the pool ends with the last ones set.
     */
    GMutex thread_pool_lock;
    ThreadPool *thread_pool;        /* atomic; written under the lock */
    int thread_pool_min;            /* thread_pool_lock */
    int thread_pool_max;            /* thread_pool_lock */

    /*
     * Ownership (aio-wait.c): the thread that polls the context (home,
     * NULL for the main context, whose owner is its first caller) and the
     * thread that took it over with aio_context_acquire(), under
     * owner_lock.  Invariants 1-3 of aio-wait.c.
     */
    GMutex owner_lock;
    GCond owner_cond;
    GThread *home;                  /* owner_lock; written by the home */
    GThread *acquirer;              /* owner_lock */
    unsigned int acquire_depth;     /* the acquirer's thread only */
    bool park_requested;            /* owner_lock */
    bool parked;                    /* owner_lock */
};

/* async.c */
bool aio_bh_pending(AioContext *ctx);
/* Runs the pending bottom halves; true if any callback ran. */
bool aio_bh_poll(AioContext *ctx);

/* aio-posix.c */
int aio_context_setup(AioContext *ctx, Error **errp);
void aio_context_destroy(AioContext *ctx);

/* aio-wait.c */
void aio_context_owner_init(AioContext *ctx);
void aio_context_owner_destroy(AioContext *ctx);

/* qemu-timer.c */
/* Nanoseconds until the earliest timer, or -1 if none is armed. */
int64_t aio_timers_deadline_ns(AioContext *ctx);
/* Runs the expired timers; true if any callback ran. */
bool aio_timers_run(AioContext *ctx);
/* Disarms every timer of @ctx (their owners still free them). */
void aio_timers_cleanup(AioContext *ctx);

#endif
