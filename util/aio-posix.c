/*
 * fd handlers on epoll, and aio_poll(), the one place where handlers,
 * bottom halves and timers run.
 *
 * Invariants:
 *  1. Every live AioHandler is on ctx->handlers and registered with epoll,
 *     its epoll data pointing at it; the context's own notifier is
 *     registered with a NULL data pointer.
 *  2. A handler removed while handlers are being dispatched
 *     (walking_handlers > 0) is only marked deleted and parked on
 *     ctx->deleted_handlers: the events array of the running dispatch may
 *     still point at it.  It is freed when the outermost dispatch ends.
 *  3. aio_poll() sleeps only with notify_me set, and only if no bottom half
 *     is pending and no aio_notify() happened since the last poll.
 *  4. ctx->epoll_only_cnt counts the live handlers (on ctx->handlers)
 *     without poll callbacks (an NBD connection's socket).  While it is
 *     not 0, each round of a poll window also asks epoll_wait() without
 *     waiting, so that their events end the window as a poll callback's
 *     would: one system call a round, whatever their number.  Handlers
 *     with &aio_poll_rare are not counted: their events wait for the
 *     window to end.
 *  5. The window is never longer than poll-max-ns as aio_poll() last read
 *     it (0 unless set: by an iothread, or for the main context by
 *     util/main-loop.c); it changes only by aio_poll_window_next() after
 *     a wait that polling could have caught.
 *  6. A window runs with notify_me clear: what other threads bring
 *     meanwhile (a bottom half, aio_notify()) is seen through the BH list
 *     and ctx->notified, which the window checks with the handlers.  A
 *     window that finds work skips epoll_wait() as a pending bottom half
 *     does, so at most AIO_MAX_EPOLL_SKIPS times in a row: the fds that
 *     are not polled (aio_poll_rare) still get their turn.  A round that
 *     skipped it and made no progress (the bottom half had been
 *     cancelled) calls it then, without waiting: aio_poll() says "no
 *     progress" only when no fd was ready.
 *  7. ctx->poll_mode is set from the first window of a run of polls to
 *     the next wait that may sleep; the handlers' begin ran when it was
 *     set (they may have turned their wake-ups off).  Before epoll_wait()
 *     may sleep, poll_mode is cleared and every handler's end has run, so
 *     no source sleeps with its wake-ups off; work that came meanwhile
 *     (end says so) is taken instead of sleeping.
 */
#include "util/osdep.h"
#include "util/aio.h"
#include "aio-int.h"

#include <sys/epoll.h>

/* Events taken per epoll_wait(); more stay ready for the next round. */
#define AIO_MAX_EVENTS 128

/*
 * While bottom halves keep coming, aio_poll() skips epoll_wait() (a
 * system call) to run them sooner, but not more than this many rounds in
 * a row, so that fd handlers are not starved.
 */
#define AIO_MAX_EPOLL_SKIPS 8

struct AioHandler {
    int fd;
    IOHandler *io_read;
    IOHandler *io_write;
    const AioPollHandlers *poll;    /* NULL: not pollable (invariant 4) */
    void *opaque;
    bool deleted;
    TAILQ_ENTRY(AioHandler) node;
};

int aio_context_setup(AioContext *ctx, Error **errp)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    int ret;

    ctx->epollfd = epoll_create1(EPOLL_CLOEXEC);
    if (ctx->epollfd < 0) {
        ret = -errno;
        error_setg_errno(errp, errno, "Failed to create an epoll instance");
        return ret;
    }
    ret = event_notifier_init(&ctx->notifier, false);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to create an event notifier");
        close(ctx->epollfd);
        return ret;
    }
    if (epoll_ctl(ctx->epollfd, EPOLL_CTL_ADD,
                  event_notifier_get_fd(&ctx->notifier), &ev) < 0) {
        ret = -errno;
        error_setg_errno(errp, errno, "Failed to watch event notifier fd %d",
                         event_notifier_get_fd(&ctx->notifier));
        event_notifier_cleanup(&ctx->notifier);
        close(ctx->epollfd);
        return ret;
    }
    return 0;
}

