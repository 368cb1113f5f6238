/*
 * Dirty bitmaps of a node (include/block/dirty-bitmap.h).
 *
 * A bitmap is a hierarchical bitmap of granules (util/hbitmap.c) plus the
 * state users see.  The states and their transitions:
 *
 *   enabled  <-- enable / disable -->  disabled
 *      |                                  |
 *      +-- create_successor ---> frozen (disabled, busy, has a successor)
 *                                   | abdicate: successor takes the name
 *                                   | reclaim: successor merged back
 *
 * Invariants:
 *  1. bs->dirty_bitmaps lists every bitmap of the node, successors
 *     included; named ones have distinct names.
 *  2. A bitmap's HBitmap has DIV_ROUND_UP(size, granularity) bits, size
 *     being the node's length, kept so by bdrv_dirty_bitmap_truncate().
 *  3. A bitmap with a successor is disabled and busy; the successor is
 *     anonymous and not busy.  Only abdicate and reclaim end the pair.
 *  4. An inconsistent bitmap is disabled: its bits mean nothing, and it
 *     may only be removed.
 *  5. bdrv_set_dirty() touches enabled bitmaps only, and costs one pointer
 *     test on a node without bitmaps (the request path's common case).
 *  6. A successor's parent is the frozen bitmap it records for, set by
 *     create_successor and cleared when the pair ends; bdrv_set_dirty()
 *     reports a bit it newly set in a persistent bitmap or in the
 *     successor of one, so that a format that stores its bitmaps between
 *     flushes (qcow2-bitmap.c) marks them in use before the write lands.
 *  7. bs->dirty_bitmap_gen grows whenever a bitmap of the node may lose a
 *     bit or begin recording (created, enabled, reset, cleared, restored,
 *     given a successor, succeeded by it or taking it back, truncated,
 *     loaded): the request path, which
 *     marks a write before the driver sees it, marks it again when it
 *     returns only if the generation moved meanwhile (io.c invariant 6).
 *
 * All of it runs in the node's AioContext thread (the request path marks
 * bitmaps from there too), so nothing needs a lock.
 */
#include "block/block_int.h"
#include "block/dirty-bitmap.h"

struct BdrvDirtyBitmap {
    BlockDriverState *bs;
    HBitmap *bitmap;            /* one bit per granule (inv. 2) */
    int64_t size;               /* bytes covered: the node's length */
    uint32_t granularity;       /* a power of two */
    int gran_bits;              /* log2(granularity) */
    char *name;                 /* NULL: anonymous */
    BdrvDirtyBitmap *successor; /* while frozen (inv. 3) */
    BdrvDirtyBitmap *parent;    /* of a successor: the frozen one (inv. 6) */
    bool disabled;
    bool busy;
    bool readonly;
    bool inconsistent;
    bool persistent;
    BdrvDirtyBitmap *next;      /* bs->dirty_bitmaps (inv. 1) */
};

/* Invariant 7: a write in flight must mark @bs's bitmaps again. */
static void bdrv_dirty_bitmap_changed(BlockDriverState *bs)
{
    bs->dirty_bitmap_gen++;
}

/* Newest first, as QEMU lists them (qcow2 directory order follows it). */
static void bdrv_dirty_bitmap_link(BdrvDirtyBitmap *bitmap)
{
    bitmap->next = bitmap->bs->dirty_bitmaps;
    bitmap->bs->dirty_bitmaps = bitmap;
    bdrv_dirty_bitmap_changed(bitmap->bs);                  /* inv. 7 */
}

static void bdrv_dirty_bitmap_unlink(BdrvDirtyBitmap *bitmap)
{
    BdrvDirtyBitmap **p = &bitmap->bs->dirty_bitmaps;

    while (*p != bitmap) {
        assert(*p);
        p = &(*p)->next;
    }
    *p = bitmap->next;
}

BdrvDirtyBitmap *bdrv_create_dirty_bitmap(BlockDriverState *bs,
                                          uint32_t granularity,
                                          const char *name, Error **errp)
{
    BdrvDirtyBitmap *bitmap;
    int64_t size;

    assert(is_power_of_2(granularity) &&
           granularity >= BDRV_BITMAP_MIN_GRANULARITY);
    if (name && bdrv_find_dirty_bitmap(bs, name)) {
        error_setg(errp, "Bitmap already exists: %s", name);
        return NULL;
    }
    if (name && strlen(name) > BDRV_BITMAP_MAX_NAME_SIZE) {
        error_setg(errp, "Bitmap name too long: %s", name);
        return NULL;
    }
    size = bdrv_getlength(bs);
    if (size < 0) {
        error_setg_errno(errp, -size, "could not get length of device '%s'",
                         bdrv_get_node_name(bs));
        return NULL;
    }
    bitmap = g_new0(BdrvDirtyBitmap, 1);
    bitmap->bs = bs;
    bitmap->size = size;
    bitmap->granularity = granularity;
    bitmap->gran_bits = ctz64(granularity);
    bitmap->bitmap = hbitmap_alloc(DIV_ROUND_UP(size, granularity));
    bitmap->name = g_strdup(name);
    bdrv_dirty_bitmap_link(bitmap);
    return bitmap;
}

