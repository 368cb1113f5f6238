/*
 * The copy loop of block-stream and block-commit (include/job/job-copy.h),
 * and the change of backing node both end with.
 *
 * The job's coroutine walks the length; for each range the job wants
 * copied it starts a copy in a coroutine of its own, up to
 * JOB_COPY_MAX_IN_FLIGHT at once, so that a chain on a device with a
 * queue is read and written at its depth, not one chunk after another.
 *
 * Invariants:
 *  1. Every range the job wants copied is copied, or failed with an
 *     error the policy reported, before the loop returns; a range whose
 *     copy failed under the stop policy goes on s->retry and is copied
 *     again after the user resumes the job.
 *  2. The loop returns only with no copy in flight (they use the job's
 *     BlockBackends and buffers), and pauses only with none in flight,
 *     so that a paused job makes no progress.
 *  3. Ranges in flight never overlap: the walk hands out each byte once,
 *     and a retried range was done (failed) before it is handed out
 *     again.
 */
#include "job/job-copy.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

/* Copies at once: enough to keep a device's queue fed, few enough that
 * a pause or a cancel waits for little (8 chunks of 512 KiB: 4 MiB). */
#define JOB_COPY_MAX_IN_FLIGHT 8

typedef struct JobCopyRange {
    int64_t offset;
    int64_t bytes;
} JobCopyRange;

typedef struct JobCopyState {
    BlockJob *job;
    const BlockJobCopyDriver *drv;
    BlockBackend *blk;
    BlockdevOnError on_error;
    int in_flight;                  /* invariant 2 */
    CoQueue done;                   /* the loop waits for a copy here */
    GSList *retry;                  /* JobCopyRange *, invariant 1 */
    int error;                      /* the first error, returned at end */
    bool stop;                      /* a reported error: issue no more */
} JobCopyState;

typedef struct JobCopyTask {
    JobCopyState *s;
    int64_t offset;
    int64_t bytes;
} JobCopyTask;

/* What the policy makes of a failed read or write (invariant 1). */
static BlockErrorAction job_copy_error(JobCopyState *s, int64_t bytes,
                                       bool is_read, int ret)
{
    BlockErrorAction action = block_job_error_action(s->job, s->on_error,
                                                     is_read, -ret);

    if (action == BLOCK_ERROR_ACTION_STOP) {
        return action;
    }
    if (!s->error) {
        s->error = ret;
    }
    if (action == BLOCK_ERROR_ACTION_REPORT) {
        s->stop = true;
    } else {
        job_progress_update(&s->job->job, bytes);
    }
    return action;
}

/* A failed copy: copied again after a stop, else as the policy says. */
static void job_copy_failed(JobCopyState *s, int64_t offset, int64_t bytes,
                            bool is_read, int ret)
{
    if (job_copy_error(s, bytes, is_read, ret) == BLOCK_ERROR_ACTION_STOP) {
        JobCopyRange *r = g_new(JobCopyRange, 1);

        *r = (JobCopyRange) { .offset = offset, .bytes = bytes };
        s->retry = g_slist_append(s->retry, r);
    }
}

static void coroutine_fn job_copy_task_entry(void *opaque)
{
    JobCopyTask *task = opaque;
    JobCopyState *s = task->s;
    void *buf = blk_blockalign(s->blk, task->bytes);
    bool is_read = true;
    int ret;

    ret = s->drv->copy(s->job, task->offset, task->bytes, buf, &is_read);
    qemu_vfree(buf);
    if (ret < 0) {
        job_copy_failed(s, task->offset, task->bytes, is_read, ret);
    } else {
        job_progress_update(&s->job->job, task->bytes);
    }
    s->in_flight--;
    g_free(task);
    qemu_co_queue_restart_all(&s->done);
}

