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
 * and laio_reap() collects the events from the ring the kernel shares
 * with us, without a system call (io_getevents() only where the ring is
 * not the one we know).
 *
 * Everything here runs in the AioContext's thread.
 */
#include "block/file-aio-core.h"

#include <libaio.h>

/* Requests the kernel context holds at once (io_setup's nr_events). */
#define LAIO_MAX_EVENTS     1024
/* iocbs handed to one io_submit() at the most */
#define LAIO_SUBMIT_MAX     128

_Static_assert(sizeof(struct iocb) <= sizeof(((FileAioReq *)0)->priv),
               "a request's iocb lives in its priv area");

typedef struct LinuxAioState {
    FileAioState core;
    io_context_t io_ctx;
} LinuxAioState;

/*
 * The header of the completion ring that the kernel maps at the address
 * io_setup() returned as the context (fs/aio.c's struct aio_ring), nr
 * struct io_event following it: the kernel advances tail as it posts
 * events; the consumer (io_getevents(), or we) advances head, which
 * frees the slots.  Reading it tells whether events wait, and taking
 * them from it saves io_getevents(), without a system call.
 */
typedef struct LaioRingHeader {
    unsigned id;
    unsigned nr;
    unsigned head;
    unsigned tail;
    unsigned magic;
    unsigned compat_features;
    unsigned incompat_features;
    unsigned header_length;     /* where the events start */
} LaioRingHeader;

/* The ring's magic: a kernel that maps no such ring has no other value. */
#define LAIO_RING_MAGIC 0xa10a10a1

static LaioRingHeader *laio_ring(LinuxAioState *s)
{
    return (LaioRingHeader *)s->io_ctx;
}

/* A ring laid out as we know it (a kernel may one day change it). */
static bool laio_ring_known(LaioRingHeader *ring)
{
    return ring->magic == LAIO_RING_MAGIC && ring->incompat_features == 0 &&
           ring->header_length == sizeof(LaioRingHeader);
}

static LinuxAioState *laio_of(FileAioState *core)
{
    return container_of(core, LinuxAioState, core);
}

static struct iocb *laio_iocb(FileAioReq *req)
{
    return (struct iocb *)req->priv;
}

static void laio_prep(LinuxAioState *s, FileAioReq *req)
{
    struct iocb *iocb = laio_iocb(req);

    /* Linux AIO has no usable fsync: file-posix flushes in a thread */
    assert(req->type == FILE_AIO_READ || req->type == FILE_AIO_WRITE);
    if (req->type == FILE_AIO_READ) {
        io_prep_preadv(iocb, req->fd, req->iov.iov, req->iov.niov,
                       req->offset);
    } else {
        io_prep_pwritev(iocb, req->fd, req->iov.iov, req->iov.niov,
                        req->offset);
    }
    io_set_eventfd(iocb, event_notifier_get_fd(&s->core.notifier));
    /* the prep above cleared the iocb; the event gives this back */
    iocb->data = req;
}

/* Hands as many queued requests as the kernel context takes to it. */
static void laio_flush(FileAioState *core)
{
    LinuxAioState *s = laio_of(core);
    struct iocb *iocbs[LAIO_SUBMIT_MAX];

    while (core->pending_head && core->in_flight < LAIO_MAX_EVENTS) {
        unsigned room = MIN(LAIO_MAX_EVENTS - core->in_flight,
                            ARRAY_SIZE(iocbs));
        FileAioReq *req = core->pending_head;
        unsigned n = 0;
        int ret;

        for (; req && n < room; req = req->next) {
            laio_prep(s, req);
            iocbs[n++] = laio_iocb(req);
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

/*
 * Takes the events from the ring, as io_getevents() would: each one is
 * read before head moves past it (the kernel may then reuse the slot),
 * and head is re-read every time, since a completion may enter a
 * coroutine that submits and reaps again.
 */
static void laio_reap_ring(FileAioState *core, LaioRingHeader *ring)
{
    struct io_event *events = (struct io_event *)(ring + 1);

    for (;;) {
        unsigned head = __atomic_load_n(&ring->head, __ATOMIC_RELAXED);
        unsigned tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
        struct io_event ev;

        if (head == tail) {
            break;
        }
        ev = events[head % ring->nr];
        __atomic_store_n(&ring->head, (head + 1) % ring->nr,
                         __ATOMIC_RELEASE);
        core->in_flight--;
        /* res is unsigned long: a negative errno comes back wrapped. */
        file_aio_process(core, ev.data, (long)ev.res);
    }
}

static void laio_reap(FileAioState *core)
{
    LinuxAioState *s = laio_of(core);
    struct io_event events[64];
    struct timespec no_wait = { 0, 0 };
    int n;

    if (laio_ring_known(laio_ring(s))) {
        laio_reap_ring(core, laio_ring(s));
        return;
    }
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
            /* res is unsigned long: a negative errno comes back wrapped. */
            file_aio_process(core, events[i].data, (long)events[i].res);
        }
    }
}

static bool laio_poll(FileAioState *core)
{
    LaioRingHeader *ring = laio_ring(laio_of(core));

    if (!laio_ring_known(ring)) {
        /* not the ring we know: the eventfd alone will tell */
        return false;
    }
    return __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE) !=
           __atomic_load_n(&ring->head, __ATOMIC_RELAXED);
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

FileAioState *laio_get(AioContext *ctx, Error **errp)
{
    return file_aio_get(&laio_ops, ctx, errp);
}

static const FileAioBackendOps laio_ops = {
    .state_size     = sizeof(LinuxAioState),
    .init           = laio_init,
    .cleanup        = laio_cleanup,
    .flush          = laio_flush,
    .reap           = laio_reap,
    .poll           = laio_poll,
};
