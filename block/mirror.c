/*
 * blockdev-mirror, and the active block-commit built on it: copies a
 * source node to a target while guests keep writing to the source, goes
 * READY once the target holds all of it, and on job-complete moves the
 * source's users over to the target (the pivot).
 *
 * Dirty tracking: an anonymous dirty bitmap of the source
 * (block/dirty-bitmap.c), one bit per `granularity` bytes, which the
 * request path marks after each write reached the source (io.c
 * invariant 6).  In write-blocking mode the bitmap is disabled and the
 * job's write hook (io.c invariant 7) marks it instead, for the writes
 * it could not copy to the target itself.  The job's loop takes runs of
 * marks from a cursor, clears them and starts a copy of each (data, or
 * zeroes where the source reads as zeroes, so the target stays sparse),
 * up to MIRROR_MAX_IN_FLIGHT copies and `buf-size` bytes at once.
 *
 * Invariants:
 *  1. A range is marked dirty after every write to it landed on the
 *     source, and the job clears a mark before it reads the range; so a
 *     write racing a copy either is read by it or leaves the mark set,
 *     and is copied again: never lost.
 *  2. At most one operation (a copy of the job, or in write-blocking mode
 *     a guest write's copy) works on any byte of the target at a time:
 *     each waits for the overlapping ones in s->ops to finish first, so
 *     an older copy never lands on the target after a newer one.
 *  3. A failed read or write marks its range dirty again; the policy
 *     (on-source-error for reads, on-target-error for writes) decides
 *     whether the job fails, pauses or goes on.
 *  4. The job ends its run with the source drained, no copy in flight and
 *     no range dirty (when completed, or cancelled softly once READY), so
 *     that the target holds exactly the source's data; the drain lasts
 *     until prepare (the pivot) or abort, so no write slips in between.
 *  5. The write hook (write-blocking mode only) is on the source from
 *     mirror_start() until clean; the bitmap lives as long.
 *  6. s->in_flight <= MIRROR_MAX_IN_FLIGHT and s->bytes_in_flight <=
 *     buf-size, except that one copy always may start (a buf-size smaller
 *     than a granule still makes progress); the job's run returns, and
 *     the job pauses or sleeps, only with s->in_flight 0: the copies use
 *     its BlockBackends, and a paused job makes no progress.
 *  7. The mirror_top filter (job-filter.c) is above the source from
 *     mirror_do_start() until prepare (before the pivot) or clean: the
 *     source's users write through it to the source, where invariants 1
 *     and 5 see their writes.
 *  8. The source, the target, the filter, the job and its copies are in
 *     one context, the source's (an iothread's when it is exported with
 *     iothread=): the target moves there before the filter goes in, and
 *     at the job's end whichever of source and target no user keeps
 *     there goes back to the main loop (blockjob.c inv. 5).  run() and
 *     the copies run in that context; the pivot, in prepare, in the main
 *     loop thread holding it (job.c inv. 8 and 9).
 */
#include "job/block-jobs.h"

#include "block/block.h"
#include "block/block_int.h"
#include "block/dirty-bitmap.h"
#include "job/job-filter.h"

/* QEMU's defaults: 16 MiB of copies in flight, and a 64 KiB granularity
 * for targets without a cluster size of their own. */
#define MIRROR_DEFAULT_BUF_SIZE (16 * MiB)
#define MIRROR_DEFAULT_GRANULARITY (64 * KiB)
/* The least the largest copy may take (QEMU's), so that a small buf-size
 * still copies in requests of a reasonable size; a larger buf-size is
 * spread over MIRROR_MAX_IN_FLIGHT copies. */
#define MIRROR_MAX_IO_BYTES (1 * MiB)
/* Copies in flight at once (QEMU's): enough to keep a device's queue
 * busy, few enough that a pause or cancel waits for little. */
#define MIRROR_MAX_IN_FLIGHT 16
/* How often a job with nothing to copy looks again (QEMU's slice). */
#define MIRROR_IDLE_NS (100 * 1000 * 1000LL)

