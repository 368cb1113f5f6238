/*
 * The virtio-blk device (virtio spec 1.2, 5.2): feature negotiation, the
 * configuration space, the write cache, and the queue that feeds requests
 * to virtio/virtio-blk-req.c.
 *
 * Invariants:
 *  1. The write cache state is the BlockBackend's flag.  At FEATURES_OK
 *     it becomes the drive's default if the driver negotiated
 *     VIRTIO_BLK_F_FLUSH, and writethrough otherwise: a driver that cannot
 *     flush must not be given a cache it cannot empty (this covers the
 *     spec's "neither FLUSH nor CONFIG_WCE" and "CONFIG_WCE without
 *     FLUSH" cases).  After that only the driver changes it, through the
 *     writeback field, and only with CONFIG_WCE and FLUSH negotiated.
 *  2. The flag may change with requests in flight: the BlockBackend
 *     flushes every write that completes after a switch to writethrough
 *     (and every write issued before a switch to writeback), so the
 *     device does not drain.
 *  3. inflight counts the requests handed to virtio_blk_handle_request
 *     and not completed yet; reset and free drain them first, so no
 *     completion ever writes into a queue that was reset.
 *  4. A malformed chain or ring breaks the device (DEVICE_NEEDS_RESET);
 *     nothing more is popped until the driver resets it.
 */

#include "virtio-blk-internal.h"

/* QEMU's choice: room in a queue-sized chain for the header and status. */
#define VIRTIO_BLK_SEG_MAX(queue_size) ((queue_size) - 2)

static VirtIOBlock *virtio_blk_of(VirtIODevice *vdev)
{
    return container_of(vdev, VirtIOBlock, vdev);
}

VirtIODevice *virtio_blk_vdev(VirtIOBlock *s)
{
    return &s->vdev;
}

unsigned int virtio_blk_inflight(VirtIOBlock *s)
{
    return s->inflight;
}

static uint64_t virtio_blk_get_features(VirtIODevice *vdev)
{
    VirtIOBlock *s = virtio_blk_of(vdev);
    uint64_t f = virtio_blk_handler_features(&s->handler);

    if (s->offer_config_wce) {
        f |= UINT64_C(1) << VIRTIO_BLK_F_CONFIG_WCE;
    }
    if (s->offer_discard) {
        f |= UINT64_C(1) << VIRTIO_BLK_F_DISCARD;
    }
    if (s->offer_write_zeroes) {
        f |= UINT64_C(1) << VIRTIO_BLK_F_WRITE_ZEROES;
    }
    return f;
}

/* Invariant 1. */
static bool virtio_blk_set_features(VirtIODevice *vdev, uint64_t features)
{
    VirtIOBlock *s = virtio_blk_of(vdev);
    bool flush = features & (UINT64_C(1) << VIRTIO_BLK_F_FLUSH);

    blk_set_enable_write_cache(s->blk, flush && s->wce_default);
    virtio_blk_handler_set_features(&s->handler, features);
    return true;
}

static void virtio_blk_get_config(VirtIODevice *vdev, uint8_t *config)
{
    VirtIOBlock *s = virtio_blk_of(vdev);
    VirtIOBlkConfig c;

    virtio_blk_handler_get_config(&s->handler,
                                  VIRTIO_BLK_SEG_MAX(s->queue_size), 1,
                                  blk_enable_write_cache(s->blk), &c);
    memcpy(config, &c, sizeof(c));
}

/* Invariant 1: only writeback is writable, and only when negotiated. */
static void virtio_blk_set_config(VirtIODevice *vdev, const uint8_t *config,
                                  uint32_t offset, uint32_t len)
{
    VirtIOBlock *s = virtio_blk_of(vdev);

    if (!virtio_blk_config_write_has_wce(offset, len) ||
        !(vdev->status & VIRTIO_CONFIG_S_FEATURES_OK) ||
        !virtio_blk_wce_writable(vdev->guest_features)) {
        return;
    }
    blk_set_enable_write_cache(
        s->blk, config[offsetof(VirtIOBlkConfig, writeback)] != 0);
}

static void virtio_blk_complete(VirtIOBlkHandler *h, VirtQueueElement *elem,
                                uint32_t in_len, void *opaque)
{
    VirtIOBlock *s = container_of(h, VirtIOBlock, handler);
    VirtQueue *vq = opaque;
    Error *err = NULL;

    if (virtqueue_push(vq, elem, in_len, &err) < 0) {
        if (err) {
            virtio_device_error(&s->vdev, err);
        }
    } else {
        virtio_notify(&s->vdev, vq);
    }
    virtqueue_element_free(elem);
    assert(s->inflight > 0);
    s->inflight--;
}

