/*
 * Block jobs: jobs that work on nodes of the graph (stream, commit,
 * mirror).  On top of a Job (job.h) a block job has the node QEMU calls
 * its device, holds an edge on every node it involves (so that a drain
 * of one of them pauses it, and so that its permissions are checked
 * against the other users), reports its errors by the on-*-error
 * policies, and sends the BLOCK_JOB_* events.
 */
#ifndef QBLOCK_BLOCKJOB_H
#define QBLOCK_BLOCKJOB_H

#include "job/job.h"
#include "qblock/block-backend.h"

/* QEMU's BlockdevOnError: what a job does when an I/O request fails. */
typedef enum BlockdevOnError {
    BLOCKDEV_ON_ERROR_REPORT,   /* the job fails with the error */
    BLOCKDEV_ON_ERROR_IGNORE,   /* the job goes on (and retries later) */
    BLOCKDEV_ON_ERROR_ENOSPC,   /* stop on ENOSPC, report the others */
    BLOCKDEV_ON_ERROR_STOP,     /* the job pauses until job-resume */
    BLOCKDEV_ON_ERROR_AUTO,     /* as enospc, for jobs */
    BLOCKDEV_ON_ERROR__MAX,
} BlockdevOnError;

extern const char *const BlockdevOnError_str[BLOCKDEV_ON_ERROR__MAX + 1];

typedef enum BlockErrorAction {
    BLOCK_ERROR_ACTION_IGNORE,
    BLOCK_ERROR_ACTION_REPORT,
    BLOCK_ERROR_ACTION_STOP,
} BlockErrorAction;

/* QEMU's io-status of a block job. */
typedef enum BlockJobIoStatus {
    BLOCK_JOB_IOSTATUS_OK,
    BLOCK_JOB_IOSTATUS_FAILED,
    BLOCK_JOB_IOSTATUS_NOSPACE,
} BlockJobIoStatus;

extern const char *const BlockJobIoStatus_str[];

typedef struct BlockJob {
    Job job;
    /* the node the job was started on (QEMU's "device"), for queries */
    BlockDriverState *bs;
    /* BdrvChild *: the job's edges on the nodes it involves */
    GSList *nodes;
    BlockJobIoStatus iostatus;
} BlockJob;

/*
 * Creates a block job on @bs (which gets an edge with @perm and
 * @shared_perm).  @job_id NULL: the device name, which nodes
 * have not (refused, as in QEMU's daemon).  @speed: the initial rate limit.  @flags: JOB_MANUAL_*.  The
 * driver's listener must be block_job_listener.
 */
void *block_job_create(const char *job_id, const JobDriver *driver,
                       BlockDriverState *bs, uint64_t perm,
                       uint64_t shared_perm, int64_t speed, int flags,
                       Error **errp);
/*
 * Adds an edge from the job to @bs, named @name: drains of @bs pause
 * the job, and the permissions are the job's.  -errno on a conflict.
 */
int block_job_add_bdrv(BlockJob *job, const char *name, BlockDriverState *bs,
                       uint64_t perm, uint64_t shared_perm, Error **errp);
/* Drops every edge (a job ending: the graph may change after). */
void block_job_remove_all_bdrv(BlockJob *job);

/* The block job @job is, or NULL for another kind of job. */
BlockJob *block_job_from_job(Job *job);

/*
 * What to do about a failed request (@error a positive errno) by the
 * policy @on_err; sends BLOCK_JOB_ERROR, and for STOP pauses the job as
 * a user pause (job-resume goes on) and records the io-status.
 */
BlockErrorAction block_job_error_action(BlockJob *job, BlockdevOnError on_err,
                                        bool is_read, int error);
/* job-resume of a job stopped by an error clears its io-status. */
void block_job_iostatus_reset(BlockJob *job);

/*
 * True, with QEMU's error, if a block job works on @bs already (one job
 * at a time per node, as QEMU's op blockers allow).
 */
bool block_job_node_busy(BlockDriverState *bs, Error **errp);
/*
 * block_job_node_busy(), where the jobs of @driver on @bs do not count:
 * a second backup of a node stacks its filter above the first's, as
 * QEMU does.
 */
bool block_job_node_busy_but(BlockDriverState *bs, const JobDriver *driver,
                             Error **errp);

/*
 * The node of the backing chain of @bs that @name (a file name, as a
 * user gives a job's base) names, or NULL.  As in QEMU, below a node
 * whose backing node was given explicitly (blockdev-add's backing) only
 * that node's own file name matches; elsewhere the name the overlay's
 * image records does too, relative to the overlay's directory.
 */
BlockDriverState *block_job_find_backing(BlockDriverState *bs,
                                         const char *name);

/* A parsed on-error value ("report", ...), or -1. */
int block_job_parse_on_error(const char *name);

/*
 * Moves every user of @from (exports, parent nodes) to @to, except the
 * jobs' edges and @to's own edges (its backing node may be @from); the
 * caller drains @from.  -errno if the permissions refuse it, and then
 * nothing changed.
 */
int block_job_replace_node(BlockDriverState *from, BlockDriverState *to,
                           Error **errp);

/* The events of every block job: the driver's listener. */
extern const JobListener block_job_listener;

#endif
