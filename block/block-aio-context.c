/*
 * Moving a node graph into another AioContext (an export's iothread):
 * QEMU's bdrv_try_change_aio_context().
 *
 * A node lives in one context at a time (DESIGN.md), and so does
 * everything connected to it: a format and its protocol, a backing
 * chain, a filter and what it filters.  The move takes the whole
 * connected component (children and node parents, transitively), asks
 * every parent that is no node whether it can follow (a BlockBackend
 * refuses unless its owner allows it; a block job cannot), then, with
 * the component drained: lets each driver move what it bound to the old
 * context, switches bs->aio_context, and moves the parents.
 *
 * Invariants 10 and 11 of docs/architecture.md's threading rules:
 *  10. The caller holds both contexts (aio_context_acquire(), or is the
 *      home thread of one), so no request of the component runs in
 *      either while it moves; drained, none is in flight.
 *  11. Either every node of the component moved and every non-node
 *      parent followed, or nothing did.
 *
 * Two helpers for block jobs (rule 12): a job's filter, opened in the
 * main loop over a node in an iothread, joins its child's context
 * before it gets a parent; at a job's end, the nodes it kept in an
 * iothread that no other user keeps there go back to the main loop.
 */
#include "block/block_int.h"

/* Adds @bs and everything connected to it to @nodes, once each. */
static void bdrv_ctx_collect(BlockDriverState *bs, GPtrArray *nodes)
{
    if (g_ptr_array_find(nodes, bs, NULL)) {
        return;
    }
    g_ptr_array_add(nodes, bs);
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;

        bdrv_ctx_collect(c->bs, nodes);
    }
    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->parent) {
            bdrv_ctx_collect(c->parent, nodes);
        }
    }
}

/* The parents of @nodes that are no node, @ignore excepted. */
static GPtrArray *bdrv_ctx_outer_parents(GPtrArray *nodes, BdrvChild *ignore)
{
    GPtrArray *outer = g_ptr_array_new();

    for (guint i = 0; i < nodes->len; i++) {
        BlockDriverState *bs = g_ptr_array_index(nodes, i);

        for (GList *l = bs->parents; l; l = l->next) {
            BdrvChild *c = l->data;

            if (!c->parent && c != ignore) {
                g_ptr_array_add(outer, c);
            }
        }
    }
    return outer;
}

static bool bdrv_ctx_parents_can_follow(GPtrArray *outer, AioContext *ctx,
                                        Error **errp)
{
    for (guint i = 0; i < outer->len; i++) {
        BdrvChild *c = g_ptr_array_index(outer, i);

        if (!c->klass->can_set_aio_ctx) {
            g_autofree char *desc = c->klass->get_parent_desc(c);

            error_setg(errp, "Cannot change iothread of node '%s': used by "
                       "%s", c->bs->node_name, desc);
            return false;
        }
        if (!c->klass->can_set_aio_ctx(c, ctx, errp)) {
            return false;
        }
    }
    return true;
}

/* Lets the drivers of @nodes[0, n) move to @ctx; invariant 11 on failure. */
static int bdrv_ctx_move_drivers(GPtrArray *nodes, guint n, AioContext *ctx,
                                 AioContext *old_ctx, Error **errp)
{
    for (guint i = 0; i < n; i++) {
        BlockDriverState *bs = g_ptr_array_index(nodes, i);
        int ret;

        if (!bs->drv->bdrv_change_aio_context) {
            continue;
        }
        ret = bs->drv->bdrv_change_aio_context(bs, ctx, errp);
        if (ret < 0) {
            /* the ones already moved go back; the old context's state
             * they take again is what they had a moment ago */
            bdrv_ctx_move_drivers(nodes, i, old_ctx, ctx, &error_abort);
            return ret;
        }
    }
    return 0;
}

int bdrv_try_change_aio_context(BlockDriverState *bs, AioContext *ctx,
                                BdrvChild *ignore, Error **errp)
{
    AioContext *old_ctx = bdrv_get_aio_context(bs);
    g_autoptr(GPtrArray) nodes = NULL;
    g_autoptr(GPtrArray) outer = NULL;
    int ret;

    if (old_ctx == ctx) {
        return 0;
    }
    /* invariant 10 */
    assert(aio_context_in_thread(old_ctx) && aio_context_in_thread(ctx));
    nodes = g_ptr_array_new();
    bdrv_ctx_collect(bs, nodes);
    outer = bdrv_ctx_outer_parents(nodes, ignore);
    if (!bdrv_ctx_parents_can_follow(outer, ctx, errp)) {
        return -EPERM;
    }

    for (guint i = 0; i < nodes->len; i++) {
        bdrv_drained_begin(g_ptr_array_index(nodes, i));
    }
    ret = bdrv_ctx_move_drivers(nodes, nodes->len, ctx, old_ctx, errp);
    if (ret == 0) {
        for (guint i = 0; i < nodes->len; i++) {
            BlockDriverState *n = g_ptr_array_index(nodes, i);

            assert(n->in_flight == 0);  /* invariant 10 */
            n->aio_context = ctx;
        }
        for (guint i = 0; i < outer->len; i++) {
            BdrvChild *c = g_ptr_array_index(outer, i);

            c->klass->set_aio_ctx(c, ctx);
        }
    }
    for (guint i = 0; i < nodes->len; i++) {
        bdrv_drained_end(g_ptr_array_index(nodes, i));
    }
    return ret;
}

int bdrv_join_children_aio_context(BlockDriverState *bs, Error **errp)
{
    AioContext *old_ctx = bdrv_get_aio_context(bs);
    AioContext *ctx = NULL;
    int ret;

    assert(!bs->parents && bs->in_flight == 0);
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        AioContext *child_ctx = bdrv_get_aio_context(c->bs);

        if (ctx && child_ctx != ctx) {
            error_setg(errp, "Node '%s': its children are in different "
                       "iothreads (AioContexts)", bs->node_name);
            return -EINVAL;
        }
        ctx = child_ctx;
    }
    if (!ctx || ctx == old_ctx) {
        return 0;
    }
    /* invariant 10; with no parent and nothing in flight, no drain */
    assert(aio_context_in_thread(old_ctx) && aio_context_in_thread(ctx));
    if (bs->drv->bdrv_change_aio_context) {
        ret = bs->drv->bdrv_change_aio_context(bs, ctx, errp);
        if (ret < 0) {
            return ret;
        }
    }
    bs->aio_context = ctx;
    return 0;
}

void bdrv_leave_unused_aio_context(BlockDriverState *bs)
{
    AioContext *main_ctx = qemu_get_aio_context();
    g_autoptr(GPtrArray) nodes = NULL;
    g_autoptr(GPtrArray) outer = NULL;
    Error *err = NULL;

    if (bdrv_get_aio_context(bs) == main_ctx) {
        return;
    }
    nodes = g_ptr_array_new();
    bdrv_ctx_collect(bs, nodes);
    outer = bdrv_ctx_outer_parents(nodes, NULL);
    if (outer->len > 0) {
        return;     /* that user keeps them, and takes them back */
    }
    if (bdrv_try_change_aio_context(bs, main_ctx, NULL, &err) < 0) {
        /* a driver refused: the node stays usable where it is */
        error_report("could not move node '%s' back to the main loop: %s",
                     bs->node_name, error_get_pretty(err));
        error_free(err);
    }
}
