/*
 * blockdev-mirror, and the active block-commit built on it: copies a
 * source node to a target while guests keep writing to the source, goes
 * READY once the target holds all of it, and on job-complete moves the
 * source's users over to the target (the pivot).
 *
 * Dirty tracking: a bitmap of the source, one bit per `granularity`
 * bytes, marked by a write hook on the source (io.c invariant 7) after
 * each guest write reached it.  The job's loop clears a run of marks,
 * then copies that range (data, or zeroes where the source reads as
 * zeroes, so the target stays sparse).
 *
 * Invariants:
 *  1. A range is marked dirty after every write to it landed on the
 *     source, and the job clears a mark before it reads the range; so a
 *     write racing a copy either is read by it or leaves the mark set,
 *     and is copied again: never lost.
 *  2. At most one operation (the job's copy, or in write-blocking mode a
 *     guest write's copy) works on any byte of the target at a time:
 *     each waits for the overlapping ones in s->ops to finish first, so
 *     an older copy never lands on the target after a newer one.
 *  3. A failed read or write marks its range dirty again; the policy
 *     (on-source-error for reads, on-target-error for writes) decides
 *     whether the job fails, pauses or goes on.
 *  4. The job ends its run with the source drained and no range dirty
 *     (when completed, or cancelled softly once READY), so that the
 *     target holds exactly the source's data; the drain lasts until
 *     prepare (the pivot) or abort, so no write slips in between.
 *  5. The write hook is on the source from mirror_start() until clean.
 */
#include "job/block-jobs.h"

#include "block/block.h"
#include "block/block_int.h"

/* QEMU's defaults: 16 MiB of copies in flight, and a 64 KiB granularity
 * for targets without a cluster size of their own. */
#define MIRROR_DEFAULT_BUF_SIZE (16 * MiB)
#define MIRROR_DEFAULT_GRANULARITY (64 * KiB)
/* The most one copy takes at once (QEMU's), so that pauses, cancels and
 * the rate limit act between copies of a reasonable size. */
#define MIRROR_MAX_IO_BYTES (1 * MiB)
/* How often a job with nothing to copy looks again (QEMU's slice). */
#define MIRROR_IDLE_NS (100 * 1000 * 1000LL)

typedef struct MirrorOp {
    int64_t offset;
    int64_t bytes;
    CoQueue waiters;
} MirrorOp;

typedef struct MirrorJob {
    BlockJob common;
    BlockBackend *source_blk;
    BlockBackend *target_blk;
    BlockDriverState *source;
    BlockDriverState *target;
    /* the node whose users move to the target on complete */
    BlockDriverState *to_replace;
    /* data at and below base is not copied (sync=top, commit) */
    BlockDriverState *base;
    MirrorOptions opts;
    BdrvWriteHook hook;             /* invariant 5 */
    bool hook_added;

    /* the dirty bitmap (invariant 1) */
    uint64_t *dirty;
    int64_t nb_bits;
    int64_t dirty_count;
    int64_t cursor;                 /* the bit the next copy starts from */
    int64_t len;

    GSList *ops;                    /* MirrorOp *, invariant 2 */
    bool dirty_initialised;         /* what to copy first is marked */
    bool should_complete;           /* job-complete: pivot */
    bool in_drain;                  /* invariant 4 */
    bool base_was_read_only;
    int ret;                        /* the first reported error */
} MirrorJob;

/* ---------------------------------------------------------------------- */
/* The dirty bitmap */

static void mirror_dirty_range(MirrorJob *s, int64_t offset, int64_t bytes,
                               bool set)
{
    int64_t first = offset / s->opts.granularity;
    int64_t last = DIV_ROUND_UP(offset + bytes, s->opts.granularity);

    for (int64_t i = first; i < MIN(last, s->nb_bits); i++) {
        uint64_t bit = 1ULL << (i % 64);
        bool was = s->dirty[i / 64] & bit;

        if (set && !was) {
            s->dirty[i / 64] |= bit;
            s->dirty_count++;
        } else if (!set && was) {
            s->dirty[i / 64] &= ~bit;
            s->dirty_count--;
        }
    }
}

static bool mirror_dirty_test(MirrorJob *s, int64_t i)
{
    return s->dirty[i / 64] & (1ULL << (i % 64));
}

