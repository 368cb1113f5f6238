/*
 * The public view of a driver and the image-level operations qemu-img
 * needs (include/qblock/block-driver.h): users ask here instead of
 * reading the driver table or calling its callbacks.
 */
#include "qblock/block-driver.h"

#include "block/block_int.h"

const char *bdrv_driver_name(const BlockDriver *drv)
{
    return drv->format_name;
}

const QemuOptsList *bdrv_driver_create_opts(const BlockDriver *drv)
{
    return drv->create_opts;
}

const QemuOptsList *bdrv_driver_runtime_opts(const BlockDriver *drv)
{
    return drv->runtime_opts;
}

const QemuOptsList *bdrv_driver_amend_opts(const BlockDriver *drv)
{
    return drv->amend_opts;
}

bool bdrv_driver_can_amend(const BlockDriver *drv)
{
    return drv->bdrv_amend_options != NULL;
}

bool bdrv_driver_can_compress(const BlockDriver *drv)
{
    return drv->bdrv_co_pwritev_compressed != NULL;
}

bool bdrv_driver_supports_backing(const BlockDriver *drv)
{
    return drv->supports_backing;
}

bool bdrv_driver_is_protocol(const BlockDriver *drv)
{
    return drv->protocol_name != NULL;
}

int bdrv_measure(const BlockDriver *drv, QemuOpts *opts, BlockDriverState *in_bs,
                 BlockMeasureInfo *info, Error **errp)
{
    if (!drv->bdrv_measure) {
        error_setg(errp, "Block driver '%s' does not support size "
                   "measurement", drv->format_name);
        return -ENOTSUP;
    }
    return drv->bdrv_measure(opts, in_bs, info, errp);
}

int64_t bdrv_measure_virtual_size(QemuOpts *opts, BlockDriverState *in_bs,
                                  Error **errp)
{
    int64_t size;

    if (!in_bs) {
        return qemu_opt_get_size(opts, "size", 0);
    }
    size = bdrv_getlength(in_bs);
    if (size < 0) {
        error_setg_errno(errp, -size, "Unable to get image virtual_size");
    }
    return size;
}

int bdrv_amend(BlockDriverState *bs, QemuOpts *opts,
               BlockAmendStatusCB *status_cb, void *cb_opaque, bool force,
               Error **errp)
{
    if (!bdrv_driver_can_amend(bs->drv)) {
        error_setg(errp, "Format driver '%s' does not support option "
                   "amendment", bs->drv->format_name);
        return -ENOTSUP;
    }
    return bs->drv->bdrv_amend_options(bs, opts, status_cb, cb_opaque, force,
                                       errp);
}
