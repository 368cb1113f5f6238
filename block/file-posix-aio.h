/*
 * The asynchronous backends of the file driver: Linux AIO (aio=native,
 * block/linux-aio.c) and io_uring (aio=io_uring, block/io_uring.c).
 *
 * Each AioContext has at most one instance of each backend, shared by every
 * file node of that context and reference-counted by them.  A request is
 * queued by the coroutine that issues it, which then yields; the queue goes
 * to the kernel at once when it reaches the batch limit (by default four
 * requests or 128 KiB, file-aio-core.c), and what is left at the end of
 * the event-loop iteration (a bottom half).  Completions arrive through an
 * eventfd handler that wakes the waiting coroutines.  All of that is one
 * core that both backends share (file-aio-core.c); each backend file
 * holds only what is libaio's or liburing's.
 *
 * Invariants (both backends):
 *  1. A request is either queued (not yet given to the kernel), in flight,
 *     or completed; it is completed exactly once.
 *  2. Short transfers are finished by the backend: a read that stops at end
 *     of file is zero-filled, any other short transfer is resubmitted for
 *     the rest, EINTR and EAGAIN are retried.  The caller sees 0 or -errno.
 *  3. An instance is freed only when no node uses it, which the block layer
 *     guarantees happens after every request was drained.
 */
#ifndef QBLOCK_FILE_POSIX_AIO_H
#define QBLOCK_FILE_POSIX_AIO_H

#include "block/block_int.h"

typedef enum FileAioType {
    FILE_AIO_READ,
    FILE_AIO_WRITE,
    /* fdatasync (io_uring only: Linux AIO has no usable fsync) */
    FILE_AIO_FLUSH,
} FileAioType;

/*
 * One backend's instance for one AioContext, shared by the file nodes of
 * that context (file-aio-core.h).
 */
typedef struct FileAioState FileAioState;

/* Linux AIO (aio=native): reads and writes. */
FileAioState *laio_get(AioContext *ctx, Error **errp);
/* io_uring (aio=io_uring): reads, writes and FILE_AIO_FLUSH. */
FileAioState *luring_get(AioContext *ctx, Error **errp);
/* Drops the reference that laio_get() or luring_get() returned. */
void file_aio_put(FileAioState *s);
/*
 * Runs one request on @fd through @s's backend and waits for it;
 * @qiov is NULL for a flush, @node_max_batch is the node's aio-max-batch
 * (0: none; the batch limit is in file-aio-core.c).  Returns 0 or -errno
 * (invariant 2).
 */
int coroutine_fn file_aio_co_submit(FileAioState *s, int fd, int64_t offset,
                                    QEMUIOVector *qiov, FileAioType type,
                                    unsigned node_max_batch);

/*
 * A transfer in progress over an iovec array: after a short transfer the
 * array is copied (the caller's stays untouched) and advanced past the
 * bytes already done.
 */
typedef struct FileAioIov {
    struct iovec *iov;          /* the caller's array, or own_iov */
    int niov;
    struct iovec *own_iov;      /* the advanced copy, or NULL */
} FileAioIov;

static inline void file_aio_iov_init(FileAioIov *fi, QEMUIOVector *qiov)
{
    fi->iov = qiov->iov;
    fi->niov = qiov->niov;
    fi->own_iov = NULL;
}

/* Skips @bytes already transferred. */
static inline void file_aio_iov_advance(FileAioIov *fi, size_t bytes)
{
    if (!fi->own_iov) {
        fi->own_iov = g_memdup2(fi->iov, sizeof(struct iovec) * fi->niov);
        fi->iov = fi->own_iov;
    }
    while (bytes && fi->niov) {
        if (bytes < fi->iov->iov_len) {
            fi->iov->iov_base = (char *)fi->iov->iov_base + bytes;
            fi->iov->iov_len -= bytes;
            return;
        }
        bytes -= fi->iov->iov_len;
        fi->iov++;
        fi->niov--;
    }
}

static inline void file_aio_iov_destroy(FileAioIov *fi)
{
    g_free(fi->own_iov);
}

#endif
