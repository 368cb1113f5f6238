/*
 * QMP commands on jobs (job-qmp.h).  The lookups and their messages are
 * QEMU's: job-* commands say "Job not found", block-job-* commands
 * "Block job 'x' not found" (class DeviceNotActive).
 */
#include "job-qmp.h"
#include "blockdev-ops.h"

#include "block/block.h"
#include "qblock/block-node.h"
#include "job/block-jobs.h"
#include "job/blockjob.h"
#include "job/amend.h"
#include "job/create.h"
#include "qmp-dispatch.h"
#include "util/cutils.h"

static Job *job_qmp_find(const char *id, Error **errp)
{
    Job *job = job_get(id);

    if (!job) {
        error_setg(errp, "Job not found");
    }
    return job;
}

/* The job of the block job @id (a job of another kind is not found). */
static Job *job_qmp_find_block_job(const char *id, Error **errp)
{
    Job *job = job_get(id);

    if (!job || !block_job_from_job(job)) {
        error_set(errp, ERROR_CLASS_DEVICE_NOT_ACTIVE,
                  "Block job '%s' not found", id);
        return NULL;
    }
    return job;
}

static JsonNode *job_qmp_info(Job *job)
{
    g_autoptr(JsonObject) info = json_object_new();

    json_object_set_string_member(info, "id", job->id);
    json_object_set_string_member(info, "type", job->driver->job_type);
    json_object_set_string_member(info, "status", JobStatus_str[job->status]);
    json_object_set_int_member(info, "current-progress",
                               job->progress_current);
    json_object_set_int_member(info, "total-progress", job->progress_total);
    if (job->ret) {
        json_object_set_string_member(info, "error",
                                      error_get_pretty(job->err));
    }
    return json_node_init_object(json_node_alloc(), info);
}

static void qmp_query_jobs(JsonObject *args, JsonNode **ret, Error **errp)
{
    g_autoptr(JsonArray) list = json_array_new();

    for (Job *job = job_next(NULL); job; job = job_next(job)) {
        json_array_add_element(list, job_qmp_info(job));
    }
    *ret = json_node_init_array(json_node_alloc(), list);
}

static JsonNode *job_qmp_block_job_info(BlockJob *bjob)
{
    g_autoptr(JsonObject) info = json_object_new();
    Job *job = &bjob->job;

    json_object_set_string_member(info, "type", job->driver->job_type);
    json_object_set_string_member(info, "device", job->id);
    json_object_set_int_member(info, "len", job->progress_total);
    json_object_set_int_member(info, "offset", job->progress_current);
    json_object_set_boolean_member(info, "busy", job->busy);
    json_object_set_boolean_member(info, "paused", job->pause_count > 0);
    json_object_set_int_member(info, "speed", job->speed);
    json_object_set_string_member(info, "io-status",
                                  BlockJobIoStatus_str[bjob->iostatus]);
    json_object_set_boolean_member(info, "ready", job_is_ready(job));
    json_object_set_string_member(info, "status", JobStatus_str[job->status]);
    json_object_set_boolean_member(info, "auto-finalize", job->auto_finalize);
    json_object_set_boolean_member(info, "auto-dismiss", job->auto_dismiss);
    if (job->ret) {
        json_object_set_string_member(info, "error",
                                      error_get_pretty(job->err));
    }
    return json_node_init_object(json_node_alloc(), info);
}

static void qmp_query_block_jobs(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    g_autoptr(JsonArray) list = json_array_new();

    for (Job *job = job_next(NULL); job; job = job_next(job)) {
        BlockJob *bjob = block_job_from_job(job);

        if (bjob) {
            json_array_add_element(list, job_qmp_block_job_info(bjob));
        }
    }
    *ret = json_node_init_array(json_node_alloc(), list);
}

/* job-resume and block-job-resume: a job stopped by an error goes on. */
static bool job_qmp_resume(Job *job, Error **errp)
{
    BlockJob *bjob = block_job_from_job(job);

    if (!job_user_resume(job, errp)) {
        return false;
    }
    if (bjob) {
        block_job_iostatus_reset(bjob);
    }
    return true;
}

/* job-cancel: QEMU's has no force argument and always forces. */
static bool job_qmp_cancel(Job *job, Error **errp)
{
    return job_user_cancel(job, true, errp);
}

/* What a job-* or block-job-* command does to the job it names. */
typedef bool JobQmpAction(Job *job, Error **errp);

