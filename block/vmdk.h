/*
 * The vmdk driver's shared state: what block/vmdk.c (opening, reading),
 * block/vmdk-write.c (grain allocation) and block/vmdk-create.c
 * (creation) know of an image.  The invariants are block/vmdk.c's.
 */
#ifndef BLOCK_VMDK_H
#define BLOCK_VMDK_H

#include "block/block_int.h"

#define VMDK_SECTOR             512
#define VMDK4_MAGIC             0x564d444bu     /* "KDMV" read LE */
#define VMDK3_MAGIC             0x44574f43u     /* "COWD": ESX sparse */
#define VMDK4_FLAG_NL_DETECT   (1u << 0)
#define VMDK4_FLAG_RGD          (1u << 1)
#define VMDK4_FLAG_ZEROED_GRAIN (1u << 2)
#define VMDK4_FLAG_COMPRESS     (1u << 16)
#define VMDK4_FLAG_MARKER       (1u << 17)
#define VMDK4_COMPRESS_DEFLATE  1
#define VMDK_GD_AT_END          UINT64_C(0xffffffffffffffff)
#define VMDK_GTE_ZEROED         1u
/* QEMU's limits: grains of at most 1 MiB, tables of 512 entries */
#define VMDK_MAX_GRAIN_SECTORS  2048
#define VMDK_MAX_GTES           512
/* QEMU's: grains of at most 1 GiB (qblock reads up to 1 MiB) */
#define VMDK_QEMU_MAX_GRAIN_SECTORS 0x200000
/* QEMU's: a grain directory of at most 2^25 entries (128 MiB) */
#define VMDK_MAX_GD_ENTRIES     (1u << 25)
/* a descriptor of at most 1 MiB */
#define VMDK_MAX_DESCRIPTOR     (1u << 20)
#define VMDK_MAX_EXTENTS        1024
/* a stream-optimized grain: marker, deflated data */
#define VMDK_MARKER_SIZE        12
/*
 * An ESX sparse extent ("COWD", VMFSSPARSE): a header of 4 sectors,
 * grain tables of a fixed 4096 entries (VMware's specification; QEMU
 * reads them so).  As QEMU reads it, a standalone one has descriptor
 * text at sector 1 (inside the header's parent name), of at most
 * 20 sectors.
 */
#define VMDK3_HEADER_SECTORS    4
#define VMDK3_GTES              4096
#define VMDK3_DESC_OFFSET       VMDK_SECTOR
#define VMDK3_DESC_SIZE         (20 * VMDK_SECTOR)

typedef struct QEMU_PACKED VMDK4Header {
    uint32_t magic;
    uint32_t version;
    uint32_t flags;
    uint64_t capacity;
    uint64_t grain_size;
    uint64_t desc_offset;
    uint64_t desc_size;
    uint32_t num_gtes_per_gt;
    uint64_t rgd_offset;
    uint64_t gd_offset;
    uint64_t grain_offset;
    uint8_t unclean_shutdown;
    char check_bytes[4];
    uint16_t compress_algorithm;
    uint8_t pad[433];
} VMDK4Header;
_Static_assert(sizeof(VMDK4Header) == VMDK_SECTOR, "a sparse header is a "
               "sector");

/* The fields of an ESX sparse extent's header that are read. */
typedef struct QEMU_PACKED VMDK3Header {
    uint32_t magic;
    uint32_t version;
    uint32_t flags;
    uint32_t num_sectors;       /* the extent's size */
    uint32_t grain_size;        /* sectors */
    uint32_t gd_offset;         /* sector */
    uint32_t num_gd_entries;
    uint32_t free_sector;       /* VMware's allocation point; not used */
} VMDK3Header;
_Static_assert(sizeof(VMDK3Header) == 32, "the COWD header's first fields");

typedef enum VmdkExtentType {
    VMDK_FLAT,
    VMDK_SPARSE,
    VMDK_ZERO,
} VmdkExtentType;

typedef struct VmdkExtent {
    VmdkExtentType type;
    char *type_name;            /* as the descriptor says; "" monolithic */
    BdrvChild *file;            /* NULL for ZERO */
    bool own_file;              /* a child of its own, not bs->file */
    uint64_t sectors;
    uint64_t end_sector;        /* in the disk, exclusive */
    uint64_t flat_offset;       /* FLAT: bytes into the file */
    /* --- SPARSE --- */
    bool cowd;                  /* ESX's ("COWD"), not hosted ("KDMV") */
    uint64_t header_sectors;    /* 1 (hosted), VMDK3_HEADER_SECTORS */
    uint64_t grain_sectors;
    uint32_t gtes;              /* entries per grain table */
    uint32_t gd_entries;        /* invariant 1: COWD's may be too few */
    uint64_t gd_sector;         /* where the directory lies in the file */
    uint64_t rgd_sector;        /* the redundant one's; 0: none */
    uint64_t data_start;        /* the header's first grain sector, >= 1 */
    uint64_t desc_sector;       /* the embedded descriptor's room */
    uint64_t desc_sectors;
    bool compressed;
    bool zeroed_grain;
    bool gd_in_footer;          /* VMware's stream layout: read-only */
    /* invariant 2 */
    CoMutex lock;
    uint32_t *gd;               /* host-endian sector offsets */
    uint32_t *rgd;              /* the redundant directory; NULL: none */
    uint32_t *gt;
    int64_t gt_index;           /* of the cached table; -1: none */
    bool alloc_ready;           /* next_sector and rgd are read */
    uint64_t next_sector;       /* where the next grain goes */
    uint64_t last_grain;        /* compressed: the last one written; 0 */
} VmdkExtent;

