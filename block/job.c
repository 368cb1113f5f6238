/*
 * The job layer (include/job/job.h): the registry, QEMU's state machine,
 * the verbs the monitor applies, the job's coroutine with its pause
 * points and sleeps, the rate limit and the progress counters.
 *
 * States and the transitions allowed (job_state_transition(), which
 * sends JOB_STATUS_CHANGE for each change):
 *
 *   CREATED --start--> RUNNING --ready--> READY
 *      |                |  ^               | ^
 *      |          pause |  | resume  pause | | resume
 *      |                v  |               v |
 *      |               PAUSED            STANDBY
 *      |                |                  |
 *      |       run() returned 0       run() returned 0
 *      |                v                  v
 *      |              WAITING --(all done)--> PENDING --finalize--> CONCLUDED --dismiss--> NULL
 *      |                                       |                      ^
 *      +---cancel, failure: from CREATED, RUNNING, READY, WAITING,     |
 *          PENDING --> ABORTING ------------------------------------- +
 *   CREATED may also go straight to NULL (a job never started).
 *
 * Invariants:
 *  1. job->status changes only through job_state_transition(), and only
 *     along job_transitions[][] (asserted).
 *  2. A verb runs only in the states job_verbs[][] lists for it; the
 *     others are refused with QEMU's message (job_apply_verb()).
 *  3. job->busy is false exactly while the coroutine is yielded in
 *     job_do_yield() (asleep, paused, or a READY job waiting); only
 *     job_enter() sets it back, and it enters the coroutine only then,
 *     so the coroutine is never entered twice.
 *  4. pause_count counts the pause requests: the user's (one at most,
 *     while user_paused) plus drains; the coroutine stays at a pause
 *     point while it is positive, unless a cancel was requested.
 *  5. Once run() has returned (deferred_to_main_loop), the coroutine is
 *     gone and job_enter() does nothing; what remains runs in bottom
 *     halves and verbs, in the main loop.
 *  6. prepare, commit/abort and clean run once each, in that order
 *     (finalized), before CONCLUDED; the job is in the registry from
 *     job_create() until NULL, and holds a reference for it.
 *  7. A job of a group (JobTxn) is in txn->jobs from job_txn_add_job()
 *     until job_finalize_single(); the jobs of a group are finalized
 *     together: all committed once every one of them is PENDING and
 *     prepared, or all aborted (txn->aborting) once one failed or was
 *     cancelled, the others cancelled by force first.
 *
 * Threads (threading rule 12 of docs/architecture.md):
 *  8. A job lives in one AioContext, job->aio_context, fixed when it is
 *     created: its main node's (blockjob.c inv. 5), an iothread's or the
 *     main loop's.  The coroutine, its copies and the sleep timer run
 *     there.  The fields of the state machine, the result, the progress
 *     and the rate limit are touched only by that context's owner (rule
 *     5): its home thread, or the main loop thread while it holds the
 *     context.  The monitor's verbs run with every iothread's context
 *     held (rule 9); job_exit() acquires it.  A job_enter() from the
 *     holder schedules the coroutine: it runs when its context is polled
 *     next, never beside its home thread.  A job in an iothread holds a
 *     reference of it (job->iothread) until it is freed, so that
 *     object-del cannot stop the thread under it.
 *  9. The end of a job (invariant 5: job_exit(), which completes,
 *     prepares, pivots, commits or aborts, cleans, sends the events that
 *     follow and dismisses) runs in a bottom half of the main loop with
 *     job->aio_context acquired, so graph changes stay with the main
 *     loop (rule 3).  Every wait for a job to end (job_wait_concluded(),
 *     a group's abort) therefore polls the main context, which lets the
 *     held contexts run meanwhile (util/aio-wait.c inv. 3).
 * 10. The registry (job_list) and the groups are the main loop's: jobs
 *     are created, finalized and dismissed there only.
 */
#include "job/job.h"
#include "util/cutils.h"

