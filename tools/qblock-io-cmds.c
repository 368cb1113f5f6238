/*
 * qblock-io's commands: qemu-io's command set with its options, output
 * formats and error messages, plus "stats" (I/O counters of the backend and
 * of every node, for tests that count what reaches the file).
 *
 * Conventions that scripts depend on, kept from qemu-io:
 * - results, statistics, hex dumps and complaints about arguments go to
 *   stdout; getopt's complaints and "file is empty" go to stderr; errors
 *   that the block layer explains (Error) go through error_report();
 * - a request that fails prints "<what> failed: <strerror>" and the
 *   command fails; a pattern mismatch still prints the statistics;
 * - asynchronous requests report when they complete, and the command that
 *   started them succeeds as soon as they are submitted.
 */
#include "util/osdep.h"

#include <getopt.h>
#include <signal.h>

#include "qblock/block-backend.h"
#include "qblock/block-node.h"
#include "util/aio.h"
#include "util/cutils.h"
#include "util/error.h"
#include "util/iov.h"
#include "util/qdict.h"
#include "io-stats.h"
#include "json-output.h"
#include "qblock-io.h"

/*
 * The largest request qemu-io lets one command issue: INT_MAX rounded down
 * to a sector, the largest size the request path takes in one piece.
 */
#define QIO_MAX_REQUEST_BYTES ((int64_t)(INT_MAX & ~(BDRV_SECTOR_SIZE - 1)))

/* What -m shifts buffers by: aligned for memory, never for O_DIRECT. */
#define QIO_MISALIGN_OFFSET 16

/* Fill byte of read buffers, visible only if a read forgets to fill. */
#define QIO_READ_FILL 0xab
/* Default data of write commands (the help texts name it). */
#define QIO_WRITE_PATTERN 0xcd

/* ---- numbers and sizes ---- */

/*
 * Parses a byte count or offset: a size with an optional suffix.  Sizes
 * are never negative, so "-1" is not a number here (-EINVAL), as qemu-io
 * has it; values beyond INT64_MAX are -ERANGE.
 */
static int64_t qio_cvtnum(const char *s)
{
    uint64_t value;
    int ret;

    if (strchr(s, '-')) {
        return -EINVAL;
    }
    ret = qemu_strtosz(s, NULL, &value);
    if (ret < 0) {
        return ret;
    }
    if (value > INT64_MAX) {
        return -ERANGE;
    }
    return value;
}

static void qio_print_cvtnum_err(int64_t rc, const char *arg)
{
    switch (rc) {
    case -EINVAL:
        printf("Parsing error: non-numeric argument,"
               " or extraneous/unrecognized suffix -- %s\n", arg);
        break;
    case -ERANGE:
        printf("Parsing error: argument too large -- %s\n", arg);
        break;
    default:
        printf("Parsing error: %s\n", arg);
        break;
    }
}

/* A pattern byte: 0..255 in C notation (decimal, 0x hex, 0 octal). */
static int qio_parse_pattern(const char *arg)
{
    char *end;
    long pattern;

    errno = 0;
    pattern = strtol(arg, &end, 0);
    if (errno || pattern < 0 || pattern > UCHAR_MAX || *end != '\0') {
        printf("%s is not a valid pattern byte\n", arg);
        return -1;
    }
    return pattern;
}

/*
 * A size for people: "4 KiB", "1.500 MiB", "48 bytes".  Three decimals
 * (six for bytes), dropped when they are all zero.
 */
static void qio_cvtstr(double value, char *str, size_t size)
{
    static const struct {
        double unit;
        const char *suffix;
    } units[] = {
        { (double)EiB, " EiB" }, { (double)PiB, " PiB" },
        { (double)TiB, " TiB" }, { (double)GiB, " GiB" },
        { (double)MiB, " MiB" }, { (double)KiB, " KiB" },
    };
    const char *suffix = " bytes";
    char *zeroes;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(units); i++) {
        if (value >= units[i].unit) {
            break;
        }
    }
    if (i < ARRAY_SIZE(units)) {
        suffix = units[i].suffix;
        snprintf(str, size, "%.3f", value / units[i].unit);
    } else {
        snprintf(str, size, "%f", value);
    }
    zeroes = strstr(str, ".000");
    if (zeroes) {
        *zeroes = '\0';
    }
    g_strlcat(str, suffix, size);
}

/*
 * Elapsed time: "00.42 sec" below a second, else "H:MM:SS.ss"; the
 * machine-readable form (-C) is always "H:MM:SS.ss".
 */
static void qio_timestr(int64_t ns, char *str, size_t size, bool terse)
{
    int64_t secs = ns / 1000000000;
    double frac = (double)(ns % 1000000000) / 1e9;

    if (terse || secs) {
        snprintf(str, size, "%u:%02u:%05.2f",
                 (unsigned)(secs / 3600), (unsigned)(secs / 60 % 60),
                 (double)(secs % 60) + frac);
    } else {
        snprintf(str, size, "%05.2f sec", frac);
    }
}

/*
 * The two statistics lines of a completed request ("wrote 4096/4096 bytes
 * at offset 0", then sizes, time and rates), or one comma-separated line
 * (bytes,ops,time,bytes/sec,ops/sec) with -C.
 */
static void qio_print_report(const char *op, int64_t elapsed_ns,
                             int64_t offset, int64_t count, int64_t total,
                             int cnt, bool terse)
{
    double secs = (double)elapsed_ns / 1e9;
    char ts[64], s1[64], s2[64];

    qio_timestr(elapsed_ns, ts, sizeof(ts), terse);
    if (terse) {
        printf("%" PRId64 ",%d,%s,%.3f,%.3f\n", total, cnt, ts,
               (double)total / secs, (double)cnt / secs);
        return;
    }
    qio_cvtstr((double)total, s1, sizeof(s1));
    qio_cvtstr((double)total / secs, s2, sizeof(s2));
    printf("%s %" PRId64 "/%" PRId64 " bytes at offset %" PRId64 "\n",
           op, total, count, offset);
    printf("%s, %d ops; %s (%s/sec and %.4f ops/sec)\n",
           s1, cnt, ts, s2, (double)cnt / secs);
}

/* Hex and alphanumeric dump, 16 bytes a line, labelled with image offsets. */
static void qio_dump_buffer(const uint8_t *buf, int64_t offset, int64_t len)
{
    for (int64_t i = 0; i < len; i += 16) {
        int64_t n = MIN(16, len - i);

        printf("%08" PRIx64 ":  ", (uint64_t)(offset + i));
        for (int64_t j = 0; j < n; j++) {
            printf("%02x ", buf[i + j]);
        }
        putchar(' ');
        for (int64_t j = 0; j < n; j++) {
            putchar(g_ascii_isalnum(buf[i + j]) ? buf[i + j] : '.');
        }
        putchar('\n');
    }
}

/* ---- buffers ---- */

static uint8_t *qio_alloc(BlockBackend *blk, size_t len, int pattern)
{
    size_t extra = qio_misalign ? QIO_MISALIGN_OFFSET : 0;
    uint8_t *buf = blk_blockalign(blk, len + extra + 1);

    memset(buf, pattern, len + extra);
    return buf + extra;
}

static void qio_free(uint8_t *buf)
{
    if (buf) {
        qemu_vfree(buf - (qio_misalign ? QIO_MISALIGN_OFFSET : 0));
    }
}

/*
 * A write buffer filled with the content of @path, repeated as often as
 * needed.  Complains on stderr (the file's name first) and returns NULL if
 * the file cannot be read or is empty.
 */