/* The first dirty bit at or after @from (wrapping), or -1. */
static int64_t mirror_dirty_next(MirrorJob *s, int64_t from)
{
    for (int64_t n = 0; n < s->nb_bits; n++) {
        int64_t i = (from + n) % s->nb_bits;

        if (!s->dirty[i / 64]) {
            /* skip the rest of an empty word */
            n += 63 - i % 64;
            continue;
        }
        if (mirror_dirty_test(s, i)) {
            return i;
        }
    }
    return -1;
}

static bool mirror_range_dirty(MirrorJob *s, int64_t offset, int64_t bytes)
{
    int64_t first = offset / s->opts.granularity;
    int64_t last = DIV_ROUND_UP(offset + bytes, s->opts.granularity);

    for (int64_t i = first; i < MIN(last, s->nb_bits); i++) {
        if (mirror_dirty_test(s, i)) {
            return true;
        }
    }
    return false;
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

    mirror_dirty_range(s, offset, bytes, true);
    action = block_job_error_action(&s->common,
                                    is_read ? s->opts.on_source_error :
                                              s->opts.on_target_error,
                                    is_read, -ret);
    if (action == BLOCK_ERROR_ACTION_REPORT && !s->ret) {
        s->ret = ret;
    }
}

/*
 * One copy: the next run of dirty bits from the cursor, up to buf-size
 * and MIRROR_MAX_IO_BYTES (a granule at least).
 */
static int64_t coroutine_fn mirror_iteration(MirrorJob *s, void *buf)
{
    int64_t gran = s->opts.granularity;
    int64_t first = mirror_dirty_next(s, s->cursor);
    int64_t n = 0, offset, bytes, copied;
    MirrorOp *op;
    bool is_read;

    if (first < 0) {
        return 0;
    }
    while (first + n < s->nb_bits && mirror_dirty_test(s, first + n) &&
           (n + 1) * gran <= MIN(s->opts.buf_size, MIRROR_MAX_IO_BYTES)) {
        n++;
    }
    n = MAX(n, 1);
    offset = first * gran;
    bytes = MIN(n * gran, s->len - offset);
    /* invariant 1: cleared before the read */
    mirror_dirty_range(s, offset, bytes, false);
    op = mirror_op_begin(s, offset, bytes);
    copied = 0;
    while (copied < bytes) {
        int64_t ret = mirror_copy(s, offset + copied, bytes - copied, buf,
                                  &is_read);

        if (ret < 0) {
            mirror_handle_error(s, offset + copied, bytes - copied, is_read,
                                ret);
            break;
        }
        copied += ret;
    }
    mirror_op_end(s, op);
    s->cursor = first + n;
    job_progress_update(&s->common.job, copied);
    return copied;
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
        mirror_dirty_range(s, offset, bytes, true);
        mirror_op_end(s, op);
        return;
    }
    ret = blk_co_pwritev(s->target_blk, offset, bytes, qiov, 0);
    if (ret < 0) {
        mirror_dirty_range(s, offset, bytes, true);
    }
    mirror_op_end(s, op);
}

