/*
 * The core that the file driver's asynchronous backends share
 * (block/linux-aio.c, block/io_uring.c; the rules they follow are in
 * file-posix-aio.h).  The core owns what does not depend on the kernel
 * interface:
 *  - the registry: one instance of each backend per AioContext,
 *    reference-counted by the file nodes of that context;
 *  - the queue of requests not yet given to the kernel, and the bottom
 *    half that hands it over once per event-loop iteration;
 *  - the eventfd that signals completions, and its handler;
 *  - what a completion means for a request (finished, short, failed)
 *    and waking the coroutine that waits for it.
 * A backend supplies a static const FileAioBackendOps and keeps only what
 * is libaio- or liburing-specific: its kernel context, how a request is
 * prepared and submitted, how completions are reaped.
 *
 * The request path costs no allocation (requests live on the issuing
 * coroutine's stack, with room for the backend's own data) and no
 * indirect call per request: file_aio_co_submit() is the one entry for
 * both backends, and the ops run once per batch (flush) or per wake-up of
 * the eventfd (reap).  file_aio_put() (in file-posix-aio.h) releases what
 * file_aio_get() returned; the last put frees the instance (invariant 3).
 *
 * A backend whose kernel shares its completion queue with us (io_uring's
 * CQ ring, Linux AIO's event ring) says in ops->poll whether it holds
 * completions, so that an iothread's busy-poll (util/aio.h) reaps them
 * without waiting for the eventfd.
 *
 * Everything but file_aio_get()/file_aio_put() runs in the AioContext's
 * thread.
 *
 * Invariants (numbered after file-posix-aio.h's 1-3):
 *  4. s->pending_head..pending_tail is the FIFO of queued requests,
 *     pending_count its length and pending_bytes the sum of their
 *     remaining bytes; a request is in it at most once.
 *  5. s->in_flight counts the requests the kernel holds: a backend adds
 *     what a submission accepted and subtracts what it reaps.
 */
#ifndef QBLOCK_FILE_AIO_CORE_H
#define QBLOCK_FILE_AIO_CORE_H

#include "block/file-posix-aio.h"

typedef struct FileAioReq FileAioReq;

/* One request, on the stack of the coroutine that issued it. */
struct FileAioReq {
    Coroutine *co;
    int fd;
    FileAioType type;
    int64_t offset;             /* of the part not yet transferred */
    size_t remaining;
    FileAioIov iov;
    int ret;
    bool completed;
    FileAioReq *next;           /* in s->pending */
    /*
     * The backend's own per-request data (libaio's iocb, 64 bytes), so
     * that a request needs no allocation; each backend asserts that its
     * data fits.
     */
    uint64_t priv[8];
};

/*
 * What a backend supplies.  Every callback is required and runs in the
 * AioContext's thread, outside coroutine context, never for a request
 * that has completed.
 */
typedef struct FileAioBackendOps {
    /* Bytes of the backend's state, which starts with a FileAioState. */
    size_t state_size;
    /*
     * Sets up the kernel side; s->notifier exists already and is to
     * signal every completion.  Returns 0, or -errno with @errp naming
     * what failed.  Nothing else is called after a failure.
     */
    int (*init)(FileAioState *s, Error **errp);
    /* Tears the kernel side down: nothing is queued or in flight. */
    void (*cleanup)(FileAioState *s);
    /*
     * Hands queued requests to the kernel, as many as it takes
     * (file_aio_dequeue() each one handed over).  Requests it cannot take
     * now stay queued: the next completion retries, and if none is due
     * the backend schedules s->submit_bh.  A request the kernel refuses
     * outright is completed with file_aio_complete().  Does nothing when
     * there is nothing to hand over.
     */
    void (*flush)(FileAioState *s);
    /*
     * Reaps every completion the kernel has, without waiting, passing
     * each to file_aio_process().  The core flushes after it.
     */
    void (*reap)(FileAioState *s);
    /*
     * Optional (NULL: only the eventfd tells of completions).  Whether
     * the kernel has completions for reap, read from the memory it shares
     * with us, without a system call; the loop calls it often while it
     * busy-polls, and reap follows when it says yes.
     */
    bool (*poll)(FileAioState *s);
} FileAioBackendOps;

struct FileAioState {
    /* --- set by file_aio_get, immutable --- */
    const FileAioBackendOps *ops;
    AioContext *ctx;
    EventNotifier notifier;     /* completions */
    QEMUBH *submit_bh;          /* runs ops->flush */

    /* --- under the registry's lock --- */
    int refcnt;
    FileAioState *next;         /* in the registry */

    /* --- the AioContext's thread: invariants 4 and 5 --- */
    FileAioReq *pending_head;
    FileAioReq **pending_tail;
    unsigned pending_count;
    size_t pending_bytes;       /* the queued requests' remaining bytes */
    unsigned in_flight;
};

/*
 * The instance of the backend @ops for @ctx, created on first use (with
 * the error of ops->init or of the eventfd); file_aio_put() releases it.
 */
FileAioState *file_aio_get(const FileAioBackendOps *ops, AioContext *ctx,
                           Error **errp);
/* The oldest queued request, taken off the queue; NULL if none. */
FileAioReq *file_aio_dequeue(FileAioState *s);
/* Invariant 1: @req is done with @ret; its coroutine is woken. */
void file_aio_complete(FileAioReq *req, int ret);
/*
 * The kernel finished @req with @res (bytes or -errno): completes it, or
 * queues the rest of a short transfer again (invariant 2).  The backend
 * has already taken @req out of s->in_flight.
 */
void file_aio_process(FileAioState *s, FileAioReq *req, long res);

#endif