static void aio_free_deleted_handlers(AioContext *ctx)
{
    AioHandler *node;

    while ((node = TAILQ_FIRST(&ctx->deleted_handlers))) {
        TAILQ_REMOVE(&ctx->deleted_handlers, node, node);
        g_free(node);
    }
}

void aio_context_destroy(AioContext *ctx)
{
    AioHandler *node;

    assert(!ctx->walking_handlers);
    while ((node = TAILQ_FIRST(&ctx->handlers))) {
        TAILQ_REMOVE(&ctx->handlers, node, node);
        g_free(node);
    }
    aio_free_deleted_handlers(ctx);
    event_notifier_cleanup(&ctx->notifier);
    close(ctx->epollfd);
}

static AioHandler *aio_find_handler(AioContext *ctx, int fd)
{
    AioHandler *node;

    TAILQ_FOREACH(node, &ctx->handlers, node) {
        if (node->fd == fd) {
            return node;
        }
    }
    return NULL;
}

static void aio_epoll_ctl(AioContext *ctx, int op, AioHandler *node)
{
    struct epoll_event ev = {
        .events = (node->io_read ? EPOLLIN : 0) |
                  (node->io_write ? EPOLLOUT : 0),
        .data.ptr = node,
    };

    if (epoll_ctl(ctx->epollfd, op, node->fd, &ev) < 0) {
        /* Only a bad fd (a regular file, a closed one) gets here. */
        fprintf(stderr, "%s: cannot watch fd %d: %s\n",
                qemu_get_progname(), node->fd, strerror(errno));
        abort();
    }
}

static void aio_remove_handler(AioContext *ctx, AioHandler *node)
{
    /* The fd may already be closed, which removed it from epoll. */
    epoll_ctl(ctx->epollfd, EPOLL_CTL_DEL, node->fd, NULL);
    TAILQ_REMOVE(&ctx->handlers, node, node);
    if (!node->poll) {
        /* Invariant 4 */
        assert(ctx->epoll_only_cnt > 0);
        ctx->epoll_only_cnt--;
    }
    if (ctx->walking_handlers) {
        /* Invariant 2 */
        node->deleted = true;
        TAILQ_INSERT_TAIL(&ctx->deleted_handlers, node, node);
    } else {
        g_free(node);
    }
}

bool aio_fd_can_be_watched(int fd)
{
    struct epoll_event ev = { .events = EPOLLIN };
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    bool ok;

    if (epfd < 0) {
        return false;
    }
    ok = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
    close(epfd);
    return ok;
}

void aio_set_fd_handler(AioContext *ctx, int fd, IOHandler *io_read,
                        IOHandler *io_write, void *opaque)
{
    AioHandler *node = aio_find_handler(ctx, fd);
    bool same_events;

    if (!io_read && !io_write) {
        if (node) {
            aio_remove_handler(ctx, node);
        }
        return;
    }
    if (!node) {
        node = g_new0(AioHandler, 1);
        node->fd = fd;
        node->io_read = io_read;
        node->io_write = io_write;
        node->opaque = opaque;
        TAILQ_INSERT_TAIL(&ctx->handlers, node, node);
        /* Invariant 4: not pollable until aio_set_fd_poll() says so. */
        ctx->epoll_only_cnt++;
        aio_epoll_ctl(ctx, EPOLL_CTL_ADD, node);
        return;
    }
    same_events = !node->io_read == !io_read && !node->io_write == !io_write;
    node->io_read = io_read;
    node->io_write = io_write;
    node->opaque = opaque;
    if (!same_events) {
        aio_epoll_ctl(ctx, EPOLL_CTL_MOD, node);
    }
}

/* No callbacks: aio_poll_handlers() skips it, its events wait. */
const AioPollHandlers aio_poll_rare;

