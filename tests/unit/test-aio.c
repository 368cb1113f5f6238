/*
 * The event loop: bottom halves, fd handlers, timers, cross-thread
 * wake-ups, coroutine scheduling and sleep (util/async.c,
 * util/aio-posix.c, util/qemu-timer.c, util/event-notifier.c,
 * util/qemu-coroutine-sleep.c).
 */
#include "util/osdep.h"
#include "util/aio.h"

static AioContext *ctx;

/* Runs the loop until nothing is left to do. */
static void drain(void)
{
    while (aio_poll(ctx, false)) {
        continue;
    }
}

/* An iothread: its own context, polled until told to stop. */

typedef struct IOThread {
    GThread *thread;
    AioContext *ctx;
    bool stopping;          /* atomic */
} IOThread;

static gpointer iothread_run(gpointer opaque)
{
    IOThread *t = opaque;
    AioContext *own = aio_context_new(&error_abort);

    qemu_set_current_aio_context(own);
    __atomic_store_n(&t->ctx, own, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&t->stopping, __ATOMIC_SEQ_CST)) {
        aio_poll(own, true);
    }
    return NULL;
}

static IOThread *iothread_new(void)
{
    IOThread *t = g_new0(IOThread, 1);

    t->thread = g_thread_new("iothread", iothread_run, t);
    while (!__atomic_load_n(&t->ctx, __ATOMIC_ACQUIRE)) {
        g_usleep(1000);
    }
    return t;
}

static void iothread_free(IOThread *t)
{
    __atomic_store_n(&t->stopping, true, __ATOMIC_SEQ_CST);
    aio_notify(t->ctx);
    g_thread_join(t->thread);
    aio_context_unref(t->ctx);
    g_free(t);
}

/* Contexts */

static void test_context_basics(void)
{
    AioContext *other = aio_context_new(&error_abort);

    g_assert_nonnull(ctx);
    g_assert_true(qemu_get_current_aio_context() == ctx);
    g_assert_true(other != ctx);
    aio_context_ref(other);
    aio_context_unref(other);
    /* Nothing pending: no progress, and a new context neither. */
    g_assert_false(aio_poll(other, false));
    aio_context_unref(other);
}

static gpointer thread_current_context(gpointer opaque)
{
    AioContext *own = aio_context_new(&error_abort);
    bool ok;

    /* Without a context of its own a thread sees the main one. */
    ok = qemu_get_current_aio_context() == qemu_get_aio_context();
    qemu_set_current_aio_context(own);
    ok = ok && qemu_get_current_aio_context() == own;
    aio_context_unref(own);
    return GINT_TO_POINTER(ok);
}

static void test_context_per_thread(void)
{
    GThread *t = g_thread_new("ctx", thread_current_context, NULL);

    g_assert_true(GPOINTER_TO_INT(g_thread_join(t)));
    g_assert_true(qemu_get_current_aio_context() == ctx);
}

/* EventNotifier */

static void test_event_notifier(void)
{
    EventNotifier e;

    g_assert_cmpint(event_notifier_init(&e, true), ==, 0);
    g_assert_cmpint(event_notifier_get_fd(&e), >=, 0);
    g_assert_true(event_notifier_test_and_clear(&e));
    g_assert_false(event_notifier_test_and_clear(&e));
    g_assert_cmpint(event_notifier_set(&e), ==, 0);
    g_assert_cmpint(event_notifier_set(&e), ==, 0);
    /* Two sets, one wake-up. */
    g_assert_true(event_notifier_test_and_clear(&e));
    g_assert_false(event_notifier_test_and_clear(&e));
    event_notifier_cleanup(&e);
    g_assert_cmpint(event_notifier_get_fd(&e), ==, -1);
}

/* Bottom halves */

typedef struct BHData {
    QEMUBH *bh;
    int runs;
    int max;            /* reschedule itself until runs == max */
    bool delete;        /* delete itself when run */
    GString *trace;
    const char *name;
} BHData;

static void bh_cb(void *opaque)
{
    BHData *d = opaque;

    d->runs++;
    if (d->trace) {
        g_string_append_printf(d->trace, "%s ", d->name);
    }
    if (d->runs < d->max) {
        qemu_bh_schedule(d->bh);
    }
    if (d->delete) {
        qemu_bh_delete(d->bh);
        d->bh = NULL;
    }
}

