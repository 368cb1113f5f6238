/*
 * null-co and null-aio: protocol drivers that store nothing.
 *
 * Writes are dropped, flushes succeed, reads leave the buffer untouched
 * unless read-zeroes=on.  null-co completes every request in the calling
 * coroutine without yielding (with latency-ns=0), so that a benchmark over
 * it measures only the block layer's own overhead.  null-aio completes each
 * request from a bottom half (or a timer, with latency-ns), the way a
 * driver whose I/O finishes asynchronously does, so that the yield and
 * wake-up paths get exercised too.
 *
 * Both drivers share every function; the state's completion field, set by
 * the open function of each, is what tells them apart.
 *
 * Invariants:
 *  1. The state is immutable after open; requests only read it, so any
 *     number of them may run at once.
 *  2. A null-aio request yields exactly once and is woken exactly once, by
 *     the bottom half or timer it armed before yielding.
 */
#include "block/block_int.h"
#include "qapi/qapi-opts.h"

#define NULL_OPT_SIZE       "size"
#define NULL_OPT_LATENCY    "latency-ns"
#define NULL_OPT_ZEROES     "read-zeroes"

/* How a request completes: the one difference between the two drivers. */
typedef enum NullCompletion {
    NULL_COMPLETE_IN_CALLER,    /* null-co */
    NULL_COMPLETE_FROM_LOOP,    /* null-aio (invariant 2) */
} NullCompletion;

typedef struct BDRVNullState {
    int64_t length;
    int64_t latency_ns;
    bool read_zeroes;
    NullCompletion completion;
} BDRVNullState;

static void null_parse_filename_for(const char *expected, const char *filename,
                                    Error **errp)
{
    /* Only the bare prefix names a null node; everything else is options. */
    if (strcmp(filename, expected)) {
        error_setg(errp, "The only allowed filename for this driver is '%s'",
                   expected);
    }
}

static void null_co_parse_filename(const char *filename, QDict *options,
                                   Error **errp)
{
    null_parse_filename_for("null-co://", filename, errp);
}

static void null_aio_parse_filename(const char *filename, QDict *options,
                                    Error **errp)
{
    null_parse_filename_for("null-aio://", filename, errp);
}

static int null_open(BlockDriverState *bs, QDict *options,
                     NullCompletion completion, Error **errp)
{
    BDRVNullState *s = bs->opaque;
    QemuOpts *opts;
    uint64_t size, latency;

    opts = qemu_opts_absorb_qdict(&qapi_opts_null_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    size = qemu_opt_get_size(opts, NULL_OPT_SIZE, 1 * GiB);
    latency = qemu_opt_get_number(opts, NULL_OPT_LATENCY, 0);
    s->read_zeroes = qemu_opt_get_bool(opts, NULL_OPT_ZEROES, false);
    qemu_opts_del(opts);

    if (size > INT64_MAX) {
        error_setg(errp, "size %" PRIu64 " is too large (maximum %" PRId64
                   ")", size, INT64_MAX);
        return -EINVAL;
    }
    if (latency > INT64_MAX) {
        error_setg(errp, "latency-ns is invalid");
        return -EINVAL;
    }
    s->length = size;
    s->latency_ns = latency;
    s->completion = completion;
    /* Nothing is ever stored, so every write is as durable as it gets. */
    bs->supported_write_flags = BDRV_REQ_FUA;
    return 0;
}

static int null_co_open(BlockDriverState *bs, QDict *options, int flags,
                        Error **errp)
{
    return null_open(bs, options, NULL_COMPLETE_IN_CALLER, errp);
}

static int null_aio_open(BlockDriverState *bs, QDict *options, int flags,
                         Error **errp)
{
    return null_open(bs, options, NULL_COMPLETE_FROM_LOOP, errp);
}

/*
 * The bare "null-co://" names the node unless it was given a size or
 * read-zeroes; latency only changes timing, not what the node shows.
 */
static const char *const null_strong_runtime_opts[] = {
    NULL_OPT_SIZE,
    NULL_OPT_ZEROES,
    NULL
};

static void null_refresh_filename(BlockDriverState *bs)
{
    const char *const *o;

    for (o = null_strong_runtime_opts; *o; o++) {
        if (qdict_haskey(bs->options, *o)) {
            return;
        }
    }
    snprintf(bs->exact_filename, sizeof(bs->exact_filename), "%s://",
             bs->drv->format_name);
}

static int64_t null_getlength(BlockDriverState *bs)
{
    BDRVNullState *s = bs->opaque;

    return s->length;
}

static int64_t null_get_allocated_file_size(BlockDriverState *bs)
{
    return 0;
}

static int null_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    return 0;
}

