/*
 * Creation on a protocol that cannot create anything (a block device, an
 * NBD export): as in QEMU, "creating" opens what is there, makes sure it
 * holds the size asked for (resizing it where the driver can) and zeroes
 * its first sector, so that an old image header found there is not taken
 * for the new image's.  qemu-img create and convert to such a target then
 * work as they do on a file.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

int coroutine_fn bdrv_co_create_opts_simple(const BlockDriver *drv,
                                            const char *filename,
                                            QemuOpts *opts, Error **errp)
{
    int64_t size = ROUND_UP(qemu_opt_get_size(opts, "size", 0),
                            BDRV_SECTOR_SIZE);
    int prealloc = qemu_opt_get_enum(opts, "preallocation");
    QDict *options;
    Error *local_err = NULL;
    BlockBackend *blk;
    int64_t len;
    int ret;

    /* -1: the option list has no preallocation, which means off */
    if (prealloc > PREALLOC_MODE_OFF) {
        error_setg(errp, "Unsupported preallocation mode '%s'",
                   PreallocMode_str[prealloc]);
        return -ENOTSUP;
    }
    options = qdict_new();
    qdict_put_str(options, "driver", drv->format_name);
    blk = blk_new_open(filename, NULL, options,
                       BDRV_O_RDWR | BDRV_O_RESIZE | BDRV_O_PROTOCOL,
                       &local_err);
    if (!blk) {
        error_propagate_prepend(errp, local_err, "Protocol driver '%s' does "
                                "not support image creation, and opening "
                                "the image failed: ", drv->format_name);
        return -EINVAL;
    }
    ret = blk_truncate(blk, size, false, PREALLOC_MODE_OFF, 0, errp);
    if (ret < 0) {
        goto out;
    }
    len = blk_getlength(blk);
    if (len < 0) {
        ret = len;
        error_setg_errno(errp, -ret, "Failed to inquire the new image "
                         "file's length");
        goto out;
    }
    if (MIN(len, BDRV_SECTOR_SIZE) > 0) {
        ret = blk_pwrite_zeroes(blk, 0, MIN(len, BDRV_SECTOR_SIZE),
                                BDRV_REQ_MAY_UNMAP);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to clear the new image's "
                             "first sector");
        }
    }
out:
    blk_unref(blk);
    return ret;
}
