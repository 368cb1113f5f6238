/*
 * parallels format extension: the cluster at the header's ext_off that
 * holds the dirty bitmaps Virtuozzo's ploop leaves in an image (for its
 * incremental backups), loaded read-only as QEMU loads them, so that
 * qblock-nbd --bitmap can export one.
 *
 * The cluster: the magic (64 bits), the MD5 of the rest of the cluster
 * from byte 24, then features until one whose magic is 0.  A feature is
 * its magic, 64 bits of flags, a 32-bit data size and 32 unused bits,
 * then its data.  A dirty bitmap's data: the disk size in sectors (64
 * bits), a 16-byte UUID (its name), the granularity in sectors and the
 * number of L1 entries (32 bits each), then the L1 table: one 64-bit
 * entry per cluster of bitmap data, 0 for all clear, 1 for all set, else
 * the data cluster's file offset in sectors; bits least significant
 * first, a bit per granule.  All little-endian.
 */
#include "block/parallels.h"
#include "block/dirty-bitmap.h"

#define PARALLELS_FEATURE_HEADER    24
#define PARALLELS_FEATURE_END       0
#define PARALLELS_FEATURE_BITMAP    0x20385fae252cb34aull
#define PARALLELS_BITMAP_HEADER     32
#define PARALLELS_L1_ALL_ONES       1
/* A bound on the cluster read whole: QEMU's default is 1 MiB. */
#define PARALLELS_EXT_MAX           (64u << 20)

typedef struct QEMU_PACKED ParallelsFeature {
    uint64_t magic;
    uint64_t flags;
    uint32_t data_size;
    uint32_t unused;
} ParallelsFeature;

typedef struct QEMU_PACKED ParallelsBitmapHeader {
    uint64_t size;              /* sectors */
    uint8_t id[16];
    uint32_t granularity;       /* sectors */
    uint32_t l1_size;
} ParallelsBitmapHeader;

static char *parallels_uuid_name(const uint8_t id[16])
{
    return g_strdup_printf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                           "%02x%02x%02x%02x%02x%02x", id[0], id[1], id[2],
                           id[3], id[4], id[5], id[6], id[7], id[8], id[9],
                           id[10], id[11], id[12], id[13], id[14], id[15]);
}

/* Fills @bitmap from the L1 table @l1 of @l1_size entries. */
static int parallels_load_bitmap_data(BlockDriverState *bs,
                                      BdrvDirtyBitmap *bitmap,
                                      const uint64_t *l1, uint32_t l1_size,
                                      Error **errp)
{
    BDRVParallelsState *s = bs->opaque;
    int64_t size = bdrv_dirty_bitmap_size(bitmap);
    int64_t chunk = (int64_t)s->cluster_size * 8 *
                    bdrv_dirty_bitmap_granularity(bitmap);
    g_autofree uint8_t *buf = g_try_malloc(s->cluster_size);

    if (!buf) {
        error_setg(errp, "Could not allocate a bitmap cluster");
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < l1_size && (int64_t)i * chunk < size; i++) {
        uint64_t entry = GUINT64_FROM_LE(l1[i]);
        int64_t start = (int64_t)i * chunk;
        int64_t bytes = MIN(chunk, size - start);
        int ret;

        if (entry == 0) {
            continue;
        }
        if (entry == PARALLELS_L1_ALL_ONES) {
            bdrv_dirty_bitmap_deserialize_part(bitmap, NULL, start, bytes);
            continue;
        }
        if (entry > (INT64_MAX - s->cluster_size) / PARALLELS_SECTOR) {
            error_setg(errp, "Bitmap L1 entry %" PRIu32 " (%" PRIu64 ") is "
                       "past the largest file offset", i, entry);
            return -EINVAL;
        }
        ret = bdrv_pread(bs->file, entry * PARALLELS_SECTOR, s->cluster_size,
                         buf, 0);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not read bitmap data");
            return ret;
        }
        bdrv_dirty_bitmap_deserialize_part(bitmap, buf, start, bytes);
    }
    return 0;
}

