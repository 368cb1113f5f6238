/*
 * AioContext life cycle, bottom halves and coroutine scheduling.
 *
 * Bottom halves are scheduled from any thread without a lock and without
 * allocation: scheduling sets BH_PENDING in the BH's flags and, if it was
 * not set yet, pushes the BH on the context's LIFO stack with a
 * compare-and-swap.  aio_bh_poll() takes the whole stack at once, reverses
 * it (so BHs run in scheduling order) and runs it as a "slice".
 *
 * Invariants:
 *  1. A BH is on at most one list (the context's stack or one slice), and
 *     is on one exactly while BH_PENDING is set.
 *  2. A BH's memory is freed only by aio_bh_poll() (or by the context's
 *     destruction), after it was dequeued with BH_DELETED or BH_ONESHOT;
 *     so a BH may delete itself from its own callback.
 *  3. aio_notify() writes the eventfd only if the owner may be sleeping
 *     (notify_me); scheduling a BH that is already pending does not
 *     notify again, so one wake-up serves a whole batch, and the owner's
 *     own thread never notifies for a BH.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "util/thread-pool.h"
#include "aio-int.h"
#include "coroutine-int.h"

enum {
    BH_PENDING = 1 << 0,    /* on a list (invariant 1) */
    BH_SCHEDULED = 1 << 1,  /* the callback should run */
    BH_DELETED = 1 << 2,    /* free when dequeued */
    BH_ONESHOT = 1 << 3,    /* free after running */
};

struct QEMUBH {
    AioContext *ctx;
    QEMUBHFunc *cb;
    void *opaque;
    QEMUBH *next;
    unsigned int flags;     /* atomic */
};

static AioContext *main_context;        /* atomic */
static GMutex main_context_lock;
static __thread AioContext *current_context;

static __attribute__((noinline)) AioContext *aio_get_thread_context(void)
{
    asm volatile("");
    return current_context;
}

static __attribute__((noinline)) void aio_set_thread_context(AioContext *ctx)
{
    asm volatile("");
    current_context = ctx;
}

/* Bottom halves */

static void aio_bh_enqueue(QEMUBH *bh, unsigned int new_flags)
{
    AioContext *ctx = bh->ctx;
    unsigned int old_flags;
    QEMUBH *head;

    old_flags = __atomic_fetch_or(&bh->flags, BH_PENDING | new_flags,
                                  __ATOMIC_SEQ_CST);
    if (old_flags & BH_PENDING) {
        return;     /* invariant 3: the pending schedule already notified */
    }
    head = __atomic_load_n(&ctx->bh_list, __ATOMIC_RELAXED);
    do {
        bh->next = head;
    } while (!__atomic_compare_exchange_n(&ctx->bh_list, &head, bh, true,
                                          __ATOMIC_SEQ_CST,
                                          __ATOMIC_RELAXED));
    /*
     * The context's own thread looks at its BHs before it sleeps
     * (invariant 3 of aio-posix.c); a notification from it would only make
     * the next aio_poll() skip a sleep it may take, at the cost of a
     * needless epoll_wait() once the BH has run.  (A signal handler, which
     * may interrupt that thread just before it sleeps, calls aio_notify()
     * itself, as qblock-nbd's does.)
     */
    if (ctx != aio_get_thread_context()) {
        aio_notify(ctx);
    }
}

static QEMUBH *aio_bh_new_flags(AioContext *ctx, QEMUBHFunc *cb,
                                void *opaque, unsigned int flags)
{
    QEMUBH *bh = g_new(QEMUBH, 1);

    *bh = (QEMUBH) {
        .ctx = ctx,
        .cb = cb,
        .opaque = opaque,
        .flags = flags,
    };
    return bh;
}

QEMUBH *aio_bh_new(AioContext *ctx, QEMUBHFunc *cb, void *opaque)
{
    return aio_bh_new_flags(ctx, cb, opaque, 0);
}

void aio_bh_schedule_oneshot(AioContext *ctx, QEMUBHFunc *cb, void *opaque)
{
    QEMUBH *bh = aio_bh_new_flags(ctx, cb, opaque, BH_ONESHOT);

    aio_bh_enqueue(bh, BH_SCHEDULED);
}

