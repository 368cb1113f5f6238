/*
 * Jobs: long-running operations (image creation, stream, commit, mirror)
 * that run as a coroutine (in the main loop, or in the iothread of their
 * node) under QEMU's state machine,
 * and that the monitor pauses, resumes, cancels, completes, finalizes and
 * dismisses.  The states, the transitions and the verbs each state
 * accepts are QEMU's (its JobStatus and JobVerb documentation); block/job.c
 * draws them and asserts every transition.
 *
 * A job's life:
 *   job_create() -> CREATED; job_start() -> RUNNING, the driver's run()
 *   starts in a coroutine; run() may announce READY (job_transition_to_ready)
 *   and then waits for job-complete or a cancel; when run() returns the job
 *   goes WAITING -> PENDING and, at once with auto-finalize or at
 *   job-finalize, its driver's prepare/commit or abort/clean run and it
 *   goes CONCLUDED (ABORTING first when it failed or was cancelled); with
 *   auto-dismiss it goes NULL and is freed at once, else at job-dismiss.
 *
 * Threads (block/job.c invariants 8-10): a job lives in the AioContext
 * of its main node (job->aio_context), an iothread's or the main loop's;
 * its run() and the callbacks it makes run there.  Creation, the verbs,
 * and the end of the job (prepare, commit/abort, clean, the events that
 * follow) run in the main loop thread, which holds that context.
 */
#ifndef QBLOCK_JOB_H
#define QBLOCK_JOB_H

#include "util/aio.h"
#include "util/coroutine.h"
#include "util/error.h"

typedef enum JobStatus {
    JOB_STATUS_UNDEFINED,
    JOB_STATUS_CREATED,
    JOB_STATUS_RUNNING,
    JOB_STATUS_PAUSED,
    JOB_STATUS_READY,
    JOB_STATUS_STANDBY,
    JOB_STATUS_WAITING,
    JOB_STATUS_PENDING,
    JOB_STATUS_ABORTING,
    JOB_STATUS_CONCLUDED,
    JOB_STATUS_NULL,
    JOB_STATUS__MAX,
} JobStatus;

/* QEMU's names of the states ("running", "concluded", ...) */
extern const char *const JobStatus_str[JOB_STATUS__MAX];

typedef enum JobVerb {
    JOB_VERB_CANCEL,
    JOB_VERB_PAUSE,
    JOB_VERB_RESUME,
    JOB_VERB_SET_SPEED,
    JOB_VERB_COMPLETE,
    JOB_VERB_FINALIZE,
    JOB_VERB_DISMISS,
    JOB_VERB__MAX,
} JobVerb;

extern const char *const JobVerb_str[JOB_VERB__MAX];

typedef struct Job Job;
/* A group of jobs that finalize together (job_txn_new()). */
typedef struct JobTxn JobTxn;

/*
 * What notices a job's life beyond its state changes (block jobs send
 * their BLOCK_JOB_* events through it).  Every member is optional.
 */
typedef struct JobListener {
    /* the job announced READY */
    void (*ready)(Job *job);
    /* the job went PENDING (sent by QEMU only without auto-finalize) */
    void (*pending)(Job *job);
    /* the job finished: completed (or failed), or cancelled */
    void (*completed)(Job *job);
    void (*cancelled)(Job *job);
} JobListener;

/*
 * A kind of job.  run() runs in the job's coroutine, in the job's
 * context; every other callback in the main loop thread, outside the
 * coroutine, with that context held (block/job.c invariant 9).
 */
typedef struct JobDriver {
    /* bytes of the job's struct, which begins with Job (required) */
    size_t instance_size;
    /* the type QEMU reports ("create", "stream", "commit", "mirror") */
    const char *job_type;
    /*
     * Required.  The job's work.  Returns 0 or -errno; on failure sets
     * @errp (whose text query-jobs and BLOCK_JOB_COMPLETED report).  It
     * calls job_pause_point() (or job_sleep_ns()) often, and returns soon
     * once job_is_cancelled().
     */
    int coroutine_fn (*run)(Job *job, Error **errp);
    /*
     * Optional: job-complete on a READY job; it tells run() to finish
     * (for mirror: to pivot).  NULL: the job cannot be completed.
     */
    void (*complete)(Job *job, Error **errp);
    /*
     * Optional: whether a cancel that is not forced (block-job-cancel
     * force=false) of a READY job only ends it without pivoting, as
     * mirror does; then the job completes rather than being cancelled.
     */
    bool soft_cancel_completes;
    /* Optional: after run() succeeded, before commit; may fail (-errno) */
    int (*prepare)(Job *job);
    /* Optional: the job succeeded (commit) or failed or was cancelled */
    void (*commit)(Job *job);
    void (*abort)(Job *job);
    /* Optional: after commit or abort */
    void (*clean)(Job *job);
    /* Optional: the state the job's own struct holds, freed last */
    void (*free)(Job *job);
    /* Optional: events beyond JOB_STATUS_CHANGE */
    const JobListener *listener;
} JobDriver;

/* Flags of job_create(): QEMU's job-level options. */
enum {
    JOB_DEFAULT = 0,
    JOB_MANUAL_FINALIZE = 1 << 0,   /* auto-finalize: false */
    JOB_MANUAL_DISMISS = 1 << 1,    /* auto-dismiss: false */
};

struct Job {
    /* --- set at creation, immutable --- */
    char *id;
    const JobDriver *driver;
    /* where run() runs (block/job.c invariant 8) */
    AioContext *aio_context;
    /* its iothread (a reference), or NULL: the main loop */
    struct IOThread *iothread;
    bool auto_finalize;
    bool auto_dismiss;

