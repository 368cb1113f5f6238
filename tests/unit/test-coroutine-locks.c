/*
 * CoMutex, CoQueue and CoRwlock (util/qemu-coroutine-lock.c).
 */
#include "util/osdep.h"
#include "util/aio.h"

static AioContext *ctx;

/* Gives the CPU to the other coroutines: runs again from the loop. */
static void coroutine_fn yield_to_loop(void)
{
    Coroutine *self = qemu_coroutine_self();

    aio_co_schedule(qemu_coroutine_get_aio_context(self), self);
    qemu_coroutine_yield();
}

static void run_loop_until(bool *done)
{
    while (!*done) {
        aio_poll(ctx, true);
    }
}

static void drain(void)
{
    while (aio_poll(ctx, false)) {
        continue;
    }
}

/* A few rounds of the loop, for when holders spin until released. */
static void spin(void)
{
    for (int i = 0; i < 20; i++) {
        aio_poll(ctx, false);
    }
}

/* CoMutex */

#define MUTEX_COROUTINES 10

typedef struct MutexTest {
    CoMutex mutex;
    bool inside;
    bool overlap;
    int finished;
    GString *order;
} MutexTest;

typedef struct MutexWorker {
    MutexTest *t;
    int id;
} MutexWorker;

static void coroutine_fn co_mutex_worker(void *opaque)
{
    MutexWorker *w = opaque;
    MutexTest *t = w->t;

    for (int round = 0; round < 3; round++) {
        qemu_co_mutex_lock(&t->mutex);
        qemu_co_mutex_assert_locked(&t->mutex);
        g_string_append_printf(t->order, "%d ", w->id);
        if (t->inside) {
            t->overlap = true;
        }
        t->inside = true;
        /* Hold the lock across yields: nobody else may get in. */
        yield_to_loop();
        yield_to_loop();
        t->inside = false;
        qemu_co_mutex_unlock(&t->mutex);
    }
    t->finished++;
}

