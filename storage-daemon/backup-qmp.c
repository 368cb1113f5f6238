/*
 * blockdev-backup and drive-backup (qapi/block-backup.json): the
 * commands, and their actions
 * of the transaction command, which the command runs as a transaction of
 * its own (transaction.h).  The arguments are checked here in QEMU's
 * order and with its messages; the job is block/backup.c's.
 *
 * As QEMU's action: prepare creates the job, which puts the filter in
 * place (the point in time of the backup is the prepare's); commit
 * starts it; abort cancels the job that never ran, which takes the
 * filter out and gives the bitmap back.
 */
#include "backup-qmp.h"
#include "blockdev-ops.h"
#include "job-qmp.h"

#include "block/block.h"
#include "job/backup.h"
#include "qblock/block-node.h"
#include "qmp-dispatch.h"
#include "transaction.h"
#include "util/cutils.h"

static const char *const backup_qmp_sync_names[] = {
    [BACKUP_SYNC_TOP] = "top",
    [BACKUP_SYNC_FULL] = "full",
    [BACKUP_SYNC_NONE] = "none",
    [BACKUP_SYNC_BITMAP] = "bitmap",
};

static const char *const backup_qmp_bitmap_mode_names[] = {
    [BITMAP_SYNC_ON_SUCCESS] = "on-success",
    [BITMAP_SYNC_NEVER] = "never",
    [BITMAP_SYNC_ALWAYS] = "always",
};

/* sync, bitmap and bitmap-mode, in the order QEMU checks them */
static bool backup_qmp_sync(JsonObject *args, BlockDriverState *bs,
                            BackupOptions *opts, Error **errp)
{
    const char *sync = json_object_get_string_member(args, "sync");
    const char *bitmap = qmp_arg_str(args, "bitmap");
    const char *mode = qmp_arg_str(args, "bitmap-mode");
    bool incremental = !strcmp(sync, "incremental");

    opts->sync = incremental ? BACKUP_SYNC_BITMAP :
                 qemu_name_index(backup_qmp_sync_names,
                                 G_N_ELEMENTS(backup_qmp_sync_names), sync);
    if (opts->sync == BACKUP_SYNC_BITMAP && !bitmap) {
        error_setg(errp, "must provide a valid bitmap name for '%s' sync "
                   "mode", sync);
        return false;
    }
    if (incremental) {
        if (mode && strcmp(mode, "on-success")) {
            error_setg(errp, "Bitmap sync mode must be 'on-success' when "
                       "using sync mode 'incremental'");
            return false;
        }
        mode = "on-success";
    }
    if (!bitmap) {
        if (mode) {
            error_setg(errp, "Cannot specify bitmap sync mode without a "
                       "bitmap");
            return false;
        }
        return true;
    }
    opts->bitmap = bdrv_find_dirty_bitmap(bs, bitmap);
    if (!opts->bitmap) {
        error_setg(errp, "Bitmap '%s' could not be found", bitmap);
        return false;
    }
    if (!mode) {
        error_setg(errp, "Bitmap sync mode must be given when providing a "
                   "bitmap");
        return false;
    }
    opts->bitmap_mode = qemu_name_index(backup_qmp_bitmap_mode_names,
                            G_N_ELEMENTS(backup_qmp_bitmap_mode_names), mode);
    if (bdrv_dirty_bitmap_check(opts->bitmap, BDRV_BITMAP_ALLOW_RO,
                                errp) < 0) {
        return false;
    }
    if (opts->sync == BACKUP_SYNC_NONE) {
        error_setg(errp, "sync mode '%s' does not produce meaningful bitmap "
                   "outputs", sync);
        return false;
    }
    if (opts->bitmap_mode == BITMAP_SYNC_NEVER &&
        opts->sync != BACKUP_SYNC_BITMAP) {
        error_setg(errp, "Bitmap sync mode '%s' has no meaningful effect when "
                   "combined with sync mode '%s'", mode, sync);
        return false;
    }
    return true;
}

/* The job's options from the arguments (checked against the schema). */
static bool backup_qmp_options(JsonObject *args, BlockDriverState *bs,
                               BackupOptions *opts, Error **errp)
{
    JsonObject *perf = json_object_has_member(args, "x-perf") ?
                       json_object_get_object_member(args, "x-perf") : NULL;

    *opts = (BackupOptions) {
        .speed = json_object_get_int_member_with_default(args, "speed", 0),
        .compress = json_object_get_boolean_member_with_default(
                        args, "compress", false),
        .on_source_error = job_qmp_on_error(args, "on-source-error"),
        .on_target_error = job_qmp_on_error(args, "on-target-error"),
        .filter_node_name = qmp_arg_str(args, "filter-node-name"),
        .max_workers = BACKUP_DEFAULT_MAX_WORKERS,
        .job_flags = job_qmp_flags(args),
    };
    if (perf) {
        opts->max_workers = json_object_get_int_member_with_default(
                                perf, "max-workers",
                                BACKUP_DEFAULT_MAX_WORKERS);
        opts->max_chunk = json_object_get_int_member_with_default(
                              perf, "max-chunk", 0);
    }
    return backup_qmp_sync(args, bs, opts, errp);
}

