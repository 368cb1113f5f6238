/*
 * BlockBackend: a user's handle on a node graph (a tool, a device model, an
 * export).
 *
 * It owns the guest-visible write cache flag.  With the write cache off
 * (writethrough), every write that completes successfully is followed by a
 * flush of the whole graph below before it is completed to the caller; with
 * it on (writeback), flushes happen only when asked for.  The flag may be
 * changed at any time, also while requests are in flight: the flag is read
 * when a write starts and when it completes, and the write is flushed
 * before its completion if the cache was off at either moment.  So a write
 * that completes after a switch to writethrough is flushed, and so is one
 * issued in writethrough mode that completes after a switch to writeback.
 *
 * It also keeps the I/O statistics that query-blockstats reports.
 *
 * Permissions: blk_new_open() asks for CONSISTENT_READ, plus WRITE when
 * opened read-write and RESIZE with BDRV_O_RESIZE.  With BDRV_O_NO_SHARE it
 * shares only CONSISTENT_READ and WRITE_UNCHANGED with other users,
 * otherwise everything.  As in QEMU, qemu-io shares everything while
 * qemu-img's convert/commit/... pass BDRV_O_NO_SHARE unless -U is given.
 */
#ifndef QBLOCK_BLOCK_BACKEND_H
#define QBLOCK_BLOCK_BACKEND_H

#include "block/block.h"

typedef struct BlockAIOCB BlockAIOCB;
typedef void BlockCompletionFunc(void *opaque, int ret);

/*
 * What the device model or export using a BlockBackend learns of changes
 * below it.  Every member is optional.
 */
typedef struct BlockDevOps {
    /*
     * The root node's length changed (block_resize).  Called from the
     * coroutine of the truncate, once the new length is in effect; it
     * must not wait.
     */
    void (*resize_cb)(void *opaque);
} BlockDevOps;

BlockBackend *blk_new(AioContext *ctx, uint64_t perm, uint64_t shared_perm);
/*
 * Opens @filename (see bdrv_open) and attaches it.  The write cache starts
 * enabled; callers apply the cache mode with blk_set_enable_write_cache().
 */
BlockBackend *blk_new_open(const char *filename, const char *reference,
                           QDict *options, int flags, Error **errp);
int blk_insert_bs(BlockBackend *blk, BlockDriverState *bs, Error **errp);
/*
 * A new BlockBackend in @bs's context, holding @perm and sharing @shared
 * on @bs (blk_new() and blk_insert_bs() in one).  NULL with @errp set
 * when the permissions conflict with @bs's other users.
 */
BlockBackend *blk_new_with_bs(BlockDriverState *bs, uint64_t perm,
                              uint64_t shared, Error **errp);
void blk_remove_bs(BlockBackend *blk);
void blk_ref(BlockBackend *blk);
/* Drains, then drops the reference (and the graph with the last one). */
void blk_unref(BlockBackend *blk);
BlockDriverState *blk_bs(BlockBackend *blk);
AioContext *blk_get_aio_context(BlockBackend *blk);
/*
 * Moves @blk and its node graph into @ctx (an export's iothread; see
 * bdrv_try_change_aio_context(): refused if another user of the graph
 * cannot follow).  The caller holds both contexts.  0 or -errno.
 */
int blk_set_aio_context(BlockBackend *blk, AioContext *ctx, Error **errp);
/*
 * Whether another user's blk_set_aio_context() on a shared node may take
 * @blk along (default no: "Cannot change iothread of active block
 * backend").
 */
void blk_set_allow_aio_context_change(BlockBackend *blk, bool allow);
const char *blk_name(const BlockBackend *blk);
void blk_set_name(BlockBackend *blk, const char *name);
/*
 * Requests of @blk pass the drain barrier instead of waiting at it: for
 * the one who drained the node and then works on it (block_resize), as
 * in QEMU.
 */
void blk_set_disable_request_queuing(BlockBackend *blk, bool disable);
/* Sets the user's callbacks (@ops: NULL for none). */
void blk_set_dev_ops(BlockBackend *blk, const BlockDevOps *ops,
                     void *opaque);
int blk_set_perm(BlockBackend *blk, uint64_t perm, uint64_t shared_perm,
                 Error **errp);
void blk_get_perm(BlockBackend *blk, uint64_t *perm, uint64_t *shared_perm);
/* Allows writes past the end (qemu-img convert -n, create). */
void blk_set_allow_write_beyond_eof(BlockBackend *blk, bool allow);

/* The write cache flag (see the header comment). */
bool blk_enable_write_cache(BlockBackend *blk);
void blk_set_enable_write_cache(BlockBackend *blk, bool wce);

