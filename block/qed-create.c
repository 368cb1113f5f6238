/*
 * qed creation, as qemu-img create -f qed writes it: the header cluster
 * (the 64-byte header, the backing file's name right after it), then the
 * L1 table of table_size zeroed clusters; nothing else.  A name longer
 * than the header cluster runs into the L1 table, which overwrites it,
 * and the image does not open: as QEMU.  As in QEMU the
 * file is made (and emptied) before the options are checked, so a refused
 * option leaves it empty.
 */
#include "block/qed.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"
#include "qblock/block-node.h"

typedef struct QedCreate {
    uint64_t size;
    uint64_t cluster_size;
    uint64_t table_size;
    const char *backing_file;
    const char *backing_fmt;
} QedCreate;

/* QEMU's checks, in its order and words. */
static int qed_create_check(const QedCreate *c, Error **errp)
{
    if (c->cluster_size > UINT32_MAX ||
        !qed_is_cluster_size_valid(c->cluster_size)) {
        error_setg(errp, "QED cluster size must be within range [%u, %u] "
                   "and power of 2", QED_MIN_CLUSTER_SIZE,
                   QED_MAX_CLUSTER_SIZE);
        return -EINVAL;
    }
    if (c->table_size > UINT32_MAX ||
        !qed_is_table_size_valid(c->table_size)) {
        error_setg(errp, "QED table size must be within range [%u, %u] "
                   "and power of 2", QED_MIN_TABLE_SIZE, QED_MAX_TABLE_SIZE);
        return -EINVAL;
    }
    if (!qed_is_image_size_valid(c->size, c->cluster_size, c->table_size)) {
        error_setg(errp, "QED image size must be a non-zero multiple of "
                   "cluster size and less than %" PRIu64 " bytes",
                   qed_max_image_size(c->cluster_size, c->table_size));
        return -EINVAL;
    }
    return 0;
}

static int qed_create_write(BlockBackend *blk, const QedCreate *c,
                            Error **errp)
{
    size_t name_len = c->backing_file ? strlen(c->backing_file) : 0;
    uint64_t l1_bytes = c->cluster_size * c->table_size;
    g_autofree void *l1 = NULL;
    QedHeader h = {
        .magic = QED_MAGIC,
        .cluster_size = c->cluster_size,
        .table_size = c->table_size,
        .header_size = 1,
        .l1_table_offset = c->cluster_size,
        .image_size = c->size,
    };
    QedHeader le;
    int ret;

    /* the node may have held something: the file starts empty */
    ret = blk_truncate(blk, 0, true, PREALLOC_MODE_OFF, 0, errp);
    if (ret < 0) {
        return ret;
    }
    ret = qed_create_check(c, errp);
    if (ret < 0) {
        return ret;
    }
    if (c->backing_file) {
        h.features |= QED_F_BACKING_FILE;
        h.backing_filename_offset = sizeof(h);
        h.backing_filename_size = name_len;
        if (c->backing_fmt && !strcmp(c->backing_fmt, "raw")) {
            h.features |= QED_F_BACKING_FORMAT_NO_PROBE;
        }
    }
    qed_header_to_le(&h, &le);
    ret = blk_pwrite(blk, 0, sizeof(le), &le, 0);
    if (ret == 0 && name_len) {
        ret = blk_pwrite(blk, sizeof(le), name_len, c->backing_file, 0);
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the QED header");
        return ret;
    }
    /* at most 1 GiB (64 MiB clusters, 16 of them), as QEMU allocates */
    l1 = g_try_malloc0(l1_bytes);
    if (!l1) {
        error_setg(errp, "Could not allocate the QED L1 table");
        return -ENOMEM;
    }
    ret = blk_pwrite(blk, c->cluster_size, l1_bytes, l1, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the QED L1 table");
    }
    return ret;
}

static void qed_create_from_opts(QedCreate *c, QemuOpts *opts)
{
    c->cluster_size = qemu_opt_get_size(opts, "cluster_size",
                                        QED_DEFAULT_CLUSTER_SIZE);
    c->table_size = qemu_opt_get_size(opts, "table_size",
                                      QED_DEFAULT_TABLE_SIZE);
    c->backing_file = qemu_opt_get(opts, "backing_file");
    c->backing_fmt = qemu_opt_get(opts, "backing_fmt");
}

int coroutine_fn qed_co_create_opts(const BlockDriver *drv,
                                    const char *filename, QemuOpts *opts,
                                    Error **errp)
{
    QedCreate c;
    BlockBackend *blk;
    int ret;

    qed_create_from_opts(&c, opts);
    /* QEMU rounds the size up to a sector silently */
    c.size = ROUND_UP(qemu_opt_get_size(opts, "size", 0), QED_SECTOR);
    blk = bdrv_create_format_file(drv, filename, opts, errp);
    if (!blk) {
        return -EIO;
    }
    ret = qed_create_write(blk, &c, errp);
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}

/* blockdev-create: QEMU's BlockdevCreateOptionsQed; the size is taken
 * as given (a size that is no whole sector is refused). */
int coroutine_fn qed_co_create_on_node(const BlockDriver *drv,
                                       const BdrvCreateTarget *tgt,
                                       QemuOpts *opts, Error **errp)
{
    QedCreate c;
    BlockBackend *blk;
    int ret;

    qed_create_from_opts(&c, opts);
    c.size = qemu_opt_get_size(opts, "size", 0);
    blk = bdrv_create_format_on_node(tgt->file, errp);
    if (!blk) {
        return -EIO;
    }
    ret = qed_create_write(blk, &c, errp);
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}
