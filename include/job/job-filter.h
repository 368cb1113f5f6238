/*
 * The filter nodes a block job puts in the graph for its life, as QEMU
 * 7.2 does (block/job-filter.c): `copy-on-read` above the top of a
 * block-stream, `commit_top` between an intermediate block-commit's top
 * and its overlay, `mirror_top` above the source of a blockdev-mirror or
 * an active block-commit.  `filter-node-name` names them; without it
 * they get an automatic "#blockN" name.  Main loop only.
 */
#ifndef QBLOCK_JOB_FILTER_H
#define QBLOCK_JOB_FILTER_H

#include "block/block_int.h"

typedef enum JobFilterKind {
    /* above @bs, every user of @bs moves to it; reads copy up to bottom */
    JOB_FILTER_COPY_ON_READ,
    /* above @bs, read-only: only the overlays of @bs (backing edges) */
    JOB_FILTER_COMMIT_TOP,
    /* above @bs, every user of @bs moves to it; writes pass through */
    JOB_FILTER_MIRROR_TOP,
    /*
     * the same for an active commit: it asks no consistent read of @bs,
     * whose backing chain down to the base leaves the graph
     */
    JOB_FILTER_MIRROR_TOP_COMMIT,
} JobFilterKind;

/*
 * Opens the filter of @kind over @bs (@bottom: the copy-on-read filter's
 * "bottom" node, else NULL) named @node_name and moves @bs's users to
 * it, as @kind says; the jobs' own edges stay on @bs.  Returns the
 * filter (the caller's reference), or NULL with QEMU's message (an
 * invalid or duplicate node name, a permission conflict) and the graph
 * unchanged.
 */
BlockDriverState *job_filter_insert(JobFilterKind kind, BlockDriverState *bs,
                                    BlockDriverState *bottom,
                                    const char *node_name, Error **errp);

/*
 * Takes @filter out: its users (the jobs' edges excepted) move back to
 * the node below it, and the caller's reference goes.  Drains while it
 * does.  A failure to move (which the permissions the users had before
 * rule out) leaves the filter in place, passing everything through, and
 * is reported.
 */
void job_filter_drop(BlockDriverState *filter);

#endif
