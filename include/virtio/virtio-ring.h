/*
 * Virtio 1.x: the split virtqueue in guest memory, the generic feature
 * bits and the device status bits (virtio spec 1.2, sections 2.1, 2.7,
 * 6).  All ring fields are little-endian.
 *
 * Shared by the device side (virtio/virtqueue.c, the device models in
 * hw/virtio, the vhost-user-blk export) and drivers of it (the qtest
 * harness), so that all speak from one definition.
 */
#ifndef VIRTIO_RING_H
#define VIRTIO_RING_H

#include "util/osdep.h"

/* Device status (2.1). */
#define VIRTIO_CONFIG_S_ACKNOWLEDGE        0x01
#define VIRTIO_CONFIG_S_DRIVER             0x02
#define VIRTIO_CONFIG_S_DRIVER_OK          0x04
#define VIRTIO_CONFIG_S_FEATURES_OK        0x08
#define VIRTIO_CONFIG_S_DEVICE_NEEDS_RESET 0x40
#define VIRTIO_CONFIG_S_FAILED             0x80

/* Device-independent feature bits (6). */
#define VIRTIO_RING_F_INDIRECT_DESC 28
#define VIRTIO_RING_F_EVENT_IDX     29
#define VIRTIO_F_VERSION_1          32

/* A descriptor: one buffer of a chain (2.7.5). */
typedef struct VRingDesc {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
    uint16_t next;
} VRingDesc;
_Static_assert(sizeof(VRingDesc) == 16, "a descriptor is 16 bytes");
_Static_assert(offsetof(VRingDesc, flags) == 12, "flags at byte 12");
#define VRING_DESC_F_NEXT     1     /* the chain continues at next */
#define VRING_DESC_F_WRITE    2     /* device-writable (else readable) */
#define VRING_DESC_F_INDIRECT 4     /* addr/len hold a descriptor table */

/*
 * The available ring (driver to device, 2.7.6): flags, idx, ring[num],
 * then used_event when VIRTIO_RING_F_EVENT_IDX is negotiated.
 */
#define VRING_AVAIL_F_NO_INTERRUPT 1
#define VRING_AVAIL_OFF_FLAGS 0
#define VRING_AVAIL_OFF_IDX   2
#define VRING_AVAIL_OFF_RING  4
#define VRING_AVAIL_SIZE(num) (VRING_AVAIL_OFF_RING + 2 * (num) + 2)
#define VRING_AVAIL_OFF_USED_EVENT(num) (VRING_AVAIL_OFF_RING + 2 * (num))

/*
 * The used ring (device to driver, 2.7.8): flags, idx, ring[num] of
 * elements, then avail_event when VIRTIO_RING_F_EVENT_IDX is negotiated.
 */
typedef struct VRingUsedElem {
    uint32_t id;        /* head of the chain */
    uint32_t len;       /* bytes written into the chain's buffers */
} VRingUsedElem;
_Static_assert(sizeof(VRingUsedElem) == 8, "a used element is 8 bytes");
#define VRING_USED_F_NO_NOTIFY 1
#define VRING_USED_OFF_FLAGS 0
#define VRING_USED_OFF_IDX   2
#define VRING_USED_OFF_RING  4
#define VRING_USED_SIZE(num) (VRING_USED_OFF_RING + 8 * (num) + 2)
#define VRING_USED_OFF_AVAIL_EVENT(num) (VRING_USED_OFF_RING + 8 * (num))

/* Alignment the spec requires of each part (2.7.2). */
#define VRING_DESC_ALIGN  16
#define VRING_AVAIL_ALIGN 2
#define VRING_USED_ALIGN  4

/* Largest queue: a power of 2 the spec allows (up to 32768), kept at
 * what Linux and QEMU use, which bounds a chain to 1024 descriptors. */
#define VIRTQUEUE_MAX_SIZE 1024

/*
 * With EVENT_IDX, whether moving an index from @old to @new_idx crosses
 * @event (the other side asked to be told once it passes event).
 */
static inline bool vring_need_event(uint16_t event, uint16_t new_idx,
                                    uint16_t old)
{
    return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

#endif