#include "util/iothread.h"
#include "util/qapi-event.h"

const char *const JobStatus_str[JOB_STATUS__MAX] = {
    [JOB_STATUS_UNDEFINED] = "undefined",
    [JOB_STATUS_CREATED] = "created",
    [JOB_STATUS_RUNNING] = "running",
    [JOB_STATUS_PAUSED] = "paused",
    [JOB_STATUS_READY] = "ready",
    [JOB_STATUS_STANDBY] = "standby",
    [JOB_STATUS_WAITING] = "waiting",
    [JOB_STATUS_PENDING] = "pending",
    [JOB_STATUS_ABORTING] = "aborting",
    [JOB_STATUS_CONCLUDED] = "concluded",
    [JOB_STATUS_NULL] = "null",
};

const char *const JobVerb_str[JOB_VERB__MAX] = {
    [JOB_VERB_CANCEL] = "cancel",
    [JOB_VERB_PAUSE] = "pause",
    [JOB_VERB_RESUME] = "resume",
    [JOB_VERB_SET_SPEED] = "set-speed",
    [JOB_VERB_COMPLETE] = "complete",
    [JOB_VERB_FINALIZE] = "finalize",
    [JOB_VERB_DISMISS] = "dismiss",
};

#define S(x) (1u << JOB_STATUS_##x)

/* Invariant 1: from each state, the states it may go to. */
static const unsigned job_transitions[JOB_STATUS__MAX] = {
    [JOB_STATUS_UNDEFINED] = S(CREATED),
    [JOB_STATUS_CREATED] = S(RUNNING) | S(ABORTING) | S(NULL),
    [JOB_STATUS_RUNNING] = S(PAUSED) | S(READY) | S(WAITING) | S(ABORTING),
    [JOB_STATUS_PAUSED] = S(RUNNING),
    [JOB_STATUS_READY] = S(STANDBY) | S(WAITING) | S(ABORTING),
    [JOB_STATUS_STANDBY] = S(READY),
    [JOB_STATUS_WAITING] = S(PENDING) | S(ABORTING),
    [JOB_STATUS_PENDING] = S(ABORTING) | S(CONCLUDED),
    [JOB_STATUS_ABORTING] = S(ABORTING) | S(CONCLUDED),
    [JOB_STATUS_CONCLUDED] = S(NULL),
    [JOB_STATUS_NULL] = 0,
};

/* Invariant 2: for each verb, the states that accept it. */
static const unsigned job_verbs[JOB_VERB__MAX] = {
    [JOB_VERB_CANCEL] = S(CREATED) | S(RUNNING) | S(PAUSED) | S(READY) |
                        S(STANDBY) | S(WAITING) | S(PENDING),
    [JOB_VERB_PAUSE] = S(CREATED) | S(RUNNING) | S(PAUSED) | S(READY) |
                       S(STANDBY),
    [JOB_VERB_RESUME] = S(CREATED) | S(RUNNING) | S(PAUSED) | S(READY) |
                        S(STANDBY),
    [JOB_VERB_SET_SPEED] = S(CREATED) | S(RUNNING) | S(PAUSED) | S(READY) |
                           S(STANDBY),
    [JOB_VERB_COMPLETE] = S(READY),
    [JOB_VERB_FINALIZE] = S(PENDING),
    [JOB_VERB_DISMISS] = S(CONCLUDED),
};

#undef S

/* The length of a rate-limit slice: long enough to average out bursts,
 * short enough that a speed change takes effect at once to a person. */
#define JOB_RATELIMIT_SLICE_NS (100 * 1000 * 1000LL)
#define JOB_NS_PER_SECOND 1000000000LL

/* Jobs, the newest first as in QEMU (query-jobs lists them so; inv. 6). */
static GList *job_list;

static void job_do_finalize(Job *job);
static void job_do_dismiss(Job *job);
static bool job_started(Job *job);
static void job_txn_completed(Job *job);
static void job_txn_abort(Job *job);
static void job_txn_finalize(Job *job);
static void job_txn_del_job(Job *job);

