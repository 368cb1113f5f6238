/*
 * vdi writing: a write to a block that has none takes the next index of
 * the data area, writes the whole block (the request's bytes, zeroes
 * around them, as QEMU does) and then the header's count and the block
 * map's sector.  The invariants are block/vdi.c's.
 */
#include "block/vdi.h"

static int coroutine_fn vdi_co_pwrite(BdrvChild *child, int64_t offset,
                                      int64_t bytes, const void *buf)
{
    QEMUIOVector qiov;

    qemu_iovec_init_buf(&qiov, (void *)buf, bytes);
    return bdrv_co_pwritev(child, offset, bytes, &qiov, 0);
}

/* Whether the image's layout lets writes stay in their places (inv. 2). */
int vdi_check_writable(BlockDriverState *bs, Error **errp)
{
    BDRVVdiState *s = bs->opaque;
    uint64_t bmap_end = s->bmap_offset + s->bmap_bytes;

    if (s->bmap_offset < VDI_SECTOR) {
        error_setg(errp, "VDI block map at 0x%" PRIx64 " overlaps the "
                   "header: the image can only be opened read-only",
                   s->bmap_offset);
        return -EACCES;
    }
    if (s->data_offset < VDI_SECTOR ||
        (s->data_offset < bmap_end && s->bmap_bytes)) {
        error_setg(errp, "VDI data area at 0x%" PRIx64 " overlaps the "
                   "header or the block map: the image can only be opened "
                   "read-only", s->data_offset);
        return -EACCES;
    }
    return 0;
}

/* The header's sector and the map's sector holding @block's entry. */
static int coroutine_fn vdi_write_metadata(BlockDriverState *bs,
                                           uint32_t block)
{
    BDRVVdiState *s = bs->opaque;
    uint64_t sector = (uint64_t)block * sizeof(uint32_t) / VDI_SECTOR;
    int ret;

    s->header.blocks_allocated = GUINT32_TO_LE(s->blocks_allocated);
    ret = vdi_co_pwrite(bs->file, 0, sizeof(s->header), &s->header);
    if (ret < 0) {
        return ret;
    }
    return vdi_co_pwrite(bs->file, s->bmap_offset + sector * VDI_SECTOR,
                         VDI_SECTOR, (uint8_t *)s->bmap + sector * VDI_SECTOR);
}

/*
 * Writes @n bytes of @qiov from @done to @in_block of a block that had
 * none when the request began: allocates it unless a request before
 * this one did (inv. 3).
 */
static int coroutine_fn vdi_allocate_block(BlockDriverState *bs,
                                           uint32_t block, uint64_t in_block,
                                           int64_t n, QEMUIOVector *qiov,
                                           size_t done)
{
    BDRVVdiState *s = bs->opaque;
    g_autofree uint8_t *buf = NULL;
    uint32_t entry;
    int ret;

    qemu_co_mutex_lock(&s->alloc_lock);
    entry = vdi_entry(s, block);
    if (VDI_IS_ALLOCATED(entry)) {
        qemu_co_mutex_unlock(&s->alloc_lock);
        return bdrv_co_pwritev_part(bs->file, s->data_offset +
                                    (uint64_t)entry * VDI_BLOCK_SIZE +
                                    in_block, n, qiov, done, 0);
    }
    if (s->blocks_allocated >= VDI_BLOCKS_IN_IMAGE_MAX) {
        error_report("vdi: the header counts %" PRIu32 " blocks allocated: "
                     "no room for another", s->blocks_allocated);
        ret = -ENOSPC;
        goto out;
    }
    buf = g_try_malloc0(VDI_BLOCK_SIZE);
    if (!buf) {
        ret = -ENOMEM;
        goto out;
    }
    qemu_iovec_to_buf(qiov, done, buf + in_block, n);
    entry = s->blocks_allocated;
    ret = vdi_co_pwrite(bs->file, s->data_offset +
                        (uint64_t)entry * VDI_BLOCK_SIZE, VDI_BLOCK_SIZE, buf);
    if (ret < 0) {
        goto out;
    }
    /* the entries past the loaded map read as 0, allocated: not here */
    assert(block < s->bmap_entries);
    s->bmap[block] = GUINT32_TO_LE(entry);
    s->blocks_allocated++;
    ret = vdi_write_metadata(bs, block);
out:
    qemu_co_mutex_unlock(&s->alloc_lock);
    return ret;
}

/* One piece of a write: what of the request lies in one block. */
static int64_t coroutine_fn vdi_write_piece(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov, size_t done,
                                            void *opaque)
{
    BDRVVdiState *s = bs->opaque;
    uint64_t block = (uint64_t)offset / VDI_BLOCK_SIZE;
    uint64_t in_block = (uint64_t)offset % VDI_BLOCK_SIZE;
    int64_t n = MIN((int64_t)(VDI_BLOCK_SIZE - in_block), bytes);
    uint32_t entry;
    int ret;

    /* inv. 1: every offset of the disk has an entry */
    entry = vdi_entry(s, block);
    if (VDI_IS_ALLOCATED(entry)) {
        ret = bdrv_co_pwritev_part(bs->file, s->data_offset +
                                   (uint64_t)entry * VDI_BLOCK_SIZE +
                                   in_block, n, qiov, done, 0);
    } else {
        ret = vdi_allocate_block(bs, block, in_block, n, qiov, done);
    }
    return ret < 0 ? ret : n;
}

int coroutine_fn vdi_co_pwritev(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags)
{
    return bdrv_co_each_piece(bs, offset, bytes, qiov, vdi_write_piece, NULL);
}

/* As QEMU: a dynamic image reads as zeroes; a static one as its file. */
int vdi_has_zero_init(BlockDriverState *bs)
{
    BDRVVdiState *s = bs->opaque;

    return s->is_static ? bdrv_has_zero_init(bs->file->bs) : 1;
}