static void coroutine_fn mirror_after_write(BdrvWriteHook *hook,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov, int ret)
{
    MirrorJob *s = container_of(hook, MirrorJob, hook);

    if (s->opts.write_blocking && ret == 0 && s->dirty_initialised) {
        mirror_active_write(s, offset, bytes, qiov);
    } else {
        mirror_dirty_range(s, offset, bytes, true);   /* invariant 1 */
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
    if (!s->base && !bdrv_has_zero_init(s->target)) {
        /* every range, zeroes included, must reach the target */
        mirror_dirty_range(s, 0, s->len, true);
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
            mirror_dirty_range(s, offset, pnum, true);
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
    if (s->dirty_count == 0 && !s->ops) {
        s->in_drain = true;
        return true;
    }
    bdrv_drained_end(s->source);
    return false;
}

static int coroutine_fn mirror_run(Job *job, Error **errp)
{
    MirrorJob *s = (MirrorJob *)job;
    g_autofree void *buf = NULL;
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
    buf = blk_blockalign(s->source_blk, s->opts.buf_size);

    for (;;) {
        bool should_complete;
        int64_t copied = 0;

        if (s->ret) {
            break;
        }
        job_progress_set_remaining(job, s->dirty_count *
                                        s->opts.granularity);
        if (s->dirty_count > 0) {
            copied = mirror_iteration(s, buf);
        }
        if (s->dirty_count == 0 && !s->ops && !job_is_ready(job) &&
            !job_is_cancelled(job)) {
            job_transition_to_ready(job);
        }
        should_complete = job_is_ready(job) &&
                          (s->should_complete || job_cancel_requested(job));
        if (s->dirty_count == 0 && should_complete && !s->ret &&
            mirror_converged(s)) {
            break;
        }
        if (job_is_cancelled(job)) {
            break;
        }
        delay = copied ? job_ratelimit_delay(job, copied) :
                s->dirty_count == 0 ? MIRROR_IDLE_NS : 0;
        job_sleep_ns(job, delay);
        if (job_is_cancelled(job)) {
            break;
        }
    }
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
    if (s->should_complete && s->in_drain) {
        ret = bdrv_flush(s->target);
        if (ret == 0 &&
            block_job_replace_node(s->to_replace, s->target, &err) < 0) {
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
    block_job_remove_all_bdrv(&s->common);
}

static void mirror_free(Job *job)
{
    MirrorJob *s = (MirrorJob *)job;

    mirror_clean(job);
    g_free(s->dirty);
}

static const JobDriver mirror_job_driver = {
    .instance_size = sizeof(MirrorJob),
    .job_type = "mirror",
    .run = mirror_run,
    .complete = mirror_complete,
    .soft_cancel_completes = true,
    .prepare = mirror_prepare,
    .abort = mirror_abort,
    .clean = mirror_clean,
    .free = mirror_free,
    .listener = &block_job_listener,
};

/* The active commit: a mirror of the top into the base, typed commit. */
static const JobDriver commit_active_job_driver = {
    .instance_size = sizeof(MirrorJob),
    .job_type = "commit",
    .run = mirror_run,
    .complete = mirror_complete,
    .soft_cancel_completes = true,
    .prepare = mirror_prepare,
    .abort = mirror_abort,
    .clean = mirror_clean,
    .free = mirror_free,
    .listener = &block_job_listener,
};

static BlockBackend *mirror_new_blk(BlockDriverState *bs, uint64_t perm,
                                    uint64_t shared, Error **errp)
{
    BlockBackend *blk = blk_new(bdrv_get_aio_context(bs), perm, shared);

    if (blk_insert_bs(blk, bs, errp) < 0) {
        blk_unref(blk);
        return NULL;
    }
    return blk;
}

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
    s->source_blk = mirror_new_blk(s->source, BLK_PERM_CONSISTENT_READ,
                                   BLK_PERM_CONSISTENT_READ |
                                   BLK_PERM_WRITE |
                                   BLK_PERM_WRITE_UNCHANGED, errp);
    if (!s->source_blk) {
        return false;
    }
    s->target_blk = mirror_new_blk(s->target,
                                   is_commit ? BLK_PERM_WRITE_UNCHANGED |
                                               BLK_PERM_RESIZE :
                                               BLK_PERM_WRITE,
                                   BLK_PERM_CONSISTENT_READ |
                                   BLK_PERM_WRITE_UNCHANGED |
                                   (is_commit ? BLK_PERM_WRITE : 0), errp);
    if (!s->target_blk) {
        return false;
    }
    blk_set_allow_write_beyond_eof(s->target_blk, is_commit);
    s->nb_bits = DIV_ROUND_UP(len, s->opts.granularity);
    s->dirty = g_new0(uint64_t, DIV_ROUND_UP(MAX(s->nb_bits, 1), 64));
    s->hook.after_write = mirror_after_write;
    bdrv_add_write_hook(s->source, &s->hook);
    s->hook_added = true;
    return true;
}

static bool mirror_do_start(const JobDriver *driver, const char *job_id,
                            BlockDriverState *source,
                            BlockDriverState *target,
                            BlockDriverState *base, const MirrorOptions *opts,
                            Error **errp)
{
    bool is_commit = driver == &commit_active_job_driver;
    MirrorJob *s;

    s = block_job_create(job_id, driver, source, 0, BLK_PERM_ALL,
                         opts->speed, opts->job_flags, errp);
    if (!s) {
        return false;
    }
    s->source = source;
    s->target = target;
    s->base = base;
    s->opts = *opts;
    s->opts.replaces = NULL;
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
    if (block_job_add_bdrv(&s->common, "target", target, 0, BLK_PERM_ALL,
                           errp) < 0 ||
        !mirror_setup(s, is_commit, errp)) {
        job_early_fail(&s->common.job);
        return false;
    }
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
