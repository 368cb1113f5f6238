/*
 * copy-before-write: a filter that, before a write changes its child
 * (the source), copies the old data of the clusters concerned to a
 * target node, once per cluster: the target then holds the source as it
 * was when the filter was put in place, wherever the source changed
 * since (QEMU 7.2's "copy-before-write" driver, on which blockdev-backup
 * and image fleecing are built).
 *
 * Options: "file" (the source), "target", "on-cbw-error"
 * (break-guest-write: a failed copy fails the guest's write, which then
 * changes nothing; break-snapshot: the write goes on, and the target no
 * longer holds a point-in-time image: no copy is made from then on),
 * "cbw-timeout" (seconds a write waits for its copy; running out counts
 * as a failed copy) and "bitmap" (a dirty bitmap, node and name, read
 * once at open: only the clusters it marks dirty then are copied, and
 * only they can be read as the snapshot; the bitmap itself is not
 * touched, and may change or go afterwards, as in QEMU 7.2).  Image
 * fleecing for an incremental backup: the snapshot holds what changed
 * since the bitmap's checkpoint, the target only what guests overwrote
 * of that.
 *
 * Invariants (s = the node's BDRVCopyBeforeWriteState):
 *  1. A cluster's bit in s->done is set only once its old data is in the
 *     target.  A guest write, zero write or discard reaches the source
 *     only after every cluster it touches is done, or after the snapshot
 *     was broken (s->snapshot_error), or when it failed itself.
 *  2. At most one copy of a cluster is in flight (s->copies): a request
 *     that needs a cluster another one is copying waits for that copy
 *     and looks again, so a cluster is read from the source before any
 *     write reaches it and written to the target once.
 *  3. Writes flagged BDRV_REQ_WRITE_UNCHANGED (copy-on-read, a stream)
 *     change no data: they are not copied.
 *  4. The target is at least as long as the source, checked at open (the
 *     copy could not hold the source otherwise; QEMU 7.2 accepts a
 *     shorter target and fails an assertion at the first write past its
 *     end).
 *  5. The snapshot (cbw_co_preadv_snapshot, for snapshot-access) reads a
 *     done cluster from the target and any other from the source; while
 *     it reads clusters from the source they are in s->frozen, and a
 *     guest request whose clusters are done waits for the frozen reads
 *     that overlap them before it changes the source.  Once the snapshot
 *     is broken, it reads -EACCES.
 *  6. A cluster that a backup job leaves out (cbw_skip(): sync=top skips
 *     what the source's backing chain holds, sync=bitmap what the bitmap
 *     does not mark) counts as done: it is never copied, and
 *     cbw_next_needed() does not offer it.
 *  7. With the "bitmap" option, a cluster the bitmap left clean at open
 *     counts as done (never copied) and is outside the snapshot: s->access
 *     lacks its bit, and a snapshot read or block status that touches it
 *     fails with -EACCES before anything is read (its "done" would send
 *     the read to the target, which never got its data).  So does a
 *     cluster a backup job skips (invariant 6): the source may change
 *     under it uncopied.  s->access is NULL while every cluster can be
 *     read; a bit once cleared stays so.
 *  8. A cluster the backup tool discarded from the snapshot
 *     (cbw_co_pdiscard_snapshot()) is done and outside the snapshot as
 *     in invariant 7, once the copy in flight that has it (if any)
 *     finished: so no copy writes its target after its discard, and a
 *     guest write there is not copied.
 *
 * Everything runs in the node's AioContext; the state is touched only
 * between yields, so it needs no lock.
 */

#include "copy-before-write.h"

#include "block-internal.h"
#include "block/dirty-bitmap.h"

#include "qapi/qapi-opts.h"
#include "util/buffer-pool.h"
#include "util/cutils.h"

/* QEMU's block-copy default: a cluster size no smaller than this */
#define CBW_CLUSTER_SIZE_DEFAULT (64 * KiB)

/*
 * Copy buffers kept between copies: a backup job's 1 MiB buffer freshly
 * allocated per copy is a fresh mapping whose 256 pages each fault and
 * are zeroed by the kernel, a quarter more memory traffic than the copy
 * itself (docs/performance.md, "Block jobs").  64 MiB is what a backup
 * job has in flight with QEMU's defaults (64 workers of 1 MiB), so a job
 * allocates its buffers once; the pool goes with the filter at the job's
 * end.  A filter that only copies guest writes' clusters keeps far less.
 */
#define CBW_IDLE_BUFFERS (64 * MiB)

