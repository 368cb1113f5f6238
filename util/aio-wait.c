/*
 * Taking over another thread's AioContext, and waiting for a condition
 * while contexts are taken over (see aio.h).
 *
 * An iothread polls its context in a loop of its own.  The main loop
 * thread must sometimes touch what lives there (a QMP command on a node,
 * an export being added or removed): it acquires the context.  Acquiring
 * schedules a bottom half into the context; when the home thread runs it,
 * outside any coroutine and between two handlers, the home thread parks
 * on owner_cond until the context is released.  While parked, the
 * acquirer owns the context exactly as the home thread would: it may
 * touch the context's nodes and poll the context itself (AIO_WAIT_WHILE).
 * This is QEMU's AioContext lock, with the hand-over only at points where
 * a single-threaded loop could have run the acquirer's code as a bottom
 * half (a nested aio_poll() is one).
 *
 * Invariants:
 *  1. At most one thread touches a context's "home" state at a time: its
 *     home thread while not parked, else its acquirer.  The hand-over goes
 *     through owner_lock, which orders everything before it.
 *  2. A context with an acquirer has parked == true whenever the acquirer
 *     runs outside aio_context_acquire(): the home (if any) is blocked in
 *     aio_context_park_bh().  A thread acquires recursively (depth).
 *  3. A thread that holds contexts and waits on its own home context
 *     (AIO_WAIT_WHILE on the main loop) lets them go while it sleeps, and
 *     waits until each home has really resumed, so that what it waits for
 *     may be done by them; it takes them back before the condition is
 *     checked again.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "aio-int.h"

/* The contexts the calling thread holds, innermost first. */
static __thread GSList *aio_held_contexts;

/*
 * Only the calling thread sets acquirer to itself or clears it from
 * itself, so it can compare without the lock.
 */
static bool aio_context_held_by_me(AioContext *ctx)
{
    return __atomic_load_n(&ctx->acquirer, __ATOMIC_RELAXED) ==
           g_thread_self();
}

void aio_context_owner_init(AioContext *ctx)
{
    g_mutex_init(&ctx->owner_lock);
    g_cond_init(&ctx->owner_cond);
}

void aio_context_owner_destroy(AioContext *ctx)
{
    assert(!ctx->acquirer && !ctx->home);
    g_mutex_clear(&ctx->owner_lock);
    g_cond_clear(&ctx->owner_cond);
}

void aio_context_set_home(AioContext *ctx, bool running)
{
    g_mutex_lock(&ctx->owner_lock);
    ctx->home = running ? g_thread_self() : NULL;
    g_cond_broadcast(&ctx->owner_cond);
    g_mutex_unlock(&ctx->owner_lock);
}

/* Invariant 2: runs in the home thread, which waits here while held. */
static void aio_context_park_bh(void *opaque)
{
    AioContext *ctx = opaque;

    g_mutex_lock(&ctx->owner_lock);
    if (ctx->park_requested) {
        ctx->parked = true;
        g_cond_broadcast(&ctx->owner_cond);
        while (ctx->park_requested) {
            g_cond_wait(&ctx->owner_cond, &ctx->owner_lock);
        }
        ctx->parked = false;
        g_cond_broadcast(&ctx->owner_cond);
    }
    g_mutex_unlock(&ctx->owner_lock);
}

/* With owner_lock held: makes the home (if any) park, and waits for it. */
static void aio_context_park_locked(AioContext *ctx)
{
    ctx->park_requested = true;
    if (!ctx->home || ctx->home == g_thread_self()) {
        return;
    }
    if (!ctx->parked) {
        aio_bh_schedule_oneshot(ctx, aio_context_park_bh, ctx);
    }
    while (ctx->home && !ctx->parked) {
        g_cond_wait(&ctx->owner_cond, &ctx->owner_lock);
    }
}

