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
