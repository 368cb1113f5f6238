/*
 * The filter nodes block jobs put in the graph for their life
 * (include/job/job-filter.h), as QEMU 7.2 does, so that
 * query-named-block-nodes shows the same graph and `filter-node-name`
 * names a node users can see:
 *
 *   stream:   users of top -> copy-on-read (bottom: the last node
 *             streamed from) -> top, so guest reads copy up too
 *   commit:   overlay -> commit_top -> top ... base (intermediate)
 *   mirror:   users of source -> mirror_top -> source (and the active
 *             commit, whose source is the top)
 *
 * mirror_top and commit_top are drivers of their own, not registered:
 * blockdev-add does not offer them, as QEMU's daemon does not.  They
 * pass every request to their child unchanged; the jobs keep their
 * tracking where it is (the mirror's dirty bitmap and write hook on the
 * source, io.c invariants 6 and 7), which every write through the
 * filter reaches.
 *
 * Invariants:
 *  1. A filter is in the graph from job_filter_insert() until
 *     job_filter_drop(); in between its only users are the ones that
 *     moved to it and the jobs' edges.  The jobs' own edges never move.
 *  2. mirror_top and commit_top share every permission on their child
 *     (BLK_PERM_ALL), so that their users can move back to the child
 *     without a conflict with the filter's own edge, which still holds
 *     their permissions until the filter goes.  commit_top takes none,
 *     as QEMU's: its users only read, and the nodes below it leave the
 *     chain, which the commit job forbids others to read as consistent.
 *  3. A filter is in the context of the node it filters (threading rule
 *     2): opened in the main loop, it joins an iothread's context before
 *     it gets a user (bdrv_join_children_aio_context()), and the job
 *     runs there too (blockjob.c inv. 5).
 *
 * Main loop thread only, holding the nodes' context (the monitor's
 * commands, the end of a job); the graph changes run in drained
 * sections.
 */
#include "job/job-filter.h"

#include "block/block.h"
#include "job/blockjob.h"

static int job_filter_open(BlockDriverState *bs, QDict *options, int flags,
                           Error **errp)
{
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    bdrv_inherit_file_flags(bs);
    return 0;
}

static int job_filter_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    return 0;
}

/* mirror_top's state: which job it serves (job_filter_open_node()). */
typedef struct MirrorTopState {
    bool active_commit;
} MirrorTopState;

/*
 * Invariant 2; and QEMU's for an active commit: the chain below the top
 * leaves the graph, so the filter asks no consistent read of it (the
 * commit job does not share one on the nodes that go).  While the
 * filter is being opened it has no users (perm is 0), so the flag,
 * set just after the open, is read only once users move to it.
 */
static void mirror_top_child_perm(BlockDriverState *bs, BdrvChild *c,
                                  uint64_t perm, uint64_t shared,
                                  uint64_t *nperm, uint64_t *nshared)
{
    MirrorTopState *s = bs->opaque;

    *nperm = s->active_commit ? perm & ~BLK_PERM_CONSISTENT_READ : perm;
    *nshared = BLK_PERM_ALL;
}

/* Invariant 2. */
static void commit_top_child_perm(BlockDriverState *bs, BdrvChild *c,
                                  uint64_t perm, uint64_t shared,
                                  uint64_t *nperm, uint64_t *nshared)
{
    *nperm = 0;
    *nshared = BLK_PERM_ALL;
}

/*
 * Only a job's users reach it: an edge moved to it, never blockdev-add.
 * A mirror's and an active commit's differ only in their permissions.
 */
static const BlockDriver bdrv_mirror_top = {
    .format_name                    = "mirror_top",
    .instance_size                  = sizeof(MirrorTopState),
    .is_format                      = true,
    .is_filter                      = true,
    .bdrv_open                      = job_filter_open,
    .bdrv_reopen_prepare            = job_filter_reopen_prepare,
    .bdrv_child_perm                = mirror_top_child_perm,
    .bdrv_getlength                 = bdrv_filter_getlength,
    .bdrv_co_preadv                 = bdrv_filter_co_preadv,
    .bdrv_co_pwritev                = bdrv_filter_co_pwritev,
    .bdrv_co_pwrite_zeroes          = bdrv_filter_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = bdrv_filter_co_pdiscard,
    .bdrv_co_pwritev_compressed     = bdrv_filter_co_pwritev_compressed,
    .bdrv_co_truncate               = bdrv_filter_co_truncate,
};

