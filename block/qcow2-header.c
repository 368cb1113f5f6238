/*
 * qcow2 header: probing, reading and validating the header and its
 * extensions, writing it back, and the dirty and corrupt bits.
 *
 * Invariants of this file, cited as "qcow2-header.c inv. N" (qcow2.h's
 * apply as well):
 *  1. The header cluster is written at one place, qcow2_header_pwrite():
 *     the whole of it by qcow2_update_header(), the incompatible feature
 *     field alone by the dirty/corrupt bit updates.
 *  2. Header extensions this driver does not know are written back
 *     unchanged.
 */
#include "block/qcow2.h"

#include "qblock/block-backend.h"
#include "util/qapi-event.h"

/* Bytes of a v2 header and of the smallest v3 header. */
#define QCOW2_V2_HEADER_SIZE    72
#define QCOW2_V3_MIN_HEADER_LEN 104

/* The fixed part of a snapshot table entry (qcow2-snapshot.c). */
#define QCOW2_SNAPSHOT_MIN_ENTRY 40

/*
 * The feature name table (392 bytes) is optional; like QEMU, it is left
 * out of header clusters smaller than 8 KiB, where it would crowd out the
 * backing file name (a 512-byte cluster could not hold both).
 */
#define QCOW2_FEATURE_TABLE_MIN_CLUSTER 8192

/* The feature names this driver writes into the feature name table. */
static const Qcow2FeatureNameEntry qcow2_feature_names[] = {
    { 0, 0, "dirty bit" },
    { 0, 1, "corrupt bit" },
    { 0, 2, "external data file" },
    { 0, 3, "compression type" },
    { 0, 4, "extended L2 entries" },
    { 1, 0, "lazy refcounts" },
    { 2, 0, "bitmaps" },
    { 2, 1, "raw external data" },
};

void qcow2_header_exts_clear(Qcow2HeaderExts *exts)
{
    g_free(exts->backing_format);
    g_free(exts->data_file);
    g_free(exts->feature_table);
    g_list_free_full(exts->unknown, g_free);
    memset(exts, 0, sizeof(*exts));
}

/* ---------------------------------------------------------------------- */
/* Probing and the header */

int qcow2_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    uint32_t magic, version;

    if (buf_size < 8) {
        return 0;
    }
    memcpy(&magic, buf, 4);
    memcpy(&version, buf + 4, 4);
    /*
     * Versions past 3 are claimed, so that open refuses them by name
     * ("Unsupported qcow2 version 4") instead of their being opened as raw
     * images, whose first sector a write could then destroy, as QEMU does
     * too.  Version 1 is the older qcow format, the qcow driver's
     * (qcow1.c); version 0 is no format (QEMU probes it as raw).
     */
    if (GUINT32_FROM_BE(magic) == QCOW_MAGIC &&
        GUINT32_FROM_BE(version) >= 2) {
        return 100;
    }
    return 0;
}

static void qcow2_header_to_cpu(QCowHeader *h)
{
    h->magic = GUINT32_FROM_BE(h->magic);
    h->version = GUINT32_FROM_BE(h->version);
    h->backing_file_offset = GUINT64_FROM_BE(h->backing_file_offset);
    h->backing_file_size = GUINT32_FROM_BE(h->backing_file_size);
    h->cluster_bits = GUINT32_FROM_BE(h->cluster_bits);
    h->size = GUINT64_FROM_BE(h->size);
    h->crypt_method = GUINT32_FROM_BE(h->crypt_method);
    h->l1_size = GUINT32_FROM_BE(h->l1_size);
    h->l1_table_offset = GUINT64_FROM_BE(h->l1_table_offset);
    h->refcount_table_offset = GUINT64_FROM_BE(h->refcount_table_offset);
    h->refcount_table_clusters = GUINT32_FROM_BE(h->refcount_table_clusters);
    h->nb_snapshots = GUINT32_FROM_BE(h->nb_snapshots);
    h->snapshots_offset = GUINT64_FROM_BE(h->snapshots_offset);
    h->incompatible_features = GUINT64_FROM_BE(h->incompatible_features);
    h->compatible_features = GUINT64_FROM_BE(h->compatible_features);
    h->autoclear_features = GUINT64_FROM_BE(h->autoclear_features);
    h->refcount_order = GUINT32_FROM_BE(h->refcount_order);
    h->header_length = GUINT32_FROM_BE(h->header_length);
}