static uint8_t *qio_alloc_from_file(BlockBackend *blk, size_t len,
                                    const char *path)
{
    uint8_t *buf, *p;
    size_t got, filled;
    FILE *f = fopen(path, "r");

    if (!f) {
        perror(path);
        return NULL;
    }
    buf = qio_alloc(blk, len, 0);
    got = len ? fread(buf, 1, len, f) : 0;
    if (ferror(f)) {
        perror(path);
        goto fail;
    }
    if (got == 0 && len) {
        fprintf(stderr, "%s: file is empty\n", path);
        goto fail;
    }
    fclose(f);
    for (p = buf + got, filled = got; filled < len; p += got, filled += got) {
        memcpy(p, buf, MIN(got, len - filled));
    }
    return buf;

fail:
    fclose(f);
    qio_free(buf);
    return NULL;
}

/*
 * Builds one buffer split into the vector elements whose sizes @argv
 * gives, filled with @pattern.  Prints why and returns NULL on a bad size.
 */
static uint8_t *qio_create_iovec(BlockBackend *blk, QEMUIOVector *qiov,
                                 char **argv, int nr_iov, int pattern)
{
    int64_t *sizes = g_new(int64_t, nr_iov);
    int64_t total = 0;
    uint8_t *buf, *p;

    for (int i = 0; i < nr_iov; i++) {
        int64_t len = qio_cvtnum(argv[i]);

        if (len < 0) {
            qio_print_cvtnum_err(len, argv[i]);
            goto fail;
        }
        if (len > QIO_MAX_REQUEST_BYTES) {
            printf("Argument '%s' exceeds maximum size %" PRId64 "\n",
                   argv[i], QIO_MAX_REQUEST_BYTES);
            goto fail;
        }
        total += len;
        if (total > QIO_MAX_REQUEST_BYTES) {
            printf("The total number of bytes exceed the maximum size %"
                   PRId64 "\n", QIO_MAX_REQUEST_BYTES);
            goto fail;
        }
        sizes[i] = len;
    }

    qemu_iovec_init(qiov, nr_iov);
    buf = p = qio_alloc(blk, total, pattern);
    for (int i = 0; i < nr_iov; i++) {
        qemu_iovec_add(qiov, p, sizes[i]);
        p += sizes[i];
    }
    g_free(sizes);
    return buf;

fail:
    g_free(sizes);
    return NULL;
}

/* True if @len bytes at @buf all equal @pattern. */
static bool qio_buf_is_pattern(const uint8_t *buf, int64_t len, int pattern)
{
    for (int64_t i = 0; i < len; i++) {
        if (buf[i] != pattern) {
            return false;
        }
    }
    return true;
}

/* An offset and a length both sector-aligned (vmstate, compression). */
static bool qio_check_sector_aligned(int64_t offset, int64_t count)
{
    if (!QEMU_IS_ALIGNED(offset, BDRV_SECTOR_SIZE)) {
        printf("%" PRId64 " is not a sector-aligned value for 'offset'\n",
               offset);
        return false;
    }
    if (!QEMU_IS_ALIGNED(count, BDRV_SECTOR_SIZE)) {
        printf("%" PRId64 " is not a sector-aligned value for 'count'\n",
               count);
        return false;
    }
    return true;
}

static int qio_usage_error(const char *name)
{
    qio_print_synopsis(qio_find_command(name));
    return -EINVAL;
}

/* ---- synchronous reads and writes ---- */

static int qio_read_f(BlockBackend *blk, int argc, char **argv)
{
    bool Cflag = false, qflag = false, vflag = false, bflag = false;
    bool Pflag = false, sflag = false, lflag = false;
    int64_t offset, count, pattern_offset = 0, pattern_count = 0;
    int64_t start;
    int pattern = 0;
    uint8_t *buf;
    int c, ret;

    while ((c = getopt(argc, argv, "bCl:pP:qs:v")) != -1) {
        switch (c) {
        case 'b':
            bflag = true;
            break;
        case 'C':
            Cflag = true;
            break;
        case 'l':
            lflag = true;
            pattern_count = qio_cvtnum(optarg);
            if (pattern_count < 0) {
                qio_print_cvtnum_err(pattern_count, optarg);
                return pattern_count;
            }
            break;
        case 'p':
            /* accepted for compatibility: it changed nothing for years */
            break;
        case 'P':
            Pflag = true;
            pattern = qio_parse_pattern(optarg);
            if (pattern < 0) {
                return -EINVAL;
            }
            break;
        case 'q':
            qflag = true;
            break;
        case 's':
            sflag = true;
            pattern_offset = qio_cvtnum(optarg);
            if (pattern_offset < 0) {
                qio_print_cvtnum_err(pattern_offset, optarg);
                return pattern_offset;
            }
            break;
        case 'v':
            vflag = true;
            break;
        default:
            return qio_usage_error(argv[0]);
        }
    }
    if (optind != argc - 2) {
        return qio_usage_error(argv[0]);
    }

    offset = qio_cvtnum(argv[optind]);
    if (offset < 0) {
        qio_print_cvtnum_err(offset, argv[optind]);
        return offset;
    }
    optind++;
    count = qio_cvtnum(argv[optind]);
    if (count < 0) {
        qio_print_cvtnum_err(count, argv[optind]);
        return count;
    }
    if (count > QIO_MAX_REQUEST_BYTES) {
        printf("length cannot exceed %" PRId64 ", given %s\n",
               QIO_MAX_REQUEST_BYTES, argv[optind]);
        return -EINVAL;
    }

    if (!Pflag && (lflag || sflag)) {
        return qio_usage_error(argv[0]);
    }
    if (!lflag) {
        pattern_count = count - pattern_offset;
    }
    if (pattern_count < 0 || pattern_offset + pattern_count > count) {
        printf("pattern verification range exceeds end of read data\n");
        return -EINVAL;
    }
    if (bflag && !qio_check_sector_aligned(offset, count)) {
        return -EINVAL;
    }

    buf = qio_alloc(blk, count, QIO_READ_FILL);
    start = get_clock_ns();
    if (bflag) {
        ret = blk_load_vmstate(blk, buf, offset, count);
    } else {
        ret = blk_pread(blk, offset, count, buf, 0);
    }
    start = get_clock_ns() - start;
    if (ret < 0) {
        printf("read failed: %s\n", strerror(-ret));
        goto out;
    }
    ret = 0;

    if (Pflag &&
        !qio_buf_is_pattern(buf + pattern_offset, pattern_count, pattern)) {
        printf("Pattern verification failed at offset %" PRId64 ", %"
               PRId64 " bytes\n", offset + pattern_offset, pattern_count);
        ret = -EINVAL;
    }
    if (qflag) {
        goto out;
    }
    if (vflag) {
        qio_dump_buffer(buf, offset, count);
    }
    qio_print_report("read", start, offset, count, count, 1, Cflag);

out:
    qio_free(buf);
    return ret;
}

