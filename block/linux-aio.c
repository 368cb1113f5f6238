/*
 * Linux AIO backend of the file driver (aio=native, files opened with
 * O_DIRECT).
 *
 * One kernel AIO context per AioContext (see file-posix-aio.h for the
 * shared rules).  Requests wait in s->pending; the bottom half
 * s->submit_bh hands the whole queue to io_submit() once per event-loop
 * iteration, or the submitting coroutine does when the queue reaches the
 * batch limit.  At most LAIO_MAX_EVENTS requests are in the kernel at a
 * time; the rest wait in the queue for completions.  Every iocb signals
 * the eventfd s->notifier, whose handler reaps the events.
 *
 * Everything here runs in the AioContext's thread.
 */
#include "block/file-posix-aio.h"

#include <libaio.h>

/* Requests the kernel context holds at once (io_setup's nr_events). */
#define LAIO_MAX_EVENTS     1024
/* Submit early when this many requests wait. */
#define LAIO_DEFAULT_BATCH  32

typedef struct LaioReq LaioReq;

struct LaioReq {
    struct iocb iocb;
    LinuxAioState *s;
    Coroutine *co;
    int fd;
    FileAioType type;
    int64_t offset;             /* of the part not yet transferred */
    size_t remaining;
    FileAioIov iov;
    int ret;
    bool completed;
    LaioReq *next;              /* in s->pending */
};

struct LinuxAioState {
    AioContext *ctx;
    int refcnt;
    io_context_t io_ctx;
    EventNotifier notifier;
    QEMUBH *submit_bh;
    /* requests not yet given to the kernel, FIFO */
    LaioReq *pending_head;
    LaioReq **pending_tail;
    unsigned pending_count;
    unsigned in_flight;
};

static GMutex laio_lock;
static GHashTable *laio_states;     /* AioContext * -> LinuxAioState * */

static void laio_queue(LinuxAioState *s, LaioReq *req)
{
    req->next = NULL;
    *s->pending_tail = req;
    s->pending_tail = &req->next;
    s->pending_count++;
}

static void laio_prep(LaioReq *req)
{
    if (req->type == FILE_AIO_READ) {
        io_prep_preadv(&req->iocb, req->fd, req->iov.iov, req->iov.niov,
                       req->offset);
    } else {
        io_prep_pwritev(&req->iocb, req->fd, req->iov.iov, req->iov.niov,
                        req->offset);
    }
    io_set_eventfd(&req->iocb, event_notifier_get_fd(&req->s->notifier));
}

static void laio_complete(LaioReq *req, int ret)
{
    req->ret = ret;
    req->completed = true;
    /* A request failed before its coroutine yielded needs no wake-up. */
    if (req->co != qemu_coroutine_self()) {
        aio_co_wake(req->co);
    }
}

/* Hands as many pending requests as the kernel context takes to it. */
static void laio_flush(LinuxAioState *s)
{
    struct iocb *iocbs[LAIO_DEFAULT_BATCH * 4];

    while (s->pending_head && s->in_flight < LAIO_MAX_EVENTS) {
        unsigned room = MIN(LAIO_MAX_EVENTS - s->in_flight,
                            ARRAY_SIZE(iocbs));
        LaioReq *req = s->pending_head;
        unsigned n = 0;
        int ret;

        for (; req && n < room; req = req->next) {
            laio_prep(req);
            iocbs[n++] = &req->iocb;
        }
        ret = io_submit(s->io_ctx, n, iocbs);
        if (ret == -EAGAIN || ret == -EINTR) {
            /* Retry when something completes, or soon if nothing will. */
            if (!s->in_flight) {
                qemu_bh_schedule(s->submit_bh);
            }
            return;
        }
        if (ret < 0) {
            /* io_submit() reports only the first iocb's error. */
            ret = MAX(ret, -EIO);
            req = s->pending_head;
            s->pending_head = req->next;
            s->pending_count--;
            laio_complete(req, ret);
        } else {
            for (int i = 0; i < ret; i++) {
                s->pending_head = s->pending_head->next;
            }
            s->pending_count -= ret;
            s->in_flight += ret;
        }
        if (!s->pending_head) {
            s->pending_tail = &s->pending_head;
        }
    }
}

static void laio_submit_bh(void *opaque)
{
    laio_flush(opaque);
}

