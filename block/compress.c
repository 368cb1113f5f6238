/*
 * compress: a filter that turns every write into a compressed write of
 * its child (QEMU's "compress" driver), so that a job or an export that
 * knows nothing of compression fills a qcow2 image with compressed
 * clusters.
 *
 * Invariants:
 *  1. The child's format writes compressed clusters
 *     (bdrv_co_pwritev_compressed); any other child is refused at open
 *     with QEMU's "Compression is not supported for underlying format".
 *  2. The node's request alignment is the child's cluster size (when it
 *     has one): a format compresses whole clusters only, so the generic
 *     layer widens an unaligned write to whole clusters by reading the
 *     rest first, and the child sees only aligned compressed writes.
 *  3. Reads, zero writes and discards pass through unchanged: a zeroed or
 *     discarded cluster is no data to compress.
 *
 * Nothing here changes after open: no state, no lock.
 */

#include "block/block_int.h"
#include "qapi/qapi-opts.h"

static int compress_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    BlockDriverState *image;

    bs->file = bdrv_open_child(NULL, options, "file", bs, 0,
                               errp);
    if (!bs->file) {
        return -EINVAL;
    }
    image = bs->file->bs;
    /* invariant 1 */
    if (!image->drv || !image->drv->bdrv_co_pwritev_compressed) {
        error_setg(errp, "Compression is not supported for underlying "
                   "format: %s",
                   image->drv ? image->drv->format_name : "(no format)");
        bdrv_unref_child(bs, bs->file);
        bs->file = NULL;
        return -ENOTSUP;
    }
    bdrv_inherit_file_flags(bs);
    return 0;
}

static int compress_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    return 0;
}

/* Invariant 2. */
static void compress_refresh_limits(BlockDriverState *bs, Error **errp)
{
    BlockDriverInfo bdi;

    if (bdrv_get_info(bs->file->bs, &bdi) == 0 && bdi.cluster_size > 0) {
        bs->bl.request_alignment = bdi.cluster_size;
    }
}

/*
 * Invariant 2 leaves no way to write a partial last cluster without
 * growing the image, so a writer must be allowed to resize (QEMU's check
 * and message).
 */
static int compress_check_perm(BlockDriverState *bs, uint64_t perm,
                               uint64_t shared, Error **errp)
{
    int64_t size;

    if (!(perm & (BLK_PERM_WRITE | BLK_PERM_WRITE_UNCHANGED)) ||
        (perm & BLK_PERM_RESIZE)) {
        return 0;
    }
    size = bdrv_getlength(bs);
    if (size < 0) {
        error_setg_errno(errp, -size, "Failed to get the size of node '%s'",
                         bdrv_get_node_name(bs));
        return size;
    }
    if (!QEMU_IS_ALIGNED(size, bs->bl.request_alignment)) {
        error_setg(errp, "Cannot get 'write' permission without 'resize': "
                   "Image size is not a multiple of request alignment");
        return -EPERM;
    }
    return 0;
}

static int coroutine_fn compress_co_pwritev(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov,
                                            BdrvRequestFlags flags)
{
    assert(QEMU_IS_ALIGNED(offset, bs->bl.request_alignment)); /* inv. 2 */
    return bdrv_co_pwritev(bs->file, offset, bytes, qiov,
                           flags | BDRV_REQ_WRITE_COMPRESSED);
}

static const BlockDriver bdrv_compress = {
    .format_name                    = "compress",
    .instance_size                  = 0,
    /* opened as QEMU opens filters: a filename names the file child */
    .is_format                      = true,
    .is_filter                      = true,
    .runtime_opts                   = &qapi_opts_compress_runtime,
    .bdrv_open                      = compress_open,
    .bdrv_reopen_prepare            = compress_reopen_prepare,
    .bdrv_refresh_limits            = compress_refresh_limits,
    .bdrv_check_perm                = compress_check_perm,
    .bdrv_getlength                 = bdrv_filter_getlength,
    /* invariant 3: reads, zero writes and discards pass through */
    .bdrv_co_preadv                 = bdrv_filter_co_preadv,
    .bdrv_co_pwritev                = compress_co_pwritev,
    .bdrv_co_pwrite_zeroes          = bdrv_filter_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = bdrv_filter_co_pdiscard,
    .bdrv_co_truncate               = bdrv_filter_co_truncate,
};

block_init(bdrv_register, bdrv_compress)