static int qio_readv_f(BlockBackend *blk, int argc, char **argv)
{
    bool Cflag = false, qflag = false, vflag = false, Pflag = false;
    int pattern = 0;
    int64_t offset, start;
    QEMUIOVector qiov;
    uint8_t *buf;
    int c, ret;

    while ((c = getopt(argc, argv, "CP:qv")) != -1) {
        switch (c) {
        case 'C':
            Cflag = true;
            break;
        case 'P':
            Pflag = true;
            pattern = qio_parse_pattern(optarg);
            if (pattern < 0) {
                return -EINVAL;
            }
            break;
        case 'q':
            qflag = true;
            break;
        case 'v':
            vflag = true;
            break;
        default:
            return qio_usage_error(argv[0]);
        }
    }
    if (optind > argc - 2) {
        return qio_usage_error(argv[0]);
    }

    offset = qio_cvtnum(argv[optind]);
    if (offset < 0) {
        qio_print_cvtnum_err(offset, argv[optind]);
        return offset;
    }
    optind++;

    buf = qio_create_iovec(blk, &qiov, &argv[optind], argc - optind,
                           QIO_READ_FILL);
    if (!buf) {
        return -EINVAL;
    }

    start = get_clock_ns();
    ret = blk_preadv(blk, offset, qiov.size, &qiov, 0);
    start = get_clock_ns() - start;
    if (ret < 0) {
        printf("readv failed: %s\n", strerror(-ret));
        goto out;
    }
    ret = 0;

    if (Pflag && !qio_buf_is_pattern(buf, qiov.size, pattern)) {
        printf("Pattern verification failed at offset %" PRId64 ", %zu"
               " bytes\n", offset, qiov.size);
        ret = -EINVAL;
    }
    if (qflag) {
        goto out;
    }
    if (vflag) {
        qio_dump_buffer(buf, offset, qiov.size);
    }
    qio_print_report("read", start, offset, qiov.size, qiov.size, 1, Cflag);

out:
    qemu_iovec_destroy(&qiov);
    qio_free(buf);
    return ret;
}

static int qio_write_f(BlockBackend *blk, int argc, char **argv)
{
    bool Cflag = false, qflag = false, bflag = false, cflag = false;
    bool Pflag = false, zflag = false, sflag = false;
    BdrvRequestFlags flags = 0;
    const char *file_name = NULL;
    int pattern = QIO_WRITE_PATTERN;
    int64_t offset, count, start;
    uint8_t *buf = NULL;
    int c, ret;

    while ((c = getopt(argc, argv, "bcCfnpP:qs:uz")) != -1) {
        switch (c) {
        case 'b':
            bflag = true;
            break;
        case 'c':
            cflag = true;
            break;
        case 'C':
            Cflag = true;
            break;
        case 'f':
            flags |= BDRV_REQ_FUA;
            break;
        case 'n':
            flags |= BDRV_REQ_NO_FALLBACK;
            break;
        case 'p':
            /* accepted for compatibility: it changed nothing for years */
            break;
        case 'P':
            Pflag = true;
            pattern = qio_parse_pattern(optarg);
            if (pattern < 0) {
                return -EINVAL;
            }
            break;
        case 'q':
            qflag = true;
            break;
        case 's':
            sflag = true;
            file_name = optarg;
            break;
        case 'u':
            flags |= BDRV_REQ_MAY_UNMAP;
            break;
        case 'z':
            zflag = true;
            break;
        default:
            return qio_usage_error(argv[0]);
        }
    }
    if (optind != argc - 2) {
        return qio_usage_error(argv[0]);
    }

    if (bflag && zflag) {
        printf("-b and -z cannot be specified at the same time\n");
        return -EINVAL;
    }
    if ((flags & BDRV_REQ_FUA) && (bflag || cflag)) {
        printf("-f and -b or -c cannot be specified at the same time\n");
        return -EINVAL;
    }
    if ((flags & BDRV_REQ_NO_FALLBACK) && !zflag) {
        printf("-n requires -z to be specified\n");
        return -EINVAL;
    }
    if ((flags & BDRV_REQ_MAY_UNMAP) && !zflag) {
        printf("-u requires -z to be specified\n");
        return -EINVAL;
    }
    if (zflag + Pflag + sflag > 1) {
        printf("Only one of -z, -P, and -s can be specified at the same"
               " time\n");
        return -EINVAL;
    }

    offset = qio_cvtnum(argv[optind]);
    if (offset < 0) {
        qio_print_cvtnum_err(offset, argv[optind]);
        return offset;
    }
    optind++;
    count = qio_cvtnum(argv[optind]);
    if (count < 0) {
        qio_print_cvtnum_err(count, argv[optind]);
        return count;
    }
    /* without -n, a zero write may fall back to writing a buffer */
    if (count > QIO_MAX_REQUEST_BYTES && !(flags & BDRV_REQ_NO_FALLBACK)) {
        printf("length cannot exceed %" PRId64 " without -n, given %s\n",
               QIO_MAX_REQUEST_BYTES, argv[optind]);
        return -EINVAL;
    }
    if ((bflag || cflag) && !qio_check_sector_aligned(offset, count)) {
        return -EINVAL;
    }

    if (!zflag) {
        if (sflag) {
            buf = qio_alloc_from_file(blk, count, file_name);
            if (!buf) {
                return -EINVAL;
            }
        } else {
            buf = qio_alloc(blk, count, pattern);
        }
    }

    start = get_clock_ns();
    if (bflag) {
        ret = blk_save_vmstate(blk, buf, offset, count);
    } else if (zflag) {
        ret = blk_pwrite_zeroes(blk, offset, count,
                                flags | (cflag ? BDRV_REQ_WRITE_COMPRESSED
                                               : 0));
    } else if (cflag) {
        ret = blk_pwrite_compressed(blk, offset, count, buf);
    } else {
        ret = blk_pwrite(blk, offset, count, buf, flags);
    }
    start = get_clock_ns() - start;
    if (ret < 0) {
        printf("write failed: %s\n", strerror(-ret));
        goto out;
    }
    ret = 0;

    if (!qflag) {
        qio_print_report("wrote", start, offset, count, count, 1, Cflag);
    }

out:
    qio_free(buf);
    return ret;
}

static int qio_writev_f(BlockBackend *blk, int argc, char **argv)
{
    bool Cflag = false, qflag = false;
    BdrvRequestFlags flags = 0;
    int pattern = QIO_WRITE_PATTERN;
    int64_t offset, start;
    QEMUIOVector qiov;
    uint8_t *buf;
    int c, ret;

    while ((c = getopt(argc, argv, "CfqP:")) != -1) {
        switch (c) {
        case 'C':
            Cflag = true;
            break;
        case 'f':
            flags |= BDRV_REQ_FUA;
            break;
        case 'q':
            qflag = true;
            break;
        case 'P':
            pattern = qio_parse_pattern(optarg);
            if (pattern < 0) {
                return -EINVAL;
            }
            break;
        default:
            return qio_usage_error(argv[0]);
        }
    }
    if (optind > argc - 2) {
        return qio_usage_error(argv[0]);
    }

    offset = qio_cvtnum(argv[optind]);
    if (offset < 0) {
        qio_print_cvtnum_err(offset, argv[optind]);
        return offset;
    }
    optind++;

    buf = qio_create_iovec(blk, &qiov, &argv[optind], argc - optind,
                           pattern);
    if (!buf) {
        return -EINVAL;
    }

    start = get_clock_ns();
    ret = blk_pwritev(blk, offset, qiov.size, &qiov, flags);
    start = get_clock_ns() - start;
    if (ret < 0) {
        printf("writev failed: %s\n", strerror(-ret));
        goto out;
    }
    ret = 0;

    if (!qflag) {
        qio_print_report("wrote", start, offset, qiov.size, qiov.size, 1,
                         Cflag);
    }

out:
    qemu_iovec_destroy(&qiov);
    qio_free(buf);
    return ret;
}