typedef enum CbwOnError {
    CBW_BREAK_GUEST_WRITE,
    CBW_BREAK_SNAPSHOT,
} CbwOnError;

/*
 * A copy in flight: clusters [first, end) (invariant 2).  Its coroutine
 * holds a reference until it ends, and so does each request waiting for
 * it, so that a request that gave up waiting (cbw-timeout) leaves the
 * copy to finish on its own.
 */
typedef struct CbwCopy {
    int64_t first, end;
    int refcnt;
    bool finished;
    int ret;                    /* once finished */
    bool read_failed;           /* ret < 0 came from the source */
    CoQueue waiters;
} CbwCopy;

typedef struct BDRVCopyBeforeWriteState {
    /* --- set at open, immutable until close --- */
    BdrvChild *target;
    int64_t cluster_size;
    int64_t nb_clusters;        /* of the source at open */
    CbwOnError on_error;
    int64_t timeout_ns;         /* 0: none */
    guint8 *access;             /* invariant 7: one bit per cluster */
    BufferPool *buffers;        /* the copies' (thread-safe) */

    /* --- set by a backup job before it starts (cbw_set_job_hooks) --- */
    BdrvRequestFlags write_flags;   /* BDRV_REQ_WRITE_COMPRESSED or 0 */
    CbwProgressFn *progress;        /* NULL: nobody counts */
    void *progress_opaque;
    /* cbw_release_source(): the filter is being taken out */
    bool releasing;

    /* --- invariants 1 and 2 --- */
    guint8 *done;               /* one bit per cluster */
    GList *copies;              /* CbwCopy * */
    int snapshot_error;         /* -errno once the snapshot is broken */

    /* --- invariant 5 --- */
    GList *frozen;              /* CbwRange *: snapshot reads of the source */
    CoQueue frozen_queue;       /* guest requests waiting for them */
} BDRVCopyBeforeWriteState;

/* Clusters [first, end) that a snapshot read is reading from the source. */
typedef struct CbwRange {
    int64_t first, end;
} CbwRange;

static bool cbw_frozen(BDRVCopyBeforeWriteState *s, int64_t first,
                       int64_t end)
{
    for (GList *l = s->frozen; l; l = l->next) {
        CbwRange *r = l->data;

        if (r->first < end && first < r->end) {
            return true;
        }
    }
    return false;
}

static bool cbw_done(BDRVCopyBeforeWriteState *s, int64_t c)
{
    return s->done[c / 8] & (1u << (c % 8));
}

static void cbw_set_done(BDRVCopyBeforeWriteState *s, int64_t first,
                         int64_t end)
{
    for (int64_t c = first; c < end; c++) {
        s->done[c / 8] |= 1u << (c % 8);
    }
}

/* Invariant 7: may [first, end) be read as the snapshot? */
static bool cbw_accessible(BDRVCopyBeforeWriteState *s, int64_t first,
                           int64_t end)
{
    if (!s->access) {
        return true;
    }
    for (int64_t c = first; c < end; c++) {
        if (!(s->access[c / 8] & (1u << (c % 8)))) {
            return false;
        }
    }
    return true;
}

/*
 * Invariant 7: [first, end) leaves the snapshot (its clusters are done but
 * their data never reaches the target).
 */
static void cbw_set_inaccessible(BDRVCopyBeforeWriteState *s, int64_t first,
                                 int64_t end)
{
    if (!s->access) {
        s->access = g_malloc(DIV_ROUND_UP(s->nb_clusters, 8) + 1);
        memset(s->access, 0xff, DIV_ROUND_UP(s->nb_clusters, 8) + 1);
    }
    for (int64_t c = first; c < end; c++) {
        s->access[c / 8] &= ~(1u << (c % 8));
    }
}

static CbwCopy *cbw_find_copy(BDRVCopyBeforeWriteState *s, int64_t c)
{
    for (GList *l = s->copies; l; l = l->next) {
        CbwCopy *copy = l->data;

        if (c >= copy->first && c < copy->end) {
            return copy;
        }
    }
    return NULL;
}

/* ---- the copy ---- */

/*
 * Copies [offset, +bytes) of the source to the target, zeroes as such.
 * *@read_failed tells a failure of the source from one of the target
 * (the backup job's on-source-error and on-target-error).
 */