/*
 * Checks that a table of @entries entries of @entry_len bytes at @offset
 * fits the limits: at most @max_bytes, cluster-aligned, and not past the
 * largest offset a file can have.
 */
static int qcow2_validate_table(BDRVQcow2State *s, uint64_t offset,
                                uint64_t entries, size_t entry_len,
                                int64_t max_bytes, const char *name,
                                Error **errp)
{
    if (entries > max_bytes / entry_len) {
        error_setg(errp, "%s too large", name);
        return -EFBIG;
    }
    if (offset_into_cluster(s, offset) ||
        offset > INT64_MAX - entries * entry_len) {
        error_setg(errp, "%s offset invalid", name);
        return -EINVAL;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Header extensions */

/*
 * Walks the extensions between the header and @end (the backing file name
 * or the end of the cluster) and collects them into @exts.  Malformed
 * extensions make the image unusable: their length is not trustworthy.
 */
static int qcow2_read_extensions(BlockDriverState *bs, uint64_t start,
                                 uint64_t end, Qcow2HeaderExts *exts,
                                 Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t offset = start;

    while (offset < end) {
        struct {
            uint32_t magic;
            uint32_t len;
        } ext;
        g_autofree uint8_t *data = NULL;
        int ret;

        if (end - offset < sizeof(ext)) {
            error_setg(errp, "Header extension too large");
            return -EINVAL;
        }
        ret = bdrv_pread(bs->file, offset, sizeof(ext), &ext, 0);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "qcow2_read_extension: ERROR: "
                             "pread fail from offset %" PRIu64, offset);
            return ret;
        }
        ext.magic = GUINT32_FROM_BE(ext.magic);
        ext.len = GUINT32_FROM_BE(ext.len);
        offset += sizeof(ext);
        if (ext.magic == QCOW2_EXT_MAGIC_END) {
            return 0;
        }
        if (ext.len > end - offset) {
            error_setg(errp, "Header extension too large");
            return -EINVAL;
        }
        data = g_malloc0(ext.len + 1);
        ret = bdrv_pread(bs->file, offset, ext.len, data, 0);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "ERROR: ext 0x%x: Could not read "
                             "extension data", ext.magic);
            return ret;
        }

        switch (ext.magic) {
        case QCOW2_EXT_MAGIC_BACKING_FORMAT:
            if (ext.len >= sizeof(bs->backing_format)) {
                error_setg(errp, "ERROR: ext_backing_format: len=%" PRIu32
                           " too large (>=%zu)", ext.len,
                           sizeof(bs->backing_format));
                return -EINVAL;
            }
            g_free(exts->backing_format);
            exts->backing_format = g_strndup((char *)data, ext.len);
            break;
        case QCOW2_EXT_MAGIC_FEATURE_TABLE:
            g_free(exts->feature_table);
            /*
             * A short last entry still names its bit (QEMU reads it so):
             * the name is padded with NULs up to the entry's 46 bytes.
             */
            exts->feature_table_len = DIV_ROUND_UP(
                ext.len, sizeof(Qcow2FeatureNameEntry));
            exts->feature_table = g_new0(Qcow2FeatureNameEntry,
                                         exts->feature_table_len);
            memcpy(exts->feature_table, data, ext.len);
            break;
        case QCOW2_EXT_MAGIC_DATA_FILE:
            g_free(exts->data_file);
            exts->data_file = g_strndup((char *)data, ext.len);
            break;
        case QCOW2_EXT_MAGIC_CRYPTO_HEADER: {
            uint64_t fields[2];

            /* offset and length (qcow2-crypt.c checks them) */
            if (ext.len != sizeof(fields)) {
                error_setg(errp, "Invalid encryption header extension "
                           "length %" PRIu32, ext.len);
                return -EINVAL;
            }
            memcpy(fields, data, sizeof(fields));
            exts->has_crypto_header = true;
            exts->crypto_header_offset = GUINT64_FROM_BE(fields[0]);
            exts->crypto_header_length = GUINT64_FROM_BE(fields[1]);
            break;
        }
        case QCOW2_EXT_MAGIC_BITMAPS: {
            Qcow2BitmapHeaderExt b;

            if (ext.len != sizeof(b)) {
                error_setg(errp, "bitmaps_ext: Invalid extension length");
                return -EINVAL;
            }
            memcpy(&b, data, sizeof(b));
            exts->has_bitmaps = true;
            if (!(s->autoclear_features & QCOW2_AUTOCLEAR_BITMAPS)) {
                /* stale: a program without bitmaps changed the image */
                break;
            }
            exts->nb_bitmaps = GUINT32_FROM_BE(b.nb_bitmaps);
            exts->bitmap_directory_offset =
                GUINT64_FROM_BE(b.bitmap_directory_offset);
            exts->bitmap_directory_size =
                GUINT64_FROM_BE(b.bitmap_directory_size);
            if (b.reserved32) {
                error_setg(errp, "bitmaps_ext: reserved_zero must be zero");
                return -EINVAL;
            }
            if (exts->nb_bitmaps > QCOW2_MAX_BITMAPS) {
                error_setg(errp, "bitmaps_ext: Image has %" PRIu32
                           " bitmaps, exceeding the QEMU supported maximum "
                           "of %d", exts->nb_bitmaps, QCOW2_MAX_BITMAPS);
                return -EINVAL;
            }
            if (exts->nb_bitmaps == 0) {
                error_setg(errp, "found bitmaps extension with zero bitmaps");
                return -EINVAL;
            }
            if (exts->bitmap_directory_offset & (s->cluster_size - 1)) {
                error_setg(errp, "bitmaps_ext: invalid bitmap directory "
                           "offset");
                return -EINVAL;
            }
            if (exts->bitmap_directory_size >
                QCOW2_MAX_BITMAP_DIRECTORY_SIZE) {
                error_setg(errp, "bitmaps_ext: bitmap directory size "
                           "(%" PRIu64 ") exceeds the maximum "
                           "supported size (%d)",
                           exts->bitmap_directory_size,
                           QCOW2_MAX_BITMAP_DIRECTORY_SIZE);
                return -EINVAL;
            }
            break;
        }
        default: {
            Qcow2UnknownHeaderExtension *u =
                g_malloc0(sizeof(*u) + ext.len);

            u->magic = ext.magic;
            u->len = ext.len;
            memcpy(u->data, data, ext.len);
            exts->unknown = g_list_append(exts->unknown, u);
            break;
        }
        }
        offset += ROUND_UP(ext.len, 8);
    }
    return 0;
}