static void test_bh_schedule(void)
{
    BHData d = { 0 };

    d.bh = aio_bh_new(ctx, bh_cb, &d);
    g_assert_false(aio_poll(ctx, false));
    qemu_bh_schedule(d.bh);
    g_assert_cmpint(d.runs, ==, 0);
    g_assert_true(aio_poll(ctx, false));
    g_assert_cmpint(d.runs, ==, 1);
    /* Ran once: nothing left. */
    g_assert_false(aio_poll(ctx, false));
    g_assert_cmpint(d.runs, ==, 1);
    /* Scheduling twice before it runs runs it once. */
    qemu_bh_schedule(d.bh);
    qemu_bh_schedule(d.bh);
    drain();
    g_assert_cmpint(d.runs, ==, 2);
    qemu_bh_delete(d.bh);
    drain();
}

static void test_bh_reschedule_self(void)
{
    BHData d = { .max = 5 };

    d.bh = aio_bh_new(ctx, bh_cb, &d);
    qemu_bh_schedule(d.bh);
    drain();
    g_assert_cmpint(d.runs, ==, 5);
    qemu_bh_delete(d.bh);
    drain();
}

static void test_bh_cancel(void)
{
    BHData d = { 0 };

    d.bh = aio_bh_new(ctx, bh_cb, &d);
    qemu_bh_schedule(d.bh);
    qemu_bh_cancel(d.bh);
    drain();
    g_assert_cmpint(d.runs, ==, 0);
    /* Cancelled, it can be scheduled again. */
    qemu_bh_schedule(d.bh);
    drain();
    g_assert_cmpint(d.runs, ==, 1);
    qemu_bh_delete(d.bh);
    drain();
}

static void test_bh_delete_scheduled(void)
{
    BHData d = { 0 };

    d.bh = aio_bh_new(ctx, bh_cb, &d);
    qemu_bh_schedule(d.bh);
    qemu_bh_delete(d.bh);
    drain();
    g_assert_cmpint(d.runs, ==, 0);
}

static void test_bh_delete_self(void)
{
    BHData d = { .delete = true };

    d.bh = aio_bh_new(ctx, bh_cb, &d);
    qemu_bh_schedule(d.bh);
    g_assert_true(aio_poll(ctx, false));
    g_assert_cmpint(d.runs, ==, 1);
    g_assert_null(d.bh);
    drain();
    g_assert_cmpint(d.runs, ==, 1);
}

static void test_bh_oneshot(void)
{
    BHData d = { 0 };

    aio_bh_schedule_oneshot(ctx, bh_cb, &d);
    aio_bh_schedule_oneshot(ctx, bh_cb, &d);
    g_assert_true(aio_poll(ctx, false));
    g_assert_cmpint(d.runs, ==, 2);
    g_assert_false(aio_poll(ctx, false));
}

static void test_bh_order(void)
{
    GString *trace = g_string_new("");
    BHData a = { .trace = trace, .name = "a" };
    BHData b = { .trace = trace, .name = "b" };
    BHData c = { .trace = trace, .name = "c" };

    a.bh = aio_bh_new(ctx, bh_cb, &a);
    b.bh = aio_bh_new(ctx, bh_cb, &b);
    c.bh = aio_bh_new(ctx, bh_cb, &c);
    qemu_bh_schedule(b.bh);
    qemu_bh_schedule(c.bh);
    qemu_bh_schedule(a.bh);
    drain();
    g_assert_cmpstr(trace->str, ==, "b c a ");
    qemu_bh_delete(a.bh);
    qemu_bh_delete(b.bh);
    qemu_bh_delete(c.bh);
    drain();
    g_string_free(trace, true);
}

/* A BH that polls the loop runs the BHs scheduled with it. */

typedef struct NestedBH {
    BHData inner;
    bool inner_ran_inside;
} NestedBH;

static void bh_nested_poll(void *opaque)
{
    NestedBH *n = opaque;

    aio_poll(ctx, false);
    n->inner_ran_inside = n->inner.runs == 1;
}

