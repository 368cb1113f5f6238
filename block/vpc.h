/*
 * The vpc driver's shared state: what block/vpc.c (opening, reading),
 * block/vpc-write.c (block allocation) and block/vpc-create.c (creation)
 * know of an image.  The invariants are block/vpc.c's.
 */
#ifndef BLOCK_VPC_H
#define BLOCK_VPC_H

#include "block/block_int.h"

#define VPC_SECTOR              512
#define VPC_FOOTER_SIZE         512
#define VPC_DYN_HEADER_SIZE     1024
#define VPC_FOOTER_COOKIE       "conectix"
#define VPC_DYN_COOKIE          "cxsparse"
#define VPC_TYPE_FIXED          2
#define VPC_TYPE_DYNAMIC        3
#define VPC_BAT_UNALLOCATED     0xffffffffu
#define VPC_NO_OFFSET           UINT64_C(0xffffffffffffffff)
/* what QEMU writes: feature "reserved" bit, format 1.0, creator 5.3 */
#define VPC_FEATURES            0x00000002u
#define VPC_VERSION             0x00010000u
#define VPC_CREATOR_VERSION     0x00050003u
#define VPC_CREATOR_OS          "Wi2k"
/* QEMU's dynamic layout: header at 512, BAT at 1536, 2 MiB blocks */
#define VPC_CREATE_HEADER_AT    512
#define VPC_CREATE_BAT_AT       1536
#define VPC_CREATE_BLOCK_SIZE   0x200000u
/* the footer's timestamp counts seconds from 2000-01-01 00:00 UTC */
#define VPC_TIMESTAMP_BASE      INT64_C(946684800)
/* the largest CHS geometry, 65535 x 16 x 255 */
#define VPC_MAX_GEOMETRY        (INT64_C(65535) * 16 * 255)
/* QEMU's limit on a disk: 2040 GiB */
#define VPC_MAX_SECTORS         INT64_C(0xff000000)
/* QEMU's limit on the BAT: INT_MAX / 4 entries */
#define VPC_MAX_BAT_ENTRIES     (INT32_MAX / 4)

/* The footer (and its copy at offset 0 of a dynamic disk); big-endian. */
typedef struct QEMU_PACKED VpcFooter {
    char cookie[8];
    uint32_t features;
    uint32_t version;
    uint64_t data_offset;       /* the dynamic header; fixed: all ones */
    uint32_t timestamp;
    char creator_app[4];
    uint32_t creator_version;
    char creator_os[4];
    uint64_t orig_size;
    uint64_t current_size;
    uint16_t cylinders;
    uint8_t heads;
    uint8_t sectors_per_track;
    uint32_t type;
    uint32_t checksum;
    uint8_t uuid[16];
    uint8_t saved_state;
    uint8_t reserved[427];
} VpcFooter;
_Static_assert(sizeof(VpcFooter) == VPC_FOOTER_SIZE, "a footer is a sector");

/* The dynamic disk header; big-endian. */
typedef struct QEMU_PACKED VpcDynHeader {
    char cookie[8];
    uint64_t data_offset;       /* unused: all ones */
    uint64_t table_offset;      /* the BAT */
    uint32_t version;
    uint32_t max_table_entries;
    uint32_t block_size;
    uint32_t checksum;
    uint8_t parent_uuid[16];
    uint32_t parent_timestamp;
    uint32_t reserved;
    uint8_t parent_name[512];
    uint8_t parent_locators[8][24];
    uint8_t reserved2[256];
} VpcDynHeader;
_Static_assert(sizeof(VpcDynHeader) == VPC_DYN_HEADER_SIZE, "a dynamic "
               "header is two sectors");

typedef struct BDRVVpcState {
    /* immutable after open (invariant 1) */
    VpcFooter footer;           /* as read, rewritten verbatim */
    bool fixed;
    /* force_size_calc: the geometry (chs), the byte count (current_size) */
    bool force_chs;
    bool force_current_size;
    uint64_t disk_size;         /* bytes, a multiple of the sector */
    uint64_t fixed_data_end;    /* fixed: where the footer lies */
    uint64_t bat_offset;
    uint32_t bat_entries;
    uint64_t block_size;
    uint64_t bitmap_size;       /* bytes before each block's data */
    /* invariant 2: under lock */
    CoMutex lock;
    uint32_t *bat;              /* host-endian sector offsets */
    uint64_t free_offset;       /* where the next block goes */
    uint64_t last_bitmap;       /* the bitmap last set to all ones */
} BDRVVpcState;

uint32_t vpc_checksum(const void *buf, size_t len);
void vpc_geometry(int64_t sectors, uint16_t *cylinders, uint8_t *heads,
                  uint8_t *sectors_per_track);
/* The file offset of disk byte @offset; 0 where the block is not allocated */
uint64_t vpc_block_offset(BDRVVpcState *s, uint64_t offset);

/* block/vpc-write.c */
int coroutine_fn vpc_co_pwritev(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags);

/* block/vpc-create.c */
int coroutine_fn vpc_co_create_opts(const BlockDriver *drv,
                                    const char *filename, QemuOpts *opts,
                                    Error **errp);
int coroutine_fn vpc_co_create_on_node(const BlockDriver *drv,
                                       const BdrvCreateTarget *tgt,
                                       QemuOpts *opts, Error **errp);

#endif