/*
 * "Unsupported qcow2 feature(s): dirty bit, Unknown incompatible feature:
 * 200": the names the image's own feature table gives the bits, then the
 * bits it does not name, in hex.
 */
static void qcow2_report_unsupported(Qcow2HeaderExts *exts, uint64_t mask,
                                     Error **errp)
{
    g_autoptr(GString) names = g_string_new(NULL);

    for (size_t i = 0; i < exts->feature_table_len; i++) {
        Qcow2FeatureNameEntry *e = &exts->feature_table[i];

        if (e->type == 0 && e->bit < 64 && (mask & (1ULL << e->bit))) {
            g_string_append_printf(names, "%s%.46s", names->len ? ", " : "",
                                   e->name);
            mask &= ~(1ULL << e->bit);
        }
    }
    if (mask) {
        g_string_append_printf(names, "%sUnknown incompatible feature: %"
                               PRIx64, names->len ? ", " : "", mask);
    }
    error_setg(errp, "Unsupported qcow2 feature(s): %s", names->str);
}

/* ---------------------------------------------------------------------- */
/* Writing the header */

/*
 * qcow2-header.c inv. 1: the one place where the header cluster is
 * written.  Only the corrupt bit's own write (@marking_corrupt) goes out
 * while the node refuses writes; it is overlap-checked all the same.
 */
static int qcow2_header_pwrite(BlockDriverState *bs, uint64_t offset,
                               const void *buf, size_t len,
                               bool marking_corrupt)
{
    int ign = QCOW2_OL_MAIN_HEADER | qcow2_overlap_in_header(bs->opaque);
    int ret;

    if (marking_corrupt) {
        ret = qcow2_overlap_check_write(bs, ign, offset, len);
    } else {
        ret = qcow2_pre_write_overlap_check(bs, ign, offset, len);
    }
    if (ret < 0) {
        return ret;
    }
    return bdrv_pwrite_sync(bs->file, offset, len, buf, 0);
}