static void coroutine_fn job_copy_start(JobCopyState *s, int64_t offset,
                                        int64_t bytes)
{
    JobCopyTask *task = g_new(JobCopyTask, 1);

    while (s->in_flight >= JOB_COPY_MAX_IN_FLIGHT) {
        qemu_co_queue_wait(&s->done, NULL);
    }
    *task = (JobCopyTask) { .s = s, .offset = offset, .bytes = bytes };
    s->in_flight++;
    aio_co_enter(blk_get_aio_context(s->blk),
                 qemu_coroutine_create(job_copy_task_entry, task));
}

/* Invariant 2. */
static void coroutine_fn job_copy_wait_all(JobCopyState *s)
{
    while (s->in_flight > 0) {
        qemu_co_queue_wait(&s->done, NULL);
    }
}

/*
 * The job's pause point and rate limit, reached only with nothing in
 * flight (invariant 2): with copies in flight and no reason to stop, the
 * loop goes on (a full set of copies makes it wait for one anyway).
 * False if the job was cancelled.
 */
static bool coroutine_fn job_copy_sleep(JobCopyState *s, int64_t delay)
{
    Job *job = &s->job->job;

    if (delay > 0 || job->pause_count > 0 || s->in_flight == 0) {
        job_copy_wait_all(s);
        job_sleep_ns(job, delay);
    }
    return !job_is_cancelled(job);
}

/* The ranges stopped by an error, once the user resumed the job. */
static void coroutine_fn job_copy_retry(JobCopyState *s)
{
    while (s->retry && !s->stop) {
        JobCopyRange r = *(JobCopyRange *)s->retry->data;

        g_free(s->retry->data);
        s->retry = g_slist_delete_link(s->retry, s->retry);
        job_copy_start(s, r.offset, r.bytes);
        if (!job_copy_sleep(s, job_ratelimit_delay(&s->job->job,
                                                   r.bytes))) {
            return;
        }
    }
}

int coroutine_fn block_job_copy_loop(BlockJob *job,
                                     const BlockJobCopyDriver *drv,
                                     BlockBackend *blk, int64_t len,
                                     int64_t chunk, BlockdevOnError on_error)
{
    JobCopyState s = {
        .job = job, .drv = drv, .blk = blk, .on_error = on_error,
    };
    int64_t offset = 0, n, delay = 0;

    qemu_co_queue_init(&s.done);
    while (!s.stop) {
        int ret;

        if (!job_copy_sleep(&s, delay)) {
            break;
        }
        job_copy_retry(&s);
        if (job_is_cancelled(&job->job) || s.stop) {
            break;
        }
        if (offset >= len) {
            job_copy_wait_all(&s);
            if (!s.retry) {
                break;
            }
            delay = 0;
            continue;
        }
        ret = drv->needs_copy(job, offset, MIN(chunk, len - offset), &n);
        if (ret < 0) {
            n = MIN(chunk, len - offset);
            if (job_copy_error(&s, n, true, ret) == BLOCK_ERROR_ACTION_STOP) {
                n = 0;          /* asked again once resumed */
            }
        } else if (ret > 0) {
            job_copy_start(&s, offset, n);
        } else {
            job_progress_update(&job->job, n);
        }
        offset += n;
        delay = ret > 0 ? job_ratelimit_delay(&job->job, n) : 0;
    }
    job_copy_wait_all(&s);                          /* invariant 2 */
    g_slist_free_full(s.retry, g_free);
    return s.error;
}

int block_job_change_backing(BlockDriverState *bs, BlockDriverState *base,
                             const char *backing_file)
{
    const char *base_id = NULL, *base_fmt = NULL;
    Error *err = NULL;
    int ret;

    if (base) {
        base_id = backing_file ? backing_file : bdrv_get_filename(base);
        base_fmt = bdrv_get_format_name(base);
    }
    bdrv_drained_begin(bs);
    ret = bdrv_set_backing_hd(bs, base, &err);
    if (ret == 0) {
        ret = bdrv_change_backing_file(bs, base_id, base_fmt, false);
    }
    bdrv_drained_end(bs);
    if (err) {
        error_report_err(err);
    }
    return ret < 0 ? -EPERM : 0;
}
