/*
 * block-commit of an intermediate node: copies into the base the data
 * the nodes from the top down to the base (exclusive) hold, then makes
 * the base the backing node of the top's overlay, so that the committed
 * nodes drop out of the chain.  (The commit of the active layer is a
 * mirror into the base: block/mirror.c.)
 *
 * Invariants:
 *  1. Guests write only above the top (the top is not the active
 *     layer), so the committed nodes do not change while the job reads
 *     them; what the job writes into the base is what the chain already
 *     shows there, so readers of the chain see no change
 *     (WRITE_UNCHANGED).
 *  2. The chain changes once, in prepare, after every copy; a cancelled
 *     or failed commit leaves the chain as it was (the base then holds
 *     some of the top's data, masked by the top, and reads the same).
 *  3. A commit_top filter (job-filter.c) is between the top and its
 *     overlays from commit_start() until prepare or clean, as in QEMU
 *     7.2; the overlays read the top through it.
 */
#include "job/block-jobs.h"
#include "job/job-copy.h"
#include "job/job-filter.h"

#include "block/block.h"
#include "block/block_int.h"

/* QEMU's size of a commit request */
#define COMMIT_CHUNK (512 * 1024)

typedef struct CommitJob {
    BlockJob common;
    BlockBackend *top_blk;          /* reads the chain from the top */
    BlockBackend *base_blk;         /* writes the base */
    BlockDriverState *top;
    BlockDriverState *base;
    BlockDriverState *filter;       /* invariant 3 */
    char *backing_file;
    BlockdevOnError on_error;
    bool base_was_read_only;
} CommitJob;

/* Whether a node from the top down to the base (exclusive) holds it. */
static int coroutine_fn commit_needs_copy(BlockJob *job, int64_t offset,
                                          int64_t bytes, int64_t *pnum)
{
    CommitJob *s = container_of(job, CommitJob, common);
    int ret = bdrv_co_block_status_above(s->top, s->base, false, offset,
                                         bytes, pnum, NULL, NULL, NULL);

    return ret < 0 ? ret : !!(ret & BDRV_BLOCK_ALLOCATED);
}

static int coroutine_fn commit_copy(BlockJob *job, int64_t offset,
                                    int64_t bytes, void *buf, bool *is_read)
{
    CommitJob *s = container_of(job, CommitJob, common);
    QEMUIOVector qiov;
    int ret;

    qemu_iovec_init_buf(&qiov, buf, bytes);
    *is_read = true;
    ret = blk_co_preadv(s->top_blk, offset, bytes, &qiov, 0);
    if (ret < 0) {
        return ret;
    }
    *is_read = false;
    if (buffer_is_zero(buf, bytes)) {
        return blk_co_pwrite_zeroes(s->base_blk, offset, bytes, 0);
    }
    return blk_co_pwritev(s->base_blk, offset, bytes, &qiov,
                          BDRV_REQ_WRITE_UNCHANGED);
}

static const BlockJobCopyDriver commit_copy_driver = {
    .needs_copy = commit_needs_copy,
    .copy = commit_copy,
};

static int coroutine_fn commit_run(Job *job, Error **errp)
{
    CommitJob *s = (CommitJob *)job;
    int64_t len, base_len;
    int error, ret;

    len = blk_getlength(s->top_blk);
    base_len = blk_getlength(s->base_blk);
    if (len < 0 || base_len < 0) {
        ret = len < 0 ? len : base_len;
        error_setg_errno(errp, -ret, "Could not get the length of the "
                         "nodes to commit");
        return ret;
    }
    job_progress_set_remaining(job, len);
    if (base_len < len) {
        ret = blk_co_truncate(s->base_blk, len, false, PREALLOC_MODE_OFF, 0,
                              errp);
        if (ret < 0) {
            return ret;
        }
    }
    error = block_job_copy_loop(&s->common, &commit_copy_driver,
                                s->top_blk, len, COMMIT_CHUNK, s->on_error);
    if (error) {
        error_setg_errno(errp, -error, "Could not commit node '%s' into "
                         "node '%s'", bdrv_get_node_name(s->top),
                         bdrv_get_node_name(s->base));
    }
    return error;
}

/* The node whose backing node is the top, or NULL. */
static BlockDriverState *commit_overlay(CommitJob *s)
{
    for (BlockDriverState *bs = bdrv_next_node(NULL); bs;
         bs = bdrv_next_node(bs)) {
        if (bdrv_backing_chain_next(bs) == s->top) {
            return bs;
        }
    }
    return NULL;
}