Job *job_next(Job *job)
{
    GList *l;

    if (!job) {
        return job_list ? job_list->data : NULL;
    }
    l = g_list_find(job_list, job);
    return l && l->next ? l->next->data : NULL;
}

Job *job_get(const char *id)
{
    for (GList *l = job_list; l; l = l->next) {
        Job *job = l->data;

        if (!strcmp(job->id, id)) {
            return job;
        }
    }
    return NULL;
}

static void job_state_transition(Job *job, JobStatus s1)
{
    JobStatus s0 = job->status;
    QDict *data;

    assert(s1 >= 0 && s1 < JOB_STATUS__MAX);
    assert(job_transitions[s0] & (1u << s1));   /* invariant 1 */
    job->status = s1;
    if (s0 == s1) {
        return;
    }
    data = qdict_new();
    qdict_put_str(data, "id", job->id);
    qdict_put_str(data, "status", JobStatus_str[s1]);
    qapi_event_emit("JOB_STATUS_CHANGE", data);
}

bool job_apply_verb(Job *job, JobVerb verb, Error **errp)
{
    assert(verb >= 0 && verb < JOB_VERB__MAX);
    if (job_verbs[verb] & (1u << job->status)) {
        return true;
    }
    error_setg(errp, "Job '%s' in state '%s' cannot accept command verb "
               "'%s'", job->id, JobStatus_str[job->status],
               JobVerb_str[verb]);
    return false;
}

static void job_sleep_timer_cb(void *opaque)
{
    job_enter(opaque);
}

void *job_create(const char *id, const JobDriver *driver, int flags,
                 Error **errp)
{
    return job_create_in_context(id, driver, qemu_get_aio_context(), flags,
                                 errp);
}

void *job_create_in_context(const char *id, const JobDriver *driver,
                            AioContext *ctx, int flags, Error **errp)
{
    Job *job;

    assert(driver->instance_size >= sizeof(Job) && driver->run);
    /* invariants 8 and 10: the monitor creates jobs, holding @ctx */
    assert(qemu_get_current_aio_context() == qemu_get_aio_context());
    assert(aio_context_in_thread(ctx));
    if (!id) {
        error_setg(errp, "An explicit job ID is required");
        return NULL;
    }
    if (!id_wellformed(id)) {
        error_setg(errp, "Invalid job ID '%s'", id);
        return NULL;
    }
    if (job_get(id)) {
        error_setg(errp, "Job ID '%s' already in use", id);
        return NULL;
    }
    job = g_malloc0(driver->instance_size);
    job->id = g_strdup(id);
    job->driver = driver;
    job->aio_context = ctx;
    /* invariant 8: the iothread stays while the job's timer is there */
    job->iothread = iothread_by_aio_context(ctx);
    if (job->iothread) {
        iothread_ref(job->iothread);
    }
    job->auto_finalize = !(flags & JOB_MANUAL_FINALIZE);
    job->auto_dismiss = !(flags & JOB_MANUAL_DISMISS);
    job->sleep_timer = aio_timer_new(job->aio_context, QEMU_CLOCK_REALTIME,
                                     SCALE_NS, job_sleep_timer_cb, job);
    job->refcnt = 1;
    /* held until job_start(): a job pauses before it runs anything */
    job->pause_count = 1;
    job->paused = true;
    job_list = g_list_prepend(job_list, job);
    job_state_transition(job, JOB_STATUS_CREATED);
    return job;
}

void job_early_fail(Job *job)
{
    assert(job->status == JOB_STATUS_CREATED && !job_started(job));
    job_do_dismiss(job);
}

void job_ref(Job *job)
{
    job->refcnt++;
}