static void test_bh_nested_poll(void)
{
    NestedBH n = { 0 };

    n.inner.bh = aio_bh_new(ctx, bh_cb, &n.inner);
    aio_bh_schedule_oneshot(ctx, bh_nested_poll, &n);
    qemu_bh_schedule(n.inner.bh);
    drain();
    g_assert_true(n.inner_ran_inside);
    g_assert_cmpint(n.inner.runs, ==, 1);
    qemu_bh_delete(n.inner.bh);
    drain();
}

/* Another thread schedules a BH while the loop sleeps. */

static gpointer thread_schedule_bh_later(gpointer opaque)
{
    g_usleep(50 * 1000);
    qemu_bh_schedule(opaque);
    return NULL;
}

static void test_bh_from_thread_wakes_poll(void)
{
    BHData d = { 0 };
    GThread *t;

    d.bh = aio_bh_new(ctx, bh_cb, &d);
    t = g_thread_new("bh", thread_schedule_bh_later, d.bh);
    /* Nothing else can wake it: only the BH from the thread. */
    while (d.runs == 0) {
        aio_poll(ctx, true);
    }
    g_thread_join(t);
    qemu_bh_delete(d.bh);
    drain();
}

/*
 * Many threads hammering one BH.  Each counts, then schedules; the BH
 * records the count it sees.  A BH run follows every schedule, so the
 * loop ends only if no wake-up was lost (a lost one hangs the test).
 */

#define HAMMER_THREADS 4
#define HAMMER_ROUNDS 20000

typedef struct Hammer {
    QEMUBH *bh;
    int scheduled;      /* atomic */
    int seen;
    int runs;
} Hammer;

static void bh_hammer_cb(void *opaque)
{
    Hammer *h = opaque;

    h->runs++;
    h->seen = __atomic_load_n(&h->scheduled, __ATOMIC_SEQ_CST);
}

static gpointer thread_hammer(gpointer opaque)
{
    Hammer *h = opaque;

    for (int i = 0; i < HAMMER_ROUNDS; i++) {
        __atomic_fetch_add(&h->scheduled, 1, __ATOMIC_SEQ_CST);
        qemu_bh_schedule(h->bh);
    }
    return NULL;
}

static void test_bh_hammer(void)
{
    Hammer h = { 0 };
    GThread *t[HAMMER_THREADS];

    h.bh = aio_bh_new(ctx, bh_hammer_cb, &h);
    for (int i = 0; i < HAMMER_THREADS; i++) {
        t[i] = g_thread_new("hammer", thread_hammer, &h);
    }
    while (h.seen < HAMMER_THREADS * HAMMER_ROUNDS) {
        aio_poll(ctx, true);
    }
    for (int i = 0; i < HAMMER_THREADS; i++) {
        g_thread_join(t[i]);
    }
    drain();
    g_assert_cmpint(h.seen, ==, HAMMER_THREADS * HAMMER_ROUNDS);
    /* Schedules of a pending BH coalesce into one run. */
    g_assert_cmpint(h.runs, <=, HAMMER_THREADS * HAMMER_ROUNDS);
    qemu_bh_delete(h.bh);
    drain();
}

/* aio_notify() from another thread wakes a blocked aio_poll(). */

static gpointer thread_notify_later(gpointer opaque)
{
    bool *flag = opaque;

    g_usleep(20 * 1000);
    __atomic_store_n(flag, true, __ATOMIC_SEQ_CST);
    aio_notify(ctx);
    return NULL;
}

static void test_notify_wakes_poll(void)
{
    bool flag = false;
    GThread *t = g_thread_new("notify", thread_notify_later, &flag);

    AIO_WAIT_WHILE(ctx, !__atomic_load_n(&flag, __ATOMIC_SEQ_CST));
    g_thread_join(t);
    /* The notification is consumed: no progress is reported for it. */
    g_assert_false(aio_poll(ctx, false));
}

/* fd handlers */

typedef struct PipeData {
    int fds[2];
    int reads;
    int writes;
    int other_reads;
    char last;
    bool remove_self;
    bool remove_other;
    bool consume;
} PipeData;

