/*
 * qed: the format driver for QEMU Enhanced Disk images, read-write, as
 * QEMU 7.2's.  Opening (with the check and repair of an image left with
 * the need-check flag), reading, block status, info and backing file
 * changes live here; the table lookup in block/qed-table.c, writing in
 * block/qed-write.c, check in block/qed-check.c, creation in
 * block/qed-create.c.  The layout and the invariants are block/qed.h's.
 */
#include "block/qed.h"
#include "qapi/qapi-opts.h"
#include "util/cutils.h"

static int qed_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    const QedHeader *h = (const QedHeader *)buf;

    if (buf_size < (int)sizeof(*h)) {
        return 0;
    }
    return GUINT32_FROM_LE(h->magic) == QED_MAGIC ? 100 : 0;
}

bool qed_is_cluster_size_valid(uint32_t cluster_size)
{
    return cluster_size >= QED_MIN_CLUSTER_SIZE &&
           cluster_size <= QED_MAX_CLUSTER_SIZE && is_power_of_2(cluster_size);
}

bool qed_is_table_size_valid(uint32_t table_size)
{
    return table_size >= QED_MIN_TABLE_SIZE &&
           table_size <= QED_MAX_TABLE_SIZE && is_power_of_2(table_size);
}

/*
 * As QEMU computes it, in 64 bits that wrap: the product is a power of
 * two, so it is exact or (2^64 and past) 0, which then admits only an
 * empty image.
 */
uint64_t qed_max_image_size(uint32_t cluster_size, uint32_t table_size)
{
    uint64_t entries = (uint64_t)table_size * cluster_size / sizeof(uint64_t);

    return entries * cluster_size * entries;
}

bool qed_is_image_size_valid(uint64_t image_size, uint32_t cluster_size,
                             uint32_t table_size)
{
    return image_size % QED_SECTOR == 0 &&
           image_size <= qed_max_image_size(cluster_size, table_size);
}

void qed_header_to_le(const QedHeader *cpu, QedHeader *le)
{
    le->magic = GUINT32_TO_LE(cpu->magic);
    le->cluster_size = GUINT32_TO_LE(cpu->cluster_size);
    le->table_size = GUINT32_TO_LE(cpu->table_size);
    le->header_size = GUINT32_TO_LE(cpu->header_size);
    le->features = GUINT64_TO_LE(cpu->features);
    le->compat_features = GUINT64_TO_LE(cpu->compat_features);
    le->autoclear_features = GUINT64_TO_LE(cpu->autoclear_features);
    le->l1_table_offset = GUINT64_TO_LE(cpu->l1_table_offset);
    le->image_size = GUINT64_TO_LE(cpu->image_size);
    le->backing_filename_offset = GUINT32_TO_LE(cpu->backing_filename_offset);
    le->backing_filename_size = GUINT32_TO_LE(cpu->backing_filename_size);
}

/* Byte swapping is its own inverse. */
static void qed_header_from_le(const QedHeader *le, QedHeader *cpu)
{
    qed_header_to_le(le, cpu);
}

/* The 64 bytes of s->header (what follows them is left as it is). */
int qed_write_header(BlockDriverState *bs)
{
    BDRVQedState *s = bs->opaque;
    QedHeader le;

    qed_header_to_le(&s->header, &le);
    return bdrv_pwrite(bs->file, 0, sizeof(le), &le, 0);
}

/* QEMU's checks of the header, in QEMU's order and words (inv. 1). */
static int qed_check_header(BlockDriverState *bs, Error **errp)
{
    BDRVQedState *s = bs->opaque;
    const QedHeader *h = &s->header;
    int64_t file_len;

    if (h->magic != QED_MAGIC) {
        error_setg(errp, "Image not in QED format");
        return -EINVAL;
    }
    if (h->features & ~(uint64_t)QED_FEATURE_MASK) {
        error_setg(errp, "Unsupported QED features: %" PRIx64,
                   h->features & ~(uint64_t)QED_FEATURE_MASK);
        return -ENOTSUP;
    }
    if (!qed_is_cluster_size_valid(h->cluster_size)) {
        error_setg(errp, "QED cluster size is invalid");
        return -EINVAL;
    }
    file_len = bdrv_getlength(bs->file->bs);
    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Failed to get file length");
        return file_len;
    }
    /* inv. 2: the clusters the file holds whole */
    s->file_size = qed_start_of_cluster(s, file_len);
    if (!qed_is_table_size_valid(h->table_size)) {
        error_setg(errp, "QED table size is invalid");
        return -EINVAL;
    }
    if (!qed_is_image_size_valid(h->image_size, h->cluster_size,
                                 h->table_size)) {
        error_setg(errp, "QED image size is invalid");
        return -EINVAL;
    }
    if (!qed_check_table_offset(s, h->l1_table_offset)) {
        error_setg(errp, "QED table offset is invalid");
        return -EINVAL;
    }
    s->table_nelems = h->cluster_size * h->table_size / sizeof(uint64_t);
    s->l2_shift = ctz64(h->cluster_size);
    s->l1_shift = s->l2_shift + ctz64(s->table_nelems);
    /* header_size * cluster_size must fit in 32 bits, as in QEMU */
    if (h->header_size > UINT32_MAX / h->cluster_size) {
        error_setg(errp, "QED header size is too large");
        return -EINVAL;
    }
    return 0;
}