void aio_set_fd_poll(AioContext *ctx, int fd,
                     const AioPollHandlers *poll_handlers)
{
    AioHandler *node = aio_find_handler(ctx, fd);
    const AioPollHandlers *p = poll_handlers;

    /* poll callbacks belong to a registered handler */
    assert(node);
    assert(!p || p == &aio_poll_rare ||
           (p->poll && p->ready && (!p->begin || p->end)));
    /* Invariant 4 */
    if (!node->poll && p) {
        assert(ctx->epoll_only_cnt > 0);
        ctx->epoll_only_cnt--;
    } else if (node->poll && !p) {
        ctx->epoll_only_cnt++;
    }
    node->poll = p;
}

void aio_set_fd_handler_rare(AioContext *ctx, int fd, IOHandler *io_read,
                             IOHandler *io_write, void *opaque)
{
    aio_set_fd_handler(ctx, fd, io_read, io_write, opaque);
    if (io_read || io_write) {
        aio_set_fd_poll(ctx, fd, &aio_poll_rare);
    }
}

void aio_context_set_poll_params(AioContext *ctx, int64_t max_ns,
                                 int64_t grow, int64_t shrink)
{
    assert(max_ns >= 0 && grow >= 0 && shrink >= 0);
    __atomic_store_n(&ctx->poll_max_ns, max_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->poll_grow, grow, __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->poll_shrink, shrink, __ATOMIC_RELAXED);
    /* a context asleep takes them when it wakes; this wakes it */
    aio_notify(ctx);
}

void aio_context_get_poll_stats(AioContext *ctx, AioPollStats *stats)
{
    *stats = ctx->poll_stats;
    stats->window_ns = ctx->poll_ns;
    stats->max_ns = __atomic_load_n(&ctx->poll_max_ns, __ATOMIC_RELAXED);
}

int64_t aio_poll_window_next(int64_t window_ns, int64_t block_ns,
                             int64_t max_ns, int64_t grow, int64_t shrink)
{
    if (max_ns <= 0) {
        return 0;
    }
    window_ns = MIN(window_ns, max_ns);
    if (window_ns && block_ns <= window_ns) {
        return window_ns;           /* the window caught it */
    }
    if (block_ns > max_ns) {
        /* no window allowed would have: polling only burns the CPU */
        return shrink ? window_ns / shrink : 0;
    }
    if (!window_ns) {
        return MIN(AIO_POLL_START_NS, max_ns);
    }
    grow = grow ? grow : 2;
    /* window * grow, saturating at max_ns */
    return window_ns > max_ns / grow ? max_ns : window_ns * grow;
}

/*
 * Asks every pollable handler whether it has work; fills @ready with
 * those that do (a poll callback runs no handler, so the list cannot change
 * under the walk).
 */
static int aio_poll_handlers(AioContext *ctx, AioHandler **ready)
{
    AioHandler *node;
    int n = 0;

    TAILQ_FOREACH(node, &ctx->handlers, node) {
        if (n < AIO_MAX_EVENTS && node->poll && node->poll->poll &&
            node->poll->poll(node->opaque)) {
            ready[n++] = node;
        }
    }
    return n;
}

/* Invariant 7: polling mode starts; the sources may stop waking us. */
static void aio_poll_mode_begin(AioContext *ctx)
{
    AioHandler *node;

    ctx->poll_mode = true;
    TAILQ_FOREACH(node, &ctx->handlers, node) {
        if (node->poll && node->poll->begin) {
            node->poll->begin(node->opaque);
        }
    }
}

/*
 * Invariant 7: before a sleep, every source wakes us again.  Returns
 * whether one had work meanwhile.
 */
static bool aio_poll_mode_end(AioContext *ctx)
{
    AioHandler *node;
    bool work = false;

    ctx->poll_mode = false;
    TAILQ_FOREACH(node, &ctx->handlers, node) {
        if (node->poll && node->poll->end && node->poll->end(node->opaque)) {
            work = true;
        }
    }
    return work;
}