void qemu_bh_schedule(QEMUBH *bh)
{
    aio_bh_enqueue(bh, BH_SCHEDULED);
}

void qemu_bh_cancel(QEMUBH *bh)
{
    __atomic_fetch_and(&bh->flags, ~BH_SCHEDULED, __ATOMIC_SEQ_CST);
}

void qemu_bh_delete(QEMUBH *bh)
{
    /* Invariant 2: aio_bh_poll() frees it, even from its own callback. */
    aio_bh_enqueue(bh, BH_DELETED);
}

/* Takes the context's stack and reverses it into scheduling order. */
static QEMUBH *aio_bh_take_all(AioContext *ctx)
{
    QEMUBH *bh = __atomic_exchange_n(&ctx->bh_list, NULL, __ATOMIC_SEQ_CST);

    return QEMU_LIST_REVERSED(bh, next);
}

static QEMUBH *aio_bh_dequeue(BHListSlice *slice, unsigned int *flags)
{
    QEMUBH *bh = slice->head;

    if (!bh) {
        return NULL;
    }
    /* Read the link before BH_PENDING goes: a scheduler may then reuse it. */
    slice->head = bh->next;
    *flags = __atomic_fetch_and(&bh->flags,
                                ~(BH_PENDING | BH_SCHEDULED),
                                __ATOMIC_SEQ_CST);
    return bh;
}

bool aio_bh_pending(AioContext *ctx)
{
    BHListSlice *s;

    if (__atomic_load_n(&ctx->bh_list, __ATOMIC_RELAXED)) {
        return true;
    }
    TAILQ_FOREACH(s, &ctx->bh_slices, next) {
        if (s->head) {
            return true;
        }
    }
    return false;
}

bool aio_bh_poll(AioContext *ctx)
{
    BHListSlice slice = { .head = aio_bh_take_all(ctx) };
    BHListSlice *s;
    bool progress = false;

    TAILQ_INSERT_TAIL(&ctx->bh_slices, &slice, next);
    while ((s = TAILQ_FIRST(&ctx->bh_slices))) {
        unsigned int flags;
        QEMUBH *bh = aio_bh_dequeue(s, &flags);

        if (!bh) {
            TAILQ_REMOVE(&ctx->bh_slices, s, next);
            continue;
        }
        if ((flags & (BH_SCHEDULED | BH_DELETED)) == BH_SCHEDULED) {
            bh->cb(bh->opaque);
            progress = true;
        }
        if (flags & (BH_DELETED | BH_ONESHOT)) {
            g_free(bh);
        }
    }
    return progress;
}

/* Frees what is left when the context goes away. */
static void aio_bh_cleanup(AioContext *ctx)
{
    BHListSlice slice = { .head = aio_bh_take_all(ctx) };
    unsigned int flags;
    QEMUBH *bh;

    assert(TAILQ_EMPTY(&ctx->bh_slices));
    while ((bh = aio_bh_dequeue(&slice, &flags))) {
        if (flags & (BH_DELETED | BH_ONESHOT)) {
            g_free(bh);
        }
    }
}

/* Wake-ups */

void aio_notify(AioContext *ctx)
{
    /*
     * Pairs with aio_poll(): it sets notify_me, then reads notified and the
     * BH list; we publish notified (and the caller its BH), then read
     * notify_me.  Either it sees our news or we see that it may sleep.
     */
    __atomic_store_n(&ctx->notified, true, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&ctx->notify_me, __ATOMIC_SEQ_CST)) {
        event_notifier_set(&ctx->notifier);
    }
}

/* Coroutine scheduling */

static void co_schedule_bh_cb(void *opaque)
{
    AioContext *ctx = opaque;
    Coroutine *co = __atomic_exchange_n(&ctx->scheduled_coroutines, NULL,
                                        __ATOMIC_SEQ_CST);
    Coroutine *ordered = QEMU_LIST_REVERSED(co, co_scheduled_next);

    while ((co = ordered)) {
        ordered = co->co_scheduled_next;
        co->co_scheduled_next = NULL;
        __atomic_store_n(&co->scheduled, NULL, __ATOMIC_RELEASE);
        qemu_aio_coroutine_enter(ctx, co);
    }
}