static void pipe_read_cb(void *opaque)
{
    PipeData *p = opaque;

    p->reads++;
    if (p->consume) {
        g_assert_cmpint(read(p->fds[0], &p->last, 1), ==, 1);
    }
    if (p->remove_self) {
        aio_set_fd_handler(ctx, p->fds[0], NULL, NULL, NULL);
    }
}

static void pipe_write_cb(void *opaque)
{
    PipeData *p = opaque;

    p->writes++;
    g_assert_cmpint(write(p->fds[1], "w", 1), ==, 1);
    /* Written once: stop asking for write readiness. */
    aio_set_fd_handler(ctx, p->fds[1], NULL, NULL, NULL);
}

static void pipe_open(PipeData *p)
{
    g_assert_cmpint(pipe2(p->fds, O_NONBLOCK | O_CLOEXEC), ==, 0);
}

static void pipe_close(PipeData *p)
{
    close(p->fds[0]);
    close(p->fds[1]);
}

static void test_fd_read(void)
{
    PipeData p = { .consume = true };

    pipe_open(&p);
    aio_set_fd_handler(ctx, p.fds[0], pipe_read_cb, NULL, &p);
    g_assert_false(aio_poll(ctx, false));
    g_assert_cmpint(p.reads, ==, 0);

    g_assert_cmpint(write(p.fds[1], "x", 1), ==, 1);
    g_assert_true(aio_poll(ctx, false));
    g_assert_cmpint(p.reads, ==, 1);
    g_assert_cmpint(p.last, ==, 'x');
    /* Consumed: not ready any more. */
    g_assert_false(aio_poll(ctx, false));

    /* A blocking poll waits for the byte and dispatches it. */
    g_assert_cmpint(write(p.fds[1], "y", 1), ==, 1);
    g_assert_true(aio_poll(ctx, true));
    g_assert_cmpint(p.last, ==, 'y');

    aio_set_fd_handler(ctx, p.fds[0], NULL, NULL, NULL);
    g_assert_cmpint(write(p.fds[1], "z", 1), ==, 1);
    g_assert_false(aio_poll(ctx, false));
    g_assert_cmpint(p.reads, ==, 2);
    pipe_close(&p);
}

/*
 * A bottom half scheduled, then cancelled, stays on the list until a poll
 * takes it, and a pending bottom half lets aio_poll() skip epoll_wait().
 * The cancelled one runs nothing: the poll must still look at the fds, or
 * aio_poll(ctx, false) says "no progress" with a handler ready, and a
 * caller's while (aio_poll(ctx, false)) stops early (seen as a test of
 * the NBD server that found its client still waiting for data it had).
 */
static void test_fd_read_behind_cancelled_bh(void)
{
    PipeData p = { .consume = true };
    BHData d = { 0 };

    pipe_open(&p);
    aio_set_fd_handler(ctx, p.fds[0], pipe_read_cb, NULL, &p);
    g_assert_cmpint(write(p.fds[1], "x", 1), ==, 1);
    d.bh = aio_bh_new(ctx, bh_cb, &d);
    qemu_bh_schedule(d.bh);
    qemu_bh_cancel(d.bh);
    g_assert_true(aio_poll(ctx, false));
    g_assert_cmpint(p.reads, ==, 1);
    g_assert_cmpint(d.runs, ==, 0);
    g_assert_false(aio_poll(ctx, false));
    qemu_bh_delete(d.bh);
    drain();
    aio_set_fd_handler(ctx, p.fds[0], NULL, NULL, NULL);
    pipe_close(&p);
}

static void test_fd_level_triggered(void)
{
    PipeData p = { 0 };

    pipe_open(&p);
    aio_set_fd_handler(ctx, p.fds[0], pipe_read_cb, NULL, &p);
    g_assert_cmpint(write(p.fds[1], "x", 1), ==, 1);
    /* Not consumed: the handler runs again on every poll. */
    aio_poll(ctx, false);
    aio_poll(ctx, false);
    aio_poll(ctx, false);
    g_assert_cmpint(p.reads, ==, 3);
    aio_set_fd_handler(ctx, p.fds[0], NULL, NULL, NULL);
    pipe_close(&p);
}

