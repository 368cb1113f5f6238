/*
 * The virtio-mmio transport, version 2 (virtio spec 1.2, 4.2): register
 * accesses of a driver decoded onto a VirtIODevice.
 *
 * Invariants:
 *  1. Registers below the configuration space take 32-bit accesses only;
 *     other sizes read 0 and write nothing, as the spec allows.
 *  2. A queue's registers change only while it is not ready, and a queue
 *     goes ready only with a valid size (a power of 2, at most
 *     QueueNumMax); its addresses are checked when it is used.
 *  3. Driver features written are masked with what the device offers and
 *     are frozen once FEATURES_OK is set.
 */

#include "hw/virtio/virtio.h"
#include "hw/virtio/virtio-mmio-regs.h"

_Static_assert(VIRTIO_MMIO_INT_VRING == VIRTIO_ISR_VRING &&
               VIRTIO_MMIO_INT_CONFIG == VIRTIO_ISR_CONFIG,
               "InterruptStatus holds the core's interrupt bits");

static VirtQueue *virtio_mmio_queue(VirtIODevice *vdev)
{
    return vdev->queue_sel < vdev->nvqs ? &vdev->vqs[vdev->queue_sel] : NULL;
}

static uint32_t virtio_mmio_read_config(VirtIODevice *vdev, uint64_t offset,
                                        unsigned size)
{
    g_autofree uint8_t *config = g_malloc0(vdev->ops->config_size);
    uint32_t val = 0;

    if (offset > vdev->ops->config_size ||
        vdev->ops->config_size - offset < size) {
        return 0;
    }
    vdev->ops->get_config(vdev, config);
    for (unsigned i = 0; i < size; i++) {
        val |= (uint32_t)config[offset + i] << (8 * i);
    }
    return val;
}

static void virtio_mmio_write_config(VirtIODevice *vdev, uint64_t offset,
                                     unsigned size, uint32_t val)
{
    g_autofree uint8_t *config = g_malloc0(vdev->ops->config_size);

    if (!vdev->ops->set_config || offset > vdev->ops->config_size ||
        vdev->ops->config_size - offset < size) {
        return;
    }
    vdev->ops->get_config(vdev, config);
    for (unsigned i = 0; i < size; i++) {
        config[offset + i] = val >> (8 * i);
    }
    vdev->ops->set_config(vdev, config, offset, size);
}

uint32_t virtio_mmio_read(VirtIODevice *vdev, uint64_t offset, unsigned size)
{
    VirtQueue *vq = virtio_mmio_queue(vdev);

    if (offset >= VIRTIO_MMIO_CONFIG) {
        return virtio_mmio_read_config(vdev, offset - VIRTIO_MMIO_CONFIG,
                                       size);
    }
    if (size != 4) {
        return 0;
    }
    switch (offset) {
    case VIRTIO_MMIO_MAGIC_VALUE:
        return VIRTIO_MMIO_MAGIC;
    case VIRTIO_MMIO_VERSION:
        return VIRTIO_MMIO_VERSION_2;
    case VIRTIO_MMIO_DEVICE_ID:
        return vdev->ops->device_id;
    case VIRTIO_MMIO_VENDOR_ID:
        return VIRTIO_MMIO_VENDOR_QBLOCK;
    case VIRTIO_MMIO_DEVICE_FEATURES:
        if (vdev->device_features_sel > 1) {
            return 0;
        }
        return vdev->ops->get_features(vdev) >>
               (32 * vdev->device_features_sel);
    case VIRTIO_MMIO_QUEUE_NUM_MAX:
        return vq ? vdev->queue_num_max : 0;
    case VIRTIO_MMIO_QUEUE_READY:
        return vq && vq->ready;
    case VIRTIO_MMIO_INTERRUPT_STATUS:
        return vdev->isr;
    case VIRTIO_MMIO_STATUS:
        return vdev->status;
    case VIRTIO_MMIO_CONFIG_GENERATION:
        return vdev->config_generation;
    default:
        return 0;
    }
}

/*
 * A 64-bit address is written as two 32-bit registers: @offset is the
 * high half's register @high_reg, or the low half's.
 */
