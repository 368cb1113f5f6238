/*
 * vhdx: the format driver for Microsoft Hyper-V VHDX images
 * (Microsoft's VHDX specification v1.0), as QEMU 7.2 reads them; writing
 * in block/vhdx-write.c, the log in block/vhdx-log.c, creation in
 * block/vhdx-create.c.
 *
 * Layout: the file identifier "vhdxfile" at 0; two headers at 64 and
 * 128 KiB, each with a CRC-32C, the valid one with the higher sequence
 * number current; two copies of the region table at 192 and 256 KiB (as
 * QEMU, the first is read) naming the BAT and metadata regions by GUID;
 * the metadata table with the file parameters (block size, flags), the
 * virtual disk size, the logical and physical sector sizes and the page
 * 83 data; the BAT, one entry per payload block with a sector bitmap
 * entry after every chunk_ratio of them; the log, replayed before use
 * when the header names a log GUID that valid log entries carry.
 *
 * Invariants:
 *  1. After open only the write path (block/vhdx-write.c, under
 *     s->lock) changes the state: the headers, the BAT entries of blocks
 *     it allocates, the log's place.  A read-write open (and qemu-img
 *     check's) replays a dirty log first (vhdx-log.c); a read-only open
 *     of a dirty log fails with QEMU's message.
 *  2. block_size is a power of two in [1 MiB, 256 MiB], the logical
 *     sector is 512 bytes, disk_size is a multiple of 512 of at most
 *     64 TiB (0 only when the size item says 0: QEMU creates and opens
 *     such disks), so chunk_ratio >= 16 and data_blocks, bat_entries and
 *     every computed file offset fit in 64 bits.
 *  3. The header section, the log, the BAT and the metadata region are
 *     pairwise disjoint, and every fully present payload block lies
 *     inside the file and outside them (QEMU's checks and messages).
 *  4. bat_entries covers every payload block of the disk: every offset
 *     below disk_size has an entry.  The BAT array holds the first
 *     bat_loaded <= bat_entries of them, those inside the file; the
 *     others read as 0 (not present), as the file's end reads as zeroes
 *     in QEMU, so that a small file claiming a huge BAT allocates no
 *     more than its own size.
 *  5. Differencing images (has_parent) are refused, as QEMU does.
 */
#include "block/vhdx.h"
#include "qapi/qapi-opts.h"
#include "util/crc32c.h"

const uint8_t vhdx_bat_guid[16] = {
    0x66, 0x77, 0xc2, 0x2d, 0x23, 0xf6, 0x00, 0x42,
    0x9d, 0x64, 0x11, 0x5e, 0x9b, 0xfd, 0x4a, 0x08 };
const uint8_t vhdx_metadata_guid[16] = {
    0x06, 0xa2, 0x7c, 0x8b, 0x90, 0x47, 0x9a, 0x4b,
    0xb8, 0xfe, 0x57, 0x5f, 0x05, 0x0f, 0x88, 0x6e };

const VhdxItemKind vhdx_items[VHDX_ITEMS] = {
    [VHDX_ITEM_FILE_PARAMETERS] = { { 0x37, 0x67, 0xa1, 0xca, 0x36, 0xfa,
        0x43, 0x4d, 0xb3, 0xb6, 0x33, 0xf0, 0xaa, 0x44, 0xe7, 0x6b }, 8 },
    [VHDX_ITEM_DISK_SIZE] = { { 0x24, 0x42, 0xa5, 0x2f, 0x1b, 0xcd, 0x76,
        0x48, 0xb2, 0x11, 0x5d, 0xbe, 0xd8, 0x3b, 0xf4, 0xb8 }, 8 },
    [VHDX_ITEM_PAGE83] = { { 0xab, 0x12, 0xca, 0xbe, 0xe6, 0xb2, 0x23,
        0x45, 0x93, 0xef, 0xc3, 0x09, 0xe0, 0x00, 0xc7, 0x46 }, 16 },
    [VHDX_ITEM_LOGICAL_SECTOR] = { { 0x1d, 0xbf, 0x41, 0x81, 0x6f, 0xa9,
        0x09, 0x47, 0xba, 0x47, 0xf2, 0x33, 0xa8, 0xfa, 0xab, 0x5f }, 4 },
    [VHDX_ITEM_PHYSICAL_SECTOR] = { { 0xc7, 0x48, 0xa3, 0xcd, 0x5d, 0x44,
        0x71, 0x44, 0x9c, 0xc9, 0xe9, 0x88, 0x52, 0x51, 0xc5, 0x56 }, 4 },
    [VHDX_ITEM_PARENT_LOCATOR] = { { 0x2d, 0x5f, 0xd3, 0xa8, 0x0b, 0xb3,
        0x4d, 0x45, 0xab, 0xf7, 0xd3, 0xd8, 0x48, 0x34, 0xab, 0x0c }, 0 },
};

