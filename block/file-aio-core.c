/*
 * The core of the file driver's asynchronous backends (see
 * file-aio-core.h): registry, queue, bottom half, eventfd and completion.
 */
#include "block/file-aio-core.h"

/*
 * Every instance, of every backend, for every AioContext: a handful at
 * most (backends times iothreads), looked up only when a node opens.
 */
static GMutex file_aio_lock;
static FileAioState *file_aio_states;

static void file_aio_queue(FileAioState *s, FileAioReq *req)
{
    req->next = NULL;
    *s->pending_tail = req;
    s->pending_tail = &req->next;
    s->pending_count++;
    s->pending_bytes += req->remaining;
}

FileAioReq *file_aio_dequeue(FileAioState *s)
{
    FileAioReq *req = s->pending_head;

    if (req) {
        s->pending_head = req->next;
        if (!s->pending_head) {
            s->pending_tail = &s->pending_head;
        }
        s->pending_count--;
        s->pending_bytes -= req->remaining;
    }
    return req;
}

void file_aio_complete(FileAioReq *req, int ret)
{
    req->ret = ret;
    req->completed = true;
    /* A request that ended before its coroutine yielded needs no wake-up. */
    if (req->co != qemu_coroutine_self()) {
        aio_co_wake(req->co);
    }
}

/*
 * After a read returned fewer bytes than asked: true if the file ends at
 * @end (so the rest reads as zeroes), false if the read should be
 * resubmitted for the rest.
 */
static bool file_aio_at_eof(int fd, int64_t end)
{
    int64_t size = lseek(fd, 0, SEEK_END);

    return size >= 0 && end >= size;
}

void file_aio_process(FileAioState *s, FileAioReq *req, long res)
{
    if (res == -EINTR || res == -EAGAIN) {
        file_aio_queue(s, req);
        return;
    }
    if (res < 0) {
        file_aio_complete(req, res);
        return;
    }
    if (req->type == FILE_AIO_FLUSH || (size_t)res == req->remaining) {
        file_aio_complete(req, 0);
        return;
    }
    if (req->type == FILE_AIO_WRITE && res == 0) {
        file_aio_complete(req, -ENOSPC);
        return;
    }
    /* invariant 2: a short transfer goes on from where it stopped */
    file_aio_iov_advance(&req->iov, res);
    req->offset += res;
    req->remaining -= res;
    if (req->type == FILE_AIO_READ &&
        (res == 0 || file_aio_at_eof(req->fd, req->offset))) {
        iov_memset(req->iov.iov, req->iov.niov, 0, 0, req->remaining);
        file_aio_complete(req, 0);
        return;
    }
    file_aio_queue(s, req);
}

static void file_aio_submit_bh(void *opaque)
{
    FileAioState *s = opaque;

    s->ops->flush(s);
}

static void file_aio_completion_cb(void *opaque)
{
    FileAioState *s = opaque;

    event_notifier_test_and_clear(&s->notifier);
    s->ops->reap(s);
    /* what completed made room, and short transfers queued their rest */
    s->ops->flush(s);
}

static bool file_aio_poll_cb(void *opaque)
{
    FileAioState *s = opaque;

    return s->ops->poll(s);
}

/*
 * The busy-poll found completions: as the eventfd's handler, without
 * reading the eventfd (a system call); the handler finds nothing left
 * when the loop next sees it readable.
 */
static void file_aio_poll_ready(void *opaque)
{
    FileAioState *s = opaque;

    s->ops->reap(s);
    s->ops->flush(s);
}

/*
 * The kernel signals the eventfd for every completion even while the loop
 * polls: io_uring can turn it off (IORING_CQ_EVENTFD_DISABLED), but the
 * kernel reads that flag with no barrier after it posts a completion, so
 * turning it back on before a sleep could miss one.
 */
static const AioPollHandlers file_aio_poll_handlers = {
    .poll   = file_aio_poll_cb,
    .ready  = file_aio_poll_ready,
};

/*
 * When the queue goes to the kernel by default (aio-max-batch=0): as soon
 * as FILE_AIO_BATCH requests or FILE_AIO_BATCH_BYTES bytes wait, and what
 * is left at the end of the event-loop iteration.  Waiting for the whole
 * iteration (up to 32 or 256 requests, as before) saves system calls but
 * holds the first request back while the loop prepares all the others,
 * and the kernel plugs each submission, so the device sees none of them
 * until the last is prepared: through a vhost-user-blk export with
 * cache=none that cost up to 15% of 4 KiB random IOPS at depth 32 and up
 * to a tenth of 64 KiB sequential (docs/performance.md, "Submitting
 * early").
 */