/* Handles one event: finished, short (resubmit the rest) or failed. */
static void laio_process(LinuxAioState *s, LaioReq *req, long res)
{
    if (res == -EINTR || res == -EAGAIN) {
        laio_queue(s, req);
        return;
    }
    if (res < 0) {
        laio_complete(req, res);
        return;
    }
    if ((size_t)res == req->remaining) {
        laio_complete(req, 0);
        return;
    }
    if (req->type == FILE_AIO_WRITE && res == 0) {
        laio_complete(req, -ENOSPC);
        return;
    }
    file_aio_iov_advance(&req->iov, res);
    req->offset += res;
    req->remaining -= res;
    if (req->type == FILE_AIO_READ &&
        (res == 0 || file_aio_at_eof(req->fd, req->offset))) {
        iov_memset(req->iov.iov, req->iov.niov, 0, 0, req->remaining);
        laio_complete(req, 0);
        return;
    }
    laio_queue(s, req);
}

static void laio_completion_cb(void *opaque)
{
    LinuxAioState *s = opaque;
    struct io_event events[64];
    struct timespec no_wait = { 0, 0 };
    int n;

    event_notifier_test_and_clear(&s->notifier);
    for (;;) {
        n = io_getevents(s->io_ctx, 0, ARRAY_SIZE(events), events, &no_wait);
        if (n == -EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        s->in_flight -= n;
        for (int i = 0; i < n; i++) {
            LaioReq *req = container_of(events[i].obj, LaioReq, iocb);
            /* res is unsigned long: a negative errno comes back wrapped. */
            long res = (long)events[i].res;

            laio_process(s, req, res);
        }
    }
    if (s->pending_head) {
        laio_flush(s);
    }
}

int coroutine_fn laio_co_submit(LinuxAioState *s, int fd, int64_t offset,
                                QEMUIOVector *qiov, FileAioType type,
                                unsigned max_batch)
{
    LaioReq req = {
        .s = s,
        .co = qemu_coroutine_self(),
        .fd = fd,
        .type = type,
        .offset = offset,
        .remaining = qiov->size,
    };

    assert(type == FILE_AIO_READ || type == FILE_AIO_WRITE);
    file_aio_iov_init(&req.iov, qiov);
    laio_queue(s, &req);
    if (s->pending_count >= (max_batch ? max_batch : LAIO_DEFAULT_BATCH)) {
        laio_flush(s);
    } else {
        qemu_bh_schedule(s->submit_bh);
    }
    while (!req.completed) {
        qemu_coroutine_yield();
    }
    file_aio_iov_destroy(&req.iov);
    return req.ret;
}

static LinuxAioState *laio_new(AioContext *ctx, Error **errp)
{
    LinuxAioState *s = g_new0(LinuxAioState, 1);
    int ret;

    ret = event_notifier_init(&s->notifier, false);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "failed to create an eventfd");
        g_free(s);
        return NULL;
    }
    ret = io_setup(LAIO_MAX_EVENTS, &s->io_ctx);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "failed to create linux AIO context");
        event_notifier_cleanup(&s->notifier);
        g_free(s);
        return NULL;
    }
    s->ctx = ctx;
    s->refcnt = 1;
    s->pending_tail = &s->pending_head;
    s->submit_bh = aio_bh_new(ctx, laio_submit_bh, s);
    aio_set_fd_handler(ctx, event_notifier_get_fd(&s->notifier),
                       laio_completion_cb, NULL, s);
    return s;
}

LinuxAioState *laio_get(AioContext *ctx, Error **errp)
{
    LinuxAioState *s;

    g_mutex_lock(&laio_lock);
    if (!laio_states) {
        laio_states = g_hash_table_new(NULL, NULL);
    }
    s = g_hash_table_lookup(laio_states, ctx);
    if (s) {
        s->refcnt++;
    } else {
        s = laio_new(ctx, errp);
        if (s) {
            g_hash_table_insert(laio_states, ctx, s);
        }
    }
    g_mutex_unlock(&laio_lock);
    return s;
}

void laio_put(LinuxAioState *s)
{
    g_mutex_lock(&laio_lock);
    if (--s->refcnt) {
        g_mutex_unlock(&laio_lock);
        return;
    }
    g_hash_table_remove(laio_states, s->ctx);
    g_mutex_unlock(&laio_lock);

    /* Invariant 3: nothing is queued or in flight any more. */
    assert(!s->pending_head && !s->in_flight);
    aio_set_fd_handler(s->ctx, event_notifier_get_fd(&s->notifier),
                       NULL, NULL, NULL);
    qemu_bh_delete(s->submit_bh);
    io_destroy(s->io_ctx);
    event_notifier_cleanup(&s->notifier);
    g_free(s);
}
