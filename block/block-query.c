/*
 * The queries of a node that need no request (those that do are in
 * block/io.c): its length, whether it reads as zeroes when new, the
 * allocated size of its file, its driver's information, names, flags and
 * context, the node below its filters, and buffer alignment.
 *
 * Main loop thread, or the node's own context (threading rule 2).
 */
#include "block/block_int.h"
#include "block-internal.h"

int64_t bdrv_getlength(BlockDriverState *bs)
{
    int64_t len;

    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    len = bs->drv->bdrv_getlength(bs);
    if (len < 0) {
        return len;
    }
    /* past the limit, rounding up could overflow (a file that grew) */
    if (len > BDRV_MAX_LENGTH) {
        return -EFBIG;
    }
    /* lengths are whole sectors, as QEMU reports them */
    return ROUND_UP(len, BDRV_SECTOR_SIZE);
}

bool bdrv_has_zero_init(BlockDriverState *bs)
{
    if (!bs->drv) {
        return false;
    }
    if (bs->drv->bdrv_has_zero_init) {
        return bs->drv->bdrv_has_zero_init(bs);
    }
    if (bs->drv->is_filter && bs->file) {
        return bdrv_has_zero_init(bs->file->bs);
    }
    return true;
}

int bdrv_refresh_total_sectors(BlockDriverState *bs, int64_t hint)
{
    int64_t len;

    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    if (hint >= 0) {
        return 0;
    }
    len = bs->drv->bdrv_getlength(bs);
    if (len > BDRV_MAX_LENGTH) {
        return -EFBIG;
    }
    return len < 0 ? len : 0;
}

int64_t bdrv_get_allocated_file_size(BlockDriverState *bs)
{
    int64_t total = 0;

    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    if (bs->drv->bdrv_get_allocated_file_size) {
        return bs->drv->bdrv_get_allocated_file_size(bs);
    }
    if (!bs->drv->is_format) {
        return -ENOTSUP;
    }
    /* a format stores data and metadata in its children, not backing */
    for (GList *l = bs->children; l; l = l->next) {
        BdrvChild *c = l->data;
        int64_t size;

        if (c->is_backing) {
            continue;
        }
        size = bdrv_get_allocated_file_size(c->bs);
        if (size < 0) {
            return size;
        }
        total += size;
    }
    return total;
}

int bdrv_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    memset(bdi, 0, sizeof(*bdi));
    if (!bs->drv) {
        return -ENOMEDIUM;
    }
    if (!bs->drv->bdrv_get_info) {
        if (bs->drv->is_filter && bs->file) {
            return bdrv_get_info(bs->file->bs, bdi);
        }
        return -ENOTSUP;
    }
    return bs->drv->bdrv_get_info(bs, bdi);
}

const char *bdrv_get_format_name(BlockDriverState *bs)
{
    return bs->drv ? bs->drv->format_name : NULL;
}

const char *bdrv_get_protocol_name(BlockDriverState *bs)
{
    return bs->drv ? bs->drv->protocol_name : NULL;
}

bool bdrv_is_read_only(BlockDriverState *bs)
{
    return bs->read_only;
}

bool bdrv_is_writable(BlockDriverState *bs)
{
    return !bs->read_only && !(bs->open_flags & BDRV_O_INACTIVE);
}

AioContext *bdrv_get_aio_context(BlockDriverState *bs)
{
    return bs && bs->aio_context ? bs->aio_context : qemu_get_aio_context();
}

BlockDriverState *bdrv_filter_or_cow_bs(BlockDriverState *bs)
{
    if (!bs || !bs->drv) {
        return NULL;
    }
    if (bs->drv->is_filter) {
        return bs->file ? bs->file->bs : NULL;
    }
    return bs->backing ? bs->backing->bs : NULL;
}

static BlockDriverState *bdrv_skip_filters(BlockDriverState *bs)
{
    while (bs && bs->drv && bs->drv->is_filter && bs->file) {
        bs = bs->file->bs;
    }
    return bs;
}

/*
 * The next image of the backing chain below @bs, filters skipped on both
 * sides: the layer that supplies what @bs does not have.
 */
BlockDriverState *bdrv_backing_chain_next(BlockDriverState *bs)
{
    bs = bdrv_skip_filters(bs);
    if (!bs || !bs->backing) {
        return NULL;
    }
    return bdrv_skip_filters(bs->backing->bs);
}

size_t bdrv_opt_mem_align(BlockDriverState *bs)
{
    if (!bs || !bs->drv || !bs->bl.opt_mem_alignment) {
        return qemu_real_host_page_size();
    }
    return bs->bl.opt_mem_alignment;
}

size_t bdrv_min_mem_align(BlockDriverState *bs)
{
    if (!bs || !bs->drv || !bs->bl.min_mem_alignment) {
        return qemu_real_host_page_size();
    }
    return bs->bl.min_mem_alignment;
}

void *qemu_blockalign(BlockDriverState *bs, size_t size)
{
    return qemu_memalign(bdrv_opt_mem_align(bs), size);
}

void *qemu_try_blockalign(BlockDriverState *bs, size_t size)
{
    return qemu_try_memalign(bdrv_opt_mem_align(bs), size);
}