static void null_aio_wake(void *opaque)
{
    aio_co_wake(opaque);
}

/* Completes a null-aio request from the event loop (invariant 2). */
static int coroutine_fn null_complete_from_loop(BlockDriverState *bs)
{
    BDRVNullState *s = bs->opaque;
    AioContext *ctx = bdrv_get_aio_context(bs);
    Coroutine *self = qemu_coroutine_self();
    QEMUTimer *timer;

    if (!s->latency_ns) {
        aio_bh_schedule_oneshot(ctx, null_aio_wake, self);
        qemu_coroutine_yield();
        return 0;
    }
    timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS, null_aio_wake,
                          self);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + s->latency_ns);
    qemu_coroutine_yield();
    timer_free(timer);
    return 0;
}

/* Ends every request, after latency-ns, the way the driver completes. */
static int coroutine_fn null_complete(BlockDriverState *bs)
{
    BDRVNullState *s = bs->opaque;

    if (s->completion == NULL_COMPLETE_FROM_LOOP) {
        return null_complete_from_loop(bs);
    }
    if (s->latency_ns) {
        qemu_co_sleep_ns(s->latency_ns);
    }
    return 0;
}

static int coroutine_fn null_co_preadv(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    BDRVNullState *s = bs->opaque;

    if (s->read_zeroes) {
        qemu_iovec_memset(qiov, 0, 0, bytes);
    }
    return null_complete(bs);
}

static int coroutine_fn null_co_pwritev(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes, QEMUIOVector *qiov,
                                        BdrvRequestFlags flags)
{
    return null_complete(bs);
}

static int coroutine_fn null_co_pwrite_zeroes(BlockDriverState *bs,
                                              int64_t offset, int64_t bytes,
                                              BdrvRequestFlags flags)
{
    return null_complete(bs);
}

static int coroutine_fn null_co_flush(BlockDriverState *bs)
{
    return null_complete(bs);
}

/*
 * Without read-zeroes the content is whatever the caller's buffer held, so
 * the range is reported as neither data nor zero, as QEMU's null driver
 * does (qemu-img map then shows it as not present).
 */
static int coroutine_fn null_co_block_status(BlockDriverState *bs,
                                             bool want_zero, int64_t offset,
                                             int64_t bytes, int64_t *pnum,
                                             int64_t *map,
                                             BlockDriverState **file)
{
    BDRVNullState *s = bs->opaque;
    int ret = BDRV_BLOCK_OFFSET_VALID;

    *pnum = bytes;
    *map = offset;
    *file = bs;
    if (s->read_zeroes) {
        ret |= BDRV_BLOCK_ZERO;
    }
    return ret;
}

/*
 * The two drivers' tables: only the name differs, and the open and
 * parse_filename that record which of the two a node is.
 */
#define NULL_DRIVER(name, parse_filename, open)                         \
    {                                                                   \
        .format_name                    = name,                         \
        .protocol_name                  = name,                         \
        .instance_size                  = sizeof(BDRVNullState),        \
        .runtime_opts                   = &qapi_opts_null_runtime,      \
        .strong_runtime_opts            = null_strong_runtime_opts,     \
        .bdrv_needs_filename            = false,                        \
        .bdrv_parse_filename            = parse_filename,               \
        .bdrv_refresh_filename          = null_refresh_filename,        \
        .bdrv_open                      = open,                         \
        .bdrv_reopen_prepare            = null_reopen_prepare,          \
        .bdrv_getlength                 = null_getlength,               \
        .bdrv_get_allocated_file_size   = null_get_allocated_file_size, \
        .bdrv_co_preadv                 = null_co_preadv,               \
        .bdrv_co_pwritev                = null_co_pwritev,              \
        .bdrv_co_pwrite_zeroes          = null_co_pwrite_zeroes,        \
        .bdrv_co_flush_to_disk          = null_co_flush,                \
        .bdrv_co_block_status           = null_co_block_status,         \
    }

static const BlockDriver bdrv_null_co =
    NULL_DRIVER("null-co", null_co_parse_filename, null_co_open);
static const BlockDriver bdrv_null_aio =
    NULL_DRIVER("null-aio", null_aio_parse_filename, null_aio_open);

block_init(bdrv_register, bdrv_null_co)
block_init(bdrv_register, bdrv_null_aio)
