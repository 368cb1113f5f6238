/*
 * Coroutines: life cycle, nesting, identity, the pool, and stacks
 * (util/qemu-coroutine.c, util/coroutine-ucontext.c).
 */
#include "util/osdep.h"
#include "util/aio.h"

/* Create, enter, yield and terminate. */

static void coroutine_fn co_count_yields(void *opaque)
{
    int *step = opaque;

    *step = 1;
    qemu_coroutine_yield();
    *step = 2;
    qemu_coroutine_yield();
    *step = 3;
}

static void test_lifecycle(void)
{
    int step = 0;
    Coroutine *co = qemu_coroutine_create(co_count_yields, &step);

    g_assert_cmpint(step, ==, 0);
    g_assert_false(qemu_coroutine_entered(co));
    qemu_coroutine_enter(co);
    g_assert_cmpint(step, ==, 1);
    g_assert_true(qemu_coroutine_entered(co));
    qemu_coroutine_enter(co);
    g_assert_cmpint(step, ==, 2);
    qemu_coroutine_enter(co);
    g_assert_cmpint(step, ==, 3);
}

/* A coroutine entering another: yields go back to the enterer. */

typedef struct NestData {
    GString *trace;
    Coroutine *inner;
} NestData;

static void coroutine_fn co_nest_inner(void *opaque)
{
    NestData *d = opaque;

    g_string_append(d->trace, "i1 ");
    qemu_coroutine_yield();
    g_string_append(d->trace, "i2 ");
}

static void coroutine_fn co_nest_outer(void *opaque)
{
    NestData *d = opaque;

    g_string_append(d->trace, "o1 ");
    d->inner = qemu_coroutine_create(co_nest_inner, d);
    qemu_coroutine_enter(d->inner);
    g_string_append(d->trace, "o2 ");
    g_assert_true(qemu_coroutine_self() != d->inner);
    qemu_coroutine_enter(d->inner);
    g_string_append(d->trace, "o3 ");
}

static void test_nesting(void)
{
    NestData d = { .trace = g_string_new("") };

    qemu_coroutine_enter(qemu_coroutine_create(co_nest_outer, &d));
    g_assert_cmpstr(d.trace->str, ==, "o1 i1 o2 i2 o3 ");
    g_string_free(d.trace, true);
}

/* Deep nesting: each level creates and enters the next. */

static void coroutine_fn co_nest_deep(void *opaque)
{
    int *depth = opaque;

    if (--*depth > 0) {
        qemu_coroutine_enter(qemu_coroutine_create(co_nest_deep, depth));
    }
}

static void test_nesting_deep(void)
{
    int depth = 64;

    qemu_coroutine_enter(qemu_coroutine_create(co_nest_deep, &depth));
    g_assert_cmpint(depth, ==, 0);
}

/* qemu_coroutine_self(), qemu_in_coroutine(), the context. */

typedef struct SelfData {
    Coroutine *co;
    Coroutine *seen_self;
    bool seen_in_coroutine;
    bool seen_entered;
    AioContext *seen_ctx;
} SelfData;

static void coroutine_fn co_self(void *opaque)
{
    SelfData *d = opaque;

    d->seen_self = qemu_coroutine_self();
    d->seen_in_coroutine = qemu_in_coroutine();
    d->seen_entered = qemu_coroutine_entered(d->co);
    d->seen_ctx = qemu_coroutine_get_aio_context(d->seen_self);
}

static void test_self(void)
{
    SelfData d = { 0 };

    g_assert_null(qemu_coroutine_self());
    g_assert_false(qemu_in_coroutine());
    d.co = qemu_coroutine_create(co_self, &d);
    qemu_coroutine_enter(d.co);
    g_assert_true(d.seen_self == d.co);
    g_assert_true(d.seen_in_coroutine);
    g_assert_true(d.seen_entered);
    g_assert_true(d.seen_ctx == qemu_get_current_aio_context());
    g_assert_null(qemu_coroutine_self());
    g_assert_false(qemu_in_coroutine());
}

/* qemu_coroutine_entered() over the whole life. */

static void coroutine_fn co_yield_once(void *opaque)
{
    bool *done = opaque;

    qemu_coroutine_yield();
    *done = true;
}

