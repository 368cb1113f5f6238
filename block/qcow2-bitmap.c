/*
 * qcow2 persistent dirty bitmaps: the bitmaps header extension, the bitmap
 * directory, bitmap tables and bitmap data clusters (the layout of QEMU's
 * docs/interop/qcow2.txt, "Bitmaps extension").
 *
 * On disk: the extension names the directory (offset, size, count); each
 * directory entry names one bitmap's table, its flags, granularity and
 * name; the table has one 64-bit entry per cluster of bitmap data, whose
 * bit i of byte j covers granule 8j + i.  A table entry 0 is a cluster of
 * zeroes, 1 a cluster of ones.
 *
 * Flags: in_use says the bitmap may differ from what the image holds;
 * auto says it records writes (enabled); a bitmap found in_use when opened
 * is inconsistent and can only be removed.
 *
 * Checkpoints.  QEMU 7.2 keeps every bitmap in_use while the image is open
 * rw, so that any crash loses them all.  qblock marks them in_use at the
 * open as QEMU does, but stores them clean at a flush (a checkpoint) and
 * marks them in_use again only when something is about to make the
 * stored copy stale: a write that sets a bit the copy lacks, a user's
 * change, a resize.  A guest that rewrites blocks already dirty since the
 * last backup pays nothing after the first write of each granule.
 * s->bitmaps_state (qcow2.h):
 *
 *   open rw, reopen rw --> IN_USE --- flush with none frozen:
 *                            ^           store (invariant 2)
 *                            |                  |
 *       mark in use (in place, flushed)         v
 *       before a new bit, a user's change,   STORED (checkpointed)
 *       a resize  <-----------------------------+
 *
 * Invariants:
 *  1. While the image is open rw, each consistent bitmap of the directory
 *     is either in_use on disk or clean and holding every bit the node's
 *     bitmap of that name holds, or may hold for a write in flight (its
 *     successor's bits included): a crash at any moment leaves it
 *     inconsistent or covering every write made, never silently stale.
 *     The open (and a reopen rw) marks them in_use, in place, before the
 *     first write can reach the image.
 *  2. A store writes the new data clusters and tables, then a new
 *     directory, flushes them (and their refcounts), and only then points
 *     the header at the new directory; the old directory, tables and data
 *     are freed after.  The header write is the commit: before it the old
 *     directory stands, after it the new (clean) one.
 *  3. The autoclear bit is set exactly when the header has a bitmaps
 *     extension (s->nb_bitmaps > 0).
 *  4. s->bitmaps_state becomes STORED when a store starts (under s->lock,
 *     which the store holds throughout), and IN_USE only once every entry
 *     is in_use on disk, flushed.  While it is STORED, nothing makes a
 *     persistent bitmap (or its successor) hold a bit that the store
 *     lacks: the request path sets the bits first, then, if one was new,
 *     calls qcow2_co_mark_bitmaps_in_use() before the driver sees the
 *     write (io.c invariant 6), and the user's changes call it before
 *     they are made (bdrv_dirty_bitmap_before_change()).  A store that
 *     starts after a bit was set stores it; one that ran while it was set
 *     is waited for on s->lock, and its STORED is then undone.  Writers
 *     that come together share one directory write.
 *  5. A flush stores only when the state is IN_USE, the node is writable
 *     and flushes reach the disk (not cache=unsafe), and no persistent
 *     bitmap is frozen by a job (a successor's bits are not in the
 *     parent, whose bits are what a store writes).
 *
 * Everything runs in a coroutine with s->lock held, but
 * qcow2_co_mark_bitmaps_in_use(), which takes it when its test without it
 * (invariant 4) finds the node checkpointed.
 */
#include "block/qcow2.h"
#include "block/dirty-bitmap.h"

#include <json-glib/json-glib.h>

/* Directory entry flags (bit 2: extra data may be ignored). */
#define BME_FLAG_IN_USE             (1U << 0)
#define BME_FLAG_AUTO               (1U << 1)
#define BME_FLAG_EXTRA_DATA_COMPAT  (1U << 2)
#define BME_RESERVED_FLAGS          ~7U
/* Table entries: bits 9-55 the data cluster, bit 0 "all ones". */
#define BME_TABLE_ENTRY_OFFSET_MASK 0x00fffffffffffe00ULL
#define BME_TABLE_ENTRY_FLAG_ALL_ONES 1ULL
#define BME_TABLE_ENTRY_RESERVED    0xff000000000001feULL
/* The only bitmap type: dirty tracking. */
#define BT_DIRTY_TRACKING_BITMAP    1
/* QEMU's limits: granularity 512 B .. 2 GiB, tables of at most 64 MiB. */
#define BME_MIN_GRANULARITY_BITS    9
#define BME_MAX_GRANULARITY_BITS    31
#define BME_MAX_TABLE_SIZE          0x8000000U
#define BME_MAX_PHYS_SIZE           0x20000000ULL
#define BME_MAX_NAME_SIZE           1023

/* The fixed part of a directory entry, big-endian on disk. */
typedef struct QEMU_PACKED Qcow2BitmapDirEntry {
    uint64_t bitmap_table_offset;
    uint32_t bitmap_table_size;
    uint32_t flags;
    uint8_t type;
    uint8_t granularity_bits;
    uint16_t name_size;
    uint32_t extra_data_size;
} Qcow2BitmapDirEntry;
_Static_assert(sizeof(Qcow2BitmapDirEntry) == 24, "bitmap directory entry");

