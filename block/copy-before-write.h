/*
 * What the copy-before-write filter (copy-before-write.c) offers the
 * snapshot-access driver (snapshot-access.c): reads of the point-in-time
 * image it keeps.  Private to the two drivers.
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

#endif