/* ---- asynchronous requests ---- */

typedef struct QioAioCtx {
    BlockBackend *blk;
    QEMUIOVector qiov;
    uint8_t *buf;           /* NULL for zero writes */
    int64_t offset;
    int64_t bytes;
    int64_t start_ns;
    bool Cflag, qflag, vflag, Pflag;
    int pattern;
} QioAioCtx;

static void qio_aio_ctx_free(QioAioCtx *ctx)
{
    if (ctx->buf) {
        qemu_iovec_destroy(&ctx->qiov);
        qio_free(ctx->buf);
    }
    g_free(ctx);
}

static void qio_aio_write_done(void *opaque, int ret)
{
    QioAioCtx *ctx = opaque;
    int64_t elapsed = get_clock_ns() - ctx->start_ns;

    if (ret < 0) {
        printf("aio_write failed: %s\n", strerror(-ret));
    } else if (!ctx->qflag) {
        qio_print_report("wrote", elapsed, ctx->offset, ctx->bytes,
                         ctx->bytes, 1, ctx->Cflag);
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
        goto out;
    }
    if (ctx->Pflag &&
        !qio_buf_is_pattern(ctx->buf, ctx->bytes, ctx->pattern)) {
        printf("Pattern verification failed at offset %" PRId64 ", %"
               PRId64 " bytes\n", ctx->offset, ctx->bytes);
    }
    if (ctx->qflag) {
        goto out;
    }
    if (ctx->vflag) {
        qio_dump_buffer(ctx->buf, ctx->offset, ctx->bytes);
    }
    qio_print_report("read", elapsed, ctx->offset, ctx->bytes, ctx->bytes,
                     1, ctx->Cflag);
out:
    qio_aio_ctx_free(ctx);
}

static int qio_aio_read_f(BlockBackend *blk, int argc, char **argv)
{
    QioAioCtx *ctx = g_new0(QioAioCtx, 1);
    bool iflag = false;
    int c;

    ctx->blk = blk;
    while ((c = getopt(argc, argv, "CP:iqv")) != -1) {
        switch (c) {
        case 'C':
            ctx->Cflag = true;
            break;
        case 'P':
            ctx->Pflag = true;
            ctx->pattern = qio_parse_pattern(optarg);
            if (ctx->pattern < 0) {
                g_free(ctx);
                return -EINVAL;
            }
            break;
        case 'i':
            iflag = true;
            break;
        case 'q':
            ctx->qflag = true;
            break;
        case 'v':
            ctx->vflag = true;
            break;
        default:
            g_free(ctx);
            return qio_usage_error(argv[0]);
        }
    }
    if (optind > argc - 2) {
        g_free(ctx);
        return qio_usage_error(argv[0]);
    }

    ctx->offset = qio_cvtnum(argv[optind]);
    if (ctx->offset < 0) {
        qio_print_cvtnum_err(ctx->offset, argv[optind]);
        g_free(ctx);
        return -EINVAL;
    }
    optind++;

    ctx->buf = qio_create_iovec(blk, &ctx->qiov, &argv[optind],
                                argc - optind, QIO_READ_FILL);
    if (!ctx->buf) {
        g_free(ctx);
        return -EINVAL;
    }
    ctx->bytes = ctx->qiov.size;

    if (iflag) {
        /* counts an invalid request without issuing one (stats tests) */
        blk_get_stats(blk)->invalid_ops[BLOCK_ACCT_READ]++;
        printf("injecting invalid read request\n");
        qio_aio_ctx_free(ctx);
        return 0;
    }

    ctx->start_ns = get_clock_ns();
    blk_aio_preadv(blk, ctx->offset, &ctx->qiov, 0, qio_aio_read_done, ctx);
    return 0;
}

static int qio_aio_write_f(BlockBackend *blk, int argc, char **argv)
{
    QioAioCtx *ctx = g_new0(QioAioCtx, 1);
    BdrvRequestFlags flags = 0;
    bool iflag = false, zflag = false;
    int pattern = QIO_WRITE_PATTERN;
    int c;

    ctx->blk = blk;
    while ((c = getopt(argc, argv, "CfiqP:uz")) != -1) {
        switch (c) {
        case 'C':
            ctx->Cflag = true;
            break;
        case 'f':
            flags |= BDRV_REQ_FUA;
            break;
        case 'i':
            iflag = true;
            break;
        case 'q':
            ctx->qflag = true;
            break;
        case 'P':
            pattern = qio_parse_pattern(optarg);
            if (pattern < 0) {
                g_free(ctx);
                return -EINVAL;
            }
            break;
        case 'u':
            flags |= BDRV_REQ_MAY_UNMAP;
            break;
        case 'z':
            zflag = true;
            break;
        default:
            g_free(ctx);
            return qio_usage_error(argv[0]);
        }
    }
    if (optind > argc - 2) {
        g_free(ctx);
        return qio_usage_error(argv[0]);
    }
    if ((flags & BDRV_REQ_MAY_UNMAP) && !zflag) {
        printf("-u requires -z to be specified\n");
        g_free(ctx);
        return -EINVAL;
    }

    ctx->offset = qio_cvtnum(argv[optind]);
    if (ctx->offset < 0) {
        qio_print_cvtnum_err(ctx->offset, argv[optind]);
        g_free(ctx);
        return -EINVAL;
    }
    optind++;

    if (zflag) {
        if (optind != argc - 1) {
            printf("-z supports only a single length parameter\n");
            g_free(ctx);
            return -EINVAL;
        }
        ctx->bytes = qio_cvtnum(argv[optind]);
        if (ctx->bytes < 0) {
            qio_print_cvtnum_err(ctx->bytes, argv[optind]);
            g_free(ctx);
            return -EINVAL;
        }
    } else {
        ctx->buf = qio_create_iovec(blk, &ctx->qiov, &argv[optind],
                                    argc - optind, pattern);
        if (!ctx->buf) {
            g_free(ctx);
            return -EINVAL;
        }
        ctx->bytes = ctx->qiov.size;
    }

    if (iflag) {
        /* counts an invalid request without issuing one (stats tests) */
        blk_get_stats(blk)->invalid_ops[BLOCK_ACCT_WRITE]++;
        printf("injecting invalid write request\n");
        qio_aio_ctx_free(ctx);
        return 0;
    }

    ctx->start_ns = get_clock_ns();
    if (zflag) {
        blk_aio_pwrite_zeroes(blk, ctx->offset, ctx->bytes, flags,
                              qio_aio_write_done, ctx);
    } else {
        blk_aio_pwritev(blk, ctx->offset, &ctx->qiov, flags,
                        qio_aio_write_done, ctx);
    }
    return 0;
}

static int qio_aio_flush_f(BlockBackend *blk, int argc, char **argv)
{
    blk_drain_all();
    return 0;
}

static int qio_flush_f(BlockBackend *blk, int argc, char **argv)
{
    return blk_flush(blk);
}