static bool aio_work_pending(AioContext *ctx)
{
    return aio_bh_pending(ctx) ||
           __atomic_load_n(&ctx->notified, __ATOMIC_ACQUIRE);
}

/*
 * The busy-poll before a sleep.  Returns whether the window found work
 * (handlers with work in @ready, *nready of them; events of the handlers
 * only epoll sees in @events, *nevents of them; or a bottom half or
 * notification), and sets *wait_start when the wait that follows is one
 * the window adapts to (invariant 5): 0 when the context does not poll.
 */
static bool aio_poll_window(AioContext *ctx, AioHandler **ready,
                            int *nready, struct epoll_event *events,
                            int *nevents, int64_t *wait_start)
{
    int64_t max_ns = __atomic_load_n(&ctx->poll_max_ns, __ATOMIC_RELAXED);
    int64_t window, deadline, now, timer_ns;

    *nready = 0;
    *nevents = 0;
    *wait_start = 0;
    if (!max_ns || aio_work_pending(ctx)) {
        /* with work at hand there is no wait */
        ctx->poll_ns = MIN(ctx->poll_ns, max_ns);
        return false;
    }
    now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    *wait_start = now;
    /* Invariant 5 */
    window = ctx->poll_ns = MIN(ctx->poll_ns, max_ns);
    timer_ns = aio_timers_deadline_ns(ctx);
    if (timer_ns >= 0) {
        /* the timer ends the wait anyway */
        window = MIN(window, timer_ns);
    }
    if (!window) {
        return false;
    }
    if (!ctx->poll_mode) {
        aio_poll_mode_begin(ctx);
    }
    ctx->poll_stats.polls++;
    deadline = now + window;
    do {
        *nready = aio_poll_handlers(ctx, ready);
        if (!*nready && ctx->epoll_only_cnt) {
            /* Invariant 4 */
            ctx->poll_stats.epoll_waits++;
            *nevents = MAX(epoll_wait(ctx->epollfd, events, AIO_MAX_EVENTS,
                                      0), 0);
        }
        if (*nready || *nevents || aio_work_pending(ctx)) {
            ctx->poll_stats.poll_hits++;
            return true;
        }
        now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    } while (now < deadline);
    return false;
}

/* Invariant 5: the wait that began at @wait_start ended now. */
static void aio_poll_adapt(AioContext *ctx, int64_t wait_start)
{
    int64_t block_ns = qemu_clock_get_ns(QEMU_CLOCK_REALTIME) - wait_start;

    ctx->poll_ns = aio_poll_window_next(
        ctx->poll_ns, block_ns,
        __atomic_load_n(&ctx->poll_max_ns, __ATOMIC_RELAXED),
        __atomic_load_n(&ctx->poll_grow, __ATOMIC_RELAXED),
        __atomic_load_n(&ctx->poll_shrink, __ATOMIC_RELAXED));
}

/* The epoll_wait() timeout: -1 (forever) or milliseconds, rounded up. */
static int aio_compute_timeout(AioContext *ctx)
{
    int64_t ns = aio_timers_deadline_ns(ctx);

    if (ns < 0) {
        return -1;
    }
    return MIN(DIV_ROUND_UP(ns, SCALE_MS), INT_MAX);
}