int qcow2_header_write(BlockDriverState *bs, uint64_t offset,
                       const void *buf, size_t len)
{
    return qcow2_header_pwrite(bs, offset, buf, len, false);
}

/* Appends one extension, padded to 8 bytes; false if it does not fit. */
static bool qcow2_put_extension(uint8_t *buf, size_t buflen, size_t *pos,
                                uint32_t magic, const void *data,
                                uint32_t len)
{
    size_t padded = ROUND_UP(len, 8);
    uint32_t be;

    if (*pos + 8 + padded > buflen) {
        return false;
    }
    be = GUINT32_TO_BE(magic);
    memcpy(buf + *pos, &be, 4);
    be = GUINT32_TO_BE(len);
    memcpy(buf + *pos + 4, &be, 4);
    memcpy(buf + *pos + 8, data, len);
    memset(buf + *pos + 8 + len, 0, padded - len);
    *pos += 8 + padded;
    return true;
}

/*
 * Lays out the header cluster as QEMU does: the header (with the fields
 * this driver does not know, kept from the image), the extensions in
 * QEMU's order (backing format, external data file, encryption header,
 * feature names, bitmaps, unknown ones) and the backing file name after
 * the end marker.  Returns the bytes used or -ENOSPC if it does not fit in
 * a cluster.
 */
int qcow2_header_serialise(BDRVQcow2State *s, uint64_t size,
                           uint8_t *buf, size_t buflen)
{
    QCowHeader h = { 0 };
    size_t header_len = s->qcow_version >= 3 ?
                        sizeof(h) + s->unknown_header_fields_size :
                        QCOW2_V2_HEADER_SIZE;
    size_t pos = header_len;
    size_t backing_len = s->image_backing_file ?
                         strlen(s->image_backing_file) : 0;
    uint64_t end = 0;

    memset(buf, 0, buflen);
    h.magic = GUINT32_TO_BE(QCOW_MAGIC);
    h.version = GUINT32_TO_BE(s->qcow_version);
    h.cluster_bits = GUINT32_TO_BE(s->cluster_bits);
    h.size = GUINT64_TO_BE(size);
    h.l1_size = GUINT32_TO_BE(s->l1_size);
    h.l1_table_offset = GUINT64_TO_BE(s->l1_table_offset);
    h.refcount_table_offset = GUINT64_TO_BE(s->refcount_table_offset);
    h.refcount_table_clusters = GUINT32_TO_BE(
        ((uint64_t)s->refcount_table_size * sizeof(uint64_t)) >>
        s->cluster_bits);
    h.nb_snapshots = GUINT32_TO_BE(s->nb_snapshots);
    h.snapshots_offset = GUINT64_TO_BE(s->snapshots_offset);
    h.crypt_method = GUINT32_TO_BE(s->crypt_method);
    if (s->qcow_version >= 3) {
        h.incompatible_features = GUINT64_TO_BE(s->incompatible_features);
        h.compatible_features = GUINT64_TO_BE(s->compatible_features);
        h.autoclear_features = GUINT64_TO_BE(s->autoclear_features);
        h.refcount_order = GUINT32_TO_BE(s->refcount_order);
        h.header_length = GUINT32_TO_BE(header_len);
        h.compression_type = s->compression_type;
    }
    if (header_len > buflen) {
        return -ENOSPC;
    }
    memcpy(buf, &h, MIN(sizeof(h), header_len));
    if (s->qcow_version >= 3 && s->unknown_header_fields_size) {
        memcpy(buf + sizeof(h), s->unknown_header_fields,
               s->unknown_header_fields_size);
    }

    if (s->image_backing_format &&
        !qcow2_put_extension(buf, buflen, &pos,
                             QCOW2_EXT_MAGIC_BACKING_FORMAT,
                             s->image_backing_format,
                             strlen(s->image_backing_format))) {
        return -ENOSPC;
    }
    if (s->image_data_file &&
        !qcow2_put_extension(buf, buflen, &pos, QCOW2_EXT_MAGIC_DATA_FILE,
                             s->image_data_file,
                             strlen(s->image_data_file))) {
        return -ENOSPC;
    }
    if (s->crypt_method == QCOW2_CRYPT_LUKS) {
        uint64_t fields[2] = {
            GUINT64_TO_BE(s->crypto_header_offset),
            GUINT64_TO_BE(s->crypto_header_length),
        };

        if (!qcow2_put_extension(buf, buflen, &pos,
                                 QCOW2_EXT_MAGIC_CRYPTO_HEADER, fields,
                                 sizeof(fields))) {
            return -ENOSPC;
        }
    }
    if (s->qcow_version >= 3 &&
        s->cluster_size >= QCOW2_FEATURE_TABLE_MIN_CLUSTER &&
        !qcow2_put_extension(buf, buflen, &pos,
                             QCOW2_EXT_MAGIC_FEATURE_TABLE,
                             qcow2_feature_names,
                             sizeof(qcow2_feature_names))) {
        return -ENOSPC;
    }
    if (s->nb_bitmaps) {
        Qcow2BitmapHeaderExt b = {
            .nb_bitmaps = GUINT32_TO_BE(s->nb_bitmaps),
            .bitmap_directory_size = GUINT64_TO_BE(s->bitmap_directory_size),
            .bitmap_directory_offset =
                GUINT64_TO_BE(s->bitmap_directory_offset),
        };

        if (!qcow2_put_extension(buf, buflen, &pos, QCOW2_EXT_MAGIC_BITMAPS,
                                 &b, sizeof(b))) {
            return -ENOSPC;
        }
    }
    for (GList *l = s->unknown_header_ext; l; l = l->next) {
        Qcow2UnknownHeaderExtension *u = l->data;

        if (!qcow2_put_extension(buf, buflen, &pos, u->magic, u->data,
                                 u->len)) {
            return -ENOSPC;
        }
    }
    if (!qcow2_put_extension(buf, buflen, &pos, QCOW2_EXT_MAGIC_END, &end,
                             0)) {
        return -ENOSPC;
    }

    if (backing_len) {
        uint64_t off = GUINT64_TO_BE(pos);
        uint32_t len = GUINT32_TO_BE(backing_len);

        if (pos + backing_len > buflen) {
            return -ENOSPC;
        }
        memcpy(buf + pos, s->image_backing_file, backing_len);
        memcpy(buf + offsetof(QCowHeader, backing_file_offset), &off, 8);
        memcpy(buf + offsetof(QCowHeader, backing_file_size), &len, 4);
        pos += backing_len;
    }
    return pos;
}

