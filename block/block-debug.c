/*
 * The generic side of blkdebug: delivering events to a node, and finding
 * the node that handles breakpoints (the first one down the file chain
 * whose driver has the hook), for drivers, the request path and qemu-io's
 * debug commands.
 */
#include "block/block_int.h"

static BlockDriverState *bdrv_debug_next(BlockDriverState *bs)
{
    if (bs->file) {
        return bs->file->bs;
    }
    return bs->children ? ((BdrvChild *)bs->children->data)->bs : NULL;
}

/*
 * Only @bs itself reacts: the generic layer emits the request events on
 * every node a request passes, so walking down here would deliver them to
 * a blkdebug node twice.
 */
void bdrv_debug_event(BlockDriverState *bs, BlkdebugEvent event)
{
    if (bs && bs->drv && bs->drv->bdrv_debug_event) {
        bs->drv->bdrv_debug_event(bs, event);
    }
}

/*
 * The first node from @bs down whose driver handles breakpoints, or NULL.
 * One walk serves the four breakpoint hooks, which a driver has all
 * together or not at all (block_int.h).
 */
static BlockDriverState *bdrv_debug_handler(BlockDriverState *bs)
{
    while (bs && bs->drv && !bs->drv->bdrv_debug_breakpoint) {
        bs = bdrv_debug_next(bs);
    }
    if (!bs || !bs->drv) {
        return NULL;
    }
    assert(bs->drv->bdrv_debug_remove_breakpoint &&
           bs->drv->bdrv_debug_resume && bs->drv->bdrv_debug_is_suspended);
    return bs;
}

int bdrv_debug_breakpoint(BlockDriverState *bs, const char *event,
                          const char *tag)
{
    BlockDriverState *h = bdrv_debug_handler(bs);

    return h ? h->drv->bdrv_debug_breakpoint(h, event, tag) : -ENOTSUP;
}

int bdrv_debug_remove_breakpoint(BlockDriverState *bs, const char *tag)
{
    BlockDriverState *h = bdrv_debug_handler(bs);

    return h ? h->drv->bdrv_debug_remove_breakpoint(h, tag) : -ENOTSUP;
}

int bdrv_debug_resume(BlockDriverState *bs, const char *tag)
{
    BlockDriverState *h = bdrv_debug_handler(bs);

    return h ? h->drv->bdrv_debug_resume(h, tag) : -ENOTSUP;
}

bool bdrv_debug_is_suspended(BlockDriverState *bs, const char *tag)
{
    BlockDriverState *h = bdrv_debug_handler(bs);

    return h && h->drv->bdrv_debug_is_suspended(h, tag);
}
