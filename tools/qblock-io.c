/*
 * qblock-io: exercises a block device, one command at a time, with
 * qemu-io's command line and output.
 *
 *   qblock-io [OPTIONS]... [-c STRING]... [file]
 *
 * Commands come from the -c options, in order, or else from standard
 * input: a prompt "qemu-io> " (the text scripts written for qemu-io wait
 * for) is printed and flushed before each line is read, whether or not
 * stdin is a terminal.  The exit status is 1 if the image could not be
 * opened or any command failed, 0 otherwise.
 *
 * Asynchronous requests (aio_read, aio_write) complete, and print their
 * reports, only while something runs the event loop: a synchronous
 * request, aio_flush, sleep, close, or the final close at exit.  This is
 * what qemu-io does, and scripts depend on where those reports appear.
 */
#include "util/osdep.h"

#include <getopt.h>

#include "qblock/block-backend.h"
#include "util/aio.h"
#include "util/cutils.h"
#include "util/error.h"
#include "util/qdict.h"
#include "util/user-object.h"
#include "qblock-io.h"
#include "tool-opts.h"

/* The prompt scripts written for qemu-io match; keep the text as is. */
#define QIO_PROMPT "qemu-io> "

BlockBackend *qio_blk;
bool qio_quit_requested;
bool qio_image_opts;
bool qio_misalign;

/* Whether an open with @flags and @opts (may be NULL) is read-only. */
static bool qio_opens_read_only(int flags, QDict *opts)
{
    const char *ro = opts ? qdict_get_try_str(opts, BDRV_OPT_READ_ONLY)
                          : NULL;

    return !(flags & BDRV_O_RDWR) ||
           (ro && (!strcmp(ro, "on") || !strcmp(ro, "true")));
}

int qio_open_opt(int c, const char *arg, QioOpenOpts *o)
{
    switch (c) {
    case 'C':
        o->flags |= BDRV_O_COPY_ON_READ;
        return 1;
    case 'd':
        o->flags &= ~BDRV_O_UNMAP;
        if (bdrv_parse_discard_flags(arg, &o->flags) < 0) {
            error_report("Invalid discard option: %s", arg);
            return -EINVAL;
        }
        return 1;
    case 'i':
        o->flags &= ~(BDRV_O_NATIVE_AIO | BDRV_O_IO_URING);
        if (bdrv_parse_aio(arg, &o->flags) < 0) {
            error_report("Invalid aio option: %s", arg);
            return -EINVAL;
        }
        return 1;
    case 'k':
        o->flags |= BDRV_O_NATIVE_AIO;
        return 1;
    case 'n':
        o->flags |= BDRV_O_NOCACHE;
        o->writethrough = false;
        return 1;
    case 'r':
        o->read_only = true;
        return 1;
    case 's':
        o->flags |= BDRV_O_SNAPSHOT;
        return 1;
    case 't':
        o->flags &= ~BDRV_O_CACHE_MASK;
        if (bdrv_parse_cache_mode(arg, &o->flags, &o->writethrough) < 0) {
            error_report("Invalid cache option: %s", arg);
            return -EINVAL;
        }
        return 1;
    case 'U':
        o->force_share = true;
        return 1;
    default:
        return 0;
    }
}

QDict *qio_parse_options(const char *str)
{
    Error *local_err = NULL;
    QDict *opts = keyval_parse_flat(str, NULL, &local_err);

    if (!opts) {
        error_report_err(local_err);
    }
    return opts;
}

