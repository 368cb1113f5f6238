/*
 * x-blockdev-amend: changing an open image as a job (QEMU's type
 * "amend").  The job runs the driver's amend code, the one qemu-img amend
 * runs, on the node as it is in use: for now the key slots of a LUKS
 * image, alone (driver luks) or inside qcow2 (encrypt.*), as in QEMU.
 */
#ifndef QBLOCK_JOB_AMEND_H
#define QBLOCK_JOB_AMEND_H

#include "job/job.h"
#include "util/json.h"

/*
 * Starts the job @job_id that amends the node @node_name to @options, a
 * BlockdevAmendOptions object already checked against the schema;
 * @force: QEMU's force (erase the last slot, overwrite an active one).
 * The job finalizes itself and waits for job-dismiss, as QEMU's.  False
 * with an error (QEMU's words) if it did not start.
 */
bool blockdev_amend_start(const char *job_id, const char *node_name,
                          JsonObject *options, bool force, Error **errp);

#endif
