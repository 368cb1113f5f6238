/*
 * The job layer (block/job.c, block/blockjob.c): every verb in every
 * state, the states and events of each way a job ends, pauses, ready and
 * complete, soft cancel, the rate limit, groups of jobs, and a drain
 * pausing a block job.
 */
#include "job/blockjob.h"

#include "block/block.h"
#include "block/block_int.h"
#include "util/qapi-event.h"

/* Both kinds of test job share the struct; a plain job ignores bjob. */
typedef struct TestJob {
    union {
        Job job;
        BlockJob bjob;
    };
    int iterations;         /* steps before run() ends or goes READY */
    bool go_ready;
    bool should_complete;
    int fail;               /* run() returns this, if set */
    bool committed, aborted, cleaned;
} TestJob;

/* Events seen, "EVENT" or "JOB_STATUS_CHANGE:<status>", in order. */
static GString *events;

static void test_event_cb(const char *event, QDict *data, void *opaque)
{
    if (!strcmp(event, "JOB_STATUS_CHANGE")) {
        g_string_append_printf(events, "%s ", qdict_get_try_str(data, "status"));
    } else {
        g_string_append_printf(events, "%s ", event);
    }
}

static int coroutine_fn test_job_run(Job *job, Error **errp)
{
    TestJob *t = (TestJob *)job;

    while (!job_is_cancelled(job)) {
        if (t->iterations > 0) {
            t->iterations--;
            job_progress_update(job, 1);
            job_sleep_ns(job, 100000);
            continue;
        }
        if (t->fail) {
            error_setg(errp, "test job failed on purpose");
            return t->fail;
        }
        if (!t->go_ready) {
            break;
        }
        if (!job_is_ready(job)) {
            job_transition_to_ready(job);
        }
        if (t->should_complete || job_cancel_requested(job)) {
            break;
        }
        job_yield(job);
    }
    return 0;
}

static void test_job_complete(Job *job, Error **errp)
{
    ((TestJob *)job)->should_complete = true;
    job_enter(job);
}

static void test_job_commit(Job *job)
{
    ((TestJob *)job)->committed = true;
}

static void test_job_abort(Job *job)
{
    ((TestJob *)job)->aborted = true;
}

static void test_job_clean(Job *job)
{
    ((TestJob *)job)->cleaned = true;
}

static const JobDriver test_job_driver = {
    .instance_size = sizeof(TestJob),
    .job_type = "test",
    .run = test_job_run,
    .complete = test_job_complete,
    .soft_cancel_completes = true,
    .commit = test_job_commit,
    .abort = test_job_abort,
    .clean = test_job_clean,
};

static TestJob *test_job_new(const char *id, int flags)
{
    TestJob *t = job_create(id, &test_job_driver, flags, &error_abort);

    g_string_truncate(events, 0);
    g_string_append(events, "created ");
    job_ref(&t->job);       /* the test looks at it after NULL */
    return t;
}

static void test_job_put(TestJob *t)
{
    if (t->job.status != JOB_STATUS_NULL) {
        job_cancel_sync(&t->job, true);
        if (t->job.status == JOB_STATUS_CONCLUDED) {
            job_dismiss(&t->job, &error_abort);
        }
    }
    job_unref(&t->job);
}

static void test_wait_status(Job *job, JobStatus status)
{
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    while (job->status != status) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        aio_poll(qemu_get_aio_context(), true);
    }
}

/* Runs the loop until nothing is pending (the job's BHs, its timer). */
static void test_settle(void)
{
    for (int i = 0; i < 20; i++) {
        while (aio_poll(qemu_get_aio_context(), false)) {
        }
        g_usleep(1000);
    }
}

/* ---------------------------------------------------------------------- */