static void bdrv_dirty_bitmap_free(BdrvDirtyBitmap *bitmap)
{
    bdrv_dirty_bitmap_unlink(bitmap);
    hbitmap_free(bitmap->bitmap);
    g_free(bitmap->name);
    g_free(bitmap);
}

void bdrv_release_dirty_bitmap(BdrvDirtyBitmap *bitmap)
{
    assert(!bitmap->busy && !bitmap->successor);
    bdrv_dirty_bitmap_free(bitmap);
}

void bdrv_release_all_dirty_bitmaps(BlockDriverState *bs)
{
    while (bs->dirty_bitmaps) {
        bdrv_dirty_bitmap_free(bs->dirty_bitmaps);
    }
}

BdrvDirtyBitmap *bdrv_find_dirty_bitmap(BlockDriverState *bs,
                                        const char *name)
{
    for (BdrvDirtyBitmap *b = bs->dirty_bitmaps; b; b = b->next) {
        if (b->name && !strcmp(b->name, name)) {
            return b;
        }
    }
    return NULL;
}

BdrvDirtyBitmap *bdrv_dirty_bitmap_first(BlockDriverState *bs)
{
    return bs->dirty_bitmaps;
}

BdrvDirtyBitmap *bdrv_dirty_bitmap_next(BdrvDirtyBitmap *bitmap)
{
    return bitmap->next;
}

bool bdrv_has_named_bitmaps(BlockDriverState *bs)
{
    for (BdrvDirtyBitmap *b = bs->dirty_bitmaps; b; b = b->next) {
        if (b->name) {
            return true;
        }
    }
    return false;
}

int bdrv_dirty_bitmap_check(const BdrvDirtyBitmap *bitmap,
                            BdrvDirtyBitmapFlags flags, Error **errp)
{
    if ((flags & BDRV_BITMAP_BUSY) && bitmap->busy) {
        error_setg(errp, "Bitmap '%s' is currently in use by another "
                   "operation and cannot be used", bitmap->name);
        return -1;
    }
    if ((flags & BDRV_BITMAP_RO) && bitmap->readonly) {
        error_setg(errp, "Bitmap '%s' is readonly and cannot be modified",
                   bitmap->name);
        return -1;
    }
    if ((flags & BDRV_BITMAP_INCONSISTENT) && bitmap->inconsistent) {
        error_setg(errp, "Bitmap '%s' is inconsistent and cannot be used",
                   bitmap->name);
        error_append_hint(errp, "Try block-dirty-bitmap-remove to delete "
                          "this bitmap from disk\n");
        return -1;
    }
    return 0;
}

/* ---- properties ---- */

BlockDriverState *bdrv_dirty_bitmap_bs(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->bs;
}

const char *bdrv_dirty_bitmap_name(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->name;
}

uint32_t bdrv_dirty_bitmap_granularity(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->granularity;
}

int64_t bdrv_dirty_bitmap_size(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->size;
}

int64_t bdrv_get_dirty_count(const BdrvDirtyBitmap *bitmap)
{
    /* the last granule may be partial: never report more than the size */
    return MIN((int64_t)(hbitmap_count(bitmap->bitmap) << bitmap->gran_bits),
               bitmap->size);
}

bool bdrv_dirty_bitmap_enabled(const BdrvDirtyBitmap *bitmap)
{
    return !bitmap->disabled;
}

bool bdrv_dirty_bitmap_busy(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->busy;
}

bool bdrv_dirty_bitmap_readonly(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->readonly;
}

bool bdrv_dirty_bitmap_inconsistent(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->inconsistent;
}

bool bdrv_dirty_bitmap_get_persistence(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->persistent;
}

bool bdrv_dirty_bitmap_has_successor(const BdrvDirtyBitmap *bitmap)
{
    return bitmap->successor != NULL;
}

void bdrv_enable_dirty_bitmap(BdrvDirtyBitmap *bitmap)
{
    assert(!bitmap->successor && !bitmap->inconsistent);    /* inv. 3, 4 */
    bitmap->disabled = false;
    bdrv_dirty_bitmap_changed(bitmap->bs);                  /* inv. 7 */
}

