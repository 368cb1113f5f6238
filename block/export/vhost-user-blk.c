/*
 * The vhost-user-blk export (see include/block/vhost-user-blk.h): the
 * virtio-blk device behind a vhost-user server: its features, its
 * configuration space and the write cache.  The requests themselves are
 * virtio/virtio-blk-req.c's, shared with the device model below both.
 *
 * Invariants:
 *  1. The writeback field a front-end reads is the cache mode its writes
 *     get.  It is the BlockBackend's write cache flag, except while a
 *     driver that did not negotiate VIRTIO_BLK_F_FLUSH is connected:
 *     then the flag is off (such a driver cannot flush) and the field
 *     shows the mode kept aside for the next driver (exp->wce), so a
 *     front-end that caches the field (QEMU reads it once, at connect)
 *     never believes in writethrough while writes are cached.
 *  2. Only a driver that negotiated CONFIG_WCE and FLUSH changes the
 *     mode, through the writeback field, or the operator, and then the
 *     front-end is sent a config-change notification; the export never
 *     changes it on its own, also not at a disconnect or a reconnect,
 *     because QEMU keeps showing the guest the value it read or wrote
 *     last.
 *  3. Requests in flight are the server's business: it waits for them
 *     before memory goes away and before the export is freed.
 */
#include "block/vhost-user-blk.h"

#include "virtio/virtio-blk-req.h"
#include "vhost-user-server.h"

/*
 * Segments of one request: the longest chain an indirect table allows
 * (VIRTQUEUE_MAX_SIZE descriptors) less the header and the status.
 */
#define VHOST_USER_BLK_SEG_MAX (VIRTQUEUE_MAX_SIZE - 2)

struct VhostUserBlkExport {
    /* --- set by vhost_user_blk_export_new, immutable --- */
    char *id;
    BlockBackend *blk;          /* one reference */
    unsigned int num_queues;
    VuServer *server;
    void (*client_changed)(void *opaque, bool connected);
    void *opaque;

    /* --- the limits are fixed, the negotiated part is not --- */
    VirtIOBlkHandler handler;

    /* --- invariant 1 --- */
    bool flush_off;             /* a driver without FLUSH is connected */
    bool wce;                   /* while flush_off: the mode kept aside */
};

static VhostUserBlkExport *vu_blk_of(VuServer *s)
{
    return vu_server_opaque(s);
}

static uint64_t vu_blk_get_features(VuServer *s)
{
    VhostUserBlkExport *exp = vu_blk_of(s);
    uint64_t f = virtio_blk_handler_features(&exp->handler) |
                 (UINT64_C(1) << VIRTIO_BLK_F_CONFIG_WCE) |
                 (UINT64_C(1) << VIRTIO_BLK_F_MQ);

    if (!exp->handler.read_only) {
        f |= (UINT64_C(1) << VIRTIO_BLK_F_DISCARD) |
             (UINT64_C(1) << VIRTIO_BLK_F_WRITE_ZEROES);
    }
    return f;
}

/* Invariant 1. */
static void vu_blk_set_features(VuServer *s, uint64_t features)
{
    VhostUserBlkExport *exp = vu_blk_of(s);
    bool flush = features & (UINT64_C(1) << VIRTIO_BLK_F_FLUSH);

    if (!flush && !exp->flush_off) {
        exp->wce = blk_enable_write_cache(exp->blk);
        exp->flush_off = true;
        blk_set_enable_write_cache(exp->blk, false);
    } else if (flush && exp->flush_off) {
        exp->flush_off = false;
        blk_set_enable_write_cache(exp->blk, exp->wce);
    }
    virtio_blk_handler_set_features(&exp->handler, features);
}

static void vu_blk_get_config(VuServer *s, uint8_t *config)
{
    VhostUserBlkExport *exp = vu_blk_of(s);
    bool wce = exp->flush_off ? exp->wce : blk_enable_write_cache(exp->blk);
    VirtIOBlkConfig c;

    virtio_blk_handler_get_config(&exp->handler, VHOST_USER_BLK_SEG_MAX,
                                  exp->num_queues, wce, &c);
    memcpy(config, &c, sizeof(c));
}

/* Invariant 2: only writeback is writable, and only when negotiated. */
static int vu_blk_set_config(VuServer *s, const uint8_t *data, uint32_t offset,
                          uint32_t len, Error **errp)
{
    VhostUserBlkExport *exp = vu_blk_of(s);
    uint32_t wb = offsetof(VirtIOBlkConfig, writeback);

    if (!virtio_blk_config_write_has_wce(offset, len)) {
        error_setg(errp, "only the writeback field (byte %" PRIu32 ") is "
                   "writable", wb);
        return -EPERM;
    }
    if (!virtio_blk_wce_writable(vu_server_features(s))) {
        error_setg(errp, "the driver did not negotiate "
                   "VIRTIO_BLK_F_CONFIG_WCE and VIRTIO_BLK_F_FLUSH");
        return -EPERM;
    }
    blk_set_enable_write_cache(exp->blk, data[wb - offset] != 0);
    return 0;
}

static void vu_blk_request_done(VirtIOBlkHandler *h, VirtQueueElement *elem,
                             uint32_t in_len, void *opaque)
{
    vu_virtq_complete(opaque, elem, in_len);
}

static int vu_blk_handle_request(VuServer *s, VuVirtq *q,
                                 VirtQueueElement *elem, Error **errp)
{
    VhostUserBlkExport *exp = vu_blk_of(s);

    return virtio_blk_handle_request_in(&exp->handler,
                                        vu_virtq_req_data(elem), elem,
                                        vu_blk_request_done, q, errp);
}