static int coroutine_fn cbw_copy_range(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, bool *read_failed)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t end = offset + bytes;

    while (offset < end) {
        int64_t n;
        int ret = bdrv_co_block_status_above(bs->file->bs, NULL, true,
                                             offset, end - offset, &n,
                                             NULL, NULL, NULL);

        if (ret < 0) {
            *read_failed = true;
            return ret;
        }
        if (ret & BDRV_BLOCK_ZERO) {
            ret = bdrv_co_pwrite_zeroes(s->target, offset, n, 0);
        } else {
            void *buf = buffer_pool_try_get(s->buffers,
                                            bdrv_opt_mem_align(bs), n);
            QEMUIOVector qiov;

            if (!buf) {
                return -ENOMEM;
            }
            qemu_iovec_init_buf(&qiov, buf, n);
            ret = bdrv_co_preadv(bs->file, offset, n, &qiov, 0);
            if (ret < 0) {
                *read_failed = true;
            } else {
                ret = bdrv_co_pwritev(s->target, offset, n, &qiov,
                                      s->write_flags);
            }
            buffer_pool_put(s->buffers, buf, n);
            if (*read_failed) {
                return ret;
            }
        }
        if (ret < 0) {
            return ret;
        }
        offset += n;
    }
    return 0;
}

static void cbw_copy_unref(CbwCopy *copy)
{
    if (--copy->refcnt == 0) {
        g_free(copy);
    }
}

/* What a request waiting for a copy needs to see it finish or time out. */
typedef struct CbwWait {
    CbwCopy *copy;
    int64_t deadline;           /* QEMU_CLOCK_REALTIME ns; 0: none */
} CbwWait;

static void cbw_wait_timer_cb(void *opaque)
{
    CbwWait *w = opaque;

    /* every waiter looks at its own deadline again */
    qemu_co_queue_restart_all(&w->copy->waiters);
}

/*
 * Waits until @copy has finished: its result, or -ETIMEDOUT if @deadline
 * passed first (the copy goes on; its clusters count as done only if it
 * succeeds).  The caller holds a reference to @copy.
 */
static int coroutine_fn cbw_wait_copy(BlockDriverState *bs, CbwCopy *copy,
                                      int64_t deadline)
{
    CbwWait w = { .copy = copy, .deadline = deadline };
    QEMUTimer *timer = NULL;
    int ret = 0;

    if (deadline && !copy->finished) {
        timer = aio_timer_new(bdrv_get_aio_context(bs), QEMU_CLOCK_REALTIME,
                              SCALE_NS, cbw_wait_timer_cb, &w);
        timer_mod(timer, deadline);
    }
    while (!copy->finished) {
        if (deadline && qemu_clock_get_ns(QEMU_CLOCK_REALTIME) >= deadline) {
            ret = -ETIMEDOUT;
            break;
        }
        qemu_co_queue_wait(&copy->waiters, NULL);
    }
    if (timer) {
        timer_del(timer);
        timer_free(timer);
    }
    return ret ? ret : copy->ret;
}

typedef struct CbwCopyTask {
    BlockDriverState *bs;
    CbwCopy *copy;
} CbwCopyTask;

/*
 * Invariant 2: one copy per run of clusters, in a coroutine of its own.
 * Its reads and writes count in the children's in-flight counters, so a
 * drain of the node waits for it also after its requester left.
 */
static void coroutine_fn cbw_copy_co(void *opaque)
{
    CbwCopyTask *task = opaque;
    BlockDriverState *bs = task->bs;
    BDRVCopyBeforeWriteState *s = bs->opaque;
    CbwCopy *copy = task->copy;
    int64_t offset = copy->first * s->cluster_size;
    int64_t bytes = MIN(copy->end * s->cluster_size,
                        s->nb_clusters * s->cluster_size) - offset;

    g_free(task);
    bytes = MIN(bytes, bdrv_getlength(bs->file->bs) - offset);
    copy->ret = bytes > 0 ? cbw_copy_range(bs, offset, bytes,
                                           &copy->read_failed) : 0;
    if (copy->ret == 0) {
        cbw_set_done(s, copy->first, copy->end);     /* invariant 1 */
        if (s->progress) {
            s->progress(s->progress_opaque,
                        (copy->end - copy->first) * s->cluster_size);
        }
    }
    s->copies = g_list_remove(s->copies, copy);
    copy->finished = true;
    qemu_co_queue_restart_all(&copy->waiters);
    cbw_copy_unref(copy);
}

/*
 * Starts copying the clusters from @c on that are neither done nor being
 * copied (up to @end at most).  The copy is returned with a reference for
 * the caller.
 */
