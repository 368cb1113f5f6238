/*
 * qblock-io's commands: the private interface between the command files.
 * qemu-io's command set with its options, output formats and error
 * messages, plus "stats" (I/O counters of the backend and of every node,
 * for tests that count what reaches the file).
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
#ifndef QBLOCK_IO_CMDS_H
#define QBLOCK_IO_CMDS_H

#include "util/osdep.h"

#include "qblock/block-backend.h"
#include "qblock/block-node.h"
#include "util/aio.h"
#include "util/cutils.h"
#include "util/error.h"
#include "util/iov.h"
#include "util/qdict.h"
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

/* ---- io-args.c: arguments ---- */

/*
 * Parses the offset or length argument @arg, a size with an optional
 * suffix, into *@value.  Returns 0, or -errno after printing the
 * complaint: -EINVAL for anything with a minus sign (sizes are never
 * negative, as qemu-io has it), -ERANGE beyond INT64_MAX.
 */
int qio_parse_number(const char *arg, int64_t *value);

/* How long a request command's length may be. */
typedef enum QioLengthLimit {
    /* as long as an offset can be (write -z -n needs no buffer) */
    QIO_LENGTH_ANY,
    /* QIO_MAX_REQUEST_BYTES: the data passes through one buffer */
    QIO_LENGTH_REQUEST,
    /* the same for a zero write, which may fall back to a buffer: the
     * complaint says that -n lifts the limit */
    QIO_LENGTH_REQUEST_UNLESS_N,
} QioLengthLimit;

/*
 * Parses the "off len" arguments of a request command, @argv[0] and
 * @argv[1], into *@offset and *@bytes and checks the length against
 * @limit ("length cannot exceed N, given LEN").  Returns 0, or -errno
 * after printing the complaint, as qemu-io words it.
 */
int qio_parse_offset_len(char **argv, QioLengthLimit limit, int64_t *offset,
                         int64_t *bytes);

/* A pattern byte: 0..255 in C notation (decimal, 0x hex, 0 octal). */
int qio_parse_pattern(const char *arg);

/* An offset and a length both sector-aligned (vmstate, compression). */
bool qio_check_sector_aligned(int64_t offset, int64_t count);

/* Prints the synopsis of command @name; returns -EINVAL. */
int qio_usage_error(const char *name);

/* ---- io-output.c: statistics and dumps ---- */

/*
 * A size for people: "4 KiB", "1.500 MiB", "48 bytes".  Three decimals
 * (six for bytes), dropped when they are all zero.
 */
void qio_cvtstr(double value, char *str, size_t size);

/*
 * Elapsed time: "00.42 sec" below a second, else "H:MM:SS.ss"; the
 * machine-readable form (-C) is always "H:MM:SS.ss".
 */
void qio_timestr(int64_t ns, char *str, size_t size, bool terse);

/*
 * The two statistics lines of a completed request ("wrote 4096/4096 bytes
 * at offset 0", then sizes, time and rates), or one comma-separated line
 * (bytes,ops,time,bytes/sec,ops/sec) with -C.
 */
void qio_print_report(const char *op, int64_t elapsed_ns,
                      int64_t offset, int64_t count, int64_t total,
                      int cnt, bool terse);

/* Hex and alphanumeric dump, 16 bytes a line, labelled with image offsets. */
void qio_dump_buffer(const uint8_t *buf, int64_t offset, int64_t len);

/* ---- io-buffers.c: data buffers ---- */

/*
 * A buffer of @len bytes filled with @pattern, aligned for @blk's I/O, or
 * QIO_MISALIGN_OFFSET bytes past that with -m; freed with qio_free().
 */
uint8_t *qio_alloc(BlockBackend *blk, size_t len, int pattern);
void qio_free(uint8_t *buf);

/*
 * A write buffer filled with the content of @path, repeated as often as
 * needed.  Complains on stderr (the file's name first) and returns NULL if
 * the file cannot be read or is empty.
 */
uint8_t *qio_alloc_from_file(BlockBackend *blk, size_t len,
                             const char *path);

/*
 * Builds one buffer split into the vector elements whose sizes @argv
 * gives, filled with @pattern.  Prints why and returns NULL on a bad size.
 */
uint8_t *qio_create_iovec(BlockBackend *blk, QEMUIOVector *qiov,
                          char **argv, int nr_iov, int pattern);

/*
 * Parses the "off len [len..]" arguments of a vector command, @argc of
 * them at @argv: the offset into *@offset, then the buffer and @qiov as
 * qio_create_iovec() makes them.  NULL after printing why.
 */
uint8_t *qio_parse_offset_vector(BlockBackend *blk, char **argv, int argc,
                                 int pattern, int64_t *offset,
                                 QEMUIOVector *qiov);