void job_unref(Job *job)
{
    assert(job->refcnt > 0);
    if (--job->refcnt > 0) {
        return;
    }
    assert(job->status == JOB_STATUS_NULL);
    assert(!g_list_find(job_list, job));    /* invariant 6 */
    timer_free(job->sleep_timer);
    if (job->driver->free) {
        job->driver->free(job);
    }
    if (job->iothread) {
        iothread_unref(job->iothread);
    }
    error_free(job->err);
    g_free(job->id);
    g_free(job);
}

static bool job_started(Job *job)
{
    return job->co != NULL;
}

void job_enter(Job *job)
{
    assert(aio_context_in_thread(job->aio_context));    /* invariant 8 */
    /* invariants 3 and 5 */
    if (!job_started(job) || job->deferred_to_main_loop || job->busy) {
        return;
    }
    timer_del(job->sleep_timer);
    job->busy = true;
    aio_co_enter(job->aio_context, job->co);
}

/* Invariant 3: the only place the coroutine gives up busy. */
static void coroutine_fn job_do_yield(Job *job, int64_t ns)
{
    if (ns != -1) {
        timer_mod(job->sleep_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ns);
    }
    job->busy = false;
    qemu_coroutine_yield();
    assert(job->busy);
}

bool job_is_cancelled(Job *job)
{
    /* a forced cancel implies a cancel */
    assert(job->cancelled || !job->force_cancel);
    return job->force_cancel;
}

bool job_cancel_requested(Job *job)
{
    return job->cancelled;
}

bool job_is_ready(Job *job)
{
    return job->status == JOB_STATUS_READY ||
           job->status == JOB_STATUS_STANDBY;
}

bool job_is_completed(Job *job)
{
    switch (job->status) {
    case JOB_STATUS_WAITING:
    case JOB_STATUS_PENDING:
    case JOB_STATUS_ABORTING:
    case JOB_STATUS_CONCLUDED:
    case JOB_STATUS_NULL:
        return true;
    default:
        return false;
    }
}

void coroutine_fn job_pause_point(Job *job)
{
    JobStatus status;

    assert(qemu_in_coroutine() && job->co == qemu_coroutine_self());
    if (job->pause_count == 0 || job->cancelled) {
        return;
    }
    status = job->status;
    job_state_transition(job, status == JOB_STATUS_READY ?
                              JOB_STATUS_STANDBY : JOB_STATUS_PAUSED);
    job->paused = true;
    /* invariant 4: job_enter() may wake the job for other reasons */
    while (job->pause_count > 0 && !job->cancelled) {
        job_do_yield(job, -1);
    }
    job->paused = false;
    job_state_transition(job, status);
}

void coroutine_fn job_sleep_ns(Job *job, int64_t ns)
{
    assert(job->busy);
    if (!job_is_cancelled(job) && job->pause_count == 0) {
        job_do_yield(job, ns);
    }
    job_pause_point(job);
}

void coroutine_fn job_yield(Job *job)
{
    assert(job->busy);
    if (job_is_cancelled(job)) {
        return;
    }
    if (job->pause_count == 0) {
        job_do_yield(job, -1);
    }
    job_pause_point(job);
}

void job_transition_to_ready(Job *job)
{
    job_state_transition(job, JOB_STATUS_READY);
    if (job->driver->listener && job->driver->listener->ready) {
        job->driver->listener->ready(job);
    }
}

/* ---------------------------------------------------------------------- */
/* Progress and rate limit */

void job_progress_update(Job *job, int64_t done)
{
    job->progress_current += done;
}

void job_progress_set_remaining(Job *job, int64_t remaining)
{
    job->progress_total = job->progress_current + remaining;
}

void job_progress_increase_remaining(Job *job, int64_t delta)
{
    job->progress_total += delta;
}