static CbwCopy *cbw_start_copy(BlockDriverState *bs, int64_t c, int64_t end)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    CbwCopy *copy = g_new0(CbwCopy, 1);
    CbwCopyTask *task = g_new0(CbwCopyTask, 1);
    int64_t e = c + 1;

    while (e < end && !cbw_done(s, e) && !cbw_find_copy(s, e)) {
        e++;
    }
    copy->first = c;
    copy->end = e;
    copy->refcnt = 2;           /* its coroutine's and the caller's */
    qemu_co_queue_init(&copy->waiters);
    s->copies = g_list_prepend(s->copies, copy);
    task->bs = bs;
    task->copy = copy;
    aio_co_enter(bdrv_get_aio_context(bs),
                 qemu_coroutine_create(cbw_copy_co, task));
    return copy;
}

/*
 * Invariants 1 and 2: copies clusters [c, end) that are not done yet,
 * or waits for the copies in flight that have them.  0 once all are
 * done, else the first failure of this caller's own copy (with
 * *@read_failed) or -ETIMEDOUT when @deadline passed.
 */
static int coroutine_fn cbw_copy_clusters(BlockDriverState *bs, int64_t c,
                                          int64_t end, int64_t deadline,
                                          bool *read_failed)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int ret = 0;

    while (c < end && !s->snapshot_error) {
        CbwCopy *copy;
        bool own = false;

        if (cbw_done(s, c)) {
            c++;
            continue;
        }
        copy = cbw_find_copy(s, c);
        if (copy) {
            copy->refcnt++;
        } else {
            copy = cbw_start_copy(bs, c, end);
            own = true;
        }
        ret = cbw_wait_copy(bs, copy, deadline);
        *read_failed = copy->read_failed;
        cbw_copy_unref(copy);
        /*
         * Another request's copy that failed is tried again by this one
         * (the cluster is not done); this one's own failure, or a
         * timeout, ends it.
         */
        if (ret < 0 && (own || ret == -ETIMEDOUT)) {
            break;
        }
        ret = 0;
    }
    return ret;
}

/* Invariants 1 to 3: makes sure the old data of a range is in the target. */
static int coroutine_fn cbw_copy_before_write(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              BdrvRequestFlags flags)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t deadline = s->timeout_ns ?
        qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + s->timeout_ns : 0;
    bool read_failed = false;
    int64_t end;
    int ret;

    if ((flags & BDRV_REQ_WRITE_UNCHANGED) || s->snapshot_error ||
        bytes <= 0) {
        return 0;
    }
    end = MIN(DIV_ROUND_UP(offset + bytes, s->cluster_size), s->nb_clusters);
    ret = cbw_copy_clusters(bs, offset / s->cluster_size, end, deadline,
                            &read_failed);
    if (ret < 0 && s->on_error == CBW_BREAK_SNAPSHOT) {
        /* the write goes on; the target no longer holds a snapshot */
        s->snapshot_error = ret;
        ret = 0;
    }
    /* invariant 5: a snapshot read of the old data must finish first */
    while (ret == 0 && cbw_frozen(s, offset / s->cluster_size, end)) {
        qemu_co_queue_wait(&s->frozen_queue, NULL);
    }
    return ret;
}

/* ---- the snapshot, for snapshot-access ---- */

bool cbw_is_filter(BlockDriverState *bs)
{
    return bs->drv && !strcmp(bs->drv->format_name, "copy-before-write");
}

/* Reads clusters [c, e) of the snapshot into @qiov at @qoff (invariant 5). */
static int coroutine_fn cbw_read_run(BlockDriverState *bs, int64_t c,
                                     int64_t e, bool done, int64_t offset,
                                     int64_t bytes, QEMUIOVector *qiov)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t start = MAX(offset, c * s->cluster_size);
    int64_t stop = MIN(offset + bytes, e * s->cluster_size);
    CbwRange r = { .first = c, .end = e };
    QEMUIOVector part;
    int ret;

    qemu_iovec_init_slice(&part, qiov, start - offset, stop - start);
    if (done) {
        ret = bdrv_co_preadv(s->target, start, stop - start, &part, 0);
    } else {
        s->frozen = g_list_prepend(s->frozen, &r);
        ret = bdrv_co_preadv(bs->file, start, stop - start, &part, 0);
        s->frozen = g_list_remove(s->frozen, &r);
        qemu_co_queue_restart_all(&s->frozen_queue);
    }
    qemu_iovec_destroy(&part);
    return ret;
}

