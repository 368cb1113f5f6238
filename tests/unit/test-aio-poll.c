/*
 * The event loop's adaptive busy-poll (util/aio-posix.c invariants 4-6):
 * the window rule, a poll hit that skips epoll_wait(), the window growing
 * and shrinking on real waits, handlers that only epoll sees (and rare
 * ones), work from another thread ending a window, polling mode (sources'
 * wake-ups off while the loop polls, back on before it sleeps), and the
 * main loop that polls only when the program (the storage daemon,
 * qblock-nbd) or a main-loop object asks.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "util/main-loop.h"
#include "util/user-object.h"

#include <sys/eventfd.h>

#define MAX_NS_LONG     (1000 * 1000 * 1000)    /* 1 s: never reached */

/* The rule alone: aio_poll_window_next(). */
static void test_window_rule(void)
{
    /* poll-max-ns 0: no window, whatever happened */
    g_assert_cmpint(aio_poll_window_next(4096, 100, 0, 0, 0), ==, 0);
    /* from nothing, an event within poll-max-ns starts a window */
    g_assert_cmpint(aio_poll_window_next(0, 2000, 32768, 0, 0), ==,
                    AIO_POLL_START_NS);
    /* ... never longer than poll-max-ns */
    g_assert_cmpint(aio_poll_window_next(0, 500, 2000, 0, 0), ==, 2000);
    /* an event just after the window: it grows, by 2 or by poll-grow */
    g_assert_cmpint(aio_poll_window_next(4096, 5000, 32768, 0, 0), ==,
                    8192);
    g_assert_cmpint(aio_poll_window_next(4096, 5000, 32768, 3, 0), ==,
                    12288);
    g_assert_cmpint(aio_poll_window_next(16384, 20000, 32768, 0, 0), ==,
                    32768);
    /* saturating: a huge poll-grow does not overflow past poll-max-ns */
    g_assert_cmpint(aio_poll_window_next(4096, 5000, 32768, INT64_MAX, 0),
                    ==, 32768);
    /* caught within the window: kept */
    g_assert_cmpint(aio_poll_window_next(4096, 1000, 32768, 0, 0), ==,
                    4096);
    g_assert_cmpint(aio_poll_window_next(32768, 32768, 32768, 0, 0), ==,
                    32768);
    /* later than any window allowed: shrunk, to nothing or by poll-shrink */
    g_assert_cmpint(aio_poll_window_next(32768, 100000, 32768, 0, 0), ==,
                    0);
    g_assert_cmpint(aio_poll_window_next(32768, 100000, 32768, 0, 4), ==,
                    8192);
    /* a poll-max-ns lowered under the window (qom-set) bounds it at once */
    g_assert_cmpint(aio_poll_window_next(40000, 1000, 32768, 0, 0), ==,
                    32768);
}

/*
 * A fake poll source: an eventfd nobody writes, whose io_poll says "work"
 * from its ready_after-th call on.
 */
typedef struct FakeSource {
    int fd;
    int polls;              /* poll calls */
    int ready_after;        /* 0: never ready */
    int ready_runs;         /* ready calls */
    int reads;              /* io_read calls */
    int begins;             /* begin calls */
    int ends;               /* end calls */
    bool wakeups_off;       /* between begin and end */
    bool work_at_end;       /* end finds work once */
} FakeSource;

static bool fake_poll(void *opaque)
{
    FakeSource *f = opaque;

    f->polls++;
    return f->ready_after && f->polls >= f->ready_after;
}

static void fake_poll_ready(void *opaque)
{
    FakeSource *f = opaque;

    f->ready_runs++;
    f->ready_after = 0;
}

static void fake_begin(void *opaque)
{
    FakeSource *f = opaque;

    f->begins++;
    f->wakeups_off = true;
}

static bool fake_end(void *opaque)
{
    FakeSource *f = opaque;
    bool work = f->work_at_end;

    f->ends++;
    f->wakeups_off = false;
    if (work) {
        /* it came while the wake-ups were off: poll says so from now */
        f->work_at_end = false;
        f->ready_after = 1;
        f->polls = 0;
    }
    return work;
}

