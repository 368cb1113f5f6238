/*
 * Operations on live nodes (blockdev-ops.h): QEMU's commands, arguments
 * and error messages.
 *
 * Each command runs to its end in the main loop (polling it while the
 * image is written); the monitor starts no other request meanwhile, so
 * the graph does not change under a command except by what it does
 * itself.  A command that changes what a node's users see drains the
 * node first, so that no request of an export is in flight across the
 * change.
 */
#include "blockdev-ops.h"

#include "block/snapshot.h"
#include "qblock/block-backend.h"
#include "qblock/block-driver.h"
#include "qblock/block-node.h"
#include "qapi-qmp.h"
#include "qmp-dispatch.h"
#include "transaction.h"
#include "util/iothread.h"

BlockDriverState *blockdev_lookup_bs(const char *device,
                                     const char *node_name, Error **errp)
{
    if (device) {
        for (BlockBackend *blk = blk_next(NULL); blk; blk = blk_next(blk)) {
            if (!blk_name(blk)[0] || strcmp(blk_name(blk), device)) {
                continue;
            }
            if (!blk_bs(blk)) {
                error_setg(errp, "Device '%s' has no medium", device);
            }
            return blk_bs(blk);
        }
    }
    if (node_name) {
        BlockDriverState *bs = bdrv_find_node(node_name);

        if (bs) {
            return bs;
        }
    }
    error_setg(errp, "Cannot find device='%s' nor node-name='%s'",
               device ? device : "", node_name ? node_name : "");
    return NULL;
}

/* ---- block_resize ---- */

static void qmp_block_resize(JsonObject *args, JsonNode **ret, Error **errp)
{
    int64_t size = json_object_get_int_member(args, "size");
    BlockDriverState *bs;
    BlockBackend *blk;

    bs = blockdev_lookup_bs(qmp_arg_str(args, "device"),
                            qmp_arg_str(args, "node-name"), errp);
    if (!bs) {
        return;
    }
    if (size < 0) {
        error_setg(errp, "Parameter 'size' expects a >0 size");
        return;
    }
    /* QEMU names the device argument here, "(null)" when it is absent */
    if (bdrv_op_is_blocked(bs, BLOCK_OP_TYPE_RESIZE, NULL)) {
        error_setg(errp, "Device '%s' is in use",
                   qmp_arg_str(args, "device") ?
                   qmp_arg_str(args, "device") : "(null)");
        return;
    }
    /* the node's other users must share RESIZE (exports do) */
    blk = blk_new_with_bs(bs, BLK_PERM_RESIZE, BLK_PERM_ALL, errp);
    if (!blk) {
        return;
    }
    /*
     * No export request is in flight while the length changes: a read
     * racing a shrink would read past the new end.  The truncate itself
     * passes the barrier it is behind.
     */
    blk_set_disable_request_queuing(blk, true);
    bdrv_drained_begin(bs);
    blk_truncate(blk, size, false, PREALLOC_MODE_OFF, 0, errp);
    bdrv_drained_end(bs);
    blk_unref(blk);
}

/* ---- external snapshots: blockdev-snapshot-sync, blockdev-snapshot ---- */

typedef struct ExternalSnapshotState {
    BlockDriverState *old_bs;   /* drained till the transaction ends */
    BlockDriverState *new_bs;   /* a reference, from prepare to clean */
    bool overlay_appended;
} ExternalSnapshotState;

int blockdev_create_image(const char *filename, const char *format,
                          int64_t size, BlockDriverState *backing,
                          Error **errp)
{
    const BlockDriver *drv = bdrv_find_format(format);
    const QemuOptsList *list;
    QemuOpts *opts;
    int ret;

    if (!drv) {
        error_setg(errp, "Unknown file format '%s'", format);
        return -ENOENT;
    }
    list = bdrv_driver_create_opts(drv);
    if (!list) {
        error_setg(errp, "Format driver '%s' does not support image "
                   "creation", format);
        return -ENOTSUP;
    }
    if (backing && !qemu_opts_find_desc(list, "backing_file")) {
        error_setg(errp, "Backing file not supported for file format '%s'",
                   format);
        return -ENOTSUP;
    }
    opts = qemu_opts_create(list);
    qemu_opt_set_number(opts, "size", size, &error_abort);
    if (backing) {
        bdrv_refresh_filename(backing);
        qemu_opt_set(opts, "backing_file", bdrv_get_filename(backing),
                     &error_abort);
        if (qemu_opts_find_desc(list, "backing_fmt")) {
            qemu_opt_set(opts, "backing_fmt", bdrv_get_format_name(backing),
                         &error_abort);
        }
    }
    ret = bdrv_create(drv, filename, opts, errp);
    qemu_opts_del(opts);
    return ret;
}