/* One dirty bitmap feature of @len bytes at @data. */
static int parallels_load_bitmap(BlockDriverState *bs, const uint8_t *data,
                                 uint32_t len, Error **errp)
{
    BDRVParallelsState *s = bs->opaque;
    ParallelsBitmapHeader h;
    g_autofree char *name = NULL;
    BdrvDirtyBitmap *bitmap;
    uint64_t granularity, chunk, needed;
    uint32_t l1_size;
    int ret;

    if (len < sizeof(h)) {
        error_setg(errp, "Dirty bitmap feature of %" PRIu32 " bytes is too "
                   "short", len);
        return -EINVAL;
    }
    memcpy(&h, data, sizeof(h));
    name = parallels_uuid_name(h.id);
    granularity = (uint64_t)GUINT32_FROM_LE(h.granularity) *
                  PARALLELS_SECTOR;
    l1_size = GUINT32_FROM_LE(h.l1_size);
    if (GUINT64_FROM_LE(h.size) * PARALLELS_SECTOR != s->disk_size ||
        GUINT64_FROM_LE(h.size) > INT64_MAX / PARALLELS_SECTOR) {
        error_setg(errp, "Bitmap '%s' is of %" PRIu64 " sectors, the disk "
                   "of %" PRIu64, name, GUINT64_FROM_LE(h.size),
                   s->disk_size / PARALLELS_SECTOR);
        return -EINVAL;
    }
    if (granularity == 0 || granularity > UINT32_MAX ||
        (granularity & (granularity - 1))) {
        error_setg(errp, "Bitmap '%s' has a granularity of %" PRIu64
                   " bytes, not a power of two", name, granularity);
        return -EINVAL;
    }
    chunk = s->cluster_size * 8 * granularity;
    needed = DIV_ROUND_UP(s->disk_size, chunk);
    if (l1_size < needed ||
        (uint64_t)l1_size * sizeof(uint64_t) > len - sizeof(h)) {
        error_setg(errp, "Bitmap '%s' has %" PRIu32 " L1 entries where %"
                   PRIu64 " are needed and %" PRIu64 " fit its feature",
                   name, l1_size, needed,
                   (uint64_t)(len - sizeof(h)) / sizeof(uint64_t));
        return -EINVAL;
    }
    bitmap = bdrv_create_dirty_bitmap(bs, granularity, name, errp);
    if (!bitmap) {
        return -EINVAL;
    }
    ret = parallels_load_bitmap_data(bs, bitmap,
                                     (const uint64_t *)(data + sizeof(h)),
                                     l1_size, errp);
    if (ret < 0) {
        bdrv_release_dirty_bitmap(bitmap);
        return ret;
    }
    /* the image is read-only here: the bitmap records no new write */
    bdrv_disable_dirty_bitmap(bitmap);
    bdrv_dirty_bitmap_set_readonly(bitmap, true);
    return 0;
}

/* Walks the features of the extension cluster @ext of @len bytes. */
static int parallels_load_features(BlockDriverState *bs, const uint8_t *ext,
                                   uint64_t len, Error **errp)
{
    uint64_t pos = PARALLELS_FEATURE_HEADER;

    while (pos + sizeof(ParallelsFeature) <= len) {
        ParallelsFeature f;
        uint32_t size;
        int ret;

        memcpy(&f, ext + pos, sizeof(f));
        if (GUINT64_FROM_LE(f.magic) == PARALLELS_FEATURE_END) {
            return 0;
        }
        size = GUINT32_FROM_LE(f.data_size);
        pos += sizeof(f);
        if (size > len - pos) {
            error_setg(errp, "Format Extension feature 0x%" PRIx64 " of %"
                       PRIu32 " bytes runs past its cluster",
                       GUINT64_FROM_LE(f.magic), size);
            return -EINVAL;
        }
        if (GUINT64_FROM_LE(f.magic) == PARALLELS_FEATURE_BITMAP) {
            ret = parallels_load_bitmap(bs, ext + pos, size, errp);
            if (ret < 0) {
                return ret;
            }
        }
        /* a feature qblock does not know is skipped, as by QEMU */
        pos += size;
    }
    return 0;
}

int parallels_load_extension(BlockDriverState *bs, Error **errp)
{
    BDRVParallelsState *s = bs->opaque;
    uint64_t ext = GUINT64_FROM_LE(s->header.ext_off);
    g_autofree uint8_t *buf = NULL;
    g_autoptr(GChecksum) md5 = g_checksum_new(G_CHECKSUM_MD5);
    uint8_t digest[16];
    gsize digest_len = sizeof(digest);
    uint64_t magic;
    int ret;

    if (s->cluster_size > PARALLELS_EXT_MAX) {
        error_setg(errp, "Format Extension of %" PRIu64 " bytes (the "
                   "cluster size) is larger than the %u MiB qblock reads",
                   s->cluster_size, PARALLELS_EXT_MAX >> 20);
        return -EFBIG;
    }
    if (ext > (INT64_MAX - s->cluster_size) / PARALLELS_SECTOR) {
        error_setg(errp, "Format Extension offset %" PRIu64 " is past the "
                   "largest file offset", ext);
        return -EINVAL;
    }
    buf = g_try_malloc(s->cluster_size);
    if (!buf) {
        error_setg(errp, "Could not allocate the Format Extension");
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, ext * PARALLELS_SECTOR, s->cluster_size, buf,
                     0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the Format Extension");
        return ret;
    }
    memcpy(&magic, buf, sizeof(magic));
    if (GUINT64_FROM_LE(magic) != PARALLELS_EXT_MAGIC) {
        error_setg(errp, "Wrong parallels Format Extension magic: 0x%" PRIx64
                   ", expected: 0x%" PRIx64, GUINT64_FROM_LE(magic),
                   (uint64_t)PARALLELS_EXT_MAGIC);
        return -EINVAL;
    }
    /* cluster_size >= 512 (parallels.h inv. 1): the header fits */
    g_checksum_update(md5, buf + PARALLELS_FEATURE_HEADER,
                      s->cluster_size - PARALLELS_FEATURE_HEADER);
    g_checksum_get_digest(md5, digest, &digest_len);
    if (memcmp(digest, buf + sizeof(magic), sizeof(digest))) {
        error_setg(errp, "Wrong checksum in Format Extension header. Format "
                   "extension is corrupted.");
        return -EINVAL;
    }
    ret = parallels_load_features(bs, buf, s->cluster_size, errp);
    if (ret < 0) {
        bdrv_release_all_dirty_bitmaps(bs);
    }
    return ret;
}