typedef struct MirrorJob MirrorJob;

typedef struct MirrorOp {
    MirrorJob *s;
    int64_t offset;
    int64_t bytes;
    CoQueue waiters;
} MirrorOp;

struct MirrorJob {
    BlockJob common;
    BlockBackend *source_blk;      /* on the filter */
    BlockBackend *target_blk;
    BlockDriverState *source;
    BlockDriverState *target;
    /* the node whose users move to the target on complete */
    BlockDriverState *to_replace;
    /* data at and below base is not copied (sync=top, commit) */
    BlockDriverState *base;
    BlockDriverState *filter;       /* mirror_top, invariant 7 */
    MirrorOptions opts;
    BdrvWriteHook hook;             /* invariant 5 */
    bool hook_added;

    BdrvDirtyBitmap *dirty_bitmap;  /* on the source, invariant 1 */
    int64_t cursor;                 /* the byte the next copy starts at */
    int64_t len;
    int64_t max_io_bytes;           /* the largest single copy */

    GSList *ops;                    /* MirrorOp *, invariant 2 */
    int in_flight;                  /* the job's copies, invariant 6 */
    int64_t bytes_in_flight;
    CoQueue op_done;                /* the job waits for a copy here */
    bool dirty_initialised;         /* what to copy first is marked */
    bool should_complete;           /* job-complete: pivot */
    bool in_drain;                  /* invariant 4 */
    bool base_was_read_only;
    int ret;                        /* the first reported error */
};

/* ---------------------------------------------------------------------- */
/* The dirty bitmap */

static void mirror_set_dirty(MirrorJob *s, int64_t offset, int64_t bytes)
{
    bdrv_set_dirty_bitmap(s->dirty_bitmap, offset, bytes);
}

static int64_t mirror_dirty_bytes(MirrorJob *s)
{
    return bdrv_get_dirty_count(s->dirty_bitmap);
}

static bool mirror_range_dirty(MirrorJob *s, int64_t offset, int64_t bytes)
{
    return bdrv_dirty_bitmap_next_dirty(s->dirty_bitmap, offset, bytes) >= 0;
}

/*
 * The next dirty run at or after the cursor (wrapping to the start), of
 * at most @max bytes: true with *@offset and *@bytes, false if all clean.
 */
static bool mirror_next_dirty(MirrorJob *s, int64_t max, int64_t *offset,
                              int64_t *bytes)
{
    if (bdrv_dirty_bitmap_next_dirty_area(s->dirty_bitmap, s->cursor,
                                          s->len, max, offset, bytes)) {
        return true;
    }
    return bdrv_dirty_bitmap_next_dirty_area(s->dirty_bitmap, 0, s->len,
                                             max, offset, bytes);
}

/* ---------------------------------------------------------------------- */
/* Operations on the target (invariant 2) */

static MirrorOp *mirror_op_begin(MirrorJob *s, int64_t offset,
                                 int64_t bytes)
{
    MirrorOp *op = g_new0(MirrorOp, 1);

    for (;;) {
        MirrorOp *other = NULL;

        for (GSList *l = s->ops; l; l = l->next) {
            MirrorOp *o = l->data;

            if (o->offset < offset + bytes && offset < o->offset + o->bytes) {
                other = o;
                break;
            }
        }
        if (!other) {
            break;
        }
        qemu_co_queue_wait(&other->waiters, NULL);
    }
    op->s = s;
    op->offset = offset;
    op->bytes = bytes;
    qemu_co_queue_init(&op->waiters);
    s->ops = g_slist_prepend(s->ops, op);
    return op;
}

static void mirror_op_end(MirrorJob *s, MirrorOp *op)
{
    s->ops = g_slist_remove(s->ops, op);
    qemu_co_queue_restart_all(&op->waiters);
    g_free(op);
}

