/*
 * blockdev-create: image creation as a job (QEMU's type "create").  The
 * job runs the driver's own creation code, the one qemu-img create runs:
 * the file protocol's by file name, a format's on the nodes its options
 * name (BdrvCreateTarget).
 */
#ifndef QBLOCK_JOB_CREATE_H
#define QBLOCK_JOB_CREATE_H

#include "job/job.h"
#include "util/json.h"

/*
 * Starts the job @job_id for @options, a BlockdevCreateOptions object
 * already checked against the schema.  The job finalizes itself and waits
 * for job-dismiss, as QEMU's.  False with an error if it did not start.
 */
bool blockdev_create_start(const char *job_id, JsonObject *options,
                           Error **errp);

#endif
