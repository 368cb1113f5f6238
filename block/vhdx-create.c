/*
 * vhdx creation, as qemu-img create -f vhdx writes it: the file
 * identifier with the creator "QEMU v7.2.0" (UTF-16); both headers (a
 * random sequence number, the second one above it, the same file and
 * data write GUIDs); both region tables, the same; the log at 1 MiB; the
 * BAT right after it, its length rounded up to 1 MiB; the metadata region
 * (1 MiB) after the BAT, its five items at 64 KiB into it; payload blocks
 * from the metadata region's start plus 5 MiB, where QEMU puts them.
 * GUIDs and the sequence number are random, as in QEMU; everything else
 * is fixed by the options.
 */
#include "block/vhdx.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"
#include "qblock/block-node.h"
#include "util/crc32c.h"

#define VHDX_CREATOR            "QEMU v7.2.0"
#define VHDX_LOG_OFFSET         VHDX_MIB
#define VHDX_DEFAULT_LOG_SIZE   VHDX_MIB
#define VHDX_METADATA_LENGTH    VHDX_MIB
/* where QEMU's payload blocks start, from the metadata region's */
#define VHDX_PAYLOAD_FROM_METADATA (5 * VHDX_MIB)
#define VHDX_METADATA_ITEMS_AT  (64 * 1024)

typedef struct VhdxCreate {
    uint64_t size;
    uint64_t log_size;
    uint64_t block_size;
    bool fixed;
    bool zero_blocks;
    /* the layout */
    uint64_t bat_offset;
    uint64_t bat_length;
    uint64_t bat_entries;
    uint64_t metadata_offset;
    uint64_t data_offset;
} VhdxCreate;

/* The option checks, in QEMU's order and with its messages. */
static int vhdx_create_check(VhdxCreate *c, Error **errp)
{
    if (c->size > VHDX_MAX_DISK_SIZE) {
        error_setg(errp, "Image size too large; max of 64TB");
        return -EINVAL;
    }
    if (c->log_size > UINT32_MAX) {
        error_setg(errp, "Log size must be smaller than 4 GB");
        return -EINVAL;
    }
    if (c->log_size < VHDX_MIB || c->log_size % VHDX_MIB) {
        error_setg(errp, "Log size must be a multiple of 1 MB");
        return -EINVAL;
    }
    if (!c->block_size) {
        /* QEMU's choice by size: a BAT of a reasonable size */
        c->block_size = c->size > (UINT64_C(32) << 40) ? 64 * VHDX_MIB :
                        c->size > (UINT64_C(100) << 30) ? 32 * VHDX_MIB :
                        c->size > (UINT64_C(1) << 30) ? 16 * VHDX_MIB :
                        8 * VHDX_MIB;
    }
    if (c->block_size < VHDX_MIB || c->block_size % VHDX_MIB) {
        error_setg(errp, "Block size must be a multiple of 1 MB");
        return -EINVAL;
    }
    if (c->block_size & (c->block_size - 1)) {
        error_setg(errp, "Block size must be a power of two");
        return -EINVAL;
    }
    if (c->block_size > VHDX_BLOCK_SIZE_MAX) {
        error_setg(errp, "Block size must not exceed %" PRIu32,
                   VHDX_BLOCK_SIZE_MAX);
        return -EINVAL;
    }
    return 0;
}

/* The layout, as QEMU computes it (its 32-bit count included). */
static void vhdx_create_layout(VhdxCreate *c)
{
    uint32_t chunk_ratio = VHDX_SECTORS_PER_BITMAP * VHDX_SECTOR /
                           c->block_size;
    uint32_t data_blocks = DIV_ROUND_UP(c->size, c->block_size);

    /*
     * QEMU counts in 32 bits: an empty disk gets a BAT of 2^32 - 1 over
     * chunk_ratio entries, which its files (and so qblock's) carry.
     * 64 TiB of 1 MiB blocks is 2^26 blocks: no overflow otherwise.
     */
    c->bat_entries = data_blocks + (uint32_t)(data_blocks - 1) / chunk_ratio;
    c->bat_offset = VHDX_LOG_OFFSET + c->log_size;
    c->bat_length = ROUND_UP(c->bat_entries * sizeof(uint64_t), VHDX_MIB);
    c->metadata_offset = c->bat_offset + c->bat_length;
    c->data_offset = c->metadata_offset + VHDX_PAYLOAD_FROM_METADATA;
}

