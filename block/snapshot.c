/*
 * Internal snapshots: the generic part (see include/block/snapshot.h).
 *
 * The operations go to the first node from @bs down through filters whose
 * driver implements snapshots; requests on it are drained for the time of
 * the operation, so that the driver sees no allocation in flight while it
 * switches or copies L1 tables.
 */
#include "block/block_int.h"
#include "qblock/block-backend.h"

/*
 * The node that stores internal snapshots for @bs, or NULL: @bs itself if
 * its driver has snapshots, else, as in QEMU, its file child when that is
 * where all of its data lives (a filter, or raw over an rbd image), so
 * that qemu-img snapshot reaches the snapshots of the protocol.
 */
static BlockDriverState *bdrv_snapshot_node(BlockDriverState *bs)
{
    while (bs && bs->drv) {
        if (bs->drv->bdrv_snapshot_list) {
            return bs;
        }
        if (!bs->file || bs->backing || g_list_length(bs->children) != 1) {
            return NULL;
        }
        bs = bs->file->bs;
    }
    return NULL;
}

/* The name of the BlockBackend above @bs ("" if none), for messages. */
static const char *bdrv_snapshot_device_name(BlockDriverState *bs)
{
    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->parent_blk) {
            return blk_name(c->parent_blk);
        }
    }
    return "";
}

bool bdrv_can_snapshot(BlockDriverState *bs)
{
    BlockDriverState *node = bdrv_snapshot_node(bs);

    return node && node->drv->bdrv_snapshot_create &&
           bdrv_is_writable(node);
}

int bdrv_snapshot_list(BlockDriverState *bs, QEMUSnapshotInfo **psn_info)
{
    BlockDriverState *node = bdrv_snapshot_node(bs);

    *psn_info = NULL;
    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    if (!node) {
        return 0;
    }
    return node->drv->bdrv_snapshot_list(node, psn_info);
}

int bdrv_snapshot_find(BlockDriverState *bs, QEMUSnapshotInfo *sn_info,
                       const char *name)
{
    QEMUSnapshotInfo *sn_tab;
    int nb = bdrv_snapshot_list(bs, &sn_tab);
    int ret = -ENOENT;

    if (nb < 0) {
        return nb;
    }
    for (int i = 0; i < nb; i++) {
        if (!strcmp(sn_tab[i].name, name)) {
            *sn_info = sn_tab[i];
            ret = 0;
            break;
        }
    }
    g_free(sn_tab);
    return ret;
}

int bdrv_snapshot_create(BlockDriverState *bs, QEMUSnapshotInfo *sn_info)
{
    BlockDriverState *node = bdrv_snapshot_node(bs);
    int ret;

    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    if (!node || !node->drv->bdrv_snapshot_create) {
        return -ENOTSUP;
    }
    if (!bdrv_is_writable(node)) {
        return -EACCES;
    }
    bdrv_drained_begin(node);
    ret = node->drv->bdrv_snapshot_create(node, sn_info);
    bdrv_drained_end(node);
    return ret;
}

int bdrv_snapshot_goto(BlockDriverState *bs, const char *snapshot_id_or_name,
                       Error **errp)
{
    BlockDriverState *node = bdrv_snapshot_node(bs);
    int ret;

    if (!bs->drv) {
        error_setg(errp, "Block driver is closed");
        return -ENOMEDIUM;
    }
    if (!node || !node->drv->bdrv_snapshot_goto) {
        error_setg(errp, "Block driver does not support snapshots");
        return -ENOTSUP;
    }
    if (!bdrv_is_writable(node)) {
        error_setg(errp, "Failed to load snapshot: the image is read-only");
        return -EACCES;
    }
    bdrv_drained_begin(node);
    ret = node->drv->bdrv_snapshot_goto(node, snapshot_id_or_name);
    bdrv_drained_end(node);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to load snapshot");
    }
    return ret;
}

/* -ENOTSUP, with QEMU's message naming the format, the device and @what. */
static int bdrv_snapshot_unsupported(BlockDriverState *bs, const char *what,
                                     Error **errp)
{
    error_setg(errp, "Block format '%s' used by device '%s' does not "
               "support %s", bdrv_get_format_name(bs),
               bdrv_snapshot_device_name(bs), what);
    return -ENOTSUP;
}

/*
 * What deleting and temporarily loading a snapshot both need first: a
 * medium, and a snapshot named by its ID, its name or both.
 */
static int bdrv_snapshot_check_id(BlockDriverState *bs,
                                  const char *snapshot_id, const char *name,
                                  Error **errp)
{
    if (!bs->drv) {
        error_setg(errp, "Device has no medium");
        return -ENOMEDIUM;
    }
    if (!snapshot_id && !name) {
        error_setg(errp, "snapshot_id and name are both NULL");
        return -EINVAL;
    }
    return 0;
}

int bdrv_snapshot_delete(BlockDriverState *bs, const char *snapshot_id,
                         const char *name, Error **errp)
{
    BlockDriverState *node = bdrv_snapshot_node(bs);
    int ret = bdrv_snapshot_check_id(bs, snapshot_id, name, errp);

    if (ret < 0) {
        return ret;
    }
    if (!node || !node->drv->bdrv_snapshot_delete) {
        return bdrv_snapshot_unsupported(bs, "internal snapshot deletion",
                                         errp);
    }
    if (!bdrv_is_writable(node)) {
        error_setg(errp, "The image is read-only");
        return -EACCES;
    }
    bdrv_drained_begin(node);
    ret = node->drv->bdrv_snapshot_delete(node, snapshot_id, name, errp);
    bdrv_drained_end(node);
    return ret;
}

int bdrv_snapshot_load_tmp(BlockDriverState *bs, const char *snapshot_id,
                           const char *name, Error **errp)
{
    BlockDriverState *node = bdrv_snapshot_node(bs);
    int ret = bdrv_snapshot_check_id(bs, snapshot_id, name, errp);

    if (ret < 0) {
        return ret;
    }
    if (!bdrv_is_read_only(bs)) {
        error_setg(errp, "Device is not readonly");
        return -EINVAL;
    }
    if (!node || !node->drv->bdrv_snapshot_load_tmp) {
        return bdrv_snapshot_unsupported(bs, "temporarily loading internal "
                                         "snapshots", errp);
    }
    return node->drv->bdrv_snapshot_load_tmp(node, snapshot_id, name, errp);
}

int bdrv_snapshot_load_tmp_by_id_or_name(BlockDriverState *bs,
                                         const char *id_or_name,
                                         Error **errp)
{
    Error *local_err = NULL;
    int ret;

    ret = bdrv_snapshot_load_tmp(bs, id_or_name, NULL, &local_err);
    if (ret == -ENOENT || ret == -EINVAL) {
        error_free(local_err);
        local_err = NULL;
        ret = bdrv_snapshot_load_tmp(bs, NULL, id_or_name, &local_err);
    }
    if (local_err) {
        error_propagate(errp, local_err);
    }
    return ret;
}
