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

/* Registers block_resize and the snapshot commands. */
void blockdev_ops_register_commands(void);

#endif