static void test_fd_write(void)
{
    PipeData p = { .consume = true };

    pipe_open(&p);
    aio_set_fd_handler(ctx, p.fds[1], NULL, pipe_write_cb, &p);
    g_assert_true(aio_poll(ctx, false));
    g_assert_cmpint(p.writes, ==, 1);
    /* The write handler removed itself. */
    g_assert_false(aio_poll(ctx, false));
    g_assert_cmpint(p.writes, ==, 1);

    /* Its byte is there to read. */
    aio_set_fd_handler(ctx, p.fds[0], pipe_read_cb, NULL, &p);
    g_assert_true(aio_poll(ctx, false));
    g_assert_cmpint(p.last, ==, 'w');
    aio_set_fd_handler(ctx, p.fds[0], NULL, NULL, NULL);
    pipe_close(&p);
}

static void test_fd_remove_self(void)
{
    PipeData p = { .remove_self = true };

    pipe_open(&p);
    aio_set_fd_handler(ctx, p.fds[0], pipe_read_cb, NULL, &p);
    g_assert_cmpint(write(p.fds[1], "x", 1), ==, 1);
    g_assert_true(aio_poll(ctx, false));
    g_assert_cmpint(p.reads, ==, 1);
    /* Still readable, but the handler is gone. */
    g_assert_false(aio_poll(ctx, false));
    g_assert_cmpint(p.reads, ==, 1);
    pipe_close(&p);
}

/* Both fds ready in one round; whichever runs first removes the other. */

typedef struct RemoveOther {
    PipeData a, b;
    int calls;
} RemoveOther;

static void remove_other_a_cb(void *opaque)
{
    RemoveOther *r = opaque;

    r->calls++;
    r->a.reads++;
    aio_set_fd_handler(ctx, r->b.fds[0], NULL, NULL, NULL);
    aio_set_fd_handler(ctx, r->a.fds[0], NULL, NULL, NULL);
}

static void remove_other_b_cb(void *opaque)
{
    RemoveOther *r = opaque;

    r->calls++;
    r->b.reads++;
    aio_set_fd_handler(ctx, r->a.fds[0], NULL, NULL, NULL);
    aio_set_fd_handler(ctx, r->b.fds[0], NULL, NULL, NULL);
}

static void test_fd_remove_other(void)
{
    RemoveOther r = { 0 };

    pipe_open(&r.a);
    pipe_open(&r.b);
    aio_set_fd_handler(ctx, r.a.fds[0], remove_other_a_cb, NULL, &r);
    aio_set_fd_handler(ctx, r.b.fds[0], remove_other_b_cb, NULL, &r);
    g_assert_cmpint(write(r.a.fds[1], "x", 1), ==, 1);
    g_assert_cmpint(write(r.b.fds[1], "x", 1), ==, 1);
    g_assert_true(aio_poll(ctx, false));
    /* Exactly one ran: the other was removed before its turn. */
    g_assert_cmpint(r.calls, ==, 1);
    g_assert_false(aio_poll(ctx, false));
    g_assert_cmpint(r.calls, ==, 1);
    pipe_close(&r.a);
    pipe_close(&r.b);
}

/* A handler that replaces itself with another for the same fd. */

static void replaced_cb(void *opaque)
{
    PipeData *p = opaque;

    p->other_reads++;
    aio_set_fd_handler(ctx, p->fds[0], NULL, NULL, NULL);
}

static void replacing_cb(void *opaque)
{
    PipeData *p = opaque;

    p->reads++;
    aio_set_fd_handler(ctx, p->fds[0], replaced_cb, NULL, p);
}

static void test_fd_replace_in_handler(void)
{
    PipeData p = { 0 };

    pipe_open(&p);
    aio_set_fd_handler(ctx, p.fds[0], replacing_cb, NULL, &p);
    g_assert_cmpint(write(p.fds[1], "x", 1), ==, 1);
    aio_poll(ctx, false);
    g_assert_cmpint(p.reads, ==, 1);
    g_assert_cmpint(p.other_reads, ==, 0);
    aio_poll(ctx, false);
    g_assert_cmpint(p.reads, ==, 1);
    g_assert_cmpint(p.other_reads, ==, 1);
    g_assert_false(aio_poll(ctx, false));
    pipe_close(&p);
}

/* Timers */

