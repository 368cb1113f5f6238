/*
 * Block status: which ranges of a node hold data, read as zeroes, or are
 * left to the backing chain, and where in which node they are stored.
 *
 * A driver answers for its own layer (drv->bdrv_co_block_status, on
 * ranges rounded out to its request_alignment); this file clips the answer
 * to the caller's range, follows BDRV_BLOCK_RAW and filters down to the
 * node that stores the data, asks the file for precision when the driver
 * says BDRV_BLOCK_RECURSE, and walks the backing chain for the "above"
 * forms.  A query is counted in the node's in_flight while it is in the
 * driver (io.c's invariant 1), so that drain waits for it.
 *
 * All functions run in coroutine context, in the node's AioContext thread.
 */

#include "block/block_int.h"
#include "io-internal.h"

static bool bdrv_is_protocol_driver(const BlockDriver *drv)
{
    return drv->protocol_name || !drv->is_format;
}

int coroutine_fn bdrv_co_block_status(BlockDriverState *bs, bool want_zero,
                                      int64_t offset, int64_t bytes,
                                      int64_t *pnum, int64_t *map,
                                      BlockDriverState **file)
{
    const BlockDriver *drv;
    BlockDriverState *local_file = NULL;
    int64_t local_map = 0;
    int64_t total, align, aligned_offset, aligned_bytes;
    int ret;

    *pnum = 0;
    if (!bs || !bs->drv) {
        return -ENOMEDIUM;
    }
    drv = bs->drv;
    if (offset < 0 || bytes < 0) {
        return -EIO;
    }
    total = bdrv_getlength(bs);
    if (total < 0) {
        return total;
    }
    if (offset >= total) {
        ret = BDRV_BLOCK_EOF;
        goto early_out;
    }
    if (bytes == 0) {
        ret = 0;
        goto early_out;
    }
    bytes = MIN(bytes, total - offset);

    if (!drv->bdrv_co_block_status) {
        *pnum = bytes;
        if (drv->is_filter && bs->file) {
            /* a filter's data is its child's, at the same offset */
            ret = bdrv_co_block_status(bs->file->bs, want_zero, offset,
                                       bytes, pnum, &local_map, &local_file);
            goto eof_out;
        }
        ret = BDRV_BLOCK_DATA | BDRV_BLOCK_ALLOCATED;
        if (bdrv_is_protocol_driver(drv)) {
            ret |= BDRV_BLOCK_OFFSET_VALID;
            local_map = offset;
            local_file = bs;
        }
        goto eof_out;
    }

    bdrv_inc_in_flight(bs);
    align = bdrv_request_align(bs);
    aligned_offset = QEMU_ALIGN_DOWN(offset, align);
    aligned_bytes = QEMU_ALIGN_UP(offset + bytes, align) - aligned_offset;
    ret = drv->bdrv_co_block_status(bs, want_zero, aligned_offset,
                                    aligned_bytes, pnum, &local_map,
                                    &local_file);
    if (ret < 0) {
        *pnum = 0;
        bdrv_dec_in_flight(bs);
        goto early_out;
    }
    assert(*pnum > 0 && *pnum <= aligned_bytes);
    /* report for the caller's range, not the aligned one */
    *pnum -= offset - aligned_offset;
    if (*pnum > bytes) {
        *pnum = bytes;
    }
    if (ret & BDRV_BLOCK_OFFSET_VALID) {
        local_map += offset - aligned_offset;
    }

    if (ret & BDRV_BLOCK_RAW) {
        assert((ret & BDRV_BLOCK_OFFSET_VALID) && local_file);
        ret = bdrv_co_block_status(local_file, want_zero, local_map, *pnum,
                                   pnum, &local_map, &local_file);
        bdrv_dec_in_flight(bs);
        goto eof_out;
    }

    if (ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO)) {
        ret |= BDRV_BLOCK_ALLOCATED;
    } else if (drv->supports_backing) {
        BlockDriverState *cow = bs->backing ? bs->backing->bs : NULL;

        if (!cow) {
            ret |= BDRV_BLOCK_ZERO;
        } else if (want_zero) {
            int64_t cow_len = bdrv_getlength(cow);

            if (cow_len >= 0 && offset >= cow_len) {
                ret |= BDRV_BLOCK_ZERO;
            }
        }
    }

    if (want_zero && (ret & BDRV_BLOCK_RECURSE) && local_file &&
        local_file != bs && (ret & BDRV_BLOCK_DATA) &&
        !(ret & BDRV_BLOCK_ZERO) && (ret & BDRV_BLOCK_OFFSET_VALID)) {
        int64_t file_pnum;
        int ret2 = bdrv_co_block_status(local_file, want_zero, local_map,
                                        *pnum, &file_pnum, NULL, NULL);

        /* extra precision only: an error here changes nothing */
        if (ret2 >= 0) {
            if ((ret2 & BDRV_BLOCK_EOF) &&
                (!file_pnum || (ret2 & BDRV_BLOCK_ZERO))) {
                /* the file ends before the format's data: reads as zero */
                ret |= BDRV_BLOCK_ZERO;
            } else {
                *pnum = file_pnum;
                ret |= ret2 & BDRV_BLOCK_ZERO;
            }
        }
    }
    ret &= ~BDRV_BLOCK_RECURSE;
    bdrv_dec_in_flight(bs);