int64_t job_ratelimit_delay(Job *job, int64_t bytes)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    int64_t quota, delay;

    if (!job->speed) {
        return 0;
    }
    if (now >= job->rl_slice_end_ns) {
        job->rl_slice_end_ns = now + JOB_RATELIMIT_SLICE_NS;
        job->rl_slice_bytes = 0;
    }
    job->rl_slice_bytes += bytes;
    quota = job->speed * JOB_RATELIMIT_SLICE_NS / JOB_NS_PER_SECOND;
    if (job->rl_slice_bytes <= MAX(quota, 1)) {
        return 0;
    }
    /* the excess is paid for at the job's speed after the slice ends */
    delay = job->rl_slice_end_ns - now +
            (job->rl_slice_bytes - quota) * JOB_NS_PER_SECOND /
            job->speed;
    job->rl_slice_end_ns = now + delay + JOB_RATELIMIT_SLICE_NS;
    job->rl_slice_bytes = 0;
    return delay;
}

/* ---------------------------------------------------------------------- */
/* The end of a job */

static void job_emit_finished(Job *job)
{
    const JobListener *l = job->driver->listener;

    /*
     * A job cancelled before it started (a transaction's abort) ends
     * with its state changes only: QEMU sends no BLOCK_JOB_* for it.
     */
    if (!l || !job_started(job)) {
        return;
    }
    if (job_is_cancelled(job)) {
        if (l->cancelled) {
            l->cancelled(job);
        }
    } else if (l->completed) {
        l->completed(job);
    }
}

/* Folds a cancel into ret, and goes ABORTING if the job failed. */
static void job_update_rc(Job *job)
{
    if (!job->ret && job_is_cancelled(job)) {
        job->ret = -ECANCELED;
    }
    if (job->ret) {
        if (!job->err) {
            error_setg(&job->err, "%s", strerror(-job->ret));
        }
        job_state_transition(job, JOB_STATUS_ABORTING);
    }
}

static void job_do_dismiss(Job *job)
{
    job_state_transition(job, JOB_STATUS_NULL);
    job_list = g_list_remove(job_list, job);
    job_unref(job);                             /* invariant 6 */
}

/* Invariant 6: commit or abort, clean, the event, CONCLUDED. */
static void job_finalize_single(Job *job)
{
    assert(!job->finalized);
    job->finalized = true;
    if (job->txn) {
        job_txn_del_job(job);   /* invariant 7 */
    }
    if (!job->ret) {
        if (job->driver->commit) {
            job->driver->commit(job);
        }
    } else if (job->driver->abort) {
        job->driver->abort(job);
    }
    if (job->driver->clean) {
        job->driver->clean(job);
    }
    job_emit_finished(job);
    job_state_transition(job, JOB_STATUS_CONCLUDED);
    if (job->auto_dismiss) {
        job_do_dismiss(job);
    }
}

static void job_do_finalize(Job *job)
{
    assert(job->status == JOB_STATUS_PENDING ||
           job->status == JOB_STATUS_ABORTING);
    if (!job->ret && job->driver->prepare) {
        job->ret = job->driver->prepare(job);
        job_update_rc(job);
    }
    job_finalize_single(job);
}

static void job_completed(Job *job)
{
    job_update_rc(job);
    if (job->txn) {
        job_txn_completed(job);
        return;
    }
    if (job->ret) {
        job_finalize_single(job);
        return;
    }
    job_state_transition(job, JOB_STATUS_WAITING);
    job_state_transition(job, JOB_STATUS_PENDING);
    if (!job->auto_finalize) {
        if (job->driver->listener && job->driver->listener->pending) {
            job->driver->listener->pending(job);
        }
        return;
    }
    job_do_finalize(job);
}

/*
 * Invariant 9: the main loop thread takes an iothread's context.  Never
 * the main context itself: held, a wait on it would poll it as held and
 * keep the iothreads' contexts it holds from running (util/aio-wait.c
 * inv. 3).
 */
static void job_context_acquire(AioContext *ctx)
{
    if (ctx != qemu_get_aio_context()) {
        aio_context_acquire(ctx);
    }
}

static void job_context_release(AioContext *ctx)
{
    if (ctx != qemu_get_aio_context()) {
        aio_context_release(ctx);
    }
}