/* Read-only: the overlay of the committed top only reads through it. */
static const BlockDriver bdrv_commit_top = {
    .format_name                    = "commit_top",
    .is_format                      = true,
    .is_filter                      = true,
    .bdrv_open                      = job_filter_open,
    .bdrv_reopen_prepare            = job_filter_reopen_prepare,
    .bdrv_child_perm                = commit_top_child_perm,
    .bdrv_getlength                 = bdrv_filter_getlength,
    .bdrv_co_preadv                 = bdrv_filter_co_preadv,
};

/* ---------------------------------------------------------------------- */
/* Insertion and removal (invariant 1) */

/* commit_top: only the overlays' backing edges go through it. */
static bool job_filter_backing_edge(BdrvChild *c)
{
    return c->parent && c->is_backing;
}

/* QEMU opens it as bdrv_insert_node() does, and says so on failure. */
static BlockDriverState *job_filter_open_cor(QDict *options, int flags,
                                             Error **errp)
{
    Error *err = NULL;
    BlockDriverState *cor = bdrv_open(NULL, NULL, options, flags, &err);

    if (!cor) {
        error_prepend(&err, "Could not create node: ");
        error_propagate(errp, err);
    }
    return cor;
}

static BlockDriverState *job_filter_open_mirror_top(JobFilterKind kind,
                                                    const char *node_name,
                                                    QDict *options, int flags,
                                                    Error **errp)
{
    BlockDriverState *filter = bdrv_new_open_driver(&bdrv_mirror_top,
                                                    node_name, options,
                                                    flags, errp);
    MirrorTopState *s;

    if (filter) {
        s = filter->opaque;
        s->active_commit = kind == JOB_FILTER_MIRROR_TOP_COMMIT;
    }
    return filter;
}

static BlockDriverState *job_filter_open_node(JobFilterKind kind,
                                              BlockDriverState *bs,
                                              BlockDriverState *bottom,
                                              const char *node_name,
                                              Error **errp)
{
    QDict *options = qdict_new();
    int flags = bdrv_is_read_only(bs) ? 0 : BDRV_O_RDWR;

    qdict_put_str(options, "file", bdrv_get_node_name(bs));
    switch (kind) {
    case JOB_FILTER_COPY_ON_READ:
        qdict_put_str(options, "driver", "copy-on-read");
        if (bottom) {
            qdict_put_str(options, "bottom", bdrv_get_node_name(bottom));
        }
        if (node_name) {
            qdict_put_str(options, "node-name", node_name);
        }
        return job_filter_open_cor(options, flags, errp);
    case JOB_FILTER_COMMIT_TOP:
        return bdrv_new_open_driver(&bdrv_commit_top, node_name, options, 0,
                                    errp);
    case JOB_FILTER_MIRROR_TOP:
    case JOB_FILTER_MIRROR_TOP_COMMIT:
        return job_filter_open_mirror_top(kind, node_name, options, flags,
                                          errp);
    }
    g_assert_not_reached();
}

BlockDriverState *job_filter_insert(JobFilterKind kind, BlockDriverState *bs,
                                    BlockDriverState *bottom,
                                    const char *node_name, Error **errp)
{
    BlockDriverState *filter;
    int ret;

    filter = job_filter_open_node(kind, bs, bottom, node_name, errp);
    if (!filter) {
        return NULL;
    }
    /* invariant 3: into the context of the node it filters */
    if (bdrv_join_children_aio_context(filter, errp) < 0) {
        bdrv_unref(filter);
        return NULL;
    }
    bdrv_drained_begin(bs);
    if (kind == JOB_FILTER_COMMIT_TOP) {
        ret = bdrv_replace_node_moving(bs, filter, job_filter_backing_edge,
                                       errp);
    } else {
        ret = block_job_replace_node(bs, filter, errp);
    }
    bdrv_drained_end(bs);
    if (ret < 0) {
        bdrv_unref(filter);
        return NULL;
    }
    return filter;
}

void job_filter_drop(BlockDriverState *filter)
{
    BlockDriverState *below = filter->file->bs;
    Error *err = NULL;

    bdrv_ref(below);
    bdrv_drained_begin(filter);
    if (block_job_replace_node(filter, below, &err) < 0) {
        /* it passes everything through; the users keep working */
        error_report("could not take the job's filter '%s' out: %s",
                     bdrv_get_node_name(filter), error_get_pretty(err));
        error_free(err);
    }
    bdrv_drained_end(filter);
    bdrv_unref(filter);
    bdrv_unref(below);
}