/*
 * Copies the start of [offset, offset + bytes) of the source to the
 * target, as far as one block-status run goes: zeroes as a zero write
 * (the target stays sparse), data as data.  Returns the bytes copied, or
 * -errno with *@is_read telling which side failed.
 */
static int64_t coroutine_fn mirror_copy(MirrorJob *s, int64_t offset,
                                        int64_t bytes, void *buf,
                                        bool *is_read)
{
    QEMUIOVector qiov;
    int64_t pnum;
    int ret;

    *is_read = true;
    ret = bdrv_co_block_status_above(s->source, s->base, true, offset,
                                     bytes, &pnum, NULL, NULL, NULL);
    if (ret < 0) {
        return ret;
    }
    bytes = MIN(bytes, pnum);
    if (!(ret & BDRV_BLOCK_ZERO)) {
        qemu_iovec_init_buf(&qiov, buf, bytes);
        ret = blk_co_preadv(s->source_blk, offset, bytes, &qiov, 0);
        if (ret < 0) {
            return ret;
        }
    }
    *is_read = false;
    if ((ret & BDRV_BLOCK_ZERO) || buffer_is_zero(buf, bytes)) {
        ret = blk_co_pwrite_zeroes(s->target_blk, offset, bytes,
                                   s->opts.no_unmap ? 0 :
                                   BDRV_REQ_MAY_UNMAP);
    } else {
        ret = blk_co_pwritev(s->target_blk, offset, bytes, &qiov, 0);
    }
    return ret < 0 ? ret : bytes;
}

/* Invariant 3: what a failed copy of a range does to the job. */
static void mirror_handle_error(MirrorJob *s, int64_t offset, int64_t bytes,
                                bool is_read, int ret)
{
    BlockErrorAction action;

    mirror_set_dirty(s, offset, bytes);
    action = block_job_error_action(&s->common,
                                    is_read ? s->opts.on_source_error :
                                              s->opts.on_target_error,
                                    is_read, -ret);
    if (action == BLOCK_ERROR_ACTION_REPORT && !s->ret) {
        s->ret = ret;
    }
}

/* One copy in flight: its own coroutine and buffer (invariant 6). */
static void coroutine_fn mirror_co_copy(void *opaque)
{
    MirrorOp *op = opaque;
    MirrorJob *s = op->s;
    void *buf = blk_blockalign(s->source_blk, op->bytes);
    int64_t copied = 0;
    bool is_read;

    while (copied < op->bytes) {
        int64_t ret = mirror_copy(s, op->offset + copied,
                                  op->bytes - copied, buf, &is_read);

        if (ret < 0) {
            mirror_handle_error(s, op->offset + copied, op->bytes - copied,
                                is_read, ret);
            break;
        }
        copied += ret;
    }
    qemu_vfree(buf);
    job_progress_update(&s->common.job, copied);
    s->in_flight--;
    s->bytes_in_flight -= op->bytes;
    mirror_op_end(s, op);
    qemu_co_queue_restart_all(&s->op_done);
}

/* Invariant 6: whether a copy of @bytes more may start now. */
static bool mirror_may_start(MirrorJob *s, int64_t bytes)
{
    return s->in_flight == 0 ||
           (s->in_flight < MIRROR_MAX_IN_FLIGHT &&
            s->bytes_in_flight + bytes <= s->opts.buf_size);
}

/*
 * Starts one copy: the next run of dirty bits from the cursor, up to
 * max_io_bytes (a granule at least).  Waits for a free slot first, and
 * for overlapping copies (invariant 2).  Returns the bytes it will copy,
 * 0 if nothing is dirty.
 */
