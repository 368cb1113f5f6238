/*
 * What a cross-thread handoff costs: a coroutine moved from the main
 * loop's context to another thread's and back (aio_co_reschedule_self(),
 * the handoff a request from a non-home thread would take to reach its
 * node's context and to come back), timed over many round trips.
 *
 *   handoff-bench [ROUND_TRIPS]        (default 200000)
 *
 * Prints "ns per handoff N" (a round trip is two handoffs).  Pin it to
 * one or two CPUs with taskset to see both cases; count its system calls
 * per handoff with strace -c -f.  A benchmark: it prints, never asserts.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "util/coroutine.h"

typedef struct HandoffThread {
    GThread *thread;
    AioContext *ctx;            /* atomic: set by the thread */
    bool stopping;              /* atomic */
} HandoffThread;

typedef struct Handoff {
    HandoffThread *other;
    unsigned long round_trips;
    bool done;
} Handoff;

static gpointer handoff_thread_run(gpointer opaque)
{
    HandoffThread *t = opaque;
    AioContext *own = aio_context_new(&error_abort);

    qemu_set_current_aio_context(own);
    aio_context_set_home(own, true);
    __atomic_store_n(&t->ctx, own, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&t->stopping, __ATOMIC_SEQ_CST)) {
        aio_poll(own, true);
    }
    aio_context_set_home(own, false);
    return NULL;
}

static void coroutine_fn handoff_co(void *opaque)
{
    Handoff *h = opaque;
    AioContext *home = qemu_get_aio_context();

    for (unsigned long i = 0; i < h->round_trips; i++) {
        aio_co_reschedule_self(h->other->ctx);
        aio_co_reschedule_self(home);
    }
    h->done = true;
}

int main(int argc, char **argv)
{
    HandoffThread t = { 0 };
    Handoff h = {
        .other = &t,
        .round_trips = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000,
    };
    AioContext *home = qemu_get_aio_context();
    int64_t start;
    double ns;

    qemu_set_current_aio_context(home);
    aio_context_set_home(home, true);
    t.thread = g_thread_new("handoff", handoff_thread_run, &t);
    while (!__atomic_load_n(&t.ctx, __ATOMIC_ACQUIRE)) {
        g_usleep(1000);
    }
    start = g_get_monotonic_time();
    qemu_coroutine_enter(qemu_coroutine_create(handoff_co, &h));
    while (!h.done) {
        aio_poll(home, true);
    }
    ns = (g_get_monotonic_time() - start) * 1000.0 / (2.0 * h.round_trips);
    printf("ns per handoff %.0f\n", ns);
    __atomic_store_n(&t.stopping, true, __ATOMIC_SEQ_CST);
    aio_notify(t.ctx);
    g_thread_join(t.thread);
    aio_context_unref(t.ctx);
    return 0;
}
