/*
 * parallels: probe, open, read, block status and the driver table.  The
 * layout and the invariants are in parallels.h; writing and check are in
 * parallels-write.c, creation in parallels-create.c.
 */
#include "block/parallels.h"
#include "qapi/qapi-opts.h"

static int parallels_probe(const uint8_t *buf, int buf_size,
                           const char *filename)
{
    const ParallelsHeader *h = (const ParallelsHeader *)buf;

    if (buf_size < (int)sizeof(*h)) {
        return 0;
    }
    if ((!memcmp(h->magic, PARALLELS_MAGIC_OLD, 16) ||
         !memcmp(h->magic, PARALLELS_MAGIC_EXT, 16)) &&
        GUINT32_FROM_LE(h->version) == PARALLELS_VERSION) {
        return 100;
    }
    return 0;
}

/* The header's sizes (inv. 1), with QEMU's messages. */
static int parallels_read_header(BlockDriverState *bs, Error **errp)
{
    BDRVParallelsState *s = bs->opaque;
    ParallelsHeader *h = &s->header;
    uint32_t tracks;
    uint64_t sectors;
    int ret;

    ret = bdrv_pread(bs->file, 0, sizeof(*h), h, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the parallels header");
        return ret;
    }
    if (!parallels_probe((const uint8_t *)h, sizeof(*h), NULL)) {
        error_setg(errp, "Image not in Parallels format");
        return -EINVAL;
    }
    tracks = GUINT32_FROM_LE(h->tracks);
    if (tracks == 0) {
        error_setg(errp, "Invalid image: Zero sectors per track");
        return -EINVAL;
    }
    if (tracks > PARALLELS_MAX_TRACKS) {
        error_setg(errp, "Invalid image: Too big cluster");
        return -EFBIG;
    }
    s->cluster_size = (uint64_t)tracks * PARALLELS_SECTOR;
    if (!memcmp(h->magic, PARALLELS_MAGIC_OLD, 16)) {
        s->off_multiplier = 1;
        sectors = GUINT64_FROM_LE(h->nb_sectors) & UINT32_MAX;
    } else {
        s->off_multiplier = tracks;
        sectors = GUINT64_FROM_LE(h->nb_sectors);
    }
    if (sectors > INT64_MAX / PARALLELS_SECTOR) {
        error_setg_errno(errp, EFBIG, "Could not refresh total sector count");
        return -EFBIG;
    }
    s->disk_size = sectors * PARALLELS_SECTOR;
    s->found_inuse = GUINT32_FROM_LE(h->inuse) == PARALLELS_INUSE_MAGIC;
    s->bat_entries = GUINT32_FROM_LE(h->bat_entries);
    if (s->bat_entries > PARALLELS_MAX_BAT) {
        error_setg(errp, "Catalog too large");
        return -EFBIG;
    }
    s->bat_end = PARALLELS_HEADER_SIZE +
                 (uint64_t)s->bat_entries * sizeof(uint32_t);
    s->data_off = (uint64_t)GUINT32_FROM_LE(h->data_off) * PARALLELS_SECTOR;
    return 0;
}

static int parallels_read_bat(BlockDriverState *bs, Error **errp)
{
    BDRVParallelsState *s = bs->opaque;
    int64_t file_len = bdrv_getlength(bs->file->bs);
    int ret;

    if (file_len < 0) {
        error_setg_errno(errp, -file_len, "Could not get the file's length");
        return file_len;
    }
    /* a short hostile file must not make us allocate its claimed table */
    if (s->bat_end > (uint64_t)file_len) {
        error_setg(errp, "Image file is truncated: its %" PRIu32 "-entry "
                   "allocation table ends past its %" PRId64 " bytes",
                   s->bat_entries, file_len);
        return -EINVAL;
    }
    s->bat = g_try_new(uint32_t, MAX(s->bat_entries, 1));
    if (!s->bat) {
        error_setg(errp, "Could not allocate the table of %" PRIu32
                   " clusters", s->bat_entries);
        return -ENOMEM;
    }
    ret = bdrv_pread(bs->file, PARALLELS_HEADER_SIZE,
                     (int64_t)s->bat_entries * sizeof(uint32_t), s->bat, 0);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Could not read the allocation table");
        return ret;
    }
    return 0;
}

/*
 * Where the next cluster goes (inv. 4): past the table, the header's data
 * offset and every cluster an entry names, on the entry unit.
 */
void parallels_find_data_end(BDRVParallelsState *s)
{
    uint64_t unit = s->off_multiplier * PARALLELS_SECTOR;
    uint64_t end = MAX(s->bat_end, s->data_off);

    for (uint32_t i = 0; i < s->bat_entries; i++) {
        uint64_t at = parallels_entry_offset(s, i);

        if (at) {
            end = MAX(end, at + s->cluster_size);
        }
    }
    s->data_end = ROUND_UP(end, unit);
}

/*
 * The format extension (dirty bitmaps) is loaded read-only
 * (parallels-ext.c); read-write it is ignored, as by QEMU.
 */
static int parallels_open_extension(BlockDriverState *bs, int flags,
                                    Error **errp)
{
    BDRVParallelsState *s = bs->opaque;

    if (!s->header.ext_off) {
        return 0;
    }
    if (flags & BDRV_O_RDWR) {
        warn_report("Format Extension ignored in RW mode");
        return 0;
    }
    return parallels_load_extension(bs, errp);
}

static void parallels_close(BlockDriverState *bs)
{
    BDRVParallelsState *s = bs->opaque;

    parallels_clear_inuse(bs);
    g_clear_pointer(&s->bat, g_free);
}

