/*
 * Linux AIO backend of the file driver (aio=native, files opened with
 * O_DIRECT).
 *
 * One kernel AIO context per AioContext; the queue, the bottom half, the
 * eventfd and what a completion means are the shared core's
 * (file-aio-core.h, with the rules of file-posix-aio.h).  What is libaio's
 * is here: laio_flush() hands the whole queue to io_submit() in batches,
 * at most LAIO_MAX_EVENTS requests in the kernel at a time (the rest wait
 * in the queue for completions); every iocb signals the core's eventfd,
 * and laio_reap() collects the events.
 *
 * Everything here runs in the AioContext's thread.
 */
#include "block/file-aio-core.h"

#include <libaio.h>

/* Requests the kernel context holds at once (io_setup's nr_events). */
#define LAIO_MAX_EVENTS     1024
/* Submit early when this many requests wait. */
#define LAIO_DEFAULT_BATCH  32

typedef struct LaioReq {
    FileAioReq req;
    struct iocb iocb;
} LaioReq;

struct LinuxAioState {
    FileAioState core;
    io_context_t io_ctx;
};

static LinuxAioState *laio_of(FileAioState *core)
{
    return container_of(core, LinuxAioState, core);
}

static void laio_prep(LinuxAioState *s, LaioReq *lreq)
{
    FileAioReq *req = &lreq->req;

    if (req->type == FILE_AIO_READ) {
        io_prep_preadv(&lreq->iocb, req->fd, req->iov.iov, req->iov.niov,
                       req->offset);
    } else {
        io_prep_pwritev(&lreq->iocb, req->fd, req->iov.iov, req->iov.niov,
                        req->offset);
    }
    io_set_eventfd(&lreq->iocb, event_notifier_get_fd(&s->core.notifier));
}

/* Hands as many queued requests as the kernel context takes to it. */
static void laio_flush(FileAioState *core)
{
    LinuxAioState *s = laio_of(core);
    struct iocb *iocbs[LAIO_DEFAULT_BATCH * 4];

    while (core->pending_head && core->in_flight < LAIO_MAX_EVENTS) {
        unsigned room = MIN(LAIO_MAX_EVENTS - core->in_flight,
                            ARRAY_SIZE(iocbs));
        FileAioReq *req = core->pending_head;
        unsigned n = 0;
        int ret;

        for (; req && n < room; req = req->next) {
            LaioReq *lreq = container_of(req, LaioReq, req);

            laio_prep(s, lreq);
            iocbs[n++] = &lreq->iocb;
        }
        ret = io_submit(s->io_ctx, n, iocbs);
        if (ret == -EAGAIN || ret == -EINTR) {
            /* Retry when something completes, or soon if nothing will. */
            if (!core->in_flight) {
                qemu_bh_schedule(core->submit_bh);
            }
            return;
        }
        if (ret < 0) {
            /* io_submit() reports only the first iocb's error. */
            file_aio_complete(file_aio_dequeue(core), MAX(ret, -EIO));
        } else {
            for (int i = 0; i < ret; i++) {
                file_aio_dequeue(core);
            }
            core->in_flight += ret;
        }
    }
}

static void laio_reap(FileAioState *core)
{
    LinuxAioState *s = laio_of(core);
    struct io_event events[64];
    struct timespec no_wait = { 0, 0 };
    int n;

    for (;;) {
        n = io_getevents(s->io_ctx, 0, ARRAY_SIZE(events), events, &no_wait);
        if (n == -EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        core->in_flight -= n;
        for (int i = 0; i < n; i++) {
            LaioReq *lreq = container_of(events[i].obj, LaioReq, iocb);
            /* res is unsigned long: a negative errno comes back wrapped. */
            long res = (long)events[i].res;

            file_aio_process(core, &lreq->req, res);
        }
    }
}

static int laio_init(FileAioState *core, Error **errp)
{
    LinuxAioState *s = laio_of(core);
    int ret = io_setup(LAIO_MAX_EVENTS, &s->io_ctx);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "failed to create linux AIO context");
    }
    return ret;
}

static void laio_cleanup(FileAioState *core)
{
    io_destroy(laio_of(core)->io_ctx);
}

static const FileAioBackendOps laio_ops;

LinuxAioState *laio_get(AioContext *ctx, Error **errp)
{
    FileAioState *core = file_aio_get(&laio_ops, ctx, errp);

    return core ? laio_of(core) : NULL;
}

void laio_put(LinuxAioState *s)
{
    file_aio_put(&s->core);
}

int coroutine_fn laio_co_submit(LinuxAioState *s, int fd, int64_t offset,
                                QEMUIOVector *qiov, FileAioType type,
                                unsigned max_batch)
{
    LaioReq lreq;

    assert(type == FILE_AIO_READ || type == FILE_AIO_WRITE);
    file_aio_req_init(&lreq.req, fd, offset, qiov, type);
    return file_aio_co_submit(&s->core, &lreq.req, max_batch);
}

static const FileAioBackendOps laio_ops = {
    .state_size     = sizeof(LinuxAioState),
    .default_batch  = LAIO_DEFAULT_BATCH,
    .init           = laio_init,
    .cleanup        = laio_cleanup,
    .flush          = laio_flush,
    .reap           = laio_reap,
};
