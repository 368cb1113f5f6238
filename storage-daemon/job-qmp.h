/*
 * The daemon's QMP commands on jobs (query-jobs, job-*, block-job-*,
 * query-block-jobs) and the block job commands that start jobs
 * (blockdev-create, block-stream, block-commit, blockdev-mirror), over
 * the job layer of include/job/.
 */
#ifndef QBLOCK_SD_JOB_QMP_H
#define QBLOCK_SD_JOB_QMP_H

#include "job/blockjob.h"
#include "util/json.h"

void job_register_commands(void);

/*
 * Arguments that every command starting a job takes, here and in
 * blockdev-backup (backup-qmp.c); the schema has checked their values.
 * job_qmp_flags(): auto-finalize and auto-dismiss as JOB_MANUAL_* flags;
 * job_qmp_on_error(): the on-error argument @name, "report" if absent.
 */
int job_qmp_flags(JsonObject *args);
BlockdevOnError job_qmp_on_error(JsonObject *args, const char *name);

#endif
