/*
 * qblock-nbd: exports a disk image over NBD, with qemu-nbd's command line.
 *
 *   qblock-nbd [OPTIONS] FILE
 *   qblock-nbd -L [OPTIONS]
 *
 * The tool opens the image as a BlockBackend, adds one export of it to
 * an NBD server (block/export/) listening on a TCP port or a unix socket,
 * and runs the event loop until it is told to stop (SIGTERM, SIGINT,
 * SIGHUP) or, without -t, until the last client that reached the
 * transmission phase has gone.  Then every client is disconnected, the
 * image is flushed and closed.
 *
 * With QBLOCK_NBD_STATS=FILE in the environment, the image's I/O
 * statistics are written to FILE before it is closed, in the format of
 * qblock-io's "stats" command, so tests can see what the clients' flushes
 * and FUA writes did to the image.
 */
#include "util/osdep.h"

#include <getopt.h>
#include <signal.h>
#include <sys/wait.h>

#include "crypto/tls-creds.h"
#include "io-stats.h"
#include "snapshot-arg.h"
#include "tool-opts.h"
#include "block/nbd.h"
#include "block/nbd-proto.h"
#include "qblock/block-backend.h"
#include "util/aio.h"
#include "util/cutils.h"
#include "util/daemonize.h"
#include "util/error.h"
#include "util/main-loop.h"
#include "util/qdict.h"
#include "util/socket-activation.h"
#include "qblock-nbd.h"

#define QNBD_DEFAULT_PORT "10809"
#define QNBD_DEFAULT_BIND "0.0.0.0"

typedef struct QnbdOptions {
    /* connection */
    const char *bind;
    const char *port;
    const char *socket_path;
    bool socket_activation;     /* listen on the socket handed over */
    /* socket_activation_check()'s result, and its error if negative */
    int socket_activation_fds;
    Error *socket_activation_err;
    long shared;                /* -e: clients at once, 0 for any number */
    bool persistent;
    bool verbose;
    const char *export_name;
    const char *description;
    /* exposing part of the image */
    uint64_t offset;
    bool allocation_depth;
    GPtrArray *bitmaps;         /* -B, each a name (may repeat) */
    /* general */
    bool list;
    bool fork;
    const char *pid_file;
    const char *tls_creds;      /* id of a tls-creds-* object */
    const char *tls_authz;      /* id of an authz-simple or -list object */
    const char *tls_hostname;   /* --list: the server's certificate name */
    const char *unsupported;    /* an option this tool refuses */
    /* kernel client */
    const char *device;
    bool disconnect;
    /* block device */
    const char *format;
    bool readonly;
    bool snapshot;
    ToolSnapshotArg load_snapshot;  /* -l */
    int flags;                  /* BDRV_O_* from cache, aio, discard */
    bool writethrough;
    const char *detect_zeroes;
    bool image_opts;
    /* options whose presence makes --list refuse (per-device settings) */
    bool per_device;
    const char *filename;
} QnbdOptions;

enum {
    QNBD_OPT_CACHE = 256,
    QNBD_OPT_AIO,
    QNBD_OPT_DISCARD,
    QNBD_OPT_DETECT_ZEROES,
    QNBD_OPT_OBJECT,
    QNBD_OPT_TLSCREDS,
    QNBD_OPT_TLSAUTHZ,
    QNBD_OPT_IMAGE_OPTS,
    QNBD_OPT_FORK,
    QNBD_OPT_PID_FILE,
    QNBD_OPT_SELINUX_LABEL,
    QNBD_OPT_TLSHOSTNAME,
};

/* What the event loop is doing: serving, or told to stop. */
static volatile sig_atomic_t qnbd_stop;
static AioContext *qnbd_ctx;
static NBDServer *qnbd_server;
static QnbdOptions qnbd_opts;

