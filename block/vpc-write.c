/*
 * vpc: writing.  A fixed disk is written in place; a dynamic disk's
 * block is allocated at the first write to it, as QEMU 7.2 does it, so
 * that the files are the same byte for byte: its bitmap (all ones) goes
 * where the footer was, the footer after the block's data (which stays
 * a hole until written), then the block's BAT entry (block/vpc.c
 * invariants 2 and 3).  A write to a block allocated before sets its
 * bitmap to all ones, once per block in a row, as QEMU does.  Write
 * zeroes writes zeroes (QEMU's fallback) and discard does nothing: VHD
 * has no way to free a block.
 */
#include "block/vpc.h"

/* Writes @len bytes of @buf at @offset of the file, then flushes it. */
static int coroutine_fn vpc_co_pwrite_sync(BlockDriverState *bs,
                                           uint64_t offset, uint64_t len,
                                           const void *buf)
{
    QEMUIOVector qiov;
    int ret;

    qemu_iovec_init_buf(&qiov, (void *)buf, len);
    ret = bdrv_co_pwritev(bs->file, offset, len, &qiov, 0);
    return ret < 0 ? ret : bdrv_co_flush(bs->file->bs);
}

static int coroutine_fn vpc_set_bitmap(BlockDriverState *bs,
                                       uint64_t bitmap_offset)
{
    BDRVVpcState *s = bs->opaque;
    g_autofree uint8_t *bitmap = NULL;
    int ret;

    /* blocks under 4 KiB have no bitmap (QEMU's rounding down) */
    if (!s->bitmap_size) {
        s->last_bitmap = bitmap_offset;
        return 0;
    }
    bitmap = g_try_malloc(s->bitmap_size);
    if (!bitmap) {
        return -ENOMEM;
    }
    memset(bitmap, 0xff, s->bitmap_size);
    ret = vpc_co_pwrite_sync(bs, bitmap_offset, s->bitmap_size, bitmap);
    if (ret == 0) {
        s->last_bitmap = bitmap_offset;
    }
    return ret;
}

/* Allocates the block of disk byte @offset (lock held); its data offset. */
static int64_t coroutine_fn vpc_alloc_block(BlockDriverState *bs,
                                            uint64_t offset)
{
    BDRVVpcState *s = bs->opaque;
    uint64_t index = offset / s->block_size;
    uint64_t block = s->free_offset;
    uint32_t entry;
    int ret;

    /* a BAT entry counts sectors in 32 bits */
    if (block / VPC_SECTOR >= VPC_BAT_UNALLOCATED) {
        error_report("vpc: no room for block %" PRIu64 " below 2 TiB of "
                     "file", index);
        return -ENOSPC;
    }
    /* invariant 3: the bitmap and footer, then the entry */
    ret = vpc_set_bitmap(bs, block);
    if (ret < 0) {
        return ret;
    }
    /* invariant 2: free_offset only grows */
    s->free_offset = block + s->bitmap_size + s->block_size;
    ret = vpc_co_pwrite_sync(bs, s->free_offset, sizeof(s->footer),
                             &s->footer);
    if (ret < 0) {
        return ret;
    }
    entry = GUINT32_TO_BE(block / VPC_SECTOR);
    ret = vpc_co_pwrite_sync(bs, s->bat_offset + index * sizeof(entry),
                             sizeof(entry), &entry);
    if (ret < 0) {
        return ret;
    }
    s->bat[index] = block / VPC_SECTOR;
    return vpc_block_offset(s, offset);
}

/* Where the bytes at disk @offset go (lock held): allocated if need be. */
static int64_t coroutine_fn vpc_write_offset(BlockDriverState *bs,
                                             uint64_t offset)
{
    BDRVVpcState *s = bs->opaque;
    uint64_t at = vpc_block_offset(s, offset);
    uint64_t bitmap;
    int ret;

    if (!at) {
        return vpc_alloc_block(bs, offset);
    }
    bitmap = at - s->bitmap_size - offset % s->block_size;
    if (bitmap != s->last_bitmap) {
        ret = vpc_set_bitmap(bs, bitmap);
        if (ret < 0) {
            return ret;
        }
    }
    return at;
}

/* One piece of a write on a dynamic disk: what lies in one block. */
static int64_t coroutine_fn vpc_write_piece(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov, size_t done,
                                            void *opaque)
{
    BDRVVpcState *s = bs->opaque;
    int64_t n = MIN(bytes, (int64_t)(s->block_size - offset % s->block_size));
    int64_t at = vpc_write_offset(bs, offset);
    int ret;

    if (at < 0) {
        return at;
    }
    ret = bdrv_co_pwritev_part(bs->file, at, n, qiov, done, 0);
    return ret < 0 ? ret : n;
}

int coroutine_fn vpc_co_pwritev(BlockDriverState *bs, int64_t offset,
                                int64_t bytes, QEMUIOVector *qiov,
                                BdrvRequestFlags flags)
{
    BDRVVpcState *s = bs->opaque;
    int ret;

    if (s->fixed) {
        /* invariant 4 */
        if ((uint64_t)(offset + bytes) > s->fixed_data_end) {
            error_report("vpc: a write up to byte %" PRId64 " would reach "
                         "the footer of the fixed disk at %" PRIu64,
                         offset + bytes, s->fixed_data_end);
            return -EIO;
        }
        return bdrv_co_pwritev(bs->file, offset, bytes, qiov, 0);
    }
    qemu_co_mutex_lock(&s->lock);
    ret = bdrv_co_each_piece(bs, offset, bytes, qiov, vpc_write_piece, NULL);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}
