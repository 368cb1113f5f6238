/*
 * snapshot-access: a read-only view of the point-in-time image that a
 * copy-before-write filter keeps (QEMU 7.2's "snapshot-access" driver):
 * its "file" is the filter node; a read returns the source as it was when
 * the filter was put in place, clusters copied since from the target,
 * the others from the source, which the filter keeps unchanged while
 * they are read (copy-before-write.c's invariant 5).  Export it (NBD) to
 * let a backup tool read the snapshot while the guest writes on: image
 * fleecing.
 *
 * Invariants:
 *  1. The node asks nothing of its child and shares everything, as
 *     QEMU's: the filter's data changes under it by design, the snapshot
 *     does not.
 *  2. Over a node that is no copy-before-write filter, reads and block
 *     status fail with -ENOTSUP (QEMU opens it too, and fails there);
 *     writes and zero writes always fail with -ENOTSUP: the snapshot is
 *     read-only.  A discard tells the filter that the backup tool is done
 *     with those clusters (copy-before-write.c's invariant 8), as in
 *     QEMU 7.2; over another node it fails with -ENOTSUP.  Block status is the snapshot's (the
 *     filter's), never the live source's, which may read zeroes where
 *     the snapshot has data.
 *
 * Nothing here changes after open: no lock.
 */

#include "copy-before-write.h"

static int snapshot_access_open(BlockDriverState *bs, QDict *options,
                                int flags, Error **errp)
{
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    return bs->file ? 0 : -EINVAL;
}

/* Invariant 1. */
static void snapshot_access_child_perm(BlockDriverState *bs, BdrvChild *c,
                                       uint64_t perm, uint64_t shared,
                                       uint64_t *nperm, uint64_t *nshared)
{
    *nperm = 0;
    *nshared = BLK_PERM_ALL;
}

/* No name opens this view but its options: a json: name, always. */
static void snapshot_access_refresh_filename(BlockDriverState *bs)
{
    bs->exact_filename[0] = '\0';
}

static int snapshot_access_reopen_prepare(BDRVReopenState *state,
                                          Error **errp)
{
    return 0;
}

/* Invariant 2. */
static int coroutine_fn snapshot_access_co_preadv(BlockDriverState *bs,
                                                  int64_t offset,
                                                  int64_t bytes,
                                                  QEMUIOVector *qiov,
                                                  BdrvRequestFlags flags)
{
    if (!cbw_is_filter(bs->file->bs)) {
        return -ENOTSUP;
    }
    return cbw_co_preadv_snapshot(bs->file->bs, offset, bytes, qiov);
}

/* Invariant 2; the snapshot's status, never the live source's. */
static int coroutine_fn snapshot_access_co_block_status(
    BlockDriverState *bs, bool want_zero, int64_t offset, int64_t bytes,
    int64_t *pnum, int64_t *map, BlockDriverState **file)
{
    if (!cbw_is_filter(bs->file->bs)) {
        return -ENOTSUP;
    }
    return cbw_co_snapshot_block_status(bs->file->bs, want_zero, offset,
                                        bytes, pnum, map, file);
}

static int coroutine_fn snapshot_access_co_pwritev(BlockDriverState *bs,
                                                   int64_t offset,
                                                   int64_t bytes,
                                                   QEMUIOVector *qiov,
                                                   BdrvRequestFlags flags)
{
    return -ENOTSUP;
}

static int coroutine_fn snapshot_access_co_pwrite_zeroes(
    BlockDriverState *bs, int64_t offset, int64_t bytes,
    BdrvRequestFlags flags)
{
    return -ENOTSUP;
}

/* Invariant 2. */
static int coroutine_fn snapshot_access_co_pdiscard(BlockDriverState *bs,
                                                    int64_t offset,
                                                    int64_t bytes)
{
    if (!cbw_is_filter(bs->file->bs)) {
        return -ENOTSUP;
    }
    return cbw_co_pdiscard_snapshot(bs->file->bs, offset, bytes);
}

static const BlockDriver bdrv_snapshot_access = {
    .format_name                    = "snapshot-access",
    /* opened as QEMU opens it: a filename names the file child */
    .is_format                      = true,
    .bdrv_open                      = snapshot_access_open,
    .bdrv_reopen_prepare            = snapshot_access_reopen_prepare,
    .bdrv_child_perm                = snapshot_access_child_perm,
    .bdrv_getlength                 = bdrv_filter_getlength,
    .bdrv_refresh_filename          = snapshot_access_refresh_filename,
    .bdrv_co_preadv                 = snapshot_access_co_preadv,
    .bdrv_co_block_status           = snapshot_access_co_block_status,
    .bdrv_co_pwritev                = snapshot_access_co_pwritev,
    .bdrv_co_pwrite_zeroes          = snapshot_access_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = snapshot_access_co_pdiscard,
};

block_init(bdrv_register, bdrv_snapshot_access)