/* A directory entry as parsed. */
typedef struct Qcow2Bitmap {
    uint64_t table_offset;
    uint32_t table_size;        /* entries */
    uint32_t flags;
    uint8_t type;
    uint8_t granularity_bits;
    uint32_t extra_data_size;
    uint8_t *extra_data;        /* kept and written back */
    char *name;
} Qcow2Bitmap;

static void qcow2_bitmap_free(gpointer p)
{
    Qcow2Bitmap *bm = p;

    g_free(bm->extra_data);
    g_free(bm->name);
    g_free(bm);
}

static size_t qcow2_bitmap_entry_size(const Qcow2Bitmap *bm)
{
    return ROUND_UP(sizeof(Qcow2BitmapDirEntry) + bm->extra_data_size +
                    strlen(bm->name), 8);
}

/* Table entries a bitmap of @gran_bits over the disk needs. */
static uint64_t qcow2_bitmap_table_needed(BDRVQcow2State *s, int gran_bits)
{
    uint64_t bits = DIV_ROUND_UP(s->virtual_size, 1ULL << gran_bits);

    return DIV_ROUND_UP(bits, (uint64_t)s->cluster_size * 8);
}

/*
 * QEMU's check_dir_entry(), and what lies past the end of the file: what
 * makes an entry unusable.
 */
static const char *qcow2_bitmap_entry_problem(BlockDriverState *bs,
                                              const Qcow2Bitmap *bm)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t file_len = MAX(bdrv_getlength(bs->file->bs), 0);

    if (bm->type != BT_DIRTY_TRACKING_BITMAP) {
        return "unknown type";
    }
    if (bm->granularity_bits < BME_MIN_GRANULARITY_BITS ||
        bm->granularity_bits > BME_MAX_GRANULARITY_BITS) {
        return "granularity out of range";
    }
    if (bm->flags & BME_RESERVED_FLAGS) {
        return "reserved flags set";
    }
    if (!bm->table_offset || (bm->table_offset & (s->cluster_size - 1))) {
        return "table offset not cluster aligned";
    }
    if (!bm->table_size || bm->table_size > BME_MAX_TABLE_SIZE ||
        (uint64_t)bm->table_size * s->cluster_size > BME_MAX_PHYS_SIZE) {
        return "table size out of range";
    }
    if (bm->table_size < qcow2_bitmap_table_needed(s, bm->granularity_bits)) {
        return "table too small for the disk";
    }
    if (bm->table_offset + (uint64_t)bm->table_size * 8 > file_len) {
        return "table past the end of the file";
    }
    return NULL;
}

/*
 * Reads and parses the directory.  Returns a GPtrArray of Qcow2Bitmap
 * (empty if there is none) or NULL with @errp set.
 */
static GPtrArray *qcow2_bitmap_dir_read(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    GPtrArray *list = g_ptr_array_new_with_free_func(qcow2_bitmap_free);
    g_autofree uint8_t *dir = NULL;
    uint64_t pos = 0, size = s->bitmap_directory_size;
    int ret;

    if (!s->nb_bitmaps) {
        return list;
    }
    if (size < sizeof(Qcow2BitmapDirEntry) * s->nb_bitmaps) {
        error_setg(errp, "Bitmap directory of %" PRIu64 " bytes cannot hold "
                   "%" PRIu32 " bitmaps", size, s->nb_bitmaps);
        goto fail;
    }
    if (s->bitmap_directory_offset + size >
        (uint64_t)MAX(bdrv_getlength(bs->file->bs), 0)) {
        error_setg(errp, "Bitmap directory at offset %#" PRIx64 " (%" PRIu64
                   " bytes) lies past the end of the file",
                   s->bitmap_directory_offset, size);
        goto fail;
    }
    dir = g_try_malloc(size);
    if (!dir) {
        error_setg(errp, "Could not allocate %" PRIu64 " bytes for the bitmap "
                   "directory", size);
        goto fail;
    }
    ret = bdrv_pread(bs->file, s->bitmap_directory_offset, size, dir, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the bitmap directory "
                         "at offset %#" PRIx64, s->bitmap_directory_offset);
        goto fail;
    }
    for (uint32_t i = 0; i < s->nb_bitmaps; i++) {
        Qcow2BitmapDirEntry e;
        Qcow2Bitmap *bm;
        uint64_t len;

        if (size - pos < sizeof(e)) {
            goto corrupt;
        }
        memcpy(&e, dir + pos, sizeof(e));
        bm = g_new0(Qcow2Bitmap, 1);
        bm->table_offset = GUINT64_FROM_BE(e.bitmap_table_offset);
        bm->table_size = GUINT32_FROM_BE(e.bitmap_table_size);
        bm->flags = GUINT32_FROM_BE(e.flags);
        bm->type = e.type;
        bm->granularity_bits = e.granularity_bits;
        bm->extra_data_size = GUINT32_FROM_BE(e.extra_data_size);
        len = sizeof(e) + (uint64_t)bm->extra_data_size +
              GUINT16_FROM_BE(e.name_size);
        if (!e.name_size || GUINT16_FROM_BE(e.name_size) >
            BME_MAX_NAME_SIZE || ROUND_UP(len, 8) > size - pos) {
            qcow2_bitmap_free(bm);
            goto corrupt;
        }
        bm->extra_data = g_memdup2(dir + pos + sizeof(e),
                                   bm->extra_data_size);
        bm->name = g_strndup((char *)dir + pos + sizeof(e) +
                             bm->extra_data_size,
                             GUINT16_FROM_BE(e.name_size));
        g_ptr_array_add(list, bm);
        pos += ROUND_UP(len, 8);
    }
    if (pos != size) {
        goto corrupt;
    }
    return list;