int coroutine_fn cbw_co_preadv_snapshot(BlockDriverState *bs,
                                        int64_t offset, int64_t bytes,
                                        QEMUIOVector *qiov)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t c = offset / s->cluster_size;
    int64_t end = MIN(DIV_ROUND_UP(offset + bytes, s->cluster_size),
                      s->nb_clusters);

    if (!cbw_accessible(s, c, end)) {
        return -EACCES;         /* invariant 7 */
    }
    while (c < end) {
        CbwCopy *copy = cbw_find_copy(s, c);
        bool done = cbw_done(s, c);
        int64_t e = c + 1;
        int ret;

        if (s->snapshot_error) {
            return -EACCES;
        }
        if (copy) {
            /* done or not, the cluster reads alike after the copy */
            copy->refcnt++;
            cbw_wait_copy(bs, copy, 0);
            cbw_copy_unref(copy);
            continue;
        }
        while (e < end && cbw_done(s, e) == done && !cbw_find_copy(s, e)) {
            e++;
        }
        ret = cbw_read_run(bs, c, e, done, offset, bytes, qiov);
        if (ret < 0) {
            return ret;
        }
        c = e;
    }
    /* broken while it read: what it read may be new data */
    return s->snapshot_error ? -EACCES : 0;
}

/*
 * Invariants 5 and 7: the status of the snapshot's first run of clusters
 * from @offset that are all copied (the target's status) or all not (the
 * source's, read while they are frozen).
 */
int coroutine_fn cbw_co_snapshot_block_status(BlockDriverState *bs,
                                              bool want_zero,
                                              int64_t offset, int64_t bytes,
                                              int64_t *pnum, int64_t *map,
                                              BlockDriverState **file)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t c = offset / s->cluster_size;
    int64_t end = MIN(DIV_ROUND_UP(offset + bytes, s->cluster_size),
                      s->nb_clusters);
    CbwCopy *copy;
    CbwRange r;
    int64_t e;
    bool done;
    int ret;

    /* the cluster reads alike before and after its copy: wait for it */
    while ((copy = cbw_find_copy(s, c))) {
        copy->refcnt++;
        cbw_wait_copy(bs, copy, 0);
        cbw_copy_unref(copy);
    }
    if (s->snapshot_error || !cbw_accessible(s, c, c + 1)) {
        return -EACCES;
    }
    done = cbw_done(s, c);
    e = c + 1;
    while (e < end && cbw_done(s, e) == done && !cbw_find_copy(s, e) &&
           cbw_accessible(s, e, e + 1)) {
        e++;
    }
    bytes = MIN(offset + bytes, e * s->cluster_size) - offset;
    if (done) {
        return bdrv_co_block_status(s->target->bs, want_zero, offset, bytes,
                                    pnum, map, file);
    }
    r = (CbwRange) { .first = c, .end = e };
    s->frozen = g_list_prepend(s->frozen, &r);
    ret = bdrv_co_block_status(bs->file->bs, want_zero, offset, bytes, pnum,
                               map, file);
    s->frozen = g_list_remove(s->frozen, &r);
    qemu_co_queue_restart_all(&s->frozen_queue);
    return ret;
}

/* Invariant 8. */
int coroutine_fn cbw_co_pdiscard_snapshot(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t first = DIV_ROUND_UP(offset, s->cluster_size);
    int64_t end = MIN((offset + bytes) / s->cluster_size, s->nb_clusters);
    int64_t c = first;

    /* as QEMU: only whole clusters leave the snapshot */
    if (first >= end) {
        return 0;
    }
    while (c < end) {
        CbwCopy *copy = cbw_find_copy(s, c);

        if (!copy) {
            c++;
            continue;
        }
        copy->refcnt++;
        cbw_wait_copy(bs, copy, 0);
        cbw_copy_unref(copy);
        c = first;              /* another copy may have started meanwhile */
    }
    cbw_set_done(s, first, end);
    cbw_set_inaccessible(s, first, end);
    return bdrv_co_pdiscard(s->target, first * s->cluster_size,
                            (end - first) * s->cluster_size);
}

/* ---- for the backup job ---- */

int64_t cbw_get_cluster_size(BlockDriverState *bs)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;

    return s->cluster_size;
}

void cbw_set_job_hooks(BlockDriverState *bs, BdrvRequestFlags write_flags,
                       CbwProgressFn *progress, void *opaque)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;

    s->write_flags = write_flags;
    s->progress = progress;
    s->progress_opaque = opaque;
}

