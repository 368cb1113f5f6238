/*
 * vpc: the format driver for Microsoft Virtual PC / Hyper-V virtual hard
 * disks (VHD), as Microsoft's "Virtual Hard Disk Image Format
 * Specification" describes them and as QEMU 7.2 reads them.  This file
 * opens and reads them; block/vpc-write.c writes them,
 * block/vpc-create.c creates them.
 *
 * Every image ends with a 512-byte big-endian footer ("conectix") giving
 * the disk's size twice (a CHS geometry and a byte count) and its type.
 * A fixed disk is the raw data followed by the footer.  A dynamic disk
 * starts with a copy of the footer; the footer's data offset points to a
 * 1024-byte dynamic header ("cxsparse") giving the block size (2 MiB as
 * written) and where the block allocation table (BAT) lies: one 32-bit
 * sector offset per block, all ones for a block never written (it reads
 * as zeroes).  An allocated block is a sector bitmap (one bit a sector)
 * then the block's data; like QEMU, reads ignore the bitmap and writes
 * set it to all ones.  The footer follows the last block.
 *
 * As QEMU: where the footer lies decides the layout (at 0: a BAT is read;
 * only at the end: the disk must say it is fixed); its type decides the
 * I/O (fixed: disk offset = file offset; any other, differencing
 * included: through the BAT, the parent never read).  The size comes
 * from the CHS geometry unless the creator application is one known to
 * use the byte count, or the geometry is the largest one; the runtime
 * option force_size_calc (chs, current_size) overrides the creator.
 *
 * Invariants:
 *  1. After open, footer, fixed, disk_size, bat_offset, bat_entries,
 *     block_size and bitmap_size are immutable; disk_size <= bat_entries
 *     * block_size (every disk offset has a BAT entry), block_size is a
 *     power of two in [512, 2^31], and every allocated entry's block
 *     (bitmap and data) ends at or before free_offset and overlaps no
 *     metadata (footer copy, dynamic header, BAT).
 *  2. bat, free_offset and last_bitmap change only under lock, held by a
 *     writer from the lookup that finds a block unallocated to the BAT
 *     entry that points at the block it allocated; free_offset only
 *     grows, and the footer is rewritten there.
 *  3. A block's bitmap and the footer after it are written before the
 *     BAT entry that points at the block.
 *  4. A fixed disk's writes end at or before the footer (fixed_data_end).
 */
#include "block/vpc.h"
#include "qapi/qapi-opts.h"

/* One's complement of the byte sum, the checksum field counting as 0. */
uint32_t vpc_checksum(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint32_t sum = 0;

    for (size_t i = 0; i < len; i++) {
        sum += p[i];
    }
    return ~sum;
}

/*
 * The specification's CHS geometry for @sectors, as QEMU computes it:
 * 17, 31 or 63 sectors a track with 4 to 16 heads, 255 sectors a track
 * past 65535 x 16 x 63.
 */
void vpc_geometry(int64_t sectors, uint16_t *cylinders, uint8_t *heads,
                  uint8_t *sectors_per_track)
{
    uint32_t cyl_heads;

    sectors = MIN(sectors, VPC_MAX_GEOMETRY);
    if (sectors >= INT64_C(65535) * 16 * 63) {
        *sectors_per_track = 255;
        *heads = 16;
        cyl_heads = sectors / 255;
    } else {
        uint32_t h;

        *sectors_per_track = 17;
        cyl_heads = sectors / 17;
        h = MAX(DIV_ROUND_UP(cyl_heads, 1024), 4);
        if (cyl_heads >= h * 1024 || h > 16) {
            *sectors_per_track = 31;
            h = 16;
            cyl_heads = sectors / 31;
        }
        if (cyl_heads >= h * 1024) {
            *sectors_per_track = 63;
            h = 16;
            cyl_heads = sectors / 63;
        }
        *heads = h;
    }
    *cylinders = cyl_heads / *heads;
}