    /* --- the state machine (block/job.c invariants) --- */
    JobStatus status;
    Coroutine *co;
    /* wakes the coroutine from job_sleep_ns() */
    QEMUTimer *sleep_timer;
    /* requests to pause: the user's (at most one) plus drains */
    int pause_count;
    bool user_paused;
    /* the coroutine is yielded at a pause point */
    bool paused;
    /* the coroutine runs or waits for I/O (not sleeping nor paused) */
    bool busy;
    bool cancelled;
    bool force_cancel;
    /* run() has returned; the rest happens outside the coroutine */
    bool deferred_to_main_loop;
    /* prepare/commit/abort have run */
    bool finalized;

    /* --- the result --- */
    int ret;
    Error *err;

    /* --- progress and rate limit --- */
    int64_t progress_current;
    int64_t progress_total;
    /* bytes per second; 0: unlimited */
    int64_t speed;
    int64_t rl_slice_end_ns;
    int64_t rl_slice_bytes;

    int refcnt;

    /* --- the group it is in (NULL: none), until it is finalized --- */
    JobTxn *txn;
};

/* The registry, the newest job first (QEMU's order). */
Job *job_next(Job *job);
Job *job_get(const char *id);

/*
 * Creates a job of @driver with the id @id (which must be a well-formed
 * name and unused): CREATED.  @flags: JOB_MANUAL_*.  NULL with an error
 * (QEMU's words) on a bad or used id.
 */
void *job_create(const char *id, const JobDriver *driver, int flags,
                 Error **errp);
/*
 * The same for a job that runs in @ctx (its nodes' context, which the
 * caller, the main loop thread, holds): run(), its copies and its sleeps
 * go there (block/job.c invariant 8).
 */
void *job_create_in_context(const char *id, const JobDriver *driver,
                            AioContext *ctx, int flags, Error **errp);
/*
 * Drops a job that failed to be set up before job_start(): CREATED ->
 * NULL, and only the driver's free() runs.
 */
void job_early_fail(Job *job);
/* CREATED -> RUNNING: run() starts. */
void job_start(Job *job);

void job_ref(Job *job);
void job_unref(Job *job);

/*
 * The verbs, as the monitor calls them; each refuses a state that does
 * not accept it with "Job 'x' in state 'y' cannot accept command verb
 * 'z'".  job_user_cancel with @force false on a READY job of a driver
 * with soft_cancel_completes ends the job without pivoting.
 */
bool job_user_pause(Job *job, Error **errp);
bool job_user_resume(Job *job, Error **errp);
bool job_user_cancel(Job *job, bool force, Error **errp);
bool job_complete(Job *job, Error **errp);
bool job_finalize(Job *job, Error **errp);
bool job_dismiss(Job *job, Error **errp);
bool job_set_speed(Job *job, int64_t speed, Error **errp);
/* The check behind them, for verbs a caller adds. */
bool job_apply_verb(Job *job, JobVerb verb, Error **errp);

/* Pauses that are not the user's (drain), balanced by job_resume(). */
void job_pause(Job *job);
void job_resume(Job *job);

/*
 * Cancels @job and waits until it concluded (daemon shutdown, tests).
 * It is gone afterwards if it auto-dismisses.
 */
void job_cancel_sync(Job *job, bool force);
/* Cancels every job and waits for each, at shutdown. */
void job_cancel_sync_all(void);

/*
 * Groups of jobs: the jobs of a transaction with completion-mode
 * "grouped" (QEMU's JobTxn).  A job of a group that ends its work waits
 * (WAITING) until every job of the group has; then all go PENDING and,
 * once none waits for job-finalize (auto-finalize, or job-finalize of
 * any of them), all are finalized together.  If one fails or is
 * cancelled, the others are cancelled, and all end aborted: the failed
 * one with BLOCK_JOB_COMPLETED and its error, the others with
 * BLOCK_JOB_CANCELLED.
 *
 * job_txn_new() returns the caller's reference; job_txn_add_job() puts
 * a job that has not started into @txn (the job holds a reference of
 * the group until it is finalized).
 */
JobTxn *job_txn_new(void);
void job_txn_unref(JobTxn *txn);
void job_txn_add_job(JobTxn *txn, Job *job);
/*
 * Polls until @job concluded, went NULL, or waits for job-finalize
 * (PENDING); for tests and shutdown.
 */
void job_wait_concluded(Job *job);

/* --- for run() --- */
/*
 * Pauses here if a pause was requested (PAUSED, or STANDBY when READY),
 * until resumed.  A cancel ends the pause.
 */
void coroutine_fn job_pause_point(Job *job);
/* Sleeps @ns (a pause or cancel cuts it short), then a pause point. */
void coroutine_fn job_sleep_ns(Job *job, int64_t ns);
/* Yields until job_enter(): how a READY job waits for complete/cancel. */
void coroutine_fn job_yield(Job *job);
/* Wakes the job's coroutine if it sleeps or yields (not if paused). */
void job_enter(Job *job);
/* RUNNING -> READY; the listener's ready() runs. */
void job_transition_to_ready(Job *job);
bool job_is_ready(Job *job);
/* A cancel was requested (forced, or of a job that is not READY). */
bool job_is_cancelled(Job *job);
/* Any cancel was requested, also a soft one of a READY job. */
bool job_cancel_requested(Job *job);
bool job_is_completed(Job *job);

void job_progress_update(Job *job, int64_t done);
void job_progress_set_remaining(Job *job, int64_t remaining);
void job_progress_increase_remaining(Job *job, int64_t delta);
/*
 * The rate limit: @bytes were just transferred; returns how long to
 * sleep (ns) so that the job keeps to its speed.
 */
int64_t job_ratelimit_delay(Job *job, int64_t bytes);

#endif