static int vhdx_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    if (buf_size >= 8 && !memcmp(buf, VHDX_FILE_SIGNATURE, 8)) {
        return 100;
    }
    return 0;
}

int vhdx_claim_range(BDRVVhdxState *s, uint64_t start, uint64_t length,
                     Error **errp)
{
    uint64_t end;

    if (__builtin_add_overflow(start, length, &end)) {
        error_setg(errp, "VHDX region at %" PRIu64 " of %" PRIu64 " bytes "
                   "ends past the largest file offset", start, length);
        return -EINVAL;
    }
    for (unsigned int i = 0; i < s->nranges; i++) {
        if (start < s->ranges[i].end && end > s->ranges[i].start) {
            error_setg(errp, "VHDX region %" PRIu64 "-%" PRIu64 " overlaps "
                       "with region %" PRIu64 "-%" PRIu64, start, end,
                       s->ranges[i].start, s->ranges[i].end);
            return -EINVAL;
        }
    }
    /* newest first, so that an overlap names the newest, as QEMU */
    s->ranges = g_renew(VhdxRange, s->ranges, s->nranges + 1);
    memmove(s->ranges + 1, s->ranges, s->nranges * sizeof(*s->ranges));
    s->ranges[0] = (VhdxRange){ start, end };
    s->nranges++;
    return 0;
}

/* Whether the @size-byte structure at @buf carries its CRC-32C at 4. */
static bool vhdx_checksum_ok(uint8_t *buf, size_t size)
{
    uint32_t stored, crc;

    memcpy(&stored, buf + 4, 4);
    memset(buf + 4, 0, 4);
    crc = crc32c(0, buf, size);
    memcpy(buf + 4, &stored, 4);
    return crc == GUINT32_FROM_LE(stored);
}

/* Reads the header at @offset; false if it is not a valid version 1 one. */
static bool vhdx_read_header(BlockDriverState *bs, int64_t offset,
                             VhdxHeader *h, int *err)
{
    g_autofree uint8_t *buf = g_malloc(VHDX_HEADER_SIZE);
    int ret = bdrv_pread(bs->file, offset, VHDX_HEADER_SIZE, buf, 0);

    if (ret < 0) {
        *err = ret;
        return false;
    }
    if (memcmp(buf, VHDX_HEADER_SIGNATURE, 4) ||
        !vhdx_checksum_ok(buf, VHDX_HEADER_SIZE)) {
        return false;
    }
    memcpy(h, buf, sizeof(*h));
    h->sequence_number = GUINT64_FROM_LE(h->sequence_number);
    h->log_version = GUINT16_FROM_LE(h->log_version);
    h->version = GUINT16_FROM_LE(h->version);
    h->log_length = GUINT32_FROM_LE(h->log_length);
    h->log_offset = GUINT64_FROM_LE(h->log_offset);
    return h->version == 1;
}