static int vpc_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    /* a fixed disk's footer is at its end: only a dynamic one probes */
    if (buf_size >= 8 && !memcmp(buf, VPC_FOOTER_COOKIE, 8)) {
        return 100;
    }
    return 0;
}

/* Reads @len bytes at @offset of the file, zeroes past its @file_len. */
static int vpc_pread_padded(BdrvChild *file, uint64_t offset, size_t len,
                            void *buf, uint64_t file_len)
{
    memset(buf, 0, len);
    if (offset >= file_len) {
        return 0;
    }
    return bdrv_pread(file, offset, MIN(len, file_len - offset), buf, 0);
}

/* Finds the footer: at 0 (a dynamic layout), else at the file's end. */
static int vpc_read_footer(BlockDriverState *bs, uint64_t file_len,
                           bool *at_start, Error **errp)
{
    BDRVVpcState *s = bs->opaque;
    VpcFooter *f = &s->footer;
    /* QEMU sees the file's length rounded up to a sector */
    uint64_t rounded = ROUND_UP(file_len, VPC_SECTOR);
    uint32_t sum;
    int ret;

    ret = vpc_pread_padded(bs->file, 0, sizeof(*f), f, file_len);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Unable to read VHD header");
        return ret;
    }
    *at_start = !memcmp(f->cookie, VPC_FOOTER_COOKIE, 8);
    if (!*at_start) {
        if (rounded < sizeof(*f)) {
            error_setg(errp, "File too small for a VHD header");
            return -EINVAL;
        }
        ret = vpc_pread_padded(bs->file, rounded - sizeof(*f), sizeof(*f),
                               f, file_len);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Unable to read VHD footer");
            return ret;
        }
        /* only a fixed disk has its footer at the end alone */
        if (memcmp(f->cookie, VPC_FOOTER_COOKIE, 8) ||
            GUINT32_FROM_BE(f->type) != VPC_TYPE_FIXED) {
            error_setg(errp, "invalid VPC image");
            return -EINVAL;
        }
    }
    sum = GUINT32_FROM_BE(f->checksum);
    f->checksum = 0;
    if (vpc_checksum(f, sizeof(*f)) != sum) {
        error_setg(errp, "Incorrect header checksum");
        return -EINVAL;
    }
    f->checksum = GUINT32_TO_BE(sum);
    return 0;
}

/* The disk's size: the footer's geometry or its byte count, as QEMU. */
static int vpc_disk_size(BlockDriverState *bs, Error **errp)
{
    BDRVVpcState *s = bs->opaque;
    const VpcFooter *f = &s->footer;
    static const char *const size_creators[] = {
        "win ", "qem2", "d2v ", "CTXS",
    };
    int64_t sectors = (int64_t)GUINT16_FROM_BE(f->cylinders) * f->heads *
                      f->sectors_per_track;
    bool use_chs = memcmp(f->creator_app, "tap", 4) != 0;

    for (size_t i = 0; i < G_N_ELEMENTS(size_creators); i++) {
        use_chs &= memcmp(f->creator_app, size_creators[i], 4) != 0;
    }
    use_chs |= s->force_chs;
    if (!use_chs || sectors == VPC_MAX_GEOMETRY || s->force_current_size) {
        sectors = GUINT64_FROM_BE(f->current_size) / VPC_SECTOR;
    }
    if (sectors > VPC_MAX_SECTORS) {
        error_setg_errno(errp, EFBIG, "Could not open '%s'", bs->filename);
        return -EFBIG;
    }
    s->disk_size = sectors * VPC_SECTOR;
    return 0;
}

static int vpc_read_options(BDRVVpcState *s, QDict *options, Error **errp)
{
    QemuOpts *opts = qemu_opts_absorb_qdict(&qapi_opts_vpc_runtime, options,
                                            errp);
    const char *calc;
    int ret = 0;

    if (!opts) {
        return -EINVAL;
    }
    calc = qemu_opt_get(opts, "force_size_calc");
    if (calc && !strcmp(calc, "chs")) {
        s->force_chs = true;
    } else if (calc && !strcmp(calc, "current_size")) {
        s->force_current_size = true;
    } else if (calc) {
        error_setg(errp, "Invalid size calculation mode: '%s'", calc);
        ret = -EINVAL;
    }
    qemu_opts_del(opts);
    return ret;
}