/*
 * The commands that name one job and do one thing to it, all served by
 * job_qmp_act(): they differ only in the argument that names the job,
 * how it is looked up (job-* among all jobs, block-job-* among the
 * block jobs, each with QEMU's message) and the action.
 */
typedef struct JobQmpActCommand {
    const char *name;
    const char *arg;                            /* names the job */
    Job *(*find)(const char *id, Error **errp); /* looks it up */
    JobQmpAction *act;
} JobQmpActCommand;

static const JobQmpActCommand job_qmp_act_commands[] = {
    { "job-pause",          "id",     job_qmp_find,           job_user_pause },
    { "job-resume",         "id",     job_qmp_find,           job_qmp_resume },
    { "job-cancel",         "id",     job_qmp_find,           job_qmp_cancel },
    { "job-complete",       "id",     job_qmp_find,           job_complete },
    { "job-dismiss",        "id",     job_qmp_find,           job_dismiss },
    { "job-finalize",       "id",     job_qmp_find,           job_finalize },
    { "block-job-pause",    "device", job_qmp_find_block_job, job_user_pause },
    { "block-job-resume",   "device", job_qmp_find_block_job, job_qmp_resume },
    { "block-job-complete", "device", job_qmp_find_block_job, job_complete },
    { "block-job-finalize", "id",     job_qmp_find_block_job, job_finalize },
    { "block-job-dismiss",  "id",     job_qmp_find_block_job, job_dismiss },
};

/* @opaque: the JobQmpActCommand of the command. */
static void job_qmp_act(JsonObject *args, const void *opaque, JsonNode **ret,
                        Error **errp)
{
    const JobQmpActCommand *cmd = opaque;
    Job *job = cmd->find(json_object_get_string_member(args, cmd->arg),
                         errp);

    if (job) {
        cmd->act(job, errp);
    }
}

static void qmp_block_job_set_speed(JsonObject *args, JsonNode **ret,
                                    Error **errp)
{
    Job *job = job_qmp_find_block_job(
                   json_object_get_string_member(args, "device"), errp);

    if (job) {
        job_set_speed(job, json_object_get_int_member(args, "speed"), errp);
    }
}

static void qmp_block_job_cancel(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    Job *job = job_qmp_find_block_job(
                   json_object_get_string_member(args, "device"), errp);
    bool force = json_object_get_boolean_member_with_default(args, "force",
                                                             false);

    if (!job) {
        return;
    }
    if (job->user_paused && !force) {
        error_setg(errp, "The block job for device '%s' is currently paused",
                   job->id);
        return;
    }
    job_user_cancel(job, force, errp);
}

static void qmp_blockdev_create(JsonObject *args, JsonNode **ret,
                                Error **errp)
{
    blockdev_create_start(json_object_get_string_member(args, "job-id"),
                          json_object_get_object_member(args, "options"),
                          errp);
}

static void qmp_x_blockdev_amend(JsonObject *args, JsonNode **ret,
                                 Error **errp)
{
    blockdev_amend_start(json_object_get_string_member(args, "job-id"),
                         json_object_get_string_member(args, "node-name"),
                         json_object_get_object_member(args, "options"),
                         json_object_get_boolean_member_with_default(
                             args, "force", false),
                         errp);
}

static bool job_qmp_chain_contains(BlockDriverState *top,
                                   BlockDriverState *bs)
{
    for (; top; top = bdrv_backing_chain_next(top)) {
        if (top == bs) {
            return true;
        }
    }
    return false;
}

/* The node of the chain under @top whose backing node is @base. */
static BlockDriverState *job_qmp_above(BlockDriverState *top,
                                       BlockDriverState *base)
{
    while (bdrv_backing_chain_next(top) != base) {
        top = bdrv_backing_chain_next(top);
    }
    return top;
}

int job_qmp_flags(JsonObject *args)
{
    int flags = JOB_DEFAULT;

    if (!json_object_get_boolean_member_with_default(args, "auto-finalize",
                                                     true)) {
        flags |= JOB_MANUAL_FINALIZE;
    }
    if (!json_object_get_boolean_member_with_default(args, "auto-dismiss",
                                                     true)) {
        flags |= JOB_MANUAL_DISMISS;
    }
    return flags;
}

