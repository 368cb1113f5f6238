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
    /* the copy-on-read filter's node name (NULL: automatic) */
    const char *filter_node_name;
} StreamOptions;

/*
 * Streams into @top the data of the nodes from its backing node down to
 * @bottom (included); @bottom's backing node becomes @top's.
 */
bool stream_start(const char *job_id, BlockDriverState *top,
                  BlockDriverState *bottom, const StreamOptions *opts,
                  Error **errp);

typedef struct CommitOptions {
    int64_t speed;
    BlockdevOnError on_error;
    /* the backing file the overlay's image names afterwards (NULL: base's) */
    const char *backing_file;
    int job_flags;              /* JOB_MANUAL_* */
    /* the commit_top filter's node name (NULL: automatic) */
    const char *filter_node_name;
    /*
     * the active layer the command named (QEMU's device; not NULL): the
     * job's main node, which it blocks too
     */
    BlockDriverState *active;
} CommitOptions;

/*
 * Commits @top, a node below the active layer, and the nodes below it
 * down to @base (exclusive) into @base; @base becomes the backing node
 * of @top's overlay.
 */
bool commit_start(const char *job_id, BlockDriverState *top,
                  BlockDriverState *base, const CommitOptions *opts,
                  Error **errp);

typedef enum MirrorSyncMode {
    MIRROR_SYNC_TOP,        /* what the source holds above its backing */
    MIRROR_SYNC_FULL,       /* the whole disk */
    MIRROR_SYNC_NONE,       /* only what is written from now on */
} MirrorSyncMode;

/* What the target's backing node is once the job completes. */
typedef enum MirrorBackingMode {
    /* as it is (blockdev-mirror: the caller built the target) */
    MIRROR_LEAVE_BACKING_CHAIN,
    /*
     * the node below what the job copied: the source's backing node for
     * sync=top, the source itself for sync=none, none for sync=full
     * (drive-mirror's new image, opened without its backing file)
     */
    MIRROR_SOURCE_BACKING_CHAIN,
    /* the backing file its image names (drive-mirror mode=existing) */
    MIRROR_OPEN_BACKING_CHAIN,
} MirrorBackingMode;

typedef struct MirrorOptions {
    MirrorSyncMode sync;
    MirrorBackingMode backing_mode;
    /*
     * sync=full onto an image that may hold data: every range reaches
     * the target, the source's zeroes as zero writes
     */
    bool zero_target;
    /* drive-mirror unmap=false: zeroes stay allocated in the target */
    bool no_unmap;
    /* copy-mode=write-blocking: guest writes reach the target at once */
    bool write_blocking;
    int64_t granularity;        /* bytes per dirty bit; 0: default */
    int64_t buf_size;           /* bytes copied at most at once; 0: 16M */
    BlockdevOnError on_source_error;
    BlockdevOnError on_target_error;
    int64_t speed;
    int job_flags;              /* JOB_MANUAL_* */
    /* the node whose users move to the target (NULL: the source) */
    BlockDriverState *replaces;
    /* the mirror_top filter's node name (NULL: automatic) */
    const char *filter_node_name;
} MirrorOptions;

/* Mirrors @source to @target (blockdev-mirror). */
bool mirror_start(const char *job_id, BlockDriverState *source,
                  BlockDriverState *target, const MirrorOptions *opts,
                  Error **errp);

/*
 * Commits the active layer @top into @base (in its backing chain): a
 * mirror whose target is @base, of type commit; on complete @base takes
 * @top's place.  @opts->sync and replaces are ignored.
 */
bool commit_active_start(const char *job_id, BlockDriverState *top,
                         BlockDriverState *base, const MirrorOptions *opts,
                         Error **errp);

#endif
