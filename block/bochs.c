/*
 * bochs: the read-only format driver for Bochs' growing disk images
 * ("redolog" images of type "Growing", versions 1 and 2).
 *
 * The file is a 512-byte header, a catalog of 32-bit little-endian entries
 * (one per extent of the disk, 0xffffffff for an extent never written),
 * then the extents in the order they were first written.  Each extent in
 * the file is a bitmap (one bit per 512-byte sector, least significant bit
 * first) followed by the extent's sectors; a sector whose bit is clear
 * reads as zeroes.  Version 1 headers lack the reserved word before the
 * disk size.
 *
 * Invariants:
 *  1. After open the state is immutable (reads only read it), the catalog
 *     covers the whole disk (catalog_size * extent_size >= disk size) and
 *     extent_size is a power of two in [512, 8 MiB]: every sector of the
 *     disk has a catalog entry, and the offsets computed from an entry fit
 *     in 64 bits whatever the entry says.
 *  2. The node is never writable: open refuses read-write unless
 *     auto-read-only lets it fall back, as QEMU does.
 */
#include "block/block_int.h"

#define BOCHS_MAGIC             "Bochs Virtual HD Image"
#define BOCHS_TYPE_REDOLOG      "Redolog"
#define BOCHS_SUBTYPE_GROWING   "Growing"
#define BOCHS_VERSION_1         0x00010000
#define BOCHS_VERSION_2         0x00020000
#define BOCHS_UNALLOCATED       0xffffffffu
#define BOCHS_SECTOR            512
/* QEMU's limits: a 4 MiB catalog, 8 MiB extents */
#define BOCHS_MAX_CATALOG       (1u << 20)
#define BOCHS_MAX_EXTENT        (8u << 20)

typedef struct QEMU_PACKED BochsHeader {
    char magic[32];
    char type[16];
    char subtype[16];
    uint32_t version;
    uint32_t header_size;
    uint32_t catalog;
    uint32_t bitmap;
    uint32_t extent;
    union {
        struct QEMU_PACKED {
            uint32_t reserved;
            uint64_t disk;
        } v2;
        struct QEMU_PACKED {
            uint64_t disk;
        } v1;
    };
    uint8_t padding[512 - 96];
} BochsHeader;
_Static_assert(sizeof(BochsHeader) == 512, "bochs header");

typedef struct BDRVBochsState {
    uint32_t *catalog;          /* host-endian */
    uint32_t catalog_size;
    uint64_t data_offset;       /* of the first extent in the file */
    uint64_t bitmap_sectors;    /* per extent in the file */
    uint64_t extent_sectors;
    uint64_t disk_size;
} BDRVBochsState;

static int bochs_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    const BochsHeader *h = (const BochsHeader *)buf;
    uint32_t version;

    if (buf_size < (int)sizeof(*h)) {
        return 0;
    }
    version = GUINT32_FROM_LE(h->version);
    if (!strcmp(h->magic, BOCHS_MAGIC) &&
        !strcmp(h->type, BOCHS_TYPE_REDOLOG) &&
        !strcmp(h->subtype, BOCHS_SUBTYPE_GROWING) &&
        (version == BOCHS_VERSION_1 || version == BOCHS_VERSION_2)) {
        return 100;
    }
    return 0;
}

/* Checks the header's sizes (bochs.c inv. 1), with QEMU's messages. */
static int bochs_check_header(BDRVBochsState *s, uint32_t extent,
                              Error **errp)
{
    if (s->catalog_size > BOCHS_MAX_CATALOG) {
        error_setg(errp, "Catalog size is too large");
        return -EFBIG;
    }
    if (extent < BOCHS_SECTOR) {
        error_setg(errp, "Extent size must be at least 512");
        return -EINVAL;
    }
    if (extent & (extent - 1)) {
        error_setg(errp, "Extent size %" PRIu32 " is not a power of two",
                   extent);
        return -EINVAL;
    }
    if (extent > BOCHS_MAX_EXTENT) {
        error_setg(errp, "Extent size %" PRIu32 " is too large", extent);
        return -EINVAL;
    }
    if (s->disk_size > (uint64_t)s->catalog_size * extent) {
        error_setg(errp, "Catalog size is too small for this disk size");
        return -EINVAL;
    }
    return 0;
}

