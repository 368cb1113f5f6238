/*
 * What io.c offers block-backend.c beyond the public API: the drain barrier
 * that requests entering the graph from a BlockBackend wait at.
 */
#ifndef QBLOCK_IO_INTERNAL_H
#define QBLOCK_IO_INTERNAL_H

#include "block/block_int.h"

/*
 * A node in a drained section that a request entering the graph at @bs
 * must wait for: @bs itself, a node below it or a node above it with a
 * nonzero quiesce_counter.  NULL (cheaply, with no graph walk) while no
 * node anywhere is drained.  The caller waits in the returned node's
 * drain_queue and asks again when woken.
 */
BlockDriverState *bdrv_drain_barrier(BlockDriverState *bs);

#endif