typedef struct TimerData {
    QEMUTimer *timer;
    GString *trace;
    const char *name;
    int runs;
    int rearm;          /* re-arm itself this many times */
    bool free_self;
} TimerData;

static void timer_cb(void *opaque)
{
    TimerData *t = opaque;

    t->runs++;
    if (t->trace) {
        g_string_append_printf(t->trace, "%s ", t->name);
    }
    if (t->rearm > 0) {
        t->rearm--;
        timer_mod(t->timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) / SCALE_MS
                  + 1);
    }
    if (t->free_self) {
        timer_free(t->timer);
        t->timer = NULL;
    }
}

static void wait_timers(TimerData **timers, int n)
{
    for (int i = 0; i < n; i++) {
        while (timer_pending(timers[i]->timer)) {
            aio_poll(ctx, true);
        }
    }
}

static void test_timer_order(void)
{
    GString *trace = g_string_new("");
    TimerData a = { .trace = trace, .name = "a" };
    TimerData b = { .trace = trace, .name = "b" };
    TimerData c = { .trace = trace, .name = "c" };
    TimerData *all[] = { &a, &b, &c };
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) / SCALE_MS;

    a.timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS, timer_cb, &a);
    b.timer = aio_timer_new(ctx, QEMU_CLOCK_VIRTUAL, SCALE_MS, timer_cb, &b);
    c.timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_US, timer_cb, &c);
    timer_mod(a.timer, now + 30);
    timer_mod(b.timer, now + 10);
    timer_mod(c.timer, (now + 20) * 1000);
    g_assert_true(timer_pending(a.timer));
    wait_timers(all, 3);
    g_assert_cmpstr(trace->str, ==, "b c a ");
    g_assert_false(timer_pending(a.timer));
    timer_free(a.timer);
    timer_free(b.timer);
    timer_free(c.timer);
    g_string_free(trace, true);
}

static void test_timer_wait(void)
{
    TimerData a = { 0 };
    int64_t start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    a.timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS, timer_cb, &a);
    timer_mod(a.timer, start + 30 * SCALE_MS);
    /* Only the timer can end this blocking poll. */
    while (a.runs == 0) {
        aio_poll(ctx, true);
    }
    g_assert_cmpint(qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - start, >=,
                    30 * SCALE_MS);
    timer_free(a.timer);
}

static void test_timer_mod_del(void)
{
    GString *trace = g_string_new("");
    TimerData a = { .trace = trace, .name = "a" };
    TimerData b = { .trace = trace, .name = "b" };
    TimerData *all[] = { &a, &b };
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) / SCALE_MS;

    a.timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS, timer_cb, &a);
    b.timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS, timer_cb, &b);
    timer_mod(a.timer, now + 10);
    timer_mod(b.timer, now + 20);
    /* Moving a later makes b first. */
    timer_mod(a.timer, now + 40);
    wait_timers(all, 2);
    g_assert_cmpstr(trace->str, ==, "b a ");

    /* A deleted timer does not fire. */
    timer_mod(a.timer, now);
    g_assert_true(timer_pending(a.timer));
    timer_del(a.timer);
    g_assert_false(timer_pending(a.timer));
    drain();
    g_assert_cmpint(a.runs, ==, 1);
    timer_del(a.timer);

    timer_free(a.timer);
    timer_free(b.timer);
    g_string_free(trace, true);
}

static void test_timer_rearm_and_free_self(void)
{
    TimerData a = { .rearm = 3 };
    TimerData b = { .free_self = true };
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) / SCALE_MS;

    a.timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS, timer_cb, &a);
    b.timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS, timer_cb, &b);
    timer_mod(a.timer, now + 1);
    timer_mod(b.timer, now + 1);
    while (timer_pending(a.timer) || b.timer) {
        aio_poll(ctx, true);
    }
    g_assert_cmpint(a.runs, ==, 4);
    g_assert_cmpint(b.runs, ==, 1);
    timer_free(a.timer);
}

/* Coroutine scheduling */

static void coroutine_fn co_yield_count(void *opaque)
{
    int *runs = opaque;

    (*runs)++;
    qemu_coroutine_yield();
    (*runs)++;
}

typedef struct ScheduleLater {
    Coroutine *co;
    AioContext *ctx;
} ScheduleLater;