static int parallels_open(BlockDriverState *bs, QDict *options, int flags,
                          Error **errp)
{
    BDRVParallelsState *s = bs->opaque;
    QemuOpts *opts;
    const char *mode;
    int ret;

    /* QEMU's runtime options; qblock preallocates nothing (see docs) */
    opts = qemu_opts_absorb_qdict(&qapi_opts_parallels_runtime, options,
                                  errp);
    if (!opts) {
        return -EINVAL;
    }
    mode = qemu_opt_get(opts, "prealloc-mode");
    if (mode && strcmp(mode, "falloc") && strcmp(mode, "truncate")) {
        error_setg(errp, "invalid parameter value: %s", mode);
        qemu_opts_del(opts);
        return -EINVAL;
    }
    qemu_opts_del(opts);
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    ret = parallels_read_header(bs, errp);
    if (ret == 0) {
        ret = parallels_read_bat(bs, errp);
    }
    if (ret == 0) {
        ret = parallels_open_extension(bs, flags, errp);
    }
    if (ret == 0 && (flags & BDRV_O_RDWR)) {
        if (s->found_inuse && !(flags & BDRV_O_CHECK)) {
            error_setg(errp, "parallels: Image was not closed correctly; "
                       "cannot be opened read/write");
            ret = -EACCES;
        } else {
            ret = parallels_mark_inuse(bs, errp);
        }
    }
    if (ret < 0) {
        g_clear_pointer(&s->bat, g_free);
        return ret;
    }
    parallels_find_data_end(s);
    qemu_co_mutex_init(&s->lock);
    return 0;
}

static int parallels_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    BDRVParallelsState *s = state->bs->opaque;

    if ((state->flags & BDRV_O_RDWR) && !s->inuse_marked && s->found_inuse) {
        error_setg(errp, "parallels: Image was not closed correctly; "
                   "cannot be opened read/write");
        return -EACCES;
    }
    return 0;
}

/* inv. 2: the flag follows whether the node may write */
static void parallels_reopen_commit(BDRVReopenState *state)
{
    if (state->flags & BDRV_O_RDWR) {
        parallels_mark_inuse(state->bs, NULL);
    } else {
        parallels_clear_inuse(state->bs);
    }
}

/*
 * Where @offset of the disk lies: returns the bytes from @offset to the
 * end of its cluster (at most @bytes) and sets *@at to the file offset, or
 * to -1 where the cluster has no data (no entry, or past the table).
 */
int64_t parallels_map(const BDRVParallelsState *s, int64_t offset,
                      int64_t bytes, int64_t *at)
{
    uint64_t index = (uint64_t)offset / s->cluster_size;
    uint64_t in_cluster = (uint64_t)offset % s->cluster_size;
    uint64_t host = index < s->bat_entries ?
                    parallels_entry_offset(s, index) : 0;

    *at = host ? (int64_t)(host + in_cluster) : -1;
    return MIN((int64_t)(s->cluster_size - in_cluster), bytes);
}

/* inv. 1: a hostile entry may put its cluster past 2^63 */
static bool parallels_host_ok(const BDRVParallelsState *s, int64_t at)
{
    return at < 0 || (uint64_t)at <= INT64_MAX - s->cluster_size;
}

/* The map bdrv_co_preadv_mapped() reads by: a cluster at a time. */
static int64_t coroutine_fn parallels_piece(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            int64_t *host)
{
    BDRVParallelsState *s = bs->opaque;
    int64_t n = parallels_map(s, offset, bytes, host);

    if (!parallels_host_ok(s, *host)) {
        error_report("parallels: the entry of cluster %" PRIu64 " puts it "
                     "past the largest file offset",
                     (uint64_t)offset / s->cluster_size);
        return -EIO;
    }
    return n;
}

static int coroutine_fn parallels_co_preadv(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov,
                                            BdrvRequestFlags flags)
{
    return bdrv_co_preadv_mapped(bs, offset, bytes, qiov, parallels_piece);
}

static int coroutine_fn parallels_co_block_status(BlockDriverState *bs,
                                                  bool want_zero,
                                                  int64_t offset,
                                                  int64_t bytes, int64_t *pnum,
                                                  int64_t *map,
                                                  BlockDriverState **file)
{
    BDRVParallelsState *s = bs->opaque;
    int64_t at;

    *pnum = parallels_map(s, offset, bytes, &at);
    if (at < 0 || !parallels_host_ok(s, at)) {
        return 0;
    }
    *map = at;
    *file = bs->file->bs;
    return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
}

static int64_t parallels_getlength(BlockDriverState *bs)
{
    BDRVParallelsState *s = bs->opaque;

    return s->disk_size;
}

static const BlockDriver bdrv_parallels = {
    .format_name                    = "parallels",
    .instance_size                  = sizeof(BDRVParallelsState),
    .is_format                      = true,
    .supports_backing               = true,
    .runtime_opts                   = &qapi_opts_parallels_runtime,
    .bdrv_probe                     = parallels_probe,
    .bdrv_open                      = parallels_open,
    .bdrv_close                     = parallels_close,
    .bdrv_reopen_prepare            = parallels_reopen_prepare,
    .bdrv_reopen_commit             = parallels_reopen_commit,
    .bdrv_co_preadv                 = parallels_co_preadv,
    .bdrv_co_pwritev                = parallels_co_pwritev,
    .bdrv_co_block_status           = parallels_co_block_status,
    .bdrv_co_check                  = parallels_co_check,
    .create_opts                    = &qapi_opts_parallels_create,
    .bdrv_co_create_opts            = parallels_co_create_opts,
    .bdrv_co_create_on_node         = parallels_co_create_on_node,
    .bdrv_getlength                 = parallels_getlength,
    .request_alignment              = PARALLELS_SECTOR,
};

block_init(bdrv_register, bdrv_parallels)
