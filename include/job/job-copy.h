/*
 * What block-stream and block-commit share (block/job-copy.c): the copy
 * loop, which walks a node's length in chunks, asks the job which ranges
 * to copy, runs several copies at once, applies the job's error policy
 * and rate limit; and the change of backing node that ends both jobs.
 */
#ifndef QBLOCK_JOB_COPY_H
#define QBLOCK_JOB_COPY_H

#include "job/blockjob.h"

/* What a job that uses the loop supplies.  Both callbacks are required
 * and run in the job's coroutines, with the job's nodes as they were
 * when the loop started. */
typedef struct BlockJobCopyDriver {
    /*
     * Whether [offset, offset + bytes) must be copied: 1 yes, 0 no, or
     * -errno (a read error); *pnum is how far the answer holds (at least
     * one byte, at most @bytes).
     */
    int coroutine_fn (*needs_copy)(BlockJob *job, int64_t offset,
                                   int64_t bytes, int64_t *pnum);
    /*
     * Copies [offset, offset + bytes) through @buf (@bytes long): 0 or
     * -errno with *is_read telling whether the read or the write failed.
     */
    int coroutine_fn (*copy)(BlockJob *job, int64_t offset, int64_t bytes,
                             void *buf, bool *is_read);
} BlockJobCopyDriver;

/*
 * Copies what @drv says must be copied of [0, len), in chunks of at most
 * @chunk bytes, several at once; buffers come from @blk's alignment.
 * Returns 0 when done or cancelled, else the first error that the policy
 * @on_error did not let pass (ignore lets it pass, but it is still
 * returned at the end, as QEMU's stream and commit do).
 */
int coroutine_fn block_job_copy_loop(BlockJob *job,
                                     const BlockJobCopyDriver *drv,
                                     BlockBackend *blk, int64_t len,
                                     int64_t chunk, BlockdevOnError on_error);

/*
 * The end of stream and commit (their prepare): @base (NULL: none)
 * becomes the backing node of @bs in the graph and in @bs's image, which
 * names it @backing_file when given, else by its filename; @bs is
 * drained meanwhile.  Reports a failure of the graph change; returns 0
 * or -EPERM, as QEMU's jobs do.
 */
int block_job_change_backing(BlockDriverState *bs, BlockDriverState *base,
                             const char *backing_file);

#endif
