/*
 * The thread pool (util/thread-pool.c): jobs run in workers, completions
 * run in the pool's AioContext.
 */
#include "util/osdep.h"
#include "util/thread-pool.h"

static AioContext *ctx;
static GThread *main_thread;

/* Jobs */

typedef struct Job {
    int value;
    bool ran_in_worker;
    int sleep_us;
} Job;

static int job_double(void *opaque)
{
    Job *job = opaque;

    job->ran_in_worker = g_thread_self() != main_thread;
    if (job->sleep_us) {
        g_usleep(job->sleep_us);
    }
    return job->value * 2;
}

/* Counts how many jobs run at the same time. */
static int concurrent;      /* atomic */
static int max_concurrent;  /* atomic */

static int job_concurrency(void *opaque)
{
    int now = __atomic_add_fetch(&concurrent, 1, __ATOMIC_SEQ_CST);
    int max = __atomic_load_n(&max_concurrent, __ATOMIC_SEQ_CST);

    while (now > max &&
           !__atomic_compare_exchange_n(&max_concurrent, &max, now, false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        continue;
    }
    g_usleep(2000);
    __atomic_sub_fetch(&concurrent, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static void reset_concurrency(void)
{
    concurrent = 0;
    max_concurrent = 0;
}

/* submit_co */

typedef struct CoJob {
    ThreadPool *pool;
    ThreadPoolFunc *func;
    Job job;
    int ret;
    bool resumed_in_main;
    bool done;
} CoJob;

static void coroutine_fn co_submit(void *opaque)
{
    CoJob *c = opaque;

    c->ret = thread_pool_submit_co(c->pool, c->func, &c->job);
    c->resumed_in_main = g_thread_self() == main_thread;
    c->done = true;
}

static void test_submit_co(void)
{
    CoJob c = { .pool = aio_get_thread_pool(ctx), .func = job_double,
                .job = { .value = 21 } };

    qemu_coroutine_enter(qemu_coroutine_create(co_submit, &c));
    g_assert_false(c.done);
    while (!c.done) {
        aio_poll(ctx, true);
    }
    g_assert_cmpint(c.ret, ==, 42);
    g_assert_true(c.job.ran_in_worker);
    g_assert_true(c.resumed_in_main);
}

#define MANY_JOBS 200

static void test_submit_co_many(void)
{
    CoJob *c = g_new0(CoJob, MANY_JOBS);
    bool all_done = false;

    for (int i = 0; i < MANY_JOBS; i++) {
        c[i] = (CoJob) {
            .pool = aio_get_thread_pool(ctx),
            .func = job_double,
            .job = { .value = i, .sleep_us = 1000 * (i % 3) },
        };
        qemu_coroutine_enter(qemu_coroutine_create(co_submit, &c[i]));
    }
    while (!all_done) {
        aio_poll(ctx, true);
        all_done = true;
        for (int i = 0; i < MANY_JOBS; i++) {
            all_done = all_done && c[i].done;
        }
    }
    for (int i = 0; i < MANY_JOBS; i++) {
        g_assert_cmpint(c[i].ret, ==, 2 * i);
        g_assert_true(c[i].job.ran_in_worker);
        g_assert_true(c[i].resumed_in_main);
    }
    g_free(c);
}

/* Jobs run in parallel, up to max_threads and no further. */

static void run_concurrency_jobs(ThreadPool *pool, int n)
{
    CoJob *c = g_new0(CoJob, n);
    int done;

    for (int i = 0; i < n; i++) {
        c[i] = (CoJob) { .pool = pool, .func = job_concurrency };
        qemu_coroutine_enter(qemu_coroutine_create(co_submit, &c[i]));
    }
    do {
        aio_poll(ctx, true);
        done = 0;
        for (int i = 0; i < n; i++) {
            done += c[i].done;
        }
    } while (done < n);
    g_free(c);
}

static void test_parallel(void)
{
    ThreadPool *pool = thread_pool_new(ctx);

    reset_concurrency();
    run_concurrency_jobs(pool, 16);
    /* 16 jobs of 2 ms each, started together: several overlap. */
    g_test_message("%d of 16 jobs ran at the same time", max_concurrent);
    g_assert_cmpint(max_concurrent, >, 1);
    thread_pool_free(pool);
}

static void test_max_threads(void)
{
    ThreadPool *pool = thread_pool_new(ctx);

    thread_pool_set_limits(pool, 0, 2);
    reset_concurrency();
    run_concurrency_jobs(pool, 12);
    g_assert_cmpint(max_concurrent, >=, 1);
    g_assert_cmpint(max_concurrent, <=, 2);

    thread_pool_set_limits(pool, 0, 1);
    reset_concurrency();
    run_concurrency_jobs(pool, 6);
    g_assert_cmpint(max_concurrent, ==, 1);
    thread_pool_free(pool);
}

/* The threads of this process, as /proc lists them. */
static int count_threads(void)
{
    g_autoptr(GDir) dir = g_dir_open("/proc/self/task", 0, NULL);
    int n = 0;

    g_assert_nonnull(dir);
    while (g_dir_read_name(dir)) {
        n++;
    }
    return n;
}

/*
 * The threads once the workers of the pools freed before have gone: a
 * freed pool's detached workers may still be exiting.  The count that
 * stays the same for 100 ms, within two seconds.
 */
static int settled_thread_count(void)
{
    int n = count_threads(), same = 0;

    for (int i = 0; i < 200 && same < 10; i++) {
        int now;

        g_usleep(10 * 1000);
        now = count_threads();
        same = now == n ? same + 1 : 0;
        n = now;
    }
    return n;
}

/* Waits up to two seconds for the process to have @want threads. */
static int wait_for_threads(int want)
{
    int n = count_threads();

    for (int i = 0; i < 200 && n != want; i++) {
        g_usleep(10 * 1000);
        n = count_threads();
    }
    return n;
}

/*
 * A minimum starts its workers at once and they take jobs; a maximum
 * lowered below the workers there are makes the idle ones exit at once,
 * not at their idle timeout.
 */
static void test_min_threads(void)
{
    int base = settled_thread_count();
    ThreadPool *pool = thread_pool_new(ctx);

    thread_pool_set_limits(pool, 3, 8);
    g_assert_cmpint(wait_for_threads(base + 3), ==, base + 3);
    reset_concurrency();
    run_concurrency_jobs(pool, 12);
    g_assert_cmpint(max_concurrent, >=, 1);
    g_assert_cmpint(count_threads(), >=, base + 3);

    thread_pool_set_limits(pool, 0, 1);
    g_assert_cmpint(wait_for_threads(base + 1), ==, base + 1);
    reset_concurrency();
    run_concurrency_jobs(pool, 4);
    g_assert_cmpint(max_concurrent, ==, 1);
    thread_pool_free(pool);
    g_assert_cmpint(wait_for_threads(base), ==, base);
}

/* submit_aio */

typedef struct AioJob {
    Job job;
    int ret;
    int completions;
    GThread *completion_thread;
} AioJob;

static void aio_job_done(void *opaque, int ret)
{
    AioJob *a = opaque;

    a->ret = ret;
    a->completions++;
    a->completion_thread = g_thread_self();
}

static void test_submit_aio(void)
{
    AioJob a = { .job = { .value = 5 } };

    thread_pool_submit_aio(aio_get_thread_pool(ctx), job_double, &a.job,
                           aio_job_done, &a);
    /* The callback never runs outside aio_poll(). */
    g_usleep(10 * 1000);
    g_assert_cmpint(a.completions, ==, 0);
    while (!a.completions) {
        aio_poll(ctx, true);
    }
    g_assert_cmpint(a.ret, ==, 10);
    g_assert_cmpint(a.completions, ==, 1);
    g_assert_true(a.completion_thread == main_thread);
}

/* A pool of an iothread's context completes in the iothread. */

#define OTHER_JOBS 8

typedef struct OtherContext {
    GThread *thread;
    AioContext *ctx;
    ThreadPool *pool;   /* atomic */
    bool stopping;      /* atomic */
    int done;           /* atomic */
    AioJob jobs[2 * OTHER_JOBS];
    Job counted[2 * OTHER_JOBS];
} OtherContext;

static gpointer iothread_run(gpointer opaque)
{
    OtherContext *o = opaque;
    AioContext *own = aio_context_new(&error_abort);

    qemu_set_current_aio_context(own);
    __atomic_store_n(&o->ctx, own, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&o->stopping, __ATOMIC_SEQ_CST)) {
        aio_poll(o->ctx, true);
    }
    return NULL;
}

static void other_count_done(void *opaque, int ret)
{
    OtherContext *o = opaque;

    __atomic_add_fetch(&o->done, 1, __ATOMIC_SEQ_CST);
}

/* Runs in the iothread: creates the pool there and submits half. */
static void other_submit_bh(void *opaque)
{
    OtherContext *o = opaque;
    ThreadPool *pool = aio_get_thread_pool(o->ctx);

    for (int i = 0; i < OTHER_JOBS; i++) {
        thread_pool_submit_aio(pool, job_double, &o->jobs[i].job,
                               aio_job_done, &o->jobs[i]);
        thread_pool_submit_aio(pool, job_double, &o->counted[i],
                               other_count_done, o);
    }
    __atomic_store_n(&o->pool, pool, __ATOMIC_SEQ_CST);
}

static void test_submit_aio_other_context(void)
{
    OtherContext *o = g_new0(OtherContext, 1);
    ThreadPool *pool;

    o->thread = g_thread_new("iothread", iothread_run, o);
    while (!__atomic_load_n(&o->ctx, __ATOMIC_ACQUIRE)) {
        g_usleep(1000);
    }

    for (int i = 0; i < 2 * OTHER_JOBS; i++) {
        o->jobs[i] = (AioJob) { .job = { .value = i } };
    }
    aio_bh_schedule_oneshot(o->ctx, other_submit_bh, o);
    while (!(pool = __atomic_load_n(&o->pool, __ATOMIC_SEQ_CST))) {
        g_usleep(1000);
    }
    /* The other half is submitted from the main thread. */
    for (int i = OTHER_JOBS; i < 2 * OTHER_JOBS; i++) {
        thread_pool_submit_aio(pool, job_double, &o->jobs[i].job,
                               aio_job_done, &o->jobs[i]);
        thread_pool_submit_aio(pool, job_double, &o->counted[i],
                               other_count_done, o);
    }
    while (__atomic_load_n(&o->done, __ATOMIC_SEQ_CST) < 2 * OTHER_JOBS) {
        g_usleep(1000);
    }

    __atomic_store_n(&o->stopping, true, __ATOMIC_SEQ_CST);
    aio_notify(o->ctx);
    g_thread_join(o->thread);
    /* Completions pending when the loop stopped are run by the free. */
    aio_context_unref(o->ctx);

    for (int i = 0; i < 2 * OTHER_JOBS; i++) {
        g_assert_cmpint(o->jobs[i].completions, ==, 1);
        g_assert_cmpint(o->jobs[i].ret, ==, 2 * i);
        g_assert_true(o->jobs[i].job.ran_in_worker);
        g_assert_true(o->jobs[i].completion_thread == o->thread);
    }
    g_free(o);
}

/* thread_pool_free() waits for the jobs and runs their completions. */

static void test_free_waits(void)
{
    ThreadPool *pool = thread_pool_new(ctx);
    AioJob a[4];

    for (int i = 0; i < 4; i++) {
        a[i] = (AioJob) { .job = { .value = i, .sleep_us = 5000 } };
        thread_pool_submit_aio(pool, job_double, &a[i].job, aio_job_done,
                               &a[i]);
    }
    thread_pool_free(pool);
    for (int i = 0; i < 4; i++) {
        g_assert_cmpint(a[i].completions, ==, 1);
        g_assert_cmpint(a[i].ret, ==, 2 * i);
    }
    g_assert_false(aio_poll(ctx, false));
}

/* Figures for the record (run with -m perf); nothing is asserted. */

static int job_nop(void *opaque)
{
    return 0;
}

typedef struct PerfWorker {
    ThreadPool *pool;
    int left;           /* shared by all workers */
    int *running;
} PerfWorker;

static void coroutine_fn co_perf_submit(void *opaque)
{
    PerfWorker *w = opaque;

    while (w->left > 0) {
        w->left--;
        thread_pool_submit_co(w->pool, job_nop, NULL);
    }
    (*w->running)--;
}

static void perf_submit_co(void)
{
    const int depth = 64, n = 300000;
    int running = depth;
    PerfWorker w = { aio_get_thread_pool(ctx), n, &running };
    gint64 start = g_get_monotonic_time();
    double secs;

    for (int i = 0; i < depth; i++) {
        qemu_coroutine_enter(qemu_coroutine_create(co_perf_submit, &w));
    }
    while (running > 0) {
        aio_poll(ctx, true);
    }
    secs = (g_get_monotonic_time() - start) / 1e6;
    g_test_message("submit_co round trips, queue depth %d: %.0f per second",
                   depth, n / secs);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    ctx = qemu_get_aio_context();
    main_thread = g_thread_self();

    g_test_add_func("/thread-pool/submit-co", test_submit_co);
    g_test_add_func("/thread-pool/submit-co-many", test_submit_co_many);
    g_test_add_func("/thread-pool/parallel", test_parallel);
    g_test_add_func("/thread-pool/max-threads", test_max_threads);
    g_test_add_func("/thread-pool/min-threads", test_min_threads);
    g_test_add_func("/thread-pool/submit-aio", test_submit_aio);
    g_test_add_func("/thread-pool/submit-aio-other-context",
                    test_submit_aio_other_context);
    g_test_add_func("/thread-pool/free-waits", test_free_waits);
    if (g_test_perf()) {
        g_test_add_func("/thread-pool/perf/submit-co", perf_submit_co);
    }
    return g_test_run();
}