/* The current header: the valid one with the higher sequence number. */
static int vhdx_open_headers(BlockDriverState *bs, BDRVVhdxState *s,
                             Error **errp)
{
    VhdxHeader h1, h2;
    int err = 0;
    bool ok1 = vhdx_read_header(bs, VHDX_HEADER1_OFFSET, &h1, &err);
    bool ok2 = vhdx_read_header(bs, VHDX_HEADER2_OFFSET, &h2, &err);

    if (err < 0) {
        error_setg_errno(errp, -err, "Could not read the VHDX headers");
        return err;
    }
    if (!ok1 && !ok2) {
        error_setg(errp, "No valid VHDX header found");
        return -EINVAL;
    }
    s->current_header_slot = !(ok1 && (!ok2 || h1.sequence_number >=
                                          h2.sequence_number));
    s->header = s->current_header_slot ? h2 : h1;
    memcpy(s->data_write_guid[0], (ok1 ? &h1 : &s->header)->data_write_guid,
           16);
    memcpy(s->data_write_guid[1], (ok2 ? &h2 : &s->header)->data_write_guid,
           16);
    if (s->header.log_version != 0) {
        error_setg(errp, "VHDX log version %u is not supported",
                   s->header.log_version);
        return -EINVAL;
    }
    if (s->header.log_offset % VHDX_MIB) {
        error_setg(errp, "VHDX log offset %" PRIu64 " is not a multiple "
                   "of 1 MiB", s->header.log_offset);
        return -EINVAL;
    }
    /* invariant 3: the header section and the log are their own */
    if (vhdx_claim_range(s, 0, VHDX_HEADER_SECTION_END, errp) < 0 ||
        vhdx_claim_range(s, s->header.log_offset, s->header.log_length,
                         errp) < 0) {
        return -EINVAL;
    }
    return 0;
}

/* The first region table: where the BAT and the metadata are. */
static int vhdx_open_regions(BlockDriverState *bs, BDRVVhdxState *s,
                             Error **errp)
{
    g_autofree uint8_t *buf = g_malloc(VHDX_REGION_TABLE_SIZE);
    VhdxRegionTableHeader th;
    bool have_bat = false, have_metadata = false;
    int ret;

    ret = bdrv_pread(bs->file, VHDX_REGION1_OFFSET, VHDX_REGION_TABLE_SIZE,
                     buf, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VHDX region table");
        return ret;
    }
    memcpy(&th, buf, sizeof(th));
    if (memcmp(th.signature, VHDX_REGION_SIGNATURE, 4) ||
        !vhdx_checksum_ok(buf, VHDX_REGION_TABLE_SIZE)) {
        error_setg(errp, "VHDX region table has a bad signature or "
                   "checksum");
        return -EINVAL;
    }
    th.entry_count = GUINT32_FROM_LE(th.entry_count);
    if (th.entry_count > VHDX_MAX_REGION_ENTRIES) {
        error_setg(errp, "VHDX region table has %" PRIu32 " entries, more "
                   "than %d", th.entry_count, VHDX_MAX_REGION_ENTRIES);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < th.entry_count; i++) {
        VhdxRegionEntry e;
        bool is_bat, is_metadata;

        memcpy(&e, buf + sizeof(th) + i * sizeof(e), sizeof(e));
        e.file_offset = GUINT64_FROM_LE(e.file_offset);
        e.length = GUINT32_FROM_LE(e.length);
        is_bat = !memcmp(e.guid, vhdx_bat_guid, 16);
        is_metadata = !memcmp(e.guid, vhdx_metadata_guid, 16);
        if (!is_bat && !is_metadata) {
            if (GUINT32_FROM_LE(e.required) & 1) {
                error_setg(errp, "VHDX region table entry %" PRIu32 " is a "
                           "required region of unknown type", i);
                return -ENOTSUP;
            }
            continue;
        }
        if ((is_bat && have_bat) || (is_metadata && have_metadata)) {
            error_setg(errp, "VHDX region table names the %s region twice",
                       is_bat ? "BAT" : "metadata");
            return -EINVAL;
        }
        /* invariant 3 */
        ret = vhdx_claim_range(s, e.file_offset, e.length, errp);
        if (ret < 0) {
            return ret;
        }
        if (is_bat) {
            have_bat = true;
            s->bat_offset = e.file_offset;
            s->bat_length = e.length;
        } else {
            have_metadata = true;
            s->metadata_offset = e.file_offset;
            s->metadata_length = e.length;
        }
    }
    if (!have_bat || !have_metadata) {
        error_setg(errp, "VHDX region table has no %s region",
                   have_bat ? "metadata" : "BAT");
        return -EINVAL;
    }
    /* after the overlaps, which QEMU reports first */
    if (s->bat_offset % VHDX_MIB || s->bat_length % VHDX_MIB ||
        !s->bat_length || s->metadata_offset % VHDX_MIB ||
        s->metadata_length % VHDX_MIB || !s->metadata_length) {
        error_setg(errp, "VHDX BAT region (%" PRIu64 ", %" PRIu32 " bytes) "
                   "or metadata region (%" PRIu64 ", %" PRIu32 " bytes) is "
                   "not aligned to 1 MiB", s->bat_offset, s->bat_length,
                   s->metadata_offset, s->metadata_length);
        return -EINVAL;
    }
    return 0;
}