static int qio_discard_f(BlockBackend *blk, int argc, char **argv)
{
    bool Cflag = false, qflag = false;
    int64_t offset, bytes, start;
    int c, ret;

    while ((c = getopt(argc, argv, "Cq")) != -1) {
        switch (c) {
        case 'C':
            Cflag = true;
            break;
        case 'q':
            qflag = true;
            break;
        default:
            return qio_usage_error(argv[0]);
        }
    }
    if (optind != argc - 2) {
        return qio_usage_error(argv[0]);
    }

    offset = qio_cvtnum(argv[optind]);
    if (offset < 0) {
        qio_print_cvtnum_err(offset, argv[optind]);
        return offset;
    }
    optind++;
    bytes = qio_cvtnum(argv[optind]);
    if (bytes < 0) {
        qio_print_cvtnum_err(bytes, argv[optind]);
        return bytes;
    }
    if (bytes > QIO_MAX_REQUEST_BYTES) {
        printf("length cannot exceed %" PRId64 ", given %s\n",
               QIO_MAX_REQUEST_BYTES, argv[optind]);
        return -EINVAL;
    }

    start = get_clock_ns();
    ret = blk_pdiscard(blk, offset, bytes);
    start = get_clock_ns() - start;
    if (ret < 0) {
        printf("discard failed: %s\n", strerror(-ret));
        return ret;
    }
    if (!qflag) {
        qio_print_report("discard", start, offset, bytes, bytes, 1, Cflag);
    }
    return 0;
}

static int qio_truncate_f(BlockBackend *blk, int argc, char **argv)
{
    PreallocMode prealloc = PREALLOC_MODE_OFF;
    Error *local_err = NULL;
    int64_t offset;
    int c, ret;

    while ((c = getopt(argc, argv, "m:")) != -1) {
        switch (c) {
        case 'm':
            for (prealloc = 0; prealloc < PREALLOC_MODE__MAX; prealloc++) {
                if (!strcmp(optarg, PreallocMode_str[prealloc])) {
                    break;
                }
            }
            if (prealloc == PREALLOC_MODE__MAX) {
                error_report("Invalid preallocation mode '%s'", optarg);
                return -EINVAL;
            }
            break;
        default:
            return qio_usage_error(argv[0]);
        }
    }
    /* qemu-io reads past the arguments here ("truncate -m full") */
    if (optind >= argc) {
        return qio_usage_error(argv[0]);
    }

    offset = qio_cvtnum(argv[optind]);
    if (offset < 0) {
        qio_print_cvtnum_err(offset, argv[optind]);
        return offset;
    }

    ret = blk_truncate(blk, offset, false, prealloc, 0, &local_err);
    if (ret < 0) {
        error_report_err(local_err);
        return ret;
    }
    return 0;
}

static int qio_length_f(BlockBackend *blk, int argc, char **argv)
{
    int64_t size = blk_getlength(blk);
    char s[64];

    if (size < 0) {
        printf("getlength: %s\n", strerror(-size));
        return size;
    }
    qio_cvtstr(size, s, sizeof(s));
    printf("%s\n", s);
    return 0;
}

static int qio_info_f(BlockBackend *blk, int argc, char **argv)
{
    BlockDriverState *bs = blk_bs(blk);
    BlockDriverInfo bdi = { 0 };
    g_autofree char *specific = NULL;
    char s1[64], s2[64];
    int ret;

    if (bdrv_get_format_name(bs)) {
        printf("format name: %s\n", bdrv_get_format_name(bs));
    }

    ret = bdrv_get_info(bs, &bdi);
    /* formats without such information (raw) report zeroes */
    if (ret < 0 && ret != -ENOTSUP) {
        return ret;
    }
    qio_cvtstr(bdi.cluster_size, s1, sizeof(s1));
    qio_cvtstr(bdi.vm_state_offset, s2, sizeof(s2));
    printf("cluster size: %s\n", s1);
    printf("vm state offset: %s\n", s2);

    specific = img_format_specific_human(bs);
    if (specific) {
        printf("Format specific information:\n%s", specific);
    }
    return 0;
}

/*
 * The allocation status of the run of bytes at @offset, at the top layer
 * only (as qemu-io's map and alloc look): 1 allocated, 0 not, -errno.
 */
static int qio_is_allocated(BlockBackend *blk, int64_t offset, int64_t bytes,
                            int64_t *pnum)
{
    return bdrv_is_allocated(blk_bs(blk), offset, bytes, pnum);
}

static int qio_alloc_f(BlockBackend *blk, int argc, char **argv)
{
    int64_t offset, count = BDRV_SECTOR_SIZE, length, remaining;
    int64_t sum_alloc = 0, num, pos;
    char s[64];
    int ret;

    offset = qio_cvtnum(argv[1]);
    if (offset < 0) {
        qio_print_cvtnum_err(offset, argv[1]);
        return offset;
    }
    if (argc == 3) {
        count = qio_cvtnum(argv[2]);
        if (count < 0) {
            qio_print_cvtnum_err(count, argv[2]);
            return count;
        }
    }

    length = blk_getlength(blk);
    if (length < 0) {
        printf("getlength: %s\n", strerror(-length));
        return length;
    }
    /* the range is clipped at the end of the image */
    count = MIN(count, MAX(length - offset, 0));

    remaining = count;
    pos = offset;
    while (remaining > 0) {
        ret = qio_is_allocated(blk, pos, remaining, &num);
        if (ret < 0) {
            printf("is_allocated failed: %s\n", strerror(-ret));
            return ret;
        }
        if (num == 0) {
            break;
        }
        if (ret) {
            sum_alloc += num;
        }
        pos += num;
        remaining -= num;
    }

    qio_cvtstr(offset, s, sizeof(s));
    printf("%" PRId64 "/%" PRId64 " bytes allocated at offset %s\n",
           sum_alloc, count, s);
    return 0;
}

static int qio_map_f(BlockBackend *blk, int argc, char **argv)
{
    int64_t offset = 0, length, num;
    char s1[64], s2[64];
    int ret;

    length = blk_getlength(blk);
    if (length < 0) {
        printf("getlength: %s\n", strerror(-length));
        return length;
    }

    while (offset < length) {
        int64_t run, next;
        int allocated;

        ret = qio_is_allocated(blk, offset, length - offset, &num);
        if (ret < 0) {
            printf("Failed to get allocation status: %s\n", strerror(-ret));
            return ret;
        }
        if (num == 0) {
            break;
        }
        allocated = ret;
        run = num;

        /* merge the following pieces with the same status into one line */
        for (next = offset + run; next < length; next += num) {
            ret = qio_is_allocated(blk, next, length - next, &num);
            if (ret < 0) {
                printf("Failed to get allocation status: %s\n",
                       strerror(-ret));
                return ret;
            }
            if (ret != allocated || num == 0) {
                break;
            }
            run += num;
        }

        qio_cvtstr(run, s1, sizeof(s1));
        qio_cvtstr(offset, s2, sizeof(s2));
        printf("%s (0x%" PRIx64 ") bytes %s at offset %s (0x%" PRIx64 ")\n",
               s1, run, allocated ? "    allocated" : "not allocated",
               s2, offset);
        offset += run;
    }
    return 0;
}

/* ---- images: open, close, reopen ---- */

/* Adds the "key=value,..." options of @str to @opts. */
static bool qio_parse_options(QDict *opts, const char *str)
{
    Error *local_err = NULL;
    QDict *parsed = keyval_parse_flat(str, NULL, &local_err);

    if (!parsed) {
        error_report_err(local_err);
        return false;
    }
    qdict_join(opts, parsed, true);
    qdict_unref(parsed);
    return true;
}

