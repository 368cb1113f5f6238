/*
 * Sizes of the file protocol driver's files, and resizing them: the
 * length of a file or block device, and the thread-pool worker that
 * truncates or preallocates a regular file, shared by truncate and image
 * creation (block/file-posix.c).
 *
 * The worker runs in the thread pool and touches nothing but its argument
 * and the file descriptor in it.
 */
#ifndef QBLOCK_FILE_POSIX_RESIZE_H
#define QBLOCK_FILE_POSIX_RESIZE_H

#include "block/block_int.h"

/* Worker state of a truncate of a regular file. */
typedef struct RawTruncate {
    int fd;
    int64_t offset;
    PreallocMode prealloc;
    Error **errp;
} RawTruncate;

/* Length of the file or block device behind @fd, or -errno. */
int64_t raw_fd_getlength(int fd);

/*
 * Thread-pool worker (ThreadPoolFunc) taking a RawTruncate: resizes the
 * regular file to exactly t->offset with t->prealloc; 0 or -errno, with
 * the reason in t->errp.
 */
int raw_work_truncate(void *opaque);

#endif