void bdrv_disable_dirty_bitmap(BdrvDirtyBitmap *bitmap)
{
    bitmap->disabled = true;
}

void bdrv_dirty_bitmap_switch(BdrvDirtyBitmap *bitmap, bool enable)
{
    if (enable) {
        bdrv_enable_dirty_bitmap(bitmap);
    } else {
        bdrv_disable_dirty_bitmap(bitmap);
    }
}

void bdrv_dirty_bitmap_set_busy(BdrvDirtyBitmap *bitmap, bool busy)
{
    bitmap->busy = busy;
}

void bdrv_dirty_bitmap_set_readonly(BdrvDirtyBitmap *bitmap, bool value)
{
    bitmap->readonly = value;
}

void bdrv_dirty_bitmap_set_inconsistent(BdrvDirtyBitmap *bitmap)
{
    bitmap->inconsistent = true;
    bitmap->disabled = true;                                /* inv. 4 */
}

void bdrv_dirty_bitmap_set_persistence(BdrvDirtyBitmap *bitmap,
                                       bool persistent)
{
    bitmap->persistent = persistent;
}

/* ---- contents ---- */

bool bdrv_dirty_bitmap_get(const BdrvDirtyBitmap *bitmap, int64_t offset)
{
    return offset >= 0 &&
           hbitmap_get(bitmap->bitmap, offset >> bitmap->gran_bits);
}

/* Inlined into bdrv_set_dirty(): the request path calls it per write. */
static inline void bdrv_dirty_bitmap_mark(BdrvDirtyBitmap *bitmap,
                                          int64_t offset, int64_t bytes)
{
    uint64_t first, last;

    if (offset < 0 || bytes <= 0 || offset >= bitmap->size) {
        return;
    }
    first = offset >> bitmap->gran_bits;
    last = (MIN(offset + bytes, bitmap->size) - 1) >> bitmap->gran_bits;
    hbitmap_set(bitmap->bitmap, first, last - first + 1);
}

void bdrv_set_dirty_bitmap(BdrvDirtyBitmap *bitmap, int64_t offset,
                           int64_t bytes)
{
    bdrv_dirty_bitmap_mark(bitmap, offset, bytes);
}

void bdrv_reset_dirty_bitmap(BdrvDirtyBitmap *bitmap, int64_t offset,
                             int64_t bytes)
{
    int64_t end;
    uint64_t first, last;

    if (offset < 0 || bytes <= 0 || offset >= bitmap->size) {
        return;
    }
    end = MIN(offset + bytes, bitmap->size);
    first = DIV_ROUND_UP(offset, bitmap->granularity);
    last = end == bitmap->size ? DIV_ROUND_UP(end, bitmap->granularity)
                               : (uint64_t)end >> bitmap->gran_bits;
    if (last > first) {
        hbitmap_reset(bitmap->bitmap, first, last - first);
        bdrv_dirty_bitmap_changed(bitmap->bs);              /* inv. 7 */
    }
}

void bdrv_clear_dirty_bitmap(BdrvDirtyBitmap *bitmap, HBitmap **backup)
{
    if (backup) {
        *backup = hbitmap_copy(bitmap->bitmap);
    }
    hbitmap_reset_all(bitmap->bitmap);
    bdrv_dirty_bitmap_changed(bitmap->bs);                  /* inv. 7 */
}

void bdrv_restore_dirty_bitmap(BdrvDirtyBitmap *bitmap, HBitmap *backup)
{
    hbitmap_free(bitmap->bitmap);
    bitmap->bitmap = backup;
    bdrv_dirty_bitmap_changed(bitmap->bs);                  /* inv. 7 */
    if (hbitmap_size(backup) != DIV_ROUND_UP(bitmap->size,
                                             bitmap->granularity)) {
        /* the node was resized in between: inv. 2 again */
        hbitmap_truncate(backup, DIV_ROUND_UP(bitmap->size,
                                              bitmap->granularity));
    }
}

bool bdrv_merge_dirty_bitmap(BdrvDirtyBitmap *dest,
                             const BdrvDirtyBitmap *src, HBitmap **backup,
                             Error **errp)
{
    int64_t pos = 0, start, count;

    if (bdrv_dirty_bitmap_check(dest, BDRV_BITMAP_DEFAULT, errp) < 0 ||
        bdrv_dirty_bitmap_check(src, BDRV_BITMAP_ALLOW_RO, errp) < 0) {
        return false;
    }
    if (dest->size != src->size) {
        error_setg(errp, "Bitmaps are incompatible and can't be merged");
        return false;
    }
    if (backup) {
        *backup = hbitmap_copy(dest->bitmap);
    }
    if (dest->granularity == src->granularity) {
        hbitmap_merge(dest->bitmap, src->bitmap);
        return true;
    }
    while (bdrv_dirty_bitmap_next_dirty_area(src, pos, src->size, INT64_MAX,
                                             &start, &count)) {
        bdrv_set_dirty_bitmap(dest, start, count);
        pos = start + count;
    }
    return true;
}