int blockdev_drive_target_create(JsonObject *args, BlockDriverState *bs,
                                 BlockDriverState *backing,
                                 BlockdevDriveTarget *t, Error **errp)
{
    int64_t size = bdrv_getlength(bs);

    *t = (BlockdevDriveTarget) {
        .filename = json_object_get_string_member(args, "target"),
        .format = qmp_arg_str(args, "format"),
        .existing = !strcmp(json_object_get_string_member_with_default(
                                args, "mode", "absolute-paths"),
                            "existing"),
        .flags = (bdrv_get_open_flags(bs) & ~(BDRV_O_SNAPSHOT |
                                               BDRV_O_COPY_ON_READ)) |
                 BDRV_O_RDWR,
    };
    if (!t->format && !t->existing) {
        t->format = bdrv_get_format_name(bs);
    }
    if (size < 0) {
        error_setg_errno(errp, -size, "bdrv_getlength failed");
        return size;
    }
    if (t->existing) {
        return 0;
    }
    return blockdev_create_image(t->filename, t->format, size, backing,
                                 errp);
}

BlockDriverState *blockdev_drive_target_open(const BlockdevDriveTarget *t,
                                             QDict *options, int flags,
                                             Error **errp)
{
    if (t->format) {
        qdict_put_str(options, "driver", t->format);
    }
    return bdrv_open(t->filename, NULL, options, t->flags | flags, errp);
}

/*
 * blockdev-snapshot-sync's own part of the prepare: the checks of its
 * names, and the overlay's image.  Returns the options and flags to open
 * it with in *@options and *@flags.
 */
static int blockdev_ops_sync_overlay(JsonObject *data, const char *node_name,
                                     BlockDriverState *old_bs,
                                     QDict **options, int *flags,
                                     Error **errp)
{
    const char *format = json_object_get_string_member_with_default(
                             data, "format", "qcow2");
    const char *mode = json_object_get_string_member_with_default(
                           data, "mode", "absolute-paths");
    const char *new_name = qmp_arg_str(data, "snapshot-node-name");
    int ret;

    if (node_name && !new_name) {
        error_setg(errp, "New overlay node-name missing");
        return -EINVAL;
    }
    if (new_name && blockdev_lookup_bs(new_name, new_name, NULL)) {
        error_setg(errp, "New overlay node-name already in use");
        return -EEXIST;
    }
    /* the node's own open flags, but the backing node is the old one */
    *flags = (bdrv_get_open_flags(old_bs) &
              ~(BDRV_O_SNAPSHOT | BDRV_O_COPY_ON_READ)) | BDRV_O_NO_BACKING;
    if (strcmp(mode, "existing")) {
        int64_t size = bdrv_getlength(old_bs);

        if (size < 0) {
            error_setg_errno(errp, -size, "bdrv_getlength failed");
            return size;
        }
        ret = blockdev_create_image(
                  json_object_get_string_member(data, "snapshot-file"),
                  format, size, old_bs, errp);
        if (ret < 0) {
            return ret;
        }
    }
    *options = qdict_new();
    if (new_name) {
        qdict_put_str(*options, "node-name", new_name);
    }
    qdict_put_str(*options, "driver", format);
    return 0;
}

/* What makes a node unfit to be an overlay, in QEMU's order. */
static int blockdev_ops_check_overlay(BlockDriverState *bs, Error **errp)
{
    /* a parent that reads it would see the data change under it */
    if (bdrv_get_cumulative_perm(bs) & BLK_PERM_CONSISTENT_READ) {
        error_setg(errp, "The overlay is already in use");
        return -EBUSY;
    }
    if (bdrv_is_filter(bs)) {
        error_setg(errp, "Filters cannot be used as overlays");
        return -EINVAL;
    }
    if (bdrv_backing_bs(bs)) {
        error_setg(errp, "The overlay already has a backing image");
        return -EINVAL;
    }
    if (!bdrv_supports_backing(bs)) {
        error_setg(errp, "The overlay does not support backing images");
        return -ENOTSUP;
    }
    return 0;
}