static int vhdx_create_pwrite(BlockBackend *blk, uint64_t offset,
                              uint64_t bytes, const void *buf,
                              const char *what, Error **errp)
{
    int ret = blk_pwrite(blk, offset, bytes, buf, 0);

    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not write the VHDX %s", what);
    }
    return ret;
}

/* Puts the CRC-32C of @size bytes at 4, the field taken as zero. */
static void vhdx_create_crc(uint8_t *buf, size_t size)
{
    uint32_t crc;

    memset(buf + 4, 0, 4);
    crc = GUINT32_TO_LE(crc32c(0, buf, size));
    memcpy(buf + 4, &crc, 4);
}

/* The file identifier and both headers. */
static int vhdx_create_headers(BlockBackend *blk, const VhdxCreate *c,
                               Error **errp)
{
    g_autofree uint8_t *buf = g_malloc0(VHDX_HEADER_SIZE);
    const char *creator = VHDX_CREATOR;
    uint64_t seq = g_random_int();
    VhdxHeader h = {
        .signature = "head",
        .version = GUINT16_TO_LE(1),
        .log_length = GUINT32_TO_LE(c->log_size),
        .log_offset = GUINT64_TO_LE(VHDX_LOG_OFFSET),
    };
    int ret;

    /* the identifier: the signature, the creator in UTF-16LE (ASCII) */
    memcpy(buf, VHDX_FILE_SIGNATURE, 8);
    for (size_t i = 0; creator[i]; i++) {
        buf[8 + 2 * i] = creator[i];
    }
    ret = vhdx_create_pwrite(blk, 0, 8 + 2 * strlen(creator), buf,
                             "file identifier", errp);
    vhdx_random_guid(h.file_write_guid);
    vhdx_random_guid(h.data_write_guid);
    for (int slot = 0; slot < 2 && ret >= 0; slot++) {
        h.sequence_number = GUINT64_TO_LE(seq + slot);
        memset(buf, 0, VHDX_HEADER_SIZE);
        memcpy(buf, &h, sizeof(h));
        vhdx_create_crc(buf, VHDX_HEADER_SIZE);
        ret = vhdx_create_pwrite(blk, slot ? VHDX_HEADER2_OFFSET
                                           : VHDX_HEADER1_OFFSET,
                                 VHDX_HEADER_SIZE, buf, "header", errp);
    }
    return ret;
}

/* Both region tables: the BAT, then the metadata region. */
static int vhdx_create_regions(BlockBackend *blk, const VhdxCreate *c,
                               Error **errp)
{
    g_autofree uint8_t *buf = g_malloc0(VHDX_REGION_TABLE_SIZE);
    VhdxRegionTableHeader th = {
        .signature = "regi",
        .entry_count = GUINT32_TO_LE(2),
    };
    VhdxRegionEntry e[2] = {
        { .file_offset = GUINT64_TO_LE(c->bat_offset),
          .length = GUINT32_TO_LE(c->bat_length) },
        { .file_offset = GUINT64_TO_LE(c->metadata_offset),
          .length = GUINT32_TO_LE(VHDX_METADATA_LENGTH) },
    };
    int ret = 0;

    memcpy(e[0].guid, vhdx_bat_guid, 16);
    memcpy(e[1].guid, vhdx_metadata_guid, 16);
    memcpy(buf, &th, sizeof(th));
    memcpy(buf + sizeof(th), e, sizeof(e));
    vhdx_create_crc(buf, VHDX_REGION_TABLE_SIZE);
    for (int i = 0; i < 2 && ret >= 0; i++) {
        ret = vhdx_create_pwrite(blk, i ? VHDX_REGION2_OFFSET
                                        : VHDX_REGION1_OFFSET,
                                 VHDX_REGION_TABLE_SIZE, buf,
                                 "region table", errp);
    }
    return ret;
}