corrupt:
    error_setg(errp, "Bitmap directory at offset %#" PRIx64 " is corrupted: "
               "its %" PRIu32 " entries do not fill its %" PRIu64 " bytes",
               s->bitmap_directory_offset, s->nb_bitmaps, size);
fail:
    g_ptr_array_unref(list);
    return NULL;
}

static uint8_t *qcow2_bitmap_dir_serialise(GPtrArray *list, size_t *size)
{
    uint8_t *buf;
    size_t pos = 0;

    *size = 0;
    for (guint i = 0; i < list->len; i++) {
        *size += qcow2_bitmap_entry_size(list->pdata[i]);
    }
    buf = g_malloc0(MAX(*size, 1));
    for (guint i = 0; i < list->len; i++) {
        Qcow2Bitmap *bm = list->pdata[i];
        size_t name_len = strlen(bm->name);
        Qcow2BitmapDirEntry e = {
            .bitmap_table_offset = GUINT64_TO_BE(bm->table_offset),
            .bitmap_table_size = GUINT32_TO_BE(bm->table_size),
            .flags = GUINT32_TO_BE(bm->flags),
            .type = bm->type,
            .granularity_bits = bm->granularity_bits,
            .name_size = GUINT16_TO_BE(name_len),
            .extra_data_size = GUINT32_TO_BE(bm->extra_data_size),
        };

        memcpy(buf + pos, &e, sizeof(e));
        if (bm->extra_data_size) {  /* memcpy from NULL is undefined */
            memcpy(buf + pos + sizeof(e), bm->extra_data,
                   bm->extra_data_size);
        }
        memcpy(buf + pos + sizeof(e) + bm->extra_data_size, bm->name,
               name_len);
        pos += qcow2_bitmap_entry_size(bm);
    }
    return buf;
}

/* Reads @bm's table (host-endian) and checks its entries. */
static uint64_t *qcow2_bitmap_table_read(BlockDriverState *bs,
                                         const Qcow2Bitmap *bm, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t file_len = MAX(bdrv_getlength(bs->file->bs), 0);
    g_autofree uint64_t *table = g_try_new(uint64_t, bm->table_size);
    int ret;

    if (!table) {
        error_setg(errp, "Could not allocate the table of bitmap '%s'",
                   bm->name);
        return NULL;
    }
    ret = bdrv_pread(bs->file, bm->table_offset,
                     (int64_t)bm->table_size * 8, table, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the table of bitmap "
                         "'%s'", bm->name);
        return NULL;
    }
    for (uint32_t i = 0; i < bm->table_size; i++) {
        uint64_t e = GUINT64_FROM_BE(table[i]);

        if ((e & BME_TABLE_ENTRY_OFFSET_MASK) + s->cluster_size > file_len) {
            error_setg(errp, "Bitmap '%s': table entry %" PRIu32 " (%#"
                       PRIx64 ") points past the end of the file", bm->name,
                       i, e);
            return NULL;
        }
        if ((e & BME_TABLE_ENTRY_RESERVED) ||
            ((e & BME_TABLE_ENTRY_OFFSET_MASK) &&
             ((e & BME_TABLE_ENTRY_OFFSET_MASK) & (s->cluster_size - 1))) ||
            ((e & BME_TABLE_ENTRY_OFFSET_MASK) &&
             (e & BME_TABLE_ENTRY_FLAG_ALL_ONES))) {
            error_setg(errp, "Bitmap '%s': invalid table entry %" PRIu32
                       " (%#" PRIx64 ")", bm->name, i, e);
            return NULL;
        }
        table[i] = e;
    }
    return g_steal_pointer(&table);
}

/* Fills the new in-memory @bitmap from @bm's data clusters. */
static int qcow2_bitmap_load_data(BlockDriverState *bs, const Qcow2Bitmap *bm,
                                  BdrvDirtyBitmap *bitmap, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t size = bdrv_dirty_bitmap_size(bitmap);
    int64_t chunk = (int64_t)s->cluster_size * 8 << bm->granularity_bits;
    g_autofree uint64_t *table = qcow2_bitmap_table_read(bs, bm, errp);
    g_autofree uint8_t *buf = g_malloc(s->cluster_size);

    if (!table) {
        return -EINVAL;
    }
    for (uint64_t i = 0; (int64_t)(i * chunk) < size; i++) {
        uint64_t off = table[i] & BME_TABLE_ENTRY_OFFSET_MASK;
        int64_t start = i * chunk;
        int64_t bytes = MIN(chunk, size - start);

        if (off) {
            int ret = bdrv_pread(bs->file, off, s->cluster_size, buf, 0);

            if (ret < 0) {
                error_setg_errno(errp, -ret, "Could not read bitmap '%s' "
                                 "data at offset %#" PRIx64, bm->name, off);
                return ret;
            }
            bdrv_dirty_bitmap_deserialize_part(bitmap, buf, start, bytes);
        } else if (table[i] & BME_TABLE_ENTRY_FLAG_ALL_ONES) {
            bdrv_dirty_bitmap_deserialize_part(bitmap, NULL, start, bytes);
        }
    }
    return 0;
}

/* Rewrites the directory where it is, same size (only flags change). */
static int coroutine_fn qcow2_bitmap_dir_rewrite(BlockDriverState *bs,
                                                 GPtrArray *list)
{
    BDRVQcow2State *s = bs->opaque;
    size_t size;
    g_autofree uint8_t *buf = qcow2_bitmap_dir_serialise(list, &size);
    int ret;

    assert(size == s->bitmap_directory_size);
    ret = qcow2_pre_write_overlap_check(bs, QCOW2_OL_BITMAP_DIRECTORY,
                                        s->bitmap_directory_offset, size);
    if (ret < 0) {
        return ret;
    }
    ret = bdrv_pwrite(bs->file, s->bitmap_directory_offset, size, buf, 0);
    if (ret == 0) {
        ret = bdrv_flush(bs->file->bs);
    }
    return ret;
}