static int qio_open_f(BlockBackend *blk, int argc, char **argv)
{
    int flags = BDRV_O_UNMAP;
    bool readonly = false, writethrough = true, force_share = false;
    QDict *opts = qdict_new();
    int c, ret;

    while ((c = getopt(argc, argv, "snCro:ki:t:d:U")) != -1) {
        switch (c) {
        case 's':
            flags |= BDRV_O_SNAPSHOT;
            break;
        case 'n':
            flags |= BDRV_O_NOCACHE;
            writethrough = false;
            break;
        case 'C':
            flags |= BDRV_O_COPY_ON_READ;
            break;
        case 'r':
            readonly = true;
            break;
        case 'k':
            flags |= BDRV_O_NATIVE_AIO;
            break;
        case 't':
            flags &= ~BDRV_O_CACHE_MASK;
            if (bdrv_parse_cache_mode(optarg, &flags, &writethrough) < 0) {
                error_report("Invalid cache option: %s", optarg);
                goto fail;
            }
            break;
        case 'd':
            flags &= ~BDRV_O_UNMAP;
            if (bdrv_parse_discard_flags(optarg, &flags) < 0) {
                error_report("Invalid discard option: %s", optarg);
                goto fail;
            }
            break;
        case 'i':
            flags &= ~(BDRV_O_NATIVE_AIO | BDRV_O_IO_URING);
            if (bdrv_parse_aio(optarg, &flags) < 0) {
                error_report("Invalid aio option: %s", optarg);
                goto fail;
            }
            break;
        case 'o':
            if (!qio_parse_options(opts, optarg)) {
                goto fail;
            }
            break;
        case 'U':
            force_share = true;
            break;
        default:
            qio_usage_error(argv[0]);
            goto fail;
        }
    }

    if (!readonly) {
        flags |= BDRV_O_RDWR;
    }
    /* with --image-opts, the path is an option string as on the command
     * line */
    if (qio_image_opts && optind == argc - 1) {
        if (!qio_parse_options(opts, argv[optind])) {
            goto fail;
        }
        optind++;
    }

    if (optind == argc - 1) {
        ret = qio_open(argv[optind], flags, writethrough, force_share, opts);
    } else if (optind == argc) {
        ret = qio_open(NULL, flags, writethrough, force_share, opts);
    } else {
        qio_usage_error(argv[0]);
        goto fail;
    }
    return ret < 0 ? -EINVAL : 0;

fail:
    qdict_unref(opts);
    return -EINVAL;
}

static int qio_close_f(BlockBackend *blk, int argc, char **argv)
{
    qio_close();
    return 0;
}

static int qio_reopen_f(BlockBackend *blk, int argc, char **argv)
{
    BlockDriverState *bs = blk_bs(blk);
    int flags = bdrv_get_open_flags(bs);
    bool writethrough = !blk_enable_write_cache(blk);
    bool has_rw_option = false, read_only = bdrv_is_read_only(bs);
    uint64_t orig_perm, orig_shared;
    Error *local_err = NULL;
    QDict *opts = qdict_new();
    int c, ret;

    while ((c = getopt(argc, argv, "c:o:rw")) != -1) {
        switch (c) {
        case 'c':
            flags &= ~BDRV_O_CACHE_MASK;
            if (bdrv_parse_cache_mode(optarg, &flags, &writethrough) < 0) {
                error_report("Invalid cache option: %s", optarg);
                ret = -EINVAL;
                goto out;
            }
            break;
        case 'o':
            if (!qio_parse_options(opts, optarg)) {
                ret = -EINVAL;
                goto out;
            }
            break;
        case 'r':
        case 'w':
            if (has_rw_option) {
                error_report("Only one -r/-w option may be given");
                ret = -EINVAL;
                goto out;
            }
            has_rw_option = true;
            read_only = c == 'r';
            break;
        default:
            ret = qio_usage_error(argv[0]);
            goto out;
        }
    }
    if (optind != argc) {
        ret = qio_usage_error(argv[0]);
        goto out;
    }

    if (read_only) {
        flags &= ~BDRV_O_RDWR;
    } else {
        flags |= BDRV_O_RDWR;
    }

    /*
     * A read-only node cannot keep a writer: give up the write and resize
     * permissions first (the commands that need them ask again).
     */
    blk_get_perm(blk, &orig_perm, &orig_shared);
    if (read_only && (orig_perm & (BLK_PERM_WRITE | BLK_PERM_RESIZE))) {
        ret = blk_set_perm(blk,
                           orig_perm & ~(BLK_PERM_WRITE | BLK_PERM_RESIZE),
                           orig_shared, &local_err);
        if (ret < 0) {
            error_report_err(local_err);
            goto out;
        }
    }

    /* bdrv_reopen() takes the options over */
    ret = bdrv_reopen(bs, opts, flags, &local_err);
    opts = NULL;
    if (ret < 0) {
        error_report_err(local_err);
        /* back to what the image had; failing again leaves it read-only */
        blk_set_perm(blk, orig_perm, orig_shared, NULL);
        goto out;
    }
    blk_set_enable_write_cache(blk, !writethrough);
    ret = 0;

out:
    if (opts) {
        qdict_unref(opts);
    }
    return ret;
}

/* ---- program control ---- */

static int qio_quit_f(BlockBackend *blk, int argc, char **argv)
{
    qio_quit_requested = true;
    return 0;
}

static int qio_abort_f(BlockBackend *blk, int argc, char **argv)
{
    /*
     * Like qemu-io, output still buffered (stdout not a terminal) is lost
     * as in a real crash; scripts' reference output expects that.
     */
    abort();
}

static int qio_sigraise_f(BlockBackend *blk, int argc, char **argv)
{
    int64_t sig = qio_cvtnum(argv[1]);

    if (sig < 0) {
        qio_print_cvtnum_err(sig, argv[1]);
        return -EINVAL;
    }
    if (sig > INT_MAX) {
        printf("signal argument '%s' is too large to be a valid signal\n",
               argv[1]);
        return -EINVAL;
    }
    /* a fatal signal must not swallow the output printed before it */
    fflush(stdout);
    fflush(stderr);
    raise(sig);
    return 0;
}

static void qio_sleep_done(void *opaque)
{
    bool *expired = opaque;

    *expired = true;
}

static int qio_sleep_f(BlockBackend *blk, int argc, char **argv)
{
    AioContext *ctx = qemu_get_aio_context();
    bool expired = false;
    QEMUTimer *timer;
    int64_t ms;

    if (qemu_strtoi64(argv[1], NULL, 0, &ms) < 0 || ms < 0) {
        printf("%s is not a valid number\n", argv[1]);
        return -EINVAL;
    }

    /* requests in flight complete (and report) while we wait */
    timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_MS,
                          qio_sleep_done, &expired);
    timer_mod(timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) / SCALE_MS + ms);
    AIO_WAIT_WHILE(ctx, !expired);
    timer_free(timer);
    return 0;
}

/* ---- blkdebug control ---- */

static int qio_break_f(BlockBackend *blk, int argc, char **argv)
{
    int ret = bdrv_debug_breakpoint(blk_bs(blk), argv[1], argv[2]);

    if (ret < 0) {
        printf("Could not set breakpoint: %s\n", strerror(-ret));
    }
    return ret;
}

static int qio_remove_break_f(BlockBackend *blk, int argc, char **argv)
{
    int ret = bdrv_debug_remove_breakpoint(blk_bs(blk), argv[1]);

    if (ret < 0) {
        printf("Could not remove breakpoint %s: %s\n", argv[1],
               strerror(-ret));
    }
    return ret;
}

static int qio_resume_f(BlockBackend *blk, int argc, char **argv)
{
    int ret = bdrv_debug_resume(blk_bs(blk), argv[1]);

    if (ret < 0) {
        printf("Could not resume request: %s\n", strerror(-ret));
    }
    return ret;
}

