/*
 * The daemon's QMP commands on jobs (query-jobs, job-*, block-job-*,
 * query-block-jobs) and the block job commands that start jobs
 * (blockdev-create, block-stream, block-commit, blockdev-mirror), over
 * the job layer of include/job/.
 */
#ifndef QBLOCK_SD_JOB_QMP_H
#define QBLOCK_SD_JOB_QMP_H

void job_register_commands(void);

#endif