/*
 * The prepare of both external snapshots, which differ in their
 * arguments: blockdev-snapshot-sync names the node and creates the
 * overlay, blockdev-snapshot is given both nodes.
 */
static int blockdev_ops_external_prepare(TransactionAction *action,
                                         JsonObject *data, Error **errp)
{
    ExternalSnapshotState *st = action->opaque;
    bool sync = action->drv == &transaction_action_blockdev_snapshot_sync;
    const char *device = sync ? qmp_arg_str(data, "device")
                              : json_object_get_string_member(data, "node");
    const char *node_name = sync ? qmp_arg_str(data, "node-name")
                                 : device;
    const char *overlay_ref = sync ? NULL
                              : json_object_get_string_member(data,
                                                              "overlay");
    QDict *options = NULL;
    int flags = 0;
    int ret;

    st->old_bs = blockdev_lookup_bs(device, node_name, errp);
    if (!st->old_bs) {
        return -ENOENT;
    }
    /* the users wait until the overlay is in place */
    transaction_action_drain(action, st->old_bs);
    if (bdrv_op_is_blocked(st->old_bs, BLOCK_OP_TYPE_EXTERNAL_SNAPSHOT,
                           errp)) {
        return -EBUSY;
    }
    if (!bdrv_is_read_only(st->old_bs) && bdrv_flush(st->old_bs) < 0) {
        error_setg(errp, "An IO error has occurred");
        return -EIO;
    }
    if (sync) {
        ret = blockdev_ops_sync_overlay(data, node_name, st->old_bs,
                                        &options, &flags, errp);
        if (ret < 0) {
            return ret;
        }
    }
    st->new_bs = bdrv_open(sync ? json_object_get_string_member(
                                      data, "snapshot-file") : NULL,
                           overlay_ref, options ? options : qdict_new(),
                           flags, errp);
    if (!st->new_bs) {
        return -EINVAL;
    }
    ret = blockdev_ops_check_overlay(st->new_bs, errp);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_append(st->new_bs, st->old_bs, errp);
    if (ret < 0) {
        return ret;
    }
    st->overlay_appended = true;
    return 0;
}

/* The old node only backs the overlay now: nobody writes it again. */
static void blockdev_ops_external_commit(TransactionAction *action)
{
    ExternalSnapshotState *st = action->opaque;
    Error *err = NULL;

    if (bdrv_reopen_set_read_only(st->old_bs, true, &err) < 0) {
        error_prepend(&err, "Node '%s' stays writable after the snapshot: ",
                      bdrv_get_node_name(st->old_bs));
        error_report_err(err);
    }
}

static void blockdev_ops_external_abort(TransactionAction *action)
{
    ExternalSnapshotState *st = action->opaque;
    Error *err = NULL;

    if (!st->overlay_appended) {
        return;
    }
    /* only permissions the users held before: this cannot conflict */
    if (bdrv_replace_node(st->new_bs, st->old_bs, &err) < 0) {
        error_prepend(&err, "Failed to put node '%s' back in place of its "
                      "overlay: ", bdrv_get_node_name(st->old_bs));
        error_report_err(err);
        return;
    }
    bdrv_set_backing_hd(st->new_bs, NULL, &error_abort);
}

static void blockdev_ops_external_clean(TransactionAction *action)
{
    ExternalSnapshotState *st = action->opaque;

    /* as in QEMU, an overlay that no user took is closed here */
    bdrv_unref(st->new_bs);
}

const TransactionActionDriver transaction_action_blockdev_snapshot_sync = {
    .type               = "blockdev-snapshot-sync",
    .instance_size      = sizeof(ExternalSnapshotState),
    .prepare            = blockdev_ops_external_prepare,
    .commit             = blockdev_ops_external_commit,
    .abort              = blockdev_ops_external_abort,
    .clean              = blockdev_ops_external_clean,
};

const TransactionActionDriver transaction_action_blockdev_snapshot = {
    .type               = "blockdev-snapshot",
    .instance_size      = sizeof(ExternalSnapshotState),
    .prepare            = blockdev_ops_external_prepare,
    .commit             = blockdev_ops_external_commit,
    .abort              = blockdev_ops_external_abort,
    .clean              = blockdev_ops_external_clean,
};

/* ---- internal snapshots ---- */

BlockDriverState *blockdev_lookup_root_bs(const char *name, Error **errp)
{
    BlockDriverState *bs = blockdev_lookup_bs(name, name, errp);

    if (bs && !bdrv_is_root_node(bs)) {
        error_setg(errp, "Need a root block node");
        return NULL;
    }
    return bs;
}