int qio_open(const char *name, const QioOpenOpts *o, QDict *opts)
{
    int flags = o->flags | (o->read_only ? 0 : BDRV_O_RDWR);
    Error *local_err = NULL;

    if (qio_blk) {
        error_report("file open already, try 'help close'");
        qdict_unref(opts);
        return -EINVAL;
    }

    if (o->force_share) {
        const char *fs;

        if (!opts) {
            opts = qdict_new();
        }
        fs = qdict_get_try_str(opts, BDRV_OPT_FORCE_SHARE);
        if (fs && strcmp(fs, "on") && strcmp(fs, "true")) {
            error_report("-U conflicts with image options");
            qdict_unref(opts);
            return -EINVAL;
        }
        qdict_put_str(opts, BDRV_OPT_FORCE_SHARE, "on");
    }
    /* Without -U qemu-io still shares everything with other users: it is
     * a debugging tool meant to run beside a VM (hence no BDRV_O_NO_SHARE). */

    /*
     * -C copies what reads find in the backing chain into the image: it
     * needs to write, so a read-only open is refused (QEMU's message)
     * rather than reading without copying.
     */
    if ((flags & BDRV_O_COPY_ON_READ) && qio_opens_read_only(flags, opts)) {
        error_setg(&local_err, "Can't use copy-on-read on read-only device");
        qdict_unref(opts);
    } else {
        qio_blk = blk_new_open(name, NULL, opts, flags, &local_err);
    }
    if (!qio_blk) {
        if (name) {
            error_prepend(&local_err, "can't open device %s: ", name);
        } else {
            error_prepend(&local_err, "can't open: ");
        }
        error_report_err(local_err);
        return -EINVAL;
    }
    blk_set_enable_write_cache(qio_blk, !o->writethrough);
    return 0;
}

void qio_close(void)
{
    BlockBackend *blk = qio_blk;

    /* Requests completing during the drain still see the image open. */
    qio_blk = NULL;
    blk_unref(blk);
}

/*
 * Splits a command line at spaces, dropping empty words (qemu-io does not
 * split at tabs and knows no quoting).  Returns a NULL-terminated vector.
 */
static char **qio_split_line(const char *line, int *argc)
{
    char **words = g_strsplit(line, " ", -1);
    int n = 0;

    for (int i = 0; words[i]; i++) {
        if (words[i][0]) {
            words[n++] = words[i];
        } else {
            g_free(words[i]);
        }
    }
    words[n] = NULL;
    *argc = n;
    return words;
}

/* @name is the command as typed: its alias, if that is what was used. */
static void qio_report_argc(const char *name, const QioCmd *ct, int argc)
{
    fprintf(stderr, "bad argument count %d to %s, expected ", argc, name);
    if (ct->argmax == -1) {
        fprintf(stderr, "at least %d arguments\n", ct->argmin);
    } else if (ct->argmin == ct->argmax) {
        fprintf(stderr, "%d arguments\n", ct->argmin);
    } else {
        fprintf(stderr, "between %d and %d arguments\n",
                ct->argmin, ct->argmax);
    }
}

/* Asks the image for the permissions the command needs (write, resize). */
static int qio_get_perm(const QioCmd *ct)
{
    uint64_t perm, shared;
    Error *local_err = NULL;
    int ret;

    if (!ct->perm || !qio_blk) {
        return 0;
    }
    blk_get_perm(qio_blk, &perm, &shared);
    if (!(ct->perm & ~perm)) {
        return 0;
    }
    ret = blk_set_perm(qio_blk, perm | ct->perm, shared, &local_err);
    if (ret < 0) {
        error_report_err(local_err);
    }
    return ret;
}

/* Runs one command line; returns 0 or a negative errno. */
static int qio_command(const char *line)
{
    const QioCmd *ct;
    char **argv;
    int argc;
    int ret;

    argv = qio_split_line(line, &argc);
    if (argc == 0) {
        g_strfreev(argv);
        return 0;
    }

    ct = qio_find_command(argv[0]);
    if (!ct) {
        fprintf(stderr, "command \"%s\" not found\n", argv[0]);
        ret = -EINVAL;
    } else if (!qio_blk && !(ct->flags & QIO_CMD_NOFILE_OK)) {
        fprintf(stderr, "no file open, try 'help open'\n");
        ret = -EINVAL;
    } else if (argc - 1 < ct->argmin ||
               (ct->argmax != -1 && argc - 1 > ct->argmax)) {
        qio_report_argc(argv[0], ct, argc - 1);
        ret = -EINVAL;
    } else {
        ret = qio_get_perm(ct);
        if (ret == 0) {
            /* each command parses its options from scratch */
            optind = 0;
            ret = ct->func(qio_blk, argc, argv);
        }
    }
    g_strfreev(argv);
    return ret;
}