/* True if @len bytes at @buf all equal @pattern. */
bool qio_buf_is_pattern(const uint8_t *buf, int64_t len, int pattern);

/* ---- io-request.c: what the request commands share ---- */

/* The options that mean the same in every request command that has them. */
typedef struct QioReqOpts {
    bool Cflag;                 /* -C: statistics as one terse line */
    bool qflag;                 /* -q: no statistics */
    bool vflag;                 /* -v: hex dump of the data read */
    bool Pflag;                 /* -P given */
    int pattern;                /* -P: the byte a read checks, or writes */
    BdrvRequestFlags flags;     /* -f FUA, -n NO_FALLBACK, -u MAY_UNMAP */
} QioReqOpts;

/*
 * One option of a request command and where what getopt() found for it
 * goes: every field that is not NULL gets its share.  The options that
 * all request commands share (QioReqOpts) and those that a command has
 * besides take this one form, so that one routine, qio_cmd_opt(), takes
 * them all.  Tables end with an entry whose letter is 0.
 */
typedef struct QioCmdOpt {
    int letter;
    bool *given;                /* set when the option is given */
    const char **arg;           /* its argument as typed */
    int64_t *number;            /* its argument as a size */
    int *pattern;               /* its argument as a pattern byte */
    BdrvRequestFlags *flags;    /* gets @flag set */
    BdrvRequestFlags flag;
} QioCmdOpt;

/* The operands that follow a request command's options. */
typedef enum QioOperands {
    QIO_OPERANDS_OFF_LEN,       /* exactly "off len" */
    QIO_OPERANDS_OFF_LENS,      /* "off len [len..]" (vector commands) */
} QioOperands;

/*
 * Parses the options of request command @argv[0] with getopt() and
 * @optstring: those in @extra (may be NULL) as their entries say, the
 * others into @o; then checks that the @operands follow.
 * Returns the index in @argv of the first operand, or -errno after
 * printing why (a bad number or pattern, else the synopsis), stopping at
 * the first bad option as qemu-io does.
 */
int qio_parse_req_args(int argc, char **argv, const char *optstring,
                       const QioCmdOpt *extra, QioReqOpts *o,
                       QioOperands operands);

/*
 * Ends a completed write or discard of @bytes at @offset as qemu-io does:
 * unless -q, the statistics, under @op ("wrote", "discard").  The
 * counterpart of qio_read_report() for requests that bring no data back.
 */
void qio_write_report(const QioReqOpts *o, const char *op, int64_t offset,
                      int64_t bytes, int64_t elapsed_ns);

/*
 * Ends a completed read of @bytes at @offset into @buf as qemu-io does:
 * with -P, checks the @pattern_count bytes at @pattern_offset within @buf
 * (a mismatch is printed and makes the result -EINVAL, but the statistics
 * still follow); then, unless -q, the hex dump (-v) and the statistics.
 * Returns 0 or -EINVAL.
 */
int qio_read_report(const QioReqOpts *o, const uint8_t *buf, int64_t offset,
                    int64_t bytes, int64_t pattern_offset,
                    int64_t pattern_count, int64_t elapsed_ns);

/*
 * The commands, one table entry each, defined next to their functions
 * and help texts (extended help as qemu-io prints it: scripts and people
 * diff it); qblock-io-cmds.c lists them.
 */

/* io-rw.c */
extern const QioCmd qio_cmd_read;
extern const QioCmd qio_cmd_readv;
extern const QioCmd qio_cmd_write;
extern const QioCmd qio_cmd_writev;
extern const QioCmd qio_cmd_flush;
extern const QioCmd qio_cmd_discard;

/* io-aio.c */
extern const QioCmd qio_cmd_aio_read;
extern const QioCmd qio_cmd_aio_write;
extern const QioCmd qio_cmd_aio_flush;

/* io-image.c */
extern const QioCmd qio_cmd_truncate;
extern const QioCmd qio_cmd_length;
extern const QioCmd qio_cmd_info;
extern const QioCmd qio_cmd_alloc;
extern const QioCmd qio_cmd_map;
extern const QioCmd qio_cmd_open;
extern const QioCmd qio_cmd_close;
extern const QioCmd qio_cmd_reopen;
extern const QioCmd qio_cmd_stats;

/* io-control.c */
extern const QioCmd qio_cmd_quit;
extern const QioCmd qio_cmd_abort;
extern const QioCmd qio_cmd_sigraise;
extern const QioCmd qio_cmd_sleep;
extern const QioCmd qio_cmd_break;
extern const QioCmd qio_cmd_remove_break;
extern const QioCmd qio_cmd_resume;
extern const QioCmd qio_cmd_wait_break;

/* qblock-io-cmds.c */
extern const QioCmd qio_cmd_help;

#endif