static void qnbd_usage(const char *name)
{
    printf(
"Usage: %s [OPTIONS] FILE\n"
"  or:  %s -L [OPTIONS]\n"
"Disk Network Block Device server (qblock), compatible with qemu-nbd 7.2\n"
"\n"
"  -h, --help                display this help and exit\n"
"  -V, --version             output version information and exit\n"
"\n"
"Connection properties:\n"
"  -p, --port=PORT           port to listen on (default `%s')\n"
"  -b, --bind=IFACE          interface to bind to (default `%s')\n"
"  -k, --socket=PATH         path to the unix socket\n"
"  -e, --shared=NUM          device can be shared by NUM clients\n"
"                            (default '1', 0 for any number)\n"
"  -t, --persistent          don't exit on the last connection\n"
"  -v, --verbose             keep standard error open with --fork\n"
"  -x, --export-name=NAME    expose export by name (default is empty string)\n"
"  -D, --description=TEXT    export a human-readable description\n"
"\n"
"Exposing part of the image:\n"
"  -o, --offset=OFFSET       offset into the image\n"
"  -A, --allocation-depth    expose the allocation depth\n"
"  -B, --bitmap=NAME         expose a persistent dirty bitmap\n"
"\n"
"General purpose options:\n"
"  -L, --list                list exports available from another NBD server\n"
"  --object type,id=ID,...   define an object such as 'secret' for providing\n"
"                            passwords and/or encryption keys\n"
"  --tls-creds=ID            use id of an earlier --object to provide TLS\n"
"  --tls-hostname=HOSTNAME   override hostname used to check x509 certificate\n"
"  --tls-authz=ID            use id of an earlier --object to provide\n"
"                            authorization\n"
"  -T, --trace PATTERN       accepted for compatibility; tracing is not\n"
"                            supported and the option is ignored\n"
"  --fork                    fork off the server process and exit the parent\n"
"                            once the server is running\n"
"  --pid-file=PATH           store the server's process ID in the given file\n"
"  --selinux-label=LABEL     not supported\n"
"\n"
"Kernel NBD client support:\n"
"  -c, --connect=DEV         not supported (no kernel NBD devices)\n"
"  -d, --disconnect          not supported (no kernel NBD devices)\n"
"\n"
"Block device options:\n"
"  -f, --format=FORMAT       set image format (raw, qcow2, ...)\n"
"  -r, --read-only           export read-only\n"
"  -s, --snapshot            use FILE as an external snapshot, create a\n"
"                            temporary file with backing_file=FILE, redirect\n"
"                            the write to the temporary one\n"
"  -l, --load-snapshot=SNAPSHOT_PARAM\n"
"                            export the internal snapshot SNAPSHOT_PARAM of\n"
"                            FILE, read-only; SNAPSHOT_PARAM is an ID or a\n"
"                            name, or 'snapshot.id=[ID],snapshot.name=[NAME]'\n"
"  -n, --nocache             disable host cache\n"
"      --cache=MODE          set cache mode used to access the disk image,\n"
"                            the valid options are: 'none', 'writeback'\n"
"                            (default), 'writethrough', 'directsync' and\n"
"                            'unsafe'\n"
"      --aio=MODE            set AIO mode (native, io_uring or threads)\n"
"      --discard=MODE        set discard mode (ignore, unmap)\n"
"      --detect-zeroes=MODE  set detect-zeroes mode (off, on, unmap)\n"
"      --image-opts          treat FILE as a full set of image options\n"
"\n"
"Environment: QBLOCK_NBD_STATS=FILE writes the image's I/O statistics to\n"
"FILE at exit.  See the qblock-nbd manual (docs/qblock-nbd.md).\n",
           name, name, QNBD_DEFAULT_PORT, QNBD_DEFAULT_BIND);
}

/* qemu-nbd's answer to a malformed command line. */
static QEMU_NORETURN void qnbd_try_help(void)
{
    error_report("Try `%s --help' for more information.",
                 qemu_get_progname());
    exit(EXIT_FAILURE);
}

/* ---- the command line ---- */

/*
 * Whether option @c configures the device or export (a per-device
 * setting), which --list refuses; -o counts only with an offset other
 * than 0, so the parser sets that itself.
 */
static bool qnbd_is_per_device_option(int c)
{
    switch (c) {
    case 'A':
    case 'B':
    case 'c':
    case 'd':
    case 'D':
    case 'f':
    case 'l':
    case 'n':
    case 'x':
    case QNBD_OPT_CACHE:
    case QNBD_OPT_AIO:
    case QNBD_OPT_DISCARD:
        return true;
    default:
        return false;
    }
}