void aio_co_schedule(AioContext *ctx, Coroutine *co)
{
    const char *expected = NULL;
    Coroutine *head;

    if (!__atomic_compare_exchange_n(&co->scheduled, &expected, __func__,
                                     false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "%s: coroutine scheduled twice (already by %s)\n",
                qemu_get_progname(), expected);
        abort();
    }
    head = __atomic_load_n(&ctx->scheduled_coroutines, __ATOMIC_RELAXED);
    do {
        co->co_scheduled_next = head;
    } while (!__atomic_compare_exchange_n(&ctx->scheduled_coroutines, &head,
                                          co, true, __ATOMIC_SEQ_CST,
                                          __ATOMIC_RELAXED));
    qemu_bh_schedule(ctx->co_schedule_bh);
}

void aio_co_enter(AioContext *ctx, Coroutine *co)
{
    /*
     * Invariant 3 of coroutine.h: never nest the woken coroutine inside a
     * running one, and never run it outside its context's thread.
     */
    if (ctx != aio_get_thread_context() || qemu_in_coroutine()) {
        aio_co_schedule(ctx, co);
        return;
    }
    qemu_aio_coroutine_enter(ctx, co);
}

typedef struct AioCoReschedule {
    Coroutine *co;
    AioContext *new_ctx;
} AioCoReschedule;

static void aio_co_reschedule_self_bh(void *opaque)
{
    AioCoReschedule *r = opaque;

    aio_co_schedule(r->new_ctx, r->co);
}

void coroutine_fn aio_co_reschedule_self(AioContext *new_ctx)
{
    Coroutine *self = qemu_coroutine_self();
    AioContext *old_ctx = qemu_coroutine_get_aio_context(self);
    AioCoReschedule r = { .co = self, .new_ctx = new_ctx };

    if (old_ctx == new_ctx) {
        return;
    }
    aio_bh_schedule_oneshot(old_ctx, aio_co_reschedule_self_bh, &r);
    qemu_coroutine_yield();
    assert(qemu_coroutine_get_aio_context(self) == new_ctx);
}

typedef struct AioCoRunAllItem {
    CoroutineEntry *fn;
    void *opaque;
    int *pending;
    Coroutine *waiter;
} AioCoRunAllItem;

static void coroutine_fn aio_co_run_all_entry(void *opaque)
{
    AioCoRunAllItem *item = opaque;

    item->fn(item->opaque);
    if (--*item->pending == 0) {
        aio_co_wake(item->waiter);
    }
}

void coroutine_fn aio_co_run_all(CoroutineEntry *fn, void **opaques, int n)
{
    g_autofree AioCoRunAllItem *items = g_new(AioCoRunAllItem, n);
    AioContext *ctx = qemu_coroutine_get_aio_context(qemu_coroutine_self());
    int pending = n;

    for (int i = 0; i < n; i++) {
        items[i] = (AioCoRunAllItem) {
            .fn = fn, .opaque = opaques[i], .pending = &pending,
            .waiter = qemu_coroutine_self(),
        };
        /* scheduled: none runs before the caller yields below */
        aio_co_enter(ctx, qemu_coroutine_create(aio_co_run_all_entry,
                                                &items[i]));
    }
    while (pending > 0) {
        qemu_coroutine_yield();
    }
}

void aio_co_wake(Coroutine *co)
{
    aio_co_enter(qemu_coroutine_get_aio_context(co), co);
}

/* Contexts */

AioContext *aio_context_new(Error **errp)
{
    AioContext *ctx = g_new0(AioContext, 1);

    ctx->refcnt = 1;
    g_mutex_init(&ctx->thread_pool_lock);
    ctx->thread_pool_max = THREAD_POOL_MAX_DEFAULT;
    TAILQ_INIT(&ctx->bh_slices);
    TAILQ_INIT(&ctx->handlers);
    TAILQ_INIT(&ctx->deleted_handlers);
    TAILQ_INIT(&ctx->timers);
    aio_context_owner_init(ctx);
    if (aio_context_setup(ctx, errp) < 0) {
        aio_context_owner_destroy(ctx);
        g_mutex_clear(&ctx->thread_pool_lock);
        g_free(ctx);
        return NULL;
    }
    ctx->co_schedule_bh = aio_bh_new(ctx, co_schedule_bh_cb, ctx);
    return ctx;
}

