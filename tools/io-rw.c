/*
 * qblock-io's synchronous data commands: read, readv, write, writev,
 * flush and discard, each with its help text and table entry.
 */
#include "io-cmds.h"

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

static int qio_read_f(BlockBackend *blk, int argc, char **argv)
{
    QioReqOpts o = { 0 };
    bool bflag = false, sflag = false, lflag = false;
    int64_t offset, count, pattern_offset = 0, pattern_count = 0;
    const QioCmdOpt extra[] = {
        { 'b', &bflag },
        { 'l', &lflag, .number = &pattern_count },
        { 's', &sflag, .number = &pattern_offset },
        { 0 },
    };
    int64_t start;
    uint8_t *buf;
    int first, ret;

    first = qio_parse_req_args(argc, argv, "bCl:pP:qs:v", extra, &o,
                               QIO_OPERANDS_OFF_LEN);
    if (first < 0) {
        return first;
    }
    ret = qio_parse_offset_len(&argv[first], QIO_LENGTH_REQUEST, &offset,
                               &count);
    if (ret < 0) {
        return ret;
    }

    if (!o.Pflag && (lflag || sflag)) {
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
    ret = qio_read_report(&o, buf, offset, count, pattern_offset,
                          pattern_count, start);

out:
    qio_free(buf);
    return ret;
}

const QioCmd qio_cmd_read = {
    .name = "read",
    .alias = "r",
    .func = qio_read_f,
    .argmin = 2,
    .argmax = -1,
    .args = "[-abCqv] [-P pattern [-s off] [-l len]] off len",
    .oneline = "reads a number of bytes at a specified offset",
    .help = qio_help_read,
};

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

static int qio_readv_f(BlockBackend *blk, int argc, char **argv)
{
    QioReqOpts o = { 0 };
    int64_t offset, start;
    QEMUIOVector qiov;
    uint8_t *buf;
    int first, ret;

    first = qio_parse_req_args(argc, argv, "CP:qv", NULL, &o,
                               QIO_OPERANDS_OFF_LENS);
    if (first < 0) {
        return first;
    }
    buf = qio_parse_offset_vector(blk, &argv[first], argc - first,
                                  QIO_READ_FILL, &offset, &qiov);
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
    ret = qio_read_report(&o, buf, offset, qiov.size, 0, qiov.size, start);

out:
    qemu_iovec_destroy(&qiov);
    qio_free(buf);
    return ret;
}

const QioCmd qio_cmd_readv = {
    .name = "readv",
    .func = qio_readv_f,
    .argmin = 2,
    .argmax = -1,
    .args = "[-Cqv] [-P pattern] off len [len..]",
    .oneline = "reads a number of bytes at a specified offset",
    .help = qio_help_readv,
};

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

static int qio_write_f(BlockBackend *blk, int argc, char **argv)
{
    QioReqOpts o = { .pattern = QIO_WRITE_PATTERN };
    bool bflag = false, cflag = false, zflag = false, sflag = false;
    QioLengthLimit limit;
    const char *file_name = NULL;
    const QioCmdOpt extra[] = {
        { 'b', &bflag },
        { 'c', &cflag },
        { 's', &sflag, .arg = &file_name },
        { 'z', &zflag },
        { 0 },
    };
    int64_t offset, count, start;
    uint8_t *buf = NULL;
    int first, ret;

    first = qio_parse_req_args(argc, argv, "bcCfnpP:qs:uz", extra, &o,
                               QIO_OPERANDS_OFF_LEN);
    if (first < 0) {
        return first;
    }
    if (bflag && zflag) {
        printf("-b and -z cannot be specified at the same time\n");
        return -EINVAL;
    }
    if ((o.flags & BDRV_REQ_FUA) && (bflag || cflag)) {
        printf("-f and -b or -c cannot be specified at the same time\n");
        return -EINVAL;
    }
    if ((o.flags & BDRV_REQ_NO_FALLBACK) && !zflag) {
        printf("-n requires -z to be specified\n");
        return -EINVAL;
    }
    if ((o.flags & BDRV_REQ_MAY_UNMAP) && !zflag) {
        printf("-u requires -z to be specified\n");
        return -EINVAL;
    }
    if (zflag + o.Pflag + sflag > 1) {
        printf("Only one of -z, -P, and -s can be specified at the same"
               " time\n");
        return -EINVAL;
    }

    /* without -n, a zero write may fall back to writing a buffer */
    limit = o.flags & BDRV_REQ_NO_FALLBACK ? QIO_LENGTH_ANY
                                           : QIO_LENGTH_REQUEST_UNLESS_N;
    ret = qio_parse_offset_len(&argv[first], limit, &offset, &count);
    if (ret < 0) {
        return ret;
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
            buf = qio_alloc(blk, count, o.pattern);
        }
    }

    start = get_clock_ns();
    if (bflag) {
        ret = blk_save_vmstate(blk, buf, offset, count);
    } else if (zflag) {
        ret = blk_pwrite_zeroes(blk, offset, count,
                                o.flags | (cflag ? BDRV_REQ_WRITE_COMPRESSED
                                                 : 0));
    } else if (cflag) {
        ret = blk_pwrite_compressed(blk, offset, count, buf);
    } else {
        ret = blk_pwrite(blk, offset, count, buf, o.flags);
    }
    start = get_clock_ns() - start;
    if (ret < 0) {
        printf("write failed: %s\n", strerror(-ret));
        goto out;
    }
    ret = 0;

    qio_write_report(&o, "wrote", offset, count, start);

out:
    qio_free(buf);
    return ret;
}