/* Puts a new job in @status (a state a job rests in), or NULL if not. */
static TestJob *test_job_in_state(JobStatus status)
{
    TestJob *t = test_job_new("j0", JOB_MANUAL_FINALIZE |
                                    JOB_MANUAL_DISMISS);

    switch (status) {
    case JOB_STATUS_CREATED:
        return t;
    case JOB_STATUS_RUNNING:
        t->iterations = 1000000;
        job_start(&t->job);
        return t;
    case JOB_STATUS_PAUSED:
        t->iterations = 1000000;
        job_start(&t->job);
        job_user_pause(&t->job, &error_abort);
        test_wait_status(&t->job, JOB_STATUS_PAUSED);
        return t;
    case JOB_STATUS_READY:
        t->go_ready = true;
        job_start(&t->job);
        test_wait_status(&t->job, JOB_STATUS_READY);
        return t;
    case JOB_STATUS_STANDBY:
        t->go_ready = true;
        job_start(&t->job);
        test_wait_status(&t->job, JOB_STATUS_READY);
        job_user_pause(&t->job, &error_abort);
        test_wait_status(&t->job, JOB_STATUS_STANDBY);
        return t;
    case JOB_STATUS_PENDING:
        job_start(&t->job);
        test_wait_status(&t->job, JOB_STATUS_PENDING);
        return t;
    case JOB_STATUS_CONCLUDED:
        job_start(&t->job);
        test_wait_status(&t->job, JOB_STATUS_PENDING);
        job_finalize(&t->job, &error_abort);
        g_assert_cmpint(t->job.status, ==, JOB_STATUS_CONCLUDED);
        return t;
    default:
        test_job_put(t);
        return NULL;
    }
}

/* QEMU's verb table, row by row (job.c inv. 2). */
static bool test_verb_allowed(JobVerb verb, JobStatus s)
{
    bool active = s == JOB_STATUS_CREATED || s == JOB_STATUS_RUNNING ||
                  s == JOB_STATUS_PAUSED || s == JOB_STATUS_READY ||
                  s == JOB_STATUS_STANDBY;

    switch (verb) {
    case JOB_VERB_CANCEL:
        return active || s == JOB_STATUS_WAITING || s == JOB_STATUS_PENDING;
    case JOB_VERB_PAUSE:
    case JOB_VERB_RESUME:
    case JOB_VERB_SET_SPEED:
        return active;
    case JOB_VERB_COMPLETE:
        return s == JOB_STATUS_READY;
    case JOB_VERB_FINALIZE:
        return s == JOB_STATUS_PENDING;
    case JOB_VERB_DISMISS:
        return s == JOB_STATUS_CONCLUDED;
    default:
        g_assert_not_reached();
    }
}

/* Every verb's check in every state a job rests in, with the message. */
static void test_verb_table(void)
{
    for (JobStatus s = JOB_STATUS_UNDEFINED; s < JOB_STATUS__MAX; s++) {
        for (JobVerb v = 0; v < JOB_VERB__MAX; v++) {
            TestJob *t = test_job_in_state(s);
            Error *err = NULL;
            bool ok;

            if (!t) {
                continue;
            }
            ok = job_apply_verb(&t->job, v, &err);
            g_assert_cmpint(ok, ==, test_verb_allowed(v, s));
            if (!ok) {
                g_autofree char *want = g_strdup_printf(
                    "Job 'j0' in state '%s' cannot accept command verb "
                    "'%s'", JobStatus_str[s], JobVerb_str[v]);

                g_assert_cmpstr(error_get_pretty(err), ==, want);
                error_free(err);
            }
            test_job_put(t);
        }
    }
}

/* Every verb applied for real in every state: its effect or refusal. */
static void test_verbs_applied(void)
{
    for (JobStatus s = JOB_STATUS_UNDEFINED; s < JOB_STATUS__MAX; s++) {
        for (JobVerb v = 0; v < JOB_VERB__MAX; v++) {
            TestJob *t = test_job_in_state(s);
            Error *err = NULL;
            bool ok = false;

            if (!t) {
                continue;
            }
            switch (v) {
            case JOB_VERB_CANCEL:
                ok = job_user_cancel(&t->job, true, &err);
                break;
            case JOB_VERB_PAUSE:
                ok = job_user_pause(&t->job, &err);
                break;
            case JOB_VERB_RESUME:
                ok = job_user_resume(&t->job, &err);
                break;
            case JOB_VERB_SET_SPEED:
                ok = job_set_speed(&t->job, 1 << 20, &err);
                break;
            case JOB_VERB_COMPLETE:
                ok = job_complete(&t->job, &err);
                break;
            case JOB_VERB_FINALIZE:
                ok = job_finalize(&t->job, &err);
                break;
            case JOB_VERB_DISMISS:
                ok = job_dismiss(&t->job, &err);
                break;
            default:
                g_assert_not_reached();
            }
            if (!test_verb_allowed(v, s)) {
                g_assert_false(ok);
                g_assert_nonnull(err);
                error_free(err);
            } else if (v == JOB_VERB_PAUSE &&
                       (s == JOB_STATUS_PAUSED ||
                        s == JOB_STATUS_STANDBY)) {
                g_assert_cmpstr(error_get_pretty(err), ==,
                                "Job is already paused");
                error_free(err);
            } else if (v == JOB_VERB_RESUME &&
                       s != JOB_STATUS_PAUSED && s != JOB_STATUS_STANDBY) {
                g_assert_cmpstr(error_get_pretty(err), ==,
                                "Can't resume a job that was not paused");
                error_free(err);
            } else {
                g_assert_true(ok);
                g_assert_null(err);
            }
            test_job_put(t);
            test_settle();
        }
    }
    g_assert_null(job_next(NULL));
}