/* Invariant 9: the main loop, with the job's context held. */
static void job_exit(void *opaque)
{
    Job *job = opaque;
    AioContext *ctx = job->aio_context;

    assert(qemu_get_current_aio_context() == qemu_get_aio_context());
    job_context_acquire(ctx);
    job->busy = false;
    job_completed(job);
    job_unref(job);
    job_context_release(ctx);
}

static void coroutine_fn job_co_entry(void *opaque)
{
    Job *job = opaque;
    Error *err = NULL;

    assert(job->busy);
    job_pause_point(job);
    if (!job_is_cancelled(job)) {
        job->ret = job->driver->run(job, &err);
        if (job->ret < 0) {
            job->err = err;
        } else {
            error_free(err);
        }
    }
    /* invariants 5 and 9: the rest runs outside the coroutine */
    job->deferred_to_main_loop = true;
    job_ref(job);
    aio_bh_schedule_oneshot(qemu_get_aio_context(), job_exit, job);
}

void job_start(Job *job)
{
    assert(job->status == JOB_STATUS_CREATED && !job_started(job));
    job->co = qemu_coroutine_create(job_co_entry, job);
    job->pause_count--;         /* the pause the job was created with */
    job->busy = true;
    job->paused = false;
    job_state_transition(job, JOB_STATUS_RUNNING);
    aio_co_enter(job->aio_context, job->co);
}

/* ---------------------------------------------------------------------- */
/* Verbs */

void job_pause(Job *job)
{
    job->pause_count++;
    /* a sleeping job pauses now rather than when its sleep ends */
    if (!job->paused) {
        job_enter(job);
    }
}

void job_resume(Job *job)
{
    assert(job->pause_count > 0);
    if (--job->pause_count == 0) {
        job_enter(job);
    }
}

bool job_user_pause(Job *job, Error **errp)
{
    assert(aio_context_in_thread(job->aio_context));    /* invariant 8 */
    if (!job_apply_verb(job, JOB_VERB_PAUSE, errp)) {
        return false;
    }
    if (job->user_paused) {
        error_setg(errp, "Job is already paused");
        return false;
    }
    job->user_paused = true;
    job_pause(job);
    return true;
}

bool job_user_resume(Job *job, Error **errp)
{
    assert(aio_context_in_thread(job->aio_context));    /* invariant 8 */
    if (!job->user_paused || job->pause_count <= 0) {
        error_setg(errp, "Can't resume a job that was not paused");
        return false;
    }
    if (!job_apply_verb(job, JOB_VERB_RESUME, errp)) {
        return false;
    }
    job->user_paused = false;
    job_resume(job);
    return true;
}

/* Marks the cancel and wakes the job so that it sees it. */
static void job_cancel_async(Job *job, bool force)
{
    if (job->user_paused) {
        job->user_paused = false;
        assert(job->pause_count > 0);
        job->pause_count--;
    }
    /* only a READY job whose driver says so ends without pivoting */
    if (!job->driver->soft_cancel_completes || !job_is_ready(job)) {
        force = true;
    }
    if (!job->cancelled) {
        job->cancelled = true;
        job->force_cancel = force;
    } else if (force) {
        job->force_cancel = true;
    }
}

static void job_cancel(Job *job, bool force)
{
    if (job->status == JOB_STATUS_CONCLUDED) {
        job_do_dismiss(job);
        return;
    }
    job_cancel_async(job, force);
    if (!job_started(job)) {
        job_completed(job);
    } else if (job->deferred_to_main_loop) {
        /*
         * A PENDING job: what is left is the abort.  Before job_exit()
         * ran, the cancel flag is enough: it turns the result into
         * -ECANCELED there.
         */
        if (job_is_completed(job) && job_is_cancelled(job) &&
            !job->finalized) {
            job_update_rc(job);
            if (job->txn) {
                job_txn_abort(job);     /* invariant 7 */
            } else {
                job_finalize_single(job);
            }
        }
    } else {
        job_enter(job);
    }
}

