/*
 * Operations on live nodes (blockdev-ops.h): QEMU's commands, arguments
 * and error messages.
 *
 * Each command runs to its end in the main loop (polling it while the
 * image is written); the monitor starts no other request meanwhile, so
 * the graph does not change under a command except by what it does
 * itself.  A command that changes what a node's users see drains the
 * node first, so that no request of an export is in flight across the
 * change.
 */
#include "blockdev-ops.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"
#include "qapi-qmp.h"
#include "qmp-dispatch.h"

BlockDriverState *blockdev_lookup_bs(const char *device,
                                     const char *node_name, Error **errp)
{
    if (device) {
        for (BlockBackend *blk = blk_next(NULL); blk; blk = blk_next(blk)) {
            if (!blk_name(blk)[0] || strcmp(blk_name(blk), device)) {
                continue;
            }
            if (!blk_bs(blk)) {
                error_setg(errp, "Device '%s' has no medium", device);
            }
            return blk_bs(blk);
        }
    }
    if (node_name) {
        BlockDriverState *bs = bdrv_find_node(node_name);

        if (bs) {
            return bs;
        }
    }
    error_setg(errp, "Cannot find device='%s' nor node-name='%s'",
               device ? device : "", node_name ? node_name : "");
    return NULL;
}

static const char *blockdev_ops_str(JsonObject *args, const char *name)
{
    return json_object_has_member(args, name) ?
           json_object_get_string_member(args, name) : NULL;
}

/* ---- block_resize ---- */

static void qmp_block_resize(JsonObject *args, JsonNode **ret, Error **errp)
{
    int64_t size = json_object_get_int_member(args, "size");
    BlockDriverState *bs;
    BlockBackend *blk;

    bs = blockdev_lookup_bs(blockdev_ops_str(args, "device"),
                            blockdev_ops_str(args, "node-name"), errp);
    if (!bs) {
        return;
    }
    if (size < 0) {
        error_setg(errp, "Parameter 'size' expects a >0 size");
        return;
    }
    /* the node's other users must share RESIZE (exports do) */
    blk = blk_new(bdrv_get_aio_context(bs), BLK_PERM_RESIZE, BLK_PERM_ALL);
    if (blk_insert_bs(blk, bs, errp) < 0) {
        blk_unref(blk);
        return;
    }
    /*
     * No export request is in flight while the length changes: a read
     * racing a shrink would read past the new end.  The truncate itself
     * passes the barrier it is behind.
     */
    blk_set_disable_request_queuing(blk, true);
    bdrv_drained_begin(bs);
    blk_truncate(blk, size, false, PREALLOC_MODE_OFF, 0, errp);
    bdrv_drained_end(bs);
    blk_unref(blk);
}

void blockdev_ops_register_commands(void)
{
    qmp_register_command("block_resize", qmp_block_resize);
}
