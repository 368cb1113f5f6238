/*
 * The block jobs that move data along a backing chain or to another
 * node: block-stream (block/stream.c), block-commit (block/commit.c) and
 * blockdev-mirror (block/mirror.c).  The monitor resolves and checks the
 * nodes its arguments name (QEMU's messages) and starts the job here.
 */
#ifndef QBLOCK_BLOCK_JOBS_H
#define QBLOCK_BLOCK_JOBS_H

#include "job/blockjob.h"

typedef struct StreamOptions {
    int64_t speed;
    BlockdevOnError on_error;
    /* the backing file the top's image names afterwards (NULL: base's) */
    const char *backing_file;
    int job_flags;              /* JOB_MANUAL_* */
} StreamOptions;

/*
 * Streams into @top the data of the nodes from its backing node down to
 * @bottom (included); @bottom's backing node becomes @top's.
 */
bool stream_start(const char *job_id, BlockDriverState *top,
                  BlockDriverState *bottom, const StreamOptions *opts,
                  Error **errp);

#endif
