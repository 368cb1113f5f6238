/*
 * The public view of a node (include/qblock/block-node.h): read-only
 * accessors over BlockDriverState, so that its users need not see
 * block_int.h.
 */
#include "qblock/block-node.h"

#include "block/block_int.h"

const char *bdrv_get_filename(BlockDriverState *bs)
{
    return bs->filename;
}

const char *bdrv_get_exact_filename(BlockDriverState *bs)
{
    return bs->exact_filename;
}

int bdrv_get_open_flags(BlockDriverState *bs)
{
    return bs->open_flags;
}

const BlockDriver *bdrv_get_driver(BlockDriverState *bs)
{
    return bs->drv;
}

BlockDriverState *bdrv_backing_bs(BlockDriverState *bs)
{
    return bs->backing ? bs->backing->bs : NULL;
}

const char *bdrv_get_backing_format(BlockDriverState *bs)
{
    return bs->backing_format;
}

void bdrv_foreach_child(BlockDriverState *bs, BdrvChildFunc *fn,
                        void *opaque)
{
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *child = l->data;

        fn(child->bs, child->name, opaque);
    }
}

int bdrv_get_refcnt(BlockDriverState *bs)
{
    return bs->refcnt;
}

bool bdrv_has_blk(BlockDriverState *bs)
{
    for (GList *l = bs->parents; l; l = l->next) {
        if (((BdrvChild *)l->data)->parent_blk) {
            return true;
        }
    }
    return false;
}

GSList *bdrv_get_parent_blks(BlockDriverState *bs)
{
    GSList *blks = NULL;

    for (GList *l = bs->parents; l; l = l->next) {
        BdrvChild *c = l->data;

        if (c->parent_blk) {
            blks = g_slist_prepend(blks, c->parent_blk);
        }
    }
    return g_slist_reverse(blks);
}

uint32_t bdrv_get_request_alignment(BlockDriverState *bs)
{
    return bs->bl.request_alignment;
}

uint32_t bdrv_get_opt_transfer(BlockDriverState *bs)
{
    return bs->bl.opt_transfer;
}

uint32_t bdrv_get_pdiscard_alignment(BlockDriverState *bs)
{
    return bs->bl.pdiscard_alignment;
}

const BdrvNodeStats *bdrv_get_node_stats(BlockDriverState *bs)
{
    return &bs->stats;
}
