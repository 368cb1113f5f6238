/*
 * vdi: the format driver for VirtualBox disk images (VDI header version
 * 1.1), read-write, as QEMU 7.2's.  Opening, reading, block status,
 * info and check live here; block allocation in block/vdi-write.c,
 * creation in block/vdi-create.c.
 *
 * The file is a 512-byte sector holding the pre-header (a text line,
 * the signature, the version) and the header, then the block map at
 * offset_bmap (one little-endian uint32 per 1 MiB block of the disk: the
 * block's index in the data area, or VDI_UNALLOCATED / VDI_DISCARDED,
 * both reading as zeroes), then the data area at offset_data: blocks in
 * the order they were first written.  A static image has every block
 * allocated at creation, block i at index i.
 *
 * Invariants:
 *  1. After open the header passed QEMU's checks: block size 1 MiB,
 *     sector size 512, disk_size <= blocks_in_image * 1 MiB, blocks_in_image
 *     <= VDI_BLOCKS_IN_IMAGE_MAX, and s->bmap holds blocks_in_image entries
 *     (whole sectors of them).  Every disk offset therefore has an entry,
 *     and the file offset computed from any entry (offset_data < 2^32,
 *     entry < 2^32 blocks of 2^20 bytes) is below 2^53: no overflow
 *     whatever the entries say.
 *  2. The node is writable only if the header sector, the block map and
 *     the data area do not overlap (vdi_check_writable): a data block
 *     written never lands on the header or the map, and the map's sectors
 *     written never land on the header.
 *  3. Allocation holds alloc_lock: blocks_allocated and an entry that
 *     changes from unallocated to an index change together, once the
 *     block's data is in the file, so a read sees either zeroes or the
 *     written block; the new index is below VDI_BLOCKS_IN_IMAGE_MAX.
 */
#include "block/vdi.h"
#include "qapi/qapi-opts.h"

static int vdi_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    const VdiHeader *h = (const VdiHeader *)buf;

    /* QEMU looks at the signature alone */
    if (buf_size < (int)sizeof(*h)) {
        return 0;
    }
    return GUINT32_FROM_LE(h->signature) == VDI_SIGNATURE ? 100 : 0;
}

static bool vdi_uuid_is_null(const uint8_t uuid[16])
{
    static const uint8_t null_uuid[16];

    return !memcmp(uuid, null_uuid, sizeof(null_uuid));
}

/* QEMU's checks of the header, in QEMU's order and words (inv. 1). */
static int vdi_check_header(const VdiHeader *h, Error **errp)
{
    uint32_t version = GUINT32_FROM_LE(h->version);
    uint32_t offset_bmap = GUINT32_FROM_LE(h->offset_bmap);
    uint32_t offset_data = GUINT32_FROM_LE(h->offset_data);
    uint32_t sector_size = GUINT32_FROM_LE(h->sector_size);
    uint32_t block_size = GUINT32_FROM_LE(h->block_size);
    uint32_t blocks = GUINT32_FROM_LE(h->blocks_in_image);
    uint64_t disk_size = GUINT64_FROM_LE(h->disk_size);
    uint64_t room = (uint64_t)blocks * block_size;

    /* QEMU looks at the size first, before the signature */
    if (disk_size > VDI_DISK_SIZE_MAX) {
        error_setg(errp, "Unsupported VDI image size (size is 0x%" PRIx64
                   ", max supported is 0x%" PRIx64 ")", disk_size,
                   VDI_DISK_SIZE_MAX);
        return -ENOTSUP;
    }
    /* 'VBoxManage convertfromraw' writes sizes that are no whole sectors */
    disk_size = ROUND_UP(disk_size, VDI_SECTOR);
    if (GUINT32_FROM_LE(h->signature) != VDI_SIGNATURE) {
        error_setg(errp, "Image not in VDI format (bad signature %08" PRIx32
                   ")", GUINT32_FROM_LE(h->signature));
    } else if (version != VDI_VERSION_1_1) {
        error_setg(errp, "unsupported VDI image (version %" PRIu32 ".%"
                   PRIu32 ")", version >> 16, version & 0xffff);
    } else if (offset_bmap % VDI_SECTOR) {
        error_setg(errp, "unsupported VDI image (unaligned block map offset "
                   "0x%" PRIx32 ")", offset_bmap);
    } else if (offset_data % VDI_SECTOR) {
        error_setg(errp, "unsupported VDI image (unaligned data offset 0x%"
                   PRIx32 ")", offset_data);
    } else if (sector_size != VDI_SECTOR) {
        error_setg(errp, "unsupported VDI image (sector size %" PRIu32
                   " is not %u)", sector_size, VDI_SECTOR);
    } else if (block_size != VDI_BLOCK_SIZE) {
        error_setg(errp, "unsupported VDI image (block size %" PRIu32
                   " is not %u)", block_size, VDI_BLOCK_SIZE);
    } else if (disk_size > room) {
        error_setg(errp, "unsupported VDI image (disk size %" PRIu64
                   ", image bitmap has room for %" PRIu64 ")", disk_size,
                   room);
    } else if (!vdi_uuid_is_null(h->uuid_link)) {
        error_setg(errp, "unsupported VDI image (non-NULL link UUID)");
    } else if (!vdi_uuid_is_null(h->uuid_parent)) {
        error_setg(errp, "unsupported VDI image (non-NULL parent UUID)");
    } else if (blocks > VDI_BLOCKS_IN_IMAGE_MAX) {
        error_setg(errp, "unsupported VDI image (too many blocks %" PRIu32
                   ", max is %" PRIu32 ")", blocks, VDI_BLOCKS_IN_IMAGE_MAX);
    } else {
        return 0;
    }
    return -ENOTSUP;
}

