/*
 * Sizes of the file protocol driver's files, and resizing them
 * (block/file-posix-resize.h): how long a file or block device is, and
 * truncating or preallocating a regular file in a thread-pool worker.
 */
#include "block/file-posix-resize.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

/* Chunk of zeroes written by preallocation=full. */
#define RAW_PREALLOC_CHUNK      (1 * MiB)

int64_t raw_fd_getlength(int fd)
{
    struct stat st;
    uint64_t size;

    if (fstat(fd, &st) < 0) {
        return -errno;
    }
    if (S_ISBLK(st.st_mode)) {
        return ioctl(fd, BLKGETSIZE64, &size) < 0 ? -errno : (int64_t)size;
    }
    return st.st_size;
}

/* Writes zeroes over [start, end) (preallocation=full). */
static int raw_write_zeroes_full(int fd, int64_t start, int64_t end)
{
    g_autofree void *buf = g_malloc0(RAW_PREALLOC_CHUNK);

    while (start < end) {
        ssize_t n = pwrite(fd, buf, MIN(end - start, RAW_PREALLOC_CHUNK),
                           start);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -ENOSPC;
        }
        start += n;
    }
    return 0;
}

static int raw_truncate_full(int fd, int64_t current, int64_t offset,
                             Error **errp)
{
    int ret;

    /* Setting the size first lets the file system allocate in one go. */
    if (ftruncate(fd, offset) < 0) {
        ret = -errno;
        error_setg_errno(errp, -ret, "Could not resize file");
        return ret;
    }
    ret = raw_write_zeroes_full(fd, current, offset);
    if (ret == 0 && fsync(fd) < 0) {
        ret = -errno;
        error_setg_errno(errp, -ret, "Could not flush file to disk");
    } else if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write zeros for "
                         "preallocation");
    }
    if (ret < 0 && ftruncate(fd, current) < 0) {
        warn_report("Could not restore the old size of the file: %s",
                    strerror(errno));
    }
    return ret;
}

/*
 * A file grown from empty gets its first block written, as QEMU does: with
 * O_DIRECT the request alignment is probed by reading at offset 0, which
 * on some file systems (XFS) succeeds at any alignment on a hole.
 */
static void raw_allocate_first_block(int fd, int64_t current, int64_t offset)
{
    if (current == 0 && offset > 0) {
        raw_write_zeroes_full(fd, 0, MIN(offset, 4096));
    }
}

/* Worker: resizes a regular file to exactly @offset. */
int raw_work_truncate(void *opaque)
{
    RawTruncate *t = opaque;
    int64_t current = raw_fd_getlength(t->fd);

    if (current < 0) {
        error_setg_errno(t->errp, -current, "Could not stat file");
        return current;
    }
    if (t->prealloc != PREALLOC_MODE_OFF && t->offset < current) {
        error_setg(t->errp, "Cannot use preallocation for shrinking files");
        return -ENOTSUP;
    }
    switch (t->prealloc) {
    case PREALLOC_MODE_OFF:
        if (ftruncate(t->fd, t->offset) < 0) {
            int err = errno;

            error_setg_errno(t->errp, err, "Could not resize file");
            return -err;
        }
        raw_allocate_first_block(t->fd, current, t->offset);
        return 0;
    case PREALLOC_MODE_FALLOC:
        if (t->offset > current) {
            int ret = posix_fallocate(t->fd, current, t->offset - current);

            if (ret) {
                error_setg_errno(t->errp, ret,
                                 "Could not preallocate new data");
                return -ret;
            }
        }
        raw_allocate_first_block(t->fd, current, t->offset);
        return 0;
    case PREALLOC_MODE_FULL:
        return t->offset > current
               ? raw_truncate_full(t->fd, current, t->offset, t->errp) : 0;
    default:
        error_setg(t->errp, "Unsupported preallocation mode: %s",
                   PreallocMode_str[t->prealloc]);
        return -ENOTSUP;
    }
}