/* Invariant 2: the overlay of the top now sits on the base. */
static int commit_prepare(Job *job)
{
    CommitJob *s = (CommitJob *)job;
    BlockDriverState *overlay;

    /* invariant 3: the overlay reads the top directly again */
    g_clear_pointer(&s->filter, job_filter_drop);
    overlay = commit_overlay(s);
    if (!overlay) {
        return 0;
    }
    return block_job_change_backing(overlay, s->base, s->backing_file);
}

static void commit_clean(Job *job)
{
    CommitJob *s = (CommitJob *)job;

    g_clear_pointer(&s->top_blk, blk_unref);
    g_clear_pointer(&s->base_blk, blk_unref);
    g_clear_pointer(&s->filter, job_filter_drop);
    if (s->base_was_read_only) {
        bdrv_reopen_set_read_only(s->base, true, NULL);
        s->base_was_read_only = false;
    }
    block_job_remove_all_bdrv(&s->common);
}

static void commit_free(Job *job)
{
    CommitJob *s = (CommitJob *)job;

    commit_clean(job);
    g_clear_pointer(&s->base, bdrv_unref);
    g_free(s->backing_file);
}

static const JobDriver commit_job_driver = {
    .instance_size = sizeof(CommitJob),
    .job_type = "commit",
    .run = commit_run,
    .prepare = commit_prepare,
    .clean = commit_clean,
    .free = commit_free,
    .listener = &block_job_listener,
};

bool commit_start(const char *job_id, BlockDriverState *top,
                  BlockDriverState *base, const CommitOptions *opts,
                  Error **errp)
{
    CommitJob *s;

    /* QEMU's: the job's main node is the active layer it was named by */
    s = block_job_create(job_id, &commit_job_driver, opts->active, 0,
                         BLK_PERM_ALL, opts->speed, opts->job_flags, errp);
    if (!s) {
        return false;
    }
    /* QEMU's order: the job, then the filter (and its node name) */
    s->filter = job_filter_insert(JOB_FILTER_COMMIT_TOP, top, NULL,
                                  opts->filter_node_name, errp);
    if (!s->filter ||
        block_job_add_bdrv(&s->common, "filter", s->filter, 0, BLK_PERM_ALL,
                           errp) < 0) {
        job_early_fail(&s->common.job);
        return false;
    }
    s->top = top;
    s->base = base;
    bdrv_ref(base);
    s->backing_file = g_strdup(opts->backing_file);
    s->on_error = opts->on_error;
    if (bdrv_is_read_only(base)) {
        if (bdrv_reopen_set_read_only(base, false, errp) < 0) {
            job_early_fail(&s->common.job);
            return false;
        }
        s->base_was_read_only = true;
    }
    /*
     * Invariant 1: the committed nodes leave the chain, so nobody else
     * may read them as consistent (QEMU's permissions: the job shares
     * writes, which it would otherwise block at the base below them);
     * the base is written by the job alone.
     */
    for (BlockDriverState *n = top; n && n != base;
         n = bdrv_backing_chain_next(n)) {
        if (block_job_add_bdrv(&s->common, "intermediate node", n, 0,
                               BLK_PERM_WRITE_UNCHANGED | BLK_PERM_WRITE,
                               errp) < 0) {
            job_early_fail(&s->common.job);
            return false;
        }
    }
    if (block_job_add_bdrv(&s->common, "base", base, 0, BLK_PERM_ALL,
                           errp) < 0) {
        job_early_fail(&s->common.job);
        return false;
    }
    s->top_blk = blk_new_with_bs(top, 0, BLK_PERM_ALL, errp);
    s->base_blk = s->top_blk ?
                  blk_new_with_bs(base, BLK_PERM_WRITE_UNCHANGED |
                                        BLK_PERM_RESIZE,
                                  BLK_PERM_CONSISTENT_READ |
                                  BLK_PERM_WRITE_UNCHANGED, errp) : NULL;
    if (!s->base_blk) {
        job_early_fail(&s->common.job);
        return false;
    }
    blk_set_allow_write_beyond_eof(s->base_blk, true);
    /*
     * QEMU's op blockers: the active layer (the job's device), the nodes
     * that leave the chain and the base; not the filter, which the
     * overlay's backing link blocks.
     */
    block_job_block_node(&s->common, opts->active);
    for (BlockDriverState *n = top; n; n = bdrv_backing_chain_next(n)) {
        block_job_block_node(&s->common, n);
        if (n == base) {
            break;
        }
    }
    job_start(&s->common.job);
    return true;
}