static int64_t coroutine_fn mirror_iteration(MirrorJob *s)
{
    int64_t offset, bytes;
    MirrorOp *op;

    if (!mirror_next_dirty(s, s->max_io_bytes, &offset, &bytes)) {
        return 0;
    }
    if (!mirror_may_start(s, bytes)) {
        qemu_co_queue_wait(&s->op_done, NULL);
        return 0;       /* the bitmap may have changed meanwhile */
    }
    /* invariant 1: cleared before the read */
    bdrv_reset_dirty_bitmap(s->dirty_bitmap, offset, bytes);
    op = mirror_op_begin(s, offset, bytes);
    s->in_flight++;
    s->bytes_in_flight += bytes;
    s->cursor = offset + bytes;
    aio_co_enter(blk_get_aio_context(s->source_blk),
                 qemu_coroutine_create(mirror_co_copy, op));
    return bytes;
}

/* Invariant 6: waits until no copy of the job is in flight. */
static void coroutine_fn mirror_wait_all(MirrorJob *s)
{
    while (s->in_flight > 0) {
        qemu_co_queue_wait(&s->op_done, NULL);
    }
}

/* ---------------------------------------------------------------------- */
/* Guest writes (the write hook) */

/*
 * Write-blocking mode: a guest write to a clean range is copied to the
 * target before the guest sees it complete, so the target keeps up with
 * any write rate; a range already dirty is left to the loop.
 */
static void coroutine_fn mirror_active_write(MirrorJob *s, int64_t offset,
                                             int64_t bytes,
                                             QEMUIOVector *qiov)
{
    int64_t gran = s->opts.granularity;
    int64_t start = QEMU_ALIGN_DOWN(offset, gran);
    int64_t end = MIN(QEMU_ALIGN_UP(offset + bytes, gran), s->len);
    MirrorOp *op = mirror_op_begin(s, start, end - start);
    int ret;

    /* the whole granules must already be on the target to stay clean */
    if (mirror_range_dirty(s, start, end - start) || !qiov ||
        start != offset || end != offset + bytes) {
        mirror_set_dirty(s, offset, bytes);
        mirror_op_end(s, op);
        return;
    }
    ret = blk_co_pwritev(s->target_blk, offset, bytes, qiov, 0);
    if (ret < 0) {
        mirror_set_dirty(s, offset, bytes);
    }
    mirror_op_end(s, op);
}

/* Write-blocking mode only: the bitmap is disabled, this marks it. */
static void coroutine_fn mirror_after_write(BdrvWriteHook *hook,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov, int ret)
{
    MirrorJob *s = container_of(hook, MirrorJob, hook);

    assert(s->opts.write_blocking);
    if (ret == 0 && s->dirty_initialised) {
        mirror_active_write(s, offset, bytes, qiov);
    } else {
        mirror_set_dirty(s, offset, bytes);     /* invariant 1 */
    }
}

/* ---------------------------------------------------------------------- */
/* The job */

/* Marks what sync=full or top must copy before the job can be READY. */
static int coroutine_fn mirror_dirty_init(MirrorJob *s)
{
    int64_t offset = 0, pnum;

    if (s->opts.sync == MIRROR_SYNC_NONE) {
        return 0;
    }
    if (!s->base &&
        (s->opts.zero_target || !bdrv_has_zero_init(s->target))) {
        /* every range, zeroes included, must reach the target */
        mirror_set_dirty(s, 0, s->len);
        return 0;
    }
    while (offset < s->len) {
        int ret = bdrv_co_block_status_above(s->source, s->base, false,
                                             offset, s->len - offset, &pnum,
                                             NULL, NULL, NULL);

        if (ret < 0) {
            return ret;
        }
        if (ret & BDRV_BLOCK_ALLOCATED) {
            mirror_set_dirty(s, offset, pnum);
        }
        offset += pnum;
        job_pause_point(&s->common.job);
        if (job_is_cancelled(&s->common.job)) {
            return 0;
        }
    }
    return 0;
}