void aio_context_ref(AioContext *ctx)
{
    __atomic_fetch_add(&ctx->refcnt, 1, __ATOMIC_RELAXED);
}

void aio_context_unref(AioContext *ctx)
{
    if (__atomic_sub_fetch(&ctx->refcnt, 1, __ATOMIC_ACQ_REL) > 0) {
        return;
    }
    assert(ctx != main_context);
    if (ctx->thread_pool) {
        thread_pool_free(ctx->thread_pool);
        ctx->thread_pool = NULL;
    }
    /* A coroutine still scheduled here would never run again. */
    assert(!__atomic_load_n(&ctx->scheduled_coroutines, __ATOMIC_SEQ_CST));
    qemu_bh_delete(ctx->co_schedule_bh);
    aio_bh_cleanup(ctx);
    aio_timers_cleanup(ctx);
    aio_context_destroy(ctx);
    aio_context_owner_destroy(ctx);
    g_mutex_clear(&ctx->thread_pool_lock);
    if (aio_get_thread_context() == ctx) {
        aio_set_thread_context(NULL);
    }
    g_free(ctx);
}

AioContext *qemu_get_aio_context(void)
{
    AioContext *ctx = __atomic_load_n(&main_context, __ATOMIC_ACQUIRE);

    if (likely(ctx)) {
        return ctx;
    }
    g_mutex_lock(&main_context_lock);
    ctx = main_context;
    if (!ctx) {
        Error *err = NULL;

        ctx = aio_context_new(&err);
        if (!ctx) {
            error_report_err(err);
            abort();
        }
        /* The thread that first asks owns the main context. */
        if (!aio_get_thread_context()) {
            aio_set_thread_context(ctx);
        }
        __atomic_store_n(&main_context, ctx, __ATOMIC_RELEASE);
    }
    g_mutex_unlock(&main_context_lock);
    return ctx;
}

AioContext *qemu_get_current_aio_context(void)
{
    AioContext *ctx = aio_get_thread_context();

    return ctx ? ctx : qemu_get_aio_context();
}

void qemu_set_current_aio_context(AioContext *ctx)
{
    aio_set_thread_context(ctx);
}

ThreadPool *aio_get_thread_pool(AioContext *ctx)
{
    ThreadPool *pool = __atomic_load_n(&ctx->thread_pool, __ATOMIC_ACQUIRE);

    if (pool) {
        return pool;
    }
    g_mutex_lock(&ctx->thread_pool_lock);
    pool = ctx->thread_pool;
    if (!pool) {
        pool = thread_pool_new(ctx);
        thread_pool_set_limits(pool, ctx->thread_pool_min,
                               ctx->thread_pool_max);
        __atomic_store_n(&ctx->thread_pool, pool, __ATOMIC_RELEASE);
    }
    g_mutex_unlock(&ctx->thread_pool_lock);
    return pool;
}

void aio_context_set_aio_params(AioContext *ctx, int64_t max_batch)
{
    assert(max_batch >= 0);
    __atomic_store_n(&ctx->aio_max_batch, max_batch, __ATOMIC_RELAXED);
}

int64_t aio_context_get_aio_max_batch(AioContext *ctx)
{
    return __atomic_load_n(&ctx->aio_max_batch, __ATOMIC_RELAXED);
}

void aio_context_set_thread_pool_params(AioContext *ctx, int min_threads,
                                        int max_threads)
{
    assert(0 <= min_threads && min_threads <= max_threads && max_threads > 0);
    g_mutex_lock(&ctx->thread_pool_lock);
    ctx->thread_pool_min = min_threads;
    ctx->thread_pool_max = max_threads;
    if (ctx->thread_pool) {
        thread_pool_set_limits(ctx->thread_pool, min_threads, max_threads);
    }
    g_mutex_unlock(&ctx->thread_pool_lock);
}