int coroutine_fn qcow2_load_dirty_bitmaps(BlockDriverState *bs, int flags,
                                          Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    bool writable = (flags & BDRV_O_RDWR) && !(flags & BDRV_O_INACTIVE);
    g_autoptr(GPtrArray) list = NULL;
    bool mark = false;
    int ret;

    /* as QEMU: the first flush stores them clean (invariant 4) */
    s->bitmaps_state = writable ? QCOW2_BITMAPS_IN_USE : QCOW2_BITMAPS_STORED;
    if (!s->nb_bitmaps) {
        return 0;
    }
    list = qcow2_bitmap_dir_read(bs, errp);
    if (!list) {
        return -EINVAL;
    }
    for (guint i = 0; i < list->len; i++) {
        Qcow2Bitmap *bm = list->pdata[i];
        const char *problem = qcow2_bitmap_entry_problem(bs, bm);
        BdrvDirtyBitmap *bitmap;

        if (problem) {
            error_setg(errp, "Bitmap '%s' of the bitmap directory is "
                       "invalid: %s", bm->name, problem);
            return -EINVAL;
        }
        bitmap = bdrv_create_dirty_bitmap(bs, 1U << bm->granularity_bits,
                                          bm->name, errp);
        if (!bitmap) {
            return -EINVAL;
        }
        bdrv_dirty_bitmap_set_persistence(bitmap, true);
        if (bm->flags & BME_FLAG_IN_USE) {
            bdrv_dirty_bitmap_set_inconsistent(bitmap);
        } else {
            ret = qcow2_bitmap_load_data(bs, bm, bitmap, errp);
            if (ret < 0) {
                return ret;
            }
            if (!(bm->flags & BME_FLAG_AUTO)) {
                bdrv_disable_dirty_bitmap(bitmap);
            }
            mark = true;
            bm->flags |= BME_FLAG_IN_USE;
        }
        if (!writable) {
            bdrv_dirty_bitmap_set_readonly(bitmap, true);
        }
    }
    if (writable && mark) {
        /* invariant 1 */
        ret = qcow2_bitmap_dir_rewrite(bs, list);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not mark the bitmaps in use");
            return ret;
        }
    }
    return 0;
}

static Qcow2Bitmap *qcow2_bitmap_find(GPtrArray *list, const char *name)
{
    for (guint i = 0; i < list->len; i++) {
        Qcow2Bitmap *bm = list->pdata[i];

        if (!strcmp(bm->name, name)) {
            return bm;
        }
    }
    return NULL;
}

int coroutine_fn qcow2_reopen_bitmaps(BlockDriverState *bs, bool writable,
                                      Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GPtrArray) list = NULL;
    bool mark = false;

    list = qcow2_bitmap_dir_read(bs, errp);
    if (!list) {
        return -EINVAL;
    }
    for (BdrvDirtyBitmap *b = bdrv_dirty_bitmap_first(bs); b;
         b = bdrv_dirty_bitmap_next(b)) {
        Qcow2Bitmap *bm;

        if (!bdrv_dirty_bitmap_name(b) ||
            !bdrv_dirty_bitmap_get_persistence(b)) {
            continue;
        }
        bdrv_dirty_bitmap_set_readonly(b, !writable);
        bm = qcow2_bitmap_find(list, bdrv_dirty_bitmap_name(b));
        if (writable && bm && !bdrv_dirty_bitmap_inconsistent(b) &&
            !(bm->flags & BME_FLAG_IN_USE)) {
            bm->flags |= BME_FLAG_IN_USE;
            mark = true;
        }
    }
    /* invariant 1, before the first write of the writable node */
    if (writable && mark && qcow2_bitmap_dir_rewrite(bs, list) < 0) {
        error_setg(errp, "Could not mark the bitmaps in use");
        return -EIO;
    }
    if (writable) {
        s->bitmaps_state = QCOW2_BITMAPS_IN_USE;            /* invariant 4 */
    }
    return 0;
}

/* ---- storing ---- */

/*
 * Writes @bitmap's data and table into new clusters; fills @bm's table
 * offset and size.  The clusters are freed again on failure.
 */
static int coroutine_fn qcow2_bitmap_write(BlockDriverState *bs,
                                           BdrvDirtyBitmap *bitmap,
                                           Qcow2Bitmap *bm)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t size = bdrv_dirty_bitmap_size(bitmap);
    int64_t chunk = (int64_t)s->cluster_size * 8 << bm->granularity_bits;
    uint64_t n = qcow2_bitmap_table_needed(s, bm->granularity_bits);
    g_autofree uint64_t *table = g_try_new0(uint64_t, MAX(n, 1));
    g_autofree uint8_t *buf = g_malloc(s->cluster_size);
    int64_t table_offset = -1;
    uint64_t i;
    int ret = 0;

    if (!table) {
        return -ENOMEM;
    }
    for (i = 0; i < n; i++) {
        int64_t start = i * chunk;
        int64_t off;

        if (bdrv_dirty_bitmap_next_dirty(bitmap, start, chunk) < 0) {
            continue;       /* table entry 0: a cluster of zeroes */
        }
        memset(buf, 0, s->cluster_size);
        bdrv_dirty_bitmap_serialize_part(bitmap, buf, start,
                                         MIN(chunk, size - start));
        off = qcow2_alloc_clusters(bs, s->cluster_size);
        if (off < 0) {
            ret = off;
            goto fail;
        }
        table[i] = off;
        ret = qcow2_pre_write_overlap_check(bs, 0, off, s->cluster_size);
        if (ret == 0) {
            ret = bdrv_pwrite(bs->file, off, s->cluster_size, buf, 0);
        }
        if (ret < 0) {
            goto fail;
        }
    }
    table_offset = qcow2_alloc_clusters(bs, n * 8);
    if (table_offset < 0) {
        ret = table_offset;
        goto fail;
    }
    for (i = 0; i < n; i++) {
        table[i] = GUINT64_TO_BE(table[i]);
    }
    ret = qcow2_pre_write_overlap_check(bs, 0, table_offset, n * 8);
    if (ret == 0) {
        ret = bdrv_pwrite(bs->file, table_offset, n * 8, table, 0);
    }
    if (ret < 0) {
        qcow2_free_clusters(bs, table_offset, n * 8, QCOW2_DISCARD_NEVER);
        for (i = 0; i < n; i++) {
            table[i] = GUINT64_FROM_BE(table[i]);
        }
        goto fail;
    }
    bm->table_offset = table_offset;
    bm->table_size = n;
    return 0;