static bool vpc_overlaps(uint64_t a, uint64_t a_len, uint64_t b,
                         uint64_t b_len)
{
    return a < b + b_len && b < a + a_len;
}

/* Reads and checks the BAT (invariant 1); sets free_offset. */
static int vpc_read_bat(BlockDriverState *bs, uint64_t file_len,
                        uint64_t header_offset, Error **errp)
{
    BDRVVpcState *s = bs->opaque;
    uint64_t bat_len = (uint64_t)s->bat_entries * sizeof(uint32_t);
    uint64_t block_len = s->bitmap_size + s->block_size;
    uint64_t rounded = ROUND_UP(file_len, VPC_SECTOR);
    uint64_t meta_end;
    int ret;

    if (s->bat_offset > INT64_MAX - bat_len) {
        error_setg(errp, "Error reading pagetable");
        return -EINVAL;
    }
    /* QEMU reads zeroes past the end; qblock allocates no more than is
     * there (a BAT past the end points blocks past it too, in QEMU) */
    if (s->bat_offset + bat_len > rounded) {
        error_setg(errp, "block-vpc: free_data_block_offset points after "
                   "the end of file. The image has been truncated.");
        return -EINVAL;
    }
    s->bat = g_try_new(uint32_t, s->bat_entries ? s->bat_entries : 1);
    if (!s->bat) {
        error_setg(errp, "Could not allocate the BAT of %" PRIu32
                   " entries", s->bat_entries);
        return -ENOMEM;
    }
    ret = vpc_pread_padded(bs->file, s->bat_offset, bat_len, s->bat,
                           file_len);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Error reading pagetable");
        return ret;
    }
    meta_end = MAX(s->bat_offset + bat_len, header_offset +
                   VPC_DYN_HEADER_SIZE);
    s->free_offset = ROUND_UP(meta_end, VPC_SECTOR);
    /* QEMU's check first, then qblock's (invariant 1) */
    for (uint32_t i = 0; i < s->bat_entries; i++) {
        s->bat[i] = GUINT32_FROM_BE(s->bat[i]);
        if (s->bat[i] != VPC_BAT_UNALLOCATED) {
            s->free_offset = MAX(s->free_offset, (uint64_t)s->bat[i] *
                                 VPC_SECTOR + block_len);
        }
    }
    if (s->free_offset > rounded) {
        error_setg(errp, "block-vpc: free_data_block_offset points after "
                   "the end of file. The image has been truncated.");
        return -EINVAL;
    }
    for (uint32_t i = 0; i < s->bat_entries; i++) {
        uint64_t at = (uint64_t)s->bat[i] * VPC_SECTOR;

        if (s->bat[i] != VPC_BAT_UNALLOCATED &&
            (vpc_overlaps(at, block_len, 0, VPC_FOOTER_SIZE) ||
             vpc_overlaps(at, block_len, header_offset,
                          VPC_DYN_HEADER_SIZE) ||
             vpc_overlaps(at, block_len, s->bat_offset, bat_len))) {
            error_setg(errp, "BAT entry %" PRIu32 " (sector %" PRIu32
                       ") puts its block over the image's metadata", i,
                       s->bat[i]);
            return -EINVAL;
        }
    }
    return 0;
}

