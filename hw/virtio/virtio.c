/*
 * The transport-independent core of a virtio device (see
 * include/hw/virtio/virtio.h): status, features, queues, reset and
 * interrupts.
 *
 * Status transitions (2.1, 3.1), each made by the driver's Status write
 * (virtio-mmio.c) through virtio_set_status():
 *
 *   0 --ACKNOWLEDGE|DRIVER--> features may be written
 *     --FEATURES_OK--> ops->set_features(); refused: FEATURES_OK stays 0
 *     --DRIVER_OK--> queues are served
 *   any --0--> virtio_device_reset()
 *   any --device error--> |= DEVICE_NEEDS_RESET, nothing served
 *
 * Invariants:
 *  1. guest_features is a subset of what get_features() offers and is
 *     fixed once FEATURES_OK is set; it is what queues and the device type
 *     see (VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC).
 *  2. Queues are served only with FEATURES_OK and DRIVER_OK set and
 *     DEVICE_NEEDS_RESET clear: a driver that skipped the negotiation
 *     gets nothing, rather than features it never agreed to.
 *  3. The interrupt line is high exactly while isr is nonzero.
 */

#include "hw/virtio/virtio.h"

void virtio_device_init(VirtIODevice *vdev, const VirtioDeviceOps *ops,
                        const GuestMemory *mem, const IRQLine *irq,
                        VirtQueue *vqs, unsigned int nvqs,
                        uint16_t queue_num_max)
{
    assert(nvqs > 0 && is_power_of_2(queue_num_max) &&
           queue_num_max <= VIRTQUEUE_MAX_SIZE);
    memset(vdev, 0, sizeof(*vdev));
    vdev->ops = ops;
    vdev->mem = *mem;
    vdev->irq = *irq;
    vdev->nvqs = nvqs;
    vdev->queue_num_max = queue_num_max;
    vdev->vqs = vqs;
    for (unsigned int i = 0; i < nvqs; i++) {
        virtqueue_init(&vdev->vqs[i], &vdev->mem);
    }
}

/* Invariant 3. */
static void virtio_update_irq(VirtIODevice *vdev)
{
    int level = vdev->isr != 0;

    if (level != vdev->irq_level) {
        vdev->irq_level = level;
        irq_line_set(&vdev->irq, level);
    }
}

void virtio_device_reset(VirtIODevice *vdev)
{
    vdev->ops->reset(vdev);
    g_free(vdev->broken_reason);
    vdev->broken_reason = NULL;
    vdev->status = 0;
    vdev->guest_features = 0;
    vdev->device_features_sel = 0;
    vdev->driver_features_sel = 0;
    vdev->queue_sel = 0;
    vdev->isr = 0;
    for (unsigned int i = 0; i < vdev->nvqs; i++) {
        virtqueue_reset(&vdev->vqs[i]);
    }
    virtio_update_irq(vdev);
}

bool virtio_has_feature(const VirtIODevice *vdev, unsigned int bit)
{
    return vdev->guest_features & (UINT64_C(1) << bit);
}

bool virtio_device_broken(const VirtIODevice *vdev)
{
    return vdev->status & VIRTIO_CONFIG_S_DEVICE_NEEDS_RESET;
}

void virtio_notify(VirtIODevice *vdev, VirtQueue *vq)
{
    if (!virtqueue_should_notify(vq)) {
        return;
    }
    vdev->isr |= VIRTIO_ISR_VRING;
    virtio_update_irq(vdev);
}

void virtio_notify_config(VirtIODevice *vdev)
{
    vdev->config_generation++;
    vdev->isr |= VIRTIO_ISR_CONFIG;
    virtio_update_irq(vdev);
}

void virtio_device_error(VirtIODevice *vdev, Error *err)
{
    if (virtio_device_broken(vdev)) {
        error_free(err);
        return;
    }
    /* the driver sees the state; the reason is kept for the operator */
    vdev->broken_reason = g_strdup(error_get_pretty(err));
    error_free(err);
    vdev->status |= VIRTIO_CONFIG_S_DEVICE_NEEDS_RESET;
    virtio_notify_config(vdev);
}

const char *virtio_device_broken_reason(const VirtIODevice *vdev)
{
    return vdev->broken_reason;
}

void virtio_device_cleanup(VirtIODevice *vdev)
{
    g_free(vdev->broken_reason);
    vdev->broken_reason = NULL;
}

/* What the queues take from the negotiated features (invariant 1). */
static void virtio_apply_ring_features(VirtIODevice *vdev)
{
    for (unsigned int i = 0; i < vdev->nvqs; i++) {
        VirtQueue *vq = &vdev->vqs[i];

        vq->indirect = virtio_has_feature(vdev, VIRTIO_RING_F_INDIRECT_DESC);
        vq->event_idx = virtio_has_feature(vdev, VIRTIO_RING_F_EVENT_IDX);
    }
}