static gpointer thread_schedule_co_later(gpointer opaque)
{
    ScheduleLater *s = opaque;

    g_usleep(20 * 1000);
    aio_co_schedule(s->ctx, s->co);
    return NULL;
}

static void test_co_schedule_from_thread(void)
{
    int runs = 0;
    ScheduleLater s = { qemu_coroutine_create(co_yield_count, &runs), ctx };
    GThread *t;

    qemu_coroutine_enter(s.co);
    g_assert_cmpint(runs, ==, 1);
    t = g_thread_new("co", thread_schedule_co_later, &s);
    while (runs < 2) {
        aio_poll(ctx, true);
    }
    g_thread_join(t);
}

/* aio_co_wake() inside a coroutine schedules, outside it enters. */

typedef struct WakeData {
    Coroutine *sleeper;
    int sleeper_runs;
    bool woken_before_return;
} WakeData;

static void coroutine_fn co_waker(void *opaque)
{
    WakeData *w = opaque;

    aio_co_wake(w->sleeper);
    /* Invariant 3 of coroutine.h: not run inside us. */
    w->woken_before_return = w->sleeper_runs == 2;
}

static void test_co_wake(void)
{
    WakeData w = { 0 };

    w.sleeper = qemu_coroutine_create(co_yield_count, &w.sleeper_runs);
    qemu_coroutine_enter(w.sleeper);
    qemu_coroutine_enter(qemu_coroutine_create(co_waker, &w));
    g_assert_false(w.woken_before_return);
    g_assert_cmpint(w.sleeper_runs, ==, 1);
    drain();
    g_assert_cmpint(w.sleeper_runs, ==, 2);

    /* From outside coroutine context in the home thread: entered now. */
    w.sleeper_runs = 0;
    w.sleeper = qemu_coroutine_create(co_yield_count, &w.sleeper_runs);
    qemu_coroutine_enter(w.sleeper);
    aio_co_wake(w.sleeper);
    g_assert_cmpint(w.sleeper_runs, ==, 2);
}

/* A coroutine moves to an iothread and back. */

typedef struct Move {
    Coroutine *co;
    AioContext *target;
} Move;

static void move_bh(void *opaque)
{
    Move *m = opaque;

    aio_co_schedule(m->target, m->co);
}

/* Called in @co: it yields first, then the BH moves it (no race). */
static void coroutine_fn co_move_to(AioContext *target)
{
    Move m = { qemu_coroutine_self(), target };
    AioContext *here = qemu_coroutine_get_aio_context(m.co);

    aio_bh_schedule_oneshot(here, move_bh, &m);
    qemu_coroutine_yield();
}

typedef struct MigrateData {
    IOThread *iothread;
    GThread *main_thread;
    bool ran_in_iothread;
    bool ctx_in_iothread;
    bool back_in_main;
    bool done;
} MigrateData;

static void coroutine_fn co_migrate(void *opaque)
{
    MigrateData *d = opaque;
    Coroutine *self = qemu_coroutine_self();

    for (int i = 0; i < 10; i++) {
        co_move_to(d->iothread->ctx);
        d->ran_in_iothread = g_thread_self() == d->iothread->thread;
        d->ctx_in_iothread = qemu_get_current_aio_context() ==
                             d->iothread->ctx &&
                             qemu_coroutine_get_aio_context(self) ==
                             d->iothread->ctx &&
                             qemu_coroutine_self() == self;
        co_move_to(ctx);
        d->back_in_main = g_thread_self() == d->main_thread &&
                          qemu_get_current_aio_context() == ctx &&
                          qemu_coroutine_self() == self;
        if (!d->ran_in_iothread || !d->ctx_in_iothread || !d->back_in_main) {
            break;
        }
    }
    d->done = true;
}

static void test_co_migrate(void)
{
    MigrateData d = { .iothread = iothread_new(),
                      .main_thread = g_thread_self() };

    qemu_coroutine_enter(qemu_coroutine_create(co_migrate, &d));
    while (!d.done) {
        aio_poll(ctx, true);
    }
    g_assert_true(d.ran_in_iothread);
    g_assert_true(d.ctx_in_iothread);
    g_assert_true(d.back_in_main);
    iothread_free(d.iothread);
}

