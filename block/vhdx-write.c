/*
 * vhdx writing, as QEMU 7.2's driver writes: the first write of an open
 * updates both headers (the session's file write GUID, a new data write
 * GUID in each); a write to a block that has no data allocates one at
 * the end of the file, rounded up to 1 MiB, grows the file over it (so
 * that the block reads as zeroes around the request), writes the
 * request, and records the block in the BAT through the log
 * (vhdx_log_write_bat).  Writes to allocated blocks go in place.
 * Differencing images are refused at open, as QEMU cannot write them
 * either, so no sector bitmap is ever written.  The invariants are
 * block/vhdx.c's.
 */
#include "block/vhdx.h"
#include "util/crc32c.h"

void vhdx_random_guid(uint8_t *guid)
{
    for (int w = 0; w < 4; w++) {
        uint32_t r = g_random_int();

        memcpy(guid + 4 * w, &r, 4);
    }
    guid[6] = (guid[6] & 0x0f) | 0x40;
    guid[8] = (guid[8] & 0x3f) | 0x80;
}

/*
 * Writes @h to @slot with its checksum, synced (in or out of a
 * coroutine: open's replay updates the headers too).
 */
static int vhdx_write_header(BlockDriverState *bs, const VhdxHeader *h,
                             int slot)
{
    g_autofree uint8_t *buf = g_malloc0(VHDX_HEADER_SIZE);
    VhdxHeader le = *h;
    uint32_t crc;

    le.checksum = 0;
    le.sequence_number = GUINT64_TO_LE(le.sequence_number);
    le.log_version = GUINT16_TO_LE(le.log_version);
    le.version = GUINT16_TO_LE(le.version);
    le.log_length = GUINT32_TO_LE(le.log_length);
    le.log_offset = GUINT64_TO_LE(le.log_offset);
    memcpy(buf, &le, sizeof(le));
    crc = GUINT32_TO_LE(crc32c(0, buf, VHDX_HEADER_SIZE));
    memcpy(buf + 4, &crc, 4);
    return bdrv_pwrite_sync(bs->file, slot ? VHDX_HEADER2_OFFSET
                                           : VHDX_HEADER1_OFFSET,
                            VHDX_HEADER_SIZE, buf, 0);
}

int vhdx_update_headers(BlockDriverState *bs, BDRVVhdxState *s,
                        VhdxHeaderUpdate what, const uint8_t *log_guid)
{
    for (int i = 0; i < 2; i++) {
        int slot = !s->current_header_slot;
        VhdxHeader h = s->header;
        int ret;

        h.sequence_number++;
        memcpy(h.file_write_guid, s->session_guid, 16);
        if (what & VHDX_HEADER_NEW_DATA) {
            vhdx_random_guid(s->data_write_guid[slot]);
        }
        memcpy(h.data_write_guid, s->data_write_guid[slot], 16);
        if (what & VHDX_HEADER_SET_LOG) {
            memcpy(h.log_guid, log_guid, 16);
        }
        ret = vhdx_write_header(bs, &h, slot);
        if (ret < 0) {
            return ret;
        }
        s->header = h;
        s->current_header_slot = slot;
    }
    return 0;
}

int vhdx_user_visible_write(BlockDriverState *bs, BDRVVhdxState *s)
{
    if (!s->first_visible_write) {
        return 0;
    }
    s->first_visible_write = false;
    return vhdx_update_headers(bs, s, VHDX_HEADER_NEW_DATA, NULL);
}

/*
 * Allocates payload block @block (BAT entry @index, not fully present)
 * at the end of the file and writes @n bytes of @qiov from @done at
 * @in_block of it; called with s->lock held.
 */
