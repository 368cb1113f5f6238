/*
 * Block jobs (include/job/blockjob.h): a job's edges on the nodes it
 * involves, its error policies and its BLOCK_JOB_* events.
 *
 * Invariants:
 *  1. Each of the job's edges (class block_job_child_class) is in
 *     job->nodes from block_job_add_bdrv() until
 *     block_job_remove_bdrv() or block_job_remove_all_bdrv(), which runs
 *     at the latest when the job is freed; the first is the edge on
 *     job->bs.
 *  2. A drained section of a node the job has an edge on (or of a node
 *     below one) holds one pause of the job (job.c inv. 4), taken at
 *     drained_begin and given back at drained_end.  The job's own
 *     requests go through BlockBackends, which wait at the drain barrier
 *     without being counted (drain.c inv. 1), so the job's edges report
 *     nothing in flight themselves.
 *  3. iostatus is not OK only while the job is paused by the STOP policy
 *     (a user pause, which job-resume ends).
 *  4. Each node in job->blocked has the job's blocker in its op blockers
 *     (block-op-blockers.c inv. 1) and a reference of the job's, from
 *     block_job_block_node() until block_job_remove_all_bdrv().
 *  5. A block job runs in its main node's context (job.c inv. 8), and
 *     every node it has an edge on is in that context: a node elsewhere
 *     moves in when the edge is added, with all that is connected to it,
 *     or the edge is refused (threading rules 11 and 12).  The job's
 *     edges cannot follow a move, so its nodes stay there while it
 *     lives; when block_job_remove_all_bdrv() drops its edges, the nodes
 *     it held that no other user keeps in an iothread go back to the
 *     main loop (bdrv_leave_unused_aio_context()).
 */
#include "job/blockjob.h"

#include "block/block_int.h"
#include "util/cutils.h"
#include "util/qapi-event.h"

const char *const BlockdevOnError_str[BLOCKDEV_ON_ERROR__MAX + 1] = {
    [BLOCKDEV_ON_ERROR_REPORT] = "report",
    [BLOCKDEV_ON_ERROR_IGNORE] = "ignore",
    [BLOCKDEV_ON_ERROR_ENOSPC] = "enospc",
    [BLOCKDEV_ON_ERROR_STOP] = "stop",
    [BLOCKDEV_ON_ERROR_AUTO] = "auto",
    [BLOCKDEV_ON_ERROR__MAX] = NULL,
};

const char *const BlockJobIoStatus_str[] = {
    [BLOCK_JOB_IOSTATUS_OK] = "ok",
    [BLOCK_JOB_IOSTATUS_FAILED] = "failed",
    [BLOCK_JOB_IOSTATUS_NOSPACE] = "nospace",
};

int block_job_parse_on_error(const char *name)
{
    return qemu_name_index(BlockdevOnError_str, BLOCKDEV_ON_ERROR__MAX, name);
}

/* ---------------------------------------------------------------------- */
/* The job's edges */

/* Invariant 2: the job's requests are counted by its BlockBackends. */
static bool block_job_child_drained_poll(BdrvChild *c)
{
    return false;
}

static void block_job_child_drained_begin(BdrvChild *c)
{
    job_pause(c->opaque);
}

static void block_job_child_drained_end(BdrvChild *c)
{
    job_resume(c->opaque);
}

static char *block_job_child_get_parent_desc(BdrvChild *c)
{
    Job *job = c->opaque;

    return g_strdup_printf("%s job '%s'", job->driver->job_type, job->id);
}

static const BdrvChildClass block_job_child_class = {
    .drained_poll = block_job_child_drained_poll,
    .drained_begin = block_job_child_drained_begin,
    .drained_end = block_job_child_drained_end,
    .get_parent_desc = block_job_child_get_parent_desc,
};

/*
 * Invariant 2: the drained sections that would have reached an edge on
 * @bs, one per drained node per path up to it (as drain.c notifies).
 */
static int block_job_drains_below(BlockDriverState *bs)
{
    int n = bs->quiesce_counter > 0;

    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;

        n += c->bs ? block_job_drains_below(c->bs) : 0;
    }
    return n;
}

int block_job_add_bdrv(BlockJob *job, const char *name, BlockDriverState *bs,
                       uint64_t perm, uint64_t shared_perm, Error **errp)
{
    BdrvChild *c;
    int ret;

    /* invariant 5: QEMU's message if it cannot move */
    ret = bdrv_try_change_aio_context(bs, job->job.aio_context, NULL, errp);
    if (ret < 0) {
        return ret;
    }
    bdrv_ref(bs);
    c = bdrv_root_attach_child(bs, name, &block_job_child_class, job,
                               perm, shared_perm, errp);
    if (!c) {
        return -EPERM;
    }
    job->nodes = g_slist_append(job->nodes, c);     /* invariant 1 */
    /* a node drained already holds the job until its section ends */
    for (int i = block_job_drains_below(bs); i > 0; i--) {
        job_pause(&job->job);
    }
    return 0;
}

