/*
 * Internal snapshots: the block layer's API.
 *
 * A format that stores snapshots inside the image (qcow2) implements the
 * snapshot callbacks of BlockDriver; these functions find the node that
 * does (through filters), drain it, and turn the driver's errno into the
 * messages qemu-img prints.  The VM state that a snapshot can carry is
 * written beforehand with bdrv_save_vmstate() (block.h).
 *
 * Call these outside coroutine context: the driver callbacks run their
 * metadata work in a coroutine of their own.
 */
#ifndef QBLOCK_SNAPSHOT_H
#define QBLOCK_SNAPSHOT_H

#include "block/block-common.h"

/*
 * One snapshot as the block layer describes it.  The fixed sizes are
 * QEMU's: longer names in an image are shown truncated.
 */
typedef struct QEMUSnapshotInfo {
    char id_str[128];           /* unique; "" on create: the driver picks */
    char name[256];             /* tag; not necessarily unique */
    uint64_t vm_state_size;     /* bytes of VM state saved with it */
    uint32_t date_sec;          /* creation time (wall clock) */
    uint32_t date_nsec;
    uint64_t vm_clock_nsec;     /* guest clock at creation */
    uint64_t icount;            /* instruction count, or -1 if not known */
} QEMUSnapshotInfo;

/* The icount value meaning "not recorded" (the ICOUNT column is empty). */
#define QEMU_SNAPSHOT_NO_ICOUNT UINT64_MAX

/*
 * True if @bs (or the node below it through filters) can take internal
 * snapshots now: its format has them and it is writable.
 */
bool bdrv_can_snapshot(BlockDriverState *bs);
/*
 * Lists the snapshots of @bs: returns their number (0 or more) and, when
 * positive, a g_new'd array in *psn_info (the caller g_free()s it); a
 * format without snapshots has none.  -errno on failure.
 */
int bdrv_snapshot_list(BlockDriverState *bs, QEMUSnapshotInfo **psn_info);
/*
 * Finds the first snapshot whose name is @name (qemu-img snapshot -d
 * looks up by name only).  Returns 0 and fills *sn_info, or -ENOENT.
 */
int bdrv_snapshot_find(BlockDriverState *bs, QEMUSnapshotInfo *sn_info,
                       const char *name);
/*
 * Creates a snapshot of the current disk (and of the VM state saved with
 * bdrv_save_vmstate, whose size @sn_info->vm_state_size gives).  An empty
 * id_str gets a fresh numeric ID, written back into @sn_info.  When it
 * returns 0 the snapshot is on stable storage.  -ENOTSUP: the format has
 * no internal snapshots.
 */
int bdrv_snapshot_create(BlockDriverState *bs, QEMUSnapshotInfo *sn_info);
/*
 * Reverts the disk to the snapshot whose ID, else name, is
 * @snapshot_id_or_name ("Failed to load snapshot: <errno text>").
 */
int bdrv_snapshot_goto(BlockDriverState *bs, const char *snapshot_id_or_name,
                       Error **errp);
/*
 * Deletes the snapshot with ID @snapshot_id and name @name (either may be
 * NULL, not both; both given must both match).
 */
int bdrv_snapshot_delete(BlockDriverState *bs, const char *snapshot_id,
                         const char *name, Error **errp);
/*
 * Makes a read-only node show the snapshot instead of the current disk
 * until it is closed (qemu-img convert -l).  -ENOENT: no such snapshot.
 */
int bdrv_snapshot_load_tmp(BlockDriverState *bs, const char *snapshot_id,
                           const char *name, Error **errp);
/* bdrv_snapshot_load_tmp() by ID, else by name. */
int bdrv_snapshot_load_tmp_by_id_or_name(BlockDriverState *bs,
                                         const char *id_or_name,
                                         Error **errp);

#endif