BlockdevOnError job_qmp_on_error(JsonObject *args, const char *name)
{
    const char *value = qmp_arg_str(args, name);

    return value ? block_job_parse_on_error(value) : BLOCKDEV_ON_ERROR_REPORT;
}

/* Which of base, base-node and bottom block-stream got: one at most. */
static bool job_qmp_stream_exclusive(JsonObject *args, Error **errp)
{
    /* the pairs in the order QEMU checks them */
    static const char *const pairs[][2] = {
        { "base", "base-node" }, { "base", "bottom" },
        { "bottom", "base-node" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(pairs); i++) {
        if (json_object_has_member(args, pairs[i][0]) &&
            json_object_has_member(args, pairs[i][1])) {
            error_setg(errp, "'%s' and '%s' cannot be specified at the same "
                       "time", pairs[i][0], pairs[i][1]);
            return false;
        }
    }
    return true;
}

/* The last node block-stream copies from, by base, base-node or bottom. */
static BlockDriverState *job_qmp_stream_bottom(JsonObject *args,
                                               BlockDriverState *bs,
                                               Error **errp)
{
    const char *base = qmp_arg_str(args, "base");
    const char *base_node = qmp_arg_str(args, "base-node");
    const char *bottom = qmp_arg_str(args, "bottom");
    BlockDriverState *base_bs = NULL, *bottom_bs;

    if (base) {
        base_bs = block_job_find_backing(bs, base);
        if (!base_bs) {
            error_setg(errp, "Can't find '%s' in the backing chain", base);
            return NULL;
        }
    } else if (base_node) {
        base_bs = blockdev_lookup_bs(NULL, base_node, errp);
        if (!base_bs) {
            return NULL;
        }
        if (bs == base_bs || !job_qmp_chain_contains(bs, base_bs)) {
            error_setg(errp, "Node '%s' is not a backing image of '%s'",
                       base_node, bdrv_get_node_name(bs));
            return NULL;
        }
    } else if (bottom) {
        bottom_bs = blockdev_lookup_bs(NULL, bottom, errp);
        if (!bottom_bs) {
            return NULL;
        }
        if (!job_qmp_chain_contains(bs, bottom_bs)) {
            error_setg(errp, "Node '%s' is not in a chain starting from "
                       "'%s'", bottom, bdrv_get_node_name(bs));
            return NULL;
        }
        return bottom_bs;
    }
    return job_qmp_above(bs, base_bs);
}

/*
 * QEMU's op blockers (@op) of a job's chain, @top down to @bottom: the
 * nodes a stream copies, or those a commit writes into.
 */
static bool job_qmp_chain_blocked(BlockDriverState *top,
                                  BlockDriverState *bottom, BlockOpType op,
                                  Error **errp)
{
    for (BlockDriverState *n = top; n; n = bdrv_filter_or_cow_bs(n)) {
        if (bdrv_op_is_blocked(n, op, errp)) {
            return true;
        }
        if (n == bottom) {
            break;
        }
    }
    return false;
}

static void qmp_block_stream(JsonObject *args, JsonNode **ret, Error **errp)
{
    const char *device = json_object_get_string_member(args, "device");
    StreamOptions opts = {
        .speed = json_object_get_int_member_with_default(args, "speed", 0),
        .on_error = job_qmp_on_error(args, "on-error"),
        .backing_file = qmp_arg_str(args, "backing-file"),
        .job_flags = job_qmp_flags(args),
        .filter_node_name = qmp_arg_str(args, "filter-node-name"),
    };
    BlockDriverState *bs, *bottom;

    bs = blockdev_lookup_bs(device, device, errp);
    if (!bs || !job_qmp_stream_exclusive(args, errp)) {
        return;
    }
    bottom = job_qmp_stream_bottom(args, bs, errp);
    if (!bottom ||
        job_qmp_chain_blocked(bs, bottom, BLOCK_OP_TYPE_STREAM, errp)) {
        return;
    }
    if (opts.backing_file && !json_object_has_member(args, "base") &&
        !json_object_has_member(args, "base-node") &&
        !json_object_has_member(args, "bottom")) {
        error_setg(errp, "backing file specified, but streaming the entire "
                   "chain");
        return;
    }
    stream_start(qmp_arg_str(args, "job-id"), bs, bottom, &opts, errp);
}

static const char *const job_qmp_sync_names[] = {
    [MIRROR_SYNC_TOP] = "top",
    [MIRROR_SYNC_FULL] = "full",
    [MIRROR_SYNC_NONE] = "none",
};

/* granularity and buf-size, checked with QEMU's messages */
static bool job_qmp_mirror_sizes(JsonObject *args, MirrorOptions *opts,
                                 Error **errp)
{
    opts->granularity = json_object_get_int_member_with_default(
                            args, "granularity", 0);
    opts->buf_size = json_object_get_int_member_with_default(
                         args, "buf-size", 0);
    if (opts->granularity != 0 &&
        (opts->granularity < 512 || opts->granularity > 64 * MiB)) {
        error_setg(errp, "Parameter 'granularity' expects a value in range "
                   "[512B, 64MB]");
        return false;
    }
    if (opts->granularity & (opts->granularity - 1)) {
        error_setg(errp, "Parameter 'granularity' expects a power of 2");
        return false;
    }
    if (opts->buf_size < 0) {
        error_setg(errp, "Parameter 'buf-size' expects a non-negative "
                   "value");
        return false;
    }
    return true;
}

/*
 * What blockdev-mirror and drive-mirror share once both nodes are there,
 * in QEMU's order: the sizes, the op blockers, the sync mode, the nodes
 * themselves; then the job starts.
 */
static void job_qmp_mirror_start(JsonObject *args, BlockDriverState *bs,
                                 BlockDriverState *target_bs,
                                 MirrorOptions *opts, Error **errp)
{
    const char *sync = json_object_get_string_member(args, "sync");
    const char *replaces = qmp_arg_str(args, "replaces");

    if (!job_qmp_mirror_sizes(args, opts, errp) ||
        bdrv_op_is_blocked(bs, BLOCK_OP_TYPE_MIRROR_SOURCE, errp) ||
        bdrv_op_is_blocked(target_bs, BLOCK_OP_TYPE_MIRROR_TARGET, errp)) {
        return;
    }
    opts->sync = qemu_name_index(job_qmp_sync_names,
                                 G_N_ELEMENTS(job_qmp_sync_names), sync);
    if (opts->sync == (MirrorSyncMode)-1) {
        /* incremental and bitmap need a dirty bitmap to start from */
        error_setg(errp, "Sync mode '%s' not supported", sync);
        return;
    }
    if (bs == target_bs) {
        error_setg(errp, "Can't mirror node into itself");
        return;
    }
    if (replaces) {
        opts->replaces = blockdev_lookup_bs(replaces, replaces, errp);
        if (!opts->replaces) {
            return;
        }
    }
    mirror_start(qmp_arg_str(args, "job-id"), bs, target_bs, opts, errp);
}

/* The options both mirror commands take alike. */
static MirrorOptions job_qmp_mirror_options(JsonObject *args)
{
    const char *mode = qmp_arg_str(args, "copy-mode");

    return (MirrorOptions) {
        .write_blocking = mode && !strcmp(mode, "write-blocking"),
        .on_source_error = job_qmp_on_error(args, "on-source-error"),
        .on_target_error = job_qmp_on_error(args, "on-target-error"),
        .speed = json_object_get_int_member_with_default(args, "speed", 0),
        .job_flags = job_qmp_flags(args),
        .filter_node_name = qmp_arg_str(args, "filter-node-name"),
    };
}

static void qmp_blockdev_mirror(JsonObject *args, JsonNode **ret,
                                Error **errp)
{
    const char *target = json_object_get_string_member(args, "target");
    MirrorOptions opts = job_qmp_mirror_options(args);
    BlockDriverState *bs, *target_bs;

    bs = blockdev_lookup_root_bs(json_object_get_string_member(args,
                                                               "device"),
                                 errp);
    if (!bs) {
        return;
    }
    target_bs = blockdev_lookup_bs(target, target, errp);
    if (target_bs) {
        job_qmp_mirror_start(args, bs, target_bs, &opts, errp);
    }
}

/*
 * drive-mirror's target, as QEMU makes it: a new image (mode
 * absolute-paths, the default) of the source's size and format (or
 * format), over the source's backing file for sync top and over the
 * source for sync none; or the image there (mode existing).  It is
 * opened without its backing file: the job gives it its backing node
 * when it completes (opts->backing_mode).  Returns a new reference.
 */
static BlockDriverState *job_qmp_drive_mirror_target(JsonObject *args,
                                                     BlockDriverState *bs,
                                                     MirrorOptions *opts,
                                                     Error **errp)
{
    const char *sync = json_object_get_string_member(args, "sync");
    const char *node_name = qmp_arg_str(args, "node-name");
    BlockDriverState *target;
    BlockdevDriveTarget t;
    QDict *options;

    if (qmp_arg_str(args, "replaces") && !node_name) {
        error_setg(errp, "a node-name must be provided when replacing a "
                   "named node of the graph");
        return NULL;
    }
    if (blockdev_drive_target_create(args, bs,
                                     !strcmp(sync, "full") ? NULL :
                                     !strcmp(sync, "none") ? bs :
                                     bdrv_backing_chain_next(bs),
                                     &t, errp) < 0) {
        return NULL;
    }
    opts->backing_mode = t.existing ? MIRROR_OPEN_BACKING_CHAIN
                                    : MIRROR_SOURCE_BACKING_CHAIN;
    opts->no_unmap = !json_object_get_boolean_member_with_default(
                         args, "unmap", true);
    options = qdict_new();
    if (node_name) {
        qdict_put_str(options, "node-name", node_name);
    }
    target = blockdev_drive_target_open(&t, options, BDRV_O_NO_BACKING,
                                        errp);
    /* an image that may hold data gets the source's zeroes too */
    opts->zero_target = target && !strcmp(sync, "full") &&
                        (t.existing || !bdrv_has_zero_init(target));
    return target;
}

static void qmp_drive_mirror(JsonObject *args, JsonNode **ret,
                             Error **errp)
{
    MirrorOptions opts = job_qmp_mirror_options(args);
    BlockDriverState *bs, *target_bs;

    bs = blockdev_lookup_root_bs(json_object_get_string_member(args,
                                                               "device"),
                                 errp);
    /* QEMU's early check, before the target is created */
    if (!bs || bdrv_op_is_blocked(bs, BLOCK_OP_TYPE_MIRROR_SOURCE, errp)) {
        return;
    }
    target_bs = job_qmp_drive_mirror_target(args, bs, &opts, errp);
    if (target_bs) {
        job_qmp_mirror_start(args, bs, target_bs, &opts, errp);
        /* the job holds it, or it closes */
        bdrv_unref(target_bs);
    }
}

/*
 * What block-commit's top and base have in common: each is given by a
 * file name (@file_arg) or a node name (@node_arg), not both, and a node
 * name must name a node of the chain from @from.  Returns false with
 * @errp set where they are wrong.  Otherwise *@node is the node that the
 * node name names, or NULL where there is none; then *@file is the file
 * name, or NULL where there is none either (the default applies).
 */
static bool job_qmp_commit_end(JsonObject *args, const char *file_arg,
                               const char *node_arg, BlockDriverState *from,
                               BlockDriverState **node, const char **file,
                               Error **errp)
{
    const char *node_name = qmp_arg_str(args, node_arg);

    *node = NULL;
    *file = qmp_arg_str(args, file_arg);
    if (*file && node_name) {
        error_setg(errp, "'%s' and '%s' are mutually exclusive", node_arg,
                   file_arg);
        return false;
    }
    if (!node_name) {
        return true;
    }
    *node = blockdev_lookup_bs(NULL, node_name, errp);
    if (*node && !job_qmp_chain_contains(from, *node)) {
        error_setg(errp, "'%s' is not in this backing file chain",
                   node_name);
        *node = NULL;
    }
    return *node != NULL;
}

/* block-commit's top (default: the active layer @bs) */
static BlockDriverState *job_qmp_commit_top(JsonObject *args,
                                            BlockDriverState *bs,
                                            Error **errp)
{
    BlockDriverState *top_bs;
    const char *top;

    if (!job_qmp_commit_end(args, "top", "top-node", bs, &top_bs, &top,
                            errp)) {
        return NULL;
    }
    if (top_bs) {
        return top_bs;
    }
    if (!top) {
        return bs;
    }
    /* the active layer's own name, or a backing file's */
    top_bs = strcmp(bdrv_get_filename(bs), top) ?
             block_job_find_backing(bs, top) : bs;
    if (!top_bs) {
        error_setg(errp, "Top image file %s not found", top);
    }
    return top_bs;
}

/* block-commit's base (default: the bottom of the chain) */
static BlockDriverState *job_qmp_commit_base(JsonObject *args,
                                             BlockDriverState *top_bs,
                                             Error **errp)
{
    BlockDriverState *base_bs;
    const char *base;

    if (!job_qmp_commit_end(args, "base", "base-node", top_bs, &base_bs,
                            &base, errp)) {
        return NULL;
    }
    if (base_bs) {
        return base_bs;
    }
    if (base) {
        base_bs = block_job_find_backing(top_bs, base);
        if (!base_bs) {
            error_setg(errp, "Can't find '%s' in the backing chain", base);
        }
        return base_bs;
    }
    base_bs = top_bs;
    while (bdrv_backing_chain_next(base_bs)) {
        base_bs = bdrv_backing_chain_next(base_bs);
    }
    if (base_bs == top_bs) {
        error_setg(errp, "There is no backimg image");
        return NULL;
    }
    return base_bs;
}

static void qmp_block_commit(JsonObject *args, JsonNode **ret, Error **errp)
{
    const char *device = json_object_get_string_member(args, "device");
    const char *backing_file = qmp_arg_str(args, "backing-file");
    const char *job_id = qmp_arg_str(args, "job-id");
    BlockDriverState *bs, *top_bs, *base_bs;

    bs = bdrv_find_node(device);
    if (!bs) {
        error_set(errp, ERROR_CLASS_DEVICE_NOT_FOUND, "Device '%s' not found",
                  device);
        return;
    }
    if (!bdrv_is_root_node(bs)) {
        error_setg(errp, "Need a root block node");
        return;
    }
    if (bdrv_op_is_blocked(bs, BLOCK_OP_TYPE_COMMIT_SOURCE, errp)) {
        return;
    }
    top_bs = job_qmp_commit_top(args, bs, errp);
    if (!top_bs) {
        return;
    }
    base_bs = job_qmp_commit_base(args, top_bs, errp);
    if (!base_bs) {
        return;
    }
    if (job_qmp_chain_blocked(top_bs, base_bs,
                              BLOCK_OP_TYPE_COMMIT_TARGET, errp)) {
        return;
    }
    if (top_bs == base_bs) {
        error_setg(errp, "cannot commit an image into itself");
        return;
    }
    if (top_bs == bs) {
        MirrorOptions opts = {
            .on_source_error = job_qmp_on_error(args, "on-error"),
            .on_target_error = job_qmp_on_error(args, "on-error"),
            .speed = json_object_get_int_member_with_default(args, "speed",
                                                             0),
            .job_flags = job_qmp_flags(args),
            .filter_node_name = qmp_arg_str(args, "filter-node-name"),
        };

        if (backing_file) {
            error_setg(errp, "'backing-file' specified, but 'top' is the "
                       "active layer");
            return;
        }
        commit_active_start(job_id, bs, base_bs, &opts, errp);
    } else {
        CommitOptions opts = {
            .on_error = job_qmp_on_error(args, "on-error"),
            .speed = json_object_get_int_member_with_default(args, "speed",
                                                             0),
            .backing_file = backing_file,
            .job_flags = job_qmp_flags(args),
            .filter_node_name = qmp_arg_str(args, "filter-node-name"),
            .active = bs,
        };

        if (bdrv_op_is_blocked(job_qmp_above(bs, top_bs),
                               BLOCK_OP_TYPE_COMMIT_TARGET, errp)) {
            return;
        }
        commit_start(job_id, top_bs, base_bs, &opts, errp);
    }
}

void job_register_commands(void)
{
    qmp_register_command("blockdev-mirror", qmp_blockdev_mirror);
    qmp_register_command("drive-mirror", qmp_drive_mirror);
    qmp_register_command("block-commit", qmp_block_commit);
    qmp_register_command("block-stream", qmp_block_stream);
    qmp_register_command("blockdev-create", qmp_blockdev_create);
    qmp_register_command("x-blockdev-amend", qmp_x_blockdev_amend);
    qmp_register_command("query-jobs", qmp_query_jobs);
    qmp_register_command("query-block-jobs", qmp_query_block_jobs);
    qmp_register_command("block-job-set-speed", qmp_block_job_set_speed);
    qmp_register_command("block-job-cancel", qmp_block_job_cancel);
    for (size_t i = 0; i < G_N_ELEMENTS(job_qmp_act_commands); i++) {
        qmp_register_command_data(job_qmp_act_commands[i].name, job_qmp_act,
                                  &job_qmp_act_commands[i]);
    }
}