eof_out:
    if (ret >= 0 && offset + *pnum == total) {
        ret |= BDRV_BLOCK_EOF;
    }
early_out:
    if (file) {
        *file = local_file;
    }
    if (map) {
        *map = local_map;
    }
    return ret;
}

/* Whether the walk down a chain asks the base node too. */
typedef enum BdrvStatusBase {
    BDRV_STATUS_BASE_EXCLUDED,
    BDRV_STATUS_BASE_INCLUDED,
} BdrvStatusBase;

/*
 * Walks from @bs down the filter/backing chain to @base (asked too with
 * BDRV_STATUS_BASE_INCLUDED).  The first layer that has the range
 * allocated answers; *depth counts the layers asked.
 */
static int coroutine_fn bdrv_co_common_block_status_above(
    BlockDriverState *bs, BlockDriverState *base, BdrvStatusBase base_mode,
    bool want_zero, int64_t offset, int64_t bytes, int64_t *pnum,
    int64_t *map, BlockDriverState **file, int *depth)
{
    bool include_base = base_mode == BDRV_STATUS_BASE_INCLUDED;
    BlockDriverState *p;
    int64_t eof = 0;
    int dummy;
    int ret;

    if (!depth) {
        depth = &dummy;
    }
    *depth = 0;
    if (!include_base && bs == base) {
        *pnum = bytes;
        return 0;
    }
    ret = bdrv_co_block_status(bs, want_zero, offset, bytes, pnum, map, file);
    ++*depth;
    if (ret < 0 || *pnum == 0 || (ret & BDRV_BLOCK_ALLOCATED) || bs == base) {
        return ret;
    }
    if (ret & BDRV_BLOCK_EOF) {
        eof = offset + *pnum;
    }
    bytes = *pnum;

    for (p = bdrv_filter_or_cow_bs(bs); p && (include_base || p != base);
         p = bdrv_filter_or_cow_bs(p)) {
        ret = bdrv_co_block_status(p, want_zero, offset, bytes, pnum, map,
                                   file);
        ++*depth;
        if (ret < 0) {
            return ret;
        }
        if (*pnum == 0) {
            /*
             * This layer is shorter than the one above: past its end the
             * upper layer reads zeroes, as if they were allocated here.
             */
            *pnum = bytes;
            if (file) {
                *file = p;
            }
            ret = BDRV_BLOCK_ZERO | BDRV_BLOCK_ALLOCATED;
            break;
        }
        if (ret & BDRV_BLOCK_ALLOCATED) {
            /* this layer's EOF is not the top layer's */
            ret &= ~BDRV_BLOCK_EOF;
            break;
        }
        if (p == base) {
            break;
        }
        bytes = *pnum;
    }
    if (eof && offset + *pnum == eof) {
        ret |= BDRV_BLOCK_EOF;
    }
    return ret;
}

int coroutine_fn bdrv_co_block_status_above(BlockDriverState *bs,
                                            BlockDriverState *base,
                                            bool want_zero, int64_t offset,
                                            int64_t bytes, int64_t *pnum,
                                            int64_t *map,
                                            BlockDriverState **file,
                                            int *depth)
{
    return bdrv_co_common_block_status_above(bs, base,
                                             BDRV_STATUS_BASE_EXCLUDED,
                                             want_zero, offset, bytes, pnum,
                                             map, file, depth);
}

int coroutine_fn bdrv_co_is_allocated(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, int64_t *pnum)
{
    int64_t dummy;
    int ret;

    ret = bdrv_co_common_block_status_above(bs, bs,
                                            BDRV_STATUS_BASE_INCLUDED, false,
                                            offset, bytes,
                                            pnum ? pnum : &dummy, NULL, NULL,
                                            NULL);
    if (ret < 0) {
        return ret;
    }
    return !!(ret & BDRV_BLOCK_ALLOCATED);
}


bool coroutine_fn bdrv_co_is_zero_fast(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes)
{
    while (bytes > 0) {
        int64_t pnum;
        int ret = bdrv_co_common_block_status_above(bs, NULL,
                                                    BDRV_STATUS_BASE_EXCLUDED,
                                                    false, offset, bytes,
                                                    &pnum, NULL, NULL, NULL);

        if (ret < 0) {
            return false;
        }
        if (pnum == 0) {
            /* past the end of @bs itself: nothing to read there */
            return (ret & BDRV_BLOCK_EOF) != 0;
        }
        if (!(ret & BDRV_BLOCK_ZERO)) {
            return false;
        }
        offset += pnum;
        bytes -= pnum;
    }
    return true;
}