/* Reads metadata item @item, found at @offset in the region, to @out. */
static int vhdx_read_item(BlockDriverState *bs, BDRVVhdxState *s, int item,
                          uint32_t offset, void *out, Error **errp)
{
    uint32_t size = vhdx_items[item].size;
    int ret;

    if (offset < VHDX_METADATA_TABLE_SIZE ||
        offset > s->metadata_length - size) {
        error_setg(errp, "VHDX metadata item %d at %" PRIu32 " is outside "
                   "the metadata region's items", item, offset);
        return -EINVAL;
    }
    ret = bdrv_pread(bs->file, s->metadata_offset + offset, size, out, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read VHDX metadata item %d",
                         item);
    }
    return ret;
}

static int vhdx_open_metadata(BlockDriverState *bs, BDRVVhdxState *s,
                              Error **errp)
{
    g_autofree uint8_t *buf = g_malloc(VHDX_METADATA_TABLE_SIZE);
    VhdxMetadataTableHeader th;
    uint32_t at[VHDX_ITEMS];
    bool found[VHDX_ITEMS] = { false };
    uint32_t params[2], sector;
    uint64_t size;
    int ret;

    ret = bdrv_pread(bs->file, s->metadata_offset, VHDX_METADATA_TABLE_SIZE,
                     buf, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VHDX metadata "
                         "table");
        return ret;
    }
    memcpy(&th, buf, sizeof(th));
    th.entry_count = GUINT16_FROM_LE(th.entry_count);
    if (memcmp(th.signature, VHDX_METADATA_SIGNATURE, 8)) {
        error_setg(errp, "VHDX metadata table has a bad signature");
        return -EINVAL;
    }
    if (th.entry_count > VHDX_MAX_METADATA_ENTRIES) {
        error_setg(errp, "VHDX metadata table has %u entries, more than %d",
                   th.entry_count, VHDX_MAX_METADATA_ENTRIES);
        return -EINVAL;
    }
    for (unsigned int i = 0; i < th.entry_count; i++) {
        VhdxMetadataEntry e;

        memcpy(&e, buf + sizeof(th) + i * sizeof(e), sizeof(e));
        for (int item = 0; item < VHDX_ITEMS; item++) {
            if (memcmp(e.item_id, vhdx_items[item].guid, 16)) {
                continue;
            }
            if (found[item]) {
                error_setg(errp, "VHDX metadata table names item %d twice",
                           item);
                return -EINVAL;
            }
            found[item] = true;
            at[item] = GUINT32_FROM_LE(e.offset);
        }
        /* as QEMU, an unknown item is skipped even if marked required */
    }
    for (int item = 0; item < VHDX_ITEM_PARENT_LOCATOR; item++) {
        if (!found[item]) {
            error_setg(errp, "VHDX metadata table lacks required item %d",
                       item);
            return -ENOTSUP;
        }
    }
    if ((ret = vhdx_read_item(bs, s, VHDX_ITEM_FILE_PARAMETERS,
                              at[VHDX_ITEM_FILE_PARAMETERS], params,
                              errp)) < 0 ||
        (ret = vhdx_read_item(bs, s, VHDX_ITEM_DISK_SIZE,
                              at[VHDX_ITEM_DISK_SIZE], &size, errp)) < 0 ||
        (ret = vhdx_read_item(bs, s, VHDX_ITEM_LOGICAL_SECTOR,
                              at[VHDX_ITEM_LOGICAL_SECTOR], &sector,
                              errp)) < 0) {
        return ret;
    }
    s->block_size = GUINT32_FROM_LE(params[0]);
    s->params_flags = GUINT32_FROM_LE(params[1]);
    s->logical_sector_size = GUINT32_FROM_LE(sector);
    ret = vhdx_read_item(bs, s, VHDX_ITEM_PHYSICAL_SECTOR,
                         at[VHDX_ITEM_PHYSICAL_SECTOR], &sector, errp);
    if (ret < 0) {
        return ret;
    }
    s->physical_sector_size = GUINT32_FROM_LE(sector);
    size = GUINT64_FROM_LE(size);

    /* invariant 5 */
    if (s->params_flags & VHDX_PARAMS_HAS_PARENT) {
        if (!found[VHDX_ITEM_PARENT_LOCATOR]) {
            error_setg(errp, "VHDX image has a parent but no parent "
                       "locator");
            return -EINVAL;
        }
        error_setg(errp, "VHDX differencing images (with a parent) are not "
                   "supported");
        return -ENOTSUP;
    }
    /* invariant 2 */
    if (s->block_size < VHDX_BLOCK_SIZE_MIN ||
        s->block_size > VHDX_BLOCK_SIZE_MAX ||
        (s->block_size & (s->block_size - 1))) {
        error_setg(errp, "VHDX block size %" PRIu32 " is not a power of two "
                   "between 1 MiB and 256 MiB", s->block_size);
        return -EINVAL;
    }
    if (s->logical_sector_size != VHDX_SECTOR) {
        error_setg(errp, "VHDX logical sector size %" PRIu32 " is not "
                   "supported (only 512)", s->logical_sector_size);
        return -ENOTSUP;
    }
    if (size > VHDX_MAX_DISK_SIZE) {
        error_setg(errp, "VHDX virtual disk size %" PRIu64 " is more than "
                   "64 TiB", size);
        return -EINVAL;
    }
    /* as QEMU: whole sectors */
    s->disk_size = QEMU_ALIGN_DOWN(size, VHDX_SECTOR);
    if (!s->disk_size && size) {
        error_setg(errp, "VHDX virtual disk size %" PRIu64 " is less than a "
                   "sector", size);
        return -EINVAL;
    }
    return 0;
}

