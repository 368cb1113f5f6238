/*
 * Changes to a live graph: attaching a node as another's backing node,
 * moving every user of a node to another one, and the two together
 * (bdrv_append), which is how an external snapshot puts its overlay on
 * top of a node that exports keep using; adding and removing a child of
 * a node whose children are a list (see include/block/block.h).
 *
 * Invariants:
 *  1. An edge holds one reference of the node it points to: moving an
 *     edge from @from to @to moves that reference with it.
 *  2. A move is one permission update of @to's subtree (which holds
 *     @from by then), checked before anything is committed: refused, the
 *     edges go back and nothing changed.
 *  3. An edge whose parent is @to, or lies below @to, is never moved:
 *     pointing it at @to would make a cycle.  So the overlay's own
 *     backing edge keeps pointing at the node below it, and so does the
 *     backing edge of a backup target over its source, below the filter
 *     that takes the source's place (as QEMU's should_update_child()).
 *
 * All of this runs in the main loop thread outside coroutine context; the
 * caller drains the nodes concerned, so no request is in flight across
 * the change.
 */
#include "block/block_int.h"
#include "block-internal.h"
#include "qblock/block-backend.h"

static void bdrv_move_edges(GPtrArray *edges, BlockDriverState *to)
{
    for (guint i = 0; i < edges->len; i++) {
        BdrvChild *c = edges->pdata[i];
        BlockDriverState *from = c->bs;

        /* invariant 1 */
        bdrv_ref(to);
        from->parents = g_list_remove(from->parents, c);
        to->parents = g_list_append(to->parents, c);
        c->bs = to;
        bdrv_unref(from);
    }
}

int bdrv_replace_node(BlockDriverState *from, BlockDriverState *to,
                      Error **errp)
{
    return bdrv_replace_node_moving(from, to, NULL, errp);
}

int bdrv_replace_node_moving(BlockDriverState *from, BlockDriverState *to,
                             bool (*moves)(BdrvChild *c), Error **errp)
{
    g_autoptr(GPtrArray) edges = g_ptr_array_new();
    int ret;

    assert(from != to);
    for (GList *l = from->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        /* invariant 3 */
        if ((!c->parent || !bdrv_in_subtree(to, c->parent)) &&
            (!moves || moves(c))) {
            g_ptr_array_add(edges, c);
        }
    }
    /* @from may lose its last reference to a moved edge for a moment */
    bdrv_ref(from);
    bdrv_move_edges(edges, to);
    ret = bdrv_refresh_perms(to, errp);
    if (ret < 0) {
        /* invariant 2: back where they were, with what they had */
        bdrv_move_edges(edges, from);
        bdrv_refresh_perms(from, NULL);
    } else {
        /*
         * What @from's remaining users need, now that the others left:
         * only less than before, so nothing can conflict.
         */
        bdrv_refresh_perms(from, NULL);
    }
    bdrv_unref(from);
    return ret;
}

int bdrv_set_backing_hd(BlockDriverState *bs, BlockDriverState *backing_hd,
                        Error **errp)
{
    if (bs->backing) {
        bdrv_unref_child(bs, bs->backing);
    }
    if (!backing_hd) {
        return 0;
    }
    if (!bs->drv || !bs->drv->supports_backing) {
        error_setg(errp, "Driver '%s' of node '%s' does not support backing "
                   "files", bs->drv ? bs->drv->format_name : "",
                   bs->node_name);
        return -ENOTSUP;
    }
    /* the edge takes over this reference */
    bdrv_ref(backing_hd);
    return bdrv_attach_child(bs, backing_hd, "backing", true, errp) ? 0
                                                                   : -EPERM;
}

int bdrv_append(BlockDriverState *bs_new, BlockDriverState *bs_top,
                Error **errp)
{
    int ret = bdrv_set_backing_hd(bs_new, bs_top, errp);

    if (ret < 0) {
        return ret;
    }
    ret = bdrv_replace_node(bs_top, bs_new, errp);
    if (ret < 0) {
        bdrv_set_backing_hd(bs_new, NULL, &error_abort);
    }
    return ret;
}

void bdrv_add_child(BlockDriverState *parent, BlockDriverState *child_bs,
                    Error **errp)
{
    if (!parent->drv || !parent->drv->bdrv_add_child) {
        error_setg(errp, "The node %s does not support adding a child",
                   bdrv_get_node_name(parent));
        return;
    }
    /* a node below another user would get a second user it never chose */
    if (child_bs->parents) {
        error_setg(errp, "The node %s already has a parent",
                   bdrv_get_node_name(child_bs));
        return;
    }
    bdrv_drained_begin(parent);
    parent->drv->bdrv_add_child(parent, child_bs, errp);
    bdrv_drained_end(parent);
}

void bdrv_del_child(BlockDriverState *parent, const char *child_name,
                    Error **errp)
{
    BdrvChild *child = NULL;

    for (GList *l = parent->children; l; l = l->next) {
        if (!strcmp(((BdrvChild *)l->data)->name, child_name)) {
            child = l->data;
            break;
        }
    }
    if (!child) {
        error_setg(errp, "Node '%s' does not have child '%s'",
                   bdrv_get_node_name(parent), child_name);
        return;
    }
    if (!parent->drv || !parent->drv->bdrv_del_child) {
        error_setg(errp, "The node %s does not support removing a child",
                   bdrv_get_node_name(parent));
        return;
    }
    bdrv_drained_begin(parent);
    parent->drv->bdrv_del_child(parent, child, errp);
    bdrv_drained_end(parent);
}

bool bdrv_supports_backing(BlockDriverState *bs)
{
    return bs->drv && bs->drv->supports_backing;
}

bool bdrv_is_filter(BlockDriverState *bs)
{
    return bs->drv && bs->drv->is_filter;
}

uint64_t bdrv_get_cumulative_perm(BlockDriverState *bs)
{
    return bs->perm;
}

bool bdrv_has_root_parents(BlockDriverState *bs)
{
    for (GList *l = bs->parents; l; l = l->next) {
        if (!((BdrvChild *)l->data)->parent) {
            return true;
        }
    }
    return false;
}

bool bdrv_is_root_node(BlockDriverState *bs)
{
    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        /* QEMU's: a node or a job above it makes it no root */
        if (!c->parent_blk) {
            return false;
        }
    }
    return true;
}

bool bdrv_backing_busy(BlockDriverState *bs, Error **errp)
{
    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->parent && c->is_backing) {
            error_setg(errp, "Node '%s' is busy: node is used as backing hd "
                       "of '%s'", bs->node_name,
                       bdrv_get_device_or_node_name(c->parent));
            return true;
        }
    }
    return false;
}