/*
 * The first snapshot of @bs with ID @id and name @name (either may be
 * NULL: not compared).  Returns 1 and fills *@sn, 0 if there is none,
 * -errno (with @errp) if the list cannot be read.
 */
static int blockdev_ops_find_snapshot(BlockDriverState *bs, const char *id,
                                      const char *name, QEMUSnapshotInfo *sn,
                                      Error **errp)
{
    g_autofree QEMUSnapshotInfo *tab = NULL;
    int n = bdrv_snapshot_list(bs, &tab);

    if (n < 0) {
        error_setg_errno(errp, -n, "Failed to list the snapshots of node "
                         "'%s'", bdrv_get_node_name(bs));
        return n;
    }
    for (int i = 0; i < n; i++) {
        if ((!id || !strcmp(tab[i].id_str, id)) &&
            (!name || !strcmp(tab[i].name, name))) {
            *sn = tab[i];
            return 1;
        }
    }
    return 0;
}

typedef struct InternalSnapshotState {
    BlockDriverState *bs;       /* drained till the transaction ends */
    const char *device;         /* the action's data: lives as long */
    QEMUSnapshotInfo sn;
    bool created;
} InternalSnapshotState;

static int blockdev_ops_internal_prepare(TransactionAction *action,
                                         JsonObject *data, Error **errp)
{
    InternalSnapshotState *st = action->opaque;
    const char *name = json_object_get_string_member(data, "name");
    QEMUSnapshotInfo old_sn;
    int64_t now = g_get_real_time();
    int ret;

    st->device = json_object_get_string_member(data, "device");
    st->bs = blockdev_lookup_root_bs(st->device, errp);
    if (!st->bs) {
        return -ENOENT;
    }
    /* no export request sees half a snapshot */
    transaction_action_drain(action, st->bs);
    if (bdrv_op_is_blocked(st->bs, BLOCK_OP_TYPE_INTERNAL_SNAPSHOT, errp)) {
        return -EBUSY;
    }
    if (bdrv_is_read_only(st->bs)) {
        error_setg(errp, "Device '%s' is read only", st->device);
        return -EROFS;
    }
    if (!bdrv_can_snapshot(st->bs)) {
        error_setg(errp, "Block format '%s' used by device '%s' does not "
                   "support internal snapshots",
                   bdrv_get_format_name(st->bs), st->device);
        return -ENOTSUP;
    }
    if (!name[0]) {
        error_setg(errp, "Name is empty");
        return -EINVAL;
    }
    ret = blockdev_ops_find_snapshot(st->bs, NULL, name, &old_sn, errp);
    if (ret < 0) {
        return ret;
    } else if (ret) {
        error_setg(errp, "Snapshot with name '%s' already exists on device "
                   "'%s'", name, st->device);
        return -EEXIST;
    }
    g_strlcpy(st->sn.name, name, sizeof(st->sn.name));
    st->sn.date_sec = now / G_USEC_PER_SEC;
    st->sn.date_nsec = (now % G_USEC_PER_SEC) * 1000;
    /*
     * The daemon runs no guest; QEMU's daemon records its virtual clock,
     * which without a guest reads the host's real time.
     */
    st->sn.vm_clock_nsec = now * 1000;
    st->sn.icount = QEMU_SNAPSHOT_NO_ICOUNT;
    ret = bdrv_snapshot_create(st->bs, &st->sn);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to create snapshot '%s' on "
                         "device '%s'", name, st->device);
        return ret;
    }
    st->created = true;
    return 0;
}

static void blockdev_ops_internal_abort(TransactionAction *action)
{
    InternalSnapshotState *st = action->opaque;
    Error *err = NULL;

    if (st->created &&
        bdrv_snapshot_delete(st->bs, st->sn.id_str, st->sn.name, &err) < 0) {
        error_prepend(&err, "Failed to delete snapshot with id '%s' and "
                      "name '%s' on device '%s' in abort: ", st->sn.id_str,
                      st->sn.name, st->device);
        error_report_err(err);
    }
}

const TransactionActionDriver
    transaction_action_blockdev_snapshot_internal_sync = {
    .type               = "blockdev-snapshot-internal-sync",
    .instance_size      = sizeof(InternalSnapshotState),
    .prepare            = blockdev_ops_internal_prepare,
    .abort              = blockdev_ops_internal_abort,
};