/*
 * An option that only stores its argument, or only records that it was
 * given: a row of a table each, so that the switch in qnbd_parse_args()
 * keeps only the options that check or convert what they are given.
 */
typedef struct QnbdPlainOpt {
    int c;                      /* what getopt_long() returns for it */
    /* exactly one of these is set */
    const char **arg;           /* gets the argument */
    bool *given;                /* set to true */
} QnbdPlainOpt;

/* Takes option @c if one of the @n rows of @plain has it; true if so. */
static bool qnbd_take_plain_opt(int c, const QnbdPlainOpt *plain, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (plain[i].c == c) {
            if (plain[i].arg) {
                *plain[i].arg = optarg;
            } else {
                *plain[i].given = true;
            }
            return true;
        }
    }
    return false;
}

/*
 * NBD carries export names and descriptions as strings of at most
 * NBD_MAX_STRING_SIZE bytes; @what names which one @arg is, for the
 * complaint.  False after the complaint.
 */
static bool qnbd_check_nbd_string(const char *what, const char *arg)
{
    if (strlen(arg) > NBD_MAX_STRING_SIZE) {
        error_report("%s '%s' too long", what, arg);
        return false;
    }
    return true;
}

static int qnbd_parse_args(int argc, char **argv, QnbdOptions *o)
{
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { "bind", required_argument, NULL, 'b' },
        { "port", required_argument, NULL, 'p' },
        { "socket", required_argument, NULL, 'k' },
        { "offset", required_argument, NULL, 'o' },
        { "read-only", no_argument, NULL, 'r' },
        { "allocation-depth", no_argument, NULL, 'A' },
        { "bitmap", required_argument, NULL, 'B' },
        { "connect", required_argument, NULL, 'c' },
        { "disconnect", no_argument, NULL, 'd' },
        { "list", no_argument, NULL, 'L' },
        { "snapshot", no_argument, NULL, 's' },
        { "load-snapshot", required_argument, NULL, 'l' },
        { "nocache", no_argument, NULL, 'n' },
        { "cache", required_argument, NULL, QNBD_OPT_CACHE },
        { "aio", required_argument, NULL, QNBD_OPT_AIO },
        { "discard", required_argument, NULL, QNBD_OPT_DISCARD },
        { "detect-zeroes", required_argument, NULL, QNBD_OPT_DETECT_ZEROES },
        { "shared", required_argument, NULL, 'e' },
        { "format", required_argument, NULL, 'f' },
        { "persistent", no_argument, NULL, 't' },
        { "verbose", no_argument, NULL, 'v' },
        { "object", required_argument, NULL, QNBD_OPT_OBJECT },
        { "export-name", required_argument, NULL, 'x' },
        { "description", required_argument, NULL, 'D' },
        { "tls-creds", required_argument, NULL, QNBD_OPT_TLSCREDS },
        { "tls-authz", required_argument, NULL, QNBD_OPT_TLSAUTHZ },
        { "tls-hostname", required_argument, NULL, QNBD_OPT_TLSHOSTNAME },
        { "image-opts", no_argument, NULL, QNBD_OPT_IMAGE_OPTS },
        { "trace", required_argument, NULL, 'T' },
        { "fork", no_argument, NULL, QNBD_OPT_FORK },
        { "pid-file", required_argument, NULL, QNBD_OPT_PID_FILE },
        { "selinux-label", required_argument, NULL, QNBD_OPT_SELINUX_LABEL },
        { NULL, 0, NULL, 0 }
    };
    const QnbdPlainOpt plain[] = {
        { 'b', .arg = &o->bind },
        { 'p', .arg = &o->port },
        { 'k', .arg = &o->socket_path },
        { 'c', .arg = &o->device },
        { 'f', .arg = &o->format },
        { QNBD_OPT_TLSCREDS, .arg = &o->tls_creds },
        { QNBD_OPT_TLSHOSTNAME, .arg = &o->tls_hostname },
        { QNBD_OPT_TLSAUTHZ, .arg = &o->tls_authz },
        { QNBD_OPT_PID_FILE, .arg = &o->pid_file },
        { 'r', .given = &o->readonly },
        { 'A', .given = &o->allocation_depth },
        { 'd', .given = &o->disconnect },
        { 'L', .given = &o->list },
        { 's', .given = &o->snapshot },
        { 't', .given = &o->persistent },
        { 'v', .given = &o->verbose },
        { QNBD_OPT_IMAGE_OPTS, .given = &o->image_opts },
        { QNBD_OPT_FORK, .given = &o->fork },
    };
    int c;

    while ((c = getopt_long(argc, argv, "hVb:o:p:rsnc:dvk:e:f:tl:x:T:D:AB:L",
                            long_options, NULL)) != -1) {
        o->per_device |= qnbd_is_per_device_option(c);
        if (qnbd_take_plain_opt(c, plain, ARRAY_SIZE(plain))) {
            continue;
        }
        switch (c) {
        case 'h':
            qnbd_usage(qemu_get_progname());
            exit(EXIT_SUCCESS);
        case 'V':
            qemu_print_version("qemu-nbd");
            exit(EXIT_SUCCESS);
        case 'o':
            if (qemu_strtou64(optarg, NULL, 0, &o->offset) < 0 ||
                o->offset > INT64_MAX) {
                error_report("Invalid offset '%s'", optarg);
                return -1;
            }
            o->per_device |= o->offset != 0;
            break;
        case 'B':
            if (!o->bitmaps) {
                o->bitmaps = g_ptr_array_new();
            }
            g_ptr_array_add(o->bitmaps, optarg);
            break;
        case 'l':
            if (!tool_snapshot_arg_parse(&o->load_snapshot, optarg)) {
                /* qemu-nbd's quotes */
                error_report("Failed in parsing snapshot param `%s'",
                             optarg);
                return -1;
            }
            /* a snapshot is served read-only, as qemu-nbd serves it */
            o->readonly = true;
            break;
        case 'n':
            if (bdrv_parse_cache_mode("none", &o->flags,
                                      &o->writethrough) < 0) {
                g_assert_not_reached();
            }
            break;
        case QNBD_OPT_CACHE:
            if (bdrv_parse_cache_mode(optarg, &o->flags,
                                      &o->writethrough) < 0) {
                error_report("Invalid cache mode `%s'", optarg);
                return -1;
            }
            break;
        case QNBD_OPT_AIO:
            if (bdrv_parse_aio(optarg, &o->flags) < 0) {
                error_report("Invalid aio mode '%s'", optarg);
                return -1;
            }
            break;
        case QNBD_OPT_DISCARD:
            if (bdrv_parse_discard_flags(optarg, &o->flags) < 0) {
                error_report("Invalid discard mode `%s'", optarg);
                return -1;
            }
            break;
        case QNBD_OPT_DETECT_ZEROES:
            if (strcmp(optarg, "off") && strcmp(optarg, "on") &&
                strcmp(optarg, "unmap")) {
                error_report("Failed to parse detect_zeroes mode: invalid "
                             "parameter value: %s", optarg);
                return -1;
            }
            o->detect_zeroes = optarg;
            break;
        case 'e': {
            char *end;

            errno = 0;
            o->shared = strtol(optarg, &end, 0);
            if (errno || end == optarg || *end || o->shared < 0 ||
                o->shared > INT_MAX) {
                error_report("Invalid shared device number '%s'", optarg);
                return -1;
            }
            break;
        }
        case 'x':
            if (!qnbd_check_nbd_string("export name", optarg)) {
                return -1;
            }
            o->export_name = optarg;
            break;
        case 'D':
            if (!qnbd_check_nbd_string("export description", optarg)) {
                return -1;
            }
            o->description = optarg;
            break;
        case 'T':
            tool_trace_option(optarg);
            break;
        case QNBD_OPT_OBJECT:
            if (!tool_object_option(optarg)) {
                return -1;
            }
            break;
        case QNBD_OPT_SELINUX_LABEL:
            o->unsupported = "--selinux-label";
            break;
        default:
            /* getopt_long already said what was wrong */
            qnbd_try_help();
        }
    }
    return 0;
}