/* The backing file's name from the header clusters, as QEMU reads it. */
static int qed_read_backing_name(BlockDriverState *bs, Error **errp)
{
    BDRVQedState *s = bs->opaque;
    const QedHeader *h = &s->header;
    g_autofree char *name = NULL;
    int ret;

    if ((uint64_t)h->backing_filename_offset + h->backing_filename_size >
        (uint64_t)h->cluster_size * h->header_size) {
        error_setg(errp, "QED backing filename offset is invalid");
        return -EINVAL;
    }
    if (h->backing_filename_size >= sizeof(bs->backing_file)) {
        error_setg_errno(errp, EINVAL, "Failed to read backing filename");
        return -EINVAL;
    }
    name = g_malloc0(h->backing_filename_size + 1);
    ret = bdrv_pread(bs->file, h->backing_filename_offset,
                     h->backing_filename_size, name, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to read backing filename");
        return ret;
    }
    pstrcpy(bs->backing_file, sizeof(bs->backing_file), name);
    if (h->features & QED_F_BACKING_FORMAT_NO_PROBE) {
        pstrcpy(bs->backing_format, sizeof(bs->backing_format), "raw");
    }
    return 0;
}

static int qed_read_l1(BlockDriverState *bs, Error **errp)
{
    BDRVQedState *s = bs->opaque;
    int ret;

    /* inv. 2: the whole table lies in the file, which bounds this */
    s->l1 = g_try_new(uint64_t, s->table_nelems);
    if (!s->l1) {
        error_setg(errp, "Could not allocate the QED L1 table of %" PRIu32
                   " entries", s->table_nelems);
        return -ENOMEM;
    }
    ret = qed_read_table(bs, s->header.l1_table_offset, 0, s->table_nelems,
                         s->l1);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to read L1 table");
        return ret;
    }
    return 0;
}

static int qed_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVQedState *s = bs->opaque;
    bool writable = flags & BDRV_O_RDWR;
    QedHeader le;
    int ret;

    qemu_co_mutex_init(&s->lock);
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    ret = bdrv_pread(bs->file, 0, sizeof(le), &le, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to read QED header");
        return ret;
    }
    qed_header_from_le(&le, &s->header);
    ret = qed_check_header(bs, errp);
    if (ret < 0) {
        return ret;
    }
    if (s->header.features & QED_F_BACKING_FILE) {
        ret = qed_read_backing_name(bs, errp);
        if (ret < 0) {
            return ret;
        }
    }
    /* unknown auto-clear features are dropped by whoever writes, as QEMU */
    if ((s->header.autoclear_features & ~(uint64_t)QED_AUTOCLEAR_FEATURE_MASK)
        && writable) {
        s->header.autoclear_features &= QED_AUTOCLEAR_FEATURE_MASK;
        ret = qed_write_header(bs);
        if (ret < 0) {
            error_setg_errno(errp, -ret, "Failed to update header");
            return ret;
        }
        bdrv_flush(bs->file->bs);
    }
    ret = qed_read_l1(bs, errp);
    if (ret < 0) {
        goto fail;
    }
    /*
     * Not closed cleanly: a writable open repairs first (qemu-img check
     * does its own); a read-only one reads as it is, which may help
     * recover data, as in QEMU.
     */
    if (!(flags & BDRV_O_CHECK) && writable &&
        (s->header.features & QED_F_NEED_CHECK)) {
        BdrvCheckResult result = { 0 };

        ret = qed_check(bs, &result, true);
        if (ret < 0) {
            error_setg(errp, "Image corrupted");
            goto fail;
        }
    }
    return 0;
fail:
    g_clear_pointer(&s->l1, g_free);
    return ret;
}

static void qed_close(BlockDriverState *bs)
{
    BDRVQedState *s = bs->opaque;

    qed_mark_clean(bs);
    g_clear_pointer(&s->l1, g_free);
}

/* A node going read-only stops cleanly first, as QEMU's drain does. */
static int qed_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    if (!(state->flags & BDRV_O_RDWR)) {
        qed_mark_clean(state->bs);
    }
    return 0;
}

/* The map bdrv_co_preadv_mapped() reads by: a cluster at a time. */
static int64_t coroutine_fn qed_piece(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, int64_t *host)
{
    BDRVQedState *s = bs->opaque;
    uint64_t len = bytes;
    uint64_t cluster;
    int ret = qed_co_find_cluster(bs, offset, &len, &cluster);

    switch (ret) {
    case QED_FOUND:
        *host = cluster + qed_offset_into_cluster(s, offset);
        break;
    case QED_ZERO:
        *host = BDRV_PIECE_ZERO;
        break;
    case QED_UNALLOC_L1:
    case QED_UNALLOC_L2:
        *host = -1;
        break;
    default:
        assert(ret < 0);
        return ret;
    }
    return len;
}

