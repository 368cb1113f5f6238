/*
 * QMP operations on live nodes that are no jobs: block_resize, external
 * and internal snapshots (blockdev-ops.c), and the transaction command
 * that groups snapshots (transaction.c).
 */
#ifndef QBLOCK_BLOCKDEV_OPS_H
#define QBLOCK_BLOCKDEV_OPS_H

#include "block/block.h"

/*
 * The node @device (a named BlockBackend's root) or @node_name names;
 * either may be NULL.  QEMU's bdrv_lookup_bs(), with its messages:
 * "Cannot find device='x' nor node-name='y'".
 */
BlockDriverState *blockdev_lookup_bs(const char *device,
                                     const char *node_name, Error **errp);

/*
 * The node @name names (as device or node name), which must be a root
 * node, only BlockBackends above it: QEMU's qmp_get_root_bs(), with its
 * "Need a root block node".
 */
BlockDriverState *blockdev_lookup_root_bs(const char *name, Error **errp);

/*
 * Creates the image @filename of @format and @size bytes, which records
 * @backing's file name and format as its backing file, if @backing is
 * not NULL: QEMU's bdrv_img_create() for blockdev-snapshot-sync's overlay
 * and drive-backup's target, with its messages.
 */
int blockdev_create_image(const char *filename, const char *format,
                          int64_t size, BlockDriverState *backing,
                          Error **errp);

/*
 * drive-backup's and drive-mirror's target, from their "target",
 * "format" and "mode" arguments as QEMU reads them.
 */
typedef struct BlockdevDriveTarget {
    const char *filename;
    /* the format; NULL with mode existing and no format: probed */
    const char *format;
    bool existing;              /* mode existing: opened, not created */
    int flags;                  /* the source's open flags, writable */
} BlockdevDriveTarget;

/*
 * Fills @t for a copy of @bs and, unless the image exists, creates it as
 * large as @bs, of @bs's format unless format says otherwise, over
 * @backing (NULL: none).  0, or -errno with QEMU's messages.
 */
int blockdev_drive_target_create(JsonObject *args, BlockDriverState *bs,
                                 BlockDriverState *backing,
                                 BlockdevDriveTarget *t, Error **errp);
/*
 * Opens @t's image with @options (taken over; its format added) and
 * @t's flags plus @flags.  Returns a new reference, or NULL.
 */
BlockDriverState *blockdev_drive_target_open(const BlockdevDriveTarget *t,
                                             QDict *options, int flags,
                                             Error **errp);

/* Registers block_resize and the snapshot commands. */
void blockdev_ops_register_commands(void);

#endif