/* Reads and checks the BAT (invariants 3 and 4). */
static int vhdx_open_bat(BlockDriverState *bs, BDRVVhdxState *s,
                         Error **errp)
{
    int64_t file_len = bdrv_getlength(bs->file->bs);
    int ret;

    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the image's size");
        return file_len;
    }
    s->chunk_ratio = VHDX_SECTORS_PER_BITMAP * s->logical_sector_size /
                     s->block_size;
    s->data_blocks = DIV_ROUND_UP(s->disk_size, s->block_size);
    /* an empty disk: QEMU's 32-bit count of 2^32 - 1 / chunk_ratio */
    s->bat_entries = s->data_blocks ?
                     s->data_blocks + (s->data_blocks - 1) / s->chunk_ratio :
                     UINT32_MAX / s->chunk_ratio;
    if (s->bat_entries > s->bat_length / sizeof(uint64_t)) {
        error_setg(errp, "VHDX BAT region of %" PRIu32 " bytes is too small "
                   "for %" PRIu64 " entries", s->bat_length, s->bat_entries);
        return -EINVAL;
    }
    /* invariant 4 */
    s->bat_loaded = s->bat_offset >= (uint64_t)file_len ? 0 :
                    MIN(s->bat_entries, ((uint64_t)file_len - s->bat_offset) /
                                        sizeof(uint64_t));
    s->bat = g_try_new(uint64_t, MAX(s->bat_loaded, 1));
    if (!s->bat) {
        error_setg(errp, "Could not allocate the BAT of %" PRIu64
                   " entries", s->bat_loaded);
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, s->bat_offset,
                     s->bat_loaded * sizeof(uint64_t), s->bat, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VHDX BAT");
        return ret;
    }
    for (uint64_t i = 0; i < s->bat_loaded; i++) {
        uint64_t offset;

        s->bat[i] = GUINT64_FROM_LE(s->bat[i]);
        /* sector bitmap entries follow every chunk_ratio payload ones */
        if ((i + 1) % (s->chunk_ratio + 1) == 0 ||
            (s->bat[i] & VHDX_BAT_STATE_MASK) != VHDX_BLOCK_FULLY_PRESENT) {
            continue;
        }
        offset = s->bat[i] & VHDX_BAT_OFFSET_MASK;
        if (offset >= (uint64_t)file_len) {
            error_setg(errp, "VHDX BAT entry %" PRIu64 " start offset %"
                       PRIu64 " points after end of file (%" PRIi64 "). "
                       "Image has probably been truncated.", i, offset,
                       file_len);
            return -EINVAL;
        }
        if (offset + s->block_size > (uint64_t)file_len) {
            error_setg(errp, "VHDX BAT entry %" PRIu64 " end offset %"
                       PRIu64 " points after end of file (%" PRIi64 "). "
                       "Image has probably been truncated.", i,
                       offset + s->block_size - 1, file_len);
            return -EINVAL;
        }
        /* blocks are checked against the structures, not each other */
        for (unsigned int r = 0; r < s->nranges; r++) {
            if (offset < s->ranges[r].end &&
                offset + s->block_size > s->ranges[r].start) {
                error_setg(errp, "VHDX region %" PRIu64 "-%" PRIu64
                           " overlaps with region %" PRIu64 "-%" PRIu64,
                           offset, offset + s->block_size,
                           s->ranges[r].start, s->ranges[r].end);
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* BAT entry @i (< bat_entries): 0 past the file's end (invariant 4). */
static uint64_t vhdx_bat_entry(BDRVVhdxState *s, uint64_t i)
{
    return i < s->bat_loaded ? s->bat[i] : 0;
}

static void vhdx_close(BlockDriverState *bs)
{
    BDRVVhdxState *s = bs->opaque;

    g_clear_pointer(&s->bat, g_free);
    g_clear_pointer(&s->ranges, g_free);
    s->nranges = 0;
}

static int vhdx_open(BlockDriverState *bs, QDict *options, int flags,
                     Error **errp)
{
    BDRVVhdxState *s = bs->opaque;
    char signature[8];
    int ret;

    qemu_co_mutex_init(&s->lock);
    vhdx_random_guid(s->session_guid);
    s->first_visible_write = true;
    s->log_sequence = 1;
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    ret = bdrv_pread(bs->file, 0, sizeof(signature), signature, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VHDX file "
                         "identifier");
        return ret;
    }
    if (memcmp(signature, VHDX_FILE_SIGNATURE, sizeof(signature))) {
        error_setg(errp, "Image not in VHDX format (no \"vhdxfile\" "
                   "identifier)");
        return -EINVAL;
    }
    ret = vhdx_open_headers(bs, s, errp);
    /* invariant 1; as QEMU: the log before the region table, which it
     * may update */
    if (ret == 0 && (bs->open_flags & BDRV_O_RDWR)) {
        ret = vhdx_log_replay(bs, s, errp);
    } else if (ret == 0) {
        ret = vhdx_log_is_dirty(bs, s, errp);
        if (ret > 0) {
            error_setg(errp, "VHDX image file '%s' opened read-only, but "
                       "contains a log that needs to be replayed",
                       bs->filename);
            error_append_hint(errp, "To replay the log, run:\n"
                              "qemu-img check -r all '%s'\n", bs->filename);
            ret = -EPERM;
        }
    }
    if (ret == 0) {
        ret = vhdx_open_regions(bs, s, errp);
    }
    if (ret == 0) {
        ret = vhdx_open_metadata(bs, s, errp);
    }
    if (ret == 0) {
        ret = vhdx_open_bat(bs, s, errp);
    }
    if (ret < 0) {
        vhdx_close(bs);
    }
    return ret;
}

/* The map bdrv_co_preadv_mapped() reads by: a block at a time. */
static int64_t coroutine_fn vhdx_piece(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, int64_t *host)
{
    BDRVVhdxState *s = bs->opaque;
    uint64_t block = offset / s->block_size;
    uint64_t in_block = offset % s->block_size;
    uint64_t entry;

    /* invariant 4 */
    assert(block + block / s->chunk_ratio < s->bat_entries);
    entry = vhdx_bat_entry(s, block + block / s->chunk_ratio);
    switch (entry & VHDX_BAT_STATE_MASK) {
    case VHDX_BLOCK_FULLY_PRESENT:
        /* invariant 3: the block is inside the file */
        *host = (entry & VHDX_BAT_OFFSET_MASK) + in_block;
        break;
    case VHDX_BLOCK_PARTIALLY_PRESENT:
    case VHDX_BLOCK_RESERVED:
        /* a parent's data (refused at open) or no state: as QEMU */
        return -EIO;
    default:
        *host = -1;
        break;
    }
    return MIN(bytes, (int64_t)(s->block_size - in_block));
}

static int coroutine_fn vhdx_co_preadv(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    return bdrv_co_preadv_mapped(bs, offset, bytes, qiov, vhdx_piece);
}

/*
 * As QEMU's check: a log replayed by this (read-write) open counts as a
 * corruption repaired; every fully present block lies inside the file
 * (open checked it against the file's length then; this sees a file cut
 * since).  Nothing else is repaired.
 */
static int coroutine_fn vhdx_co_check(BlockDriverState *bs,
                                      BdrvCheckResult *result,
                                      BdrvCheckMode fix)
{
    BDRVVhdxState *s = bs->opaque;
    int64_t file_len = bdrv_getlength(bs->file->bs);

    if (s->log_replayed) {
        result->corruptions_fixed++;
        s->log_replayed = false;
    }
    if (file_len < 0) {
        fprintf(stderr, "ERROR: could not get the image file's size: %s\n",
                strerror(-file_len));
        result->check_errors++;
        return 0;
    }
    for (uint64_t i = 0; i < s->bat_loaded; i++) {
        uint64_t offset = s->bat[i] & VHDX_BAT_OFFSET_MASK;

        if ((i + 1) % (s->chunk_ratio + 1) == 0 ||
            (s->bat[i] & VHDX_BAT_STATE_MASK) != VHDX_BLOCK_FULLY_PRESENT) {
            continue;
        }
        /* invariant 3 held at open: offset + block_size does not wrap */
        if (offset + s->block_size > (uint64_t)file_len) {
            fprintf(stderr, "ERROR: VHDX BAT entry %" PRIu64 " (offset %"
                    PRIu64 ") points after end of file (%" PRIi64 ")\n",
                    i, offset, file_len);
            result->corruptions++;
        }
    }
    return 0;
}

static int64_t vhdx_getlength(BlockDriverState *bs)
{
    BDRVVhdxState *s = bs->opaque;

    return s->disk_size;
}

static int vhdx_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    BDRVVhdxState *s = bs->opaque;

    bdi->cluster_size = s->block_size;
    return 0;
}

/*
 * As QEMU: the first BAT entry tells a fixed image (its blocks the
 * file's) from a dynamic one (unallocated blocks read as zeroes).
 */
static int vhdx_has_zero_init(BlockDriverState *bs)
{
    BDRVVhdxState *s = bs->opaque;

    if (s->bat_loaded &&
        (s->bat[0] & VHDX_BAT_STATE_MASK) == VHDX_BLOCK_FULLY_PRESENT) {
        return bdrv_has_zero_init(bs->file->bs);
    }
    return 1;
}

/*
 * No block_status, as QEMU's driver: every byte reads as allocated data
 * at no known offset, so `map` refuses the image as qemu-img's does.
 */
static const BlockDriver bdrv_vhdx = {
    .format_name                    = "vhdx",
    .instance_size                  = sizeof(BDRVVhdxState),
    .is_format                      = true,
    .bdrv_probe                     = vhdx_probe,
    .bdrv_open                      = vhdx_open,
    .bdrv_close                     = vhdx_close,
    .bdrv_co_preadv                 = vhdx_co_preadv,
    .bdrv_co_pwritev                = vhdx_co_pwritev,
    .bdrv_has_zero_init             = vhdx_has_zero_init,
    .create_opts                    = &qapi_opts_vhdx_create,
    .bdrv_co_create_opts            = vhdx_co_create_opts,
    .bdrv_co_create_on_node         = vhdx_co_create_on_node,
    .bdrv_co_check                  = vhdx_co_check,
    .bdrv_getlength                 = vhdx_getlength,
    .bdrv_get_info                  = vhdx_get_info,
    .request_alignment              = VHDX_SECTOR,
};

block_init(bdrv_register, bdrv_vhdx)
