/*
 * rbd: the image's snapshots as internal snapshots (qemu-img snapshot,
 * the snapshot list of qemu-img info).
 *
 * RBD snapshots are named: a snapshot's ID and tag are both its name, as
 * in QEMU.  They hold no VM state: the "VM size" column shows the image's
 * size when the snapshot was taken, and the date and VM clock are zero,
 * as QEMU shows them.  block/snapshot.c calls these outside coroutine
 * context with the node drained; the librbd calls block until the
 * cluster answers (librados's timeouts bound them).
 */
#include "block/rbd.h"
#include "util/cutils.h"

int qrbd_snapshot_create(BlockDriverState *bs, QEMUSnapshotInfo *sn_info)
{
    BDRVRBDState *s = bs->opaque;
    int ret;

    if (sn_info->id_str[0] && strcmp(sn_info->id_str, sn_info->name)) {
        error_report("rbd snapshots have no IDs of their own: ID '%s' is "
                     "not the name '%s'", sn_info->id_str, sn_info->name);
        return -EINVAL;
    }
    ret = qrbd_lib.rbd_snap_create(s->image, sn_info->name);
    if (ret < 0) {
        /* QEMU's words, before the caller's own line */
        error_report("failed to create snap: %s", strerror(-ret));
    }
    return ret;
}

int qrbd_snapshot_goto(BlockDriverState *bs, const char *snapshot_id)
{
    BDRVRBDState *s = bs->opaque;
    int ret = qrbd_lib.rbd_snap_rollback(s->image, snapshot_id);

    /* the snapshot's holes are the image's now (alloc cache inv. 3) */
    qrbd_alloc_cache_forget_all(&s->alloc);
    return ret;
}

int qrbd_snapshot_delete(BlockDriverState *bs, const char *snapshot_id,
                         const char *name, Error **errp)
{
    BDRVRBDState *s = bs->opaque;
    int ret;

    if (snapshot_id && name && strcmp(snapshot_id, name)) {
        error_setg(errp, "rbd snapshot ID '%s' and name '%s' must be the "
                   "same", snapshot_id, name);
        return -EINVAL;
    }
    ret = qrbd_lib.rbd_snap_remove(s->image, name ?: snapshot_id);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to remove the snapshot");
    }
    return ret;
}

int qrbd_snapshot_list(BlockDriverState *bs, QEMUSnapshotInfo **psn_info)
{
    BDRVRBDState *s = bs->opaque;
    g_autofree rbd_snap_info_t *snaps = NULL;
    int max = 16, n;

    /* librbd says how many there are when the array is too short */
    do {
        snaps = g_renew(rbd_snap_info_t, snaps, max);
        n = qrbd_lib.rbd_snap_list(s->image, snaps, &max);
    } while (n == -ERANGE);
    if (n < 0) {
        return n;
    }
    *psn_info = n ? g_new0(QEMUSnapshotInfo, n) : NULL;
    for (int i = 0; i < n; i++) {
        QEMUSnapshotInfo *sn = &(*psn_info)[i];

        pstrcpy(sn->id_str, sizeof(sn->id_str), snaps[i].name);
        pstrcpy(sn->name, sizeof(sn->name), snaps[i].name);
        sn->vm_state_size = snaps[i].size;
    }
    qrbd_lib.rbd_snap_list_end(snaps);
    return n;
}