static int bochs_open(BlockDriverState *bs, QDict *options, int flags,
                      Error **errp)
{
    BDRVBochsState *s = bs->opaque;
    BochsHeader h;
    uint32_t extent, bitmap;
    int ret;

    /* bochs.c inv. 2 */
    ret = bdrv_open_read_only_format(bs, options, flags, errp);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_pread(bs->file, 0, sizeof(h), &h, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the bochs header");
        return ret;
    }
    if (!bochs_probe((const uint8_t *)&h, sizeof(h), NULL)) {
        error_setg(errp, "Image not in Bochs format");
        return -EINVAL;
    }
    s->disk_size = GUINT64_FROM_LE(GUINT32_FROM_LE(h.version) ==
                                   BOCHS_VERSION_1 ? h.v1.disk : h.v2.disk);
    s->catalog_size = GUINT32_FROM_LE(h.catalog);
    extent = GUINT32_FROM_LE(h.extent);
    bitmap = GUINT32_FROM_LE(h.bitmap);
    ret = bochs_check_header(s, extent, errp);
    if (ret < 0) {
        return ret;
    }
    if (s->disk_size > INT64_MAX) {
        error_setg(errp, "Disk size %" PRIu64 " is too large", s->disk_size);
        return -EFBIG;
    }
    s->extent_sectors = extent / BOCHS_SECTOR;
    /* the sectors a bitmap of that size takes, QEMU's way (0: 2^23) */
    s->bitmap_sectors = 1 + (uint32_t)(bitmap - 1) / BOCHS_SECTOR;
    s->data_offset = GUINT32_FROM_LE(h.header_size) +
                     (uint64_t)s->catalog_size * sizeof(uint32_t);

    s->catalog = g_try_new(uint32_t, s->catalog_size ? s->catalog_size : 1);
    if (!s->catalog) {
        error_setg(errp, "Could not allocate the catalog of %" PRIu32
                   " entries", s->catalog_size);
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, GUINT32_FROM_LE(h.header_size),
                     (int64_t)s->catalog_size * sizeof(uint32_t), s->catalog,
                     0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the bochs catalog");
        g_clear_pointer(&s->catalog, g_free);
        return ret;
    }
    for (uint32_t i = 0; i < s->catalog_size; i++) {
        s->catalog[i] = GUINT32_FROM_LE(s->catalog[i]);
    }
    return 0;
}

static void bochs_close(BlockDriverState *bs)
{
    BDRVBochsState *s = bs->opaque;

    g_clear_pointer(&s->catalog, g_free);
}

/*
 * The file offset of disk sector @sector, or 0 if it reads as zeroes
 * (its extent was never written, or its bitmap bit is clear).
 */
static int64_t coroutine_fn bochs_sector_offset(BlockDriverState *bs,
                                                uint64_t sector)
{
    BDRVBochsState *s = bs->opaque;
    uint64_t index = sector / s->extent_sectors;
    uint64_t in_extent = sector % s->extent_sectors;
    uint64_t bitmap_offset, entry, sectors;
    uint8_t bits;
    int ret;

    /* bochs.c inv. 1: every sector of the disk has an entry */
    assert(index < s->catalog_size);
    entry = s->catalog[index];
    if (entry == BOCHS_UNALLOCATED) {
        return 0;
    }
    /* a hostile entry or bitmap size may put the extent past 2^63 */
    if (__builtin_mul_overflow(entry, s->bitmap_sectors + s->extent_sectors,
                               &sectors) ||
        __builtin_mul_overflow(sectors, BOCHS_SECTOR, &bitmap_offset) ||
        __builtin_add_overflow(bitmap_offset, s->data_offset,
                               &bitmap_offset) ||
        bitmap_offset > INT64_MAX - BOCHS_SECTOR *
                        (s->bitmap_sectors + s->extent_sectors)) {
        error_report("bochs: catalog entry %" PRIu64 " (%" PRIu64 ") puts "
                     "its extent past the largest file offset", index, entry);
        return -EIO;
    }
    ret = bdrv_pread(bs->file, bitmap_offset + in_extent / 8, 1, &bits, 0);
    if (ret < 0) {
        return ret;
    }
    if (!((bits >> (in_extent % 8)) & 1)) {
        return 0;
    }
    return bitmap_offset + BOCHS_SECTOR * (s->bitmap_sectors + in_extent);
}

/* The map bdrv_co_preadv_mapped() reads by: a sector at a time. */
static int64_t coroutine_fn bochs_piece(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, int64_t *host)
{
    int64_t at = bochs_sector_offset(bs, offset / BOCHS_SECTOR);

    if (at < 0) {
        return at;
    }
    *host = at ? at : -1;
    return BOCHS_SECTOR;
}

static int coroutine_fn bochs_co_preadv(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    /* request_alignment is a sector: whole sectors only */
    assert(QEMU_IS_ALIGNED(offset | bytes, BOCHS_SECTOR));
    return bdrv_co_preadv_mapped(bs, offset, bytes, qiov, bochs_piece);
}

static int64_t bochs_getlength(BlockDriverState *bs)
{
    BDRVBochsState *s = bs->opaque;

    return s->disk_size;
}

static const BlockDriver bdrv_bochs = {
    .format_name                    = "bochs",
    .instance_size                  = sizeof(BDRVBochsState),
    .is_format                      = true,
    .bdrv_probe                     = bochs_probe,
    .bdrv_open                      = bochs_open,
    .bdrv_close                     = bochs_close,
    .bdrv_co_preadv                 = bochs_co_preadv,
    .bdrv_getlength                 = bochs_getlength,
    .request_alignment              = BOCHS_SECTOR,
};

block_init(bdrv_register, bdrv_bochs)