/* The checks qemu-nbd makes once the whole command line is known. */
/*
 * Socket activation (util/socket-activation.h): the server listens on the
 * one socket it was handed instead of an address of its own; in
 * qemu-nbd's words, what conflicts with that.
 */
static int qnbd_check_socket_activation(QnbdOptions *o)
{
    const char *conflict = NULL;
    int n = o->socket_activation_fds;

    if (n < 0) {
        error_report_err(o->socket_activation_err);
        return -1;
    }
    if (!n) {
        return 0;
    }
    if (o->socket_path) {
        conflict = "Unix socket can't be set when using socket activation";
    } else if (o->bind) {
        conflict = "The interface can't be set when using socket activation";
    } else if (o->port) {
        conflict = "TCP port number can't be set when using socket "
                   "activation";
    } else if (o->list) {
        conflict = "List mode is incompatible with socket activation";
    } else if (n > 1) {
        conflict = "qemu-nbd does not support socket activation with "
                   "LISTEN_FDS > 1";
    }
    if (conflict) {
        error_report("%s", conflict);
        return -1;
    }
    o->socket_activation = true;
    return 0;
}

static int qnbd_check_args(int argc, char **argv, QnbdOptions *o)
{
    if (o->list) {
        if (argc != optind) {
            error_report("List mode is incompatible with a file name");
            return -1;
        }
        if (o->per_device) {
            error_report("List mode is incompatible with per-device "
                         "settings");
            return -1;
        }
        if (o->fork) {
            error_report("List mode is incompatible with forking");
            return -1;
        }
    } else if (o->tls_hostname) {
        error_report("--tls-hostname is only supported with --list");
        return -1;
    } else if (argc - optind != 1) {
        error_report("Invalid number of arguments");
        fprintf(stderr, "Try `%s --help' for more information.\n",
                qemu_get_progname());
        exit(EXIT_FAILURE);
    } else {
        o->filename = argv[optind];
    }
    if (o->tls_authz && !o->tls_creds) {
        /* QEMU's words */
        error_report("--tls-authz is not permitted without --tls-creds");
        return -1;
    }
    if (o->unsupported) {
        error_report("%s is not supported: qblock-nbd has no SELinux "
                     "support", o->unsupported);
        return -1;
    }
    if (o->device || o->disconnect) {
        error_report("Kernel NBD devices (-c/-d%s%s) are not supported; "
                     "export over a socket and connect a client instead",
                     o->device ? " " : "", o->device ? o->device : "");
        return -1;
    }
    if (qnbd_check_socket_activation(o) < 0) {
        return -1;
    }
    if (o->image_opts && o->format) {
        error_report("--image-opts and -f are mutually exclusive");
        return -1;
    }
    if (o->detect_zeroes && !strcmp(o->detect_zeroes, "unmap") &&
        !(o->flags & BDRV_O_UNMAP)) {
        error_report("setting detect-zeroes to unmap is not allowed "
                     "without setting discard operation to unmap");
        return -1;
    }
    if (o->port && !o->socket_path) {
        uint64_t port;

        /* qemu-nbd would bind port 99999 as 34463 */
        if (!qemu_strtou64(o->port, NULL, 10, &port) && port > 65535) {
            error_report("Invalid port '%s': must be at most 65535",
                         o->port);
            return -1;
        }
    }
    return 0;
}