fail:
    for (i = 0; i < n; i++) {
        if (table[i]) {
            qcow2_free_clusters(bs, table[i], s->cluster_size,
                                QCOW2_DISCARD_NEVER);
        }
    }
    return ret;
}

/* Frees @bm's data clusters and table (they are no longer referenced). */
static void qcow2_bitmap_free_clusters(BlockDriverState *bs,
                                       const Qcow2Bitmap *bm)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint64_t *table = qcow2_bitmap_table_read(bs, bm, NULL);

    if (!table) {
        return;     /* unreadable: leaked, check -r reclaims it */
    }
    for (uint32_t i = 0; i < bm->table_size; i++) {
        if (table[i] & BME_TABLE_ENTRY_OFFSET_MASK) {
            qcow2_free_clusters(bs, table[i] & BME_TABLE_ENTRY_OFFSET_MASK,
                                s->cluster_size, QCOW2_DISCARD_OTHER);
        }
    }
    qcow2_free_clusters(bs, bm->table_offset, (int64_t)bm->table_size * 8,
                        QCOW2_DISCARD_OTHER);
}

/*
 * Writes @list as the new directory and points the header at it
 * (invariant 2: what it names must be on disk already; this flushes it
 * all before the header write), then frees the old directory.
 */
static int coroutine_fn qcow2_bitmap_dir_commit(BlockDriverState *bs,
                                                GPtrArray *list,
                                                Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t old_offset = s->bitmap_directory_offset;
    uint64_t old_size = s->bitmap_directory_size;
    uint32_t old_nb = s->nb_bitmaps;
    g_autofree uint8_t *dir = NULL;
    int64_t offset = 0;
    size_t size = 0;
    int ret;

    if (list->len > QCOW2_MAX_BITMAPS) {
        error_setg(errp, "Too many persistent bitmaps: %u (at most %d)",
                   list->len, QCOW2_MAX_BITMAPS);
        return -EFBIG;
    }
    if (list->len) {
        dir = qcow2_bitmap_dir_serialise(list, &size);
        offset = qcow2_alloc_clusters(bs, size);
        if (offset < 0) {
            error_setg_errno(errp, -offset, "Failed to allocate the bitmap "
                             "directory");
            return offset;
        }
        ret = qcow2_pre_write_overlap_check(bs, 0, offset, size);
        if (ret == 0) {
            ret = bdrv_pwrite(bs->file, offset, size, dir, 0);
        }
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to write the bitmap "
                             "directory");
            goto fail;
        }
    }
    ret = qcow2_flush_caches(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to flush the bitmaps");
        goto fail;
    }
    s->nb_bitmaps = list->len;
    s->bitmap_directory_offset = offset;
    s->bitmap_directory_size = size;
    if (list->len) {                                        /* invariant 3 */
        s->autoclear_features |= QCOW2_AUTOCLEAR_BITMAPS;
    } else {
        s->autoclear_features &= ~(uint64_t)QCOW2_AUTOCLEAR_BITMAPS;
    }
    qcow2_overlap_singles_changed(s);
    ret = qcow2_update_header(bs);
    if (ret == 0) {
        ret = bdrv_flush(bs->file->bs);
    }
    if (ret < 0) {
        s->nb_bitmaps = old_nb;
        s->bitmap_directory_offset = old_offset;
        s->bitmap_directory_size = old_size;
        if (old_nb) {
            s->autoclear_features |= QCOW2_AUTOCLEAR_BITMAPS;
        }
        qcow2_overlap_singles_changed(s);
        error_setg_errno(errp, -ret, "Failed to update the header for the "
                         "bitmaps");
        goto fail;
    }
    if (old_size) {
        qcow2_free_clusters(bs, old_offset, old_size, QCOW2_DISCARD_OTHER);
    }
    return 0;

fail:
    if (size) {
        qcow2_free_clusters(bs, offset, size, QCOW2_DISCARD_NEVER);
    }
    return ret;
}

/*
 * The entry that stores in-memory @b: the on-disk one kept as it is for an
 * inconsistent bitmap (@prev), else new tables and data.
 */