static void test_success_events(void)
{
    TestJob *t = test_job_new("ok", JOB_DEFAULT);

    t->iterations = 3;
    job_start(&t->job);
    test_wait_status(&t->job, JOB_STATUS_NULL);
    g_assert_cmpstr(events->str, ==,
                    "created running waiting pending concluded null ");
    g_assert_true(t->committed && t->cleaned && !t->aborted);
    g_assert_cmpint(t->job.progress_current, ==, 3);
    g_assert_null(job_get("ok"));
    test_job_put(t);
}

static void test_manual_finalize_dismiss(void)
{
    TestJob *t = test_job_new("man", JOB_MANUAL_FINALIZE |
                                     JOB_MANUAL_DISMISS);

    job_start(&t->job);
    test_wait_status(&t->job, JOB_STATUS_PENDING);
    g_assert_false(t->committed);
    job_finalize(&t->job, &error_abort);
    g_assert_true(t->committed);
    g_assert_cmpint(t->job.status, ==, JOB_STATUS_CONCLUDED);
    g_assert(job_get("man") == &t->job);
    job_dismiss(&t->job, &error_abort);
    g_assert_null(job_get("man"));
    g_assert_cmpstr(events->str, ==,
                    "created running waiting pending concluded null ");
    test_job_put(t);
}

static void test_failure(void)
{
    TestJob *t = test_job_new("bad", JOB_MANUAL_DISMISS);

    t->fail = -EIO;
    job_start(&t->job);
    test_wait_status(&t->job, JOB_STATUS_CONCLUDED);
    g_assert_cmpstr(events->str, ==, "created running aborting concluded ");
    g_assert_cmpint(t->job.ret, ==, -EIO);
    g_assert_cmpstr(error_get_pretty(t->job.err), ==,
                    "test job failed on purpose");
    g_assert_true(t->aborted && t->cleaned && !t->committed);
    test_job_put(t);
}

static void test_cancel_running(void)
{
    TestJob *t = test_job_new("c", JOB_MANUAL_DISMISS);

    t->iterations = 1000000;
    job_start(&t->job);
    job_user_cancel(&t->job, false, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_CONCLUDED);
    g_assert_cmpstr(events->str, ==, "created running aborting concluded ");
    g_assert_cmpint(t->job.ret, ==, -ECANCELED);
    g_assert_cmpstr(error_get_pretty(t->job.err), ==, strerror(ECANCELED));
    g_assert_true(t->aborted);
    test_job_put(t);
}

static void test_cancel_created(void)
{
    TestJob *t = test_job_new("cc", JOB_DEFAULT);

    job_user_cancel(&t->job, false, &error_abort);
    g_assert_cmpint(t->job.status, ==, JOB_STATUS_NULL);
    g_assert_cmpstr(events->str, ==, "created aborting concluded null ");
    test_job_put(t);
}

static void test_cancel_paused(void)
{
    TestJob *t = test_job_new("cp", JOB_MANUAL_DISMISS);

    t->iterations = 1000000;
    job_start(&t->job);
    job_user_pause(&t->job, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_PAUSED);
    job_user_cancel(&t->job, true, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_CONCLUDED);
    g_assert_cmpstr(events->str, ==,
                    "created running paused running aborting concluded ");
    test_job_put(t);
}

static void test_pause_resume(void)
{
    TestJob *t = test_job_new("p", JOB_DEFAULT);
    int64_t progress;

    t->iterations = 50;
    job_start(&t->job);
    job_user_pause(&t->job, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_PAUSED);
    progress = t->job.progress_current;
    test_settle();
    /* a paused job makes no progress */
    g_assert_cmpint(t->job.progress_current, ==, progress);
    g_assert_true(t->job.paused && !t->job.busy);
    job_user_resume(&t->job, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_NULL);
    g_assert_cmpint(t->job.progress_current, ==, 50);
    g_assert_cmpstr(events->str, ==, "created running paused running "
                    "waiting pending concluded null ");
    test_job_put(t);
}

