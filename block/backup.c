/*
 * blockdev-backup: copies a source node, as it was when the job was
 * created, to a target node, while guests keep writing to the source.
 *
 * A copy-before-write filter (copy-before-write.c) is put above the
 * source when the job is created, and every user of the source moves to
 * it: from then on a guest write first copies the old data of the
 * clusters it touches to the target.  The job copies every other
 * cluster the sync mode wants through the same filter, so that each
 * cluster is read from the source and written to the target once,
 * whoever comes first (the filter's invariant 2).  At the job's end
 * (completed, failed or cancelled) the users move back to the source
 * and the filter goes.
 *
 * sync=full copies every cluster, sync=top the clusters the source
 * itself allocates (not its backing chain), sync=bitmap (incremental)
 * those the bitmap marks; sync=none copies nothing itself and runs
 * until cancelled, the target getting only the old data of what guests
 * write meanwhile.
 *
 * The bitmap (QEMU's successor semantics, block/dirty-bitmap.c): at
 * creation it is frozen and a successor records the writes from then
 * on.  At the end, if the job succeeded (bitmap-mode on-success or
 * always) or failed (always), the successor takes its place: only what
 * was written since remains; with always after a failure, the clusters
 * that were not copied are marked again.  Otherwise (never, or
 * on-success after a failure) the successor's bits are merged back and
 * the bitmap is as it was plus the new writes.
 *
 * Invariants (s = the BackupJob):
 *  1. The filter s->cbw is in the graph, above the source, from
 *     backup_job_create() until backup_remove_filter() (clean, or the
 *     free of a job that never started); nothing is copied outside.
 *     A later backup of the same source puts its filter between this
 *     one and the source (QEMU's stack of filters): each is taken out
 *     to the node right below it.
 *  2. s->opts.bitmap has a successor from creation until
 *     backup_settle_bitmap() (commit, abort, or that free).
 *  3. At most s->opts.max_workers copies of the job are in flight
 *     (s->in_flight); run() returns only when none is, so no copy
 *     outlives the job's coroutine.
 *  4. The job succeeds only when the filter has no cluster left to copy:
 *     the target then holds the source of the point in time wherever
 *     the sync mode wants it.
 *  5. The source, the filter, the target and the job are in one context,
 *     the source's (an iothread's when it is exported with iothread=):
 *     the target moves there before the filter opens over both, and
 *     goes back to the main loop at the job's end unless a user keeps
 *     it there (blockjob.c inv. 5).
 *
 * The job's coroutine and its workers run in that context, the rest in
 * the main loop thread holding it (job.c inv. 8 and 9); the state is
 * touched between yields.
 */
#include "job/backup.h"

#include "block/block.h"
#include "block/block_int.h"
#include "block-internal.h"
#include "copy-before-write.h"

/*
 * The most one copy moves at once: QEMU's buffer size for copies that
 * are not offloaded.  A larger x-perf.max-chunk gives no larger copies:
 * 64 workers with 1 MiB buffers are 64 MiB, more would be memory for
 * no speed.
 */
#define BACKUP_MAX_CHUNK (1 * MiB)

typedef struct BackupJob {
    BlockJob common;

    /* --- set at creation, immutable --- */
    BlockDriverState *source;
    BlockDriverState *target;
    BackupOptions opts;
    int64_t chunk;                  /* bytes per copy of the job */

    /* --- invariants 1 and 2 --- */
    BlockDriverState *cbw;          /* NULL once taken out */
    bool bitmap_frozen;

    /* --- the copies in flight (invariant 3), job coroutine only --- */
    int in_flight;
    CoQueue worker_done;
    int err;                        /* the first failure of this pass */
    bool err_is_read;
} BackupJob;

typedef struct BackupWorker {
    BackupJob *s;
    int64_t offset;
    int64_t bytes;
} BackupWorker;

/* ---- the copies ---- */