/* Reads the dynamic header and the BAT it points to (invariant 1). */
static int vpc_open_dynamic(BlockDriverState *bs, uint64_t file_len,
                            Error **errp)
{
    BDRVVpcState *s = bs->opaque;
    uint64_t at = GUINT64_FROM_BE(s->footer.data_offset);
    VpcDynHeader h;
    uint32_t block_size, entries;
    int ret;

    if (at > INT64_MAX - sizeof(h)) {
        error_setg(errp, "Error reading dynamic VHD header");
        return -EINVAL;
    }
    ret = vpc_pread_padded(bs->file, at, sizeof(h), &h, file_len);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Error reading dynamic VHD header");
        return ret;
    }
    /* as QEMU: the header's checksum is not checked */
    if (memcmp(h.cookie, VPC_DYN_COOKIE, 8)) {
        error_setg(errp, "Invalid header magic");
        return -EINVAL;
    }
    block_size = GUINT32_FROM_BE(h.block_size);
    if (block_size < VPC_SECTOR || (block_size & (block_size - 1))) {
        error_setg(errp, "Invalid block size %" PRIu32, block_size);
        return -EINVAL;
    }
    s->block_size = block_size;
    /* a bit a sector, in whole sectors */
    s->bitmap_size = ROUND_UP(block_size / VPC_SECTOR / 8, VPC_SECTOR);
    entries = GUINT32_FROM_BE(h.max_table_entries);
    if (entries > VPC_MAX_BAT_ENTRIES) {
        error_setg(errp, "Max Table Entries too large (%" PRId32 ")",
                   (int32_t)entries);
        return -EINVAL;
    }
    s->bat_entries = entries;
    if ((uint64_t)entries * block_size < s->disk_size) {
        error_setg(errp, "Page table too small");
        return -EINVAL;
    }
    s->bat_offset = GUINT64_FROM_BE(h.table_offset);
    return vpc_read_bat(bs, file_len, at, errp);
}

static void vpc_close(BlockDriverState *bs)
{
    BDRVVpcState *s = bs->opaque;

    g_clear_pointer(&s->bat, g_free);
}

static int vpc_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVVpcState *s = bs->opaque;
    int64_t file_len;
    bool at_start;
    int ret;

    qemu_co_mutex_init(&s->lock);
    s->last_bitmap = VPC_NO_OFFSET;
    ret = vpc_read_options(s, options, errp);
    if (ret < 0) {
        return ret;
    }
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Invalid file size");
        return file_len;
    }
    ret = vpc_read_footer(bs, file_len, &at_start, errp);
    if (ret == 0) {
        ret = vpc_disk_size(bs, errp);
    }
    if (ret == 0 && at_start) {
        ret = vpc_open_dynamic(bs, file_len, errp);
    }
    if (ret < 0) {
        vpc_close(bs);
        return ret;
    }
    s->fixed = GUINT32_FROM_BE(s->footer.type) == VPC_TYPE_FIXED;
    /* invariant 4: a fixed disk's data ends where its footer starts */
    s->fixed_data_end = file_len >= VPC_FOOTER_SIZE ?
                        QEMU_ALIGN_DOWN(file_len - VPC_FOOTER_SIZE,
                                        VPC_SECTOR) : 0;
    return 0;
}

uint64_t vpc_block_offset(BDRVVpcState *s, uint64_t offset)
{
    uint64_t index = offset / s->block_size;

    /* invariant 1: every disk offset has an entry */
    assert(index < s->bat_entries);
    if (s->bat[index] == VPC_BAT_UNALLOCATED) {
        return 0;
    }
    return (uint64_t)s->bat[index] * VPC_SECTOR + s->bitmap_size +
           offset % s->block_size;
}

/* A fixed disk's bytes: the file's, zeroes past its end (as QEMU). */
static int coroutine_fn vpc_co_read_fixed(BlockDriverState *bs,
                                          int64_t offset, int64_t bytes,
                                          QEMUIOVector *qiov, size_t done)
{
    int64_t file_len = bdrv_getlength(bs->file->bs);
    int64_t in_file;
    int ret;

    if (file_len < 0) {
        return file_len;
    }
    in_file = offset < file_len ? MIN(bytes, file_len - offset) : 0;
    if (in_file > 0) {
        ret = bdrv_co_preadv_part(bs->file, offset, in_file, qiov, done, 0);
        if (ret < 0) {
            return ret;
        }
    }
    if (in_file < bytes) {
        qemu_iovec_memset(qiov, done + in_file, 0, bytes - in_file);
    }
    return 0;
}