static int coroutine_fn qed_co_preadv(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags)
{
    return bdrv_co_preadv_mapped(bs, offset, bytes, qiov, qed_piece);
}

static int coroutine_fn qed_co_block_status(BlockDriverState *bs,
                                            bool want_zero, int64_t offset,
                                            int64_t bytes, int64_t *pnum,
                                            int64_t *map,
                                            BlockDriverState **file)
{
    int64_t host;
    int64_t n = qed_piece(bs, offset, bytes, &host);

    if (n < 0) {
        return n;
    }
    *pnum = n;
    if (host >= 0) {
        *map = host;
        *file = bs->file->bs;
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
    }
    return host == BDRV_PIECE_ZERO ? BDRV_BLOCK_ZERO : 0;
}

static int64_t qed_getlength(BlockDriverState *bs)
{
    BDRVQedState *s = bs->opaque;

    return s->header.image_size;
}

static int qed_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    BDRVQedState *s = bs->opaque;

    /* QEMU 7.2's qemu-img info does not report the need-check flag */
    bdi->cluster_size = s->header.cluster_size;
    return 0;
}

static void qed_refresh_limits(BlockDriverState *bs, Error **errp)
{
    BDRVQedState *s = bs->opaque;

    /* QEMU's qed takes requests in sectors */
    bs->bl.request_alignment = QED_SECTOR;
    bs->bl.pwrite_zeroes_alignment = s->header.cluster_size;
    bs->bl.max_pwrite_zeroes = QEMU_ALIGN_DOWN(INT_MAX,
                                               s->header.cluster_size);
}

/*
 * As QEMU: the header is rewritten with the name right after it (the
 * offset moves there), the raw flag set for a raw backing file; -ENOSPC
 * if the header clusters cannot hold the name, -ENOTSUP if a compatible
 * feature unknown to us may own the bytes after the header.
 */
static int qed_change_backing_file(BlockDriverState *bs,
                                   const char *backing_file,
                                   const char *backing_fmt)
{
    BDRVQedState *s = bs->opaque;
    QedHeader h = s->header;
    size_t name_len = backing_file ? strlen(backing_file) : 0;
    g_autofree uint8_t *buf = NULL;
    int ret;

    if (backing_file &&
        (h.compat_features & ~(uint64_t)QED_COMPAT_FEATURE_MASK)) {
        return -ENOTSUP;
    }
    h.features &= ~(uint64_t)(QED_F_BACKING_FILE |
                              QED_F_BACKING_FORMAT_NO_PROBE);
    if (backing_file) {
        h.features |= QED_F_BACKING_FILE;
        if (backing_fmt && !strcmp(backing_fmt, "raw")) {
            h.features |= QED_F_BACKING_FORMAT_NO_PROBE;
        }
    }
    h.backing_filename_offset = sizeof(QedHeader);
    h.backing_filename_size = name_len;
    if (sizeof(QedHeader) + name_len >
        (uint64_t)h.header_size * h.cluster_size) {
        return -ENOSPC;
    }
    buf = g_malloc(sizeof(QedHeader) + name_len);
    qed_header_to_le(&h, (QedHeader *)buf);
    memcpy(buf + sizeof(QedHeader), backing_file ? backing_file : "",
           name_len);
    ret = bdrv_pwrite_sync(bs->file, 0, sizeof(QedHeader) + name_len, buf,
                           0);
    if (ret < 0) {
        return ret;
    }
    s->header = h;
    return 0;
}

static const BlockDriver bdrv_qed = {
    .format_name                    = "qed",
    .instance_size                  = sizeof(BDRVQedState),
    .is_format                      = true,
    .supports_backing               = true,
    .bdrv_probe                     = qed_probe,
    .bdrv_open                      = qed_open,
    .bdrv_close                     = qed_close,
    .bdrv_reopen_prepare            = qed_reopen_prepare,
    .bdrv_change_aio_context        = qed_change_aio_context,
    .bdrv_drained_begin             = qed_drained_begin,
    .bdrv_drained_end               = qed_drained_end,
    .bdrv_co_preadv                 = qed_co_preadv,
    .bdrv_co_pwritev                = qed_co_pwritev,
    .bdrv_co_pwrite_zeroes          = qed_co_pwrite_zeroes,
    .bdrv_co_truncate               = qed_co_truncate,
    .create_opts                    = &qapi_opts_qed_create,
    .bdrv_co_create_opts            = qed_co_create_opts,
    .bdrv_co_create_on_node         = qed_co_create_on_node,
    .bdrv_co_block_status           = qed_co_block_status,
    .bdrv_co_check                  = qed_co_check,
    .bdrv_getlength                 = qed_getlength,
    .bdrv_get_info                  = qed_get_info,
    .bdrv_refresh_limits            = qed_refresh_limits,
    .bdrv_change_backing_file       = qed_change_backing_file,
};

block_init(bdrv_register, bdrv_qed)