static void backup_progress(void *opaque, int64_t bytes)
{
    BackupJob *s = opaque;

    job_progress_update(&s->common.job, bytes);
}

static void coroutine_fn backup_worker_co(void *opaque)
{
    BackupWorker *w = opaque;
    BackupJob *s = w->s;
    bool read_failed;
    int ret = cbw_co_copy(s->cbw, w->offset, w->bytes, &read_failed);

    if (ret < 0 && !s->err) {
        s->err = ret;
        s->err_is_read = read_failed;
    }
    g_free(w);
    s->in_flight--;
    qemu_co_queue_restart_all(&s->worker_done);
}

/* Waits until fewer than @n copies are in flight. */
static void coroutine_fn backup_wait_workers(BackupJob *s, int n)
{
    while (s->in_flight >= n) {
        qemu_co_queue_wait(&s->worker_done, NULL);
    }
}

/*
 * One sweep over the clusters left to copy, @max_workers at a time
 * (invariant 3).  0, or the first copy's failure (s->err_is_read says
 * whose), or -ECANCELED.
 */
static int coroutine_fn backup_sweep(BackupJob *s)
{
    Job *job = &s->common.job;
    int64_t offset = 0, bytes, delay;

    s->err = 0;
    while (!s->err) {
        BackupWorker *w;

        job_pause_point(job);
        if (job_is_cancelled(job)) {
            break;
        }
        backup_wait_workers(s, s->opts.max_workers);
        offset = s->err ? -1 : cbw_next_needed(s->cbw, offset, s->chunk,
                                               &bytes);
        if (offset < 0) {
            break;
        }
        w = g_new(BackupWorker, 1);
        *w = (BackupWorker) { .s = s, .offset = offset, .bytes = bytes };
        s->in_flight++;
        aio_co_enter(job->aio_context,
                     qemu_coroutine_create(backup_worker_co, w));
        offset += bytes;
        delay = job_ratelimit_delay(job, bytes);
        if (delay) {
            job_sleep_ns(job, delay);
        }
    }
    backup_wait_workers(s, 1);
    if (s->err) {
        return s->err;
    }
    return job_is_cancelled(job) ? -ECANCELED : 0;
}

/*
 * sync=top: what the source does not allocate itself (its backing chain
 * does, or nothing) is not copied.  A failed look counts as allocated:
 * the copy then reads it, and reports the error by the policy.
 */
static void coroutine_fn backup_skip_unallocated(BackupJob *s)
{
    int64_t len = bdrv_getlength(s->source);
    int64_t offset = 0;

    while (offset < len && !job_is_cancelled(&s->common.job)) {
        int64_t pnum;
        int ret = bdrv_co_is_allocated(s->source, offset, len - offset,
                                       &pnum);

        if (ret < 0 || pnum <= 0) {
            return;
        }
        if (ret == 0) {
            cbw_skip(s->cbw, offset, pnum);
        }
        offset += pnum;
        job_pause_point(&s->common.job);
    }
}

static int coroutine_fn backup_run(Job *job, Error **errp)
{
    BackupJob *s = container_of(job, BackupJob, common.job);

    /* started in a drained section (a transaction's): wait for its end */
    job_pause_point(job);
    if (s->opts.sync == BACKUP_SYNC_TOP) {
        backup_skip_unallocated(s);
    }
    job_progress_set_remaining(job, cbw_needed_bytes(s->cbw));
    if (s->opts.sync == BACKUP_SYNC_NONE) {
        /* the filter does the work; the user ends the job */
        while (!job_is_cancelled(job)) {
            job_yield(job);
        }
        return 0;
    }
    for (;;) {
        int ret = backup_sweep(s);
        BlockdevOnError policy;

        if (ret == 0 && cbw_next_needed(s->cbw, 0, 1, &(int64_t){0}) < 0) {
            return 0;               /* invariant 4 */
        }
        if (ret == -ECANCELED || job_is_cancelled(job)) {
            return -ECANCELED;
        }
        if (ret == 0) {
            continue;   /* a guest write's copy failed: the job retries */
        }
        policy = s->err_is_read ? s->opts.on_source_error
                                : s->opts.on_target_error;
        if (block_job_error_action(&s->common, policy, s->err_is_read,
                                   -ret) == BLOCK_ERROR_ACTION_REPORT) {
            /* errp unset: the job reports strerror, as QEMU's does */
            return ret;
        }
        /* stop: paused until job-resume (the next pause point); ignore */
    }
}