const QioCmd qio_cmd_write = {
    .name = "write",
    .alias = "w",
    .func = qio_write_f,
    .argmin = 2,
    .argmax = -1,
    .perm = BLK_PERM_WRITE,
    .args = "[-bcCfnquz] [-P pattern | -s source_file] off len",
    .oneline = "writes a number of bytes at a specified offset",
    .help = qio_help_write,
};

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

static int qio_writev_f(BlockBackend *blk, int argc, char **argv)
{
    QioReqOpts o = { .pattern = QIO_WRITE_PATTERN };
    int64_t offset, start;
    QEMUIOVector qiov;
    uint8_t *buf;
    int first, ret;

    first = qio_parse_req_args(argc, argv, "CfqP:", NULL, &o,
                               QIO_OPERANDS_OFF_LENS);
    if (first < 0) {
        return first;
    }
    buf = qio_parse_offset_vector(blk, &argv[first], argc - first,
                                  o.pattern, &offset, &qiov);
    if (!buf) {
        return -EINVAL;
    }

    start = get_clock_ns();
    ret = blk_pwritev(blk, offset, qiov.size, &qiov, o.flags);
    start = get_clock_ns() - start;
    if (ret < 0) {
        printf("writev failed: %s\n", strerror(-ret));
        goto out;
    }
    ret = 0;

    qio_write_report(&o, "wrote", offset, qiov.size, start);

out:
    qemu_iovec_destroy(&qiov);
    qio_free(buf);
    return ret;
}

const QioCmd qio_cmd_writev = {
    .name = "writev",
    .func = qio_writev_f,
    .argmin = 2,
    .argmax = -1,
    .perm = BLK_PERM_WRITE,
    .args = "[-Cfq] [-P pattern] off len [len..]",
    .oneline = "writes a number of bytes at a specified offset",
    .help = qio_help_writev,
};

static int qio_flush_f(BlockBackend *blk, int argc, char **argv)
{
    return blk_flush(blk);
}

const QioCmd qio_cmd_flush = {
    .name = "flush",
    .alias = "f",
    .func = qio_flush_f,
    .argmin = 0,
    .argmax = 0,
    .oneline = "flush all in-core file state to disk",
};

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

static int qio_discard_f(BlockBackend *blk, int argc, char **argv)
{
    QioReqOpts o = { 0 };
    int64_t offset, bytes, start;
    int first, ret;

    first = qio_parse_req_args(argc, argv, "Cq", NULL, &o,
                               QIO_OPERANDS_OFF_LEN);
    if (first < 0) {
        return first;
    }
    ret = qio_parse_offset_len(&argv[first], QIO_LENGTH_REQUEST, &offset,
                               &bytes);
    if (ret < 0) {
        return ret;
    }

    start = get_clock_ns();
    ret = blk_pdiscard(blk, offset, bytes);
    start = get_clock_ns() - start;
    if (ret < 0) {
        printf("discard failed: %s\n", strerror(-ret));
        return ret;
    }
    qio_write_report(&o, "discard", offset, bytes, start);
    return 0;
}

const QioCmd qio_cmd_discard = {
    .name = "discard",
    .alias = "d",
    .func = qio_discard_f,
    .argmin = 2,
    .argmax = -1,
    .perm = BLK_PERM_WRITE,
    .args = "[-Cq] off len",
    .oneline = "discards a number of bytes at a specified offset",
    .help = qio_help_discard,
};
