/*
 * What qblock-io's request commands (read, readv, write, writev, discard
 * and their aio_ forms) share: the options that mean the same in each of
 * them, and how a completed read is checked and reported.
 */
#include "io-cmds.h"

#include <getopt.h>

/*
 * Stores option @c as its entry in @opts says, if @opts has it; returns
 * 1 if it did, 0 if @opts lacks @c, -errno after printing why the
 * argument is bad.
 */
static int qio_cmd_opt(int c, const QioCmdOpt *opts)
{
    for (; opts && opts->letter; opts++) {
        if (opts->letter != c) {
            continue;
        }
        if (opts->given) {
            *opts->given = true;
        }
        if (opts->arg) {
            *opts->arg = optarg;
        }
        if (opts->number) {
            int ret = qio_parse_number(optarg, opts->number);

            if (ret < 0) {
                return ret;
            }
        }
        if (opts->pattern) {
            int pattern = qio_parse_pattern(optarg);

            if (pattern < 0) {
                return -EINVAL;
            }
            *opts->pattern = pattern;
        }
        if (opts->flags) {
            *opts->flags |= opts->flag;
        }
        return 1;
    }
    return 0;
}

int qio_parse_req_args(int argc, char **argv, const char *optstring,
                       const QioCmdOpt *extra, QioReqOpts *o,
                       QioOperands operands)
{
    /* getopt() returns only those of these that @optstring names */
    const QioCmdOpt shared[] = {
        { 'C', &o->Cflag },
        { 'f', .flags = &o->flags, .flag = BDRV_REQ_FUA },
        { 'n', .flags = &o->flags, .flag = BDRV_REQ_NO_FALLBACK },
        /* -p is accepted for compatibility: it changed nothing for years */
        { 'p' },
        { 'P', &o->Pflag, .pattern = &o->pattern },
        { 'q', &o->qflag },
        { 'u', .flags = &o->flags, .flag = BDRV_REQ_MAY_UNMAP },
        { 'v', &o->vflag },
        { 0 },
    };
    int c, ret;

    while ((c = getopt(argc, argv, optstring)) != -1) {
        ret = qio_cmd_opt(c, extra);
        if (ret == 0) {
            ret = qio_cmd_opt(c, shared);
        }
        if (ret == 0) {
            return qio_usage_error(argv[0]);
        }
        if (ret < 0) {
            return ret;
        }
    }
    if (operands == QIO_OPERANDS_OFF_LEN ? optind != argc - 2
                                         : optind > argc - 2) {
        return qio_usage_error(argv[0]);
    }
    return optind;
}

void qio_write_report(const QioReqOpts *o, const char *op, int64_t offset,
                      int64_t bytes, int64_t elapsed_ns)
{
    if (!o->qflag) {
        qio_print_report(op, elapsed_ns, offset, bytes, bytes, 1, o->Cflag);
    }
}

int qio_read_report(const QioReqOpts *o, const uint8_t *buf, int64_t offset,
                    int64_t bytes, int64_t pattern_offset,
                    int64_t pattern_count, int64_t elapsed_ns)
{
    int ret = 0;

    if (o->Pflag &&
        !qio_buf_is_pattern(buf + pattern_offset, pattern_count,
                            o->pattern)) {
        printf("Pattern verification failed at offset %" PRId64 ", %"
               PRId64 " bytes\n", offset + pattern_offset, pattern_count);
        ret = -EINVAL;
    }
    if (o->qflag) {
        return ret;
    }
    if (o->vflag) {
        qio_dump_buffer(buf, offset, bytes);
    }
    qio_print_report("read", elapsed_ns, offset, bytes, bytes, 1, o->Cflag);
    return ret;
}