static const AioPollHandlers fake_poll_handlers = {
    .poll   = fake_poll,
    .ready  = fake_poll_ready,
    .begin  = fake_begin,
    .end    = fake_end,
};

static void fake_read(void *opaque)
{
    FakeSource *f = opaque;
    uint64_t v;

    f->reads++;
    g_assert_cmpint(read(f->fd, &v, sizeof(v)), ==, sizeof(v));
}

static void fake_open(AioContext *pc, FakeSource *f)
{
    *f = (FakeSource) { .fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) };
    g_assert_cmpint(f->fd, >=, 0);
    aio_set_fd_handler(pc, f->fd, fake_read, NULL, f);
    aio_set_fd_poll(pc, f->fd, &fake_poll_handlers);
}

static void fake_close(AioContext *pc, FakeSource *f)
{
    aio_set_fd_handler(pc, f->fd, NULL, NULL, NULL);
    close(f->fd);
}

static void timer_fired(void *opaque)
{
    (*(int *)opaque)++;
}

/*
 * Blocking polls of @pc until a timer @ms away fires (a whole @ms, so
 * that the wait is one sleep the window adapts to).
 */
static void wait_ms(AioContext *pc, int ms)
{
    int fired = 0;
    QEMUTimer *t = aio_timer_new(pc, QEMU_CLOCK_REALTIME, SCALE_NS,
                                 timer_fired, &fired);

    timer_mod(t, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ms * SCALE_MS);
    while (!fired) {
        aio_poll(pc, true);
    }
    timer_free(t);
}

static AioPollStats stats_of(AioContext *pc)
{
    AioPollStats st;

    aio_context_get_poll_stats(pc, &st);
    return st;
}

/* A context whose window has grown to @max_ns (poll-grow huge). */
static AioContext *polling_context_new(int64_t max_ns)
{
    AioContext *pc = aio_context_new(&error_abort);

    aio_context_set_poll_params(pc, max_ns, INT64_MAX, 0);
    /* the first wait starts a window, the second grows it to the top */
    wait_ms(pc, 1);
    g_assert_cmpint(stats_of(pc).window_ns, ==, AIO_POLL_START_NS);
    wait_ms(pc, 1);
    g_assert_cmpint(stats_of(pc).window_ns, ==, max_ns);
    return pc;
}

static void test_hit_skips_epoll(void)
{
    AioContext *pc = aio_context_new(&error_abort);
    AioPollStats before, after;
    FakeSource f;

    fake_open(pc, &f);
    aio_context_set_poll_params(pc, MAX_NS_LONG, INT64_MAX, 0);
    wait_ms(pc, 1);
    wait_ms(pc, 1);
    g_assert_cmpint(stats_of(pc).window_ns, ==, MAX_NS_LONG);
    /* the windows of those waits asked the source and found nothing */
    g_assert_cmpint(f.polls, >, 0);
    g_assert_cmpint(f.ready_runs, ==, 0);

    /* the third call finds work: it runs, and the loop does not sleep */
    f.polls = 0;
    f.ready_after = 3;
    before = stats_of(pc);
    g_assert_true(aio_poll(pc, true));
    after = stats_of(pc);
    g_assert_cmpint(f.polls, ==, 3);
    g_assert_cmpint(f.ready_runs, ==, 1);
    g_assert_cmpint(f.reads, ==, 0);
    g_assert_cmpuint(after.polls, ==, before.polls + 1);
    g_assert_cmpuint(after.poll_hits, ==, before.poll_hits + 1);
    g_assert_cmpuint(after.epoll_waits, ==, before.epoll_waits);
    /* caught within the window: it stays */
    g_assert_cmpint(after.window_ns, ==, MAX_NS_LONG);

    /*
     * The fd itself still works, through epoll (a non-blocking poll: a
     * blocking one would first spend its 1 s window on a source that
     * stays idle).
     */
    g_assert_cmpint(eventfd_write(f.fd, 1), ==, 0);
    while (!f.reads) {
        aio_poll(pc, false);
    }
    fake_close(pc, &f);
    aio_context_unref(pc);
}