static void test_entered(void)
{
    bool done = false;
    Coroutine *co = qemu_coroutine_create(co_yield_once, &done);

    g_assert_false(qemu_coroutine_entered(co));
    qemu_coroutine_enter(co);
    /* Yielded, not finished: still entered. */
    g_assert_true(qemu_coroutine_entered(co));
    qemu_coroutine_enter(co);
    g_assert_true(done);
    /* Finished: back in the pool, not entered. */
    g_assert_false(qemu_coroutine_entered(co));
}

/* enter_if_inactive() does not re-enter a running coroutine. */

typedef struct InactiveData {
    Coroutine *co;
    int runs;
} InactiveData;

static void coroutine_fn co_enter_self_if_inactive(void *opaque)
{
    InactiveData *d = opaque;

    d->runs++;
    /* We are running: this must be a no-op, not a recursive entry. */
    qemu_coroutine_enter_if_inactive(d->co);
    qemu_coroutine_yield();
    d->runs++;
}

static void test_enter_if_inactive(void)
{
    InactiveData d = { 0 };

    d.co = qemu_coroutine_create(co_enter_self_if_inactive, &d);
    qemu_coroutine_enter_if_inactive(d.co);
    g_assert_cmpint(d.runs, ==, 1);
    qemu_coroutine_enter_if_inactive(d.co);
    g_assert_cmpint(d.runs, ==, 2);
}

/* Invariant 1: entering a running coroutine aborts. */

static void coroutine_fn co_enter_self(void *opaque)
{
    qemu_coroutine_enter(qemu_coroutine_self());
}

static void test_reenter_aborts(void)
{
    if (g_test_subprocess()) {
        qemu_coroutine_enter(qemu_coroutine_create(co_enter_self, NULL));
        return;
    }
    g_test_trap_subprocess(NULL, 0, 0);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("*re-entered recursively*");
}

/* Many coroutines alive at once, then the pool serves new ones. */

#define MANY 1000

static void coroutine_fn co_yield_then_count(void *opaque)
{
    int *finished = opaque;

    qemu_coroutine_yield();
    (*finished)++;
}

static void coroutine_fn co_nop(void *opaque)
{
}

static void test_many_and_pool(void)
{
    Coroutine **cos = g_new(Coroutine *, MANY);
    unsigned int pool_before;
    int finished = 0;
    Coroutine *co, *again;

    for (int i = 0; i < MANY; i++) {
        cos[i] = qemu_coroutine_create(co_yield_then_count, &finished);
        qemu_coroutine_enter(cos[i]);
    }
    g_assert_cmpint(finished, ==, 0);
    for (int i = 0; i < MANY; i++) {
        qemu_coroutine_enter(cos[i]);
    }
    g_assert_cmpint(finished, ==, MANY);
    g_free(cos);

    /* Finished coroutines were kept (up to the pool's bound). */
    pool_before = qemu_coroutine_pool_size();
    g_assert_cmpuint(pool_before, >, 0);
    g_assert_cmpuint(pool_before, <, MANY);

    /* A new coroutine comes from the pool, and returns to it. */
    co = qemu_coroutine_create(co_nop, NULL);
    g_assert_cmpuint(qemu_coroutine_pool_size(), ==, pool_before - 1);
    qemu_coroutine_enter(co);
    g_assert_cmpuint(qemu_coroutine_pool_size(), ==, pool_before);
    again = qemu_coroutine_create(co_nop, NULL);
    g_assert_true(again == co);
    qemu_coroutine_enter(again);
}

/* A pooled coroutine starts its new entry function from scratch. */

static void coroutine_fn co_store(void *opaque)
{
    int *value = opaque;

    *value = 42;
}

static void test_pool_reuse_runs_new_entry(void)
{
    int a = 0, b = 0;
    Coroutine *first = qemu_coroutine_create(co_store, &a);

    qemu_coroutine_enter(first);
    g_assert_cmpint(a, ==, 42);
    g_assert_true(qemu_coroutine_create(co_store, &b) == first);
    qemu_coroutine_enter(first);
    g_assert_cmpint(b, ==, 42);
}

/* Stacks: half a MiB of locals fits, and survives a yield. */

static void coroutine_fn co_big_stack(void *opaque)
{
    int *sum = opaque;
    volatile char buf[512 * 1024];

    for (size_t i = 0; i < sizeof(buf); i += 4096) {
        buf[i] = (char)(i / 4096);
    }
    qemu_coroutine_yield();
    for (size_t i = 0; i < sizeof(buf); i += 4096) {
        *sum += buf[i];
    }
}

