/*
 * blkverify: a debugging filter that runs every request on two images,
 * a raw reference copy ("raw") and the image under test ("test"), and
 * stops the process with a message at the first read whose data or
 * result differs (QEMU's "blkverify" driver: its file name syntax
 * blkverify:RAW:TEST, options and messages).
 *
 * Invariants:
 *  1. The reference copy is bs->file (the filtered child); the test
 *     image is s->test, opened with format probing from x-image.
 *  2. A read or write returns only after both children's requests
 *     completed, and only when both returned the same result and, for a
 *     read, the same data; any difference ends the process (exit 1)
 *     before the caller sees anything.
 */

#include "block/block_int.h"
#include "qapi/qapi-opts.h"
#include "util/cutils.h"

typedef struct BDRVBlkverifyState {
    BdrvChild *test;                /* invariant 1 */
} BDRVBlkverifyState;

/* One request, run on both children at once (invariant 2). */
typedef struct BlkverifyRequest {
    BlockDriverState *bs;
    int64_t offset;
    int64_t bytes;
    bool is_write;
    QEMUIOVector *test_qiov;
    QEMUIOVector *raw_qiov;
    BdrvRequestFlags flags;
    int test_ret;
    int raw_ret;
} BlkverifyRequest;

static void G_GNUC_PRINTF(2, 3) G_GNUC_NORETURN
blkverify_fail(BlkverifyRequest *r, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "blkverify: %s offset=%" PRId64 " bytes=%" PRId64 " ",
            r->is_write ? "write" : "read", r->offset, r->bytes);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    /*
     * QEMU exits here; its output so far comes after the message.  No
     * exit handler runs: the process stops in the middle of a request,
     * with everything allocated (which a leak checker would report).
     */
    fflush(NULL);
    _exit(1);
}

static void blkverify_parse_filename(const char *filename, QDict *options,
                                     Error **errp)
{
    const char *rest, *colon;
    g_autofree char *raw = NULL;

    if (!strstart(filename, "blkverify:", &rest)) {
        /* driver=blkverify with a plain name: it is the test image */
        qdict_put_str(options, "x-image", filename);
        return;
    }
    colon = strchr(rest, ':');
    if (!colon) {
        error_setg(errp, "blkverify requires raw copy and original image "
                   "path");
        return;
    }
    raw = g_strndup(rest, colon - rest);
    qdict_put_str(options, "x-raw", raw);
    qdict_put_str(options, "x-image", colon + 1);
}

static int blkverify_open(BlockDriverState *bs, QDict *options, int flags,
                          Error **errp)
{
    BDRVBlkverifyState *s = bs->opaque;
    g_autofree char *raw = NULL;
    g_autofree char *image = NULL;
    QemuOpts *opts;

    opts = qemu_opts_absorb_qdict(&qapi_opts_blkverify_runtime, options,
                                  errp);
    if (!opts) {
        return -EINVAL;
    }
    raw = g_strdup(qemu_opt_get(opts, "x-raw"));
    image = g_strdup(qemu_opt_get(opts, "x-image"));
    qemu_opts_del(opts);

    bs->file = bdrv_open_child(raw, options, "raw", bs, 0, errp);
    if (!bs->file) {
        return -EINVAL;
    }
    s->test = bdrv_open_child(image, options, "test", bs,
                              BDRV_CHILD_OPEN_PROBE_FORMAT, errp);
    if (!s->test) {
        bdrv_unref_child(bs, bs->file);
        bs->file = NULL;
        return -EINVAL;
    }
    return 0;
}

static void blkverify_close(BlockDriverState *bs)
{
    BDRVBlkverifyState *s = bs->opaque;

    bdrv_unref_child(bs, s->test);
    s->test = NULL;
}

static int blkverify_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    return 0;
}

static int64_t blkverify_getlength(BlockDriverState *bs)
{
    BDRVBlkverifyState *s = bs->opaque;

    return bdrv_getlength(s->test->bs);
}

/* One child's part of @r: the test image's, or the reference copy's. */
typedef struct BlkverifyChildRequest {
    BlkverifyRequest *r;
    BdrvChild *child;
    QEMUIOVector *qiov;
    int *ret;
} BlkverifyChildRequest;