static void test_co_mutex(void)
{
    MutexTest t = { .order = g_string_new("") };
    MutexWorker w[MUTEX_COROUTINES];
    GString *expect = g_string_new("");

    qemu_co_mutex_init(&t.mutex);
    for (int i = 0; i < MUTEX_COROUTINES; i++) {
        w[i] = (MutexWorker) { &t, i };
        qemu_coroutine_enter(qemu_coroutine_create(co_mutex_worker, &w[i]));
    }
    while (t.finished < MUTEX_COROUTINES) {
        aio_poll(ctx, true);
    }
    g_assert_false(t.overlap);
    g_assert_false(t.mutex.locked);
    /* FIFO: each round, the coroutines get the lock in arrival order. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < MUTEX_COROUTINES; i++) {
            g_string_append_printf(expect, "%d ", i);
        }
    }
    g_assert_cmpstr(t.order->str, ==, expect->str);
    g_string_free(expect, true);
    g_string_free(t.order, true);
}

/* Uncontended lock and unlock never yield. */

static void coroutine_fn co_mutex_uncontended(void *opaque)
{
    CoMutex *m = opaque;

    for (int i = 0; i < 1000; i++) {
        qemu_co_mutex_lock(m);
        g_assert_true(m->holder == qemu_coroutine_self());
        qemu_co_mutex_unlock(m);
    }
}

static void test_co_mutex_uncontended(void)
{
    CoMutex m;
    Coroutine *co;

    qemu_co_mutex_init(&m);
    co = qemu_coroutine_create(co_mutex_uncontended, &m);
    qemu_coroutine_enter(co);
    /* It ran to the end without yielding. */
    g_assert_false(qemu_coroutine_entered(co));
    g_assert_false(m.locked);
}

/* Unlock hands the lock over: no third coroutine can barge in. */

typedef struct Handover {
    CoMutex mutex;
    GString *trace;
} Handover;

static void coroutine_fn co_handover_first(void *opaque)
{
    Handover *h = opaque;

    qemu_co_mutex_lock(&h->mutex);
    yield_to_loop();
    g_string_append(h->trace, "first-unlock ");
    qemu_co_mutex_unlock(&h->mutex);
}

static void coroutine_fn co_handover_waiter(void *opaque)
{
    Handover *h = opaque;

    qemu_co_mutex_lock(&h->mutex);
    g_string_append(h->trace, "waiter ");
    qemu_co_mutex_unlock(&h->mutex);
}

static void coroutine_fn co_handover_barger(void *opaque)
{
    Handover *h = opaque;

    /* Arrives after the unlock, before the waiter has run. */
    qemu_co_mutex_lock(&h->mutex);
    g_string_append(h->trace, "barger ");
    qemu_co_mutex_unlock(&h->mutex);
}

static void test_co_mutex_handover(void)
{
    Handover h = { .trace = g_string_new("") };

    qemu_co_mutex_init(&h.mutex);
    qemu_coroutine_enter(qemu_coroutine_create(co_handover_first, &h));
    qemu_coroutine_enter(qemu_coroutine_create(co_handover_waiter, &h));
    /* Runs first's unlock; the waiter is now scheduled, not running. */
    aio_poll(ctx, false);
    g_assert_cmpstr(h.trace->str, ==, "first-unlock ");
    qemu_coroutine_enter(qemu_coroutine_create(co_handover_barger, &h));
    drain();
    g_assert_cmpstr(h.trace->str, ==, "first-unlock waiter barger ");
    g_string_free(h.trace, true);
}

/* CoQueue without a lock */

typedef struct QueueTest {
    CoQueue queue;
    CoMutex lock;
    GString *trace;
    int items;
    int done;
} QueueTest;

typedef struct QueueWaiter {
    QueueTest *t;
    int id;
} QueueWaiter;

static void coroutine_fn co_queue_waiter(void *opaque)
{
    QueueWaiter *w = opaque;

    qemu_co_queue_wait(&w->t->queue, NULL);
    g_string_append_printf(w->t->trace, "%d ", w->id);
    w->t->done++;
}

static void test_co_queue_no_lock(void)
{
    QueueTest t = { .trace = g_string_new("") };
    QueueWaiter w[5];

    qemu_co_queue_init(&t.queue);
    g_assert_true(qemu_co_queue_empty(&t.queue));
    g_assert_false(qemu_co_queue_next(&t.queue));
    g_assert_false(qemu_co_enter_next(&t.queue));

    for (int i = 0; i < 5; i++) {
        w[i] = (QueueWaiter) { &t, i };
        qemu_coroutine_enter(qemu_coroutine_create(co_queue_waiter, &w[i]));
    }
    g_assert_false(qemu_co_queue_empty(&t.queue));
    g_assert_cmpint(t.done, ==, 0);

    /* Outside coroutine context the first waiter runs right away. */
    g_assert_true(qemu_co_enter_next(&t.queue));
    g_assert_cmpstr(t.trace->str, ==, "0 ");
    g_assert_true(qemu_co_queue_next(&t.queue));
    drain();
    g_assert_cmpstr(t.trace->str, ==, "0 1 ");

    qemu_co_queue_restart_all(&t.queue);
    g_assert_true(qemu_co_queue_empty(&t.queue));
    drain();
    g_assert_cmpstr(t.trace->str, ==, "0 1 2 3 4 ");
    g_assert_cmpint(t.done, ==, 5);
    g_string_free(t.trace, true);
}

/* restart_all from inside a coroutine: the waiters run after it. */

static void coroutine_fn co_queue_restarter(void *opaque)
{
    QueueTest *t = opaque;

    qemu_co_queue_restart_all(&t->queue);
    g_string_append(t->trace, "restarter ");
}

static void test_co_queue_restart_in_coroutine(void)
{
    QueueTest t = { .trace = g_string_new("") };
    QueueWaiter w[3];

    qemu_co_queue_init(&t.queue);
    for (int i = 0; i < 3; i++) {
        w[i] = (QueueWaiter) { &t, i };
        qemu_coroutine_enter(qemu_coroutine_create(co_queue_waiter, &w[i]));
    }
    qemu_coroutine_enter(qemu_coroutine_create(co_queue_restarter, &t));
    g_assert_cmpstr(t.trace->str, ==, "restarter ");
    drain();
    g_assert_cmpstr(t.trace->str, ==, "restarter 0 1 2 ");
    g_string_free(t.trace, true);
}

/* CoQueue with a lock: producer and consumers. */

static void coroutine_fn co_consumer(void *opaque)
{
    QueueWaiter *w = opaque;
    QueueTest *t = w->t;

    qemu_co_mutex_lock(&t->lock);
    while (t->items == 0) {
        qemu_co_queue_wait(&t->queue, &t->lock);
        /* Woken with the lock held again. */
        qemu_co_mutex_assert_locked(&t->lock);
    }
    t->items--;
    g_string_append_printf(t->trace, "c%d ", w->id);
    qemu_co_mutex_unlock(&t->lock);
    t->done++;
}

static void coroutine_fn co_producer(void *opaque)
{
    QueueTest *t = opaque;

    for (int i = 0; i < 3; i++) {
        qemu_co_mutex_lock(&t->lock);
        t->items++;
        g_string_append(t->trace, "p ");
        qemu_co_queue_next(&t->queue);
        qemu_co_mutex_unlock(&t->lock);
        yield_to_loop();
    }
}

static void test_co_queue_with_lock(void)
{
    QueueTest t = { .trace = g_string_new("") };
    QueueWaiter w[3];

    qemu_co_queue_init(&t.queue);
    qemu_co_mutex_init(&t.lock);
    for (int i = 0; i < 3; i++) {
        w[i] = (QueueWaiter) { &t, i };
        qemu_coroutine_enter(qemu_coroutine_create(co_consumer, &w[i]));
    }
    /* All three wait, and none holds the lock while waiting. */
    g_assert_false(t.lock.locked);
    g_assert_false(qemu_co_queue_empty(&t.queue));
    qemu_coroutine_enter(qemu_coroutine_create(co_producer, &t));
    while (t.done < 3) {
        aio_poll(ctx, true);
    }
    g_assert_cmpstr(t.trace->str, ==, "p c0 p c1 p c2 ");
    g_assert_true(qemu_co_queue_empty(&t.queue));
    g_assert_false(t.lock.locked);
    g_string_free(t.trace, true);
}

/* CoRwlock */

typedef struct RwTest {
    CoRwlock lock;
    GString *trace;
    int readers_inside;
    int max_readers_inside;
    bool writer_inside;
    bool violation;
    int done;
    bool release;       /* holders wait for this before unlocking */
} RwTest;

typedef struct RwWorker {
    RwTest *t;
    const char *name;
} RwWorker;

static void coroutine_fn rw_hold_until_release(RwTest *t)
{
    while (!t->release) {
        yield_to_loop();
    }
}

static void coroutine_fn co_reader(void *opaque)
{
    RwWorker *w = opaque;
    RwTest *t = w->t;

    qemu_co_rwlock_rdlock(&t->lock);
    g_string_append_printf(t->trace, "%s ", w->name);
    if (t->writer_inside) {
        t->violation = true;
    }
    t->readers_inside++;
    t->max_readers_inside = MAX(t->max_readers_inside, t->readers_inside);
    /* Let the others that can share the lock come in too. */
    yield_to_loop();
    rw_hold_until_release(t);
    t->readers_inside--;
    qemu_co_rwlock_unlock(&t->lock);
    t->done++;
}

static void coroutine_fn co_writer(void *opaque)
{
    RwWorker *w = opaque;
    RwTest *t = w->t;

    qemu_co_rwlock_wrlock(&t->lock);
    g_string_append_printf(t->trace, "%s ", w->name);
    if (t->writer_inside || t->readers_inside) {
        t->violation = true;
    }
    t->writer_inside = true;
    rw_hold_until_release(t);
    yield_to_loop();
    t->writer_inside = false;
    qemu_co_rwlock_unlock(&t->lock);
    t->done++;
}

static void rw_test_init(RwTest *t)
{
    *t = (RwTest) { .trace = g_string_new("") };
    qemu_co_rwlock_init(&t->lock);
}

static void rw_start(RwTest *t, RwWorker *w, CoroutineEntry *entry,
                     const char *name)
{
    *w = (RwWorker) { t, name };
    qemu_coroutine_enter(qemu_coroutine_create(entry, w));
}

static void test_co_rwlock_readers_share(void)
{
    RwTest t;
    RwWorker w[3];

    rw_test_init(&t);
    rw_start(&t, &w[0], co_reader, "r1");
    rw_start(&t, &w[1], co_reader, "r2");
    rw_start(&t, &w[2], co_reader, "r3");
    /* All three got in without waiting for each other. */
    g_assert_cmpint(t.max_readers_inside, ==, 3);
    g_assert_cmpint(t.lock.readers, ==, 3);
    t.release = true;
    while (t.done < 3) {
        aio_poll(ctx, true);
    }
    g_assert_cmpint(t.lock.readers, ==, 0);
    g_assert_false(t.violation);
    g_string_free(t.trace, true);
}

static void test_co_rwlock_writer_exclusive(void)
{
    RwTest t;
    RwWorker w[4];

    rw_test_init(&t);
    rw_start(&t, &w[0], co_reader, "r1");
    rw_start(&t, &w[1], co_writer, "w1");
    rw_start(&t, &w[2], co_writer, "w2");
    rw_start(&t, &w[3], co_reader, "r2");
    spin();
    /* The writers wait for r1; r2 waits behind them. */
    g_assert_cmpstr(t.trace->str, ==, "r1 ");
    t.release = true;
    while (t.done < 4) {
        aio_poll(ctx, true);
    }
    g_assert_false(t.violation);
    g_assert_cmpstr(t.trace->str, ==, "r1 w1 w2 r2 ");
    g_string_free(t.trace, true);
}

/* A waiting writer blocks later readers (writers do not starve). */
static void test_co_rwlock_fifo(void)
{
    RwTest t;
    RwWorker w[5];

    rw_test_init(&t);
    rw_start(&t, &w[0], co_reader, "r1");
    rw_start(&t, &w[1], co_writer, "w1");
    rw_start(&t, &w[2], co_reader, "r2");
    rw_start(&t, &w[3], co_reader, "r3");
    rw_start(&t, &w[4], co_writer, "w2");
    spin();
    g_assert_cmpstr(t.trace->str, ==, "r1 ");
    g_assert_cmpint(t.lock.readers, ==, 1);
    t.release = true;
    while (t.done < 5) {
        aio_poll(ctx, true);
    }
    g_assert_false(t.violation);
    /* r2 and r3 came after w1 and ran together after it, before w2. */
    g_assert_cmpstr(t.trace->str, ==, "r1 w1 r2 r3 w2 ");
    g_assert_cmpint(t.max_readers_inside, ==, 2);
    g_string_free(t.trace, true);
}

/* Upgrade: a reader becomes the writer once the other readers left,
 * before a writer that was already waiting. */

static void coroutine_fn co_upgrader(void *opaque)
{
    RwWorker *w = opaque;
    RwTest *t = w->t;

    qemu_co_rwlock_rdlock(&t->lock);
    g_string_append_printf(t->trace, "%s-read ", w->name);
    t->readers_inside++;
    rw_hold_until_release(t);
    t->readers_inside--;
    qemu_co_rwlock_upgrade(&t->lock);
    g_string_append_printf(t->trace, "%s-write ", w->name);
    if (t->readers_inside || t->writer_inside) {
        t->violation = true;
    }
    t->writer_inside = true;
    yield_to_loop();
    t->writer_inside = false;
    qemu_co_rwlock_downgrade(&t->lock);
    g_string_append_printf(t->trace, "%s-down ", w->name);
    t->readers_inside++;
    yield_to_loop();
    t->readers_inside--;
    qemu_co_rwlock_unlock(&t->lock);
    t->done++;
}

static void test_co_rwlock_upgrade(void)
{
    RwTest t;
    RwWorker w[3];

    rw_test_init(&t);
    rw_start(&t, &w[0], co_upgrader, "u");
    rw_start(&t, &w[1], co_reader, "r1");
    rw_start(&t, &w[2], co_writer, "w1");
    spin();
    g_assert_cmpstr(t.trace->str, ==, "u-read r1 ");
    t.release = true;
    while (t.done < 3) {
        aio_poll(ctx, true);
    }
    g_assert_false(t.violation);
    /* u waited for r1 only, and w1 (queued before) came after u. */
    g_assert_cmpstr(t.trace->str, ==, "u-read r1 u-write u-down w1 ");
    g_string_free(t.trace, true);
}

static void coroutine_fn co_upgrade_alone(void *opaque)
{
    RwTest *t = opaque;

    qemu_co_rwlock_rdlock(&t->lock);
    qemu_co_rwlock_upgrade(&t->lock);
    t->writer_inside = t->lock.writer && t->lock.readers == 0;
    qemu_co_rwlock_unlock(&t->lock);
    t->done++;
}

static void test_co_rwlock_upgrade_alone(void)
{
    RwTest t;

    rw_test_init(&t);
    qemu_coroutine_enter(qemu_coroutine_create(co_upgrade_alone, &t));
    /* The only reader upgrades without yielding. */
    g_assert_cmpint(t.done, ==, 1);
    g_assert_true(t.writer_inside);
    g_assert_false(t.lock.writer);
    g_string_free(t.trace, true);
}

/* Downgrade lets the readers queued behind the writer in, not a writer. */

static void coroutine_fn co_downgrader(void *opaque)
{
    RwWorker *w = opaque;
    RwTest *t = w->t;

    qemu_co_rwlock_wrlock(&t->lock);
    g_string_append_printf(t->trace, "%s-write ", w->name);
    rw_hold_until_release(t);
    qemu_co_rwlock_downgrade(&t->lock);
    g_string_append_printf(t->trace, "%s-down ", w->name);
    t->readers_inside++;
    /* The queued readers join us while we still read. */
    yield_to_loop();
    yield_to_loop();
    t->readers_inside--;
    qemu_co_rwlock_unlock(&t->lock);
    t->done++;
}

static void test_co_rwlock_downgrade(void)
{
    RwTest t;
    RwWorker w[4];

    rw_test_init(&t);
    rw_start(&t, &w[0], co_downgrader, "d");
    rw_start(&t, &w[1], co_reader, "r1");
    rw_start(&t, &w[2], co_reader, "r2");
    rw_start(&t, &w[3], co_writer, "w1");
    spin();
    g_assert_cmpstr(t.trace->str, ==, "d-write ");
    t.release = true;
    while (t.done < 4) {
        aio_poll(ctx, true);
    }
    g_assert_false(t.violation);
    g_assert_cmpstr(t.trace->str, ==, "d-write d-down r1 r2 w1 ");
    /* d (now a reader), r1 and r2 were inside together. */
    g_assert_cmpint(t.max_readers_inside, ==, 3);
    g_string_free(t.trace, true);
}

/* Figures for the record (run with -m perf); nothing is asserted. */

typedef struct PerfMutex {
    CoMutex mutex;
    int left;
    int running;
    bool done;
} PerfMutex;

static void coroutine_fn co_perf_mutex(void *opaque)
{
    PerfMutex *p = opaque;

    while (p->left > 0) {
        qemu_co_mutex_lock(&p->mutex);
        p->left--;
        yield_to_loop();
        qemu_co_mutex_unlock(&p->mutex);
    }
    if (--p->running == 0) {
        p->done = true;
    }
}

static void perf_mutex_contended(void)
{
    const int n = 200000;
    PerfMutex p = { .left = n, .running = 4 };
    gint64 start;

    qemu_co_mutex_init(&p.mutex);
    start = g_get_monotonic_time();
    for (int i = 0; i < 4; i++) {
        qemu_coroutine_enter(qemu_coroutine_create(co_perf_mutex, &p));
    }
    run_loop_until(&p.done);
    g_test_message("contended CoMutex hand-over: %.0f ns per lock",
                   (g_get_monotonic_time() - start) * 1e3 / n);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    ctx = qemu_get_aio_context();

    g_test_add_func("/locks/co-mutex/exclusion-fifo", test_co_mutex);
    g_test_add_func("/locks/co-mutex/uncontended", test_co_mutex_uncontended);
    g_test_add_func("/locks/co-mutex/handover", test_co_mutex_handover);
    g_test_add_func("/locks/co-queue/no-lock", test_co_queue_no_lock);
    g_test_add_func("/locks/co-queue/restart-in-coroutine",
                    test_co_queue_restart_in_coroutine);
    g_test_add_func("/locks/co-queue/with-lock", test_co_queue_with_lock);
    g_test_add_func("/locks/co-rwlock/readers-share",
                    test_co_rwlock_readers_share);
    g_test_add_func("/locks/co-rwlock/writer-exclusive",
                    test_co_rwlock_writer_exclusive);
    g_test_add_func("/locks/co-rwlock/fifo", test_co_rwlock_fifo);
    g_test_add_func("/locks/co-rwlock/upgrade", test_co_rwlock_upgrade);
    g_test_add_func("/locks/co-rwlock/upgrade-alone",
                    test_co_rwlock_upgrade_alone);
    g_test_add_func("/locks/co-rwlock/downgrade", test_co_rwlock_downgrade);
    if (g_test_perf()) {
        g_test_add_func("/locks/perf/co-mutex", perf_mutex_contended);
    }
    return g_test_run();
}