void block_job_remove_bdrv(BlockJob *job, BlockDriverState *bs)
{
    for (GSList *l = job->nodes; l;) {
        BdrvChild *c = l->data;

        l = l->next;
        if (c->bs != bs) {
            continue;
        }
        /* invariant 2: the drains the edge held the job for end here */
        for (int i = block_job_drains_below(bs); i > 0; i--) {
            job_resume(&job->job);
        }
        job->nodes = g_slist_remove(job->nodes, c);     /* invariant 1 */
        bdrv_root_unref_child(c);
    }
}

void block_job_block_node(BlockJob *job, BlockDriverState *bs)
{
    if (!job->blocker) {
        job->blocker = g_strdup_printf("block device is in use by block "
                                       "job: %s", job->job.driver->job_type);
    }
    bdrv_ref(bs);
    bdrv_op_block_all(bs, job->blocker);
    job->blocked = g_slist_append(job->blocked, bs);   /* invariant 4 */
}

/* Invariant 5: @bs, with a reference of the caller's, joins @held once. */
static void block_job_hold(GPtrArray *held, BlockDriverState *bs)
{
    if (g_ptr_array_find(held, bs, NULL)) {
        bdrv_unref(bs);
        return;
    }
    g_ptr_array_add(held, bs);
}

/*
 * Invariant 5: the nodes the job held go back to the main loop unless a
 * user keeps them in the iothread.  The ones nobody else references (a
 * filter the job took out) go first: they may still connect a target to
 * an exported source.
 */
static void block_job_release_nodes(GPtrArray *held)
{
    bool freed = true;

    while (freed) {
        freed = false;
        for (guint i = 0; i < held->len; i++) {
            BlockDriverState *bs = g_ptr_array_index(held, i);

            if (bs && bs->refcnt == 1) {
                g_ptr_array_index(held, i) = NULL;
                bdrv_unref(bs);
                freed = true;
            }
        }
    }
    for (guint i = 0; i < held->len; i++) {
        BlockDriverState *bs = g_ptr_array_index(held, i);

        if (bs) {
            bdrv_leave_unused_aio_context(bs);
        }
    }
    for (guint i = 0; i < held->len; i++) {
        BlockDriverState *bs = g_ptr_array_index(held, i);

        if (bs) {
            bdrv_unref(bs);
        }
    }
}

void block_job_remove_all_bdrv(BlockJob *job)
{
    /* invariant 5: the nodes held, each with a reference until the end */
    g_autoptr(GPtrArray) held = g_ptr_array_new();

    while (job->blocked) {
        BlockDriverState *bs = job->blocked->data;

        bdrv_op_unblock_all(bs, job->blocker);
        job->blocked = g_slist_delete_link(job->blocked, job->blocked);
        block_job_hold(held, bs);   /* the reference of invariant 4 */
    }
    g_clear_pointer(&job->blocker, g_free);
    while (job->nodes) {
        BdrvChild *c = job->nodes->data;

        for (int i = block_job_drains_below(c->bs); i > 0; i--) {
            job_resume(&job->job);
        }
        job->nodes = g_slist_delete_link(job->nodes, job->nodes);
        bdrv_ref(c->bs);
        block_job_hold(held, c->bs);
        bdrv_root_unref_child(c);
    }
    block_job_release_nodes(held);
}