static void test_window_shrinks(void)
{
    FakeSource f;
    AioContext *pc;
    int polls;

    pc = polling_context_new(MAX_NS_LONG);
    fake_open(pc, &f);
    /* a lower poll-max-ns bounds the window at the next poll */
    aio_context_set_poll_params(pc, SCALE_MS, 0, 0);
    aio_poll(pc, false);
    wait_ms(pc, 20);
    /* a window of 1 ms polled in vain, the timer came 20 ms later */
    g_assert_cmpint(f.polls, >, 0);
    g_assert_cmpint(stats_of(pc).window_ns, ==, 0);
    /* with no window, the next wait does not poll */
    polls = f.polls;
    wait_ms(pc, 20);
    g_assert_cmpint(f.polls, ==, polls);
    /* poll-max-ns 0: nothing any more, whatever the waits */
    aio_context_set_poll_params(pc, 0, 0, 0);
    wait_ms(pc, 1);
    wait_ms(pc, 1);
    g_assert_cmpint(f.polls, ==, polls);
    g_assert_cmpint(stats_of(pc).window_ns, ==, 0);
    fake_close(pc, &f);
    aio_context_unref(pc);
}

typedef struct PipeSource {
    int fds[2];
    int reads;              /* io_read calls */
} PipeSource;

static void pipe_drain_read(void *opaque)
{
    PipeSource *p = opaque;
    char buf[16];

    p->reads++;
    while (read(p->fds[0], buf, sizeof(buf)) > 0) {
        continue;
    }
}

/*
 * Invariant 4: a handler with no poll callbacks (a socket) is seen by
 * the window's epoll_wait() without waiting; one marked rare waits for
 * the window to end, and costs it no system call.
 */
static void test_epoll_only_handler(void)
{
    AioContext *pc = polling_context_new(MAX_NS_LONG);
    AioPollStats before, after;
    PipeSource p = { 0 };
    FakeSource f;

    fake_open(pc, &f);
    g_assert_cmpint(pipe2(p.fds, O_NONBLOCK | O_CLOEXEC), ==, 0);
    aio_set_fd_handler(pc, p.fds[0], pipe_drain_read, NULL, &p);
    /* the window polls on, and its epoll_wait() finds the pipe's event */
    g_assert_cmpint(write(p.fds[1], "x", 1), ==, 1);
    before = stats_of(pc);
    g_assert_true(aio_poll(pc, true));
    after = stats_of(pc);
    g_assert_cmpint(p.reads, ==, 1);
    g_assert_cmpint(f.polls, >, 0);
    g_assert_cmpuint(after.polls, ==, before.polls + 1);
    g_assert_cmpuint(after.poll_hits, ==, before.poll_hits + 1);
    g_assert_cmpint(after.window_ns, ==, MAX_NS_LONG);

    /* rare: the memory source's work comes first, the pipe's after */
    aio_set_fd_poll(pc, p.fds[0], &aio_poll_rare);
    g_assert_cmpint(write(p.fds[1], "x", 1), ==, 1);
    f.polls = 0;
    f.ready_after = 3;
    before = stats_of(pc);
    g_assert_true(aio_poll(pc, true));
    after = stats_of(pc);
    g_assert_cmpint(f.ready_runs, ==, 1);
    g_assert_cmpint(p.reads, ==, 1);
    /* three rounds, not one epoll_wait() among them */
    g_assert_cmpuint(after.epoll_waits, ==, before.epoll_waits);
    g_assert_true(aio_poll(pc, false));
    g_assert_cmpint(p.reads, ==, 2);

    /* registered anew as a control fd: rare from the start */
    aio_set_fd_handler(pc, p.fds[0], NULL, NULL, NULL);
    aio_set_fd_handler_rare(pc, p.fds[0], pipe_drain_read, NULL, &p);
    f.polls = 0;
    f.ready_after = 3;
    before = stats_of(pc);
    g_assert_true(aio_poll(pc, true));
    g_assert_cmpuint(stats_of(pc).epoll_waits, ==, before.epoll_waits);
    g_assert_cmpint(f.ready_runs, ==, 2);
    aio_set_fd_handler(pc, p.fds[0], NULL, NULL, NULL);
    close(p.fds[0]);
    close(p.fds[1]);
    fake_close(pc, &f);
    aio_context_unref(pc);
}

