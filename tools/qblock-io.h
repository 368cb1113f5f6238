/*
 * qblock-io: private interface between the main program (qblock-io.c:
 * options, opening, the command loop) and the command table
 * (qblock-io-cmds.c; the commands themselves: io-cmds.h).
 *
 * The tool accepts qemu-io's command lines and prints what qemu-io prints,
 * so that scripts written for qemu-io run unchanged.  Command output goes
 * to stdout through stdio (fully buffered when it is not a terminal, as
 * qemu-io's is), command-syntax complaints go to stderr unprefixed, and
 * errors from the block layer go through error_report() with the program
 * name in front.
 */
#ifndef QBLOCK_IO_H
#define QBLOCK_IO_H

#include "qblock/block-backend.h"

/* The command may run without an open image. */
#define QIO_CMD_NOFILE_OK 0x1

/*
 * Runs a command.  @argv[0] is the command's name; the table's argmin and
 * argmax have been checked and the permissions in @perm obtained.  Returns
 * 0 or a negative errno; any failure makes the tool exit with status 1.
 */
typedef int QioCmdFunc(BlockBackend *blk, int argc, char **argv);

typedef struct QioCmd {
    const char *name;
    /*
     * The short name qemu-io also accepts ("w" for write), or NULL.  A
     * command found by its alias reports under the name typed, as
     * qemu-io does ("bad argument count 0 to w").
     */
    const char *alias;
    QioCmdFunc *func;
    /* number of arguments after the name; argmax -1 means no limit */
    int argmin;
    int argmax;
    int flags;              /* QIO_CMD_* */
    uint64_t perm;          /* BLK_PERM_* the command needs on the image */
    /* synopsis of the arguments, or NULL when there are none */
    const char *args;
    const char *oneline;
    /* extended help printed by "help NAME" after the synopsis, or NULL */
    const char *help;
} QioCmd;

/* The open image, or NULL. */
extern BlockBackend *qio_blk;
/* Set by the quit command: no further command is read or run. */
extern bool qio_quit_requested;
/* --image-opts: the open command's path is an option string too. */
extern bool qio_image_opts;
/* -m: I/O buffers are deliberately misaligned (tests O_DIRECT bounces). */
extern bool qio_misalign;

/* How to open an image: what qemu-io's options and its open command say. */
typedef struct QioOpenOpts {
    int flags;                  /* BDRV_O_*, less BDRV_O_RDWR */
    bool read_only;             /* -r: without it, BDRV_O_RDWR */
    bool writethrough;          /* the cache mode's write-through half */
    bool force_share;           /* -U */
} QioOpenOpts;

/* What an open without options gets: discard=unmap, cache=writethrough. */
#define QIO_OPEN_OPTS_DEFAULT { .flags = BDRV_O_UNMAP, .writethrough = true }

/* qblock-io.c */
/*
 * Takes option @c with argument @arg into @o if it is one of those that
 * qemu-io's command line and its open command share (-C -d -i -k -n -r
 * -s -t -U).  Returns 1 if it was, 0 if it is not one of them, -EINVAL
 * after reporting a bad cache, discard or aio mode.
 */
int qio_open_opt(int c, const char *arg, QioOpenOpts *o);

/*
 * The "key=value,..." options of an image as --image-opts and the open
 * command's -o take them (QemuOpts syntax, keys not checked as a tree);
 * NULL after reporting why they do not parse.
 */
QDict *qio_parse_options(const char *str);

/*
 * Opens @name (NULL: everything is in @opts) as the current image; takes
 * over @opts.  Prints the reason and returns -EINVAL if an image is open
 * already or the open fails.
 */
int qio_open(const char *name, const QioOpenOpts *o, QDict *opts);
/* Closes the current image (completing its requests first). */
void qio_close(void);

/* qblock-io-cmds.c */
const QioCmd *qio_find_command(const char *name);
/* Prints "name args -- oneline" (the synopsis qemu-io prints on misuse). */
void qio_print_synopsis(const QioCmd *ct);

#endif
