/*
 * The virtio-mmio transport's register layout, version 2 (virtio spec
 * 1.2, 4.2.2).  Registers below VIRTIO_MMIO_CONFIG are 32 bits wide and
 * little-endian; the device's configuration space follows at
 * VIRTIO_MMIO_CONFIG.
 */
#ifndef HW_VIRTIO_MMIO_REGS_H
#define HW_VIRTIO_MMIO_REGS_H

enum {
    VIRTIO_MMIO_MAGIC_VALUE         = 0x000,
    VIRTIO_MMIO_VERSION             = 0x004,
    VIRTIO_MMIO_DEVICE_ID           = 0x008,
    VIRTIO_MMIO_VENDOR_ID           = 0x00c,
    VIRTIO_MMIO_DEVICE_FEATURES     = 0x010,
    VIRTIO_MMIO_DEVICE_FEATURES_SEL = 0x014,
    VIRTIO_MMIO_DRIVER_FEATURES     = 0x020,
    VIRTIO_MMIO_DRIVER_FEATURES_SEL = 0x024,
    VIRTIO_MMIO_QUEUE_SEL           = 0x030,
    VIRTIO_MMIO_QUEUE_NUM_MAX       = 0x034,
    VIRTIO_MMIO_QUEUE_NUM           = 0x038,
    VIRTIO_MMIO_QUEUE_READY         = 0x044,
    VIRTIO_MMIO_QUEUE_NOTIFY        = 0x050,
    VIRTIO_MMIO_INTERRUPT_STATUS    = 0x060,
    VIRTIO_MMIO_INTERRUPT_ACK       = 0x064,
    VIRTIO_MMIO_STATUS              = 0x070,
    VIRTIO_MMIO_QUEUE_DESC_LOW      = 0x080,
    VIRTIO_MMIO_QUEUE_DESC_HIGH     = 0x084,
    VIRTIO_MMIO_QUEUE_DRIVER_LOW    = 0x090,
    VIRTIO_MMIO_QUEUE_DRIVER_HIGH   = 0x094,
    VIRTIO_MMIO_QUEUE_DEVICE_LOW    = 0x0a0,
    VIRTIO_MMIO_QUEUE_DEVICE_HIGH   = 0x0a4,
    VIRTIO_MMIO_CONFIG_GENERATION   = 0x0fc,
    VIRTIO_MMIO_CONFIG              = 0x100,
};

/* "virt" in little-endian: what MagicValue reads. */
#define VIRTIO_MMIO_MAGIC    0x74726976
#define VIRTIO_MMIO_VERSION_2 2
/* "QBLK": the vendor ID this implementation reports. */
#define VIRTIO_MMIO_VENDOR_QBLOCK 0x4b4c4251

/* InterruptStatus / InterruptACK bits. */
#define VIRTIO_MMIO_INT_VRING  0x1  /* a used ring was updated */
#define VIRTIO_MMIO_INT_CONFIG 0x2  /* the configuration changed */

#endif