int qcow2_update_header(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree uint8_t *buf = g_malloc(s->cluster_size);
    int ret;

    ret = qcow2_header_serialise(s, s->virtual_size, buf, s->cluster_size);
    if (ret < 0) {
        return ret;
    }
    return qcow2_header_write(bs, 0, buf, s->cluster_size);
}

static int qcow2_write_incompat(BlockDriverState *bs, uint64_t features,
                                bool marking_corrupt)
{
    uint64_t be = GUINT64_TO_BE(features);

    return qcow2_header_pwrite(bs, offsetof(QCowHeader, incompatible_features),
                               &be, sizeof(be), marking_corrupt);
}

int qcow2_mark_dirty(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    assert(s->qcow_version >= 3);
    if (s->incompatible_features & QCOW2_INCOMPAT_DIRTY) {
        return 0;
    }
    /* qcow2.h inv. 5: the bit is on disk before any deferred
     * refcount update can be */
    ret = qcow2_write_incompat(bs, s->incompatible_features |
                                   QCOW2_INCOMPAT_DIRTY, false);
    if (ret < 0) {
        return ret;
    }
    s->incompatible_features |= QCOW2_INCOMPAT_DIRTY;
    return 0;
}

int qcow2_mark_clean(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int ret;

    if (!(s->incompatible_features & QCOW2_INCOMPAT_DIRTY)) {
        return 0;
    }
    /* the refcounts must be on disk before the bit saying so */
    ret = qcow2_flush_caches(bs);
    if (ret < 0) {
        return ret;
    }
    s->incompatible_features &= ~QCOW2_INCOMPAT_DIRTY;
    return qcow2_update_header(bs);
}

/* Clears the corrupt bit after a successful repair. */
int qcow2_mark_consistent(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    if (!(s->incompatible_features & QCOW2_INCOMPAT_CORRUPT)) {
        return 0;
    }
    s->incompatible_features &= ~QCOW2_INCOMPAT_CORRUPT;
    bs->corrupt = false;
    return qcow2_update_header(bs);
}