/* ---- the transaction action ---- */

typedef struct BackupAction {
    BlockJob *job;              /* created by prepare, started by commit */
    /* drive-backup: the target it opened (a reference, until clean) */
    BlockDriverState *opened_target;
} BackupAction;

/*
 * drive-backup's target, as QEMU's drive-backup makes it: the image is
 * created (unless mode is existing) as large as @bs, of @bs's format
 * unless format says otherwise, over @bs's backing file for sync top and
 * over @bs itself for sync none; then it is opened (discard and zero
 * detection unmap, as QEMU opens it), for sync none without its own
 * backing file but over the node @bs, so that it reads through to what
 * the job never copies.  Returns a new reference.
 */
static BlockDriverState *backup_qmp_drive_target(JsonObject *data,
                                                 BlockDriverState *bs,
                                                 Error **errp)
{
    const char *sync = json_object_get_string_member(data, "sync");
    bool over_source = !strcmp(sync, "none");
    BlockDriverState *target;
    BlockdevDriveTarget t;
    QDict *options;

    if (blockdev_drive_target_create(data, bs,
                                     over_source ? bs :
                                     !strcmp(sync, "top") ?
                                     bdrv_backing_chain_next(bs) : NULL,
                                     &t, errp) < 0) {
        return NULL;
    }
    options = qdict_new();
    qdict_put_str(options, "discard", "unmap");
    qdict_put_str(options, "detect-zeroes", "unmap");
    target = blockdev_drive_target_open(&t, options,
                                        over_source ? BDRV_O_NO_BACKING : 0,
                                        errp);
    if (target && over_source && bdrv_set_backing_hd(target, bs, errp) < 0) {
        bdrv_unref(target);
        return NULL;
    }
    return target;
}

/*
 * The prepare of blockdev-backup, given the target node, and of
 * drive-backup, which makes it: backup_qmp_drive_target().
 */
static int backup_action_prepare(TransactionAction *action,
                                 JsonObject *data, Error **errp)
{
    BackupAction *st = action->opaque;
    bool drive = action->drv == &transaction_action_drive_backup;
    const char *target_name = json_object_get_string_member(data, "target");
    BlockDriverState *bs, *target;
    BackupOptions opts;

    bs = bdrv_lookup_node(json_object_get_string_member(data, "device"),
                          errp);
    if (!bs) {
        return -ENOENT;
    }
    if (drive) {
        /* QEMU's early check, before the target is created */
        if (bdrv_op_is_blocked(bs, BLOCK_OP_TYPE_BACKUP_SOURCE, errp)) {
            return -EBUSY;
        }
        target = st->opened_target = backup_qmp_drive_target(data, bs, errp);
    } else {
        target = bdrv_lookup_node(target_name, errp);
    }
    if (!target) {
        return -ENOENT;
    }
    /* as QEMU: the job starts paused and runs once the drain is over */
    transaction_action_drain(action, bs);
    if (!backup_qmp_options(data, bs, &opts, errp)) {
        return -EINVAL;
    }
    st->job = backup_job_create(qmp_arg_str(data, "job-id"), bs, target,
                                &opts, errp);
    return st->job ? 0 : -EINVAL;
}

static void backup_action_job_group_unref(void *job_group)
{
    job_txn_unref(job_group);
}

/*
 * completion-mode grouped: the jobs join the transaction's group (the
 * first one creates it) before they start, so none ends alone.
 */
static void backup_action_commit(TransactionAction *action)
{
    BackupAction *st = action->opaque;
    Transaction *txn = action->txn;

    if (txn->grouped) {
        if (!txn->job_group) {
            txn->job_group = job_txn_new();
            txn->job_group_unref = backup_action_job_group_unref;
        }
        job_txn_add_job(txn->job_group, &st->job->job);
    }
    job_start(&st->job->job);
}

static void backup_action_abort(TransactionAction *action)
{
    BackupAction *st = action->opaque;

    /* as QEMU: the job that never ran goes aborting, concluded, null */
    if (st->job) {
        job_cancel_sync(&st->job->job, true);
    }
}

/* The job holds the target drive-backup opened: ours goes. */
static void backup_action_clean(TransactionAction *action)
{
    BackupAction *st = action->opaque;

    if (st->opened_target) {
        bdrv_unref(st->opened_target);
    }
}

const TransactionActionDriver transaction_action_blockdev_backup = {
    .type           = "blockdev-backup",
    .instance_size  = sizeof(BackupAction),
    .supports_grouped = true,
    .prepare        = backup_action_prepare,
    .commit         = backup_action_commit,
    .abort          = backup_action_abort,
};

const TransactionActionDriver transaction_action_drive_backup = {
    .type           = "drive-backup",
    .instance_size  = sizeof(BackupAction),
    .supports_grouped = true,
    .prepare        = backup_action_prepare,
    .commit         = backup_action_commit,
    .abort          = backup_action_abort,
    .clean          = backup_action_clean,
};

void backup_register_commands(void)
{
    transaction_register_single_command(&transaction_action_blockdev_backup);
    transaction_register_single_command(&transaction_action_drive_backup);
}