static void coroutine_fn blkverify_child_entry(void *opaque)
{
    BlkverifyChildRequest *c = opaque;
    BlkverifyRequest *r = c->r;

    if (r->is_write) {
        *c->ret = bdrv_co_pwritev(c->child, r->offset, r->bytes, c->qiov,
                                  r->flags);
    } else {
        *c->ret = bdrv_co_preadv(c->child, r->offset, r->bytes, c->qiov,
                                 r->flags);
    }
}

/* Invariant 2: both children, at once; the results must agree. */
static int coroutine_fn blkverify_run(BlkverifyRequest *r)
{
    BDRVBlkverifyState *s = r->bs->opaque;
    BlkverifyChildRequest test = {
        .r = r, .child = s->test, .qiov = r->test_qiov, .ret = &r->test_ret,
    };
    BlkverifyChildRequest raw = {
        .r = r, .child = r->bs->file, .qiov = r->raw_qiov,
        .ret = &r->raw_ret,
    };
    void *opaques[] = { &test, &raw };

    aio_co_run_all(blkverify_child_entry, opaques, 2);
    if (r->test_ret != r->raw_ret) {
        blkverify_fail(r, "return value mismatch %d != %d", r->test_ret,
                       r->raw_ret);
    }
    return r->test_ret;
}

static int coroutine_fn blkverify_co_preadv(BlockDriverState *bs,
                                            int64_t offset, int64_t bytes,
                                            QEMUIOVector *qiov,
                                            BdrvRequestFlags flags)
{
    uint8_t *buf = qemu_blockalign(bs->file->bs, bytes);
    QEMUIOVector raw_qiov;
    BlkverifyRequest r = {
        .bs = bs, .offset = offset, .bytes = bytes, .test_qiov = qiov,
        .raw_qiov = &raw_qiov, .flags = flags,
    };
    ssize_t pos;
    int ret;

    qemu_iovec_init_buf(&raw_qiov, buf, bytes);
    ret = blkverify_run(&r);
    if (ret >= 0) {
        pos = qemu_iovec_compare(qiov, &raw_qiov);
        if (pos >= 0) {
            blkverify_fail(&r, "contents mismatch at offset %" PRId64,
                           offset + pos);
        }
    }
    qemu_vfree(buf);
    return ret;
}

static int coroutine_fn blkverify_co_pwritev(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             QEMUIOVector *qiov,
                                             BdrvRequestFlags flags)
{
    BlkverifyRequest r = {
        .bs = bs, .offset = offset, .bytes = bytes, .is_write = true,
        .test_qiov = qiov, .raw_qiov = qiov, .flags = flags,
    };

    return blkverify_run(&r);
}

/* As QEMU: only the test image; the reference copy does not matter. */
static int coroutine_fn blkverify_co_flush(BlockDriverState *bs)
{
    BDRVBlkverifyState *s = bs->opaque;

    return bdrv_co_flush(s->test->bs);
}

/* blkverify:RAW:TEST when both children have plain names. */
static void blkverify_refresh_filename(BlockDriverState *bs)
{
    BDRVBlkverifyState *s = bs->opaque;
    int len;

    if (!bs->file->bs->exact_filename[0] ||
        !s->test->bs->exact_filename[0]) {
        return;
    }
    len = snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                   "blkverify:%s:%s", bs->file->bs->exact_filename,
                   s->test->bs->exact_filename);
    if (len >= sizeof(bs->exact_filename)) {
        bs->exact_filename[0] = '\0';
    }
}

static const BlockDriver bdrv_blkverify = {
    .format_name                    = "blkverify",
    .protocol_name                  = "blkverify",
    .instance_size                  = sizeof(BDRVBlkverifyState),
    .is_filter                      = true,
    .runtime_opts                   = &qapi_opts_blkverify_runtime,
    .bdrv_parse_filename            = blkverify_parse_filename,
    .bdrv_open                      = blkverify_open,
    .bdrv_close                     = blkverify_close,
    .bdrv_reopen_prepare            = blkverify_reopen_prepare,
    .bdrv_getlength                 = blkverify_getlength,
    .bdrv_co_preadv                 = blkverify_co_preadv,
    .bdrv_co_pwritev                = blkverify_co_pwritev,
    .bdrv_co_flush                  = blkverify_co_flush,
    .bdrv_refresh_filename          = blkverify_refresh_filename,
};

block_init(bdrv_register, bdrv_blkverify)
