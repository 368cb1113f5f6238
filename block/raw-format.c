/*
 * raw: the image format whose guest data is the bytes of its file child.
 *
 * Options offset and size select a window of the file: guest offset 0 is
 * file offset @offset, and the guest sees @size bytes (default: the rest of
 * the file).
 *
 * Invariants:
 *  1. offset + size never exceeds the file's length as seen at open or
 *     reopen; requests are shifted by offset and, with a fixed size, never
 *     reach past offset + size.
 *  2. When the format was probed (bs->probed), the first sector is never
 *     written with content that another format's probe would recognise:
 *     otherwise the next open would probe that format and interpret guest
 *     data as metadata (a guest could make its disk open its host's files
 *     as backing files).  Requests on a probed node are aligned to the
 *     sector (raw_refresh_limits), so a write touching sector 0 covers all
 *     of it and can be checked as a whole.
 */
#include "block/block_int.h"
#include "qapi/qapi-opts.h"

#define RAW_OPT_OFFSET  "offset"
#define RAW_OPT_SIZE    "size"

/* What bdrv_probe functions look at when the format is probed. */
#define RAW_PROBE_BUF_SIZE  BDRV_SECTOR_SIZE

/* The window changes what the node shows; a json: filename keeps it. */
static const char *const raw_strong_runtime_opts[] = {
    RAW_OPT_OFFSET,
    RAW_OPT_SIZE,
    NULL
};

typedef struct BDRVRawState {
    /* event-loop thread only; changed by reopen commit */
    uint64_t offset;
    uint64_t size;
    bool has_size;
} BDRVRawState;

static int raw_read_options(QDict *options, BDRVRawState *out, Error **errp)
{
    QemuOpts *opts;

    opts = qemu_opts_absorb_qdict(&qapi_opts_raw_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    out->offset = qemu_opt_get_size(opts, RAW_OPT_OFFSET, 0);
    out->has_size = qemu_opt_has(opts, RAW_OPT_SIZE);
    out->size = qemu_opt_get_size(opts, RAW_OPT_SIZE, 0);
    qemu_opts_del(opts);
    return 0;
}

/* Checks @opts against the file's current length (invariant 1). */
static int raw_check_window(BlockDriverState *bs, const BDRVRawState *opts,
                            Error **errp)
{
    int64_t real_size = bdrv_getlength(bs->file->bs);

    if (real_size < 0) {
        error_setg_errno(errp, -real_size, "Could not get image size");
        return real_size;
    }
    if (opts->offset > real_size) {
        error_setg(errp, "Offset (%" PRIu64 ") cannot be greater than size "
                   "of the containing file (%" PRId64 ")",
                   opts->offset, real_size);
        return -EINVAL;
    }
    if (opts->has_size && real_size - opts->offset < opts->size) {
        /* QEMU's wording, double space included, for scripts matching it */
        error_setg(errp, "The sum of offset (%" PRIu64 ") and size (%"
                   PRIu64 ") has to be smaller or equal to the  actual size "
                   "of the containing file (%" PRId64 ")",
                   opts->offset, opts->size, real_size);
        return -EINVAL;
    }
    /* A size that is not whole sectors would be rounded up by users that
     * count in sectors, reaching past the window. */
    if (opts->has_size && !QEMU_IS_ALIGNED(opts->size, BDRV_SECTOR_SIZE)) {
        error_setg(errp, "Specified size is not multiple of %llu",
                   BDRV_SECTOR_SIZE);
        return -EINVAL;
    }
    return 0;
}

static int raw_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVRawState *s = bs->opaque;
    BDRVRawState opts;
    int ret;

    ret = raw_read_options(options, &opts, errp);
    if (ret < 0) {
        return ret;
    }
    bs->file = bdrv_open_child(NULL, options, "file", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    bdrv_inherit_file_flags(bs);
    /* raw_co_preadv() passes a prefetch down as it is */
    bs->supported_read_flags = BDRV_REQ_PREFETCH &
                               bs->file->bs->supported_read_flags;
    ret = raw_check_window(bs, &opts, errp);
    if (ret < 0) {
        return ret;
    }
    *s = opts;
    return 0;
}

static int raw_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    BDRVRawState *staged = g_new0(BDRVRawState, 1);
    int ret;

    ret = raw_read_options(state->options, staged, errp);
    if (ret == 0) {
        ret = raw_check_window(state->bs, staged, errp);
    }
    if (ret < 0) {
        g_free(staged);
        return ret;
    }
    state->opaque = staged;
    return 0;
}

static void raw_reopen_commit(BDRVReopenState *state)
{
    BDRVRawState *s = state->bs->opaque;

    *s = *(BDRVRawState *)state->opaque;
    g_free(state->opaque);
    state->opaque = NULL;
}

static void raw_reopen_abort(BDRVReopenState *state)
{
    g_free(state->opaque);
    state->opaque = NULL;
}