/* Sleep */

typedef struct SleepData {
    int64_t ns;
    int64_t slept;
    bool done;
} SleepData;

static void coroutine_fn co_sleep(void *opaque)
{
    SleepData *s = opaque;
    int64_t start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    qemu_co_sleep_ns(s->ns);
    s->slept = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - start;
    s->done = true;
}

static void test_co_sleep(void)
{
    SleepData a = { .ns = 30 * SCALE_MS }, b = { .ns = 10 * SCALE_MS };

    qemu_coroutine_enter(qemu_coroutine_create(co_sleep, &a));
    qemu_coroutine_enter(qemu_coroutine_create(co_sleep, &b));
    g_assert_false(a.done);
    while (!b.done) {
        aio_poll(ctx, true);
    }
    /* The shorter sleep ends first. */
    g_assert_false(a.done);
    while (!a.done) {
        aio_poll(ctx, true);
    }
    g_assert_cmpint(a.slept, >=, a.ns);
    g_assert_cmpint(b.slept, >=, b.ns);
}

/* Figures for the record (run with -m perf); nothing is asserted. */

static void perf_bh(void)
{
    const int n = 2000000;
    BHData d = { .max = n };
    gint64 start;

    d.bh = aio_bh_new(ctx, bh_cb, &d);
    start = g_get_monotonic_time();
    qemu_bh_schedule(d.bh);
    drain();
    g_test_message("BH schedule+run: %.0f ns each",
                   (g_get_monotonic_time() - start) * 1e3 / n);
    qemu_bh_delete(d.bh);
    drain();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    ctx = qemu_get_aio_context();

    g_test_add_func("/aio/context/basics", test_context_basics);
    g_test_add_func("/aio/context/per-thread", test_context_per_thread);
    g_test_add_func("/aio/event-notifier", test_event_notifier);
    g_test_add_func("/aio/bh/schedule", test_bh_schedule);
    g_test_add_func("/aio/bh/reschedule-self", test_bh_reschedule_self);
    g_test_add_func("/aio/bh/cancel", test_bh_cancel);
    g_test_add_func("/aio/bh/delete-scheduled", test_bh_delete_scheduled);
    g_test_add_func("/aio/bh/delete-self", test_bh_delete_self);
    g_test_add_func("/aio/bh/oneshot", test_bh_oneshot);
    g_test_add_func("/aio/bh/order", test_bh_order);
    g_test_add_func("/aio/bh/nested-poll", test_bh_nested_poll);
    g_test_add_func("/aio/bh/from-thread-wakes-poll",
                    test_bh_from_thread_wakes_poll);
    g_test_add_func("/aio/bh/hammer", test_bh_hammer);
    g_test_add_func("/aio/notify-wakes-poll", test_notify_wakes_poll);
    g_test_add_func("/aio/fd/read", test_fd_read);
    g_test_add_func("/aio/fd/read-behind-cancelled-bh",
                    test_fd_read_behind_cancelled_bh);
    g_test_add_func("/aio/fd/level-triggered", test_fd_level_triggered);
    g_test_add_func("/aio/fd/write", test_fd_write);
    g_test_add_func("/aio/fd/remove-self", test_fd_remove_self);
    g_test_add_func("/aio/fd/remove-other", test_fd_remove_other);
    g_test_add_func("/aio/fd/replace-in-handler", test_fd_replace_in_handler);
    g_test_add_func("/aio/timer/order", test_timer_order);
    g_test_add_func("/aio/timer/wait", test_timer_wait);
    g_test_add_func("/aio/timer/mod-del", test_timer_mod_del);
    g_test_add_func("/aio/timer/rearm-and-free-self",
                    test_timer_rearm_and_free_self);
    g_test_add_func("/aio/co/schedule-from-thread",
                    test_co_schedule_from_thread);
    g_test_add_func("/aio/co/wake", test_co_wake);
    g_test_add_func("/aio/co/migrate", test_co_migrate);
    g_test_add_func("/aio/co/sleep", test_co_sleep);
    if (g_test_perf()) {
        g_test_add_func("/aio/perf/bh", perf_bh);
    }
    return g_test_run();
}