#define FILE_AIO_BATCH          4
#define FILE_AIO_BATCH_BYTES    (128 * 1024)

/*
 * The most requests a batch of @s holds: the smaller of the node's
 * @node_max_batch and its context's aio-max-batch that are set, or 0 for
 * the default policy above.  (QEMU: the context's, or 32, the smaller of
 * that and the node's; its io_uring knows neither.)
 */
static unsigned file_aio_max_batch(FileAioState *s, unsigned node_max_batch)
{
    int64_t ctx_max_batch = MIN(aio_context_get_aio_max_batch(s->ctx),
                                UINT_MAX);

    if (!node_max_batch || !ctx_max_batch) {
        return node_max_batch ? node_max_batch : ctx_max_batch;
    }
    return MIN(node_max_batch, ctx_max_batch);
}

/*
 * Queues the request and starts a submission: at once if the batch is
 * full (file_aio_max_batch(), with the node's @node_max_batch), else from
 * the bottom half.
 */
int coroutine_fn file_aio_co_submit(FileAioState *s, int fd, int64_t offset,
                                    QEMUIOVector *qiov, FileAioType type,
                                    unsigned node_max_batch)
{
    unsigned max_batch = file_aio_max_batch(s, node_max_batch);
    FileAioReq req = {
        .co = qemu_coroutine_self(),
        .fd = fd,
        .type = type,
        .offset = offset,
        .remaining = qiov ? qiov->size : 0,
    };

    if (qiov) {
        file_aio_iov_init(&req.iov, qiov);
    }
    file_aio_queue(s, &req);
    if (max_batch ? s->pending_count >= max_batch
                  : s->pending_count >= FILE_AIO_BATCH ||
                    s->pending_bytes >= FILE_AIO_BATCH_BYTES) {
        s->ops->flush(s);
    } else {
        qemu_bh_schedule(s->submit_bh);
    }
    while (!req.completed) {
        qemu_coroutine_yield();
    }
    file_aio_iov_destroy(&req.iov);
    return req.ret;
}

static FileAioState *file_aio_new(const FileAioBackendOps *ops,
                                  AioContext *ctx, Error **errp)
{
    FileAioState *s;
    int ret;

    assert(ops->state_size >= sizeof(FileAioState));
    s = g_malloc0(ops->state_size);
    ret = event_notifier_init(&s->notifier, false);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "failed to create an eventfd");
        g_free(s);
        return NULL;
    }
    s->ops = ops;
    s->ctx = ctx;
    if (ops->init(s, errp) < 0) {
        event_notifier_cleanup(&s->notifier);
        g_free(s);
        return NULL;
    }
    s->refcnt = 1;
    s->pending_tail = &s->pending_head;
    s->submit_bh = aio_bh_new(ctx, file_aio_submit_bh, s);
    aio_set_fd_handler(ctx, event_notifier_get_fd(&s->notifier),
                       file_aio_completion_cb, NULL, s);
    if (ops->poll) {
        aio_set_fd_poll(ctx, event_notifier_get_fd(&s->notifier),
                        &file_aio_poll_handlers);
    }
    return s;
}

FileAioState *file_aio_get(const FileAioBackendOps *ops, AioContext *ctx,
                           Error **errp)
{
    FileAioState *s;

    g_mutex_lock(&file_aio_lock);
    for (s = file_aio_states; s; s = s->next) {
        if (s->ops == ops && s->ctx == ctx) {
            s->refcnt++;
            break;
        }
    }
    if (!s) {
        s = file_aio_new(ops, ctx, errp);
        if (s) {
            s->next = file_aio_states;
            file_aio_states = s;
        }
    }
    g_mutex_unlock(&file_aio_lock);
    return s;
}

void file_aio_put(FileAioState *s)
{
    FileAioState **p;

    g_mutex_lock(&file_aio_lock);
    if (--s->refcnt) {
        g_mutex_unlock(&file_aio_lock);
        return;
    }
    for (p = &file_aio_states; *p != s; p = &(*p)->next) {
        assert(*p);
    }
    *p = s->next;
    g_mutex_unlock(&file_aio_lock);

    /* Invariant 3: nothing is queued or in flight any more. */
    assert(!s->pending_head && !s->in_flight);
    aio_set_fd_handler(s->ctx, event_notifier_get_fd(&s->notifier),
                       NULL, NULL, NULL);
    qemu_bh_delete(s->submit_bh);
    s->ops->cleanup(s);
    event_notifier_cleanup(&s->notifier);
    g_free(s);
}