/* What bdrv_dirty_bitmap_find() looks for. */
typedef enum BdrvDirtyBitmapFind {
    BDRV_DIRTY_BITMAP_FIND_DIRTY,
    BDRV_DIRTY_BITMAP_FIND_CLEAN,
} BdrvDirtyBitmapFind;

/*
 * The first byte from @offset, within @bytes of it (negative: to the end),
 * whose granule is dirty or clean as @what asks; -1 if there is none.
 */
static int64_t bdrv_dirty_bitmap_find(const BdrvDirtyBitmap *bitmap,
                                      int64_t offset, int64_t bytes,
                                      BdrvDirtyBitmapFind what)
{
    uint64_t first, end, count;
    int64_t bit;

    if (offset < 0 || offset >= bitmap->size || bytes == 0) {
        return -1;
    }
    end = bytes < 0 || bytes > bitmap->size - offset ? bitmap->size
                                                     : offset + bytes;
    first = offset >> bitmap->gran_bits;
    count = ((end - 1) >> bitmap->gran_bits) - first + 1;
    bit = what == BDRV_DIRTY_BITMAP_FIND_DIRTY
          ? hbitmap_next_set(bitmap->bitmap, first, count)
          : hbitmap_next_clear(bitmap->bitmap, first, count);
    return bit < 0 ? -1 : MAX(offset, bit << bitmap->gran_bits);
}

int64_t bdrv_dirty_bitmap_next_dirty(const BdrvDirtyBitmap *bitmap,
                                     int64_t offset, int64_t bytes)
{
    return bdrv_dirty_bitmap_find(bitmap, offset, bytes,
                                  BDRV_DIRTY_BITMAP_FIND_DIRTY);
}

int64_t bdrv_dirty_bitmap_next_zero(const BdrvDirtyBitmap *bitmap,
                                    int64_t offset, int64_t bytes)
{
    return bdrv_dirty_bitmap_find(bitmap, offset, bytes,
                                  BDRV_DIRTY_BITMAP_FIND_CLEAN);
}

bool bdrv_dirty_bitmap_next_dirty_area(const BdrvDirtyBitmap *bitmap,
                                       int64_t start, int64_t end,
                                       int64_t max_dirty_count,
                                       int64_t *dirty_start,
                                       int64_t *dirty_count)
{
    int64_t first, stop, clean;

    end = MIN(end, bitmap->size);
    if (start >= end || max_dirty_count <= 0) {
        return false;
    }
    first = bdrv_dirty_bitmap_next_dirty(bitmap, start, end - start);
    if (first < 0) {
        return false;
    }
    stop = end - first > max_dirty_count ? first + max_dirty_count : end;
    clean = bdrv_dirty_bitmap_next_zero(bitmap, first, stop - first);
    *dirty_start = first;
    *dirty_count = (clean < 0 ? stop : clean) - first;
    return true;
}

/* ---- successors ---- */

int bdrv_dirty_bitmap_create_successor(BdrvDirtyBitmap *bitmap,
                                       Error **errp)
{
    BdrvDirtyBitmap *child;

    if (bdrv_dirty_bitmap_check(bitmap, BDRV_BITMAP_BUSY, errp) < 0) {
        return -1;
    }
    if (bitmap->successor) {
        error_setg(errp, "Cannot create a successor for a bitmap that "
                   "already has one");
        return -1;
    }
    child = bdrv_create_dirty_bitmap(bitmap->bs, bitmap->granularity, NULL,
                                     errp);
    if (!child) {
        return -1;
    }
    /* the successor records what the frozen bitmap would have (inv. 3) */
    child->disabled = bitmap->disabled;
    child->parent = bitmap;                                 /* inv. 6 */
    bitmap->disabled = true;
    bitmap->busy = true;
    bitmap->successor = child;
    return 0;
}

void bdrv_dirty_bitmap_enable_successor(BdrvDirtyBitmap *bitmap)
{
    assert(bitmap->successor);
    bitmap->successor->disabled = false;
    bdrv_dirty_bitmap_changed(bitmap->bs);                  /* inv. 7 */
}