/* The metadata table and its five items, in QEMU's order. */
static int vhdx_create_metadata(BlockBackend *blk, const VhdxCreate *c,
                                Error **errp)
{
    /* flags: bit 1 virtual disk, bit 2 required */
    static const uint32_t flags[VHDX_ITEM_PARENT_LOCATOR] = { 4, 6, 6, 6, 6 };
    g_autofree uint8_t *buf = g_malloc0(VHDX_METADATA_ITEMS_AT + 64);
    uint8_t *items = buf + VHDX_METADATA_ITEMS_AT;
    VhdxMetadataTableHeader th = {
        .signature = "metadata",
        .entry_count = GUINT16_TO_LE(VHDX_ITEM_PARENT_LOCATOR),
    };
    uint32_t params[2] = {
        GUINT32_TO_LE(c->block_size),
        GUINT32_TO_LE(c->fixed ? VHDX_PARAMS_LEAVE_BLOCKS_ALLOCATED : 0),
    };
    uint64_t size = GUINT64_TO_LE(c->size);
    uint32_t sector = GUINT32_TO_LE(VHDX_SECTOR);
    uint32_t at = 0;

    memcpy(buf, &th, sizeof(th));
    for (int i = 0; i < VHDX_ITEM_PARENT_LOCATOR; i++) {
        VhdxMetadataEntry e = {
            .offset = GUINT32_TO_LE(VHDX_METADATA_ITEMS_AT + at),
            .length = GUINT32_TO_LE(vhdx_items[i].size),
            .flags = GUINT32_TO_LE(flags[i]),
        };

        memcpy(e.item_id, vhdx_items[i].guid, 16);
        memcpy(buf + sizeof(th) + i * sizeof(e), &e, sizeof(e));
        at += vhdx_items[i].size;
    }
    memcpy(items, params, 8);
    memcpy(items + 8, &size, 8);
    vhdx_random_guid(items + 16);       /* page 83 data */
    memcpy(items + 32, &sector, 4);     /* logical */
    memcpy(items + 36, &sector, 4);     /* physical: QEMU says 512 */
    return vhdx_create_pwrite(blk, c->metadata_offset,
                              VHDX_METADATA_ITEMS_AT + at, buf, "metadata",
                              errp);
}

/*
 * The BAT, written where an entry is not 0: every block ZERO with
 * block_state_zero, a fixed image's blocks in order without it.
 */