/* Invariant 6: only clusters that lie entirely in the range. */
void cbw_skip(BlockDriverState *bs, int64_t offset, int64_t bytes)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t first = DIV_ROUND_UP(offset, s->cluster_size);
    int64_t end = (offset + bytes) / s->cluster_size;

    /* the last cluster may be short: the node's end covers it */
    if (offset + bytes >= bdrv_getlength(bs->file->bs)) {
        end = s->nb_clusters;
    }
    end = MIN(end, s->nb_clusters);
    if (first < end) {
        cbw_set_done(s, first, end);
        cbw_set_inaccessible(s, first, end);
    }
}

int64_t cbw_next_needed(BlockDriverState *bs, int64_t offset,
                        int64_t max_bytes, int64_t *bytes)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t c = offset / s->cluster_size;
    int64_t e, max_clusters = MAX(max_bytes / s->cluster_size, 1);

    while (c < s->nb_clusters && cbw_done(s, c)) {
        c++;
    }
    if (c >= s->nb_clusters) {
        return -1;
    }
    e = c + 1;
    while (e < s->nb_clusters && e - c < max_clusters && !cbw_done(s, e)) {
        e++;
    }
    *bytes = (e - c) * s->cluster_size;
    return c * s->cluster_size;
}

int64_t cbw_needed_bytes(BlockDriverState *bs)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t n = 0;

    for (int64_t c = 0; c < s->nb_clusters; c++) {
        n += !cbw_done(s, c);
    }
    return n * s->cluster_size;
}

void cbw_release_source(BlockDriverState *bs)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;

    s->releasing = true;
    bdrv_refresh_perms(bs, NULL);
}

int coroutine_fn cbw_co_copy(BlockDriverState *bs, int64_t offset,
                             int64_t bytes, bool *read_failed)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t end = MIN(DIV_ROUND_UP(offset + bytes, s->cluster_size),
                      s->nb_clusters);

    *read_failed = false;
    return cbw_copy_clusters(bs, offset / s->cluster_size, end, 0,
                             read_failed);
}

/* ---- open, permissions ---- */

/*
 * The granularity of the copies: the target's cluster size, but no less
 * than QEMU's block-copy default, so that a cluster of the target is
 * never written in part.
 */
static int64_t cbw_cluster_size(BlockDriverState *target)
{
    BlockDriverInfo bdi;

    if (bdrv_get_info(target, &bdi) < 0 || bdi.cluster_size <= 0) {
        return CBW_CLUSTER_SIZE_DEFAULT;
    }
    return MAX(CBW_CLUSTER_SIZE_DEFAULT, bdi.cluster_size);
}

/*
 * "bitmap" (invariant 7): the clusters that @bm leaves clean are done and
 * outside the snapshot.  A cluster is in the copy if any part of it is
 * dirty, whatever the bitmap's granularity.
 */
static void cbw_limit_to_bitmap(BDRVCopyBeforeWriteState *s,
                                const BdrvDirtyBitmap *bm)
{
    size_t nbytes = DIV_ROUND_UP(s->nb_clusters, 8) + 1;
    int64_t len = bdrv_dirty_bitmap_size(bm);
    int64_t pos = 0, start, count;

    memset(s->done, 0xff, nbytes);
    s->access = g_malloc0(nbytes);
    while (bdrv_dirty_bitmap_next_dirty_area(bm, pos, len, INT64_MAX,
                                             &start, &count)) {
        int64_t first = start / s->cluster_size;
        int64_t end = MIN(DIV_ROUND_UP(start + count, s->cluster_size),
                          s->nb_clusters);

        for (int64_t c = first; c < end; c++) {
            s->done[c / 8] &= ~(1u << (c % 8));
            s->access[c / 8] |= 1u << (c % 8);
        }
        pos = start + count;
    }
}

/*
 * "bitmap.node" and "bitmap.name": found, usable and of the source's
 * length, with QEMU 7.2's messages (its copy of the bitmap is a merge,
 * whose errors it prefixes).
 */
static int cbw_open_bitmap(BlockDriverState *bs, const char *node,
                           const char *name, Error **errp)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    BlockDriverState *owner;
    BdrvDirtyBitmap *bm;
    int64_t len = bdrv_getlength(bs->file->bs);
    Error *err = NULL;

    if (!node && !name) {
        return 0;
    }
    if (!node || !name) {
        error_setg(errp, "Parameter 'bitmap.%s' is missing",
                   node ? "name" : "node");
        return -EINVAL;
    }
    owner = bdrv_find_node(node);
    if (!owner) {
        error_setg(errp, "Node '%s' not found", node);
        return -ENOENT;
    }
    bm = bdrv_find_dirty_bitmap(owner, name);
    if (!bm) {
        error_setg(errp, "Dirty bitmap '%s' not found", name);
        return -ENOENT;
    }
    if (bdrv_dirty_bitmap_check(bm, BDRV_BITMAP_ALLOW_RO, &err) < 0) {
        goto merge_failed;
    }
    if (bdrv_dirty_bitmap_size(bm) != len) {
        error_setg(&err, "Bitmaps are of different sizes (destination size "
                   "is %" PRId64 ", source size is %" PRId64 ") and can't "
                   "be merged", len, bdrv_dirty_bitmap_size(bm));
        goto merge_failed;
    }
    cbw_limit_to_bitmap(s, bm);
    return 0;