static void test_big_stack(void)
{
    int sum = 0, expect = 0;
    Coroutine *co = qemu_coroutine_create(co_big_stack, &sum);

    qemu_coroutine_enter(co);
    qemu_coroutine_enter(co);
    for (size_t i = 0; i < 512 * 1024; i += 4096) {
        expect += (char)(i / 4096);
    }
    g_assert_cmpint(sum, ==, expect);
}

/* Two coroutines interleaved: each keeps its own locals. */

typedef struct PingPong {
    GString *trace;
    const char *name;
} PingPong;

static void coroutine_fn co_ping(void *opaque)
{
    PingPong *p = opaque;

    for (int i = 0; i < 3; i++) {
        g_string_append_printf(p->trace, "%s%d ", p->name, i);
        qemu_coroutine_yield();
    }
}

static void test_interleave(void)
{
    GString *trace = g_string_new("");
    PingPong a = { trace, "a" }, b = { trace, "b" };
    Coroutine *ca = qemu_coroutine_create(co_ping, &a);
    Coroutine *cb = qemu_coroutine_create(co_ping, &b);

    for (int i = 0; i < 4; i++) {
        qemu_coroutine_enter(ca);
        qemu_coroutine_enter(cb);
    }
    g_assert_cmpstr(trace->str, ==, "a0 b0 a1 b1 a2 b2 ");
    g_string_free(trace, true);
}

/* Each thread has its own pool and leader. */

static gpointer thread_run_coroutines(gpointer opaque)
{
    int finished = 0;

    for (int i = 0; i < 100; i++) {
        Coroutine *co = qemu_coroutine_create(co_yield_then_count, &finished);

        qemu_coroutine_enter(co);
        qemu_coroutine_enter(co);
    }
    g_assert_cmpint(finished, ==, 100);
    g_assert_cmpuint(qemu_coroutine_pool_size(), ==, 1);
    return NULL;
}

static void test_threads(void)
{
    GThread *t[4];

    for (int i = 0; i < 4; i++) {
        t[i] = g_thread_new("co", thread_run_coroutines, NULL);
    }
    for (int i = 0; i < 4; i++) {
        g_thread_join(t[i]);
    }
}

/* Figures for the record (run with -m perf); nothing is asserted. */

static void coroutine_fn co_yield_loop(void *opaque)
{
    bool *stop = opaque;

    while (!*stop) {
        qemu_coroutine_yield();
    }
}

static void perf_lifecycle(void)
{
    const int n = 2000000;
    gint64 start = g_get_monotonic_time();
    bool stop = false;
    double secs;
    Coroutine *co;

    for (int i = 0; i < n; i++) {
        qemu_coroutine_enter(qemu_coroutine_create(co_nop, NULL));
    }
    secs = (g_get_monotonic_time() - start) / 1e6;
    g_test_message("create+enter+terminate: %.0f ns each", secs * 1e9 / n);

    co = qemu_coroutine_create(co_yield_loop, &stop);
    start = g_get_monotonic_time();
    for (int i = 0; i < n; i++) {
        qemu_coroutine_enter(co);
    }
    secs = (g_get_monotonic_time() - start) / 1e6;
    g_test_message("enter+yield: %.0f ns each", secs * 1e9 / n);
    stop = true;
    qemu_coroutine_enter(co);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/coroutine/lifecycle", test_lifecycle);
    g_test_add_func("/coroutine/nesting", test_nesting);
    g_test_add_func("/coroutine/nesting-deep", test_nesting_deep);
    g_test_add_func("/coroutine/self", test_self);
    g_test_add_func("/coroutine/entered", test_entered);
    g_test_add_func("/coroutine/enter-if-inactive", test_enter_if_inactive);
    g_test_add_func("/coroutine/reenter-aborts", test_reenter_aborts);
    g_test_add_func("/coroutine/many-and-pool", test_many_and_pool);
    g_test_add_func("/coroutine/pool-reuse-new-entry",
                    test_pool_reuse_runs_new_entry);
    g_test_add_func("/coroutine/big-stack", test_big_stack);
    g_test_add_func("/coroutine/interleave", test_interleave);
    g_test_add_func("/coroutine/threads", test_threads);
    if (g_test_perf()) {
        g_test_add_func("/coroutine/perf/lifecycle", perf_lifecycle);
    }
    return g_test_run();
}