static void virtio_blk_handle_queue(VirtIODevice *vdev, VirtQueue *vq)
{
    VirtIOBlock *s = virtio_blk_of(vdev);

    while (!virtio_device_broken(vdev)) {
        VirtQueueElement *elem;
        Error *err = NULL;
        int ret = virtqueue_pop(vq, &elem, &err);

        if (ret <= 0) {
            if (ret < 0 && err) {
                virtio_device_error(vdev, err);
            }
            return;
        }
        s->inflight++;
        if (virtio_blk_handle_request(&s->handler, elem, virtio_blk_complete,
                                      vq, &err) < 0) {
            /* invariant 4: the chain stays with the broken queue */
            s->inflight--;
            virtqueue_element_free(elem);
            vq->broken = true;
            virtio_device_error(vdev, err);
            return;
        }
    }
}

/* Invariant 3, and the defaults a reset restores. */
static void virtio_blk_reset(VirtIODevice *vdev)
{
    VirtIOBlock *s = virtio_blk_of(vdev);

    if (s->inflight) {
        blk_drain(s->blk);
    }
    assert(s->inflight == 0);
    blk_set_enable_write_cache(s->blk, s->wce_default);
    virtio_blk_handler_set_features(&s->handler, 0);
}

void virtio_blk_conf_init(VirtIOBlkConf *conf, BlockBackend *blk)
{
    *conf = (VirtIOBlkConf) {
        .blk = blk,
        .logical_block_size = VIRTIO_BLK_SECTOR_SIZE,
        .queue_size = 256,
        .config_wce = true,
        .discard = true,
        .write_zeroes = true,
    };
}

static const VirtioDeviceOps virtio_blk_ops;

static int virtio_blk_check_conf(const VirtIOBlkConf *conf, int64_t len,
                                 Error **errp)
{
    uint32_t bs = conf->logical_block_size;

    if (!virtio_blk_block_size_valid(bs)) {
        error_setg(errp, "virtio-blk: logical block size %" PRIu32 " is not "
                   "a power of 2 from 512 to 65536", bs);
        return -EINVAL;
    }
    if (conf->queue_size < 4 || conf->queue_size > VIRTQUEUE_MAX_SIZE ||
        !is_power_of_2(conf->queue_size)) {
        error_setg(errp, "virtio-blk: queue size %u is not a power of 2 "
                   "from 4 to %d", conf->queue_size, VIRTQUEUE_MAX_SIZE);
        return -EINVAL;
    }
    if (conf->serial && strlen(conf->serial) > VIRTIO_BLK_ID_BYTES) {
        error_setg(errp, "virtio-blk: serial '%s' is longer than %d bytes",
                   conf->serial, VIRTIO_BLK_ID_BYTES);
        return -EINVAL;
    }
    if (len < 0) {
        error_setg_errno(errp, -len, "virtio-blk: cannot get the image "
                         "size");
        return len;
    }
    if (len % bs) {
        error_setg(errp, "virtio-blk: the image size %" PRId64 " is not a "
                   "multiple of the logical block size %" PRIu32, len, bs);
        return -EINVAL;
    }
    return 0;
}

VirtIOBlock *virtio_blk_new(const VirtIOBlkConf *conf,
                            const GuestMemory *mem, const IRQLine *irq,
                            Error **errp)
{
    int64_t len = blk_getlength(conf->blk);
    VirtIOBlock *s;

    if (virtio_blk_check_conf(conf, len, errp) < 0) {
        return NULL;
    }
    s = g_new0(VirtIOBlock, 1);
    virtio_device_init(&s->vdev, &virtio_blk_ops, mem, irq, s->vqs,
                       ARRAY_SIZE(s->vqs), conf->queue_size);
    blk_ref(conf->blk);
    s->blk = conf->blk;
    s->offer_config_wce = conf->config_wce;
    s->offer_discard = conf->discard;
    s->offer_write_zeroes = conf->write_zeroes;
    s->queue_size = conf->queue_size;
    s->wce_default = blk_enable_write_cache(s->blk);
    virtio_blk_handler_init(&s->handler, s->blk, len,
                            conf->logical_block_size,
                            bdrv_is_read_only(blk_bs(s->blk)), conf->serial);
    return s;
}

void virtio_blk_free(VirtIOBlock *s)
{
    if (!s) {
        return;
    }
    if (s->inflight) {
        blk_drain(s->blk);
    }
    virtio_device_cleanup(&s->vdev);
    blk_unref(s->blk);
    g_free(s);
}

static const VirtioDeviceOps virtio_blk_ops = {
    .device_id      = VIRTIO_ID_BLOCK,
    .config_size    = sizeof(VirtIOBlkConfig),
    .get_features   = virtio_blk_get_features,
    .set_features   = virtio_blk_set_features,
    .get_config     = virtio_blk_get_config,
    .set_config     = virtio_blk_set_config,
    .handle_queue   = virtio_blk_handle_queue,
    .reset          = virtio_blk_reset,
};
