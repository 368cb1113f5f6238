/*
 * rbd, in a build without librbd: a driver that only says so.
 *
 * block/meson.build compiles this file instead of rbd*.c when librbd or
 * librados is not found, so that rbd: file names and driver=rbd get an
 * error naming what is missing rather than "Unknown driver"
 * (block/driver-missing.c has the callbacks and the message).
 */
#include "block/block_int.h"
#include "qapi/qapi-opts.h"

static const BlockDriver bdrv_rbd_missing = {
    .format_name            = "rbd",
    .protocol_name          = "rbd",
    .runtime_opts           = &qapi_opts_rbd_runtime,
    .create_opts            = &qapi_opts_rbd_create,
    .bdrv_parse_filename    = bdrv_missing_parse_filename,
    .bdrv_open              = bdrv_missing_open,
    .bdrv_co_create_opts    = bdrv_missing_co_create_opts,
    .bdrv_getlength         = bdrv_missing_getlength,
};

block_init(bdrv_register, bdrv_rbd_missing)
