/*
 * What users do with dirty bitmaps: the checks and messages of QEMU's
 * block-dirty-bitmap-add/remove/clear/enable/disable/merge commands, in
 * one place for the monitor (storage-daemon/dirty-bitmap-qmp.c) and for
 * qblock-img bitmap, which both name a node and a bitmap.
 *
 * Persistence is the format's business: add asks it whether one more
 * persistent bitmap fits (bdrv_can_store_new_dirty_bitmap), remove has it
 * drop the bitmap from the image at once, and it writes the node's
 * persistent bitmaps at a flush and when the image closes.  Every other
 * change of a persistent bitmap tells the format first
 * (bdrv_dirty_bitmap_before_change()), so that a stored copy the change
 * makes stale is marked in use before the change is made.
 */
#include "block/block_int.h"
#include "block/dirty-bitmap.h"

/* QEMU's default: the cluster size, at least 4 KiB; else 64 KiB. */
static uint32_t bdrv_default_bitmap_granularity(BlockDriverState *bs)
{
    BlockDriverInfo bdi;

    if (bdrv_get_info(bs, &bdi) == 0 && bdi.cluster_size > 0) {
        return MAX(4096, bdi.cluster_size);
    }
    return 64 * KiB;
}

JsonNode *bdrv_query_dirty_bitmaps(BlockDriverState *bs)
{
    JsonArray *list = json_array_new();
    JsonNode *node;

    for (BdrvDirtyBitmap *bm = bdrv_dirty_bitmap_first(bs); bm;
         bm = bdrv_dirty_bitmap_next(bm)) {
        JsonObject *o = json_object_new();

        if (bdrv_dirty_bitmap_name(bm)) {
            json_object_set_string_member(o, "name",
                                          bdrv_dirty_bitmap_name(bm));
        }
        json_object_set_boolean_member(o, "recording",
                                       bdrv_dirty_bitmap_enabled(bm));
        json_object_set_boolean_member(
            o, "persistent", bdrv_dirty_bitmap_get_persistence(bm));
        json_object_set_boolean_member(o, "busy",
                                       bdrv_dirty_bitmap_busy(bm));
        json_object_set_int_member(o, "granularity",
                                   bdrv_dirty_bitmap_granularity(bm));
        json_object_set_int_member(o, "count", bdrv_get_dirty_count(bm));
        if (bdrv_dirty_bitmap_inconsistent(bm)) {
            json_object_set_boolean_member(o, "inconsistent", true);
        }
        json_array_add_object_element(list, o);
    }
    node = json_node_init_array(json_node_alloc(), list);
    json_array_unref(list);
    return node;
}

bool bdrv_supports_persistent_dirty_bitmap(BlockDriverState *bs)
{
    return bs->drv && bs->drv->bdrv_supports_persistent_dirty_bitmap &&
           bs->drv->bdrv_supports_persistent_dirty_bitmap(bs);
}

bool bdrv_can_store_new_dirty_bitmap(BlockDriverState *bs, const char *name,
                                     uint32_t granularity, Error **errp)
{
    if (!bs->drv || !bs->drv->bdrv_can_store_new_dirty_bitmap) {
        error_setg_errno(errp, ENOTSUP, "Can't store persistent bitmaps to "
                         "%s", bdrv_get_node_name(bs));
        return false;
    }
    return bs->drv->bdrv_can_store_new_dirty_bitmap(bs, name, granularity,
                                                    errp);
}

static int coroutine_fn bdrv_dirty_bitmap_mark_in_use_co(BlockDriverState *bs,
                                                         void *opaque)
{
    return bs->drv->bdrv_co_mark_bitmaps_in_use(bs);
}

int bdrv_dirty_bitmap_before_change(BlockDriverState *bs, bool persistent,
                                    Error **errp)
{
    int ret;

    if (!persistent || !bs->drv || !bs->drv->bdrv_co_mark_bitmaps_in_use) {
        return 0;
    }
    ret = bdrv_run_co(bs, bdrv_dirty_bitmap_mark_in_use_co, NULL);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not mark the persistent bitmaps "
                         "of node '%s' in use", bdrv_get_node_name(bs));
        return -1;
    }
    return 0;
}

BdrvDirtyBitmap *bdrv_dirty_bitmap_lookup(BlockDriverState *bs,
                                          const char *name, Error **errp)
{
    BdrvDirtyBitmap *bitmap;

    if (!name) {
        error_setg(errp, "Bitmap name cannot be NULL");
        return NULL;
    }
    bitmap = bdrv_find_dirty_bitmap(bs, name);
    if (!bitmap) {
        error_setg(errp, "Dirty bitmap '%s' not found", name);
    }
    return bitmap;
}

BdrvDirtyBitmap *bdrv_dirty_bitmap_lookup_checked(BlockDriverState *bs,
                                                  const char *name,
                                                  BdrvDirtyBitmapFlags flags,
                                                  Error **errp)
{
    BdrvDirtyBitmap *bitmap = bdrv_dirty_bitmap_lookup(bs, name, errp);

    if (bitmap && bdrv_dirty_bitmap_check(bitmap, flags, errp) < 0) {
        return NULL;
    }
    return bitmap;
}