/* A SnapshotInfo object, icount only where it is known. */
static JsonNode *blockdev_ops_snapshot_info(const QEMUSnapshotInfo *sn)
{
    g_autoptr(JsonObject) info = json_object_new();

    json_object_set_string_member(info, "id", sn->id_str);
    json_object_set_string_member(info, "name", sn->name);
    json_object_set_int_member(info, "vm-state-size", sn->vm_state_size);
    json_object_set_int_member(info, "date-sec", sn->date_sec);
    json_object_set_int_member(info, "date-nsec", sn->date_nsec);
    json_object_set_int_member(info, "vm-clock-sec",
                               sn->vm_clock_nsec / G_GINT64_CONSTANT(1000000000));
    json_object_set_int_member(info, "vm-clock-nsec",
                               sn->vm_clock_nsec % G_GINT64_CONSTANT(1000000000));
    if (sn->icount != QEMU_SNAPSHOT_NO_ICOUNT) {
        json_object_set_int_member(info, "icount", sn->icount);
    }
    return json_node_init_object(json_node_alloc(), info);
}

static void qmp_blockdev_snapshot_delete_internal_sync(JsonObject *args,
                                                       JsonNode **ret,
                                                       Error **errp)
{
    const char *device = json_object_get_string_member(args, "device");
    const char *id = qmp_arg_str(args, "id");
    const char *name = qmp_arg_str(args, "name");
    BlockDriverState *bs = blockdev_lookup_root_bs(device, errp);
    QEMUSnapshotInfo sn;
    int r;

    if (!bs) {
        return;
    }
    if (!id && !name) {
        error_setg(errp, "Name or id must be provided");
        return;
    }
    if (bdrv_op_is_blocked(bs, BLOCK_OP_TYPE_INTERNAL_SNAPSHOT_DELETE,
                           errp)) {
        return;
    }
    r = blockdev_ops_find_snapshot(bs, id, name, &sn, errp);
    if (r < 0) {
        return;
    }
    if (!r) {
        error_setg(errp, "Snapshot with id '%s' and name '%s' does not exist "
                   "on device '%s'", id ? id : "null",
                   name ? name : "null", device);
        return;
    }
    /* bdrv_snapshot_delete drains the node while it works */
    if (bdrv_snapshot_delete(bs, id, name, errp) < 0) {
        return;
    }
    *ret = blockdev_ops_snapshot_info(&sn);
}

/* ---- change-backing-file ---- */

/* Whether @image is @top or below it, through filters and backing links. */
static bool blockdev_ops_chain_contains(BlockDriverState *top,
                                        BlockDriverState *image)
{
    while (top && top != image) {
        top = bdrv_filter_or_cow_bs(top);
    }
    return top;
}

/*
 * The backing format recorded with the new name: the one the image
 * records, else the format of its backing node.  QEMU 7.2 records the
 * image's own format instead (qcow2 over a raw backing file), which the
 * image's next open then fails on; docs/storage-daemon.md says so.
 */
static const char *blockdev_ops_backing_format(BlockDriverState *image)
{
    if (bdrv_get_backing_format(image)[0]) {
        return bdrv_get_backing_format(image);
    }
    return bdrv_get_format_name(bdrv_backing_bs(image));
}

/*
 * Rewrites the backing file name that the image of a node in a chain
 * records (after a commit or a move of the files), without changing the
 * open graph; "" removes it.  QEMU's arguments, checks and messages.
 */
static void qmp_change_backing_file(JsonObject *args, JsonNode **ret,
                                    Error **errp)
{
    const char *device = json_object_get_string_member(args, "device");
    const char *backing_file = json_object_get_string_member(args,
                                                             "backing-file");
    BlockDriverState *bs, *image;
    bool read_only;
    int r;

    bs = blockdev_lookup_root_bs(device, errp);
    if (!bs) {
        return;
    }
    image = blockdev_lookup_bs(NULL, json_object_get_string_member(
                                         args, "image-node-name"), errp);
    if (!image) {
        return;
    }
    if (!bdrv_backing_bs(image)) {
        error_setg(errp, "not allowing backing file change on an image "
                   "without a backing file");
        return;
    }
    if (bdrv_op_is_blocked(bs, BLOCK_OP_TYPE_CHANGE, errp)) {
        return;
    }
    if (!blockdev_ops_chain_contains(bs, image)) {
        error_setg(errp, "'%s' and image file are not in the same chain",
                   device);
        return;
    }
    /* a backing node is read-only: writable for the header's update */
    read_only = bdrv_is_read_only(image);
    if (read_only && bdrv_reopen_set_read_only(image, false, errp) < 0) {
        return;
    }
    if (backing_file[0]) {
        r = bdrv_change_backing_file(image, backing_file,
                                     blockdev_ops_backing_format(image),
                                     false);
    } else {
        r = bdrv_change_backing_file(image, NULL, NULL, false);
    }
    if (r < 0) {
        error_setg_errno(errp, -r, "Could not change backing file to '%s'",
                         backing_file);
    }
    if (read_only) {
        bdrv_reopen_set_read_only(image, true, r < 0 ? NULL : errp);
    }
}