/* ---- opening the image ---- */

/*
 * The export is opened as qemu-nbd opens it: other users may read the
 * image but neither write nor resize it while it is exported.
 */
static BlockBackend *qnbd_open_blk(const char *filename, QDict *opts,
                                   int flags, Error **errp)
{
    return blk_new_open(filename, NULL, opts, flags | BDRV_O_NO_SHARE,
                        errp);
}

/*
 * A BlockBackend over a node opened from @opts, which name the node of
 * @below in a child reference.  @below's backend goes first, so that its
 * permissions do not stand in the way of the new node's; the new node's
 * edge then keeps the node alive.
 */
static BlockBackend *qnbd_open_above(BlockBackend *below, QDict *opts,
                                     int flags, Error **errp)
{
    BlockDriverState *bs = blk_bs(below);
    BlockBackend *blk;

    bdrv_ref(bs);
    blk_unref(below);
    blk = qnbd_open_blk(NULL, opts, flags, errp);
    bdrv_unref(bs);
    return blk;
}

static BlockBackend *qnbd_open_image(QnbdOptions *o, Error **errp)
{
    int flags = o->flags | (o->readonly ? 0 : BDRV_O_RDWR);
    BlockBackend *blk;
    QDict *opts;

    opts = tool_image_options(o->filename, o->image_opts, o->format, errp);
    if (!opts) {
        return NULL;
    }
    if (o->detect_zeroes) {
        qdict_put_str(opts, "detect-zeroes", o->detect_zeroes);
    }
    if (o->snapshot) {
        /* a temporary overlay takes the writes; the image is only read */
        flags |= BDRV_O_SNAPSHOT;
    }
    blk = qnbd_open_blk(o->image_opts ? NULL : o->filename, opts, flags,
                        errp);
    if (!blk) {
        error_prepend(errp, "Failed to blk_new_open '%s': ", o->filename);
        return NULL;
    }
    if (o->offset) {
        /* -o exposes the image from OFFSET on, through a raw node */
        opts = qdict_new();
        qdict_put_str(opts, "driver", "raw");
        qdict_put_str(opts, "file", bdrv_get_node_name(blk_bs(blk)));
        qdict_put_int(opts, "offset", o->offset);
        blk = qnbd_open_above(blk, opts, flags, errp);
        if (!blk) {
            return NULL;
        }
    }
    blk_set_enable_write_cache(blk, !o->writethrough);
    return blk;
}