static void test_pause_before_start(void)
{
    TestJob *t = test_job_new("ps", JOB_DEFAULT);

    t->iterations = 2;
    job_user_pause(&t->job, &error_abort);
    job_start(&t->job);
    test_wait_status(&t->job, JOB_STATUS_PAUSED);
    g_assert_cmpint(t->job.progress_current, ==, 0);
    job_user_resume(&t->job, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_NULL);
    test_job_put(t);
}

static void test_ready_complete(void)
{
    TestJob *t = test_job_new("r", JOB_DEFAULT);

    t->go_ready = true;
    job_start(&t->job);
    test_wait_status(&t->job, JOB_STATUS_READY);
    job_user_pause(&t->job, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_STANDBY);
    job_user_resume(&t->job, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_READY);
    job_complete(&t->job, &error_abort);
    test_wait_status(&t->job, JOB_STATUS_NULL);
    g_assert_cmpstr(events->str, ==, "created running ready standby ready "
                    "waiting pending concluded null ");
    g_assert_true(t->committed);
    test_job_put(t);
}

/* A cancel without force of a READY job that allows it completes it. */
static void test_soft_cancel(void)
{
    TestJob *t = test_job_new("s", JOB_MANUAL_DISMISS);
    Error *err = NULL;

    t->go_ready = true;
    job_start(&t->job);
    test_wait_status(&t->job, JOB_STATUS_READY);
    job_user_cancel(&t->job, false, &error_abort);
    /* after a cancel request, complete is refused */
    g_assert_false(job_complete(&t->job, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "The active block job 's' cannot be completed");
    error_free(err);
    test_wait_status(&t->job, JOB_STATUS_CONCLUDED);
    g_assert_cmpint(t->job.ret, ==, 0);
    g_assert_true(t->committed);
    test_job_put(t);
}

static void test_ids(void)
{
    TestJob *t = test_job_new("dup", JOB_DEFAULT);
    Error *err = NULL;

    g_assert_null(job_create("dup", &test_job_driver, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "Job ID 'dup' already in use");
    error_free(err);
    err = NULL;
    g_assert_null(job_create("1x", &test_job_driver, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==, "Invalid job ID '1x'");
    error_free(err);
    err = NULL;
    g_assert_null(job_create(NULL, &test_job_driver, 0, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "An explicit job ID is required");
    error_free(err);
    test_job_put(t);
}

static void test_speed(void)
{
    TestJob *t = test_job_new("sp", JOB_DEFAULT);
    Error *err = NULL;
    int64_t total = 0;

    g_assert_false(job_set_speed(&t->job, -1, &err));
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Parameter 'speed' expects a non-negative value");
    error_free(err);
    /* unlimited: never a delay */
    g_assert_cmpint(job_ratelimit_delay(&t->job, 1 << 30), ==, 0);
    job_set_speed(&t->job, 10 << 20, &error_abort);
    /* 10 MiB/s: 100 MiB in 1 MiB pieces costs about 10 s of delays */
    for (int i = 0; i < 100; i++) {
        int64_t d = job_ratelimit_delay(&t->job, 1 << 20);

        total += d;
        /* the next slice begins after the delay, as if the job slept */
        if (d) {
            t->job.rl_slice_end_ns -= d;
        }
    }
    g_assert_cmpint(total, >, 8 * 1000000000LL);
    g_assert_cmpint(total, <, 12 * 1000000000LL);
    test_job_put(t);
}

/* A drain of a node a block job works on pauses the job until it ends. */
static const JobDriver test_block_job_driver = {
    .instance_size = sizeof(TestJob),
    .job_type = "test",
    .run = test_job_run,
    .listener = &block_job_listener,
};

/* ---------------------------------------------------------------------- */
/* Groups of jobs (completion-mode grouped; job.c inv. 7) */

/* Two jobs of one group, not started: @a then @b. */
static JobTxn *test_txn_pair(TestJob **a, TestJob **b, int flags_a,
                             int flags_b)
{
    JobTxn *txn = job_txn_new();

    *a = test_job_new("ta", flags_a | JOB_MANUAL_DISMISS);
    *b = test_job_new("tb", flags_b | JOB_MANUAL_DISMISS);
    job_txn_add_job(txn, &(*a)->job);
    job_txn_add_job(txn, &(*b)->job);
    return txn;
}

/* The quick job waits for the slow one; both commit, together. */
static void test_txn_success(void)
{
    TestJob *a, *b;
    JobTxn *txn = test_txn_pair(&a, &b, 0, 0);

    a->iterations = 1;
    b->iterations = 1000000;
    job_start(&a->job);
    job_start(&b->job);
    test_wait_status(&a->job, JOB_STATUS_WAITING);
    test_settle();
    g_assert_cmpint(a->job.status, ==, JOB_STATUS_WAITING);
    g_assert_false(a->committed);
    b->iterations = 0;
    test_wait_status(&b->job, JOB_STATUS_CONCLUDED);
    g_assert_cmpint(a->job.status, ==, JOB_STATUS_CONCLUDED);
    g_assert_true(a->committed && b->committed);
    g_assert_false(a->aborted || b->aborted);
    g_assert_null(a->job.txn);
    job_txn_unref(txn);
    test_job_put(a);
    test_job_put(b);
}

/* One fails: the other is cancelled, both abort. */
static void test_txn_failure(void)
{
    TestJob *a, *b;
    JobTxn *txn = test_txn_pair(&a, &b, 0, 0);

    a->iterations = 2;
    a->fail = -EIO;
    b->iterations = 1000000;
    job_start(&a->job);
    job_start(&b->job);
    test_wait_status(&b->job, JOB_STATUS_CONCLUDED);
    g_assert_cmpint(a->job.status, ==, JOB_STATUS_CONCLUDED);
    g_assert_cmpint(a->job.ret, ==, -EIO);
    g_assert_cmpint(b->job.ret, ==, -ECANCELED);
    g_assert_true(a->aborted && b->aborted && a->cleaned && b->cleaned);
    g_assert_false(a->committed || b->committed);
    job_txn_unref(txn);
    test_job_put(a);
    test_job_put(b);
}

/* One waits for job-finalize: both do; finalizing the other ends both. */
static void test_txn_manual_finalize(void)
{
    TestJob *a, *b;
    JobTxn *txn = test_txn_pair(&a, &b, 0, JOB_MANUAL_FINALIZE);
    Error *err = NULL;

    job_start(&a->job);
    job_start(&b->job);
    test_wait_status(&b->job, JOB_STATUS_PENDING);
    test_wait_status(&a->job, JOB_STATUS_PENDING);
    test_settle();
    g_assert_false(a->committed || b->committed);
    g_assert_false(job_dismiss(&a->job, &err));
    error_free(err);
    job_finalize(&a->job, &error_abort);
    g_assert_cmpint(a->job.status, ==, JOB_STATUS_CONCLUDED);
    g_assert_cmpint(b->job.status, ==, JOB_STATUS_CONCLUDED);
    g_assert_true(a->committed && b->committed);
    job_txn_unref(txn);
    test_job_put(a);
    test_job_put(b);
}

/* A cancel of a PENDING job of a group aborts the whole group. */
static void test_txn_cancel_pending(void)
{
    TestJob *a, *b;
    JobTxn *txn = test_txn_pair(&a, &b, JOB_MANUAL_FINALIZE,
                                JOB_MANUAL_FINALIZE);

    job_start(&a->job);
    job_start(&b->job);
    test_wait_status(&a->job, JOB_STATUS_PENDING);
    test_wait_status(&b->job, JOB_STATUS_PENDING);
    job_user_cancel(&b->job, true, &error_abort);
    g_assert_cmpint(a->job.status, ==, JOB_STATUS_CONCLUDED);
    g_assert_cmpint(b->job.status, ==, JOB_STATUS_CONCLUDED);
    g_assert_cmpint(a->job.ret, ==, -ECANCELED);
    g_assert_true(a->aborted && b->aborted);
    g_assert_false(a->committed || b->committed);
    job_txn_unref(txn);
    test_job_put(a);
    test_job_put(b);
}

static void test_drain_pauses(void)
{
    QDict *opts = qdict_new();
    BlockDriverState *bs;
    BlockJob *bjob;
    TestJob *t;

    qdict_put_str(opts, "driver", "null-co");
    qdict_put_str(opts, "node-name", "n0");
    bs = bdrv_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    bjob = block_job_create("bj", &test_block_job_driver, bs,
                            BLK_PERM_CONSISTENT_READ, BLK_PERM_ALL, 0,
                            JOB_DEFAULT, &error_abort);
    g_assert_nonnull(block_job_from_job(&bjob->job));
    t = (TestJob *)bjob;
    t->iterations = 1000000;
    job_ref(&bjob->job);
    job_start(&bjob->job);
    bdrv_drained_begin(bs);
    test_wait_status(&bjob->job, JOB_STATUS_PAUSED);
    g_assert_false(bjob->job.user_paused);
    bdrv_drained_end(bs);
    test_wait_status(&bjob->job, JOB_STATUS_RUNNING);
    job_cancel_sync(&bjob->job, true);
    g_assert_cmpint(bjob->job.status, ==, JOB_STATUS_NULL);
    block_job_remove_all_bdrv(bjob);
    job_unref(&bjob->job);
    g_assert_cmpint(bdrv_get_refcnt(bs), ==, 1);
    bdrv_unref(bs);
}

static void test_error_policy(void)
{
    QDict *opts = qdict_new();
    BlockDriverState *bs;
    BlockJob *bjob;

    qdict_put_str(opts, "driver", "null-co");
    bs = bdrv_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    bjob = block_job_create("be", &test_block_job_driver, bs,
                            BLK_PERM_CONSISTENT_READ, BLK_PERM_ALL, 0,
                            JOB_DEFAULT, &error_abort);
    g_string_truncate(events, 0);
    g_assert_cmpint(block_job_error_action(bjob, BLOCKDEV_ON_ERROR_REPORT,
                                           true, EIO), ==,
                    BLOCK_ERROR_ACTION_REPORT);
    g_assert_cmpint(block_job_error_action(bjob, BLOCKDEV_ON_ERROR_IGNORE,
                                           true, EIO), ==,
                    BLOCK_ERROR_ACTION_IGNORE);
    g_assert_cmpint(block_job_error_action(bjob, BLOCKDEV_ON_ERROR_ENOSPC,
                                           false, EIO), ==,
                    BLOCK_ERROR_ACTION_REPORT);
    g_assert_cmpint(bjob->iostatus, ==, BLOCK_JOB_IOSTATUS_OK);
    g_assert_cmpint(block_job_error_action(bjob, BLOCKDEV_ON_ERROR_ENOSPC,
                                           false, ENOSPC), ==,
                    BLOCK_ERROR_ACTION_STOP);
    g_assert_true(bjob->job.user_paused);
    g_assert_cmpint(bjob->iostatus, ==, BLOCK_JOB_IOSTATUS_NOSPACE);
    g_assert_cmpint(block_job_error_action(bjob, BLOCKDEV_ON_ERROR_STOP,
                                           true, EIO), ==,
                    BLOCK_ERROR_ACTION_STOP);
    g_assert_cmpstr(events->str, ==, "BLOCK_JOB_ERROR BLOCK_JOB_ERROR "
                    "BLOCK_JOB_ERROR BLOCK_JOB_ERROR BLOCK_JOB_ERROR ");
    job_user_resume(&bjob->job, &error_abort);
    block_job_iostatus_reset(bjob);
    g_assert_cmpint(bjob->job.pause_count, ==, 1);  /* not started yet */
    job_ref(&bjob->job);
    job_cancel_sync(&bjob->job, true);
    block_job_remove_all_bdrv(bjob);
    job_unref(&bjob->job);
    bdrv_unref(bs);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    events = g_string_new("");
    qapi_event_add_listener(test_event_cb, NULL);

    g_test_add_func("/job/verb-table", test_verb_table);
    g_test_add_func("/job/verbs-applied", test_verbs_applied);
    g_test_add_func("/job/success-events", test_success_events);
    g_test_add_func("/job/manual-finalize-dismiss",
                    test_manual_finalize_dismiss);
    g_test_add_func("/job/failure", test_failure);
    g_test_add_func("/job/cancel-running", test_cancel_running);
    g_test_add_func("/job/cancel-created", test_cancel_created);
    g_test_add_func("/job/cancel-paused", test_cancel_paused);
    g_test_add_func("/job/pause-resume", test_pause_resume);
    g_test_add_func("/job/pause-before-start", test_pause_before_start);
    g_test_add_func("/job/ready-complete", test_ready_complete);
    g_test_add_func("/job/soft-cancel", test_soft_cancel);
    g_test_add_func("/job/ids", test_ids);
    g_test_add_func("/job/speed", test_speed);
    g_test_add_func("/job/txn-success", test_txn_success);
    g_test_add_func("/job/txn-failure", test_txn_failure);
    g_test_add_func("/job/txn-manual-finalize", test_txn_manual_finalize);
    g_test_add_func("/job/txn-cancel-pending", test_txn_cancel_pending);
    g_test_add_func("/blockjob/drain-pauses", test_drain_pauses);
    g_test_add_func("/blockjob/error-policy", test_error_policy);
    return g_test_run();
}