static int raw_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    /* The lowest score: raw is what is left when no format recognises the
     * content. */
    return 1;
}

typedef struct RawProbeCheck {
    const uint8_t *buf;
    const BlockDriver *raw_drv;
    int raw_score;
    bool foreign;
} RawProbeCheck;

static void raw_probe_one(void *opaque, const char *name)
{
    RawProbeCheck *check = opaque;
    const BlockDriver *drv = bdrv_find_format(name);

    if (check->foreign || !drv || drv == check->raw_drv || !drv->bdrv_probe) {
        return;
    }
    if (drv->bdrv_probe(check->buf, RAW_PROBE_BUF_SIZE, NULL) >
        check->raw_score) {
        check->foreign = true;
    }
}

/* True if probing @buf as a first sector would pick a format other than
 * raw (invariant 2). */
static bool raw_sector0_is_foreign(BlockDriverState *bs, const uint8_t *buf)
{
    RawProbeCheck check = {
        .buf = buf,
        .raw_drv = bs->drv,
        .raw_score = raw_probe(buf, RAW_PROBE_BUF_SIZE, NULL),
    };

    bdrv_iterate_format(raw_probe_one, &check);
    return check.foreign;
}

/*
 * Shifts @offset into the file.  With a fixed size, a request that would
 * reach past the window fails without touching the file, so that data
 * beyond it can neither leak nor be overwritten.
 */
static int raw_adjust_offset(BlockDriverState *bs, int64_t *offset,
                             int64_t bytes, bool is_write)
{
    BDRVRawState *s = bs->opaque;

    if (s->has_size && (*offset > s->size || bytes > s->size - *offset)) {
        return is_write ? -ENOSPC : -EINVAL;
    }
    if (*offset > INT64_MAX - s->offset) {
        return -EINVAL;
    }
    *offset += s->offset;
    return 0;
}

static int coroutine_fn raw_co_preadv(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags)
{
    int ret = raw_adjust_offset(bs, &offset, bytes, false);

    if (ret < 0) {
        return ret;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_READ_AIO);
    return bdrv_co_preadv(bs->file, offset, bytes, qiov, flags);
}

static int coroutine_fn raw_co_pwritev(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    QEMUIOVector checked_qiov;
    uint8_t *sector0 = NULL;
    int ret;

    if (bs->probed && offset < RAW_PROBE_BUF_SIZE && bytes) {
        /* raw_refresh_limits makes the sector the request alignment */
        assert(offset == 0 && bytes >= RAW_PROBE_BUF_SIZE);
        sector0 = qemu_try_blockalign(bs->file->bs, RAW_PROBE_BUF_SIZE);
        if (!sector0) {
            return -ENOMEM;
        }
        qemu_iovec_to_buf(qiov, 0, sector0, RAW_PROBE_BUF_SIZE);
        if (raw_sector0_is_foreign(bs, sector0)) {
            ret = -EPERM;
            goto out;
        }
        /* Write the copy that was checked: the caller's buffer may be guest
         * memory that changes under us. */
        qemu_iovec_init(&checked_qiov, qiov->niov + 1);
        qemu_iovec_add(&checked_qiov, sector0, RAW_PROBE_BUF_SIZE);
        qemu_iovec_concat(&checked_qiov, qiov, RAW_PROBE_BUF_SIZE,
                          qiov->size - RAW_PROBE_BUF_SIZE);
        qiov = &checked_qiov;
    }

    ret = raw_adjust_offset(bs, &offset, bytes, true);
    if (ret < 0) {
        goto out;
    }
    BLKDBG_EVENT(bs->file, BLKDBG_WRITE_AIO);
    ret = bdrv_co_pwritev(bs->file, offset, bytes, qiov, flags);

out:
    if (sector0) {
        if (qiov == &checked_qiov) {
            qemu_iovec_destroy(&checked_qiov);
        }
        qemu_vfree(sector0);
    }
    return ret;
}

static int coroutine_fn raw_co_pwrite_zeroes(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             BdrvRequestFlags flags)
{
    int ret = raw_adjust_offset(bs, &offset, bytes, true);

    if (ret < 0) {
        return ret;
    }
    return bdrv_co_pwrite_zeroes(bs->file, offset, bytes, flags);
}

static int coroutine_fn raw_co_pdiscard(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes)
{
    int ret = raw_adjust_offset(bs, &offset, bytes, true);

    if (ret < 0) {
        return ret;
    }
    return bdrv_co_pdiscard(bs->file, offset, bytes);
}

static int coroutine_fn raw_co_block_status(BlockDriverState *bs,
                                            bool want_zero, int64_t offset,
                                            int64_t bytes, int64_t *pnum,
                                            int64_t *map,
                                            BlockDriverState **file)
{
    BDRVRawState *s = bs->opaque;

    *pnum = bytes;
    *file = bs->file->bs;
    *map = offset + s->offset;
    return BDRV_BLOCK_RAW | BDRV_BLOCK_OFFSET_VALID;
}