/* The target must be as long as the source (an active commit grows it). */
static int coroutine_fn mirror_check_sizes(MirrorJob *s, Error **errp)
{
    int64_t target_len = blk_getlength(s->target_blk);

    if (target_len < 0) {
        error_setg_errno(errp, -target_len, "Could not get the length of "
                         "node '%s'", bdrv_get_node_name(s->target));
        return target_len;
    }
    if (s->base == s->target && s->len > target_len) {
        return blk_co_truncate(s->target_blk, s->len, false,
                               PREALLOC_MODE_OFF, 0, errp);
    }
    if (s->len != target_len) {
        error_setg(errp, "Source and target image have different sizes");
        return -EINVAL;
    }
    return 0;
}

/*
 * Invariant 4: with nothing dirty, drains the source and checks again;
 * true (drained) if the target holds everything.
 */
static bool coroutine_fn mirror_converged(MirrorJob *s)
{
    bdrv_drained_begin(s->source);
    if (mirror_dirty_bytes(s) == 0 && s->in_flight == 0 && !s->ops) {
        s->in_drain = true;
        return true;
    }
    bdrv_drained_end(s->source);
    return false;
}

static int coroutine_fn mirror_run(Job *job, Error **errp)
{
    MirrorJob *s = (MirrorJob *)job;
    int64_t delay = 0;
    int ret;

    s->len = blk_getlength(s->source_blk);
    if (s->len < 0) {
        error_setg_errno(errp, -s->len, "Could not get the length of node "
                         "'%s'", bdrv_get_node_name(s->source));
        return s->len;
    }
    ret = mirror_check_sizes(s, errp);
    if (ret < 0) {
        return ret;
    }
    ret = mirror_dirty_init(s);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the allocation of "
                         "node '%s'", bdrv_get_node_name(s->source));
        return ret;
    }
    s->dirty_initialised = true;

    for (;;) {
        bool should_complete, clean;
        int64_t issued = 0;

        if (s->ret) {
            break;
        }
        job_progress_set_remaining(job, mirror_dirty_bytes(s) +
                                        s->bytes_in_flight);
        if (mirror_dirty_bytes(s) > 0) {
            issued = mirror_iteration(s);
        } else if (s->in_flight > 0) {
            /* the last copies: what they leave dirty comes next */
            qemu_co_queue_wait(&s->op_done, NULL);
        }
        clean = mirror_dirty_bytes(s) == 0 && s->in_flight == 0;
        if (clean && !job_is_ready(job) && !job_is_cancelled(job)) {
            job_transition_to_ready(job);
        }
        should_complete = job_is_ready(job) &&
                          (s->should_complete || job_cancel_requested(job));
        if (clean && should_complete && !s->ret && mirror_converged(s)) {
            break;
        }
        if (job_is_cancelled(job)) {
            break;
        }
        delay = issued ? job_ratelimit_delay(job, issued) :
                clean ? MIRROR_IDLE_NS : 0;
        /* invariant 6: pauses and waits with no copy in flight */
        if (delay > 0 || job->pause_count > 0 || s->in_flight == 0) {
            mirror_wait_all(s);
            job_sleep_ns(job, delay);
        }
        if (job_is_cancelled(job)) {
            break;
        }
    }
    mirror_wait_all(s);     /* invariant 6 */
    if (s->ret) {
        error_setg_errno(errp, -s->ret, "Could not copy node '%s' to node "
                         "'%s'", bdrv_get_node_name(s->source),
                         bdrv_get_node_name(s->target));
        return s->ret;
    }
    return 0;
}

static void mirror_complete(Job *job, Error **errp)
{
    MirrorJob *s = (MirrorJob *)job;

    s->should_complete = true;
    job_enter(job);
}

static void mirror_end_drain(MirrorJob *s)
{
    if (s->in_drain) {
        s->in_drain = false;
        bdrv_drained_end(s->source);
    }
}

static const JobDriver commit_active_job_driver;

/*
 * An active commit's edges on the nodes between the top and the base go
 * before the filter: they share no consistent read, which the filter's
 * users ask of them once they are the top's again (QEMU drops them at
 * the same point).
 */
