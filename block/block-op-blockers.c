/*
 * Operations a node's users forbid (QEMU's op blockers): the monitor's
 * commands that would change a node's size, contents or place in the
 * graph ask here first, and are refused with the reason of the user that
 * forbids them: "Node 'x' is busy: block device is in use by block job:
 * stream".
 *
 * Two kinds of users forbid operations:
 *  - a block job, on the nodes it works on (job/blockjob.h's
 *    block_job_block_node()), every operation;
 *  - a node, on its backing node (block-graph.c's bdrv_backing_busy()),
 *    every operation but the jobs that read a backing node or write into
 *    it (stream, commit into it, backup from and to it), as QEMU does.
 *
 * Invariants:
 *  1. bs->op_blockers holds the reasons of the users that forbid every
 *     operation on bs, the newest first: QEMU names the newest.  A reason
 *     is in a node's list at most once, from bdrv_op_block_all() until
 *     bdrv_op_unblock_all(), and no node is freed while it is in a list
 *     (the user holds a reference; asserted by bdrv_op_blockers_empty()).
 *  2. A reason is the user's string: it outlives its place in the lists.
 *  3. A job's reason comes before a backing node's: jobs block nodes of a
 *     chain that exists already, and none of the commands that make a
 *     new backing link (snapshots, jobs' ends) runs on a blocked node.
 *
 * Main loop only (threading rule 3 of docs/architecture.md).
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

/* The operations that a backing node allows its readers and writers. */
static const bool bdrv_op_backing_allows[BLOCK_OP_TYPE__MAX] = {
    [BLOCK_OP_TYPE_COMMIT_TARGET] = true,
    [BLOCK_OP_TYPE_STREAM] = true,
    [BLOCK_OP_TYPE_BACKUP_SOURCE] = true,
    [BLOCK_OP_TYPE_BACKUP_TARGET] = true,
};

void bdrv_op_block_all(BlockDriverState *bs, const char *reason)
{
    assert(!g_slist_find(bs->op_blockers, reason));     /* invariant 1 */
    bs->op_blockers = g_slist_prepend(bs->op_blockers, (char *)reason);
}

void bdrv_op_unblock_all(BlockDriverState *bs, const char *reason)
{
    assert(g_slist_find(bs->op_blockers, reason));      /* invariant 1 */
    bs->op_blockers = g_slist_remove(bs->op_blockers, reason);
}

bool bdrv_op_blockers_empty(BlockDriverState *bs)
{
    return !bs->op_blockers;
}

bool bdrv_op_is_blocked(BlockDriverState *bs, BlockOpType op, Error **errp)
{
    assert(op >= 0 && op < BLOCK_OP_TYPE__MAX);
    if (bs->op_blockers) {
        /* invariants 1 and 3: the newest user names itself */
        error_setg(errp, "Node '%s' is busy: %s",
                   bdrv_get_device_or_node_name(bs),
                   (const char *)bs->op_blockers->data);
        return true;
    }
    return !bdrv_op_backing_allows[op] && bdrv_backing_busy(bs, errp);
}
