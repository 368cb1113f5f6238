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

/* The epoll_wait() timeout: -1 (forever) or milliseconds, rounded up. */
static int aio_compute_timeout(AioContext *ctx)
{
    int64_t ns = aio_timers_deadline_ns(ctx);

    if (ns < 0) {
        return -1;
    }
    return MIN(DIV_ROUND_UP(ns, SCALE_MS), INT_MAX);
}

static bool aio_dispatch_handlers(AioContext *ctx, struct epoll_event *events,
                                  int n)
{
    bool progress = false;

    ctx->walking_handlers++;
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
    bool bh_pending;
    bool progress = false;
    int timeout = 0;
    int n = 0;

    if (blocking) {
        /* Invariant 3; pairs with aio_notify(). */
        __atomic_store_n(&ctx->notify_me, true, __ATOMIC_SEQ_CST);
    }
    bh_pending = aio_bh_pending(ctx);
    if (blocking && !bh_pending &&
        !__atomic_load_n(&ctx->notified, __ATOMIC_SEQ_CST)) {
        timeout = aio_compute_timeout(ctx);
    }

    if (timeout == 0 && TAILQ_EMPTY(&ctx->handlers)) {
        /* Nothing to poll: a pending notification is cleared later. */
    } else if (timeout == 0 && bh_pending &&
               ctx->epoll_skips < AIO_MAX_EPOLL_SKIPS) {
        ctx->epoll_skips++;
    } else {
        ctx->epoll_skips = 0;
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

    progress |= aio_dispatch_handlers(ctx, events, n);
    progress |= aio_bh_poll(ctx);
    progress |= aio_timers_run(ctx);
    return progress;
}
