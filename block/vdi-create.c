/*
 * vdi creation, as qemu-img create -f vdi writes it: the header sector,
 * the block map (sector-aligned, right after the header), then, for a
 * static image, every block allocated in order and the file grown to hold
 * them (sparse: the file's holes read as zeroes).  The image and
 * modification UUIDs are random, as in QEMU; everything else is fixed.
 */
#include "block/vdi.h"
#include "qapi/qapi-opts.h"
#include "qblock/block-backend.h"
#include "qblock/block-node.h"

void vdi_random_uuid(uint8_t uuid[16])
{
    for (int i = 0; i < 16; i += 4) {
        uint32_t r = g_random_int();

        memcpy(uuid + i, &r, sizeof(r));
    }
    /* version 4, RFC 4122 variant; the GUID order swaps the version word */
    uuid[7] = (uuid[7] & 0x0f) | 0x40;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
}

static void vdi_create_header(VdiHeader *h, uint64_t disk_size,
                              uint32_t blocks, uint64_t bmap_bytes,
                              bool is_static)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->text, VDI_TEXT, strlen(VDI_TEXT));
    h->signature = GUINT32_TO_LE(VDI_SIGNATURE);
    h->version = GUINT32_TO_LE(VDI_VERSION_1_1);
    h->header_size = GUINT32_TO_LE(VDI_HEADER_SIZE_1_1);
    h->image_type = GUINT32_TO_LE(is_static ? VDI_TYPE_STATIC
                                            : VDI_TYPE_DYNAMIC);
    h->offset_bmap = GUINT32_TO_LE(VDI_SECTOR);
    h->offset_data = GUINT32_TO_LE(VDI_SECTOR + bmap_bytes);
    h->sector_size = GUINT32_TO_LE(VDI_SECTOR);
    h->disk_size = GUINT64_TO_LE(disk_size);
    h->block_size = GUINT32_TO_LE(VDI_BLOCK_SIZE);
    h->blocks_in_image = GUINT32_TO_LE(blocks);
    h->blocks_allocated = GUINT32_TO_LE(is_static ? blocks : 0);
    vdi_random_uuid(h->uuid_image);
    vdi_random_uuid(h->uuid_last_snap);
}

static int vdi_create_write(BlockBackend *blk, uint64_t disk_size,
                            bool is_static, Error **errp)
{
    uint32_t blocks = DIV_ROUND_UP(disk_size, VDI_BLOCK_SIZE);
    uint64_t bmap_bytes = ROUND_UP((uint64_t)blocks * sizeof(uint32_t),
                                   VDI_SECTOR);
    uint64_t data_offset = VDI_SECTOR + bmap_bytes;
    g_autofree uint32_t *bmap = NULL;
    VdiHeader h;
    int ret;

    vdi_create_header(&h, disk_size, blocks, bmap_bytes, is_static);
    ret = blk_pwrite(blk, 0, sizeof(h), &h, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Error writing header");
        return ret;
    }
    if (bmap_bytes) {
        /* at most 2 GiB: the size is checked against VDI_DISK_SIZE_MAX */
        bmap = g_try_malloc0(bmap_bytes);
        if (!bmap) {
            error_setg(errp, "Could not allocate the block map");
            return -ENOMEM;
        }
        for (uint32_t i = 0; i < blocks; i++) {
            bmap[i] = GUINT32_TO_LE(is_static ? i : VDI_UNALLOCATED);
        }
        ret = blk_pwrite(blk, VDI_SECTOR, bmap_bytes, bmap, 0);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Error writing bmap");
            return ret;
        }
    }
    /* a node given to blockdev-create may have been longer */
    return blk_truncate(blk, data_offset + (is_static ?
                        (uint64_t)blocks * VDI_BLOCK_SIZE : 0), false,
                        PREALLOC_MODE_OFF, 0, errp);
}

/* Checks @size, then writes the image on @blk. */
static int vdi_create_on(BlockBackend *blk, uint64_t size, bool is_static,
                         Error **errp)
{
    /* as QEMU: after the file is made, which stays, empty */
    if (size > VDI_DISK_SIZE_MAX) {
        error_setg(errp, "Unsupported VDI image size (size is 0x%" PRIx64
                   ", max supported is 0x%" PRIx64 ")", size,
                   VDI_DISK_SIZE_MAX);
        return -ENOTSUP;
    }
    return vdi_create_write(blk, size, is_static, errp);
}

int coroutine_fn vdi_co_create_opts(const BlockDriver *drv,
                                    const char *filename, QemuOpts *opts,
                                    Error **errp)
{
    uint64_t size = ROUND_UP(qemu_opt_get_size(opts, "size", 0),
                             VDI_SECTOR);
    bool is_static = qemu_opt_get_bool(opts, "static", false);
    BlockBackend *blk;
    int ret;

    blk = bdrv_create_format_file(drv, filename, opts, errp);
    if (!blk) {
        return -EIO;
    }
    ret = vdi_create_on(blk, size, is_static, errp);
    /* a failed write removes the file; a refused size leaves it, empty */
    if (ret < 0 && ret != -ENOTSUP) {
        bdrv_delete_format_file(blk);
    }
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}

/* blockdev-create: QEMU's BlockdevCreateOptionsVdi (static is
 * preallocation=metadata there). */
int coroutine_fn vdi_co_create_on_node(const BlockDriver *drv,
                                       const BdrvCreateTarget *tgt,
                                       QemuOpts *opts, Error **errp)
{
    const char *prealloc = qemu_opt_get(opts, "preallocation");
    bool is_static = prealloc && !strcmp(prealloc, "metadata");
    BlockBackend *blk;
    int ret;

    if (prealloc && !is_static && strcmp(prealloc, "off")) {
        error_setg(errp, "Preallocation mode not supported for vdi");
        return -EINVAL;
    }
    blk = bdrv_create_format_on_node(tgt->file, errp);
    if (!blk) {
        return -EIO;
    }
    /* a node given to blockdev-create is the user's: never removed */
    ret = vdi_create_on(blk, qemu_opt_get_size(opts, "size", 0), is_static,
                        errp);
    blk_unref(blk);
    return ret < 0 ? ret : 0;
}
