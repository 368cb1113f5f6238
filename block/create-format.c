/*
 * What every format's creation does first: creating the protocol-level
 * file that will hold the image (qemu-img create -f qcow2 img.qcow2
 * creates img.qcow2 with the file driver) and opening it for the format
 * to write its metadata; or, for blockdev-create, taking a node that is
 * already open.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

/*
 * The options in @opts that the protocol for @filename has and the format
 * @fmt does not (nocow, extent_size_hint): the format keeps its own, such
 * as size and preallocation, which mean something else for the image.
 */
static QemuOpts *bdrv_protocol_create_opts(const BlockDriver *fmt,
                                           const char *filename,
                                           QemuOpts *opts, Error **errp)
{
    const BlockDriver *proto = bdrv_find_protocol(filename, true, errp);
    QemuOpts *file_opts;

    if (!proto) {
        return NULL;
    }
    file_opts = qemu_opts_create(proto->create_opts);
    for (const QemuOptDesc *d = proto->create_opts->desc; d->name; d++) {
        if (!qemu_opts_find_desc(fmt->create_opts, d->name) &&
            qemu_opt_has(opts, d->name) &&
            !qemu_opt_set(file_opts, d->name, qemu_opt_get(opts, d->name),
                          errp)) {
            qemu_opts_del(file_opts);
            return NULL;
        }
    }
    return file_opts;
}

BlockBackend *bdrv_create_format_file(const BlockDriver *fmt,
                                      const char *filename, QemuOpts *opts,
                                      Error **errp)
{
    QemuOpts *file_opts = bdrv_protocol_create_opts(fmt, filename, opts,
                                                    errp);
    BlockBackend *blk;
    int ret;

    if (!file_opts) {
        return NULL;
    }
    ret = bdrv_create_file(filename, file_opts, errp);
    qemu_opts_del(file_opts);
    if (ret < 0) {
        return NULL;
    }
    blk = blk_new_open(filename, NULL, NULL,
                       BDRV_O_RDWR | BDRV_O_RESIZE | BDRV_O_PROTOCOL, errp);
    if (blk) {
        /* the format writes its metadata beyond the empty file's end */
        blk_set_allow_write_beyond_eof(blk, true);
    }
    return blk;
}

BlockBackend *bdrv_create_format_on_node(BlockDriverState *bs, Error **errp)
{
    BlockBackend *blk = blk_new_with_bs(bs, BLK_PERM_CONSISTENT_READ |
                                        BLK_PERM_WRITE | BLK_PERM_RESIZE,
                                        BLK_PERM_ALL, errp);

    if (blk) {
        blk_set_allow_write_beyond_eof(blk, true);
    }
    return blk;
}

void bdrv_delete_format_file(BlockBackend *blk)
{
    BlockDriverState *bs = blk_bs(blk);
    Error *local_err = NULL;

    if (!bs || !bs->drv->bdrv_delete_file) {
        return;
    }
    if (bs->drv->bdrv_delete_file(bs, &local_err) == -ENOTSUP) {
        error_free(local_err);
    } else if (local_err) {
        error_report_err(local_err);
    }
}

int bdrv_create_opt_fixed(QemuOpts *opts, Error **errp)
{
    const char *sub = qemu_opt_get(opts, "subformat");

    if (!sub || !strcmp(sub, "dynamic")) {
        return 0;
    }
    if (!strcmp(sub, "fixed")) {
        return 1;
    }
    error_setg(errp, "Parameter 'subformat' does not accept value '%s'",
               sub);
    return -EINVAL;
}
