/*
 * What the file protocol driver (block/file-posix.c) shares with the
 * host_device and host_cdrom drivers (block/file-host-device.c).
 *
 * The three drivers have one state (BDRVRawState, private to
 * file-posix.c) and one open, request and locking path; they differ in
 * what kind of file they accept, how the size is found and changed, and
 * how zeroes and discards reach the disk.  Everything here runs in the
 * node's AioContext thread, as the driver callbacks it implements.
 */
#ifndef QBLOCK_FILE_POSIX_H
#define QBLOCK_FILE_POSIX_H

#include "block/block_int.h"
#include "util/thread-pool.h"

/*
 * The drivers' instance_size: BDRVRawState is private to file-posix.c,
 * which asserts that it fits (room is left for fields to come).
 */
#define RAW_STATE_SIZE 512

/* What a driver built on file-posix accepts at open. */
typedef enum RawFileType {
    RAW_FILE_TYPE_FILE,         /* a regular file ("file") */
    RAW_FILE_TYPE_HOST_DEVICE,  /* a block or character device */
    RAW_FILE_TYPE_CDROM,        /* same, opened without waiting for media */
} RawFileType;

/*
 * Opens @bs as @type: the file's kind is checked against @type with
 * QEMU's messages, which name the driver (bs->drv->format_name).
 */
int raw_open_common(BlockDriverState *bs, QDict *options, int flags,
                    RawFileType type, Error **errp);

/* The node's current fd: reopen may replace it, so never keep it. */
int raw_get_fd(BlockDriverState *bs);

/* Runs @func(@arg) in the thread pool of the node's AioContext. */
int coroutine_fn raw_thread_pool_co(BlockDriverState *bs,
                                    ThreadPoolFunc *func, void *arg);

/* Driver callbacks the device drivers use unchanged. */
void raw_close(BlockDriverState *bs);
/* Moves the node's AIO ring or context to @new_ctx's (an iothread's). */
int raw_change_aio_context(BlockDriverState *bs, AioContext *new_ctx,
                           Error **errp);
int raw_reopen_prepare(BDRVReopenState *state, Error **errp);
void raw_reopen_commit(BDRVReopenState *state);
void raw_reopen_abort(BDRVReopenState *state);
int coroutine_fn raw_co_preadv(BlockDriverState *bs, int64_t offset,
                               int64_t bytes, QEMUIOVector *qiov,
                               BdrvRequestFlags flags);
int coroutine_fn raw_co_pwritev(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags);
int coroutine_fn raw_co_flush_to_disk(BlockDriverState *bs);
int coroutine_fn raw_co_block_status(BlockDriverState *bs, bool want_zero,
                                     int64_t offset, int64_t bytes,
                                     int64_t *pnum, int64_t *map,
                                     BlockDriverState **file);
int64_t raw_get_allocated_file_size(BlockDriverState *bs);
int raw_get_info(BlockDriverState *bs, BlockDriverInfo *bdi);
void raw_refresh_limits(BlockDriverState *bs, Error **errp);
int raw_check_perm(BlockDriverState *bs, uint64_t perm, uint64_t shared,
                   Error **errp);
void raw_set_perm(BlockDriverState *bs, uint64_t perm, uint64_t shared);
void raw_abort_perm_update(BlockDriverState *bs);

/* --- Implemented in file-host-device.c ---------------------------------- */

/*
 * Truncate of a device of @len bytes (-errno if its length could not be
 * read) to @offset: a device keeps its size, so only its own size (or,
 * when not @exact, a smaller one) is accepted, with QEMU's messages.
 * For host_device and for the file driver opened on a device.
 */
int hdev_check_truncate(int64_t len, int64_t offset, bool exact,
                        PreallocMode prealloc, Error **errp);

/*
 * The block sizes of a device, from what its ioctls answered (0 where one
 * failed).  Pure, so that it can be tested without a device.
 */
typedef struct HostDeviceBlockSizes {
    uint32_t logical;           /* BLKSSZGET: smallest addressable unit */
    uint32_t physical;          /* BLKPBSZGET: what the disk writes at once */
} HostDeviceBlockSizes;

/*
 * Fills in what the kernel did not tell, as QEMU does: a logical size
 * that is not a power of two of at least 512 becomes 512, a physical size
 * smaller than the logical one (or unknown) becomes the logical one.
 */
HostDeviceBlockSizes hdev_block_sizes_fixup(uint32_t logical,
                                            uint32_t physical);

#endif