static void qio_stdin_ready(void *opaque)
{
    bool *ready = opaque;

    *ready = true;
}

/*
 * Reads one line from the terminal into @line (without its newline) while
 * running the event loop, so that asynchronous requests report as soon as
 * they complete, as they do in qemu-io's interactive mode.  @pending keeps
 * what was read past the line.  Returns false at end of input.
 */
static bool qio_read_line_interactive(GString *pending, GString *line)
{
    AioContext *ctx = qemu_get_aio_context();
    char *nl;

    while (!(nl = memchr(pending->str, '\n', pending->len))) {
        char buf[4096];
        bool ready = false;
        ssize_t n;

        aio_set_fd_handler(ctx, STDIN_FILENO, qio_stdin_ready, NULL, &ready);
        AIO_WAIT_WHILE(ctx, !ready);
        aio_set_fd_handler(ctx, STDIN_FILENO, NULL, NULL, NULL);

        n = read(STDIN_FILENO, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (pending->len == 0) {
                return false;
            }
            /* a last line without its newline */
            g_string_append_c(pending, '\n');
            continue;
        }
        g_string_append_len(pending, buf, n);
    }
    g_string_assign(line, "");
    g_string_append_len(line, pending->str, nl - pending->str);
    g_string_erase(pending, 0, nl - pending->str + 1);
    return true;
}

/*
 * Reads one line from a file or pipe.  The event loop does not run while
 * waiting, as in qemu-io: scripts see asynchronous reports where the next
 * command that runs the loop prints them.
 */
static bool qio_read_line_batch(GString *line)
{
    char *buf = NULL;
    size_t size = 0;
    ssize_t len = getline(&buf, &size, stdin);

    if (len < 0) {
        free(buf);
        return false;
    }
    if (len > 0 && buf[len - 1] == '\n') {
        buf[--len] = '\0';
    }
    g_string_assign(line, buf);
    free(buf);
    return true;
}

/* Reads commands from stdin until EOF or quit; returns true if any failed. */
static bool qio_command_loop_stdin(void)
{
    bool interactive = isatty(STDIN_FILENO);
    GString *pending = g_string_new(NULL);
    GString *line = g_string_new(NULL);
    bool failed = false;

    while (!qio_quit_requested) {
        bool got;

        fputs(QIO_PROMPT, stdout);
        fflush(stdout);
        got = interactive ? qio_read_line_interactive(pending, line)
                          : qio_read_line_batch(line);
        if (!got) {
            if (interactive) {
                /* leave the terminal's cursor on a fresh line */
                putchar('\n');
            }
            break;
        }
        if (qio_command(line->str) < 0) {
            failed = true;
        }
    }
    g_string_free(pending, true);
    g_string_free(line, true);
    return failed;
}

static void qio_usage(const char *name)
{
    printf(
"Usage: %s [OPTIONS]... [-c STRING]... [file]\n"
"Block device exerciser (qblock), compatible with qemu-io 7.2\n"
"\n"
"  --object OBJECTDEF   define an object such as 'secret' for\n"
"                       passwords and/or encryption keys\n"
"  --image-opts         treat file as option string\n"
"  -c, --cmd STRING     execute command with its arguments\n"
"                       from the given string\n"
"  -f, --format FMT     specifies the block driver to use\n"
"  -r, --read-only      export read-only\n"
"  -s, --snapshot       use snapshot file\n"
"  -n, --nocache        disable host cache, short for -t none\n"
"  -C, --copy-on-read   enable copy-on-read\n"
"  -m, --misalign       misalign allocations for O_DIRECT\n"
"  -k, --native-aio     use kernel AIO implementation\n"
"                       (Linux only, prefer use of -i)\n"
"  -i, --aio=MODE       use AIO mode (threads, native or io_uring)\n"
"  -t, --cache=MODE     use the given cache mode for the image\n"
"                       (writethrough is the default)\n"
"  -d, --discard=MODE   use the given discard mode for the image\n"
"                       (unmap is the default)\n"
"  -T, --trace PATTERN  accepted for compatibility; tracing is not\n"
"                       supported and the option is ignored\n"
"  -U, --force-share    force shared permissions\n"
"  -h, --help           display this help and exit\n"
"  -V, --version        output version information and exit\n"
"\n"
"See '%s -c help' for information on available commands.\n",
           name, name);
}