BlockDriverState *block_job_find_backing(BlockDriverState *bs,
                                         const char *name)
{
    for (BlockDriverState *b = bs; b->backing; b = b->backing->bs) {
        BlockDriverState *below = b->backing->bs;

        if (b->explicit_options &&
            qdict_haskey(b->explicit_options, "backing")) {
            if (!strcmp(name, below->filename)) {
                return below;
            }
        } else if (bdrv_find_backing_image(b, name) == below) {
            return below;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Events */

static QDict *block_job_event_data(BlockJob *job)
{
    QDict *data = qdict_new();

    qdict_put_str(data, "type", job->job.driver->job_type);
    qdict_put_str(data, "device", job->job.id);
    qdict_put_int(data, "len", job->job.progress_total);
    qdict_put_int(data, "offset", job->job.progress_current);
    qdict_put_int(data, "speed", job->job.speed);
    return data;
}

static void block_job_event_ready(Job *job)
{
    qapi_event_emit("BLOCK_JOB_READY",
                    block_job_event_data(block_job_from_job(job)));
}

static void block_job_event_pending(Job *job)
{
    QDict *data = qdict_new();

    qdict_put_str(data, "type", job->driver->job_type);
    qdict_put_str(data, "id", job->id);
    qapi_event_emit("BLOCK_JOB_PENDING", data);
}

static void block_job_event_completed(Job *job)
{
    QDict *data = block_job_event_data(block_job_from_job(job));

    if (job->ret) {
        qdict_put_str(data, "error", error_get_pretty(job->err));
    }
    qapi_event_emit("BLOCK_JOB_COMPLETED", data);
}

static void block_job_event_cancelled(Job *job)
{
    qapi_event_emit("BLOCK_JOB_CANCELLED",
                    block_job_event_data(block_job_from_job(job)));
}

const JobListener block_job_listener = {
    .ready = block_job_event_ready,
    .pending = block_job_event_pending,
    .completed = block_job_event_completed,
    .cancelled = block_job_event_cancelled,
};

BlockJob *block_job_from_job(Job *job)
{
    return job->driver->listener == &block_job_listener ?
           (BlockJob *)job : NULL;
}

/* ---------------------------------------------------------------------- */
/* Creation and errors */

void *block_job_create(const char *job_id, const JobDriver *driver,
                       BlockDriverState *bs, uint64_t perm,
                       uint64_t shared_perm, int64_t speed, int flags,
                       Error **errp)
{
    BlockJob *job;

    assert(driver->listener == &block_job_listener);
    /*
     * QEMU names a job without an id after its device, the name of the
     * BlockBackend of the node; the daemon's nodes have none, so that is
     * "" and the id is refused, as QEMU's daemon refuses it.
     */
    /* invariant 5: where its main node is */
    job = job_create_in_context(job_id ? job_id : "", driver,
                                bdrv_get_aio_context(bs), flags, errp);
    if (!job) {
        return NULL;
    }
    job->bs = bs;
    /* checked after the id, as QEMU does */
    if (!job_set_speed(&job->job, speed, errp)) {
        job_early_fail(&job->job);
        return NULL;
    }
    if (block_job_add_bdrv(job, "main node", bs, perm, shared_perm,
                           errp) < 0) {
        job_early_fail(&job->job);
        return NULL;
    }
    return job;
}

BlockErrorAction block_job_error_action(BlockJob *job, BlockdevOnError on_err,
                                        bool is_read, int error)
{
    BlockErrorAction action;
    QDict *data;

    switch (on_err) {
    case BLOCKDEV_ON_ERROR_ENOSPC:
    case BLOCKDEV_ON_ERROR_AUTO:
        action = error == ENOSPC ? BLOCK_ERROR_ACTION_STOP :
                                   BLOCK_ERROR_ACTION_REPORT;
        break;
    case BLOCKDEV_ON_ERROR_STOP:
        action = BLOCK_ERROR_ACTION_STOP;
        break;
    case BLOCKDEV_ON_ERROR_IGNORE:
        action = BLOCK_ERROR_ACTION_IGNORE;
        break;
    default:
        action = BLOCK_ERROR_ACTION_REPORT;
        break;
    }
    data = qdict_new();
    qdict_put_str(data, "device", job->job.id);
    qdict_put_str(data, "operation", is_read ? "read" : "write");
    qdict_put_str(data, "action",
                  action == BLOCK_ERROR_ACTION_STOP ? "stop" :
                  action == BLOCK_ERROR_ACTION_IGNORE ? "ignore" : "report");
    qapi_event_emit("BLOCK_JOB_ERROR", data);
    if (action == BLOCK_ERROR_ACTION_STOP) {
        /* invariant 3: a pause the user sees, and ends with job-resume */
        if (!job->job.user_paused) {
            job_pause(&job->job);
            job->job.user_paused = true;
        }
        if (job->iostatus == BLOCK_JOB_IOSTATUS_OK) {
            job->iostatus = error == ENOSPC ? BLOCK_JOB_IOSTATUS_NOSPACE :
                                              BLOCK_JOB_IOSTATUS_FAILED;
        }
    }
    return action;
}

void block_job_iostatus_reset(BlockJob *job)
{
    job->iostatus = BLOCK_JOB_IOSTATUS_OK;
}

/* ---------------------------------------------------------------------- */
/* Graph changes at the end of a job */

/* The jobs' own edges stay where they are when a node is replaced. */
static bool block_job_edge_moves(BdrvChild *c)
{
    return c->klass != &block_job_child_class;
}

int block_job_replace_node(BlockDriverState *from, BlockDriverState *to,
                           Error **errp)
{
    return bdrv_replace_node_moving(from, to, block_job_edge_moves, errp);
}
