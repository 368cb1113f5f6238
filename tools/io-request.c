/*
 * What qblock-io's request commands (read, readv, write, writev, discard
 * and their aio_ forms) share: the options that mean the same in each of
 * them, and how a completed read is checked and reported.
 */
#include "io-cmds.h"

#include <getopt.h>

int qio_req_opt(int c, QioReqOpts *o, const char *cmd)
{
    switch (c) {
    case 'C':
        o->Cflag = true;
        return 0;
    case 'f':
        o->flags |= BDRV_REQ_FUA;
        return 0;
    case 'n':
        o->flags |= BDRV_REQ_NO_FALLBACK;
        return 0;
    case 'p':
        /* accepted for compatibility: it changed nothing for years */
        return 0;
    case 'P':
        o->Pflag = true;
        o->pattern = qio_parse_pattern(optarg);
        return o->pattern < 0 ? -EINVAL : 0;
    case 'q':
        o->qflag = true;
        return 0;
    case 'u':
        o->flags |= BDRV_REQ_MAY_UNMAP;
        return 0;
    case 'v':
        o->vflag = true;
        return 0;
    default:
        return qio_usage_error(cmd);
    }
}

/* Stores option @c of @extra, if it is one; 1 if it was, 0 if not. */
static int qio_cmd_opt(int c, const QioCmdOpt *extra)
{
    for (; extra && extra->letter; extra++) {
        if (extra->letter != c) {
            continue;
        }
        if (extra->given) {
            *extra->given = true;
        }
        if (extra->arg) {
            *extra->arg = optarg;
        }
        if (extra->number) {
            int ret = qio_parse_number(optarg, extra->number);

            if (ret < 0) {
                return ret;
            }
        }
        return 1;
    }
    return 0;
}

int qio_parse_req_args(int argc, char **argv, const char *optstring,
                       const QioCmdOpt *extra, QioReqOpts *o,
                       QioOperands operands)
{
    int c, ret;

    while ((c = getopt(argc, argv, optstring)) != -1) {
        ret = qio_cmd_opt(c, extra);
        if (ret == 0) {
            ret = qio_req_opt(c, o, argv[0]);
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