static void mirror_drop_intermediate(MirrorJob *s)
{
    if (s->common.job.driver != &commit_active_job_driver) {
        return;
    }
    for (BlockDriverState *n = bdrv_backing_chain_next(s->source);
         n && n != s->target; n = bdrv_backing_chain_next(n)) {
        block_job_remove_bdrv(&s->common, n);
    }
}

/*
 * The target's backing node as opts.backing_mode wants it, before its
 * users come (QEMU's mirror_exit_common()).
 */
static int mirror_target_backing(MirrorJob *s, Error **errp)
{
    BlockDriverState *backing;

    switch (s->opts.backing_mode) {
    case MIRROR_SOURCE_BACKING_CHAIN:
        backing = s->opts.sync == MIRROR_SYNC_NONE ? s->source : s->base;
        if (bdrv_backing_bs(s->target) == backing) {
            return 0;
        }
        /*
         * The source is drained (invariant 4); once the target is its
         * parent, the end of that drain passes through the target to the
         * job's own edge on it, which its beginning never paused.
         */
        block_job_remove_bdrv(&s->common, s->target);
        return bdrv_set_backing_hd(s->target, backing, errp);
    case MIRROR_OPEN_BACKING_CHAIN:
        return bdrv_open_backing_file(s->target, errp);
    default:
        return 0;
    }
}

/* The pivot, inside the drained section of invariant 4. */
static int mirror_prepare(Job *job)
{
    MirrorJob *s = (MirrorJob *)job;
    Error *err = NULL;
    int ret = 0;

    /*
     * The job's own users go first: the one on the source must not move
     * with the source's users, and the one on the target shares no
     * write, which the moved users (an export) need.
     */
    g_clear_pointer(&s->source_blk, blk_unref);
    g_clear_pointer(&s->target_blk, blk_unref);
    mirror_drop_intermediate(s);
    /* invariant 7: the users are the source's again, then they move */
    g_clear_pointer(&s->filter, job_filter_drop);
    if (s->should_complete && s->in_drain) {
        ret = bdrv_flush(s->target);
        if (ret == 0 && (mirror_target_backing(s, &err) < 0 ||
                         block_job_replace_node(s->to_replace, s->target,
                                                &err) < 0)) {
            error_report_err(err);
            ret = -EPERM;
        }
    }
    mirror_end_drain(s);
    return ret;
}

static void mirror_abort(Job *job)
{
    mirror_end_drain((MirrorJob *)job);
}

static void mirror_clean(Job *job)
{
    MirrorJob *s = (MirrorJob *)job;

    mirror_end_drain(s);
    mirror_drop_intermediate(s);
    g_clear_pointer(&s->filter, job_filter_drop);
    if (s->hook_added) {
        bdrv_remove_write_hook(s->source, &s->hook);
        s->hook_added = false;
    }
    g_clear_pointer(&s->source_blk, blk_unref);
    g_clear_pointer(&s->target_blk, blk_unref);
    if (s->base_was_read_only) {
        bdrv_reopen_set_read_only(s->target, true, NULL);
        s->base_was_read_only = false;
    }
    if (s->dirty_bitmap) {
        bdrv_release_dirty_bitmap(s->dirty_bitmap);
        s->dirty_bitmap = NULL;
    }
    block_job_remove_all_bdrv(&s->common);
}

static void mirror_free(Job *job)
{
    mirror_clean(job);
}

/* The mirror and the active commit differ only in the type users see. */
#define MIRROR_JOB_DRIVER(type) {                   \
    .instance_size = sizeof(MirrorJob),             \
    .job_type = (type),                             \
    .run = mirror_run,                              \
    .complete = mirror_complete,                    \
    .soft_cancel_completes = true,                  \
    .prepare = mirror_prepare,                      \
    .abort = mirror_abort,                          \
    .clean = mirror_clean,                          \
    .free = mirror_free,                            \
    .listener = &block_job_listener,                \
}

static const JobDriver mirror_job_driver = MIRROR_JOB_DRIVER("mirror");
/* The active commit: a mirror of the top into the base, typed commit. */
static const JobDriver commit_active_job_driver = MIRROR_JOB_DRIVER("commit");