/*
 * What needs the open image: the internal snapshot -l serves in place of
 * the disk.
 */
static int qnbd_check_image_features(BlockBackend *blk, QnbdOptions *o)
{
    if (tool_snapshot_arg_load(blk, &o->load_snapshot) < 0) {
        return -1;
    }
    return 0;
}

/* ---- serving ---- */

static void qnbd_signal(int sig)
{
    qnbd_stop = 1;
    aio_notify(qnbd_ctx);
}

static void qnbd_client_closed(void *opaque, bool negotiated)
{
    /* as qemu-nbd: only a client that got to transmission ends a server
     * without -t; one that merely listed the exports does not */
    if (negotiated && !qnbd_opts.persistent &&
        nbd_server_client_count(qnbd_server) == 0) {
        qnbd_stop = 1;
    }
}

/* QBLOCK_NBD_STATS: qblock-io's "stats" lines, before the image closes. */
static void qnbd_dump_stats(BlockBackend *blk)
{
    const char *path = g_getenv("QBLOCK_NBD_STATS");
    FILE *f;

    if (!path || !path[0]) {
        return;
    }
    f = fopen(path, "w");
    if (!f) {
        error_report("Could not write statistics to '%s': %s", path,
                     strerror(errno));
        return;
    }
    tool_print_io_stats(f, blk);
    fclose(f);
}

/*
 * The --tls-creds object for @endpoint into *@creds, or NULL there
 * without --tls-creds: what serving and --list both begin with.  False
 * after reporting why the object cannot be used.
 */
static bool qnbd_get_tls_creds(const QnbdOptions *o,
                               QCryptoTLSCredsEndpoint endpoint,
                               QCryptoTLSCreds **creds)
{
    Error *err = NULL;

    *creds = NULL;
    if (!o->tls_creds) {
        return true;
    }
    *creds = qcrypto_tls_creds_get(o->tls_creds, endpoint, &err);
    if (!*creds) {
        error_report_err(err);
        return false;
    }
    return true;
}

static SocketAddress *qnbd_listen_address(QnbdOptions *o)
{
    if (o->socket_activation) {
        g_autofree char *fd = g_strdup_printf("%d",
                                              SOCKET_ACTIVATION_FIRST_FD);

        return socket_address_new_fd(fd);
    }
    if (o->socket_path) {
        return socket_address_new_unix(o->socket_path);
    }
    return socket_address_new_inet(o->bind ? o->bind : QNBD_DEFAULT_BIND,
                                   o->port ? o->port : QNBD_DEFAULT_PORT);
}