/* The map of a dynamic disk, by which bdrv_co_preadv_mapped() reads. */
static int64_t coroutine_fn vpc_piece(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, int64_t *host)
{
    BDRVVpcState *s = bs->opaque;
    uint64_t at;

    qemu_co_mutex_lock(&s->lock);
    at = vpc_block_offset(s, offset);
    qemu_co_mutex_unlock(&s->lock);
    *host = at ? (int64_t)at : -1;
    return MIN(bytes, (int64_t)(s->block_size - offset % s->block_size));
}

static int coroutine_fn vpc_co_preadv(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags)
{
    BDRVVpcState *s = bs->opaque;

    if (s->fixed) {
        return vpc_co_read_fixed(bs, offset, bytes, qiov, 0);
    }
    return bdrv_co_preadv_mapped(bs, offset, bytes, qiov, vpc_piece);
}

/*
 * As QEMU: a fixed disk is data where its file is, the file's holes
 * read as zeroes; an allocated block is data
 * up to its end, never past it (a bitmap lies between blocks); runs of
 * unallocated blocks read as zeroes.
 */
static int coroutine_fn vpc_co_block_status(BlockDriverState *bs,
                                            bool want_zero, int64_t offset,
                                            int64_t bytes, int64_t *pnum,
                                            int64_t *map,
                                            BlockDriverState **file)
{
    BDRVVpcState *s = bs->opaque;
    uint64_t at;

    if (s->fixed) {
        *pnum = bytes;
        *map = offset;
        *file = bs->file->bs;
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID |
               BDRV_BLOCK_RECURSE;
    }
    qemu_co_mutex_lock(&s->lock);
    at = vpc_block_offset(s, offset);
    *pnum = 0;
    do {
        int64_t n = MIN(bytes, (int64_t)(s->block_size -
                                         offset % s->block_size));

        *pnum += n;
        offset += n;
        bytes -= n;
    } while (!at && bytes > 0 && !vpc_block_offset(s, offset));
    qemu_co_mutex_unlock(&s->lock);
    if (!at) {
        return BDRV_BLOCK_ZERO;
    }
    *map = at;
    *file = bs->file->bs;
    return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
}

static int64_t vpc_getlength(BlockDriverState *bs)
{
    BDRVVpcState *s = bs->opaque;

    return s->disk_size;
}

static int vpc_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    BDRVVpcState *s = bs->opaque;

    /* as QEMU: where a dynamic header was read, its block size, as an int */
    if (s->bat) {
        bdi->cluster_size = (int32_t)(uint32_t)s->block_size;
    }
    return 0;
}

static int vpc_has_zero_init(BlockDriverState *bs)
{
    BDRVVpcState *s = bs->opaque;

    return s->fixed ? bdrv_has_zero_init(bs->file->bs) : 1;
}

static const char *const vpc_strong_runtime_opts[] = {
    "force_size_calc",
    NULL,
};

static const BlockDriver bdrv_vpc = {
    .format_name                    = "vpc",
    .instance_size                  = sizeof(BDRVVpcState),
    .is_format                      = true,
    .runtime_opts                   = &qapi_opts_vpc_runtime,
    .strong_runtime_opts            = vpc_strong_runtime_opts,
    .bdrv_probe                     = vpc_probe,
    .bdrv_open                      = vpc_open,
    .bdrv_close                     = vpc_close,
    .bdrv_co_preadv                 = vpc_co_preadv,
    .bdrv_co_pwritev                = vpc_co_pwritev,
    .bdrv_has_zero_init             = vpc_has_zero_init,
    .create_opts                    = &qapi_opts_vpc_create,
    .bdrv_co_create_opts            = vpc_co_create_opts,
    .bdrv_co_create_on_node         = vpc_co_create_on_node,
    .bdrv_co_block_status           = vpc_co_block_status,
    .bdrv_getlength                 = vpc_getlength,
    .bdrv_get_info                  = vpc_get_info,
    .request_alignment              = VPC_SECTOR,
};

block_init(bdrv_register, bdrv_vpc)