static int coroutine_fn qcow2_bitmap_store_one(BlockDriverState *bs,
                                               BdrvDirtyBitmap *b,
                                               Qcow2Bitmap *prev,
                                               GPtrArray *new)
{
    Qcow2Bitmap *bm = g_new0(Qcow2Bitmap, 1);

    bm->name = g_strdup(bdrv_dirty_bitmap_name(b));
    bm->type = BT_DIRTY_TRACKING_BITMAP;
    bm->granularity_bits = ctz64(bdrv_dirty_bitmap_granularity(b));
    g_ptr_array_add(new, bm);
    if (prev && prev->extra_data_size) {
        bm->extra_data_size = prev->extra_data_size;
        bm->extra_data = g_memdup2(prev->extra_data, prev->extra_data_size);
    }
    if (bdrv_dirty_bitmap_inconsistent(b) && prev) {
        /* nothing to store: the on-disk bitmap stays, in use */
        bm->table_offset = prev->table_offset;
        bm->table_size = prev->table_size;
        bm->flags = prev->flags | BME_FLAG_IN_USE;
        prev->table_offset = 0;         /* still referenced: not freed */
        return 0;
    }
    bm->flags = bdrv_dirty_bitmap_enabled(b) ||
                bdrv_dirty_bitmap_has_successor(b) ? BME_FLAG_AUTO : 0;
    return qcow2_bitmap_write(bs, b, bm);
}

static BdrvDirtyBitmap *qcow2_bitmap_find_persistent(BlockDriverState *bs,
                                                     const char *name)
{
    BdrvDirtyBitmap *b = bdrv_find_dirty_bitmap(bs, name);

    return b && bdrv_dirty_bitmap_get_persistence(b) ? b : NULL;
}

/*
 * The new directory keeps the order of the old one for the bitmaps it
 * had and appends the new ones in the node's list order, as QEMU does, so
 * that info lists them as qemu-img would.
 */
int coroutine_fn qcow2_store_dirty_bitmaps(BlockDriverState *bs,
                                           Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GPtrArray) old = NULL;
    g_autoptr(GPtrArray) new = g_ptr_array_new_with_free_func(
        qcow2_bitmap_free);
    int ret = 0;

    /*
     * invariant 4: a bit set from now on may miss the store; whoever sets
     * one waits for s->lock and marks the bitmaps in use again after it
     */
    s->bitmaps_state = QCOW2_BITMAPS_STORED;
    old = qcow2_bitmap_dir_read(bs, errp);
    if (!old) {
        return -EINVAL;
    }
    if (!old->len && !bdrv_has_named_bitmaps(bs)) {
        return 0;
    }
    /*
     * Clusters freed since the last flush (a discard) may be allocated
     * below: the mappings that dropped them reach the disk first, so that
     * a cut cannot leave a guest cluster pointing at bitmap data.
     */
    ret = qcow2_flush_caches(bs);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to flush before storing the "
                         "bitmaps");
        return ret;
    }
    if (s->qcow_version < 3) {
        /*
         * amend made it a v2 image, which cannot keep bitmaps: they leave
         * it whole (QEMU leaves them behind, inconsistent, as leaks)
         */
        if (bdrv_has_named_bitmaps(bs)) {
            warn_report("Persistent bitmaps of node '%s' dropped: a qcow2 "
                        "v2 image cannot keep them", bdrv_get_node_name(bs));
        }
        goto commit;
    }
    for (guint i = 0; ret == 0 && i < old->len; i++) {
        Qcow2Bitmap *prev = old->pdata[i];
        BdrvDirtyBitmap *b = qcow2_bitmap_find_persistent(bs, prev->name);

        if (b) {
            ret = qcow2_bitmap_store_one(bs, b, prev, new);
        }
    }
    for (BdrvDirtyBitmap *b = bdrv_dirty_bitmap_first(bs); ret == 0 && b;
         b = bdrv_dirty_bitmap_next(b)) {
        const char *name = bdrv_dirty_bitmap_name(b);

        if (name && bdrv_dirty_bitmap_get_persistence(b) &&
            !qcow2_bitmap_find(old, name)) {
            ret = qcow2_bitmap_store_one(bs, b, NULL, new);
        }
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to write bitmap '%s' to file",
                         ((Qcow2Bitmap *)new->pdata[new->len - 1])->name);
        goto fail;
    }
commit:
    ret = qcow2_bitmap_dir_commit(bs, new, errp);
    if (ret < 0) {
        goto fail;
    }
    /* the old tables and data are unreferenced now */
    for (guint i = 0; i < old->len; i++) {
        Qcow2Bitmap *bm = old->pdata[i];

        if (bm->table_offset && !qcow2_bitmap_entry_problem(bs, bm)) {
            qcow2_bitmap_free_clusters(bs, bm);
        }
    }
    ret = qcow2_flush_caches(bs);
    if (ret < 0) {
        /* stored: only the old clusters may leak */
        error_setg_errno(errp, -ret, "Failed to free the old bitmaps");
    }
    return ret;

fail:
    for (guint i = 0; i < new->len; i++) {
        Qcow2Bitmap *bm = new->pdata[i];

        if (bm->table_offset && !(bm->flags & BME_FLAG_IN_USE)) {
            qcow2_bitmap_free_clusters(bs, bm);
        }
    }
    return ret;
}

/* ---- checkpoints ---- */

/* Whether the image has persistent bitmaps, stored or to store. */
static bool qcow2_has_persistent_bitmaps(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    for (BdrvDirtyBitmap *b = bdrv_dirty_bitmap_first(bs); b;
         b = bdrv_dirty_bitmap_next(b)) {
        if (bdrv_dirty_bitmap_name(b) &&
            bdrv_dirty_bitmap_get_persistence(b)) {
            return true;
        }
    }
    return s->nb_bitmaps > 0;
}