static void virtio_mmio_set_half(uint64_t *addr, uint64_t offset,
                                 uint64_t high_reg, uint32_t val)
{
    if (offset == high_reg) {
        *addr = (*addr & 0xffffffff) | ((uint64_t)val << 32);
    } else {
        *addr = (*addr & ~UINT64_C(0xffffffff)) | val;
    }
}

/* Queue registers may change only while the queue is not ready. */
static void virtio_mmio_write_queue(VirtIODevice *vdev, uint64_t offset,
                                    uint32_t val)
{
    VirtQueue *vq = virtio_mmio_queue(vdev);

    if (!vq || (vq->ready && offset != VIRTIO_MMIO_QUEUE_READY)) {
        return;
    }
    switch (offset) {
    case VIRTIO_MMIO_QUEUE_NUM:
        /* anything else is kept as 0: the queue then cannot go ready */
        vq->num = val && val <= vdev->queue_num_max && is_power_of_2(val)
                  ? val : 0;
        break;
    case VIRTIO_MMIO_QUEUE_READY:
        if (!val) {
            vq->ready = false;
        } else if (vq->num) {
            vq->ready = true;
        }
        break;
    case VIRTIO_MMIO_QUEUE_DESC_LOW:
    case VIRTIO_MMIO_QUEUE_DESC_HIGH:
        virtio_mmio_set_half(&vq->desc, offset, VIRTIO_MMIO_QUEUE_DESC_HIGH,
                             val);
        break;
    case VIRTIO_MMIO_QUEUE_DRIVER_LOW:
    case VIRTIO_MMIO_QUEUE_DRIVER_HIGH:
        virtio_mmio_set_half(&vq->avail, offset,
                             VIRTIO_MMIO_QUEUE_DRIVER_HIGH, val);
        break;
    case VIRTIO_MMIO_QUEUE_DEVICE_LOW:
    case VIRTIO_MMIO_QUEUE_DEVICE_HIGH:
        virtio_mmio_set_half(&vq->used, offset,
                             VIRTIO_MMIO_QUEUE_DEVICE_HIGH, val);
        break;
    }
}

void virtio_mmio_write(VirtIODevice *vdev, uint64_t offset, unsigned size,
                       uint32_t val)
{
    if (offset >= VIRTIO_MMIO_CONFIG) {
        virtio_mmio_write_config(vdev, offset - VIRTIO_MMIO_CONFIG, size,
                                 val);
        return;
    }
    if (size != 4) {
        return;
    }
    switch (offset) {
    case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
        vdev->device_features_sel = val;
        break;
    case VIRTIO_MMIO_DRIVER_FEATURES:
        /* fixed once FEATURES_OK is set; never more than offered */
        if (vdev->driver_features_sel <= 1 &&
            !(vdev->status & VIRTIO_CONFIG_S_FEATURES_OK)) {
            unsigned shift = 32 * vdev->driver_features_sel;
            uint64_t mask = UINT64_C(0xffffffff) << shift;

            vdev->guest_features = (vdev->guest_features & ~mask) |
                                   (((uint64_t)val << shift) &
                                    vdev->ops->get_features(vdev));
        }
        break;
    case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
        vdev->driver_features_sel = val;
        break;
    case VIRTIO_MMIO_QUEUE_SEL:
        vdev->queue_sel = val;
        break;
    case VIRTIO_MMIO_QUEUE_NOTIFY:
        virtio_queue_notify(vdev, val);
        break;
    case VIRTIO_MMIO_INTERRUPT_ACK:
        virtio_ack_interrupt(vdev, val);
        break;
    case VIRTIO_MMIO_STATUS:
        virtio_set_status(vdev, val);
        break;
    case VIRTIO_MMIO_QUEUE_NUM:
    case VIRTIO_MMIO_QUEUE_READY:
    case VIRTIO_MMIO_QUEUE_DESC_LOW:
    case VIRTIO_MMIO_QUEUE_DESC_HIGH:
    case VIRTIO_MMIO_QUEUE_DRIVER_LOW:
    case VIRTIO_MMIO_QUEUE_DRIVER_HIGH:
    case VIRTIO_MMIO_QUEUE_DEVICE_LOW:
    case VIRTIO_MMIO_QUEUE_DEVICE_HIGH:
        virtio_mmio_write_queue(vdev, offset, val);
        break;
    }
}
