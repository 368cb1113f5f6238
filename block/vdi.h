/*
 * The vdi driver's shared state: what block/vdi.c (opening, reading,
 * block status, check), block/vdi-write.c (block allocation) and
 * block/vdi-create.c (creation) know of a VirtualBox disk image.  The
 * invariants are block/vdi.c's.
 */
#ifndef BLOCK_VDI_H
#define BLOCK_VDI_H

#include "block/block_int.h"

#define VDI_SECTOR              512
#define VDI_SIGNATURE           0xbeda107fu
#define VDI_VERSION_1_1         0x00010001u
#define VDI_HEADER_SIZE_1_1     0x180u
#define VDI_TYPE_DYNAMIC        1u
#define VDI_TYPE_STATIC         2u
#define VDI_BLOCK_SIZE          (1u << 20)
/* block map entries that are no block index */
#define VDI_UNALLOCATED         0xffffffffu
#define VDI_DISCARDED           0xfffffffeu
#define VDI_IS_ALLOCATED(entry) ((entry) < VDI_DISCARDED)
/* QEMU's limit: a block map of at most 2 GiB less a sector */
#define VDI_BLOCKS_IN_IMAGE_MAX \
    ((uint32_t)((INT32_MAX & ~(VDI_SECTOR - 1)) / sizeof(uint32_t)))
#define VDI_DISK_SIZE_MAX \
    ((uint64_t)VDI_BLOCKS_IN_IMAGE_MAX * VDI_BLOCK_SIZE)
#define VDI_TEXT                "<<< QEMU VM Virtual Disk Image >>>\n"

/* The first sector of the file: pre-header and header version 1.1. */
typedef struct QEMU_PACKED VdiHeader {
    char text[0x40];
    uint32_t signature;
    uint32_t version;
    uint32_t header_size;
    uint32_t image_type;
    uint32_t image_flags;
    char description[256];
    uint32_t offset_bmap;
    uint32_t offset_data;
    uint32_t cylinders;         /* legacy geometry, unused */
    uint32_t heads;
    uint32_t sectors;
    uint32_t sector_size;
    uint32_t unused1;
    uint64_t disk_size;
    uint32_t block_size;
    uint32_t block_extra;
    uint32_t blocks_in_image;
    uint32_t blocks_allocated;
    uint8_t uuid_image[16];
    uint8_t uuid_last_snap[16]; /* VirtualBox: the modification UUID */
    uint8_t uuid_link[16];
    uint8_t uuid_parent[16];
    uint64_t unused2[7];
} VdiHeader;
_Static_assert(sizeof(VdiHeader) == VDI_SECTOR, "the header is a sector");

typedef struct BDRVVdiState {
    /* the header as read, little-endian; only blocks_allocated changes */
    VdiHeader header;
    /* little-endian, as in the file: the sectors of the map the file held */
    uint32_t *bmap;
    uint32_t bmap_entries;      /* in bmap; the rest read as 0 (inv. 1) */
    uint32_t blocks_in_image;
    uint32_t blocks_allocated;
    uint64_t bmap_offset;
    uint64_t bmap_bytes;        /* whole sectors */
    uint64_t data_offset;
    uint64_t disk_size;         /* rounded up to a sector, as QEMU does */
    bool is_static;
    /* invariant 3: allocation and the block map's writes */
    CoMutex alloc_lock;
} BDRVVdiState;

/* The block map's entry for @block (inv. 1: the map past the file's end
 * reads as zeroes, as QEMU's whole-map read of it gives). */
static inline uint32_t vdi_entry(const BDRVVdiState *s, uint64_t block)
{
    assert(block < s->blocks_in_image);
    return block < s->bmap_entries ? GUINT32_FROM_LE(s->bmap[block]) : 0;
}

/* block/vdi-write.c */
int vdi_check_writable(BlockDriverState *bs, Error **errp);
int coroutine_fn vdi_co_pwritev(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags);
int vdi_has_zero_init(BlockDriverState *bs);

/* block/vdi-create.c */
int coroutine_fn vdi_co_create_opts(const BlockDriver *drv,
                                    const char *filename, QemuOpts *opts,
                                    Error **errp);
int coroutine_fn vdi_co_create_on_node(const BlockDriver *drv,
                                       const BdrvCreateTarget *tgt,
                                       QemuOpts *opts, Error **errp);
/* A random UUID in the GUID byte order VirtualBox stores. */
void vdi_random_uuid(uint8_t uuid[16]);

#endif