static bool aio_dispatch_handlers(AioContext *ctx, AioHandler **ready,
                                  int nready, struct epoll_event *events,
                                  int n)
{
    bool progress = false;

    ctx->walking_handlers++;
    for (int i = 0; i < nready; i++) {
        /* Invariant 2: a handler removed by an earlier one is still here */
        if (!ready[i]->deleted && ready[i]->poll) {
            ready[i]->poll->ready(ready[i]->opaque);
            progress = true;
        }
    }
    for (int i = 0; i < n; i++) {
        AioHandler *node = events[i].data.ptr;
        uint32_t revents = events[i].events;

        if (!node) {
            /* aio_notify() is a wake-up, not progress. */
            event_notifier_test_and_clear(&ctx->notifier);
            continue;
        }
        if (!node->deleted && node->io_read &&
            (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
            node->io_read(node->opaque);
            progress = true;
        }
        if (!node->deleted && node->io_write &&
            (revents & (EPOLLOUT | EPOLLHUP | EPOLLERR))) {
            node->io_write(node->opaque);
            progress = true;
        }
    }
    if (--ctx->walking_handlers == 0) {
        aio_free_deleted_handlers(ctx);
    }
    return progress;
}

bool aio_poll(AioContext *ctx, bool blocking)
{
    struct epoll_event events[AIO_MAX_EVENTS];
    AioHandler *ready[AIO_MAX_EVENTS];
    int64_t wait_start = 0;
    bool poll_hit = false;
    bool bh_pending;
    bool epoll_skipped = false;
    bool progress = false;
    int timeout = 0;
    int nready = 0;
    int n = 0;

    if (blocking) {
        /* Invariant 6: before notify_me is set */
        poll_hit = aio_poll_window(ctx, ready, &nready, events, &n,
                                   &wait_start);
        /* Invariant 3; pairs with aio_notify(). */
        __atomic_store_n(&ctx->notify_me, true, __ATOMIC_SEQ_CST);
    }
    bh_pending = aio_bh_pending(ctx);
    if (blocking && !poll_hit && !bh_pending &&
        !__atomic_load_n(&ctx->notified, __ATOMIC_SEQ_CST)) {
        timeout = aio_compute_timeout(ctx);
    }
    if (timeout != 0 && ctx->poll_mode && aio_poll_mode_end(ctx)) {
        /* invariant 7: what came while the wake-ups were off */
        nready = aio_poll_handlers(ctx, ready);
        timeout = nready ? 0 : timeout;
    }

    if (n) {
        /* the window's epoll_wait() found these (invariant 4) */
        ctx->epoll_skips = 0;
    } else if (timeout == 0 && TAILQ_EMPTY(&ctx->handlers)) {
        /* Nothing to poll: a pending notification is cleared later. */
    } else if (timeout == 0 && (bh_pending || nready) &&
               ctx->epoll_skips < AIO_MAX_EPOLL_SKIPS) {
        /* invariant 6 for the handlers the window found ready */
        ctx->epoll_skips++;
        epoll_skipped = true;
    } else {
        ctx->epoll_skips = 0;
        ctx->poll_stats.epoll_waits++;
        n = epoll_wait(ctx->epollfd, events, AIO_MAX_EVENTS, timeout);
        if (n < 0) {
            /* EINTR: a signal woke us; the caller polls again. */
            n = 0;
        }
    }
    if (blocking) {
        __atomic_store_n(&ctx->notify_me, false, __ATOMIC_RELAXED);
    }
    /* Notifications from now on must be seen by the next poll. */
    __atomic_store_n(&ctx->notified, false, __ATOMIC_SEQ_CST);
    if (wait_start && (poll_hit || timeout != 0)) {
        /* a wait the window could have caught, or did */
        aio_poll_adapt(ctx, wait_start);
    }

    progress |= aio_dispatch_handlers(ctx, ready, nready, events, n);
    progress |= aio_bh_poll(ctx);
    progress |= aio_timers_run(ctx);
    if (epoll_skipped && !progress) {
        /*
         * The pending bottom half ran nothing (it had been cancelled) and
         * the window's handlers found nothing after all: the fds get their
         * look now, so that "no progress" means that nothing was ready
         * (a caller's while (aio_poll(ctx, false)) would stop early).
         */
        ctx->epoll_skips = 0;
        ctx->poll_stats.epoll_waits++;
        n = epoll_wait(ctx->epollfd, events, AIO_MAX_EVENTS, 0);
        progress = aio_dispatch_handlers(ctx, ready, 0, events, MAX(n, 0));
    }
    return progress;
}