/* The front-end is gone: invariant 2 keeps the mode it last saw. */
static void vu_blk_reset(VuServer *s)
{
    VhostUserBlkExport *exp = vu_blk_of(s);

    if (exp->flush_off) {
        exp->flush_off = false;
        blk_set_enable_write_cache(exp->blk, exp->wce);
    }
    virtio_blk_handler_set_features(&exp->handler, 0);
}

static int vu_blk_check_config(const VhostUserBlkExportConfig *cfg,
                            BlockBackend *blk, int64_t len, Error **errp)
{
    uint64_t bs = cfg->logical_block_size;
    uint64_t perm, shared;

    if (!virtio_blk_block_size_valid(bs)) {
        error_setg(errp, "vhost-user-blk export '%s': logical-block-size %"
                   PRIu64 " is not a power of 2 from 512 to 65536", cfg->id,
                   bs);
        return -EINVAL;
    }
    if (cfg->num_queues < 1 ||
        cfg->num_queues > VHOST_USER_BLK_MAX_QUEUES) {
        error_setg(errp, "vhost-user-blk export '%s': num-queues %u is not "
                   "from 1 to %d", cfg->id, cfg->num_queues,
                   VHOST_USER_BLK_MAX_QUEUES);
        return -EINVAL;
    }
    blk_get_perm(blk, &perm, &shared);
    if (cfg->writable && !(perm & BLK_PERM_WRITE)) {
        error_setg(errp, "vhost-user-blk export '%s' is writable but its "
                   "block backend was opened read-only", cfg->id);
        return -EINVAL;
    }
    if (len < 0) {
        error_setg_errno(errp, -len, "vhost-user-blk export '%s': cannot "
                         "get the disk size", cfg->id);
        return len;
    }
    if (len % bs) {
        error_setg(errp, "vhost-user-blk export '%s': the disk size %" PRId64
                   " is not a multiple of logical-block-size %" PRIu64,
                   cfg->id, len, bs);
        return -EINVAL;
    }
    return 0;
}

static void vu_blk_client_changed(void *opaque, bool connected)
{
    VhostUserBlkExport *exp = opaque;

    if (exp->client_changed) {
        exp->client_changed(exp->opaque, connected);
    }
}

static const VuDeviceOps vu_blk_ops;

VhostUserBlkExport *vhost_user_blk_export_new(
    BlockBackend *blk, const VhostUserBlkExportConfig *cfg, Error **errp)
{
    int64_t len = blk_getlength(blk);
    g_autofree char *name = NULL;
    VhostUserBlkExport *exp;
    VuServerConfig vcfg;

    if (vu_blk_check_config(cfg, blk, len, errp) < 0) {
        return NULL;
    }
    exp = g_new0(VhostUserBlkExport, 1);
    exp->id = g_strdup(cfg->id);
    exp->blk = blk;
    blk_ref(blk);
    exp->num_queues = cfg->num_queues;
    exp->client_changed = cfg->client_changed;
    exp->opaque = cfg->opaque;
    /* the serial is the id, cut to what GET_ID returns */
    virtio_blk_handler_init(&exp->handler, blk, len, cfg->logical_block_size,
                            !cfg->writable, exp->id);

    name = g_strdup_printf("vhost-user-blk export '%s'", exp->id);
    vcfg = (VuServerConfig) {
        .name = name,
        .path = cfg->path,
        .fd_str = cfg->fd_str,
        .num_queues = cfg->num_queues,
        .queue_ctxs = cfg->queue_ctxs,
        .ops = &vu_blk_ops,
        .opaque = exp,
        .client_changed = vu_blk_client_changed,
    };
    /* its errors are the socket's, in QEMU's words, or name the export */
    exp->server = vu_server_new(blk_get_aio_context(blk), &vcfg, errp);
    if (!exp->server) {
        blk_unref(exp->blk);
        g_free(exp->id);
        g_free(exp);
        return NULL;
    }
    return exp;
}

void vhost_user_blk_export_shutdown(VhostUserBlkExport *exp,
                                    void (*done)(void *opaque),
                                    void *opaque)
{
    vu_server_shutdown(exp->server, done, opaque);
}

void vhost_user_blk_export_free(VhostUserBlkExport *exp)
{
    if (!exp) {
        return;
    }
    /* invariant 3 */
    vu_server_free(exp->server);
    blk_unref(exp->blk);
    g_free(exp->id);
    g_free(exp);
}

void vhost_user_blk_export_set_write_cache(VhostUserBlkExport *exp,
                                           bool writeback)
{
    /* invariant 1 */
    if (exp->flush_off) {
        exp->wce = writeback;
    } else {
        blk_set_enable_write_cache(exp->blk, writeback);
    }
    vu_server_config_changed(exp->server);
}

void vhost_user_blk_export_resize(VhostUserBlkExport *exp)
{
    int64_t len = blk_getlength(exp->blk);

    if (len < 0) {
        return;
    }
    virtio_blk_handler_set_length(&exp->handler, len);
    vu_server_config_changed(exp->server);
}

bool vhost_user_blk_export_has_client(VhostUserBlkExport *exp)
{
    return vu_server_has_client(exp->server);
}

static const VuDeviceOps vu_blk_ops = {
    .config_size    = sizeof(VirtIOBlkConfig),
    .req_size       = sizeof(VirtIOBlkReq),
    .get_features   = vu_blk_get_features,
    .set_features   = vu_blk_set_features,
    .get_config     = vu_blk_get_config,
    .set_config     = vu_blk_set_config,
    .handle_request = vu_blk_handle_request,
    .reset          = vu_blk_reset,
};