static int coroutine_fn raw_co_truncate(BlockDriverState *bs, int64_t offset,
                                        bool exact, PreallocMode prealloc,
                                        BdrvRequestFlags flags, Error **errp)
{
    BDRVRawState *s = bs->opaque;

    if (s->has_size) {
        error_setg(errp, "Cannot resize fixed-size raw disks");
        return -ENOTSUP;
    }
    if (offset > INT64_MAX - (int64_t)s->offset) {
        error_setg(errp, "Size %" PRId64 " plus offset %" PRIu64
                   " is too large", offset, s->offset);
        return -EINVAL;
    }
    return bdrv_co_truncate(bs->file, offset + s->offset, exact, prealloc,
                            flags, errp);
}

static int64_t raw_getlength(BlockDriverState *bs)
{
    BDRVRawState *s = bs->opaque;
    int64_t len;

    if (s->has_size) {
        return s->size;
    }
    len = bdrv_getlength(bs->file->bs);
    if (len < 0) {
        return len;
    }
    /* The file may have shrunk under us since open. */
    return len > (int64_t)s->offset ? len - (int64_t)s->offset : 0;
}

/*
 * raw has no metadata of its own: it asks of its file exactly what its
 * users ask of it, so that a raw image is shared as freely as the file
 * (qemu-io beside qemu-nbd), unlike formats (bdrv_default_perms).
 */
static void raw_child_perm(BlockDriverState *bs, BdrvChild *c, uint64_t perm,
                           uint64_t shared, uint64_t *nperm,
                           uint64_t *nshared)
{
    *nperm = perm;
    *nshared = shared;
}

static int raw_get_info(BlockDriverState *bs, BlockDriverInfo *bdi)
{
    return bdrv_get_info(bs->file->bs, bdi);
}

static void raw_refresh_limits(BlockDriverState *bs, Error **errp)
{
    if (bs->probed) {
        /* invariant 2: sub-sector writes become read-modify-write of the
         * whole sector, which raw_co_pwritev can check */
        bs->bl.request_alignment = MAX(bs->bl.request_alignment,
                                       BDRV_SECTOR_SIZE);
    }
}

static int coroutine_fn raw_co_create_opts(const BlockDriver *drv,
                                           const char *filename,
                                           QemuOpts *opts, Error **errp)
{
    /* A raw image is just its file: size and the file protocol's options
     * (preallocation, nocow, ...) go to the protocol unchanged. */
    return bdrv_create_file(filename, opts, errp);
}

/* A raw image is as big as its disk: holes still count towards its size. */
static int raw_measure(QemuOpts *opts, BlockDriverState *in_bs,
                       BlockMeasureInfo *info, Error **errp)
{
    int64_t size = bdrv_measure_virtual_size(opts, in_bs, errp);

    if (size < 0) {
        return size;
    }
    /* a length is whole sectors already; a size option may not be */
    size = ROUND_UP(size, BDRV_SECTOR_SIZE);
    info->required = size;
    info->fully_allocated = size;
    return 0;
}

/* The guest sees the file's bytes: zeroes only if the file has them. */
static int raw_has_zero_init(BlockDriverState *bs)
{
    return bdrv_has_zero_init(bs->file->bs);
}

static const BlockDriver bdrv_raw = {
    .format_name                    = "raw",
    .instance_size                  = sizeof(BDRVRawState),
    .is_format                      = true,
    .runtime_opts                   = &qapi_opts_raw_runtime,
    .strong_runtime_opts            = raw_strong_runtime_opts,
    /* as QEMU's: the window on the file may move */
    .mutable_opts                   = raw_strong_runtime_opts,
    .create_opts                    = &qapi_opts_raw_create,
    .bdrv_probe                     = raw_probe,
    .bdrv_open                      = raw_open,
    .bdrv_co_create_opts            = raw_co_create_opts,
    .bdrv_reopen_prepare            = raw_reopen_prepare,
    .bdrv_reopen_commit             = raw_reopen_commit,
    .bdrv_reopen_abort              = raw_reopen_abort,
    .bdrv_co_preadv                 = raw_co_preadv,
    .bdrv_co_pwritev                = raw_co_pwritev,
    .bdrv_co_pwrite_zeroes          = raw_co_pwrite_zeroes,
    .bdrv_co_pdiscard               = raw_co_pdiscard,
    .bdrv_co_block_status           = raw_co_block_status,
    .bdrv_co_truncate               = raw_co_truncate,
    .bdrv_getlength                 = raw_getlength,
    .bdrv_get_info                  = raw_get_info,
    .bdrv_has_zero_init             = raw_has_zero_init,
    .bdrv_child_perm                = raw_child_perm,
    .bdrv_refresh_limits            = raw_refresh_limits,
    .bdrv_measure                   = raw_measure,
};

block_init(bdrv_register, bdrv_raw)
