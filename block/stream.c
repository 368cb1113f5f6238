/*
 * block-stream: copies into the top node of a backing chain the data
 * that the nodes between it and a base (exclusive) hold, then makes the
 * base the top's backing node, so that the nodes in between can go.
 *
 * Invariants:
 *  1. Every copy is a read through the copy-on-read filter, which makes
 *     it a copy-on-read of the top node (io.c's bdrv_cor_preadv()): a
 *     serialising request that copies only the clusters the top does
 *     not hold yet.  A guest write racing the copy
 *     either lands first (the copy then skips its clusters) or waits for
 *     the copy (and then overwrites it): it is never lost, and the top
 *     never gets stale data over new data.
 *  2. Only ranges some node above the base holds are copied; what the
 *     base and its own chain hold stays where it is.
 *  3. The graph changes (the top's backing edge and the backing file its
 *     image names) happen once, in prepare, after every copy finished;
 *     a cancelled or failed stream leaves the chain as it was, with the
 *     copied clusters in the top (which read the same).
 *  4. A copy-on-read filter (job-filter.c, "bottom" the last node
 *     streamed from) is above the top from stream_start() until clean,
 *     as in QEMU 7.2: reads of the top's users copy up too, by
 *     invariant 1's request.
 */
#include "job/block-jobs.h"
#include "job/job-copy.h"
#include "job/job-filter.h"

#include "block/block.h"
#include "block/block_int.h"

/* Bytes copied per request: QEMU's size, large enough for throughput,
 * small enough that a pause or cancel takes effect soon. */
#define STREAM_CHUNK (512 * 1024)

typedef struct StreamJob {
    BlockJob common;
    BlockBackend *blk;              /* on the filter (invariant 1) */
    BlockDriverState *top;
    /* the node right above the base (the last one streamed from) */
    BlockDriverState *bottom;
    /* the new backing node of the top: below bottom (NULL: none) */
    BlockDriverState *base;
    BlockDriverState *filter;       /* invariant 4 */
    char *backing_file;
    BlockdevOnError on_error;
    /* the top was read-only: writable for the copies, and back after */
    bool top_was_read_only;
} StreamJob;

/*
 * Invariant 2: whether the range must be copied: the top does not hold
 * it and a node below it, down to @bottom, does.
 */
static int coroutine_fn stream_needs_copy(BlockJob *job, int64_t offset,
                                          int64_t bytes, int64_t *pnum)
{
    StreamJob *s = container_of(job, StreamJob, common);
    BlockDriverState *below = bdrv_backing_chain_next(s->top);
    int ret;

    ret = bdrv_co_is_allocated(s->top, offset, bytes, pnum);
    if (ret != 0 || !below) {
        return ret < 0 ? ret : 0;
    }
    ret = bdrv_co_block_status_above(below, s->base, false, offset, *pnum,
                                     pnum, NULL, NULL, NULL);
    if (ret < 0) {
        return ret;
    }
    return !!(ret & BDRV_BLOCK_ALLOCATED);
}

/* Invariant 1: the copy-on-read of one range into the top. */
static int coroutine_fn stream_populate(BlockJob *job, int64_t offset,
                                        int64_t bytes, void *buf,
                                        bool *is_read)
{
    StreamJob *s = container_of(job, StreamJob, common);
    QEMUIOVector qiov;

    *is_read = true;
    qemu_iovec_init_buf(&qiov, buf, bytes);
    return blk_co_preadv(s->blk, offset, bytes, &qiov, 0);
}

static const BlockJobCopyDriver stream_copy_driver = {
    .needs_copy = stream_needs_copy,
    .copy = stream_populate,
};

static int coroutine_fn stream_run(Job *job, Error **errp)
{
    StreamJob *s = (StreamJob *)job;
    int64_t len;
    int error;

    if (s->top == s->bottom) {
        return 0;       /* nothing between the top and the base */
    }
    len = blk_getlength(s->blk);
    if (len < 0) {
        error_setg_errno(errp, -len, "Could not get the length of node "
                         "'%s'", bdrv_get_node_name(s->top));
        return len;
    }
    job_progress_set_remaining(job, len);
    error = block_job_copy_loop(&s->common, &stream_copy_driver, s->blk,
                                len, STREAM_CHUNK, s->on_error);
    if (error) {
        error_setg_errno(errp, -error, "Could not stream into node '%s'",
                         bdrv_get_node_name(s->top));
    }
    return error;
}

