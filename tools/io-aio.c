/*
 * qblock-io's asynchronous commands: aio_read and aio_write report when
 * their request completes, from the event loop; aio_flush waits for
 * every request in flight.
 */
#include "io-cmds.h"

typedef struct QioAioCtx {
    BlockBackend *blk;
    QEMUIOVector qiov;
    uint8_t *buf;           /* NULL for zero writes */
    int64_t offset;
    int64_t bytes;
    int64_t start_ns;
    QioReqOpts o;
} QioAioCtx;

static void qio_aio_ctx_free(QioAioCtx *ctx)
{
    if (ctx->buf) {
        qemu_iovec_destroy(&ctx->qiov);
        qio_free(ctx->buf);
    }
    g_free(ctx);
}

/* A request of aio_read or aio_write on @blk, with the options @o. */
static QioAioCtx *qio_aio_ctx_new(BlockBackend *blk, const QioReqOpts *o)
{
    QioAioCtx *ctx = g_new0(QioAioCtx, 1);

    ctx->blk = blk;
    ctx->o = *o;
    return ctx;
}

/*
 * What aio_read and aio_write do once their request @ctx is ready: with
 * -i (@invalid), count an invalid request of @type without issuing one
 * (the stats tests), drop @ctx and return false; otherwise note the start
 * time for the report and return true: the caller submits @ctx.
 */
static bool qio_aio_begin(QioAioCtx *ctx, bool invalid, BlockAcctType type)
{
    if (invalid) {
        blk_get_stats(ctx->blk)->invalid_ops[type]++;
        printf("injecting invalid %s request\n",
               type == BLOCK_ACCT_READ ? "read" : "write");
        qio_aio_ctx_free(ctx);
        return false;
    }
    ctx->start_ns = get_clock_ns();
    return true;
}

static void qio_aio_write_done(void *opaque, int ret)
{
    QioAioCtx *ctx = opaque;
    int64_t elapsed = get_clock_ns() - ctx->start_ns;

    if (ret < 0) {
        printf("aio_write failed: %s\n", strerror(-ret));
    } else {
        qio_write_report(&ctx->o, "wrote", ctx->offset, ctx->bytes, elapsed);
    }
    qio_aio_ctx_free(ctx);
}

static void qio_aio_read_done(void *opaque, int ret)
{
    QioAioCtx *ctx = opaque;
    int64_t elapsed = get_clock_ns() - ctx->start_ns;

    if (ret < 0) {
        /* qemu-io names the vector read here; scripts match the text */
        printf("readv failed: %s\n", strerror(-ret));
    } else {
        /* the command has succeeded already: a mismatch is only printed */
        qio_read_report(&ctx->o, ctx->buf, ctx->offset, ctx->bytes, 0,
                        ctx->bytes, elapsed);
    }
    qio_aio_ctx_free(ctx);
}

static const char qio_help_aio_read[] =
    "\n"
    " asynchronously reads a range of bytes from the given offset\n"
    "\n"
    " Example:\n"
    " 'aio_read -v 512 1k 1k ' - dumps 2 kilobytes read from 512 bytes into"
    " the file\n"
    "\n"
    " Reads a segment of the currently open file, optionally dumping it to"
    " the\n"
    " standard output stream (with -v option) for subsequent inspection.\n"
    " The read is performed asynchronously and the aio_flush command must"
    " be\n"
    " used to ensure all outstanding aio requests have been completed.\n"
    " Note that due to its asynchronous nature, this command will be\n"
    " considered successful once the request is submitted, independently\n"
    " of potential I/O errors or pattern mismatches.\n"
    " -C, -- report statistics in a machine parsable format\n"
    " -P, -- use a pattern to verify read data\n"
    " -i, -- treat request as invalid, for exercising stats\n"
    " -v, -- dump buffer to standard output\n"
    " -q, -- quiet mode, do not show I/O statistics\n"
    "\n";

static int qio_aio_read_f(BlockBackend *blk, int argc, char **argv)
{
    QioReqOpts o = { 0 };
    QioAioCtx *ctx;
    bool iflag = false;
    const QioCmdOpt extra[] = { { 'i', &iflag }, { 0 } };
    int first;

    first = qio_parse_req_args(argc, argv, "CP:iqv", extra, &o,
                               QIO_OPERANDS_OFF_LENS);
    if (first < 0) {
        return first;
    }
    ctx = qio_aio_ctx_new(blk, &o);
    ctx->buf = qio_parse_offset_vector(blk, &argv[first], argc - first,
                                       QIO_READ_FILL, &ctx->offset,
                                       &ctx->qiov);
    if (!ctx->buf) {
        g_free(ctx);
        return -EINVAL;
    }
    ctx->bytes = ctx->qiov.size;

    if (qio_aio_begin(ctx, iflag, BLOCK_ACCT_READ)) {
        blk_aio_preadv(blk, ctx->offset, &ctx->qiov, 0, qio_aio_read_done,
                       ctx);
    }
    return 0;
}

