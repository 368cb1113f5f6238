/*
 * io_uring backend of the file driver (aio=io_uring).
 *
 * One ring per AioContext (see file-posix-aio.h for the shared rules).
 * Requests wait in s->pending until a submission queue entry is free; the
 * bottom half s->submit_bh moves them into the ring and enters the kernel
 * once for the whole batch.  The ring's completions are signalled on an
 * eventfd registered with the ring, whose handler reaps them one at a time
 * (so that a coroutine woken from it may issue new requests safely).
 *
 * Everything here runs in the AioContext's thread.
 */
#include "block/file-posix-aio.h"

#include <liburing.h>

/* Ring size: enough for queue depth 64 on a few nodes at once. */
#define LURING_ENTRIES      256
/* Submit early when this many requests wait (0 = ring size). */
#define LURING_DEFAULT_BATCH 0

typedef struct LuringReq LuringReq;

struct LuringReq {
    LuringState *s;
    Coroutine *co;
    int fd;
    FileAioType type;
    int64_t offset;             /* of the part not yet transferred */
    size_t remaining;
    FileAioIov iov;
    int ret;
    bool completed;
    LuringReq *next;            /* in s->pending */
};

struct LuringState {
    AioContext *ctx;
    int refcnt;
    struct io_uring ring;
    EventNotifier notifier;
    QEMUBH *submit_bh;
    /* requests not yet in the ring, FIFO */
    LuringReq *pending_head;
    LuringReq **pending_tail;
    unsigned pending_count;
    /* entries placed in the ring but not yet accepted by the kernel */
    unsigned unsubmitted;
    unsigned in_flight;
};

static GMutex luring_lock;
static GHashTable *luring_states;   /* AioContext * -> LuringState * */

static void luring_queue(LuringState *s, LuringReq *req)
{
    req->next = NULL;
    *s->pending_tail = req;
    s->pending_tail = &req->next;
    s->pending_count++;
}

static LuringReq *luring_dequeue(LuringState *s)
{
    LuringReq *req = s->pending_head;

    if (req) {
        s->pending_head = req->next;
        if (!s->pending_head) {
            s->pending_tail = &s->pending_head;
        }
        s->pending_count--;
    }
    return req;
}

static void luring_prep(struct io_uring_sqe *sqe, LuringReq *req)
{
    switch (req->type) {
    case FILE_AIO_READ:
        if (req->iov.niov == 1) {
            io_uring_prep_read(sqe, req->fd, req->iov.iov->iov_base,
                               req->remaining, req->offset);
        } else {
            io_uring_prep_readv(sqe, req->fd, req->iov.iov, req->iov.niov,
                                req->offset);
        }
        break;
    case FILE_AIO_WRITE:
        if (req->iov.niov == 1) {
            io_uring_prep_write(sqe, req->fd, req->iov.iov->iov_base,
                                req->remaining, req->offset);
        } else {
            io_uring_prep_writev(sqe, req->fd, req->iov.iov, req->iov.niov,
                                 req->offset);
        }
        break;
    case FILE_AIO_FLUSH:
        io_uring_prep_fsync(sqe, req->fd, IORING_FSYNC_DATASYNC);
        break;
    }
    io_uring_sqe_set_data(sqe, req);
}

/* Moves pending requests into the ring and hands them to the kernel. */
static void luring_flush(LuringState *s)
{
    int ret;

    while (s->pending_head) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);

        if (!sqe) {
            break;
        }
        luring_prep(sqe, luring_dequeue(s));
        s->unsubmitted++;
    }
    if (!s->unsubmitted) {
        return;
    }
    do {
        ret = io_uring_submit(&s->ring);
    } while (ret == -EINTR);
    if (ret >= 0) {
        s->unsubmitted -= MIN((unsigned)ret, s->unsubmitted);
        s->in_flight += ret;
    } else {
        /*
         * -EAGAIN/-EBUSY: the kernel is short of resources or the
         * completion queue overflowed.  The entries stay in the ring; the
         * next completion retries, or the bottom half if none is due.
         */
        assert(ret == -EAGAIN || ret == -EBUSY);
    }
    if ((s->unsubmitted || s->pending_head) && !s->in_flight) {
        qemu_bh_schedule(s->submit_bh);
    }
}

static void luring_submit_bh(void *opaque)
{
    luring_flush(opaque);
}

static void luring_complete(LuringReq *req, int ret)
{
    req->ret = ret;
    req->completed = true;
    /* A request completed before its coroutine yielded needs no wake-up. */
    if (req->co != qemu_coroutine_self()) {
        aio_co_wake(req->co);
    }
}