bool job_user_cancel(Job *job, bool force, Error **errp)
{
    assert(aio_context_in_thread(job->aio_context));    /* invariant 8 */
    if (!job_apply_verb(job, JOB_VERB_CANCEL, errp)) {
        return false;
    }
    job_cancel(job, force);
    return true;
}

bool job_complete(Job *job, Error **errp)
{
    assert(aio_context_in_thread(job->aio_context));    /* invariant 8 */
    if (!job_apply_verb(job, JOB_VERB_COMPLETE, errp)) {
        return false;
    }
    if (job_cancel_requested(job) || !job->driver->complete) {
        error_setg(errp, "The active block job '%s' cannot be completed",
                   job->id);
        return false;
    }
    job->driver->complete(job, errp);
    return !(errp && *errp);
}

bool job_finalize(Job *job, Error **errp)
{
    if (!job_apply_verb(job, JOB_VERB_FINALIZE, errp)) {
        return false;
    }
    if (job->txn) {
        job_txn_finalize(job);
    } else {
        job_do_finalize(job);
    }
    return true;
}

bool job_dismiss(Job *job, Error **errp)
{
    if (!job_apply_verb(job, JOB_VERB_DISMISS, errp)) {
        return false;
    }
    job_do_dismiss(job);
    return true;
}

bool job_set_speed(Job *job, int64_t speed, Error **errp)
{
    assert(aio_context_in_thread(job->aio_context));    /* invariant 8 */
    if (!job_apply_verb(job, JOB_VERB_SET_SPEED, errp)) {
        return false;
    }
    if (speed < 0) {
        error_setg(errp, "Parameter 'speed' expects a non-negative value");
        return false;
    }
    job->speed = speed;
    job->rl_slice_end_ns = 0;
    /* a job asleep for the old speed recomputes its delay */
    job_enter(job);
    return true;
}

void job_wait_concluded(Job *job)
{
    /* invariant 9: job_exit() runs in the main loop */
    assert(qemu_get_current_aio_context() == qemu_get_aio_context());
    assert(aio_context_in_thread(job->aio_context));
    job_ref(job);
    AIO_WAIT_WHILE(qemu_get_aio_context(),
                   job->status != JOB_STATUS_CONCLUDED &&
                   job->status != JOB_STATUS_NULL &&
                   job->status != JOB_STATUS_PENDING);
    job_unref(job);
}

void job_cancel_sync(Job *job, bool force)
{
    job_ref(job);
    if (job->status != JOB_STATUS_CONCLUDED &&
        job->status != JOB_STATUS_NULL) {
        job_cancel(job, force);
    }
    job_wait_concluded(job);
    /* a job waiting for job-finalize is aborted instead */
    if (job->status == JOB_STATUS_PENDING) {
        job_cancel(job, true);
    }
    job_unref(job);
}

void job_cancel_sync_all(void)
{
    Job *job;

    for (;;) {
        for (job = job_next(NULL); job; job = job_next(job)) {
            if (job->status != JOB_STATUS_CONCLUDED) {
                break;
            }
        }
        if (!job) {
            break;
        }
        job_cancel_sync(job, true);
    }
    /* what is left waits for job-dismiss, which nobody will send */
    while ((job = job_next(NULL))) {
        job_do_dismiss(job);
    }
}

/* ---------------------------------------------------------------------- */
/* Groups of jobs (invariant 7) */

struct JobTxn {
    GList *jobs;        /* Job *, the last added first (QEMU's order) */
    bool aborting;
    int refcnt;
};

JobTxn *job_txn_new(void)
{
    JobTxn *txn = g_new0(JobTxn, 1);

    txn->refcnt = 1;
    return txn;
}

void job_txn_unref(JobTxn *txn)
{
    if (txn && --txn->refcnt == 0) {
        assert(!txn->jobs);
        g_free(txn);
    }
}