int coroutine_fn qcow2_mark_bitmaps_in_use_locked(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GPtrArray) list = NULL;
    bool mark = false;
    int ret = 0;

    /* a read-only node marks them when it becomes writable (invariant 1) */
    if (s->bitmaps_state != QCOW2_BITMAPS_STORED || !bdrv_is_writable(bs) ||
        !qcow2_has_persistent_bitmaps(bs)) {
        return 0;
    }
    list = qcow2_bitmap_dir_read(bs, NULL);
    if (!list) {
        return -EIO;
    }
    for (guint i = 0; i < list->len; i++) {
        Qcow2Bitmap *bm = list->pdata[i];

        mark |= !(bm->flags & BME_FLAG_IN_USE);
        bm->flags |= BME_FLAG_IN_USE;
    }
    if (mark) {
        ret = qcow2_bitmap_dir_rewrite(bs, list);
    }
    if (ret == 0) {
        s->bitmaps_state = QCOW2_BITMAPS_IN_USE;            /* invariant 4 */
    }
    return ret;
}

int coroutine_fn qcow2_co_mark_bitmaps_in_use(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    /*
     * The request path's common case, without the lock: a store sets
     * STORED under it and a racing writer then finds it so (invariant 4).
     */
    if (s->bitmaps_state != QCOW2_BITMAPS_STORED) {
        return 0;
    }
    qemu_co_mutex_lock(&s->lock);
    ret = qcow2_mark_bitmaps_in_use_locked(bs);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

/* Whether a job froze a persistent bitmap (invariant 5). */
static bool qcow2_bitmaps_frozen(BlockDriverState *bs)
{
    for (BdrvDirtyBitmap *b = bdrv_dirty_bitmap_first(bs); b;
         b = bdrv_dirty_bitmap_next(b)) {
        if (bdrv_dirty_bitmap_get_persistence(b) &&
            bdrv_dirty_bitmap_has_successor(b)) {
            return true;
        }
    }
    return false;
}

void coroutine_fn qcow2_checkpoint_bitmaps(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    Error *err = NULL;

    if (s->bitmaps_state != QCOW2_BITMAPS_IN_USE ||        /* invariant 5 */
        !bdrv_is_writable(bs) || (bs->open_flags & BDRV_O_NO_FLUSH) ||
        qcow2_bitmaps_frozen(bs) || !qcow2_has_persistent_bitmaps(bs)) {
        return;
    }
    if (qcow2_store_dirty_bitmaps(bs, &err) < 0) {
        /* what the header names is either directory: in use, both */
        warn_report("Could not store the bitmaps of node '%s' at a flush: "
                    "%s", bdrv_get_node_name(bs), error_get_pretty(err));
        error_free(err);
        qcow2_mark_bitmaps_in_use_locked(bs);
        return;
    }
    assert(s->bitmaps_state == QCOW2_BITMAPS_STORED);       /* invariant 4 */
}

typedef struct Qcow2BitmapRemove {
    const char *name;
    Error **errp;
} Qcow2BitmapRemove;

/* The directory without @r->name, committed; its clusters freed. */
static int coroutine_fn qcow2_bitmap_remove_co(BlockDriverState *bs,
                                               void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2BitmapRemove *r = opaque;
    g_autoptr(GPtrArray) list = NULL;
    Qcow2Bitmap *bm;
    guint idx;
    int ret;

    qemu_co_mutex_lock(&s->lock);
    list = qcow2_bitmap_dir_read(bs, r->errp);
    if (!list) {
        qemu_co_mutex_unlock(&s->lock);
        return -EINVAL;
    }
    bm = qcow2_bitmap_find(list, r->name);
    if (!bm) {
        qemu_co_mutex_unlock(&s->lock);
        return 0;       /* never stored: nothing on disk */
    }
    g_ptr_array_find(list, bm, &idx);
    g_ptr_array_steal_index(list, idx);
    ret = qcow2_bitmap_dir_commit(bs, list, r->errp);
    if (ret == 0 && !qcow2_bitmap_entry_problem(bs, bm)) {
        qcow2_bitmap_free_clusters(bs, bm);
        ret = qcow2_flush_caches(bs);
    }
    qcow2_bitmap_free(bm);
    qemu_co_mutex_unlock(&s->lock);
    return ret;
}

int qcow2_remove_persistent_dirty_bitmap(BlockDriverState *bs,
                                         const char *name, Error **errp)
{
    Qcow2BitmapRemove r = { .name = name, .errp = errp };

    return bdrv_run_co(bs, qcow2_bitmap_remove_co, &r);
}

/* QEMU's checks, in its words, behind "Can't make bitmap ... persistent". */
static bool qcow2_bitmap_constraints(BlockDriverState *bs, const char *name,
                                     uint32_t granularity, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int gran_bits = ctz64(granularity);
    uint64_t dir_size = 0, count = 0;

    if (s->qcow_version < 3) {
        error_setg(errp, "Cannot store dirty bitmaps in qcow2 v2 files");
        return false;
    }
    for (BdrvDirtyBitmap *b = bdrv_dirty_bitmap_first(bs); b;
         b = bdrv_dirty_bitmap_next(b)) {
        if (bdrv_dirty_bitmap_name(b) &&
            bdrv_dirty_bitmap_get_persistence(b)) {
            count++;
            dir_size += ROUND_UP(sizeof(Qcow2BitmapDirEntry) +
                                 strlen(bdrv_dirty_bitmap_name(b)), 8);
        }
    }
    if (count >= QCOW2_MAX_BITMAPS) {
        error_setg(errp, "Maximum number of persistent bitmaps is already "
                   "reached");
        return false;
    }
    if (dir_size + ROUND_UP(sizeof(Qcow2BitmapDirEntry) + strlen(name), 8) >
        QCOW2_MAX_BITMAP_DIRECTORY_SIZE) {
        error_setg(errp, "Not enough space in the bitmap directory");
        return false;
    }
    if (gran_bits < BME_MIN_GRANULARITY_BITS) {
        error_setg(errp, "Granularity is under minimum (%llu bytes)",
                   1ULL << BME_MIN_GRANULARITY_BITS);
        return false;
    }
    if (gran_bits > BME_MAX_GRANULARITY_BITS) {
        error_setg(errp, "Granularity exceeds maximum (%llu bytes)",
                   1ULL << BME_MAX_GRANULARITY_BITS);
        return false;
    }
    if (DIV_ROUND_UP(DIV_ROUND_UP(s->virtual_size, granularity), 8) >
        BME_MAX_PHYS_SIZE) {
        error_setg(errp, "Too much space will be occupied by the bitmap. "
                   "Use larger granularity");
        return false;
    }
    if (strlen(name) > BME_MAX_NAME_SIZE) {
        error_setg(errp, "Name length exceeds maximum (%u characters)",
                   BME_MAX_NAME_SIZE);
        return false;
    }
    return true;
}

bool qcow2_supports_persistent_dirty_bitmap(BlockDriverState *bs)
{
    return ((BDRVQcow2State *)bs->opaque)->qcow_version >= 3;
}

bool qcow2_can_store_new_dirty_bitmap(BlockDriverState *bs, const char *name,
                                      uint32_t granularity, Error **errp)
{
    Error *err = NULL;

    if (qcow2_bitmap_constraints(bs, name, granularity, &err)) {
        return true;
    }
    error_setg(errp, "Can't make bitmap '%s' persistent in '%s': %s", name,
               bdrv_get_node_name(bs), error_get_pretty(err));
    error_free(err);
    return false;
}

/* ---- check, info, measure ---- */

int qcow2_bitmaps_for_each_ref(BlockDriverState *bs, BdrvCheckResult *res,
                               Qcow2BitmapRefFn *fn, void *opaque)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GPtrArray) list = NULL;
    Error *err = NULL;
    int ret;

    if (!s->nb_bitmaps) {
        return 0;
    }
    list = qcow2_bitmap_dir_read(bs, &err);
    if (!list) {
        fprintf(stderr, "ERROR %s\n", error_get_pretty(err));
        error_free(err);
        res->corruptions++;
        return 0;
    }
    ret = fn(opaque, s->bitmap_directory_offset, s->bitmap_directory_size);
    for (guint i = 0; ret == 0 && i < list->len; i++) {
        Qcow2Bitmap *bm = list->pdata[i];
        const char *problem = qcow2_bitmap_entry_problem(bs, bm);
        g_autofree uint64_t *table = NULL;

        if (problem) {
            fprintf(stderr, "ERROR bitmap '%s': %s\n", bm->name, problem);
            res->corruptions++;
            continue;
        }
        ret = fn(opaque, bm->table_offset, (int64_t)bm->table_size * 8);
        table = ret == 0 ? qcow2_bitmap_table_read(bs, bm, &err) : NULL;
        if (ret == 0 && !table) {
            fprintf(stderr, "ERROR %s\n", error_get_pretty(err));
            error_free(err);
            err = NULL;
            res->corruptions++;
            continue;
        }
        for (uint32_t j = 0; ret == 0 && table && j < bm->table_size; j++) {
            uint64_t off = table[j] & BME_TABLE_ENTRY_OFFSET_MASK;

            if (off) {
                ret = fn(opaque, off, s->cluster_size);
            }
        }
    }
    return ret;
}