static int coroutine_fn vhdx_allocate_block(BlockDriverState *bs,
                                            uint64_t index,
                                            uint64_t in_block, int64_t n,
                                            QEMUIOVector *qiov, size_t done)
{
    BDRVVhdxState *s = bs->opaque;
    uint64_t old_entry = s->bat[index];
    bool need_zero = (old_entry & VHDX_BAT_STATE_MASK) == VHDX_BLOCK_ZERO;
    int64_t len = bdrv_getlength(bs->file->bs);
    uint64_t new_offset;
    int ret;

    if (len < 0) {
        return len;
    }
    new_offset = ROUND_UP((uint64_t)len, VHDX_MIB);
    /* a file offset is an int64_t */
    if (new_offset > INT64_MAX - s->block_size) {
        error_report("vhdx: no room for another block past offset %" PRIu64,
                     new_offset);
        return -EINVAL;
    }
    /* invariant 3: a structure that reaches past the file's end stays */
    for (unsigned int r = 0; r < s->nranges; r++) {
        if (new_offset < s->ranges[r].end &&
            new_offset + s->block_size > s->ranges[r].start) {
            error_report("vhdx: a new block at %" PRIu64 " would overlap "
                         "the image's structure at %" PRIu64 "-%" PRIu64,
                         new_offset, s->ranges[r].start, s->ranges[r].end);
            return -EIO;
        }
    }
    /* as QEMU: the file grown over the block reads as zeroes, if it can */
    ret = bdrv_co_truncate(bs->file, new_offset + s->block_size, false,
                           PREALLOC_MODE_OFF,
                           need_zero ? BDRV_REQ_ZERO_WRITE : 0, NULL);
    if (ret == -ENOTSUP && need_zero) {
        ret = bdrv_co_truncate(bs->file, new_offset + s->block_size, false,
                               PREALLOC_MODE_OFF, 0, NULL);
    } else {
        need_zero = false;
    }
    if (ret < 0) {
        return ret;
    }
    if (need_zero) {
        /* a ZERO block must read as zeroes around the request */
        g_autofree uint8_t *buf = g_try_malloc0(s->block_size);
        QEMUIOVector whole;

        if (!buf) {
            return -ENOMEM;
        }
        qemu_iovec_to_buf(qiov, done, buf + in_block, n);
        qemu_iovec_init_buf(&whole, buf, s->block_size);
        ret = bdrv_co_pwritev(bs->file, new_offset, s->block_size, &whole,
                              0);
    } else {
        ret = bdrv_co_pwritev_part(bs->file, new_offset + in_block, n, qiov,
                                   done, 0);
    }
    if (ret < 0) {
        return ret;
    }
    s->bat[index] = new_offset | VHDX_BLOCK_FULLY_PRESENT;
    ret = vhdx_log_write_bat(bs, s, index);
    if (ret < 0) {
        /* the BAT on disk or in the log holds either: the data is written */
        s->bat[index] = old_entry;
    }
    return ret;
}

/* Writes to one block: in place if it has data, else allocated. */
static int coroutine_fn vhdx_write_block(BlockDriverState *bs,
                                         uint64_t block, uint64_t in_block,
                                         int64_t n, QEMUIOVector *qiov,
                                         size_t done)
{
    BDRVVhdxState *s = bs->opaque;
    uint64_t index = block + block / s->chunk_ratio;
    uint64_t entry;
    int ret;

    /* invariant 4 */
    assert(index < s->bat_entries);
    qemu_co_mutex_lock(&s->lock);
    entry = index < s->bat_loaded ? s->bat[index] : 0;
    switch (entry & VHDX_BAT_STATE_MASK) {
    case VHDX_BLOCK_FULLY_PRESENT:
        qemu_co_mutex_unlock(&s->lock);
        /* invariant 3: the block is inside the file */
        return bdrv_co_pwritev_part(bs->file, (entry & VHDX_BAT_OFFSET_MASK)
                                    + in_block, n, qiov, done, 0);
    case VHDX_BLOCK_PARTIALLY_PRESENT:
    case VHDX_BLOCK_RESERVED:
        ret = -EIO;
        break;
    default:
        if (index >= s->bat_loaded) {
            /* invariant 4: the BAT's sector would be past the file */
            error_report("vhdx: BAT entry %" PRIu64 " lies past the end of "
                         "the file: cannot allocate its block", index);
            ret = -EIO;
            break;
        }
        ret = vhdx_allocate_block(bs, index, in_block, n, qiov, done);
        break;
    }
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* One piece of a write: what of the request lies in one block. */
static int64_t coroutine_fn vhdx_write_piece(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             QEMUIOVector *qiov, size_t done,
                                             void *opaque)
{
    BDRVVhdxState *s = bs->opaque;
    uint64_t block = (uint64_t)offset / s->block_size;
    uint64_t in_block = (uint64_t)offset % s->block_size;
    int64_t n = MIN((int64_t)(s->block_size - in_block), bytes);
    int ret = vhdx_write_block(bs, block, in_block, n, qiov, done);

    return ret < 0 ? ret : n;
}

int coroutine_fn vhdx_co_pwritev(BlockDriverState *bs, int64_t offset,
                                 int64_t bytes, QEMUIOVector *qiov,
                                 BdrvRequestFlags flags)
{
    BDRVVhdxState *s = bs->opaque;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    ret = vhdx_user_visible_write(bs, s);
    qemu_co_mutex_unlock(&s->lock);
    if (ret < 0) {
        return ret;
    }
    return bdrv_co_each_piece(bs, offset, bytes, qiov, vhdx_write_piece, NULL);
}