void job_txn_add_job(JobTxn *txn, Job *job)
{
    assert(!job->txn && !job_started(job));
    job->txn = txn;
    txn->refcnt++;
    txn->jobs = g_list_prepend(txn->jobs, job);
}

static void job_txn_del_job(Job *job)
{
    JobTxn *txn = job->txn;

    txn->jobs = g_list_remove(txn->jobs, job);
    job->txn = NULL;
    job_txn_unref(txn);
}

/*
 * The group's jobs, each with a reference (finalizing one drops it) and
 * its context held (invariant 8: the jobs of a group may live in
 * different iothreads; their ends run here, in the main loop).
 */
static GList *job_txn_hold(JobTxn *txn)
{
    GList *jobs = g_list_copy(txn->jobs);

    for (GList *l = jobs; l; l = l->next) {
        Job *job = l->data;

        job_context_acquire(job->aio_context);
        job_ref(job);
    }
    return jobs;
}

static void job_txn_release(GList *jobs)
{
    for (GList *l = jobs; l; l = l->next) {
        Job *job = l->data;
        AioContext *ctx = job->aio_context;

        job_unref(job);
        job_context_release(ctx);
    }
    g_list_free(jobs);
}

/* run() of @job returned (job_update_rc() done). */
static void job_txn_completed(Job *job)
{
    JobTxn *txn = job->txn;

    if (job->ret) {
        job_txn_abort(job);
        return;
    }
    job_state_transition(job, JOB_STATUS_WAITING);
    for (GList *l = txn->jobs; l; l = l->next) {
        if (!job_is_completed(l->data)) {
            return;     /* the last one to end goes on */
        }
    }
    for (GList *l = txn->jobs; l; l = l->next) {
        Job *other = l->data;

        job_state_transition(other, JOB_STATUS_PENDING);
        if (!other->auto_finalize && other->driver->listener &&
            other->driver->listener->pending) {
            other->driver->listener->pending(other);
        }
    }
    for (GList *l = txn->jobs; l; l = l->next) {
        if (!((Job *)l->data)->auto_finalize) {
            return;     /* job-finalize of any of them goes on */
        }
    }
    job_txn_finalize(job);
}

/* Every job PENDING: prepare all, then commit all or abort all. */
static void job_txn_finalize(Job *job)
{
    GList *jobs = job_txn_hold(job->txn);
    Job *failed = NULL;

    for (GList *l = jobs; l && !failed; l = l->next) {
        Job *other = l->data;

        if (!other->ret && other->driver->prepare) {
            other->ret = other->driver->prepare(other);
            job_update_rc(other);
        }
        if (other->ret) {
            failed = other;
        }
    }
    if (failed) {
        job_txn_abort(failed);
    } else {
        for (GList *l = jobs; l; l = l->next) {
            job_finalize_single(l->data);
        }
    }
    job_txn_release(jobs);
}

/*
 * @job failed or was cancelled: the others are cancelled by force, each
 * is waited for, and all are finalized aborted (a cancelled one that
 * was WAITING or PENDING too: job_update_rc()).
 */
static void job_txn_abort(Job *job)
{
    JobTxn *txn = job->txn;
    GList *jobs;

    if (txn->aborting) {
        return;     /* the job that began the abort ends them all */
    }
    txn->aborting = true;
    txn->refcnt++;
    jobs = job_txn_hold(txn);
    for (GList *l = jobs; l; l = l->next) {
        if (l->data != job) {
            job_cancel_async(l->data, true);
        }
    }
    for (GList *l = jobs; l; l = l->next) {
        Job *other = l->data;

        /* invariant 9: its end runs in the main loop */
        AIO_WAIT_WHILE(qemu_get_aio_context(),
                       (job_enter(other), !job_is_completed(other)));
        job_update_rc(other);
        job_finalize_single(other);
    }
    job_txn_release(jobs);
    job_txn_unref(txn);
}