/* ---- x-blockdev-set-iothread ---- */

/*
 * Moves a node and everything connected to it into an iothread's context
 * (a string) or the main loop's (null).  A node that an export or a job
 * uses moves only with force, as in QEMU (whose jobs hold a BlockBackend
 * too): they follow, or refuse with their reason.  Nodes above and below
 * follow in any case.
 */
static void qmp_x_blockdev_set_iothread(JsonObject *args, JsonNode **ret,
                                        Error **errp)
{
    const char *node_name = qmp_arg_str(args, "node-name");
    JsonNode *iothread = json_object_get_member(args, "iothread");
    bool force = json_object_get_boolean_member_with_default(args, "force",
                                                             false);
    AioContext *ctx = qemu_get_aio_context();
    BlockDriverState *bs;

    if (!JSON_NODE_HOLDS_NULL(iothread) &&
        (!JSON_NODE_HOLDS_VALUE(iothread) ||
         json_node_get_value_type(iothread) != G_TYPE_STRING)) {
        error_setg(errp, "Invalid parameter type for 'iothread', expected: "
                   "StrOrNull");
        return;
    }
    bs = bdrv_find_node(node_name);
    if (!bs) {
        error_setg(errp, "Failed to find node with node-name='%s'",
                   node_name);
        return;
    }
    if (!force && bdrv_has_root_parents(bs)) {
        error_setg(errp, "Node %s is associated with a BlockBackend and could "
                   "be in use (use force=true to override this check)",
                   node_name);
        return;
    }
    if (JSON_NODE_HOLDS_VALUE(iothread)) {
        IOThread *t = iothread_find(json_node_get_string(iothread), NULL);

        if (!t) {
            error_setg(errp, "Cannot find iothread %s",
                       json_node_get_string(iothread));
            return;
        }
        ctx = iothread_get_aio_context(t);
    }
    bdrv_try_change_aio_context(bs, ctx, NULL, errp);
}

/* ---- x-blockdev-change ---- */

static void qmp_x_blockdev_change(JsonObject *args, JsonNode **ret,
                                  Error **errp)
{
    const char *parent_name = qmp_arg_str(args, "parent");
    const char *child = qmp_arg_str(args, "child");
    const char *node = qmp_arg_str(args, "node");
    BlockDriverState *parent, *new_child;

    parent = blockdev_lookup_bs(parent_name, parent_name, errp);
    if (!parent) {
        return;
    }
    if (child && node) {
        error_setg(errp, "The parameters child and node are in conflict");
    } else if (node) {
        new_child = bdrv_find_node(node);
        if (!new_child) {
            error_setg(errp, "Node '%s' not found", node);
            return;
        }
        bdrv_add_child(parent, new_child, errp);
    } else if (child) {
        bdrv_del_child(parent, child, errp);
    } else {
        error_setg(errp, "Either child or node must be specified");
    }
}

void blockdev_ops_register_commands(void)
{
    qmp_register_command("block_resize", qmp_block_resize);
    qmp_register_command("change-backing-file", qmp_change_backing_file);
    qmp_register_command("x-blockdev-change", qmp_x_blockdev_change);
    qmp_register_command("x-blockdev-set-iothread",
                         qmp_x_blockdev_set_iothread);
    transaction_register_single_command(
        &transaction_action_blockdev_snapshot_sync);
    transaction_register_single_command(&transaction_action_blockdev_snapshot);
    transaction_register_single_command(
        &transaction_action_blockdev_snapshot_internal_sync);
    qmp_register_command("blockdev-snapshot-delete-internal-sync",
                         qmp_blockdev_snapshot_delete_internal_sync);
}