/* Handles one completion: finished, short (resubmit the rest) or failed. */
static void luring_process(LuringState *s, LuringReq *req, int res)
{
    if (res == -EINTR || res == -EAGAIN) {
        luring_queue(s, req);
        return;
    }
    if (res < 0) {
        luring_complete(req, res);
        return;
    }
    if (req->type == FILE_AIO_FLUSH || (size_t)res == req->remaining) {
        luring_complete(req, 0);
        return;
    }
    if (req->type == FILE_AIO_WRITE && res == 0) {
        luring_complete(req, -ENOSPC);
        return;
    }
    file_aio_iov_advance(&req->iov, res);
    req->offset += res;
    req->remaining -= res;
    if (req->type == FILE_AIO_READ &&
        (res == 0 || file_aio_at_eof(req->fd, req->offset))) {
        iov_memset(req->iov.iov, req->iov.niov, 0, 0, req->remaining);
        luring_complete(req, 0);
        return;
    }
    luring_queue(s, req);
}

static void luring_completion_cb(void *opaque)
{
    LuringState *s = opaque;
    struct io_uring_cqe *cqe;

    event_notifier_test_and_clear(&s->notifier);
    while (io_uring_peek_cqe(&s->ring, &cqe) == 0) {
        LuringReq *req = io_uring_cqe_get_data(cqe);
        int res = cqe->res;

        io_uring_cqe_seen(&s->ring, cqe);
        s->in_flight--;
        luring_process(s, req, res);
    }
    if (s->pending_head || s->unsubmitted) {
        luring_flush(s);
    }
}

int coroutine_fn luring_co_submit(LuringState *s, int fd, int64_t offset,
                                  QEMUIOVector *qiov, FileAioType type,
                                  unsigned max_batch)
{
    LuringReq req = {
        .s = s,
        .co = qemu_coroutine_self(),
        .fd = fd,
        .type = type,
        .offset = offset,
        .remaining = qiov ? qiov->size : 0,
    };

    if (qiov) {
        file_aio_iov_init(&req.iov, qiov);
    }
    if (!max_batch) {
        max_batch = LURING_DEFAULT_BATCH ? LURING_DEFAULT_BATCH
                                         : LURING_ENTRIES;
    }
    luring_queue(s, &req);
    if (s->pending_count >= max_batch) {
        luring_flush(s);
    } else {
        qemu_bh_schedule(s->submit_bh);
    }
    while (!req.completed) {
        qemu_coroutine_yield();
    }
    file_aio_iov_destroy(&req.iov);
    return req.ret;
}

static LuringState *luring_new(AioContext *ctx, Error **errp)
{
    LuringState *s = g_new0(LuringState, 1);
    int ret;

    ret = io_uring_queue_init(LURING_ENTRIES, &s->ring, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "failed to init linux io_uring ring");
        g_free(s);
        return NULL;
    }
    ret = event_notifier_init(&s->notifier, false);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "failed to create an eventfd");
        io_uring_queue_exit(&s->ring);
        g_free(s);
        return NULL;
    }
    ret = io_uring_register_eventfd(&s->ring,
                                    event_notifier_get_fd(&s->notifier));
    if (ret < 0) {
        error_setg_errno(errp, -ret, "failed to register the io_uring "
                         "eventfd");
        event_notifier_cleanup(&s->notifier);
        io_uring_queue_exit(&s->ring);
        g_free(s);
        return NULL;
    }
    s->ctx = ctx;
    s->refcnt = 1;
    s->pending_tail = &s->pending_head;
    s->submit_bh = aio_bh_new(ctx, luring_submit_bh, s);
    aio_set_fd_handler(ctx, event_notifier_get_fd(&s->notifier),
                       luring_completion_cb, NULL, s);
    return s;
}

LuringState *luring_get(AioContext *ctx, Error **errp)
{
    LuringState *s;

    g_mutex_lock(&luring_lock);
    if (!luring_states) {
        luring_states = g_hash_table_new(NULL, NULL);
    }
    s = g_hash_table_lookup(luring_states, ctx);
    if (s) {
        s->refcnt++;
    } else {
        s = luring_new(ctx, errp);
        if (s) {
            g_hash_table_insert(luring_states, ctx, s);
        }
    }
    g_mutex_unlock(&luring_lock);
    return s;
}

void luring_put(LuringState *s)
{
    g_mutex_lock(&luring_lock);
    if (--s->refcnt) {
        g_mutex_unlock(&luring_lock);
        return;
    }
    g_hash_table_remove(luring_states, s->ctx);
    g_mutex_unlock(&luring_lock);

    /* Invariant 3: nothing is queued or in flight any more. */
    assert(!s->pending_head && !s->unsubmitted && !s->in_flight);
    aio_set_fd_handler(s->ctx, event_notifier_get_fd(&s->notifier),
                       NULL, NULL, NULL);
    qemu_bh_delete(s->submit_bh);
    io_uring_queue_exit(&s->ring);
    event_notifier_cleanup(&s->notifier);
    g_free(s);
}