/* Invariant 3: the top's new backing node, in the graph and on disk. */
static int stream_prepare(Job *job)
{
    StreamJob *s = (StreamJob *)job;

    if (!s->top->backing) {
        return 0;
    }
    return block_job_change_backing(s->top, s->base, s->backing_file);
}

static void stream_clean(Job *job)
{
    StreamJob *s = (StreamJob *)job;

    g_clear_pointer(&s->blk, blk_unref);
    g_clear_pointer(&s->filter, job_filter_drop);
    block_job_remove_all_bdrv(&s->common);
    if (s->top_was_read_only) {
        bdrv_reopen_set_read_only(s->top, true, NULL);
        s->top_was_read_only = false;
    }
}

static void stream_free(Job *job)
{
    StreamJob *s = (StreamJob *)job;

    stream_clean(job);
    g_clear_pointer(&s->base, bdrv_unref);
    g_free(s->backing_file);
}

static const JobDriver stream_job_driver = {
    .instance_size = sizeof(StreamJob),
    .job_type = "stream",
    .run = stream_run,
    .prepare = stream_prepare,
    .clean = stream_clean,
    .free = stream_free,
    .listener = &block_job_listener,
};

bool stream_start(const char *job_id, BlockDriverState *top,
                  BlockDriverState *bottom, const StreamOptions *opts,
                  Error **errp)
{
    bool top_was_read_only = bdrv_is_read_only(top);
    BlockDriverState *filter;
    StreamJob *s;

    /* QEMU's: a read-only top (a backing node) takes the copies too */
    if (top_was_read_only &&
        bdrv_reopen_set_read_only(top, false, errp) < 0) {
        return false;
    }
    /* QEMU's order: the filter (and its node name) before the job */
    filter = job_filter_insert(JOB_FILTER_COPY_ON_READ, top, bottom,
                               opts->filter_node_name, errp);
    s = filter ? block_job_create(job_id, &stream_job_driver, top, 0,
                                  BLK_PERM_ALL, opts->speed,
                                  opts->job_flags, errp) : NULL;
    if (!s) {
        g_clear_pointer(&filter, job_filter_drop);
        if (top_was_read_only) {
            bdrv_reopen_set_read_only(top, true, NULL);
        }
        return false;
    }
    s->filter = filter;
    s->top = top;
    s->top_was_read_only = top_was_read_only;
    if (block_job_add_bdrv(&s->common, "filter", filter, 0, BLK_PERM_ALL,
                           errp) < 0) {
        job_early_fail(&s->common.job);
        return false;
    }
    s->bottom = bottom;
    s->base = bdrv_backing_chain_next(bottom);
    if (s->base) {
        bdrv_ref(s->base);
    }
    s->backing_file = g_strdup(opts->backing_file);
    s->on_error = opts->on_error;
    /* the nodes whose data goes up: nobody else may change them */
    for (BlockDriverState *n = bdrv_backing_chain_next(top);
         n && n != s->base; n = bdrv_backing_chain_next(n)) {
        if (block_job_add_bdrv(&s->common, "intermediate node", n, 0,
                               BLK_PERM_CONSISTENT_READ |
                               BLK_PERM_WRITE_UNCHANGED, errp) < 0) {
            job_early_fail(&s->common.job);
            return false;
        }
    }
    /* QEMU's op blockers: the filter, the top and the nodes it drops */
    block_job_block_node(&s->common, filter);
    for (BlockDriverState *n = top; n && n != s->base;
         n = bdrv_backing_chain_next(n)) {
        block_job_block_node(&s->common, n);
    }
    /*
     * Invariant 1: the job reads through its filter, as QEMU's does, and
     * the filter copies up (taking WRITE_UNCHANGED on the top); nobody
     * may resize the chain meanwhile.
     */
    s->blk = blk_new(bdrv_get_aio_context(top), BLK_PERM_CONSISTENT_READ,
                     BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE_UNCHANGED |
                     BLK_PERM_WRITE);
    if (blk_insert_bs(s->blk, filter, errp) < 0) {
        job_early_fail(&s->common.job);
        return false;
    }
    job_start(&s->common.job);
    return true;
}
