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

int bdrv_debug_breakpoint(BlockDriverState *bs, const char *event,
                          const char *tag)
{
    while (bs && bs->drv && !bs->drv->bdrv_debug_breakpoint) {
        bs = bdrv_debug_next(bs);
    }
    if (!bs || !bs->drv) {
        return -ENOTSUP;
    }
    return bs->drv->bdrv_debug_breakpoint(bs, event, tag);
}

int bdrv_debug_remove_breakpoint(BlockDriverState *bs, const char *tag)
{
    while (bs && bs->drv && !bs->drv->bdrv_debug_remove_breakpoint) {
        bs = bdrv_debug_next(bs);
    }
    if (!bs || !bs->drv) {
        return -ENOTSUP;
    }
    return bs->drv->bdrv_debug_remove_breakpoint(bs, tag);
}

int bdrv_debug_resume(BlockDriverState *bs, const char *tag)
{
    while (bs && bs->drv && !bs->drv->bdrv_debug_resume) {
        bs = bdrv_debug_next(bs);
    }
    if (!bs || !bs->drv) {
        return -ENOTSUP;
    }
    return bs->drv->bdrv_debug_resume(bs, tag);
}

bool bdrv_debug_is_suspended(BlockDriverState *bs, const char *tag)
{
    while (bs && bs->drv && !bs->drv->bdrv_debug_is_suspended) {
        bs = bdrv_debug_next(bs);
    }
    return bs && bs->drv && bs->drv->bdrv_debug_is_suspended(bs, tag);
}