/* ---- the end ---- */

/* Marks in @bm every cluster the filter was still to copy. */
static void backup_mark_uncopied(BackupJob *s, BdrvDirtyBitmap *bm)
{
    int64_t offset = 0, bytes;

    while ((offset = cbw_next_needed(s->cbw, offset, INT64_MAX,
                                     &bytes)) >= 0) {
        bdrv_set_dirty_bitmap(bm, offset, bytes);
        offset += bytes;
    }
}

/* Invariant 2: the bitmap by bitmap-mode and the job's result. */
static void backup_settle_bitmap(BackupJob *s, bool success)
{
    BdrvDirtyBitmap *bm = s->opts.bitmap;

    if (!s->bitmap_frozen) {
        return;
    }
    s->bitmap_frozen = false;
    if (s->opts.bitmap_mode == BITMAP_SYNC_NEVER ||
        (!success && s->opts.bitmap_mode == BITMAP_SYNC_ON_SUCCESS)) {
        bdrv_reclaim_dirty_bitmap(bm, NULL);
        return;
    }
    bm = bdrv_dirty_bitmap_abdicate(bm, NULL);
    if (bm && !success && s->cbw) {
        Error *err = NULL;

        /* the clusters left need not be in the format's stored copy */
        if (bdrv_dirty_bitmap_before_change(
                bdrv_dirty_bitmap_bs(bm), bdrv_dirty_bitmap_get_persistence(bm),
                &err) < 0) {
            warn_report_err(err);
        }
        backup_mark_uncopied(s, bm);
    }
}

/*
 * Invariant 1: the users of @cbw move back to @source, and the reference
 * the job took at its creation goes.
 */
static void backup_drop_filter(BlockDriverState *cbw)
{
    /* the source, or the filter of a backup of it started later */
    BlockDriverState *below = cbw->file->bs;
    Error *err = NULL;

    bdrv_drained_begin(cbw);
    cbw_release_source(cbw);
    if (block_job_replace_node(cbw, below, &err) < 0) {
        /* the filter stays, copying nothing; the users keep working */
        error_report("backup: could not take the filter '%s' out: %s",
                     bdrv_get_node_name(cbw), error_get_pretty(err));
        error_free(err);
    }
    bdrv_drained_end(cbw);
    bdrv_unref(cbw);
}

static void backup_remove_filter(BackupJob *s)
{
    if (s->cbw) {
        backup_drop_filter(s->cbw);
        s->cbw = NULL;
    }
}

static void backup_commit(Job *job)
{
    backup_settle_bitmap(container_of(job, BackupJob, common.job), true);
}

static void backup_abort(Job *job)
{
    backup_settle_bitmap(container_of(job, BackupJob, common.job), false);
}

static void backup_clean(Job *job)
{
    BackupJob *s = container_of(job, BackupJob, common.job);

    backup_remove_filter(s);
    /* the last reference to the filter goes with the job's edge on it */
    block_job_remove_all_bdrv(&s->common);
}

/* A job that never ran (job_early_fail) still gives everything back. */
static void backup_free(Job *job)
{
    BackupJob *s = container_of(job, BackupJob, common.job);

    backup_settle_bitmap(s, false);
    backup_remove_filter(s);
    block_job_remove_all_bdrv(&s->common);
}

