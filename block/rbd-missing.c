/*
 * rbd, in a build without librbd: a driver that only says so.
 *
 * block/meson.build compiles this file instead of rbd*.c when librbd or
 * librados is not found, so that rbd: file names and driver=rbd get an
 * error naming what is missing rather than "Unknown driver".
 */
#include "block/block_int.h"
#include "qapi/qapi-opts.h"

static void rbd_missing_error(Error **errp)
{
    error_setg(errp, "rbd support is not built in: librbd and librados "
               "were not found when qblock was configured (install "
               "librbd-dev and librados-dev, then reconfigure)");
}

static void rbd_missing_parse_filename(const char *filename, QDict *options,
                                       Error **errp)
{
    rbd_missing_error(errp);
}

static int rbd_missing_open(BlockDriverState *bs, QDict *options, int flags,
                            Error **errp)
{
    rbd_missing_error(errp);
    return -ENOTSUP;
}

static int coroutine_fn rbd_missing_create(const BlockDriver *drv,
                                           const char *filename,
                                           QemuOpts *opts, Error **errp)
{
    rbd_missing_error(errp);
    return -ENOTSUP;
}

static int64_t rbd_missing_getlength(BlockDriverState *bs)
{
    return -ENOMEDIUM;
}

static const BlockDriver bdrv_rbd_missing = {
    .format_name            = "rbd",
    .protocol_name          = "rbd",
    .runtime_opts           = &qapi_opts_rbd_runtime,
    .create_opts            = &qapi_opts_rbd_create,
    .bdrv_parse_filename    = rbd_missing_parse_filename,
    .bdrv_open              = rbd_missing_open,
    .bdrv_co_create_opts    = rbd_missing_create,
    .bdrv_getlength         = rbd_missing_getlength,
};

block_init(bdrv_register, bdrv_rbd_missing)
