/*
 * Worker threads for blocking work, one pool per AioContext.
 *
 * Jobs wait in a FIFO under pool->lock.  Workers are started on demand, up
 * to max_threads, when no idle worker is left to take a new job; a worker
 * that stays idle for THREAD_IDLE_TIMEOUT_S exits, unless it is one of the
 * min_threads the pool keeps (QEMU's thread-pool-min, for a guest whose
 * requests should not wait for a thread to start).  A finished job is
 * pushed on a lock-free completion stack and the pool's bottom half is
 * scheduled; that bottom half runs in the pool's context and completes
 * every finished job at once, so a burst of completions costs at most one
 * eventfd write (none while the loop is busy).
 *
 * Invariants (under pool->lock):
 *  1. idle_threads counts the workers waiting for a job and not yet
 *     claimed; wakeups counts the claims not yet taken by a worker.  A
 *     submitter that finds idle_threads > 0 claims one and signals.
 *  2. cur_threads counts the started workers that have not exited; while
 *     it exceeds max_threads (lowered at run time), workers retire
 *     instead of taking a job, idle ones at once.
 *  3. A job is in exactly one place: the request queue, a worker, the
 *     completion stack, or (once completed) nowhere: a submit_co job lives
 *     on the waiting coroutine's stack and is not touched after the wake.
 *  4. At most one worker is on its way to the queue (wakeups +
 *     starting_threads <= 1), and whenever jobs wait, one is, or a busy
 *     worker will look at the queue when its job is done.  A worker that
 *     takes a job and sees more waiting sends the next one.  So quick jobs
 *     are served by the workers already awake instead of waking (or
 *     starting) a thread per job, while slow jobs still spread over more
 *     workers, one wake-up latency apart.
 *  5. While min_threads > 0, at least min_threads workers have started
 *     (or failed to: there is no retry) since it was set, and an idle
 *     worker only times out while cur_threads > min_threads.  The workers
 *     started for the minimum are not "on their way" (invariant 4).
 */
#include "util/osdep.h"
#include "util/thread-pool.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

/* An idle worker exits after this long, so a burst leaves no threads. */
#define THREAD_IDLE_TIMEOUT_S 10

typedef struct ThreadPoolElement ThreadPoolElement;

struct ThreadPoolElement {
    ThreadPoolFunc *func;
    void *arg;
    int ret;
    /* Either a coroutine to wake or a callback to run. */
    Coroutine *co;
    ThreadPoolCompletionFunc *cb;
    void *opaque;
    ThreadPoolElement *next;
    GList link;                 /* in pool->requests: queued without malloc */
};

struct ThreadPool {
    AioContext *ctx;
    QEMUBH *completion_bh;
    ThreadPoolElement *completed;   /* atomic: LIFO stack */

    /* pthread rather than GLib locks, so that ThreadSanitizer sees them. */
    pthread_mutex_t lock;
    pthread_cond_t request_cond;    /* a job or a claim is ready */
    pthread_cond_t stopped_cond;    /* a worker exited */
    GQueue requests;                /* ThreadPoolElement.link, FIFO */
    int cur_threads;
    int starting_threads;
    int idle_threads;
    int wakeups;
    int min_threads;
    int max_threads;
    bool stopping;
};