static const JobDriver backup_job_driver = {
    .instance_size  = sizeof(BackupJob),
    .job_type       = "backup",
    .run            = backup_run,
    .commit         = backup_commit,
    .abort          = backup_abort,
    .clean          = backup_clean,
    .free           = backup_free,
    .listener       = &block_job_listener,
};

/* ---- creation ---- */

/* QEMU's checks before anything changes, in its order. */
static bool backup_check_args(BlockDriverState *source,
                              BlockDriverState *target,
                              const BackupOptions *opts, Error **errp)
{
    int64_t len, target_len;

    if (source == target) {
        error_setg(errp, "Source and target cannot be the same");
        return false;
    }
    if (opts->compress && !target->drv->bdrv_co_pwritev_compressed) {
        error_setg(errp, "Compression is not supported for this drive %s",
                   bdrv_get_node_name(target));
        return false;
    }
    /*
     * QEMU's op blockers.  Another backup of the source is no obstacle:
     * a backup blocks its filter and target, not its source.
     */
    if (bdrv_op_is_blocked(source, BLOCK_OP_TYPE_BACKUP_SOURCE, errp) ||
        bdrv_op_is_blocked(target, BLOCK_OP_TYPE_BACKUP_TARGET, errp)) {
        return false;
    }
    if (opts->max_workers < 1 || opts->max_workers > INT_MAX) {
        error_setg(errp, "max-workers must be between 1 and %d", INT_MAX);
        return false;
    }
    if (opts->max_chunk < 0) {
        error_setg(errp, "max-chunk must be zero (which means no limit) or "
                   "positive");
        return false;
    }
    if (opts->bitmap && opts->bitmap_mode != BITMAP_SYNC_NEVER &&
        bdrv_dirty_bitmap_check(opts->bitmap, BDRV_BITMAP_DEFAULT,
                                errp) < 0) {
        return false;
    }
    len = bdrv_getlength(source);
    target_len = bdrv_getlength(target);
    if (len < 0 || target_len < 0) {
        error_setg_errno(errp, -(len < 0 ? len : target_len), "Unable to get "
                         "length for '%s'",
                         bdrv_get_node_name(len < 0 ? source : target));
        return false;
    }
    if (len != target_len) {
        error_setg(errp, "Source and target image have different sizes");
        return false;
    }
    return true;
}

/* The filter over @source, with @target as its target (no users yet). */
static BlockDriverState *backup_open_filter(BlockDriverState *source,
                                            BlockDriverState *target,
                                            const char *node_name,
                                            Error **errp)
{
    QDict *options = qdict_new();
    BlockDriverState *cbw;
    Error *err = NULL;

    qdict_put_str(options, "driver", "copy-before-write");
    qdict_put_str(options, "file", bdrv_get_node_name(source));
    qdict_put_str(options, "target", bdrv_get_node_name(target));
    if (node_name) {
        qdict_put_str(options, "node-name", node_name);
    }
    cbw = bdrv_open(NULL, NULL, options, BDRV_O_RDWR, &err);
    if (!cbw) {
        error_prepend(&err, "Could not create node: ");
        error_propagate(errp, err);
    }
    return cbw;
}

/* sync=bitmap: the clusters the bitmap leaves clean are not copied. */
static void backup_skip_clean(BlockDriverState *cbw, BdrvDirtyBitmap *bm)
{
    int64_t len = bdrv_dirty_bitmap_size(bm);
    int64_t offset = 0;

    while (offset < len) {
        int64_t clean = bdrv_dirty_bitmap_next_zero(bm, offset, -1);
        int64_t dirty;

        if (clean < 0) {
            return;
        }
        dirty = bdrv_dirty_bitmap_next_dirty(bm, clean, -1);
        if (dirty < 0) {
            dirty = len;
        }
        cbw_skip(cbw, clean, dirty - clean);
        offset = dirty;
    }
}

/*
 * The filter goes in above the source (invariant 1), before the job
 * exists: once the job holds an edge on it, the filter has a parent and
 * takes the source's write permission, which its users still hold.
 */
