/*
 * A virtio device and its virtio-mmio transport.
 *
 * VirtIODevice is the transport-independent core: status, feature
 * negotiation, queues, reset, the configuration generation and the
 * "device needs reset" state.  A device type (virtio-blk) embeds it and
 * fills in VirtioDeviceOps.  The transport here is virtio-mmio (version 2):
 * virtio_mmio_read/write are its register accesses, as a guest's MMIO
 * loads and stores would make them; interrupts go to the IRQLine, DMA to
 * the GuestMemory.
 */
#ifndef HW_VIRTIO_H
#define HW_VIRTIO_H

#include "hw/irq.h"
#include "virtio/virtqueue.h"
#include "migration/vmstate.h"

typedef struct VirtIODevice VirtIODevice;

/*
 * What a device type provides.  Everything is called in the device's
 * AioContext thread, outside coroutine context.
 */
typedef struct VirtioDeviceOps {
    uint32_t device_id;
    /* bytes of configuration space */
    size_t config_size;
    /* Required.  The device features offered (VIRTIO_F_VERSION_1 set). */
    uint64_t (*get_features)(VirtIODevice *vdev);
    /*
     * Optional.  The driver set FEATURES_OK with @features (a subset of
     * the offer): apply them, or return false to refuse the set.
     */
    bool (*set_features)(VirtIODevice *vdev, uint64_t features);
    /* Required.  Fills @config (config_size bytes, little-endian). */
    void (*get_config)(VirtIODevice *vdev, uint8_t *config);
    /* Optional.  The driver wrote @len bytes at @offset of the config. */
    void (*set_config)(VirtIODevice *vdev, const uint8_t *config,
                       uint32_t offset, uint32_t len);
    /* Required.  The driver notified queue @vq. */
    void (*handle_queue)(VirtIODevice *vdev, VirtQueue *vq);
    /* Required.  Reset: wait for requests in flight, restore defaults. */
    void (*reset)(VirtIODevice *vdev);
} VirtioDeviceOps;

struct VirtIODevice {
    /* --- set by virtio_device_init, immutable --- */
    const VirtioDeviceOps *ops;
    GuestMemory mem;
    IRQLine irq;
    unsigned int nvqs;
    uint16_t queue_num_max;
    VirtQueue *vqs;

    /* --- negotiated state --- */
    uint8_t status;
    uint64_t guest_features;
    uint32_t config_generation;

    /* why DEVICE_NEEDS_RESET was set (the first reason), or NULL */
    char *broken_reason;

    /* --- virtio-mmio registers --- */
    uint32_t device_features_sel;
    uint32_t driver_features_sel;
    uint32_t queue_sel;
    uint32_t isr;               /* InterruptStatus */
    /* the level last put on the line (recomputed, not saved) */
    int irq_level;
};

/* @vqs: the device type's @nvqs queues (they live in its struct). */
void virtio_device_init(VirtIODevice *vdev, const VirtioDeviceOps *ops,
                        const GuestMemory *mem, const IRQLine *irq,
                        VirtQueue *vqs, unsigned int nvqs,
                        uint16_t queue_num_max);
/* Device reset (the driver wrote 0 to Status, or the machine reset). */
void virtio_device_reset(VirtIODevice *vdev);
bool virtio_has_feature(const VirtIODevice *vdev, unsigned int bit);
/* The driver wrote Status (0: reset). */
void virtio_set_status(VirtIODevice *vdev, uint8_t val);
/* The driver notified queue @index. */
void virtio_queue_notify(VirtIODevice *vdev, uint32_t index);
/* Interrupt causes (the isr bits, InterruptStatus in virtio-mmio). */
#define VIRTIO_ISR_VRING  0x1
#define VIRTIO_ISR_CONFIG 0x2
/* The driver acknowledged the interrupt causes @bits. */
void virtio_ack_interrupt(VirtIODevice *vdev, uint32_t bits);
/* A used ring of @vq was updated: interrupt unless the driver opted out. */
void virtio_notify(VirtIODevice *vdev, VirtQueue *vq);
/* The configuration changed (a new generation, a config interrupt). */
void virtio_notify_config(VirtIODevice *vdev);
/*
 * The device cannot go on (a broken queue): DEVICE_NEEDS_RESET, a config
 * interrupt, and no more requests until reset.  @err is consumed; its
 * message is kept for whoever runs the device (an operator's log).
 */
void virtio_device_error(VirtIODevice *vdev, Error *err);
bool virtio_device_broken(const VirtIODevice *vdev);
/* The message of the error that broke the device, or NULL. */
const char *virtio_device_broken_reason(const VirtIODevice *vdev);
/* Frees what the core allocated (the device is not used after). */
void virtio_device_cleanup(VirtIODevice *vdev);

/* virtio-mmio register accesses: @size 1, 2 or 4 (4 below the config). */
uint32_t virtio_mmio_read(VirtIODevice *vdev, uint64_t offset, unsigned size);
void virtio_mmio_write(VirtIODevice *vdev, uint64_t offset, unsigned size,
                       uint32_t val);

/*
 * Device state: the core's and the transport's registers, and each
 * queue's.  A device type saves both in its own description and calls
 * virtio_device_post_load() from its post_load, once the queues are in.
 */
extern const VMStateDescription vmstate_virtio_device;
extern const VMStateDescription vmstate_virtqueue;
int virtio_device_post_load(VirtIODevice *vdev, Error **errp);

#endif
