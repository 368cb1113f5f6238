/*
 * ssh, in a build without libssh: a driver that only says so.
 *
 * block/meson.build compiles this file instead of ssh*.c when libssh is
 * not found, so that ssh:// file names and driver=ssh get an error naming
 * what is missing rather than "Unknown driver".
 */
#include "block/block_int.h"
#include "qapi/qapi-opts.h"

static void ssh_missing_error(Error **errp)
{
    error_setg(errp, "ssh support is not built in: libssh was not found "
               "when qblock was configured (install libssh-dev, then "
               "reconfigure)");
}

static void ssh_missing_parse_filename(const char *filename, QDict *options,
                                       Error **errp)
{
    ssh_missing_error(errp);
}

static int ssh_missing_open(BlockDriverState *bs, QDict *options, int flags,
                            Error **errp)
{
    ssh_missing_error(errp);
    return -ENOTSUP;
}

static int coroutine_fn ssh_missing_create(const BlockDriver *drv,
                                           const char *filename,
                                           QemuOpts *opts, Error **errp)
{
    ssh_missing_error(errp);
    return -ENOTSUP;
}

static int64_t ssh_missing_getlength(BlockDriverState *bs)
{
    return -ENOMEDIUM;
}

static const BlockDriver bdrv_ssh_missing = {
    .format_name            = "ssh",
    .protocol_name          = "ssh",
    .runtime_opts           = &qapi_opts_ssh_runtime,
    .create_opts            = &qapi_opts_ssh_create,
    .bdrv_parse_filename    = ssh_missing_parse_filename,
    .bdrv_open              = ssh_missing_open,
    .bdrv_co_create_opts    = ssh_missing_create,
    .bdrv_getlength         = ssh_missing_getlength,
};

block_init(bdrv_register, bdrv_ssh_missing)