/* BLOCK_IMAGE_CORRUPTED, for the monitor (qapi/block-core.json). */
static void qcow2_send_corrupted_event(BlockDriverState *bs,
                                       const char *message, int64_t offset,
                                       int64_t size, bool fatal)
{
    QDict *data = qdict_new();
    const char *node_name = bdrv_get_node_name(bs);

    qdict_put_str(data, "device", bdrv_get_device_or_node_name(bs));
    if (node_name && *node_name) {
        qdict_put_str(data, "node-name", node_name);
    }
    qdict_put_str(data, "msg", message);
    if (offset >= 0) {
        qdict_put_int(data, "offset", offset);
    }
    if (size >= 0) {
        qdict_put_int(data, "size", size);
    }
    qdict_put_bool(data, "fatal", fatal);
    qapi_event_emit("BLOCK_IMAGE_CORRUPTED", data);
}

void qcow2_signal_corruption(BlockDriverState *bs, bool fatal, int64_t offset,
                             int64_t size, const char *fmt, ...)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree char *message = NULL;
    va_list ap;

    va_start(ap, fmt);
    message = g_strdup_vprintf(fmt, ap);
    va_end(ap);

    /*
     * The report goes to stderr without the program name, as QEMU prints
     * it: scripts match this line.  A read-only image cannot be marked,
     * nor written to anyway (QEMU).
     */
    fatal = fatal && bdrv_is_writable(bs);
    if (fatal) {
        if (bs->corrupt) {
            /* reported already: the node refuses writes since */
            return;
        }
        fprintf(stderr, "qcow2: Marking image as corrupt: %s; further "
                "corruption events will be suppressed\n", message);
        s->incompatible_features |= QCOW2_INCOMPAT_CORRUPT;
        /* qcow2.h inv. 6: set first, so that marking cannot recurse */
        bs->corrupt = true;
        /*
         * Best effort: the image is unusable for writing either way, and
         * the header write is overlap-checked itself (if the header is
         * what overlaps, it is left alone).
         */
        if (s->qcow_version >= 3) {
            qcow2_write_incompat(bs, s->incompatible_features, true);
        }
    } else if (!s->signaled_corruption) {
        fprintf(stderr, "qcow2: Image is corrupt: %s; further non-fatal "
                "corruption events will be suppressed\n", message);
        s->signaled_corruption = true;
    } else {
        return;
    }
    qcow2_send_corrupted_event(bs, message, offset, size, fatal);
}

/* Checks the compression type field against its feature bit. */
static int qcow2_check_compression_type(BDRVQcow2State *s, Error **errp)
{
    if (s->compression_type != QCOW2_COMPRESSION_TYPE_ZLIB &&
        s->compression_type != QCOW2_COMPRESSION_TYPE_ZSTD) {
        error_setg(errp, "qcow2: unknown compression type: %u",
                   s->compression_type);
        return -ENOTSUP;
    }
    if (s->compression_type == QCOW2_COMPRESSION_TYPE_ZLIB &&
        (s->incompatible_features & QCOW2_INCOMPAT_COMPRESSION)) {
        error_setg(errp, "qcow2: Compression type incompatible feature bit "
                   "must not be set");
        return -EINVAL;
    }
    if (s->compression_type != QCOW2_COMPRESSION_TYPE_ZLIB &&
        !(s->incompatible_features & QCOW2_INCOMPAT_COMPRESSION)) {
        error_setg(errp, "qcow2: Compression type incompatible feature bit "
                   "must be set");
        return -EINVAL;
    }
    return 0;
}

/*
 * Reads and validates the header and its extensions into @s; every field
 * that sizes an allocation or a table is checked against QEMU's limits
 * with QEMU's message.
 */
