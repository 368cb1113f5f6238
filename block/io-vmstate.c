/*
 * The VM state area of a node (savevm/loadvm, migration/savevm.c): the
 * requests that read and write it, on the node whose driver keeps one
 * (qcow2's, past the guest's disk), through filters.  Not guest data, so
 * none of io.c's tracking or alignment applies; only its in-flight count,
 * so that a drain waits for them.
 */

#include "block/block_int.h"
#include "io-internal.h"

/*
 * The node that keeps the VM state for @bs: @bs itself if its driver has
 * a VM state area, else the one below a filter; NULL if there is none.
 */
static BlockDriverState *bdrv_vmstate_bs(BlockDriverState *bs, bool save)
{
    while (bs && bs->drv) {
        if (save ? bs->drv->bdrv_co_save_vmstate != NULL
                 : bs->drv->bdrv_co_load_vmstate != NULL) {
            return bs;
        }
        if (!bs->drv->is_filter || !bs->file) {
            return NULL;
        }
        bs = bs->file->bs;
    }
    return NULL;
}

/*
 * The area is not guest data: no request tracking or alignment applies,
 * but the request counts as in flight so that drain waits for it.
 */
static int coroutine_fn bdrv_co_vmstate(BlockDriverState *bs,
                                        QEMUIOVector *qiov, int64_t pos,
                                        bool save)
{
    BlockDriverState *target = bdrv_vmstate_bs(bs, save);
    int ret;

    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    if (!target) {
        return -ENOTSUP;
    }
    if (pos < 0 || qiov->size > INT64_MAX - (uint64_t)pos) {
        return -EINVAL;
    }
    if (save && !bdrv_is_writable(target)) {
        return -EACCES;
    }
    bdrv_inc_in_flight(target);
    if (save) {
        BLKDBG_EVENT(target->file, BLKDBG_VMSTATE_SAVE);
        ret = target->drv->bdrv_co_save_vmstate(target, qiov, pos);
    } else {
        BLKDBG_EVENT(target->file, BLKDBG_VMSTATE_LOAD);
        ret = target->drv->bdrv_co_load_vmstate(target, qiov, pos);
    }
    bdrv_dec_in_flight(target);
    return ret < 0 ? ret : 0;
}

int coroutine_fn bdrv_co_writev_vmstate(BlockDriverState *bs,
                                        QEMUIOVector *qiov, int64_t pos)
{
    return bdrv_co_vmstate(bs, qiov, pos, true);
}

int coroutine_fn bdrv_co_readv_vmstate(BlockDriverState *bs,
                                       QEMUIOVector *qiov, int64_t pos)
{
    return bdrv_co_vmstate(bs, qiov, pos, false);
}

