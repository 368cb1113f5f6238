/*
 * A pool of worker threads for blocking work (preadv/pwritev, fsync,
 * fallocate, compression).  Each AioContext has its own pool; a completed
 * job's callback, or the coroutine waiting for it, runs in that context.
 */
#ifndef QBLOCK_THREAD_POOL_H
#define QBLOCK_THREAD_POOL_H

#include "util/osdep.h"
#include "util/aio.h"

/* Runs in a worker thread; the return value goes to the completion. */
typedef int ThreadPoolFunc(void *opaque);
typedef void ThreadPoolCompletionFunc(void *opaque, int ret);

ThreadPool *thread_pool_new(AioContext *ctx);
/* Waits for every job to finish, then frees the pool. */
void thread_pool_free(ThreadPool *pool);

/*
 * Runs @func(@arg) in a worker and yields until it is done; returns its
 * return value.
 */
int coroutine_fn thread_pool_submit_co(ThreadPool *pool, ThreadPoolFunc *func,
                                       void *arg);
/* Runs @func(@arg) in a worker; @cb(@opaque, ret) then runs in the pool's
 * AioContext. */
void thread_pool_submit_aio(ThreadPool *pool, ThreadPoolFunc *func, void *arg,
                            ThreadPoolCompletionFunc *cb, void *opaque);
/* QEMU's default most workers a pool has (the least is 0). */
#define THREAD_POOL_MAX_DEFAULT 64

/*
 * The least workers @pool keeps, started now and kept when idle, and the
 * most it has; 0 <= @min_threads <= @max_threads, @max_threads > 0.
 * Workers over a lowered maximum exit once they are idle.
 */
void thread_pool_set_limits(ThreadPool *pool, int min_threads,
                            int max_threads);

#endif