static int vhdx_create_bat(BlockBackend *blk, const VhdxCreate *c,
                           Error **errp)
{
    uint32_t chunk_ratio = VHDX_SECTORS_PER_BITMAP * VHDX_SECTOR /
                           c->block_size;
    const uint64_t per_chunk = VHDX_MIB / sizeof(uint64_t);
    g_autofree uint64_t *bat = g_malloc(VHDX_MIB);
    uint64_t block = 0;

    if (!c->fixed && !c->zero_blocks) {
        return 0;
    }
    /* a MiB at a time: 64 TiB of 1 MiB blocks has a 512 MiB BAT */
    for (uint64_t first = 0; first * sizeof(uint64_t) < c->bat_length;
         first += per_chunk) {
        int ret;

        memset(bat, 0, VHDX_MIB);
        for (uint64_t i = first; i < first + per_chunk &&
             block * c->block_size < c->size; i++) {
            if ((i + 1) % (chunk_ratio + 1) == 0) {
                continue;   /* a sector bitmap entry stays 0 */
            }
            bat[i - first] = GUINT64_TO_LE(c->zero_blocks ? VHDX_BLOCK_ZERO :
                                  (c->data_offset + block * c->block_size) |
                                  VHDX_BLOCK_FULLY_PRESENT);
            block++;
        }
        ret = vhdx_create_pwrite(blk, c->bat_offset +
                                 first * sizeof(uint64_t), VHDX_MIB, bat,
                                 "BAT", errp);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

/* Checks the options, then writes the image on @blk, emptied first. */
static int vhdx_create_on(BlockBackend *blk, VhdxCreate *c, Error **errp)
{
    int ret = vhdx_create_check(c, errp);

    if (ret < 0) {
        return ret;
    }
    vhdx_create_layout(c);
    ret = blk_truncate(blk, 0, false, PREALLOC_MODE_OFF, 0, errp);
    if (ret < 0 ||
        (ret = vhdx_create_headers(blk, c, errp)) < 0 ||
        (ret = vhdx_create_regions(blk, c, errp)) < 0 ||
        (ret = vhdx_create_metadata(blk, c, errp)) < 0) {
        return ret;
    }
    ret = blk_truncate(blk, c->data_offset + (c->fixed ? c->size : 0), false,
                       PREALLOC_MODE_OFF, 0, errp);
    return ret < 0 ? ret : vhdx_create_bat(blk, c, errp);
}

/* The subformat and block_state_zero, as both paths name them. */
static int vhdx_create_parse(VhdxCreate *c, QemuOpts *opts, Error **errp)
{
    int fixed = bdrv_create_opt_fixed(opts, errp);

    if (fixed < 0) {
        return fixed;
    }
    c->fixed = fixed;
    c->zero_blocks = qemu_opt_get_bool(opts, "block_state_zero", true);
    c->size = qemu_opt_get_size(opts, "size", 0);
    c->log_size = qemu_opt_get_size(opts, "log_size",
                                     VHDX_DEFAULT_LOG_SIZE);
    c->block_size = qemu_opt_get_size(opts, "block_size", 0);
    return 0;
}

int coroutine_fn vhdx_co_create_opts(const BlockDriver *drv,
                                     const char *filename, QemuOpts *opts,
                                     Error **errp)
{
    BlockBackend *blk;
    VhdxCreate c;
    int ret = vhdx_create_parse(&c, opts, errp);

    if (ret < 0) {
        return ret;
    }
    /* as QEMU's qemu-img path: sizes rounded up silently */
    c.size = ROUND_UP(c.size, VHDX_SECTOR);
    c.log_size = ROUND_UP(c.log_size, VHDX_MIB);
    c.block_size = MIN(ROUND_UP(c.block_size, VHDX_MIB),
                       VHDX_BLOCK_SIZE_MAX);
    blk = bdrv_create_format_file(drv, filename, opts, errp);
    if (!blk) {
        return -EIO;
    }
    /* as QEMU: the file stays, empty, if the options are refused */
    ret = vhdx_create_on(blk, &c, errp);
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}

int coroutine_fn vhdx_co_create_on_node(const BlockDriver *drv,
                                        const BdrvCreateTarget *tgt,
                                        QemuOpts *opts, Error **errp)
{
    BlockBackend *blk;
    VhdxCreate c;
    int ret = vhdx_create_parse(&c, opts, errp);

    if (ret < 0) {
        return ret;
    }
    /* QAPI's block-size is optional: given, 0 is refused, as in QEMU */
    if (qemu_opt_has(opts, "block_size") && !c.block_size) {
        error_setg(errp, "Block size must be a multiple of 1 MB");
        return -EINVAL;
    }
    blk = bdrv_create_format_on_node(tgt->file, errp);
    if (!blk) {
        return -EIO;
    }
    ret = vhdx_create_on(blk, &c, errp);
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}
