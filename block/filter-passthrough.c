/*
 * Driver callbacks that pass a request on to the node's file child
 * unchanged (include/block/block_int.h), shared by the filters whose
 * tables would otherwise each carry the same one-line wrappers; and the
 * formats' read of what their backing file holds.
 * The generic layer below (io.c) checks, aligns and accounts the request
 * again for the child; nothing here keeps state.
 */
#include "block/block_int.h"

int64_t bdrv_filter_getlength(BlockDriverState *bs)
{
    return bdrv_getlength(bs->file->bs);
}

int coroutine_fn bdrv_filter_co_preadv(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    return bdrv_co_preadv(bs->file, offset, bytes, qiov, flags);
}

int coroutine_fn bdrv_filter_co_pwritev(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    return bdrv_co_pwritev(bs->file, offset, bytes, qiov, flags);
}

int coroutine_fn bdrv_filter_co_pwrite_zeroes(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              BdrvRequestFlags flags)
{
    return bdrv_co_pwrite_zeroes(bs->file, offset, bytes, flags);
}

int coroutine_fn bdrv_filter_co_pdiscard(BlockDriverState *bs,
                                         int64_t offset, int64_t bytes)
{
    return bdrv_co_pdiscard(bs->file, offset, bytes);
}

int coroutine_fn bdrv_filter_co_pwritev_compressed(BlockDriverState *bs,
                                                   int64_t offset,
                                                   int64_t bytes,
                                                   QEMUIOVector *qiov)
{
    return bdrv_co_pwritev(bs->file, offset, bytes, qiov,
                           BDRV_REQ_WRITE_COMPRESSED);
}

int coroutine_fn bdrv_filter_co_truncate(BlockDriverState *bs,
                                         int64_t offset, bool exact,
                                         PreallocMode prealloc,
                                         BdrvRequestFlags flags,
                                         Error **errp)
{
    return bdrv_co_truncate(bs->file, offset, exact, prealloc, flags, errp);
}

int coroutine_fn bdrv_co_read_backing(BlockDriverState *bs, uint64_t offset,
                                      uint64_t bytes, QEMUIOVector *qiov,
                                      size_t qiov_offset)
{
    int64_t backing_len = bdrv_getlength(bs->backing->bs);
    uint64_t n;
    int ret = 0;

    if (backing_len < 0) {
        return backing_len;
    }
    n = offset < (uint64_t)backing_len ?
        MIN(bytes, (uint64_t)backing_len - offset) : 0;
    if (n) {
        BLKDBG_EVENT(bs->file, BLKDBG_READ_BACKING_AIO);
        ret = bdrv_co_preadv_part(bs->backing, offset, n, qiov, qiov_offset,
                                  0);
    }
    if (ret == 0 && n < bytes) {
        qemu_iovec_memset(qiov, qiov_offset + n, 0, bytes - n);
    }
    return ret;
}