merge_failed:
    error_prepend(&err, "Cannot create block-copy-state: Failed to merge "
                  "bitmap '%s' to internal copy-bitmap: ", name);
    error_propagate(errp, err);
    return -EINVAL;
}

/* Invariant 4. */
static int cbw_check_target(BlockDriverState *bs, Error **errp)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    int64_t src = bdrv_getlength(bs->file->bs);
    int64_t dst = bdrv_getlength(s->target->bs);

    if (src < 0 || dst < 0) {
        error_setg_errno(errp, -(src < 0 ? src : dst), "Cannot get the "
                         "length of the %s node '%s'",
                         src < 0 ? "source" : "target",
                         bdrv_get_node_name(src < 0 ? bs->file->bs
                                                    : s->target->bs));
        return src < 0 ? src : dst;
    }
    if (dst < src) {
        error_setg(errp, "copy-before-write: the target node '%s' (%" PRId64
                   " bytes) is shorter than the source node '%s' (%" PRId64
                   " bytes)", bdrv_get_node_name(s->target->bs), dst,
                   bdrv_get_node_name(bs->file->bs), src);
        return -EINVAL;
    }
    s->cluster_size = cbw_cluster_size(s->target->bs);
    s->nb_clusters = DIV_ROUND_UP(src, s->cluster_size);
    s->done = g_malloc0(DIV_ROUND_UP(s->nb_clusters, 8) + 1);
    s->buffers = buffer_pool_new(CBW_IDLE_BUFFERS);
    qemu_co_queue_init(&s->frozen_queue);
    return 0;
}

static int cbw_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;
    g_autofree char *bitmap_node = NULL;
    g_autofree char *bitmap_name = NULL;
    BlockDriverState *file;
    QemuOpts *opts;
    int ret;

    opts = qemu_opts_absorb_qdict(&qapi_opts_copy_before_write_runtime,
                                  options, errp);
    if (!opts) {
        return -EINVAL;
    }
    s->on_error = g_strcmp0(qemu_opt_get(opts, "on-cbw-error"),
                            "break-snapshot") ? CBW_BREAK_GUEST_WRITE
                                              : CBW_BREAK_SNAPSHOT;
    s->timeout_ns = qemu_opt_get_number(opts, "cbw-timeout", 0) *
                    (int64_t)1000000000;
    bitmap_node = g_strdup(qemu_opt_get(opts, "bitmap.node"));
    bitmap_name = g_strdup(qemu_opt_get(opts, "bitmap.name"));
    qemu_opts_del(opts);

    /* the source first: a filter's first child is its file */
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    s->target = bdrv_open_child(NULL, options, "target", bs, 0, errp);
    if (!s->target) {
        ret = -EINVAL;
        goto fail;
    }
    ret = cbw_check_target(bs, errp);
    if (ret < 0) {
        goto fail;
    }
    /* as QEMU, the bitmap is looked at once both children are open */
    ret = cbw_open_bitmap(bs, bitmap_node, bitmap_name, errp);
    if (ret < 0) {
        goto fail;
    }
    file = bs->file->bs;
    bs->supported_write_flags = BDRV_REQ_WRITE_UNCHANGED |
        (BDRV_REQ_FUA & file->supported_write_flags);
    bs->supported_zero_flags = BDRV_REQ_WRITE_UNCHANGED |
        ((BDRV_REQ_FUA | BDRV_REQ_MAY_UNMAP | BDRV_REQ_NO_FALLBACK) &
         file->supported_zero_flags);
    return 0;

fail:
    g_clear_pointer(&s->done, g_free);
    g_clear_pointer(&s->buffers, buffer_pool_free);
    if (s->target) {
        bdrv_unref_child(bs, s->target);
        s->target = NULL;
    }
    bdrv_unref_child(bs, bs->file);
    bs->file = NULL;
    return ret;
}