typedef struct LateBH {
    AioContext *pc;
    bool ran;
} LateBH;

static void late_bh_cb(void *opaque)
{
    LateBH *b = opaque;

    b->ran = true;
}

static gpointer late_bh_thread(gpointer opaque)
{
    LateBH *b = opaque;

    g_usleep(20 * 1000);
    aio_bh_schedule_oneshot(b->pc, late_bh_cb, b);
    return NULL;
}

/* Invariant 6: a bottom half from another thread ends a window. */
static void test_bh_ends_window(void)
{
    FakeSource f;
    AioContext *pc = polling_context_new(MAX_NS_LONG);
    LateBH b = { .pc = pc };
    AioPollStats before, after;
    int64_t start;
    GThread *t;

    fake_open(pc, &f);
    before = stats_of(pc);
    start = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    t = g_thread_new("late-bh", late_bh_thread, &b);
    while (!b.ran) {
        aio_poll(pc, true);
    }
    g_thread_join(t);
    after = stats_of(pc);
    /* seen by the 1 s window long before it ended, without a sleep */
    g_assert_cmpint(qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - start, <,
                    MAX_NS_LONG / 2);
    g_assert_cmpuint(after.poll_hits, ==, before.poll_hits + 1);
    g_assert_cmpuint(after.epoll_waits, ==, before.epoll_waits);
    fake_close(pc, &f);
    aio_context_unref(pc);
}

/*
 * Invariant 7: a source's wake-ups are off from the first window to the
 * next sleep, back on before it; work that came meanwhile is taken
 * instead of sleeping.
 */
static void test_poll_mode(void)
{
    AioContext *pc = polling_context_new(MAX_NS_LONG);
    AioPollStats before;
    QEMUTimer *timer;
    int fired = 0;
    FakeSource f;

    fake_open(pc, &f);
    aio_context_set_poll_params(pc, SCALE_MS, 0, 0);
    aio_poll(pc, false);
    /* a wait of 20 ms: a window of 1 ms, then wake-ups on and a sleep */
    wait_ms(pc, 20);
    g_assert_cmpint(f.begins, ==, 1);
    g_assert_cmpint(f.ends, >=, 1);
    g_assert_false(f.wakeups_off);
    g_assert_cmpint(stats_of(pc).window_ns, ==, 0);

    /* grown again, polling mode lasts across hits */
    aio_context_set_poll_params(pc, MAX_NS_LONG, INT64_MAX, 0);
    wait_ms(pc, 1);
    wait_ms(pc, 1);
    g_assert_cmpint(stats_of(pc).window_ns, ==, MAX_NS_LONG);
    f.begins = f.ends = 0;
    for (int i = 0; i < 3; i++) {
        f.polls = 0;
        f.ready_after = 2;
        g_assert_true(aio_poll(pc, true));
        g_assert_true(f.wakeups_off);
    }
    g_assert_cmpint(f.begins, ==, 1);
    g_assert_cmpint(f.ends, ==, 0);

    /*
     * With a window of 1 ms and a timer 50 ms away, the window ends in
     * vain and the loop would sleep; but end finds work that came while
     * the wake-ups were off: it is taken at once, with no epoll_wait().
     */
    aio_context_set_poll_params(pc, SCALE_MS, 0, 0);
    aio_poll(pc, false);
    timer = aio_timer_new(pc, QEMU_CLOCK_REALTIME, SCALE_NS, timer_fired,
                          &fired);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + 50 * SCALE_MS);
    f.work_at_end = true;
    f.ready_runs = 0;
    before = stats_of(pc);
    g_assert_true(aio_poll(pc, true));
    g_assert_cmpint(f.ends, ==, 1);
    g_assert_false(f.wakeups_off);
    g_assert_cmpint(f.ready_runs, ==, 1);
    g_assert_cmpint(fired, ==, 0);
    g_assert_cmpuint(stats_of(pc).epoll_waits, ==, before.epoll_waits);
    timer_free(timer);
    fake_close(pc, &f);
    aio_context_unref(pc);
}

