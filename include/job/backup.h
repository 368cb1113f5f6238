/*
 * blockdev-backup (block/backup.c): a job that copies a node, as it was
 * when the job was created, to a target node while guests keep writing
 * to it.  A copy-before-write filter sits above the source for the job's
 * life, so that a guest write's old data reaches the target first.  The
 * monitor checks the arguments (QEMU's messages) and resolves the nodes
 * and the bitmap; backup_job_create() does the rest of QEMU's checks.
 */
#ifndef QBLOCK_BACKUP_H
#define QBLOCK_BACKUP_H

#include "block/dirty-bitmap.h"
#include "job/blockjob.h"

/* QEMU's MirrorSyncMode as backup reads it ("incremental" is bitmap). */
typedef enum BackupSyncMode {
    BACKUP_SYNC_TOP,        /* what the source holds above its backing */
    BACKUP_SYNC_FULL,       /* the whole disk */
    BACKUP_SYNC_NONE,       /* only the old data of what guests write */
    BACKUP_SYNC_BITMAP,     /* what the bitmap marks */
} BackupSyncMode;

/* QEMU's BitmapSyncMode: what becomes of the bitmap at the job's end. */
typedef enum BitmapSyncMode {
    BITMAP_SYNC_ON_SUCCESS, /* cleared of what was copied if it succeeded */
    BITMAP_SYNC_NEVER,      /* left as it was */
    BITMAP_SYNC_ALWAYS,     /* cleared of what was copied, even on failure */
} BitmapSyncMode;

typedef struct BackupOptions {
    BackupSyncMode sync;
    /* the user's bitmap (NULL: none); frozen for the job's life */
    BdrvDirtyBitmap *bitmap;
    BitmapSyncMode bitmap_mode;
    /* writes of the target are compressed (the target must support it) */
    bool compress;
    BlockdevOnError on_source_error;
    BlockdevOnError on_target_error;
    int64_t speed;
    int job_flags;                  /* JOB_MANUAL_* */
    /* the filter's node name (NULL: an automatic "#blockN") */
    const char *filter_node_name;
    /* x-perf: copies in flight at most, bytes per copy at most (0: 1M) */
    int64_t max_workers;
    int64_t max_chunk;
} BackupOptions;

/* QEMU's default x-perf.max-workers. */
#define BACKUP_DEFAULT_MAX_WORKERS 64

/*
 * Creates the backup job of @source to @target, CREATED: the filter is
 * in place and the point in time taken, but nothing is copied until
 * job_start() (a transaction starts it at commit; job_early_fail()
 * takes the filter out again and gives the bitmap back).  NULL with
 * QEMU's error if an argument is refused.
 */
BlockJob *backup_job_create(const char *job_id, BlockDriverState *source,
                            BlockDriverState *target,
                            const BackupOptions *opts, Error **errp);

#endif
