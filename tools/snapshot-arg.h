/*
 * The -l argument of qblock-img (convert, measure) and qblock-nbd: an
 * internal snapshot named by its ID or name ("-l foo"), or by
 * snapshot.id/snapshot.name options ("-l snapshot.id=1"), which win when
 * both are given; and loading it, read-only, in place of the active disk.
 */
#ifndef QBLOCK_SNAPSHOT_ARG_H
#define QBLOCK_SNAPSHOT_ARG_H

#include "qblock/block-backend.h"
#include "util/qemu-option.h"

typedef struct ToolSnapshotArg {
    const char *id_or_name;
    QemuOpts *opts;
} ToolSnapshotArg;

/*
 * Takes one -l argument into @sn; a later option string replaces an
 * earlier one.  False after printing why the options did not parse (the
 * caller adds its own "Failed in parsing snapshot param" line: qemu-img
 * and qemu-nbd quote the argument differently).
 */
bool tool_snapshot_arg_parse(ToolSnapshotArg *sn, const char *arg);
/* True if @sn names a snapshot. */
bool tool_snapshot_arg_given(const ToolSnapshotArg *sn);
/*
 * Makes @blk (read-only) show the snapshot @sn names, if it names one.
 * Returns 0, or -EINVAL after printing "Failed to load snapshot: ...".
 */
int tool_snapshot_arg_load(BlockBackend *blk, const ToolSnapshotArg *sn);
void tool_snapshot_arg_free(ToolSnapshotArg *sn);

#endif
