/*
 * The qemu:dirty-bitmap:NAME meta contexts of the NBD server: a client
 * that selects one gets, for NBD_CMD_BLOCK_STATUS, the extents of the
 * range that are dirty in bitmap NAME (flag NBD_STATE_DIRTY) and clean
 * (0), so that a backup tool reads only what changed.  QEMU's server and
 * client (x-dirty-bitmap) speak the same.
 *
 * An export holds its bitmaps from creation to its end, marked busy so
 * that nobody removes or changes them under a client (nbd-server.c's
 * export life); a read-only export of a writable node refuses an enabled
 * bitmap, whose bits would move under the reader.
 */
#include "nbd-int.h"
#include "block/dirty-bitmap.h"
#include "qblock/block-backend.h"
#include "qblock/block-node.h"

/* The bitmap @name on @bs or, as QEMU looks, down its backing chain. */
static BdrvDirtyBitmap *nbd_find_bitmap(BlockDriverState *bs,
                                        const char *name)
{
    for (; bs; bs = bdrv_backing_bs(bs)) {
        BdrvDirtyBitmap *bm = bdrv_find_dirty_bitmap(bs, name);

        if (bm) {
            return bm;
        }
    }
    return NULL;
}

/* The bitmap @name of node @node, with QEMU's messages for either missing. */
static BdrvDirtyBitmap *nbd_find_named_bitmap(const char *node,
                                              const char *name,
                                              Error **errp)
{
    BlockDriverState *bs = bdrv_find_node(node);
    BdrvDirtyBitmap *bm;

    if (!bs) {
        error_setg(errp, "Node '%s' not found", node);
        return NULL;
    }
    bm = bdrv_find_dirty_bitmap(bs, name);
    if (!bm) {
        error_setg(errp, "Dirty bitmap '%s' not found", name);
    }
    return bm;
}

int nbd_export_bitmaps_init(NBDExport *exp, BlockBackend *blk,
                            const NBDExportConfig *cfg, Error **errp)
{
    BlockDriverState *bs = blk_bs(blk);
    Error *err = NULL;

    if (cfg->nr_bitmaps > NBD_MAX_EXPORT_BITMAPS) {
        error_setg(errp, "Export '%s' offers %d bitmaps, at most %d",
                   cfg->name, cfg->nr_bitmaps, NBD_MAX_EXPORT_BITMAPS);
        return -EINVAL;
    }
    exp->bitmaps = g_new0(BdrvDirtyBitmap *, cfg->nr_bitmaps);
    exp->bitmap_contexts = g_new0(char *, cfg->nr_bitmaps);
    for (int i = 0; i < cfg->nr_bitmaps; i++) {
        const char *name = cfg->bitmaps[i];
        const char *node = cfg->bitmap_nodes ? cfg->bitmap_nodes[i] : NULL;
        BdrvDirtyBitmap *bm;

        if (node) {
            bm = nbd_find_named_bitmap(node, name, errp);
            if (!bm) {
                goto fail;
            }
        } else {
            bm = nbd_find_bitmap(bs, name);
            if (!bm) {
                error_setg(errp, "Bitmap '%s' is not found", name);
                goto fail;
            }
        }
        if (bdrv_dirty_bitmap_check(bm, BDRV_BITMAP_ALLOW_RO, &err) < 0) {
            /* qemu-nbd reports it without the monitor's hint */
            error_setg(errp, "%s", error_get_pretty(err));
            error_free(err);
            goto fail;
        }
        for (int j = 0; j < i; j++) {
            if (exp->bitmaps[j] == bm) {
                error_setg(errp, "Bitmap '%s' is exported twice", name);
                goto fail;
            }
        }
        /*
         * A bitmap named with its node may be of a node the export does
         * not read (a snapshot-access export offers its source's): QEMU
         * 7.2 does not ask, and neither does qblock.
         */
        if (!node && !cfg->writable && bdrv_is_writable(bs) &&
            bdrv_dirty_bitmap_enabled(bm)) {
            error_setg(errp, "Enabled bitmap '%s' incompatible with "
                       "readonly export", name);
            goto fail;
        }
        bdrv_dirty_bitmap_set_busy(bm, true);
        exp->bitmaps[i] = bm;
        exp->bitmap_contexts[i] = g_strconcat(NBD_META_QEMU_DIRTY_BITMAP,
                                              name, NULL);
        exp->nr_bitmaps = i + 1;
    }
    return 0;

fail:
    nbd_export_bitmaps_fini(exp);
    return -EINVAL;
}

void nbd_export_bitmaps_fini(NBDExport *exp)
{
    for (int i = 0; i < exp->nr_bitmaps; i++) {
        bdrv_dirty_bitmap_set_busy(exp->bitmaps[i], false);
        g_free(exp->bitmap_contexts[i]);
    }
    g_clear_pointer(&exp->bitmaps, g_free);
    g_clear_pointer(&exp->bitmap_contexts, g_free);
    exp->nr_bitmaps = 0;
}

void nbd_meta_bitmaps_match(NBDExport *exp, const char *query,
                            uint64_t *sel)
{
    bool all = !strcmp(query, NBD_META_NS_QEMU ":") ||
               !strcmp(query, NBD_META_QEMU_DIRTY_BITMAP);

    for (int i = 0; i < exp->nr_bitmaps; i++) {
        if (all || !strcmp(query, exp->bitmap_contexts[i])) {
            *sel |= 1ULL << i;
        }
    }
}

static void nbd_extent_add(GArray *extents, uint64_t length, uint32_t flags)
{
    NBDBlockStatusExtent e = { .length = length, .flags = flags };

    g_array_append_val(extents, e);
}

void nbd_meta_bitmap_extents(NBDExport *exp, int i, int64_t offset,
                             int64_t end, unsigned int max, GArray *extents)
{
    BdrvDirtyBitmap *bm = exp->bitmaps[i];
    unsigned int first = extents->len;

    /* extents of at most 4 GiB - 512 each: the length field is 32-bit */
    const int64_t max_len = UINT32_MAX & ~(int64_t)(BDRV_SECTOR_SIZE - 1);

    while (offset < end && extents->len - first < max) {
        int64_t start, count;

        if (!bdrv_dirty_bitmap_next_dirty_area(bm, offset, end, max_len,
                                               &start, &count)) {
            /* clean to the end (and past the bitmap, if the node grew) */
            nbd_extent_add(extents, MIN(end - offset, max_len), 0);
            offset += MIN(end - offset, max_len);
            continue;
        }
        if (start > offset) {
            nbd_extent_add(extents, MIN(start - offset, max_len), 0);
            offset += MIN(start - offset, max_len);
            continue;
        }
        nbd_extent_add(extents, count, NBD_STATE_DIRTY);
        offset += count;
    }
}