/* Coroutine request functions; offsets and sizes are in bytes, any
 * alignment. */
int coroutine_fn blk_co_preadv(BlockBackend *blk, int64_t offset,
                               int64_t bytes, QEMUIOVector *qiov,
                               BdrvRequestFlags flags);
int coroutine_fn blk_co_pwritev(BlockBackend *blk, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags);
int coroutine_fn blk_co_pwrite_zeroes(BlockBackend *blk, int64_t offset,
                                      int64_t bytes, BdrvRequestFlags flags);
int coroutine_fn blk_co_pdiscard(BlockBackend *blk, int64_t offset,
                                 int64_t bytes);
int coroutine_fn blk_co_pwritev_compressed(BlockBackend *blk, int64_t offset,
                                           int64_t bytes, QEMUIOVector *qiov);
int coroutine_fn blk_co_flush(BlockBackend *blk);
int coroutine_fn blk_co_truncate(BlockBackend *blk, int64_t offset,
                                 bool exact, PreallocMode prealloc,
                                 BdrvRequestFlags flags, Error **errp);

/* Synchronous forms (run a coroutine and poll until it is done). */
int blk_pread(BlockBackend *blk, int64_t offset, int64_t bytes, void *buf,
              BdrvRequestFlags flags);
int blk_pwrite(BlockBackend *blk, int64_t offset, int64_t bytes,
               const void *buf, BdrvRequestFlags flags);
int blk_preadv(BlockBackend *blk, int64_t offset, int64_t bytes,
               QEMUIOVector *qiov, BdrvRequestFlags flags);
int blk_pwritev(BlockBackend *blk, int64_t offset, int64_t bytes,
                QEMUIOVector *qiov, BdrvRequestFlags flags);
int blk_pwrite_zeroes(BlockBackend *blk, int64_t offset, int64_t bytes,
                      BdrvRequestFlags flags);
int blk_pwrite_compressed(BlockBackend *blk, int64_t offset, int64_t bytes,
                          const void *buf);
int blk_pdiscard(BlockBackend *blk, int64_t offset, int64_t bytes);
int blk_flush(BlockBackend *blk);
int blk_truncate(BlockBackend *blk, int64_t offset, bool exact,
                 PreallocMode prealloc, BdrvRequestFlags flags, Error **errp);
int64_t blk_getlength(BlockBackend *blk);
/*
 * The VM state area of the node (bdrv_save_vmstate); saving flushes
 * afterwards when the write cache is off (writethrough).
 */
int blk_save_vmstate(BlockBackend *blk, const uint8_t *buf, int64_t pos,
                     int64_t size);
int blk_load_vmstate(BlockBackend *blk, uint8_t *buf, int64_t pos,
                     int64_t size);

/*
 * Asynchronous forms: start the request and return; @cb(@opaque, ret) runs
 * from the AioContext when it completes (never before the call returns).
 */
BlockAIOCB *blk_aio_preadv(BlockBackend *blk, int64_t offset,
                           QEMUIOVector *qiov, BdrvRequestFlags flags,
                           BlockCompletionFunc *cb, void *opaque);
BlockAIOCB *blk_aio_pwritev(BlockBackend *blk, int64_t offset,
                            QEMUIOVector *qiov, BdrvRequestFlags flags,
                            BlockCompletionFunc *cb, void *opaque);
BlockAIOCB *blk_aio_pwrite_zeroes(BlockBackend *blk, int64_t offset,
                                  int64_t bytes, BdrvRequestFlags flags,
                                  BlockCompletionFunc *cb, void *opaque);
BlockAIOCB *blk_aio_pdiscard(BlockBackend *blk, int64_t offset,
                             int64_t bytes, BlockCompletionFunc *cb,
                             void *opaque);
BlockAIOCB *blk_aio_flush(BlockBackend *blk, BlockCompletionFunc *cb,
                          void *opaque);

/* Waits for every request of this backend to complete. */
void blk_drain(BlockBackend *blk);
void blk_drain_all(void);
/* Number of requests of this backend in flight. */
unsigned int blk_in_flight(BlockBackend *blk);

/* I/O statistics of this backend (as query-blockstats reports them). */
BlockAcctStats *blk_get_stats(BlockBackend *blk);

void *blk_blockalign(BlockBackend *blk, size_t size);
void *blk_try_blockalign(BlockBackend *blk, size_t size);

/* Iterates over all backends (NULL starts). */
BlockBackend *blk_next(BlockBackend *blk);
/*
 * The name of the named backend attached to @bs, else @bs's node name:
 * how events such as BLOCK_IMAGE_CORRUPTED name a device, as QEMU does.
 */
const char *bdrv_get_device_or_node_name(const BlockDriverState *bs);

#endif