/*
 * Everything but the start: the job's users of the source and target,
 * the bitmap and the hook.  A commit into @base writes only what the
 * chain already shows above it (WRITE_UNCHANGED for its readers).
 */
static bool mirror_setup(MirrorJob *s, bool is_commit, Error **errp)
{
    int64_t len = bdrv_getlength(s->source);

    if (len < 0) {
        error_setg_errno(errp, -len, "Could not get the length of node "
                         "'%s'", bdrv_get_node_name(s->source));
        return false;
    }
    if (is_commit && bdrv_is_read_only(s->target)) {
        if (bdrv_reopen_set_read_only(s->target, false, errp) < 0) {
            return false;
        }
        s->base_was_read_only = true;
    }
    /*
     * The job reads through its filter, as QEMU's: the source has no
     * BlockBackend of the job's (blockdev-del says it is busy instead).
     */
    s->source_blk = blk_new_with_bs(s->filter, BLK_PERM_CONSISTENT_READ,
                                    BLK_PERM_CONSISTENT_READ |
                                    BLK_PERM_WRITE |
                                    BLK_PERM_WRITE_UNCHANGED, errp);
    if (!s->source_blk) {
        return false;
    }
    /*
     * QEMU's sharing: a mirror's target is inconsistent until the end,
     * nobody else reads it; the base of a commit is read by its overlays
     * and written by the job alone, whose writes the chain already shows.
     */
    s->target_blk = blk_new_with_bs(s->target,
                                    is_commit ? BLK_PERM_WRITE_UNCHANGED |
                                                BLK_PERM_RESIZE :
                                                BLK_PERM_WRITE,
                                    BLK_PERM_WRITE_UNCHANGED |
                                    (is_commit ? BLK_PERM_CONSISTENT_READ |
                                                 BLK_PERM_WRITE : 0), errp);
    if (!s->target_blk) {
        return false;
    }
    blk_set_allow_write_beyond_eof(s->target_blk, is_commit);
    s->dirty_bitmap = bdrv_create_dirty_bitmap(s->source,
                                               s->opts.granularity, NULL,
                                               errp);
    if (!s->dirty_bitmap) {
        return false;
    }
    if (s->opts.write_blocking) {
        /* the hook marks what it could not copy (invariant 5), as QEMU */
        bdrv_disable_dirty_bitmap(s->dirty_bitmap);
        s->hook.after_write = mirror_after_write;
        bdrv_add_write_hook(s->source, &s->hook);
        s->hook_added = true;
    }
    return true;
}

/*
 * The nodes QEMU's mirror forbids the monitor's operations on: its
 * filter, the source and the target; an active commit also the nodes
 * between the top and the base, which leave the chain at its end.
 */
static void mirror_block_nodes(MirrorJob *s, bool is_commit)
{
    block_job_block_node(&s->common, s->filter);
    block_job_block_node(&s->common, s->source);
    block_job_block_node(&s->common, s->target);
    for (BlockDriverState *n = bdrv_backing_chain_next(s->source);
         is_commit && n && n != s->target; n = bdrv_backing_chain_next(n)) {
        block_job_block_node(&s->common, n);
    }
}

/*
 * An active commit's nodes between the top and the base leave the chain
 * at its end: QEMU's commit shares writes on them (which it would block
 * at the base otherwise), but no consistent read.
 */