const QioCmd qio_cmd_aio_read = {
    .name = "aio_read",
    .func = qio_aio_read_f,
    .argmin = 2,
    .argmax = -1,
    .args = "[-Ciqv] [-P pattern] off len [len..]",
    .oneline = "asynchronously reads a number of bytes",
    .help = qio_help_aio_read,
};

static const char qio_help_aio_write[] =
    "\n"
    " asynchronously writes a range of bytes from the given offset source\n"
    " from multiple buffers\n"
    "\n"
    " Example:\n"
    " 'aio_write 512 1k 1k' - writes 2 kilobytes at 512 bytes into the open"
    " file\n"
    "\n"
    " Writes into a segment of the currently open file, using a buffer\n"
    " filled with a set pattern (0xcdcdcdcd).\n"
    " The write is performed asynchronously and the aio_flush command must"
    " be\n"
    " used to ensure all outstanding aio requests have been completed.\n"
    " Note that due to its asynchronous nature, this command will be\n"
    " considered successful once the request is submitted, independently\n"
    " of potential I/O errors or pattern mismatches.\n"
    " -P, -- use different pattern to fill file\n"
    " -C, -- report statistics in a machine parsable format\n"
    " -f, -- use Force Unit Access semantics\n"
    " -i, -- treat request as invalid, for exercising stats\n"
    " -q, -- quiet mode, do not show I/O statistics\n"
    " -u, -- with -z, allow unmapping\n"
    " -z, -- write zeroes using blk_aio_pwrite_zeroes\n"
    "\n";

static int qio_aio_write_f(BlockBackend *blk, int argc, char **argv)
{
    QioReqOpts o = { .pattern = QIO_WRITE_PATTERN };
    QioAioCtx *ctx;
    bool iflag = false, zflag = false;
    const QioCmdOpt extra[] = { { 'i', &iflag }, { 'z', &zflag }, { 0 } };
    int first, ret;

    first = qio_parse_req_args(argc, argv, "CfiqP:uz", extra, &o,
                               QIO_OPERANDS_OFF_LENS);
    if (first < 0) {
        return first;
    }
    if ((o.flags & BDRV_REQ_MAY_UNMAP) && !zflag) {
        printf("-u requires -z to be specified\n");
        return -EINVAL;
    }

    ctx = qio_aio_ctx_new(blk, &o);
    ret = qio_parse_number(argv[first], &ctx->offset);
    if (ret < 0) {
        g_free(ctx);
        return ret;
    }
    first++;

    if (zflag) {
        if (first != argc - 1) {
            printf("-z supports only a single length parameter\n");
            g_free(ctx);
            return -EINVAL;
        }
        ret = qio_parse_number(argv[first], &ctx->bytes);
        if (ret < 0) {
            g_free(ctx);
            return ret;
        }
    } else {
        ctx->buf = qio_create_iovec(blk, &ctx->qiov, &argv[first],
                                    argc - first, o.pattern);
        if (!ctx->buf) {
            g_free(ctx);
            return -EINVAL;
        }
        ctx->bytes = ctx->qiov.size;
    }

    if (!qio_aio_begin(ctx, iflag, BLOCK_ACCT_WRITE)) {
        return 0;
    }
    if (zflag) {
        blk_aio_pwrite_zeroes(blk, ctx->offset, ctx->bytes, o.flags,
                              qio_aio_write_done, ctx);
    } else {
        blk_aio_pwritev(blk, ctx->offset, &ctx->qiov, o.flags,
                        qio_aio_write_done, ctx);
    }
    return 0;
}

const QioCmd qio_cmd_aio_write = {
    .name = "aio_write",
    .func = qio_aio_write_f,
    .argmin = 2,
    .argmax = -1,
    .perm = BLK_PERM_WRITE,
    .args = "[-Cfiquz] [-P pattern] off len [len..]",
    .oneline = "asynchronously writes a number of bytes",
    .help = qio_help_aio_write,
};

static int qio_aio_flush_f(BlockBackend *blk, int argc, char **argv)
{
    blk_drain_all();
    return 0;
}

const QioCmd qio_cmd_aio_flush = {
    .name = "aio_flush",
    .func = qio_aio_flush_f,
    .argmin = 0,
    .argmax = 0,
    .oneline = "completes all outstanding aio requests",
};