/* With owner_lock held: lets the home run; waits until it does (inv. 3). */
static void aio_context_unpark_locked(AioContext *ctx, bool wait)
{
    ctx->park_requested = false;
    g_cond_broadcast(&ctx->owner_cond);
    while (wait && ctx->parked) {
        g_cond_wait(&ctx->owner_cond, &ctx->owner_lock);
    }
}

void aio_context_acquire(AioContext *ctx)
{
    if (aio_context_held_by_me(ctx)) {
        ctx->acquire_depth++;
        return;
    }
    g_mutex_lock(&ctx->owner_lock);
    while (ctx->acquirer) {
        g_cond_wait(&ctx->owner_cond, &ctx->owner_lock);
    }
    __atomic_store_n(&ctx->acquirer, g_thread_self(), __ATOMIC_RELAXED);
    ctx->acquire_depth = 1;
    aio_context_park_locked(ctx);
    g_mutex_unlock(&ctx->owner_lock);
    aio_held_contexts = g_slist_prepend(aio_held_contexts, ctx);
}

void aio_context_release(AioContext *ctx)
{
    assert(aio_context_held_by_me(ctx) && ctx->acquire_depth > 0);
    if (--ctx->acquire_depth > 0) {
        return;
    }
    aio_held_contexts = g_slist_remove(aio_held_contexts, ctx);
    g_mutex_lock(&ctx->owner_lock);
    __atomic_store_n(&ctx->acquirer, NULL, __ATOMIC_RELAXED);
    aio_context_unpark_locked(ctx, false);
    g_mutex_unlock(&ctx->owner_lock);
}

bool aio_context_in_thread(AioContext *ctx)
{
    return aio_context_held_by_me(ctx) ||
           qemu_get_current_aio_context() == ctx;
}

/* Polls @ctx, which the calling thread holds, as if it were its home. */
static void aio_wait_poll_held(AioContext *ctx)
{
    AioContext *home = qemu_get_current_aio_context();

    qemu_set_current_aio_context(ctx);
    aio_poll(ctx, true);
    qemu_set_current_aio_context(home);
}

/*
 * Invariant 3.  The held contexts are let go entirely, not only
 * unparked: code that runs from the poll (a bottom half that deletes an
 * export) and acquires one of them must really park its home again.
 */
static void aio_wait_poll_home(AioContext *ctx)
{
    GSList *lent = g_steal_pointer(&aio_held_contexts);
    guint n = g_slist_length(lent);
    g_autofree unsigned int *depths = g_new(unsigned int, n + 1);
    guint i = 0;

    for (GSList *l = lent; l; l = l->next, i++) {
        AioContext *held = l->data;

        depths[i] = held->acquire_depth;
        g_mutex_lock(&held->owner_lock);
        __atomic_store_n(&held->acquirer, NULL, __ATOMIC_RELAXED);
        aio_context_unpark_locked(held, true);
        g_mutex_unlock(&held->owner_lock);
    }
    aio_poll(ctx, true);
    i = 0;
    for (GSList *l = lent; l; l = l->next, i++) {
        AioContext *held = l->data;

        g_mutex_lock(&held->owner_lock);
        while (held->acquirer) {
            g_cond_wait(&held->owner_cond, &held->owner_lock);
        }
        __atomic_store_n(&held->acquirer, g_thread_self(), __ATOMIC_RELAXED);
        aio_context_park_locked(held);
        g_mutex_unlock(&held->owner_lock);
        held->acquire_depth = depths[i];
    }
    /* what the poll acquired, it released */
    assert(!aio_held_contexts);
    aio_held_contexts = lent;
}

void aio_wait_poll(AioContext *ctx)
{
    if (aio_context_held_by_me(ctx)) {
        aio_wait_poll_held(ctx);
    } else if (ctx == qemu_get_current_aio_context()) {
        aio_wait_poll_home(ctx);
    } else {
        /* another thread's context: take it for one round */
        aio_context_acquire(ctx);
        aio_wait_poll_held(ctx);
        aio_context_release(ctx);
    }
}
