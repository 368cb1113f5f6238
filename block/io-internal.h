/*
 * What the request path's files (io.c, block-status.c, drain.c,
 * io-sync.c) and block-backend.c share beyond the headers of include/:
 * the request alignment and the drain barrier.
 */
#ifndef QBLOCK_IO_INTERNAL_H
#define QBLOCK_IO_INTERNAL_H

#include "block/block_int.h"

static inline int64_t bdrv_request_align(BlockDriverState *bs)
{
    return bs->bl.request_alignment ? bs->bl.request_alignment : 1;
}

/*
 * A node in a drained section that a request entering the graph at @bs
 * must wait for: @bs itself, a node below it or a node above it with a
 * nonzero quiesce_counter.  NULL (cheaply, with no graph walk) while no
 * node anywhere is drained.  The caller waits in the returned node's
 * drain_queue and asks again when woken (drain.c's invariant 1).
 */
BlockDriverState *bdrv_drain_barrier(BlockDriverState *bs);

#endif
