/*
 * ssh, in a build without libssh: a driver that only says so.
 *
 * block/meson.build compiles this file instead of ssh*.c when libssh is
 * not found, so that ssh:// file names and driver=ssh get an error naming
 * what is missing rather than "Unknown driver"
 * (block/driver-missing.c has the callbacks and the message).
 */
#include "block/block_int.h"
#include "qapi/qapi-opts.h"

static const BlockDriver bdrv_ssh_missing = {
    .format_name            = "ssh",
    .protocol_name          = "ssh",
    .runtime_opts           = &qapi_opts_ssh_runtime,
    .create_opts            = &qapi_opts_ssh_create,
    .bdrv_parse_filename    = bdrv_missing_parse_filename,
    .bdrv_open              = bdrv_missing_open,
    .bdrv_co_create_opts    = bdrv_missing_co_create_opts,
    .bdrv_getlength         = bdrv_missing_getlength,
};

block_init(bdrv_register, bdrv_ssh_missing)