enum {
    QIO_OPT_IMAGE_OPTS = 256,
    QIO_OPT_OBJECT,
};

int main(int argc, char **argv)
{
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { "cmd", required_argument, NULL, 'c' },
        { "format", required_argument, NULL, 'f' },
        { "read-only", no_argument, NULL, 'r' },
        { "snapshot", no_argument, NULL, 's' },
        { "nocache", no_argument, NULL, 'n' },
        { "copy-on-read", no_argument, NULL, 'C' },
        { "misalign", no_argument, NULL, 'm' },
        { "native-aio", no_argument, NULL, 'k' },
        { "aio", required_argument, NULL, 'i' },
        { "discard", required_argument, NULL, 'd' },
        { "cache", required_argument, NULL, 't' },
        { "trace", required_argument, NULL, 'T' },
        { "force-share", no_argument, NULL, 'U' },
        { "image-opts", no_argument, NULL, QIO_OPT_IMAGE_OPTS },
        { "object", required_argument, NULL, QIO_OPT_OBJECT },
        { NULL, 0, NULL, 0 }
    };
    GPtrArray *cmds = g_ptr_array_new();
    const char *format = NULL;
    QioOpenOpts open_opts = QIO_OPEN_OPTS_DEFAULT;
    bool failed = false;
    int c, ret;

    qemu_init_progname(argv[0]);
    bdrv_init();
    /* nothing here uses one, and qemu-io refuses it (no such class) */
    user_object_withhold_type("iothread");

    while ((c = getopt_long(argc, argv, "hVc:d:f:rsnCmki:t:T:U",
                            long_options, NULL)) != -1) {
        ret = qio_open_opt(c, optarg, &open_opts);
        if (ret < 0) {
            return 1;
        }
        if (ret > 0) {
            continue;
        }
        switch (c) {
        case 'h':
            qio_usage(qemu_get_progname());
            return 0;
        case 'V':
            qemu_print_version("qemu-io");
            return 0;
        case 'c':
            g_ptr_array_add(cmds, optarg);
            break;
        case 'f':
            format = optarg;
            break;
        case 'm':
            qio_misalign = true;
            break;
        case 'T':
            tool_trace_option(optarg);
            break;
        case QIO_OPT_IMAGE_OPTS:
            qio_image_opts = true;
            break;
        case QIO_OPT_OBJECT:
            if (!tool_object_option(optarg)) {
                return 1;
            }
            break;
        default:
            qio_usage(qemu_get_progname());
            return 1;
        }
    }

    if (argc - optind > 1) {
        qio_usage(qemu_get_progname());
        return 1;
    }
    if (qio_image_opts && format) {
        error_report("--image-opts and -f are mutually exclusive");
        return 1;
    }
    if (optind < argc) {
        if (qio_image_opts) {
            QDict *opts = qio_parse_options(argv[optind]);

            if (!opts) {
                return 1;
            }
            ret = qio_open(NULL, &open_opts, opts);
        } else {
            QDict *opts = NULL;

            if (format) {
                opts = qdict_new();
                qdict_put_str(opts, "driver", format);
            }
            ret = qio_open(argv[optind], &open_opts, opts);
        }
        if (ret < 0) {
            return 1;
        }
    }

    if (cmds->len > 0) {
        for (guint i = 0; i < cmds->len && !qio_quit_requested; i++) {
            if (qio_command(g_ptr_array_index(cmds, i)) < 0) {
                failed = true;
            }
        }
    } else {
        failed = qio_command_loop_stdin();
    }
    g_ptr_array_free(cmds, true);

    qio_close();
    return failed ? 1 : 0;
}