static int qio_wait_break_f(BlockBackend *blk, int argc, char **argv)
{
    BlockDriverState *bs = blk_bs(blk);

    /* like qemu-io, waits for ever if no request ever reaches the point */
    while (!bdrv_debug_is_suspended(bs, argv[1])) {
        aio_poll(blk_get_aio_context(blk), true);
    }
    return 0;
}

/* ---- statistics ---- */

/* One line per node, depth first; @path names the edges from the top. */
static int qio_stats_f(BlockBackend *blk, int argc, char **argv)
{
    tool_print_io_stats(stdout, blk);
    return 0;
}

/* ---- help and the command table ---- */

/* Extended help, as qemu-io prints it (scripts and people diff it). */
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

static const char qio_help_discard[] =
    "\n"
    " discards a range of bytes from the given offset\n"
    "\n"
    " Example:\n"
    " 'discard 512 1k' - discards 1 kilobyte from 512 bytes into the file\n"
    "\n"
    " Discards a segment of the currently open file.\n"
    " -C, -- report statistics in a machine parsable format\n"
    " -q, -- quiet mode, do not show I/O statistics\n"
    "\n";

static const char qio_help_open[] =
    "\n"
    " opens a new file in the requested mode\n"
    "\n"
    " Example:\n"
    " 'open -n -o driver=raw /tmp/data' - opens raw data file read-write,"
    " uncached\n"
    "\n"
    " Opens a file for subsequent use by all of the other qemu-io commands.\n"
    " -r, -- open file read-only\n"
    " -s, -- use snapshot file\n"
    " -C, -- use copy-on-read\n"
    " -n, -- disable host cache, short for -t none\n"
    " -U, -- force shared permissions\n"
    " -k, -- use kernel AIO implementation (Linux only, prefer use of -i)\n"
    " -i, -- use AIO mode (threads, native or io_uring)\n"
    " -t, -- use the given cache mode for the image\n"
    " -d, -- use the given discard mode for the image\n"
    " -o, -- options to be given to the block driver\n";

static const char qio_help_read[] =
    "\n"
    " reads a range of bytes from the given offset\n"
    "\n"
    " Example:\n"
    " 'read -v 512 1k' - dumps 1 kilobyte read from 512 bytes into the file\n"
    "\n"
    " Reads a segment of the currently open file, optionally dumping it to"
    " the\n"
    " standard output stream (with -v option) for subsequent inspection.\n"
    " -b, -- read from the VM state rather than the virtual disk\n"
    " -C, -- report statistics in a machine parsable format\n"
    " -l, -- length for pattern verification (only with -P)\n"
    " -p, -- ignored for backwards compatibility\n"
    " -P, -- use a pattern to verify read data\n"
    " -q, -- quiet mode, do not show I/O statistics\n"
    " -s, -- start offset for pattern verification (only with -P)\n"
    " -v, -- dump buffer to standard output\n"
    "\n";

static const char qio_help_readv[] =
    "\n"
    " reads a range of bytes from the given offset into multiple buffers\n"
    "\n"
    " Example:\n"
    " 'readv -v 512 1k 1k ' - dumps 2 kilobytes read from 512 bytes into the"
    " file\n"
    "\n"
    " Reads a segment of the currently open file, optionally dumping it to"
    " the\n"
    " standard output stream (with -v option) for subsequent inspection.\n"
    " Uses multiple iovec buffers if more than one byte range is specified.\n"
    " -C, -- report statistics in a machine parsable format\n"
    " -P, -- use a pattern to verify read data\n"
    " -v, -- dump buffer to standard output\n"
    " -q, -- quiet mode, do not show I/O statistics\n"
    "\n";

static const char qio_help_reopen[] =
    "\n"
    " Changes the open options of an already opened image\n"
    "\n"
    " Example:\n"
    " 'reopen -o lazy-refcounts=on' - activates lazy refcount writeback on a"
    " qcow2 image\n"
    "\n"
    " -r, -- Reopen the image read-only\n"
    " -w, -- Reopen the image read-write\n"
    " -c, -- Change the cache mode to the given value\n"
    " -o, -- Changes block driver options (cf. 'open' command)\n"
    "\n";

static const char qio_help_sigraise[] =
    "\n"
    " raises the given signal\n"
    "\n"
    " Example:\n"
    " 'sigraise 15' - raises SIGTERM\n"
    "\n"
    " Invokes raise(signal), where \"signal\" is the mandatory integer"
    " argument\n"
    " given to sigraise.\n"
    "\n";

static const char qio_help_write[] =
    "\n"
    " writes a range of bytes from the given offset\n"
    "\n"
    " Example:\n"
    " 'write 512 1k' - writes 1 kilobyte at 512 bytes into the open file\n"
    "\n"
    " Writes into a segment of the currently open file, using a buffer\n"
    " filled with a set pattern (0xcdcdcdcd).\n"
    " -b, -- write to the VM state rather than the virtual disk\n"
    " -c, -- write compressed data with blk_write_compressed\n"
    " -f, -- use Force Unit Access semantics\n"
    " -n, -- with -z, don't allow slow fallback\n"
    " -p, -- ignored for backwards compatibility\n"
    " -P, -- use different pattern to fill file\n"
    " -s, -- use a pattern file to fill the write buffer\n"
    " -C, -- report statistics in a machine parsable format\n"
    " -q, -- quiet mode, do not show I/O statistics\n"
    " -u, -- with -z, allow unmapping\n"
    " -z, -- write zeroes using blk_co_pwrite_zeroes\n"
    "\n";

static const char qio_help_writev[] =
    "\n"
    " writes a range of bytes from the given offset source from multiple"
    " buffers\n"
    "\n"
    " Example:\n"
    " 'writev 512 1k 1k' - writes 2 kilobytes at 512 bytes into the open"
    " file\n"
    "\n"
    " Writes into a segment of the currently open file, using a buffer\n"
    " filled with a set pattern (0xcdcdcdcd).\n"
    " -P, -- use different pattern to fill file\n"
    " -C, -- report statistics in a machine parsable format\n"
    " -f, -- use Force Unit Access semantics\n"
    " -q, -- quiet mode, do not show I/O statistics\n"
    "\n";

static const char qio_help_stats[] =
    "\n"
    " prints the I/O statistics of the open image (not a qemu-io command)\n"
    "\n"
    " The first line holds the counters of the image's BlockBackend, as\n"
    " query-blockstats names them:\n"
    " backend: rd_bytes=N wr_bytes=N flush_bytes=N unmap_bytes=N\n"
    "   rd_operations=N wr_operations=N flush_operations=N\n"
    "   unmap_operations=N failed_rd_operations=N ...\n"
    "   failed_unmap_operations=N\n"
    "   invalid_rd_operations=N ... invalid_unmap_operations=N\n"
    "   wr_highest_offset=N\n"
    " (all on one line).  Then one line per node of the graph, depth first,\n"
    " starting with the image's top node:\n"
    " node PATH DRIVER NODE-NAME: reads=N writes=N zero_writes=N discards=N\n"
    "   flushes=N bytes_read=N bytes_written=N\n"
    " PATH is 'root' for the top node and the parent's PATH, a dot and the\n"
    " child's role for the others ('root.file', 'root.backing.file').\n"
    " These count the requests that reached each node's driver; 'flushes'\n"
    " counts those that reached its flush to disk.  NODE-NAME is '-' when\n"
    " the node has none.\n"
    "\n"
    " Example:\n"
    " 'stats' after a write in writethrough mode shows flushes=1 on\n"
    " root.file\n"
    "\n";

