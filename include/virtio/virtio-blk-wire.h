/*
 * virtio-blk on the wire: feature bits, the configuration space, the
 * request header and status, and discard/write-zeroes segments (virtio
 * spec 1.2, 5.2).  All fields are little-endian; sectors are 512 bytes
 * whatever blk_size says.
 *
 * Shared by the device (hw/block), the vhost-user-blk export and drivers
 * of them (the qtest harness).
 */
#ifndef VIRTIO_BLK_WIRE_H
#define VIRTIO_BLK_WIRE_H

#include "util/osdep.h"

#define VIRTIO_ID_BLOCK 2

/* Feature bits (5.2.3). */
#define VIRTIO_BLK_F_SIZE_MAX     1
#define VIRTIO_BLK_F_SEG_MAX      2
#define VIRTIO_BLK_F_GEOMETRY     4
#define VIRTIO_BLK_F_RO           5
#define VIRTIO_BLK_F_BLK_SIZE     6
#define VIRTIO_BLK_F_FLUSH        9
#define VIRTIO_BLK_F_TOPOLOGY     10
#define VIRTIO_BLK_F_CONFIG_WCE   11
#define VIRTIO_BLK_F_MQ           12
#define VIRTIO_BLK_F_DISCARD      13
#define VIRTIO_BLK_F_WRITE_ZEROES 14

/* The configuration space (5.2.4). */
typedef struct QEMU_PACKED VirtIOBlkConfig {
    uint64_t capacity;                  /* in 512-byte sectors */
    uint32_t size_max;
    uint32_t seg_max;
    struct QEMU_PACKED {
        uint16_t cylinders;
        uint8_t heads;
        uint8_t sectors;
    } geometry;
    uint32_t blk_size;
    struct QEMU_PACKED {
        uint8_t physical_block_exp;
        uint8_t alignment_offset;
        uint16_t min_io_size;
        uint32_t opt_io_size;
    } topology;
    uint8_t writeback;                  /* 0: writethrough, 1: writeback */
    uint8_t unused0;
    uint16_t num_queues;
    uint32_t max_discard_sectors;
    uint32_t max_discard_seg;
    uint32_t discard_sector_alignment;
    uint32_t max_write_zeroes_sectors;
    uint32_t max_write_zeroes_seg;
    uint8_t write_zeroes_may_unmap;
    uint8_t unused1[3];
} VirtIOBlkConfig;
_Static_assert(offsetof(VirtIOBlkConfig, seg_max) == 12, "seg_max");
_Static_assert(offsetof(VirtIOBlkConfig, blk_size) == 20, "blk_size");
_Static_assert(offsetof(VirtIOBlkConfig, writeback) == 32, "writeback");
_Static_assert(offsetof(VirtIOBlkConfig, num_queues) == 34, "num_queues");
_Static_assert(offsetof(VirtIOBlkConfig, max_discard_sectors) == 36,
               "max_discard_sectors");
_Static_assert(offsetof(VirtIOBlkConfig, max_write_zeroes_sectors) == 48,
               "max_write_zeroes_sectors");
_Static_assert(offsetof(VirtIOBlkConfig, write_zeroes_may_unmap) == 56,
               "write_zeroes_may_unmap");
_Static_assert(sizeof(VirtIOBlkConfig) == 60, "the 1.1 config is 60 bytes");

/* The header every request starts with, device-readable (5.2.6). */
typedef struct VirtIOBlkOutHdr {
    uint32_t type;
    uint32_t reserved;                  /* ioprio in legacy devices */
    uint64_t sector;
} VirtIOBlkOutHdr;
_Static_assert(sizeof(VirtIOBlkOutHdr) == 16, "the header is 16 bytes");

/* Request types. */
#define VIRTIO_BLK_T_IN           0
#define VIRTIO_BLK_T_OUT          1
#define VIRTIO_BLK_T_FLUSH        4
#define VIRTIO_BLK_T_GET_ID       8
#define VIRTIO_BLK_T_DISCARD      11
#define VIRTIO_BLK_T_WRITE_ZEROES 13

/* The status byte, the last device-writable byte of a request. */
#define VIRTIO_BLK_S_OK     0
#define VIRTIO_BLK_S_IOERR  1
#define VIRTIO_BLK_S_UNSUPP 2

/* GET_ID returns up to this many bytes of serial number. */
#define VIRTIO_BLK_ID_BYTES 20

/* A discard or write-zeroes segment, device-readable. */
typedef struct VirtIOBlkDiscardWriteZeroes {
    uint64_t sector;
    uint32_t num_sectors;
    uint32_t flags;
} VirtIOBlkDiscardWriteZeroes;
_Static_assert(sizeof(VirtIOBlkDiscardWriteZeroes) == 16,
               "a segment is 16 bytes");
#define VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP 1

#define VIRTIO_BLK_SECTOR_SIZE 512

#endif