JsonArray *qcow2_get_bitmap_info_list(BlockDriverState *bs)
{
    g_autoptr(GPtrArray) list = NULL;
    JsonArray *arr;

    list = qcow2_bitmap_dir_read(bs, NULL);
    if (!list || !list->len) {
        return NULL;
    }
    arr = json_array_new();
    for (guint i = 0; i < list->len; i++) {
        Qcow2Bitmap *bm = list->pdata[i];
        JsonObject *o = json_object_new();
        JsonArray *flags = json_array_new();

        if (bm->flags & BME_FLAG_IN_USE) {
            json_array_add_string_element(flags, "in-use");
        }
        if (bm->flags & BME_FLAG_AUTO) {
            json_array_add_string_element(flags, "auto");
        }
        json_object_set_array_member(o, "flags", flags);
        json_object_set_string_member(o, "name", bm->name);
        json_object_set_int_member(o, "granularity",
                                   1LL << bm->granularity_bits);
        json_array_add_object_element(arr, o);
    }
    return arr;
}

/* QEMU's qcow2_get_persistent_dirty_bitmap_size(). */
uint64_t qcow2_bitmaps_measure(BlockDriverState *in_bs, int cluster_size)
{
    uint64_t total = 0, dir = 0;

    for (BdrvDirtyBitmap *b = bdrv_dirty_bitmap_first(in_bs); b;
         b = bdrv_dirty_bitmap_next(b)) {
        uint64_t bits, clusters;

        if (!bdrv_dirty_bitmap_name(b) ||
            !bdrv_dirty_bitmap_get_persistence(b)) {
            continue;
        }
        bits = DIV_ROUND_UP(bdrv_dirty_bitmap_size(b),
                            bdrv_dirty_bitmap_granularity(b));
        clusters = DIV_ROUND_UP(DIV_ROUND_UP(bits, 8), cluster_size);
        /* every data cluster allocated, and the table entries for them */
        total += clusters * cluster_size;
        total += ROUND_UP(clusters * 8, cluster_size);
        dir += ROUND_UP(sizeof(Qcow2BitmapDirEntry) +
                        strlen(bdrv_dirty_bitmap_name(b)), 8);
    }
    return total + ROUND_UP(dir, cluster_size);
}