static int qnbd_serve(QnbdOptions *o)
{
    NBDServerConfig scfg = {
        .max_connections = o->shared,
        .handshake_max_ns = NBD_DEFAULT_HANDSHAKE_MAX_SECS *
                            (int64_t)1000 * SCALE_MS,
        .client_closed = qnbd_client_closed,
    };
    NBDExportConfig ecfg = {
        .name = o->export_name ? o->export_name : "",
        .description = o->description,
        .writable = !o->readonly,
        .allocation_depth = o->allocation_depth,
        .bitmaps = o->bitmaps ? (const char *const *)o->bitmaps->pdata
                              : NULL,
        .nr_bitmaps = o->bitmaps ? o->bitmaps->len : 0,
        .multi_conn = o->shared != 1,
    };
    g_autoptr(SocketAddress) addr = qnbd_listen_address(o);
    struct sigaction sa = { .sa_handler = qnbd_signal };
    QemuDaemon daemon;
    Error *err = NULL;
    BlockBackend *blk;

    if (o->fork) {
        /* unlike qemu-nbd's parent, it takes no warning for a failure */
        qemu_daemon_fork(&daemon);
    }
    if (!qnbd_get_tls_creds(o, QCRYPTO_TLS_CREDS_ENDPOINT_SERVER,
                            &scfg.tls_creds)) {
        return EXIT_FAILURE;
    }
    if (o->tls_creds) {
        scfg.tls_authz = o->tls_authz;
    }
    /* listening comes first, as in qemu-nbd: a bad address is reported
     * before the image is even probed */
    qnbd_ctx = qemu_get_aio_context();
    qnbd_server = nbd_server_new(qnbd_ctx, &scfg);
    if (nbd_server_listen(qnbd_server, addr, &err) < 0) {
        if (o->socket_activation) {
            error_prepend(&err, "Failed to use socket activation: ");
        }
        goto fail;
    }
    blk = qnbd_open_image(o, &err);
    if (!blk) {
        goto fail;
    }
    if (qnbd_check_image_features(blk, o) < 0) {
        blk_unref(blk);
        nbd_server_free(qnbd_server);
        qcrypto_tls_creds_put(scfg.tls_creds);
        return EXIT_FAILURE;
    }
    if (!nbd_export_new(qnbd_server, blk, &ecfg, &err) ||
        (o->pid_file && qemu_write_pidfile(o->pid_file, &err) < 0)) {
        blk_unref(blk);
        goto fail;
    }

    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (o->fork) {
        qemu_daemon_ready(&daemon, o->verbose ? QEMU_DAEMON_KEEP_STDERR : 0);
    }

    while (!qnbd_stop) {
        aio_poll(qnbd_ctx, true);
    }

    nbd_server_free(qnbd_server);
    qcrypto_tls_creds_put(scfg.tls_creds);
    blk_drain(blk);
    qnbd_dump_stats(blk);
    blk_unref(blk);
    /* the pid file stays, locked until now, as qemu-nbd leaves it */
    return EXIT_SUCCESS;

fail:
    error_report_err(err);
    nbd_server_free(qnbd_server);
    qcrypto_tls_creds_put(scfg.tls_creds);
    return EXIT_FAILURE;
}

static int qnbd_list(QnbdOptions *o)
{
    g_autoptr(SocketAddress) addr = qnbd_listen_address(o);
    NBDClientTLS tls = { .hostname = o->tls_hostname };
    Error *err = NULL;
    int ret;

    if (!qnbd_get_tls_creds(o, QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT,
                            &tls.creds)) {
        return EXIT_FAILURE;
    }
    if (tls.creds && !tls.hostname &&
        addr->type == SOCKET_ADDRESS_TYPE_INET) {
        tls.hostname = addr->host;
    }
    ret = qnbd_list_exports(addr, &tls, &err);
    qcrypto_tls_creds_put(tls.creds);
    if (ret < 0) {
        error_report_err(err);
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
    QnbdOptions *o = &qnbd_opts;

    qemu_init_progname(argv[0]);
    /*
     * Before anything opens a descriptor: one opened while a handed-over
     * one is missing would take its number and pass for it.
     */
    o->socket_activation_fds = socket_activation_check(
                                   &o->socket_activation_err);
    /*
     * The server's loop polls as the storage daemon's (docs/iothreads.md);
     * before --object, so that a main-loop object starts from that.
     */
    main_loop_poll_by_default();
    bdrv_init();
    o->shared = 1;
    if (bdrv_parse_cache_mode("writeback", &o->flags, &o->writethrough) < 0) {
        g_assert_not_reached();
    }
    if (qnbd_parse_args(argc, argv, o) < 0 ||
        qnbd_check_args(argc, argv, o) < 0) {
        return EXIT_FAILURE;
    }
    return o->list ? qnbd_list(o) : qnbd_serve(o);
}