int qcow2_read_header(BlockDriverState *bs, int flags,
                      Qcow2HeaderExts *exts, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    QCowHeader h = { 0 };
    int64_t file_len = bdrv_getlength(bs->file->bs);
    uint64_t ext_end, l1_needed;
    int ret;

    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not read qcow2 header");
        return file_len;
    }
    ret = bdrv_pread(bs->file, 0, MIN(file_len, (int64_t)sizeof(h)), &h, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read qcow2 header");
        return ret;
    }
    qcow2_header_to_cpu(&h);

    if (h.magic != QCOW_MAGIC) {
        error_setg(errp, "Image is not in qcow2 format");
        return -EINVAL;
    }
    if (h.version < 2 || h.version > 3) {
        error_setg(errp, "Unsupported qcow2 version %" PRIu32, h.version);
        return -ENOTSUP;
    }
    s->qcow_version = h.version;
    if (h.cluster_bits < QCOW2_MIN_CLUSTER_BITS ||
        h.cluster_bits > QCOW2_MAX_CLUSTER_BITS) {
        error_setg(errp, "Unsupported cluster size: 2^%" PRIu32,
                   h.cluster_bits);
        return -EINVAL;
    }
    s->cluster_bits = h.cluster_bits;
    s->cluster_size = 1 << s->cluster_bits;

    if (h.version == 2) {
        h.incompatible_features = 0;
        h.compatible_features = 0;
        h.autoclear_features = 0;
        h.refcount_order = QCOW2_DEFAULT_REFCOUNT_ORDER;
        h.header_length = QCOW2_V2_HEADER_SIZE;
        h.compression_type = QCOW2_COMPRESSION_TYPE_ZLIB;
    } else {
        if (h.header_length < QCOW2_V3_MIN_HEADER_LEN) {
            error_setg(errp, "qcow2 header too short");
            return -EINVAL;
        }
        if (h.header_length > s->cluster_size) {
            error_setg(errp, "qcow2 header exceeds cluster size");
            return -EINVAL;
        }
        if (h.header_length <= offsetof(QCowHeader, compression_type)) {
            h.compression_type = QCOW2_COMPRESSION_TYPE_ZLIB;
        }
    }
    if (h.header_length > sizeof(h)) {
        s->unknown_header_fields_size = h.header_length - sizeof(h);
        s->unknown_header_fields = g_malloc(s->unknown_header_fields_size);
        ret = bdrv_pread(bs->file, sizeof(h), s->unknown_header_fields_size,
                         s->unknown_header_fields, 0);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not read unknown qcow2 "
                             "header fields");
            return ret;
        }
    }
    s->incompatible_features = h.incompatible_features;
    s->compatible_features = h.compatible_features;
    s->autoclear_features = h.autoclear_features;
    s->compression_type = h.compression_type;
    ret = qcow2_check_compression_type(s, errp);
    if (ret < 0) {
        return ret;
    }

    if (h.backing_file_offset > s->cluster_size) {
        error_setg(errp, "Invalid backing file offset");
        return -EINVAL;
    }
    ext_end = h.backing_file_offset ? h.backing_file_offset
                                    : (uint64_t)s->cluster_size;
    ret = qcow2_read_extensions(bs, h.header_length, ext_end, exts, errp);
    if (ret < 0) {
        return ret;
    }

    if (s->incompatible_features & ~(uint64_t)QCOW2_INCOMPAT_MASK) {
        qcow2_report_unsupported(exts, s->incompatible_features &
                                 ~(uint64_t)QCOW2_INCOMPAT_MASK, errp);
        return -ENOTSUP;
    }
    s->extended_l2 = s->incompatible_features & QCOW2_INCOMPAT_EXTL2;
    if (s->extended_l2 && s->cluster_bits < QCOW2_MIN_EXTL2_CLUSTER_BITS) {
        error_setg(errp, "Extended L2 entries are only supported with "
                   "cluster sizes of at least %d bytes",
                   1 << QCOW2_MIN_EXTL2_CLUSTER_BITS);
        return -EINVAL;
    }
    if ((s->incompatible_features & QCOW2_INCOMPAT_CORRUPT) &&
        (flags & BDRV_O_RDWR) && !(flags & BDRV_O_CHECK)) {
        /* qcow2.h inv. 6; check -r repairs such images */
        error_setg(errp, "qcow2: Image is corrupt; cannot be opened "
                   "read/write");
        return -EACCES;
    }
    if (h.refcount_order > QCOW2_MAX_REFCOUNT_ORDER) {
        error_setg(errp, "Reference count entry width too large; may not "
                   "exceed 64 bits");
        return -EINVAL;
    }
    s->refcount_order = h.refcount_order;
    s->refcount_bits = 1 << s->refcount_order;
    s->refcount_max = s->refcount_bits == 64 ? UINT64_MAX
                      : (1ULL << s->refcount_bits) - 1;
    s->refcount_block_bits = s->cluster_bits - (s->refcount_order - 3);
    s->refcount_block_size = 1 << s->refcount_block_bits;

    if (h.crypt_method > 2) {
        error_setg(errp, "Unsupported encryption method %" PRIu32,
                   h.crypt_method);
        return -EINVAL;
    }
    s->crypt_method = h.crypt_method;

    /* an L2 table is one cluster of 8-byte (16 with the bitmap) entries */
    s->l2_bits = s->cluster_bits - (s->extended_l2 ? 4 : 3);
    s->l2_size = 1 << s->l2_bits;
    s->subcluster_bits = s->cluster_bits -
                         (s->extended_l2 ? ctz64(QCOW2_SUBCLUSTERS) : 0);
    s->subcluster_size = 1 << s->subcluster_bits;
    s->csize_shift = 62 - (s->cluster_bits - 8);
    s->csize_mask = (1 << (s->cluster_bits - 8)) - 1;
    s->cluster_offset_mask = (1ULL << s->csize_shift) - 1;
    s->virtual_size = h.size;

    /* check opens it to build one (qemu-img check -r all, as QEMU's) */
    if (!h.refcount_table_clusters && !(flags & BDRV_O_CHECK)) {
        error_setg(errp, "Image does not contain a reference count table");
        return -EINVAL;
    }
    ret = qcow2_validate_table(s, h.refcount_table_offset,
                               h.refcount_table_clusters, s->cluster_size,
                               QCOW_MAX_REFTABLE_SIZE,
                               "Reference count table", errp);
    if (ret < 0) {
        return ret;
    }
    s->refcount_table_offset = h.refcount_table_offset;
    s->refcount_table_size = ((uint64_t)h.refcount_table_clusters <<
                              s->cluster_bits) / sizeof(uint64_t);

    /* check opens it to discard the snapshots past the limit (they are
     * never read: qcow2_read_snapshots() stops at the limit) */
    if (h.nb_snapshots > QCOW_MAX_SNAPSHOTS && !(flags & BDRV_O_CHECK)) {
        error_setg(errp, "Snapshot table too large");
        return -EFBIG;
    }
    /*
     * Each entry is at least its 40-byte fixed part: a table that could
     * not end below the largest file offset is refused here, as QEMU
     * does, rather than met as an I/O error when it is read.
     */
    ret = qcow2_validate_table(s, h.snapshots_offset,
                               MIN(h.nb_snapshots, QCOW_MAX_SNAPSHOTS),
                               QCOW2_SNAPSHOT_MIN_ENTRY,
                               (int64_t)QCOW_MAX_SNAPSHOTS *
                               QCOW2_SNAPSHOT_MIN_ENTRY,
                               "Snapshot table", errp);
    if (ret < 0) {
        return ret;
    }
    s->nb_snapshots = h.nb_snapshots;
    s->snapshots_offset = h.snapshots_offset;

    if (h.l1_size > QCOW_MAX_L1_SIZE / sizeof(uint64_t)) {
        error_setg(errp, "Active L1 table too large");
        return -EFBIG;
    }
    l1_needed = qcow2_size_to_l1(s, h.size);
    if (l1_needed > INT_MAX / sizeof(uint64_t)) {
        error_setg(errp, "Image is too big");
        return -EFBIG;
    }
    if (h.l1_size < l1_needed) {
        error_setg(errp, "L1 table is too small");
        return -EINVAL;
    }
    ret = qcow2_validate_table(s, h.l1_table_offset, h.l1_size,
                               sizeof(uint64_t), QCOW_MAX_L1_SIZE,
                               "Active L1 table", errp);
    if (ret < 0) {
        return ret;
    }
    s->l1_size = h.l1_size;
    s->l1_table_offset = h.l1_table_offset;

    if (h.backing_file_offset) {
        /* the name lies in the header cluster, as the extensions do */
        if (h.backing_file_size > QCOW2_MAX_BACKING_FILE_NAME ||
            h.backing_file_size >= sizeof(bs->backing_file) ||
            h.backing_file_offset + h.backing_file_size >
            (uint64_t)s->cluster_size) {
            error_setg(errp, "Backing file name too long");
            return -EINVAL;
        }
        s->image_backing_file = g_malloc0(h.backing_file_size + 1);
        ret = bdrv_pread(bs->file, h.backing_file_offset,
                         h.backing_file_size, s->image_backing_file, 0);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Could not read backing file name");
            return ret;
        }
    }
    return 0;
}
