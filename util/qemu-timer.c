/*
 * Timers of an AioContext.
 *
 * QEMU_CLOCK_VIRTUAL reads the same monotonic clock as QEMU_CLOCK_REALTIME
 * (there is no guest clock to stop), so one list per context holds the
 * timers of both clocks.
 *
 * Invariants:
 *  1. ctx->timers holds exactly the armed timers, sorted by expire_ns
 *     (ties in arming order).
 *  2. A timer is taken off the list before its callback runs, so the
 *     callback may re-arm, delete or free it.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "aio-int.h"

struct QEMUTimer {
    AioContext *ctx;
    QEMUClockType type;
    int scale;
    QEMUTimerCB *cb;
    void *opaque;
    int64_t expire_ns;
    bool pending;
    TAILQ_ENTRY(QEMUTimer) node;
};

int64_t qemu_clock_get_ns(QEMUClockType type)
{
    return get_clock_ns();
}

QEMUTimer *aio_timer_new(AioContext *ctx, QEMUClockType type, int scale,
                         QEMUTimerCB *cb, void *opaque)
{
    QEMUTimer *timer = g_new0(QEMUTimer, 1);

    assert(scale > 0);
    timer->ctx = ctx;
    timer->type = type;
    timer->scale = scale;
    timer->cb = cb;
    timer->opaque = opaque;
    return timer;
}

void timer_del(QEMUTimer *timer)
{
    if (timer->pending) {
        TAILQ_REMOVE(&timer->ctx->timers, timer, node);
        timer->pending = false;
    }
}

void timer_mod(QEMUTimer *timer, int64_t expire_time)
{
    AioContext *ctx = timer->ctx;
    QEMUTimer *t;
    int64_t ns;

    /* A time too far away to represent in ns is "never" in practice. */
    if (__builtin_mul_overflow(expire_time, (int64_t)timer->scale, &ns)) {
        ns = expire_time < 0 ? INT64_MIN : INT64_MAX;
    }
    timer_del(timer);
    timer->expire_ns = ns;
    timer->pending = true;

    TAILQ_FOREACH(t, &ctx->timers, node) {
        if (t->expire_ns > ns) {
            TAILQ_INSERT_BEFORE(t, timer, node);
            return;
        }
    }
    TAILQ_INSERT_TAIL(&ctx->timers, timer, node);
}

bool timer_pending(QEMUTimer *timer)
{
    return timer->pending;
}

void timer_free(QEMUTimer *timer)
{
    if (timer) {
        timer_del(timer);
        g_free(timer);
    }
}

int64_t aio_timers_deadline_ns(AioContext *ctx)
{
    QEMUTimer *first = TAILQ_FIRST(&ctx->timers);
    int64_t now;

    if (!first) {
        return -1;
    }
    now = get_clock_ns();
    return first->expire_ns <= now ? 0 : first->expire_ns - now;
}

bool aio_timers_run(AioContext *ctx)
{
    QEMUTimer *timer;
    bool progress = false;
    int64_t now;

    if (TAILQ_EMPTY(&ctx->timers)) {
        return false;
    }
    now = get_clock_ns();
    while ((timer = TAILQ_FIRST(&ctx->timers)) && timer->expire_ns <= now) {
        /* Invariant 2 */
        timer_del(timer);
        timer->cb(timer->opaque);
        progress = true;
    }
    return progress;
}

void aio_timers_cleanup(AioContext *ctx)
{
    QEMUTimer *timer;

    while ((timer = TAILQ_FIRST(&ctx->timers))) {
        timer_del(timer);
    }
}