/* Invariant 1: FEATURES_OK checks and applies the driver's choice. */
void virtio_set_status(VirtIODevice *vdev, uint8_t val)
{
    bool features_ok = !(vdev->status & VIRTIO_CONFIG_S_FEATURES_OK) &&
                       (val & VIRTIO_CONFIG_S_FEATURES_OK);

    if (val == 0) {
        virtio_device_reset(vdev);
        return;
    }
    if (features_ok) {
        bool ok = vdev->guest_features & (UINT64_C(1) << VIRTIO_F_VERSION_1);

        if (ok && vdev->ops->set_features) {
            ok = vdev->ops->set_features(vdev, vdev->guest_features);
        }
        if (!ok) {
            /* the driver reads FEATURES_OK back and sees the refusal */
            val &= ~VIRTIO_CONFIG_S_FEATURES_OK;
        } else {
            virtio_apply_ring_features(vdev);
        }
    }
    /* the driver cannot clear NEEDS_RESET itself, only reset */
    vdev->status = val | (vdev->status & VIRTIO_CONFIG_S_DEVICE_NEEDS_RESET);
}

/* Invariant 2. */
void virtio_queue_notify(VirtIODevice *vdev, uint32_t index)
{
    uint8_t needed = VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK;

    if (index >= vdev->nvqs || (vdev->status & needed) != needed ||
        virtio_device_broken(vdev) || !vdev->vqs[index].ready) {
        return;
    }
    vdev->ops->handle_queue(vdev, &vdev->vqs[index]);
}

void virtio_ack_interrupt(VirtIODevice *vdev, uint32_t bits)
{
    vdev->isr &= ~bits;
    virtio_update_irq(vdev);
}

/* ---- device state ---- */

const VMStateDescription vmstate_virtqueue = {
    .name = "virtqueue",
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(VirtQueue),
    .fields = (const VMStateField[]) {
        VMSTATE_UINT16(num, VirtQueue),
        VMSTATE_UINT64(desc, VirtQueue),
        VMSTATE_UINT64(avail, VirtQueue),
        VMSTATE_UINT64(used, VirtQueue),
        VMSTATE_BOOL(ready, VirtQueue),
        VMSTATE_UINT16(last_avail_idx, VirtQueue),
        VMSTATE_UINT16(used_idx, VirtQueue),
        VMSTATE_UINT16(signalled_used, VirtQueue),
        VMSTATE_BOOL(signalled_used_valid, VirtQueue),
        VMSTATE_BOOL(broken, VirtQueue),
        VMSTATE_END_OF_LIST()
    },
};

const VMStateDescription vmstate_virtio_device = {
    .name = "virtio-device",
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(VirtIODevice),
    .fields = (const VMStateField[]) {
        VMSTATE_UINT8(status, VirtIODevice),
        VMSTATE_UINT64(guest_features, VirtIODevice),
        VMSTATE_UINT32(config_generation, VirtIODevice),
        VMSTATE_UINT32(device_features_sel, VirtIODevice),
        VMSTATE_UINT32(driver_features_sel, VirtIODevice),
        VMSTATE_UINT32(queue_sel, VirtIODevice),
        VMSTATE_UINT32(isr, VirtIODevice),
        VMSTATE_END_OF_LIST()
    },
};

/*
 * Checks what a load put into the core and its queues (the values come
 * from outside) and derives what is not saved.
 */
int virtio_device_post_load(VirtIODevice *vdev, Error **errp)
{
    uint64_t offered = vdev->ops->get_features(vdev);

    if (vdev->guest_features & ~offered) {
        error_setg(errp, "virtio device %" PRIu32 ": features %#" PRIx64
                   " were never offered", vdev->ops->device_id,
                   vdev->guest_features & ~offered);
        return -EINVAL;
    }
    if ((vdev->status & VIRTIO_CONFIG_S_FEATURES_OK) &&
        !virtio_has_feature(vdev, VIRTIO_F_VERSION_1)) {
        error_setg(errp, "virtio device %" PRIu32 ": FEATURES_OK without "
                   "VIRTIO_F_VERSION_1", vdev->ops->device_id);
        return -EINVAL;
    }
    if (vdev->isr & ~(VIRTIO_ISR_VRING | VIRTIO_ISR_CONFIG)) {
        error_setg(errp, "virtio device %" PRIu32 ": interrupt status %#"
                   PRIx32 " has unknown bits", vdev->ops->device_id,
                   vdev->isr);
        return -EINVAL;
    }
    for (unsigned int i = 0; i < vdev->nvqs; i++) {
        VirtQueue *vq = &vdev->vqs[i];

        if (vq->num > vdev->queue_num_max ||
            (vq->num && !is_power_of_2(vq->num)) ||
            (vq->ready && !vq->num)) {
            error_setg(errp, "virtio device %" PRIu32 ": queue %u has %u "
                       "entries (at most %u, a power of 2)",
                       vdev->ops->device_id, i, vq->num,
                       vdev->queue_num_max);
            return -EINVAL;
        }
        vq->inuse = 0;
    }
    virtio_apply_ring_features(vdev);
    virtio_update_irq(vdev);
    return 0;
}
