/*
 * The "vhost-user-blk" export type: --export type=vhost-user-blk and
 * block-export-add over a VhostUserBlkExport (vhost-user-blk.c).
 *
 * The BlockBackend is the export layer's, so the export's writethrough
 * option has set its write cache before the device starts, and the
 * writeback field the guest reads is that setting (invariant 1 of
 * vhost-user-blk.c).  The export holds one reference of the export layer
 * from request_shutdown until its front-end's connection has ended.
 *
 * With a list of iothreads, queue i runs in the i-th (mod their number):
 * the first holds the node, the others hand it their requests in batches
 * (vhost-user-vring.c invariant 12).
 */
#include "block/export.h"
#include "block/vhost-user-blk.h"

typedef struct VuBlkBlockExport {
    VhostUserBlkExport *vub;
} VuBlkBlockExport;

static int vu_blk_block_export_create(BlockExport *exp, JsonObject *opts,
                                      Error **errp)
{
    VuBlkBlockExport *e = exp->opaque;
    g_autofree AioContext **queue_ctxs = NULL;
    JsonObject *addr = json_object_get_object_member(opts, "addr");
    const char *type = json_object_get_string_member(addr, "type");
    VhostUserBlkExportConfig cfg = {
        .id = exp->id,
        .writable = exp->writable,
        /* the schema has checked the types: a uint16 and a size */
        .num_queues = json_object_get_int_member_with_default(
                          opts, "num-queues", 1),
        .logical_block_size = json_object_get_int_member_with_default(
                                  opts, "logical-block-size", 512),
    };

    if (!strcmp(type, "unix")) {
        cfg.path = json_object_get_string_member(addr, "path");
    } else if (!strcmp(type, "fd")) {
        cfg.fd_str = json_object_get_string_member(addr, "str");
    } else {
        /* QEMU's words */
        error_setg(errp, "Only socket address types 'unix' and 'fd' are "
                   "supported");
        return -EINVAL;
    }
    if (exp->nr_iothreads > 1 && cfg.num_queues >= 1) {
        /* the export's references keep the iothreads while it lives */
        queue_ctxs = blk_exp_spread_contexts(exp, cfg.num_queues);
        cfg.queue_ctxs = queue_ctxs;
    }
    e->vub = vhost_user_blk_export_new(exp->blk, &cfg, errp);
    return e->vub ? 0 : -EINVAL;
}

static void vu_blk_block_export_request_shutdown(BlockExport *exp)
{
    VuBlkBlockExport *e = exp->opaque;

    /* held until the front-end's connection has ended */
    blk_exp_ref(exp);
    vhost_user_blk_export_shutdown(e->vub, blk_exp_unref_cb, exp);
}

static unsigned int vu_blk_block_export_client_count(BlockExport *exp)
{
    VuBlkBlockExport *e = exp->opaque;

    return vhost_user_blk_export_has_client(e->vub);
}

static void vu_blk_block_export_set_write_cache(BlockExport *exp,
                                                bool writeback)
{
    VuBlkBlockExport *e = exp->opaque;

    vhost_user_blk_export_set_write_cache(e->vub, writeback);
}

static void vu_blk_block_export_resize(BlockExport *exp)
{
    VuBlkBlockExport *e = exp->opaque;

    vhost_user_blk_export_resize(e->vub);
}

static void vu_blk_block_export_delete(BlockExport *exp)
{
    VuBlkBlockExport *e = exp->opaque;

    vhost_user_blk_export_free(e->vub);
}

static const BlockExportDriver vu_blk_block_export_driver = {
    .type               = "vhost-user-blk",
    .instance_size      = sizeof(VuBlkBlockExport),
    .create             = vu_blk_block_export_create,
    .request_shutdown   = vu_blk_block_export_request_shutdown,
    .client_count       = vu_blk_block_export_client_count,
    .resize             = vu_blk_block_export_resize,
    .set_write_cache    = vu_blk_block_export_set_write_cache,
    .delete             = vu_blk_block_export_delete,
};

block_export_init(vu_blk_block_export_driver)