static int vdi_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVVdiState *s = bs->opaque;
    VdiHeader *h = &s->header;
    int64_t file_len;
    uint64_t in_file;
    int ret;

    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    ret = bdrv_pread(bs->file, 0, sizeof(*h), h, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VDI header");
        return ret;
    }
    ret = vdi_check_header(h, errp);
    if (ret < 0) {
        return ret;
    }
    /* as QEMU, the rounded size is the one written back */
    s->disk_size = ROUND_UP(GUINT64_FROM_LE(h->disk_size), VDI_SECTOR);
    h->disk_size = GUINT64_TO_LE(s->disk_size);
    s->blocks_in_image = GUINT32_FROM_LE(h->blocks_in_image);
    s->blocks_allocated = GUINT32_FROM_LE(h->blocks_allocated);
    s->bmap_offset = GUINT32_FROM_LE(h->offset_bmap);
    s->data_offset = GUINT32_FROM_LE(h->offset_data);
    s->bmap_bytes = ROUND_UP((uint64_t)s->blocks_in_image * sizeof(uint32_t),
                             VDI_SECTOR);
    s->is_static = GUINT32_FROM_LE(h->image_type) == VDI_TYPE_STATIC;
    qemu_co_mutex_init(&s->alloc_lock);

    /*
     * inv. 1: the part of the map the file holds, in whole sectors (at most
     * 2 GiB, the format's own limit); QEMU reads the rest as zeroes too
     */
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the file's length");
        return file_len;
    }
    in_file = (uint64_t)file_len > s->bmap_offset ?
              ROUND_UP((uint64_t)file_len - s->bmap_offset, VDI_SECTOR) : 0;
    in_file = MIN(in_file, s->bmap_bytes);
    s->bmap_entries = MIN(in_file / sizeof(uint32_t), s->blocks_in_image);
    s->bmap = g_try_malloc0(MAX(in_file, VDI_SECTOR));
    if (!s->bmap) {
        error_setg(errp, "Could not allocate the VDI block map of %" PRIu32
                   " entries", s->blocks_in_image);
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, s->bmap_offset, in_file, s->bmap, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the VDI block map");
        g_clear_pointer(&s->bmap, g_free);
        return ret;
    }
    if (flags & BDRV_O_RDWR) {
        Error *local_err = NULL;

        /* inv. 2 */
        ret = vdi_check_writable(bs, &local_err);
        if (ret == -EACCES && (flags & BDRV_O_AUTO_RDONLY)) {
            error_free(local_err);
            bs->read_only = true;
        } else if (ret < 0) {
            error_propagate(errp, local_err);
            g_clear_pointer(&s->bmap, g_free);
            return ret;
        }
    }
    return 0;
}

static void vdi_close(BlockDriverState *bs)
{
    BDRVVdiState *s = bs->opaque;

    g_clear_pointer(&s->bmap, g_free);
}

static int vdi_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    if (state->flags & BDRV_O_RDWR) {
        return vdi_check_writable(state->bs, errp);
    }
    return 0;
}

/*
 * Where @offset of the disk lies: returns the bytes from @offset to the end
 * of its block (at most @bytes) and sets *@at to the file offset, or to -1
 * where the block reads as zeroes.
 */