static int qio_help_f(BlockBackend *blk, int argc, char **argv);

/* Sorted by name: "help" lists them in this order. */
static const QioCmd qio_cmds[] = {
    {
        .name = "abort", .func = qio_abort_f,
        .argmin = 0, .argmax = 0, .flags = QIO_CMD_NOFILE_OK,
        .oneline = "simulate a program crash using abort(3)",
    }, {
        .name = "aio_flush", .func = qio_aio_flush_f,
        .argmin = 0, .argmax = 0,
        .oneline = "completes all outstanding aio requests",
    }, {
        .name = "aio_read", .func = qio_aio_read_f,
        .argmin = 2, .argmax = -1,
        .args = "[-Ciqv] [-P pattern] off len [len..]",
        .oneline = "asynchronously reads a number of bytes",
        .help = qio_help_aio_read,
    }, {
        .name = "aio_write", .func = qio_aio_write_f,
        .argmin = 2, .argmax = -1, .perm = BLK_PERM_WRITE,
        .args = "[-Cfiquz] [-P pattern] off len [len..]",
        .oneline = "asynchronously writes a number of bytes",
        .help = qio_help_aio_write,
    }, {
        .name = "alloc", .func = qio_alloc_f,
        .argmin = 1, .argmax = 2,
        .args = "offset [count]",
        .oneline = "checks if offset is allocated in the file",
    }, {
        .name = "break", .func = qio_break_f,
        .argmin = 2, .argmax = 2,
        .args = "event tag",
        .oneline = "sets a breakpoint on event and tags the stopped request"
                   " as tag",
    }, {
        .name = "close", .func = qio_close_f,
        .argmin = 0, .argmax = 0,
        .oneline = "close the current open file",
    }, {
        .name = "discard", .func = qio_discard_f,
        .argmin = 2, .argmax = -1, .perm = BLK_PERM_WRITE,
        .args = "[-Cq] off len",
        .oneline = "discards a number of bytes at a specified offset",
        .help = qio_help_discard,
    }, {
        .name = "flush", .func = qio_flush_f,
        .argmin = 0, .argmax = 0,
        .oneline = "flush all in-core file state to disk",
    }, {
        .name = "help", .func = qio_help_f,
        .argmin = 0, .argmax = 1, .flags = QIO_CMD_NOFILE_OK,
        .args = "[command]",
        .oneline = "help for one or all commands",
    }, {
        .name = "info", .func = qio_info_f,
        .argmin = 0, .argmax = 0,
        .oneline = "prints information about the current file",
    }, {
        .name = "length", .func = qio_length_f,
        .argmin = 0, .argmax = 0,
        .oneline = "gets the length of the current file",
    }, {
        .name = "map", .func = qio_map_f,
        .argmin = 0, .argmax = 0,
        .args = "",
        .oneline = "prints the allocated areas of a file",
    }, {
        .name = "open", .func = qio_open_f,
        .argmin = 1, .argmax = -1, .flags = QIO_CMD_NOFILE_OK,
        .args = "[-rsCnkU] [-t cache] [-d discard] [-o options] [path]",
        .oneline = "open the file specified by path",
        .help = qio_help_open,
    }, {
        .name = "quit", .func = qio_quit_f,
        .argmin = 0, .argmax = -1, .flags = QIO_CMD_NOFILE_OK,
        .oneline = "exit the program",
    }, {
        .name = "read", .func = qio_read_f,
        .argmin = 2, .argmax = -1,
        .args = "[-abCqv] [-P pattern [-s off] [-l len]] off len",
        .oneline = "reads a number of bytes at a specified offset",
        .help = qio_help_read,
    }, {
        .name = "readv", .func = qio_readv_f,
        .argmin = 2, .argmax = -1,
        .args = "[-Cqv] [-P pattern] off len [len..]",
        .oneline = "reads a number of bytes at a specified offset",
        .help = qio_help_readv,
    }, {
        .name = "remove_break", .func = qio_remove_break_f,
        .argmin = 1, .argmax = 1,
        .args = "tag",
        .oneline = "remove a breakpoint by tag",
    }, {
        .name = "reopen", .func = qio_reopen_f,
        .argmin = 0, .argmax = -1,
        .args = "[(-r|-w)] [-c cache] [-o options]",
        .oneline = "reopens an image with new options",
        .help = qio_help_reopen,
    }, {
        .name = "resume", .func = qio_resume_f,
        .argmin = 1, .argmax = 1,
        .args = "tag",
        .oneline = "resumes the request tagged as tag",
    }, {
        .name = "sigraise", .func = qio_sigraise_f,
        .argmin = 1, .argmax = 1, .flags = QIO_CMD_NOFILE_OK,
        .args = "signal",
        .oneline = "raises a signal",
        .help = qio_help_sigraise,
    }, {
        .name = "sleep", .func = qio_sleep_f,
        .argmin = 1, .argmax = 1, .flags = QIO_CMD_NOFILE_OK,
        .oneline = "waits for the given value in milliseconds",
    }, {
        .name = "stats", .func = qio_stats_f,
        .argmin = 0, .argmax = 0,
        .oneline = "prints I/O statistics of the image and of each node",
        .help = qio_help_stats,
    }, {
        .name = "truncate", .func = qio_truncate_f,
        .argmin = 1, .argmax = 3,
        .perm = BLK_PERM_WRITE | BLK_PERM_RESIZE,
        .args = "[-m prealloc_mode] off",
        .oneline = "truncates the current file at the given offset",
    }, {
        .name = "wait_break", .func = qio_wait_break_f,
        .argmin = 1, .argmax = 1,
        .args = "tag",
        .oneline = "waits for the suspension of a request",
    }, {
        .name = "write", .func = qio_write_f,
        .argmin = 2, .argmax = -1, .perm = BLK_PERM_WRITE,
        .args = "[-bcCfnquz] [-P pattern | -s source_file] off len",
        .oneline = "writes a number of bytes at a specified offset",
        .help = qio_help_write,
    }, {
        .name = "writev", .func = qio_writev_f,
        .argmin = 2, .argmax = -1, .perm = BLK_PERM_WRITE,
        .args = "[-Cfq] [-P pattern] off len [len..]",
        .oneline = "writes a number of bytes at a specified offset",
        .help = qio_help_writev,
    },
};

const QioCmd *qio_find_command(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(qio_cmds); i++) {
        if (!strcmp(qio_cmds[i].name, name)) {
            return &qio_cmds[i];
        }
    }
    return NULL;
}

void qio_print_synopsis(const QioCmd *ct)
{
    printf("%s%s%s -- %s\n", ct->name, ct->args ? " " : "",
           ct->args ? ct->args : "", ct->oneline);
}

static int qio_help_f(BlockBackend *blk, int argc, char **argv)
{
    const QioCmd *ct;

    if (argc == 1) {
        for (size_t i = 0; i < ARRAY_SIZE(qio_cmds); i++) {
            qio_print_synopsis(&qio_cmds[i]);
        }
        printf("\nUse 'help commandname' for extended help.\n");
        return 0;
    }

    ct = qio_find_command(argv[1]);
    if (!ct) {
        printf("command %s not found\n", argv[1]);
        return -EINVAL;
    }
    qio_print_synopsis(ct);
    if (ct->help) {
        fputs(ct->help, stdout);
    }
    return 0;
}
