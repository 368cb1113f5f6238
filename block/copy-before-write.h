/*
 * What the copy-before-write filter (copy-before-write.c) offers the
 * snapshot-access driver (snapshot-access.c): reads of the point-in-time
 * image it keeps; and the backup job (backup.c): the copies themselves,
 * which clusters are still to copy, progress.  Private to the three.
 */
#ifndef QBLOCK_COPY_BEFORE_WRITE_H
#define QBLOCK_COPY_BEFORE_WRITE_H

#include "block/block_int.h"

/* True if @bs is a copy-before-write filter node. */
bool cbw_is_filter(BlockDriverState *bs);

/*
 * Reads @bytes at @offset of the image the filter @bs keeps: the
 * source as it was when the filter was opened (copy-before-write.c's
 * invariant 5).  -EACCES once the snapshot is broken (on-cbw-error
 * break-snapshot).  In coroutine context, as a request of the caller's
 * node.
 */
int coroutine_fn cbw_co_preadv_snapshot(BlockDriverState *bs,
                                        int64_t offset, int64_t bytes,
                                        QEMUIOVector *qiov);

/*
 * The block status of the snapshot at @offset (bdrv_co_block_status()'s
 * contract): the target's for clusters copied, the source's for the
 * others; -EACCES for a cluster outside the snapshot or once it is broken.
 */
int coroutine_fn cbw_co_snapshot_block_status(BlockDriverState *bs,
                                              bool want_zero,
                                              int64_t offset, int64_t bytes,
                                              int64_t *pnum, int64_t *map,
                                              BlockDriverState **file);

/*
 * The backup tool is done with [offset, +bytes) of the snapshot (a
 * discard on snapshot-access, QEMU 7.2's): its whole clusters leave the
 * snapshot and need no copy any more (invariant 8), and their copies in
 * the target are discarded.  In coroutine context.
 */
int coroutine_fn cbw_co_pdiscard_snapshot(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes);

/* ---- the backup job's (block/backup.c); main loop, filter @bs ---- */

/* Called after each copy that succeeded, the job's or a guest write's. */
typedef void CbwProgressFn(void *opaque, int64_t bytes);

/* The granularity of the copies (bytes). */
int64_t cbw_get_cluster_size(BlockDriverState *bs);
/*
 * Set by the job right after it put the filter in place, the source still
 * drained (nothing copied before): @write_flags for every write of
 * the target (BDRV_REQ_WRITE_COMPRESSED for compress=on), @progress
 * (may be NULL) with @opaque.
 */
void cbw_set_job_hooks(BlockDriverState *bs, BdrvRequestFlags write_flags,
                       CbwProgressFn *progress, void *opaque);
/*
 * The clusters that lie entirely in [offset, +bytes) need no copy
 * (invariant 6): they count as done, and leave the snapshot (invariant 7).
 */
void cbw_skip(BlockDriverState *bs, int64_t offset, int64_t bytes);
/*
 * The first run of clusters still to copy at or after @offset, at most
 * @max_bytes long (one cluster at least): its offset, and its length in
 * *@bytes; -1 if none is left.
 */
int64_t cbw_next_needed(BlockDriverState *bs, int64_t offset,
                        int64_t max_bytes, int64_t *bytes);
/* Bytes still to copy (whole clusters). */
int64_t cbw_needed_bytes(BlockDriverState *bs);
/*
 * The filter is about to be taken out of the graph (its users move back
 * to the source, in a drained section): from now on it takes no
 * permission on the source, so that they can.  Nothing is copied after.
 */
void cbw_release_source(BlockDriverState *bs);
/*
 * Copies the clusters of [offset, +bytes) still to copy, or waits for
 * the copies in flight that have them (invariant 2).  0, or -errno with
 * *@read_failed true if the source failed, false if the target did.
 * In coroutine context.
 */
int coroutine_fn cbw_co_copy(BlockDriverState *bs, int64_t offset,
                             int64_t bytes, bool *read_failed);

#endif