static int64_t vdi_map(const BDRVVdiState *s, int64_t offset, int64_t bytes,
                       int64_t *at)
{
    uint64_t block = (uint64_t)offset / VDI_BLOCK_SIZE;
    uint64_t in_block = (uint64_t)offset % VDI_BLOCK_SIZE;
    /* inv. 1: every offset of the disk has an entry */
    uint32_t entry = vdi_entry(s, block);

    *at = VDI_IS_ALLOCATED(entry) ?
          (int64_t)(s->data_offset + (uint64_t)entry * VDI_BLOCK_SIZE +
                    in_block) : -1;
    return MIN((int64_t)(VDI_BLOCK_SIZE - in_block), bytes);
}

/* The map bdrv_co_preadv_mapped() reads by. */
static int64_t coroutine_fn vdi_piece(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, int64_t *host)
{
    return vdi_map(bs->opaque, offset, bytes, host);
}

static int coroutine_fn vdi_co_preadv(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags)
{
    return bdrv_co_preadv_mapped(bs, offset, bytes, qiov, vdi_piece);
}

static int coroutine_fn vdi_co_block_status(BlockDriverState *bs,
                                            bool want_zero, int64_t offset,
                                            int64_t bytes, int64_t *pnum,
                                            int64_t *map,
                                            BlockDriverState **file)
{
    BDRVVdiState *s = bs->opaque;
    int64_t at;

    *pnum = vdi_map(s, offset, bytes, &at);
    if (at < 0) {
        return BDRV_BLOCK_ZERO;
    }
    *map = at;
    *file = bs->file->bs;
    /* a static image's blocks may be holes of the file: QEMU asks it */
    return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID |
           (s->is_static ? BDRV_BLOCK_RECURSE : 0);
}

/*
 * As QEMU's check: every allocated entry must be below blocks_in_image and
 * used once, and the header must count them.  No repair (QEMU has none).
 */
static int coroutine_fn vdi_co_check(BlockDriverState *bs,
                                     BdrvCheckResult *result,
                                     BdrvCheckMode fix)
{
    BDRVVdiState *s = bs->opaque;
    g_autofree uint8_t *used = NULL;    /* a bit per data block */
    uint32_t counted = 0;

    if (fix) {
        return -ENOTSUP;
    }
    used = g_try_malloc0(s->blocks_in_image / 8 + 1);
    if (!used) {
        result->check_errors++;
        return -ENOMEM;
    }
    for (uint32_t block = 0; block < s->blocks_in_image; block++) {
        uint32_t entry = vdi_entry(s, block);

        if (!VDI_IS_ALLOCATED(entry)) {
            continue;
        }
        if (entry >= s->blocks_in_image) {
            fprintf(stderr, "ERROR: block index %" PRIu32 " too large, is %"
                    PRIu32 "\n", block, entry);
            result->corruptions++;
            continue;
        }
        counted++;
        if (used[entry / 8] & (1u << (entry % 8))) {
            fprintf(stderr, "ERROR: block index %" PRIu32 " also used by %"
                    PRIu32 "\n", entry, entry);
            result->corruptions++;
        } else {
            used[entry / 8] |= 1u << (entry % 8);
        }
    }
    if (counted != s->blocks_allocated) {
        fprintf(stderr, "ERROR: allocated blocks mismatch, is %" PRIu32
                ", should be %" PRIu32 "\n", counted, s->blocks_allocated);
        result->corruptions++;
    }
    return 0;
}

static int64_t vdi_getlength(BlockDriverState *bs)
{
    BDRVVdiState *s = bs->opaque;

    return s->disk_size;
}

static int vdi_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    bdi->cluster_size = VDI_BLOCK_SIZE;
    return 0;
}

static const BlockDriver bdrv_vdi = {
    .format_name                    = "vdi",
    .instance_size                  = sizeof(BDRVVdiState),
    .is_format                      = true,
    .bdrv_probe                     = vdi_probe,
    .bdrv_open                      = vdi_open,
    .bdrv_close                     = vdi_close,
    .bdrv_reopen_prepare            = vdi_reopen_prepare,
    .bdrv_co_preadv                 = vdi_co_preadv,
    .bdrv_co_pwritev                = vdi_co_pwritev,
    .bdrv_has_zero_init             = vdi_has_zero_init,
    .create_opts                    = &qapi_opts_vdi_create,
    .bdrv_co_create_opts            = vdi_co_create_opts,
    .bdrv_co_create_on_node         = vdi_co_create_on_node,
    .bdrv_co_block_status           = vdi_co_block_status,
    .bdrv_co_check                  = vdi_co_check,
    .bdrv_getlength                 = vdi_getlength,
    .bdrv_get_info                  = vdi_get_info,
    .request_alignment              = VDI_SECTOR,
};

block_init(bdrv_register, bdrv_vdi)
