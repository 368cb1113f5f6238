/*
 * Device state of virtio-blk: the virtio core with its transport
 * registers, the queue, and the write cache flag.
 *
 * Invariants:
 *  1. A device with requests in flight is not saved (pre_save refuses):
 *     with none, every popped chain has been pushed back.
 *  2. The write cache flag travels in VirtIOBlock.wce and is applied to
 *     the BlockBackend after the checks pass; a state that gives a cache
 *     to a driver without VIRTIO_BLK_F_FLUSH is refused (virtio-blk.c
 *     invariant 1).
 *  3. What was negotiated is re-derived from the loaded features, never
 *     loaded as such.
 */

#include "virtio-blk-internal.h"

static int virtio_blk_pre_save(void *opaque, Error **errp)
{
    VirtIOBlock *s = opaque;

    if (s->inflight) {
        error_setg(errp, "virtio-blk has %u requests in flight; drain them "
                   "before saving", s->inflight);
        return -EBUSY;
    }
    s->wce = blk_enable_write_cache(s->blk);
    s->saved_sectors = s->handler.sectors;
    return 0;
}

static int virtio_blk_post_load(void *opaque, int version_id, Error **errp)
{
    VirtIOBlock *s = opaque;
    VirtIODevice *vdev = &s->vdev;
    bool negotiated = vdev->status & VIRTIO_CONFIG_S_FEATURES_OK;
    int ret;

    if (s->saved_sectors != s->handler.sectors) {
        error_setg(errp, "virtio-blk: the state is of a disk of %" PRIu64
                   " sectors, this one has %" PRIu64, s->saved_sectors,
                   s->handler.sectors);
        return -EINVAL;
    }
    ret = virtio_device_post_load(vdev, errp);
    if (ret < 0) {
        return ret;
    }
    if (negotiated && s->wce &&
        !virtio_has_feature(vdev, VIRTIO_BLK_F_FLUSH)) {
        error_setg(errp, "virtio-blk: the state has a write cache for a "
                   "driver that cannot flush");
        return -EINVAL;
    }
    virtio_blk_handler_set_features(&s->handler,
                                    negotiated ? vdev->guest_features : 0);
    blk_set_enable_write_cache(s->blk, s->wce);
    return 0;
}

const VMStateDescription vmstate_virtio_blk = {
    .name = "virtio-blk",
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(VirtIOBlock),
    .pre_save = virtio_blk_pre_save,
    .post_load = virtio_blk_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_STRUCT(vdev, VirtIOBlock, vmstate_virtio_device,
                       VirtIODevice),
        VMSTATE_STRUCT_ARRAY(vqs, VirtIOBlock, 1, vmstate_virtqueue,
                             VirtQueue),
        VMSTATE_UINT64(saved_sectors, VirtIOBlock),
        VMSTATE_BOOL(wce, VirtIOBlock),
        VMSTATE_END_OF_LIST()
    },
};