/*
 * The bitmap that clear, enable/disable and merge (as target) change:
 * looked up and checked against @flags, with the format told first when it
 * is persistent (bdrv_dirty_bitmap_before_change()).  NULL, with @errp set,
 * when any step fails.
 */
static BdrvDirtyBitmap *bdrv_dirty_bitmap_for_change(
    BlockDriverState *bs, const char *name, BdrvDirtyBitmapFlags flags,
    Error **errp)
{
    BdrvDirtyBitmap *bitmap =
        bdrv_dirty_bitmap_lookup_checked(bs, name, flags, errp);

    if (!bitmap || bdrv_dirty_bitmap_before_change(
                       bs, bdrv_dirty_bitmap_get_persistence(bitmap),
                       errp) < 0) {
        return NULL;
    }
    return bitmap;
}

BdrvDirtyBitmap *bdrv_dirty_bitmap_add(BlockDriverState *bs,
                                       const char *name,
                                       uint32_t granularity,
                                       BdrvDirtyBitmapAddFlags flags,
                                       Error **errp)
{
    bool persistent = flags & BDRV_BITMAP_ADD_PERSISTENT;
    BdrvDirtyBitmap *bitmap;

    if (!name || !name[0]) {
        error_setg(errp, "Bitmap name cannot be empty");
        return NULL;
    }
    if (granularity == 0) {
        granularity = bdrv_default_bitmap_granularity(bs);
    } else if (granularity < BDRV_BITMAP_MIN_GRANULARITY ||
               !is_power_of_2(granularity)) {
        error_setg(errp, "Granularity must be power of 2 and at least 512");
        return NULL;
    }
    if (persistent &&
        (!bdrv_can_store_new_dirty_bitmap(bs, name, granularity, errp) ||
         bdrv_dirty_bitmap_before_change(bs, true, errp) < 0)) {
        return NULL;
    }
    bitmap = bdrv_create_dirty_bitmap(bs, granularity, name, errp);
    if (!bitmap) {
        return NULL;
    }
    if (flags & BDRV_BITMAP_ADD_DISABLED) {
        bdrv_disable_dirty_bitmap(bitmap);
    }
    bdrv_dirty_bitmap_set_persistence(bitmap, persistent);
    return bitmap;
}

int bdrv_dirty_bitmap_remove_persistent(BdrvDirtyBitmap *bitmap,
                                        Error **errp)
{
    BlockDriverState *bs = bdrv_dirty_bitmap_bs(bitmap);

    if (bdrv_dirty_bitmap_get_persistence(bitmap) && bs->drv &&
        bs->drv->bdrv_remove_persistent_dirty_bitmap &&
        bs->drv->bdrv_remove_persistent_dirty_bitmap(
            bs, bdrv_dirty_bitmap_name(bitmap), errp) < 0) {
        return -1;
    }
    return 0;
}

int bdrv_dirty_bitmap_remove(BlockDriverState *bs, const char *name,
                             Error **errp)
{
    BdrvDirtyBitmap *bitmap = bdrv_dirty_bitmap_lookup_checked(
        bs, name, BDRV_BITMAP_BUSY | BDRV_BITMAP_RO, errp);

    if (!bitmap || bdrv_dirty_bitmap_remove_persistent(bitmap, errp) < 0) {
        return -1;
    }
    bdrv_release_dirty_bitmap(bitmap);
    return 0;
}

int bdrv_dirty_bitmap_clear_cmd(BlockDriverState *bs, const char *name,
                                Error **errp)
{
    BdrvDirtyBitmap *bitmap =
        bdrv_dirty_bitmap_for_change(bs, name, BDRV_BITMAP_DEFAULT, errp);

    if (!bitmap) {
        return -1;
    }
    bdrv_clear_dirty_bitmap(bitmap, NULL);
    return 0;
}

int bdrv_dirty_bitmap_switch_cmd(BlockDriverState *bs, const char *name,
                                 bool enable, Error **errp)
{
    BdrvDirtyBitmap *bitmap =
        bdrv_dirty_bitmap_for_change(bs, name, BDRV_BITMAP_ALLOW_RO, errp);

    if (!bitmap) {
        return -1;
    }
    bdrv_dirty_bitmap_switch(bitmap, enable);
    return 0;
}

int bdrv_dirty_bitmap_merge_cmd(BlockDriverState *bs, const char *target,
                                BdrvDirtyBitmap *const *srcs, int nsrc,
                                HBitmap **backup, Error **errp)
{
    BdrvDirtyBitmap *dst =
        bdrv_dirty_bitmap_for_change(bs, target, BDRV_BITMAP_DEFAULT, errp);
    BdrvDirtyBitmap *anon;
    bool ok = true;

    if (!dst) {
        return -1;
    }
    /* all sources into a scratch bitmap first: a failure changes nothing */
    anon = bdrv_create_dirty_bitmap(bs, bdrv_dirty_bitmap_granularity(dst),
                                    NULL, errp);
    if (!anon) {
        return -1;
    }
    bdrv_disable_dirty_bitmap(anon);
    for (int i = 0; ok && i < nsrc; i++) {
        ok = bdrv_merge_dirty_bitmap(anon, srcs[i], NULL, errp);
    }
    if (ok) {
        ok = bdrv_merge_dirty_bitmap(dst, anon, backup, errp);
    }
    bdrv_release_dirty_bitmap(anon);
    return ok ? 0 : -1;
}