typedef struct BDRVVmdkState {
    VmdkExtent *extents;
    unsigned int nextents;
    uint64_t sectors;
    /* the descriptor's, for qemu-img info */
    char *create_type;
    uint32_t cid;
    uint32_t parent_cid;
    /* the descriptor as read; where it lies in bs->file, room for it */
    char *desc;
    uint64_t desc_offset;
    uint64_t desc_room;
    bool parent_cid_reported;
    /* the first write after open gives the content a new CID */
    CoMutex cid_lock;
    bool cid_updated;
} BDRVVmdkState;

/* What a range of the disk is, in its extent. */
typedef enum VmdkMapKind {
    VMDK_MAP_UNALLOCATED,       /* never written: reads as zeroes */
    VMDK_MAP_ZERO,              /* a ZERO extent or a zeroed grain */
    VMDK_MAP_DATA,              /* at a byte offset of e->file */
    VMDK_MAP_COMPRESSED,        /* in a compressed grain */
    VMDK_MAP_BEYOND_GD,         /* past a COWD directory's last entry */
} VmdkMapKind;

typedef struct VmdkMap {
    VmdkMapKind kind;
    VmdkExtent *e;
    uint64_t extent_start;      /* the extent's first disk sector */
    uint64_t offset;            /* DATA: in e->file; COMPRESSED: grain's */
    uint64_t grain_sector;      /* SPARSE: the grain's first, in e */
    uint64_t in_grain;          /* SPARSE: bytes into the grain */
} VmdkMap;

int64_t coroutine_fn vmdk_map(BDRVVmdkState *s, int64_t offset,
                              int64_t bytes, VmdkMap *m);
int64_t coroutine_fn vmdk_grain_locked(VmdkExtent *e, uint64_t sector);
int coroutine_fn vmdk_co_pread(BdrvChild *child, int64_t offset,
                               int64_t bytes, void *buf);
/* @bytes of @qiov from @done, read from or written to @offset of @file */
int coroutine_fn vmdk_co_file_io(BdrvChild *file, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 size_t done, bool write);
int vmdk_check_parent_cid(BlockDriverState *bs);
VmdkExtent *vmdk_add_extent(BDRVVmdkState *s, VmdkExtentType type,
                            const char *type_name, uint64_t sectors,
                            Error **errp);
char *vmdk_read_desc(BlockDriverState *bs, uint64_t offset, uint64_t size,
                     Error **errp);
int vmdk_read_gd(VmdkExtent *e, int64_t file_size, Error **errp);
/* The bytes of the disk a grain holds: a whole one, or the extent's rest. */
uint64_t vmdk_grain_bytes(const VmdkExtent *e, uint64_t grain_sector);

/*
 * Whether a grain table entry (or vmdk_grain_locked()'s result) @at
 * means a zeroed grain: in a hosted extent (where, without the
 * zeroed-grain flag, vmdk_grain_locked() refuses it); in an ESX one, as
 * in QEMU, it is a grain at sector 1.
 */
static inline bool vmdk_is_zeroed(const VmdkExtent *e, int64_t at)
{
    return at == VMDK_GTE_ZEROED && !e->cowd;
}

/* block/vmdk-cowd.c */
int vmdk_cowd_open(VmdkExtent *e, const VMDK3Header *h, Error **errp);
int vmdk_cowd_open_alone(BlockDriverState *bs, const VMDK3Header *h,
                         Error **errp);

/* block/vmdk-write.c */
int vmdk_check_writable(BDRVVmdkState *s, Error **errp);
void vmdk_close_writable(BDRVVmdkState *s);
int coroutine_fn vmdk_co_pwritev(BlockDriverState *bs, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags);
int coroutine_fn vmdk_co_pwritev_compressed(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov);
int coroutine_fn vmdk_co_pwrite_zeroes(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes,
                                       BdrvRequestFlags flags);
int vmdk_has_zero_init(BlockDriverState *bs);

/* block/vmdk-create.c */
int coroutine_fn vmdk_co_create_opts(const BlockDriver *drv,
                                     const char *filename, QemuOpts *opts,
                                     Error **errp);
int coroutine_fn vmdk_co_create_on_node(const BlockDriver *drv,
                                        const BdrvCreateTarget *tgt,
                                        QemuOpts *opts, Error **errp);

#endif