static void cbw_close(BlockDriverState *bs)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;

    /* closing drained the node: no copy or snapshot read is left */
    assert(!s->copies && !s->frozen);
    g_free(s->done);
    g_free(s->access);
    buffer_pool_free(s->buffers);
}

/*
 * The options stay as they were opened; nothing to stage.  The source
 * cannot change (blockdev-reopen's "file"): what the snapshot holds and
 * which clusters are done are the old source's.  QEMU 7.2 refuses every
 * reopen of the filter, with this message.
 */
static int cbw_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    BlockDriverState *bs = state->bs;
    const char *file = qdict_get_try_str(state->options, "file");

    if (qdict_haskey(state->options, "file") &&
        g_strcmp0(file, bs->file->bs->node_name)) {
        error_setg(errp, "Block format '%s' used by node '%s' does not "
                   "support reopening files", bs->drv->format_name,
                   bs->node_name);
        return -ENOTSUP;
    }
    return 0;
}

/*
 * The target is written, and nobody may resize it under the copies; the
 * source passes its parents' use through, and once it has parents that
 * write, is read (the old data) and shared with no other writer, whose
 * writes would bypass the copy (QEMU's rules).
 */
static void cbw_child_perm(BlockDriverState *bs, BdrvChild *c,
                           uint64_t perm, uint64_t shared,
                           uint64_t *nperm, uint64_t *nshared)
{
    BDRVCopyBeforeWriteState *s = bs->opaque;

    if (strcmp(c->name, "file")) {
        *nperm = BLK_PERM_WRITE;
        *nshared = BLK_PERM_ALL & ~BLK_PERM_RESIZE;
        return;
    }
    if (s->releasing) {
        /* its users move to the source: it must not stand in their way */
        *nperm = 0;
        *nshared = BLK_PERM_ALL;
        return;
    }
    *nperm = perm;
    *nshared = shared;
    if (bs->parents) {
        if (perm & BLK_PERM_WRITE) {
            *nperm |= BLK_PERM_CONSISTENT_READ;
        }
        *nshared &= ~(BLK_PERM_WRITE | BLK_PERM_RESIZE);
    }
}

/* ---- requests ---- */

static int coroutine_fn cbw_co_pwritev(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    int ret = cbw_copy_before_write(bs, offset, bytes, flags);

    if (ret < 0) {
        return ret;
    }
    return bdrv_co_pwritev(bs->file, offset, bytes, qiov, flags);
}

static int coroutine_fn cbw_co_pwrite_zeroes(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             BdrvRequestFlags flags)
{
    int ret = cbw_copy_before_write(bs, offset, bytes, flags);

    if (ret < 0) {
        return ret;
    }
    return bdrv_co_pwrite_zeroes(bs->file, offset, bytes, flags);
}

/* A discard may change what the source reads: copied first, too. */
static int coroutine_fn cbw_co_pdiscard(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes)
{
    int ret = cbw_copy_before_write(bs, offset, bytes, 0);

    if (ret < 0) {
        return ret;
    }
    return bdrv_co_pdiscard(bs->file, offset, bytes);
}

static int coroutine_fn cbw_co_pwritev_compressed(BlockDriverState *bs,
                                                  int64_t offset,
                                                  int64_t bytes,
                                                  QEMUIOVector *qiov)
{
    int ret = cbw_copy_before_write(bs, offset, bytes, 0);

    if (ret < 0) {
        return ret;
    }
    return bdrv_co_pwritev(bs->file, offset, bytes, qiov,
                           BDRV_REQ_WRITE_COMPRESSED);
}

static const BlockDriver bdrv_copy_before_write = {
    .format_name                    = "copy-before-write",
    .instance_size                  = sizeof(BDRVCopyBeforeWriteState),
    /* opened as QEMU opens filters: a filename names the file child */
    .is_format                      = true,
    .is_filter                      = true,
    .runtime_opts                   = &qapi_opts_copy_before_write_runtime,
    .bdrv_open                      = cbw_open,
    .bdrv_close                     = cbw_close,
    .bdrv_reopen_prepare            = cbw_reopen_prepare,
    .bdrv_child_perm                = cbw_child_perm,
    .bdrv_getlength                 = bdrv_filter_getlength,
    .bdrv_co_preadv                 = bdrv_filter_co_preadv,
    .bdrv_co_pwritev                = cbw_co_pwritev,
    .bdrv_co_pwrite_zeroes          = cbw_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = cbw_co_pdiscard,
    .bdrv_co_pwritev_compressed     = cbw_co_pwritev_compressed,
};

block_init(bdrv_register, bdrv_copy_before_write)