static int mirror_add_intermediate(MirrorJob *s, Error **errp)
{
    for (BlockDriverState *n = bdrv_backing_chain_next(s->source);
         n && n != s->target; n = bdrv_backing_chain_next(n)) {
        int ret = block_job_add_bdrv(&s->common, "intermediate node", n, 0,
                                     BLK_PERM_WRITE_UNCHANGED |
                                     BLK_PERM_WRITE, errp);

        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

static bool mirror_do_start(const JobDriver *driver, const char *job_id,
                            BlockDriverState *source,
                            BlockDriverState *target,
                            BlockDriverState *base, const MirrorOptions *opts,
                            Error **errp)
{
    bool is_commit = driver == &commit_active_job_driver;
    BlockDriverState *filter;
    MirrorJob *s;

    /* invariant 8, with QEMU's message if the target cannot move */
    if (bdrv_try_change_aio_context(target, bdrv_get_aio_context(source),
                                    NULL, errp) < 0) {
        return false;
    }
    /* QEMU's order: the filter (and its node name) before the job */
    filter = job_filter_insert(is_commit ? JOB_FILTER_MIRROR_TOP_COMMIT :
                                           JOB_FILTER_MIRROR_TOP,
                               source, NULL, opts->filter_node_name, errp);
    if (!filter) {
        bdrv_leave_unused_aio_context(target);
        return false;
    }
    s = block_job_create(job_id, driver, source, 0, BLK_PERM_ALL,
                         opts->speed, opts->job_flags, errp);
    if (!s) {
        job_filter_drop(filter);
        bdrv_leave_unused_aio_context(target);
        return false;
    }
    s->filter = filter;
    s->source = source;
    s->target = target;
    s->base = base;
    s->opts = *opts;
    s->opts.replaces = NULL;
    s->opts.filter_node_name = NULL;
    s->to_replace = opts->replaces ? opts->replaces : source;
    if (!s->opts.granularity) {
        BlockDriverInfo bdi;

        s->opts.granularity = MIRROR_DEFAULT_GRANULARITY;
        if (bdrv_get_info(target, &bdi) == 0 && bdi.cluster_size > 0) {
            s->opts.granularity = MAX(4096, bdi.cluster_size);
        }
    }
    if (!s->opts.buf_size) {
        s->opts.buf_size = MIRROR_DEFAULT_BUF_SIZE;
    }
    s->opts.buf_size = MAX(s->opts.buf_size, s->opts.granularity);
    /* invariant 6: a large buf-size is spread over the copies in flight */
    s->max_io_bytes = MIN(MAX(s->opts.buf_size / MIRROR_MAX_IN_FLIGHT,
                              MIRROR_MAX_IO_BYTES), s->opts.buf_size);
    s->max_io_bytes = MAX(QEMU_ALIGN_DOWN(s->max_io_bytes,
                                          s->opts.granularity),
                          s->opts.granularity);
    qemu_co_queue_init(&s->op_done);
    /* the filter is the job's too: another job's drain of it pauses it */
    if (block_job_add_bdrv(&s->common, "filter", filter, 0, BLK_PERM_ALL,
                           errp) < 0 ||
        block_job_add_bdrv(&s->common, "target", target, 0, BLK_PERM_ALL,
                           errp) < 0 ||
        (is_commit && mirror_add_intermediate(s, errp) < 0) ||
        !mirror_setup(s, is_commit, errp)) {
        job_early_fail(&s->common.job);
        bdrv_leave_unused_aio_context(target);      /* invariant 8 */
        return false;
    }
    mirror_block_nodes(s, is_commit);
    job_start(&s->common.job);
    return true;
}

bool mirror_start(const char *job_id, BlockDriverState *source,
                  BlockDriverState *target, const MirrorOptions *opts,
                  Error **errp)
{
    BlockDriverState *base = opts->sync == MIRROR_SYNC_TOP ?
                             bdrv_backing_chain_next(source) : NULL;

    return mirror_do_start(&mirror_job_driver, job_id, source, target, base,
                           opts, errp);
}

bool commit_active_start(const char *job_id, BlockDriverState *top,
                         BlockDriverState *base, const MirrorOptions *opts,
                         Error **errp)
{
    MirrorOptions o = *opts;

    o.sync = MIRROR_SYNC_FULL;
    o.replaces = top;
    return mirror_do_start(&commit_active_job_driver, job_id, top, base,
                           base, &o, errp);
}