/* By default the main loop does not poll: it has no window to grow. */
static void test_main_loop_does_not_poll(void)
{
    AioContext *main_ctx = qemu_get_aio_context();
    FakeSource f;

    fake_open(main_ctx, &f);
    wait_ms(main_ctx, 1);
    wait_ms(main_ctx, 1);
    g_assert_cmpint(f.polls, ==, 0);
    g_assert_cmpuint(stats_of(main_ctx).polls, ==, 0);
    g_assert_cmpint(stats_of(main_ctx).window_ns, ==, 0);
    g_assert_cmpint(stats_of(main_ctx).max_ns, ==, 0);
    fake_close(main_ctx, &f);
}

/* Whether the main loop polls now: a few waits, then its poll count. */
static bool main_loop_polls(void)
{
    AioContext *main_ctx = qemu_get_aio_context();
    uint64_t polls = stats_of(main_ctx).polls;

    for (int i = 0; i < 3; i++) {
        wait_ms(main_ctx, 1);
    }
    return stats_of(main_ctx).polls > polls;
}

static void qom_set_int(const char *path, const char *name, int64_t value)
{
    g_autoptr(JsonNode) v = json_node_init_int(json_node_alloc(), value);

    g_assert_true(user_object_set_property(path, name, v, &error_abort));
}

/*
 * main_loop_poll_by_default() (the storage daemon's) gives the main loop
 * an iothread's poll-max-ns; a main-loop object's properties replace the
 * defaults while it exists (main-loop.c invariant 1).  Whether the loop
 * then polls is seen with a poll-max-ns above the tests' 1 ms waits: a
 * window of 32 us grows only on a quicker event.
 */
static void test_main_loop_polls_when_asked(void)
{
    AioContext *main_ctx = qemu_get_aio_context();
    g_autoptr(JsonNode) negative = json_node_init_int(json_node_alloc(), -1);
    Error *err = NULL;
    FakeSource f;

    fake_open(main_ctx, &f);
    main_loop_poll_by_default();
    g_assert_cmpint(stats_of(main_ctx).max_ns, ==, 32768);

    /* the object's poll-max-ns=0 turns it off */
    g_assert_true(user_object_add_cmdline("main-loop,id=m,poll-max-ns=0",
                                          &err));
    g_assert_null(err);
    g_assert_cmpint(stats_of(main_ctx).max_ns, ==, 0);
    g_assert_false(main_loop_polls());
    /* one at most, with QEMU's message */
    g_assert_false(user_object_add_cmdline("main-loop,id=m2", &err));
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "only one main-loop instance allowed"));
    g_clear_pointer(&err, error_free);
    /* qom-set turns it on at once, and off */
    qom_set_int("m", "poll-max-ns", MAX_NS_LONG);
    g_assert_true(main_loop_polls());
    g_assert_cmpint(f.polls, >, 0);
    qom_set_int("m", "poll-max-ns", 0);
    g_assert_false(main_loop_polls());
    g_assert_false(user_object_set_property("m", "poll-grow", negative,
                                            &err));
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "poll-grow value must be in range"));
    g_clear_pointer(&err, error_free);
    /* deleted: the defaults are back */
    g_assert_true(user_object_del("m", &error_abort));
    g_assert_cmpint(stats_of(main_ctx).max_ns, ==, 32768);
    fake_close(main_ctx, &f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qemu_get_aio_context();

    g_test_add_func("/aio-poll/window-rule", test_window_rule);
    g_test_add_func("/aio-poll/hit-skips-epoll", test_hit_skips_epoll);
    g_test_add_func("/aio-poll/window-shrinks", test_window_shrinks);
    g_test_add_func("/aio-poll/epoll-only-handler", test_epoll_only_handler);
    g_test_add_func("/aio-poll/bh-ends-window", test_bh_ends_window);
    g_test_add_func("/aio-poll/poll-mode", test_poll_mode);
    g_test_add_func("/aio-poll/main-loop-does-not-poll",
                    test_main_loop_does_not_poll);
    /* after the one above: it changes the main loop's defaults */
    g_test_add_func("/aio-poll/main-loop-polls-when-asked",
                    test_main_loop_polls_when_asked);
    return g_test_run();
}