static BlockDriverState *backup_insert_filter(BlockDriverState *source,
                                              BlockDriverState *target,
                                              const BackupOptions *opts,
                                              Error **errp)
{
    BlockDriverState *cbw;
    int64_t cluster_size;
    int ret;

    cbw = backup_open_filter(source, target, opts->filter_node_name, errp);
    if (!cbw) {
        return NULL;
    }
    /* into the source's context, where the target is (invariant 5) */
    if (bdrv_join_children_aio_context(cbw, errp) < 0) {
        bdrv_unref(cbw);
        return NULL;
    }
    cluster_size = cbw_get_cluster_size(cbw);
    if (opts->max_chunk && opts->max_chunk < cluster_size) {
        error_setg(errp, "Required max-chunk (%" PRId64 ") is less than "
                   "backup cluster size (%" PRId64 ")", opts->max_chunk,
                   cluster_size);
        bdrv_unref(cbw);
        return NULL;
    }
    if (opts->sync == BACKUP_SYNC_BITMAP) {
        backup_skip_clean(cbw, opts->bitmap);
    }
    bdrv_drained_begin(source);
    ret = block_job_replace_node(source, cbw, errp);
    bdrv_drained_end(source);
    if (ret < 0) {
        bdrv_unref(cbw);
        return NULL;
    }
    return cbw;
}

BlockJob *backup_job_create(const char *job_id, BlockDriverState *source,
                            BlockDriverState *target,
                            const BackupOptions *opts, Error **errp)
{
    BlockDriverState *cbw;
    BackupJob *s;

    if (!backup_check_args(source, target, opts, errp)) {
        return NULL;
    }
    /* invariant 5, with QEMU's message if it cannot move */
    if (bdrv_try_change_aio_context(target, bdrv_get_aio_context(source),
                                    NULL, errp) < 0) {
        return NULL;
    }
    if (opts->bitmap &&
        bdrv_dirty_bitmap_create_successor(opts->bitmap, errp) < 0) {
        bdrv_leave_unused_aio_context(target);
        return NULL;
    }
    cbw = backup_insert_filter(source, target, opts, errp);
    if (!cbw) {
        goto fail_bitmap;
    }
    s = block_job_create(job_id, &backup_job_driver, cbw, 0, BLK_PERM_ALL,
                         opts->speed, opts->job_flags, errp);
    if (!s) {
        backup_drop_filter(cbw);
        goto fail_bitmap;
    }
    s->source = source;
    s->target = target;
    s->opts = *opts;
    s->opts.filter_node_name = NULL;
    s->chunk = MIN(opts->max_chunk ? opts->max_chunk : BACKUP_MAX_CHUNK,
                   BACKUP_MAX_CHUNK);
    s->chunk = MAX(s->chunk, cbw_get_cluster_size(cbw));
    s->cbw = cbw;
    s->bitmap_frozen = opts->bitmap != NULL;
    qemu_co_queue_init(&s->worker_done);
    cbw_set_job_hooks(cbw, opts->compress ? BDRV_REQ_WRITE_COMPRESSED : 0,
                      backup_progress, s);
    /* edges on both ends: other jobs stay off, their drains pause it */
    if (block_job_add_bdrv(&s->common, "source", source, 0, BLK_PERM_ALL,
                           errp) < 0 ||
        block_job_add_bdrv(&s->common, "target", target, 0, BLK_PERM_ALL,
                           errp) < 0) {
        job_early_fail(&s->common.job);
        return NULL;
    }
    /* QEMU's op blockers: not the source, which other backups may read */
    block_job_block_node(&s->common, cbw);
    block_job_block_node(&s->common, target);
    return &s->common;

fail_bitmap:
    if (opts->bitmap) {
        bdrv_reclaim_dirty_bitmap(opts->bitmap, NULL);
    }
    bdrv_leave_unused_aio_context(target);
    return NULL;
}