BdrvDirtyBitmap *bdrv_dirty_bitmap_abdicate(BdrvDirtyBitmap *bitmap,
                                            Error **errp)
{
    BdrvDirtyBitmap *successor = bitmap->successor;

    if (!successor) {
        error_setg(errp, "Cannot relinquish control if there's no "
                   "successor present");
        return NULL;
    }
    successor->name = bitmap->name;
    bitmap->name = NULL;
    successor->persistent = bitmap->persistent;
    successor->parent = NULL;                               /* inv. 6 */
    bitmap->persistent = false;
    bitmap->successor = NULL;
    bdrv_dirty_bitmap_changed(bitmap->bs);                  /* inv. 7 */
    bitmap->busy = false;
    bdrv_release_dirty_bitmap(bitmap);
    return successor;
}

BdrvDirtyBitmap *bdrv_reclaim_dirty_bitmap(BdrvDirtyBitmap *bitmap,
                                           Error **errp)
{
    BdrvDirtyBitmap *successor = bitmap->successor;

    if (!successor) {
        error_setg(errp, "Cannot reclaim a successor when none is present");
        return NULL;
    }
    hbitmap_merge(bitmap->bitmap, successor->bitmap);
    bitmap->disabled = successor->disabled;
    bdrv_dirty_bitmap_changed(bitmap->bs);                  /* inv. 7 */
    bitmap->busy = false;
    bitmap->successor = NULL;
    bdrv_release_dirty_bitmap(successor);
    return bitmap;
}

/* ---- serialisation ---- */

uint64_t bdrv_dirty_bitmap_serialization_size(const BdrvDirtyBitmap *bitmap,
                                              int64_t offset, int64_t bytes)
{
    uint64_t granules = DIV_ROUND_UP(bytes, bitmap->granularity);

    assert(offset % bdrv_dirty_bitmap_serialization_align(bitmap) == 0);
    return DIV_ROUND_UP(granules, 8);
}

int64_t bdrv_dirty_bitmap_serialization_align(const BdrvDirtyBitmap *bitmap)
{
    return (int64_t)bitmap->granularity * 64;
}

void bdrv_dirty_bitmap_serialize_part(const BdrvDirtyBitmap *bitmap,
                                      uint8_t *buf, int64_t offset,
                                      int64_t bytes)
{
    assert(offset % bdrv_dirty_bitmap_serialization_align(bitmap) == 0);
    hbitmap_serialize(bitmap->bitmap, buf, offset >> bitmap->gran_bits,
                      DIV_ROUND_UP(bytes, bitmap->granularity));
}

void bdrv_dirty_bitmap_deserialize_part(BdrvDirtyBitmap *bitmap,
                                        const uint8_t *buf, int64_t offset,
                                        int64_t bytes)
{
    assert(offset % bdrv_dirty_bitmap_serialization_align(bitmap) == 0);
    hbitmap_deserialize(bitmap->bitmap, buf, offset >> bitmap->gran_bits,
                        DIV_ROUND_UP(bytes, bitmap->granularity));
    bdrv_dirty_bitmap_changed(bitmap->bs);                  /* inv. 7 */
}

char *bdrv_dirty_bitmap_sha256(const BdrvDirtyBitmap *bitmap)
{
    return hbitmap_sha256(bitmap->bitmap);
}

/* ---- hooks of the request path ---- */

/* Whether @b's bits outlive the node: persistent, or a successor of one. */
static bool bdrv_dirty_bitmap_persists(const BdrvDirtyBitmap *b)
{
    return b->persistent || (b->parent && b->parent->persistent);
}

bool bdrv_set_dirty(BlockDriverState *bs, int64_t offset, int64_t bytes)
{
    bool grew = false;

    for (BdrvDirtyBitmap *b = bs->dirty_bitmaps; b; b = b->next) {
        if (!b->disabled) {                                 /* inv. 5 */
            uint64_t before = hbitmap_count(b->bitmap);

            bdrv_dirty_bitmap_mark(b, offset, bytes);
            /* inv. 6: the count grows exactly when a bit was clear */
            grew |= hbitmap_count(b->bitmap) != before &&
                    bdrv_dirty_bitmap_persists(b);
        }
    }
    return grew;
}

void bdrv_dirty_bitmap_truncate(BlockDriverState *bs, int64_t bytes)
{
    for (BdrvDirtyBitmap *b = bs->dirty_bitmaps; b; b = b->next) {
        b->size = bytes;
        hbitmap_truncate(b->bitmap, DIV_ROUND_UP(bytes, b->granularity));
    }
    bdrv_dirty_bitmap_changed(bs);                          /* inv. 7 */
}