static void thread_pool_complete(ThreadPool *pool, ThreadPoolElement *req)
{
    ThreadPoolElement *head = __atomic_load_n(&pool->completed,
                                              __ATOMIC_RELAXED);

    do {
        req->next = head;
    } while (!__atomic_compare_exchange_n(&pool->completed, &head, req, true,
                                          __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
    qemu_bh_schedule(pool->completion_bh);
}

/* Waits for a job; false when the worker should exit.  Lock held. */
static bool thread_pool_wait_for_work(ThreadPool *pool)
{
    struct timespec deadline;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += THREAD_IDLE_TIMEOUT_S;

    pool->idle_threads++;
    for (;;) {
        int ret = pthread_cond_timedwait(&pool->request_cond, &pool->lock,
                                         &deadline);

        if (pool->wakeups > 0) {
            /* Invariant 1: the claimer already took us off idle. */
            pool->wakeups--;
            return true;
        }
        if (pool->stopping || pool->cur_threads > pool->max_threads) {
            /* Invariant 2 */
            break;
        }
        if (ret == ETIMEDOUT) {
            if (pool->cur_threads > pool->min_threads) {
                break;
            }
            /* Invariant 5: one of the minimum stays */
            deadline.tv_sec += THREAD_IDLE_TIMEOUT_S;
        }
    }
    pool->idle_threads--;
    return false;
}

static bool thread_pool_kick(ThreadPool *pool);

/* A worker's life, from its start with the lock held to its exit. */
static void thread_pool_work(ThreadPool *pool)
{
    for (;;) {
        GList *link;

        if (pool->cur_threads > pool->max_threads) {
            /* The maximum was lowered: retire. */
            break;
        }
        link = g_queue_pop_head_link(&pool->requests);
        if (link) {
            ThreadPoolElement *req = link->data;
            /* Invariant 4: more jobs wait, get the next worker going. */
            bool kick = thread_pool_kick(pool);

            pthread_mutex_unlock(&pool->lock);
            if (kick) {
                pthread_cond_signal(&pool->request_cond);
            }
            req->ret = req->func(req->arg);
            thread_pool_complete(pool, req);
            pthread_mutex_lock(&pool->lock);
            continue;
        }
        if (pool->stopping || !thread_pool_wait_for_work(pool)) {
            break;
        }
    }
    pool->cur_threads--;
    /* We may have been the worker on its way to a job: pass it on. */
    if (thread_pool_kick(pool)) {
        pthread_cond_signal(&pool->request_cond);
    }
    pthread_cond_signal(&pool->stopped_cond);
    pthread_mutex_unlock(&pool->lock);
}

/* A worker started for a job: on its way to the queue (invariant 4). */
static void *thread_pool_worker(void *opaque)
{
    ThreadPool *pool = opaque;

    pthread_mutex_lock(&pool->lock);
    pool->starting_threads--;
    thread_pool_work(pool);
    return NULL;
}

/* A worker started for the minimum (invariant 5). */
static void *thread_pool_reserve_worker(void *opaque)
{
    ThreadPool *pool = opaque;

    pthread_mutex_lock(&pool->lock);
    thread_pool_work(pool);
    return NULL;
}

/* Lock held.  Starts a worker at @entry: 0, or pthread_create's error. */
static int thread_pool_start(ThreadPool *pool, void *(*entry)(void *))
{
    sigset_t all, old;
    pthread_attr_t attr;
    pthread_t thread;
    int ret;

    /* Workers take no signals: they belong to the threads that own them. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    ret = pthread_create(&thread, &attr, entry, pool);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ret == 0) {
        pool->cur_threads++;
    }
    return ret;
}

/* Lock held.  Starts a worker on its way to the queue (invariant 4). */
static void thread_pool_spawn(ThreadPool *pool)
{
    int ret = thread_pool_start(pool, thread_pool_worker);

    if (ret == 0) {
        pool->starting_threads++;
    } else if (pool->cur_threads == 0) {
        /* Without a single worker the job would never run. */
        fprintf(stderr, "%s: cannot start a thread pool worker: %s\n",
                qemu_get_progname(), strerror(ret));
        abort();
    }
}

/*
 * Lock held.  Gets a worker going if jobs wait and none is on its way
 * (invariant 4); returns true if the caller must signal request_cond once
 * it has dropped the lock.
 */
static bool thread_pool_kick(ThreadPool *pool)
{
    if (g_queue_is_empty(&pool->requests) ||
        pool->wakeups + pool->starting_threads > 0) {
        return false;
    }
    if (pool->idle_threads > 0) {
        /* Invariant 1 */
        pool->idle_threads--;
        pool->wakeups++;
        return true;
    }
    if (pool->cur_threads < pool->max_threads) {
        thread_pool_spawn(pool);
    }
    return false;
}

static void thread_pool_submit(ThreadPool *pool, ThreadPoolElement *req)
{
    bool kick;

    pthread_mutex_lock(&pool->lock);
    assert(!pool->stopping);
    req->link = (GList) { .data = req };
    g_queue_push_tail_link(&pool->requests, &req->link);
    kick = thread_pool_kick(pool);
    pthread_mutex_unlock(&pool->lock);
    /*
     * Signalled without the lock, so the worker does not wake up only to
     * block on it.  The claim is recorded, so even a worker that times out
     * meanwhile takes the job.
     */
    if (kick) {
        pthread_cond_signal(&pool->request_cond);
    }
}

static void thread_pool_completion_bh(void *opaque)
{
    ThreadPool *pool = opaque;
    ThreadPoolElement *req = __atomic_exchange_n(&pool->completed, NULL,
                                                 __ATOMIC_ACQUIRE);
    ThreadPoolElement *ordered = QEMU_LIST_REVERSED(req, next);

    while ((req = ordered)) {
        /* Invariant 3: read the link before the owner may reuse req. */
        ordered = req->next;
        if (req->co) {
            aio_co_wake(req->co);
        } else {
            req->cb(req->opaque, req->ret);
            g_free(req);
        }
    }
}

ThreadPool *thread_pool_new(AioContext *ctx)
{
    ThreadPool *pool = g_new0(ThreadPool, 1);
    pthread_condattr_t attr;

    pool->ctx = ctx;
    pool->completion_bh = aio_bh_new(ctx, thread_pool_completion_bh, pool);
    pthread_mutex_init(&pool->lock, NULL);
    /* The idle deadline is on the monotonic clock. */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&pool->request_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_cond_init(&pool->stopped_cond, NULL);
    g_queue_init(&pool->requests);
    pool->max_threads = THREAD_POOL_MAX_DEFAULT;
    return pool;
}

void thread_pool_free(ThreadPool *pool)
{
    if (!pool) {
        return;
    }
    pthread_mutex_lock(&pool->lock);
    /* Workers drain the queue before they see stopping and exit. */
    pool->stopping = true;
    pthread_cond_broadcast(&pool->request_cond);
    while (pool->cur_threads > 0) {
        pthread_cond_wait(&pool->stopped_cond, &pool->lock);
    }
    pthread_mutex_unlock(&pool->lock);

    /* Jobs finished but not completed yet get their completion now. */
    thread_pool_completion_bh(pool);
    qemu_bh_delete(pool->completion_bh);

    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->request_cond);
    pthread_cond_destroy(&pool->stopped_cond);
    g_free(pool);
}

int coroutine_fn thread_pool_submit_co(ThreadPool *pool, ThreadPoolFunc *func,
                                       void *arg)
{
    ThreadPoolElement req = {
        .func = func,
        .arg = arg,
        .co = qemu_coroutine_self(),
    };

    assert(req.co);
    thread_pool_submit(pool, &req);
    qemu_coroutine_yield();
    return req.ret;
}

void thread_pool_submit_aio(ThreadPool *pool, ThreadPoolFunc *func, void *arg,
                            ThreadPoolCompletionFunc *cb, void *opaque)
{
    ThreadPoolElement *req = g_new(ThreadPoolElement, 1);

    *req = (ThreadPoolElement) {
        .func = func,
        .arg = arg,
        .cb = cb,
        .opaque = opaque,
    };
    thread_pool_submit(pool, req);
}

void thread_pool_set_limits(ThreadPool *pool, int min_threads,
                            int max_threads)
{
    assert(0 <= min_threads && min_threads <= max_threads && max_threads > 0);
    pthread_mutex_lock(&pool->lock);
    pool->min_threads = min_threads;
    pool->max_threads = max_threads;
    /* Invariant 5; a worker the system refuses is not tried again */
    while (pool->cur_threads < pool->min_threads &&
           thread_pool_start(pool, thread_pool_reserve_worker) == 0) {
    }
    pthread_mutex_unlock(&pool->lock);
    /* Invariant 2: the idle ones above the maximum retire now */
    pthread_cond_broadcast(&pool->request_cond);
}
