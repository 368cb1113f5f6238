/*
 * qblock-storage-daemon: block nodes, their exports and QMP monitors in
 * one process, with qemu-storage-daemon's command line.
 *
 *   qblock-storage-daemon [--blockdev OPTS]... [--chardev OPTS]...
 *       [--monitor OPTS]... [--nbd-server OPTS] [--export OPTS]...
 *       [--object OPTS]... [--pidfile PATH] [--daemonize]
 *
 * Start-up, in this order:
 *  1. -h, -V and --daemonize are seen first; with --daemonize the process
 *     forks now, before it opens anything, and the parent waits until
 *     the child reports that it started (exit 0) or failed (exit 1).
 *  2. The other options take effect in command-line order, as in QEMU:
 *     an --export needs its node, and an NBD export the --nbd-server,
 *     before it.  The first error ends the daemon ("--export ARG: why").
 *  3. The pid file is written (and locked), then a daemon detaches.
 *
 * Then one event loop runs everything: monitors, NBD clients, the I/O.
 *
 * Shutdown, on SIGTERM, SIGINT or SIGHUP or the QMP quit command: no new
 * request starts, SHUTDOWN is sent, every export is removed (its clients
 * disconnected; BLOCK_EXPORT_DELETED for each), every job is cancelled
 * and waited for (a mirror does not pivot), the NBD server stops,
 * every image is flushed and closed (which releases its locks), the
 * monitors get what is left of their output (quit's reply last, as QEMU
 * sends it), and the socket and pid files are removed.  The exit status is 1 if a flush failed.
 */
#include "util/osdep.h"

#include <getopt.h>
#include <signal.h>
#include <sys/signalfd.h>

#include "block/block.h"
#include "block/export.h"
#include "block/nbd-export.h"
#include "block-export.h"
#include "blockdev.h"
#include "blockdev-ops.h"
#include "blockdev-reopen.h"
#include "transaction.h"
#include "chardev.h"
#include "chardev-qmp.h"
#include "job-qmp.h"
#include "backup-qmp.h"
#include "job/job.h"
#include "monitor.h"
#include "nbd.h"
#include "object.h"
#include "dirty-bitmap-qmp.h"
#include "qapi-qmp.h"
#include "qmp-dispatch.h"
#include "util/qapi-event.h"
#include "util/user-object.h"
#include "util/iothread.h"
#include "util/main-loop.h"
#include "util/daemonize.h"

enum {
    OPTION_BLOCKDEV = 256,
    OPTION_CHARDEV,
    OPTION_DAEMONIZE,
    OPTION_EXPORT,
    OPTION_MONITOR,
    OPTION_NBD_SERVER,
    OPTION_OBJECT,
    OPTION_PIDFILE,
};

static const struct option qsd_long_options[] = {
    { "blockdev",   required_argument, NULL, OPTION_BLOCKDEV },
    { "chardev",    required_argument, NULL, OPTION_CHARDEV },
    { "daemonize",  no_argument,       NULL, OPTION_DAEMONIZE },
    { "export",     required_argument, NULL, OPTION_EXPORT },
    { "help",       no_argument,       NULL, 'h' },
    { "monitor",    required_argument, NULL, OPTION_MONITOR },
    { "nbd-server", required_argument, NULL, OPTION_NBD_SERVER },
    { "object",     required_argument, NULL, OPTION_OBJECT },
    { "pidfile",    required_argument, NULL, OPTION_PIDFILE },
    { "trace",      required_argument, NULL, 'T' },
    { "version",    no_argument,       NULL, 'V' },
    { NULL, 0, NULL, 0 },
};
/* '-': an argument that is no option comes as 1, in its place (QEMU's) */
#define QSD_SHORT_OPTIONS "-hT:V"

/* NULL while running; the ShutdownCause once shutdown is requested */
static const char *qsd_shutdown_reason;
static bool qsd_daemonize;
/* --daemonize: how the child tells the parent that it serves */
static QemuDaemon qsd_daemon;
static char *qsd_pidfile;
static int qsd_pidfile_fd = -1;

static void qsd_usage(void)
{
    printf(
"Usage: %s [options]\n"
"QEMU storage daemon (qblock)\n"
"\n"
"  -h, --help             display this help and exit\n"
"  -V, --version          output version information and exit\n"
"\n"
"  --blockdev [driver=]<driver>[,node-name=<N>][,discard=ignore|unmap]\n"
"             [,cache.direct=on|off][,cache.no-flush=on|off]\n"
"             [,read-only=on|off][,auto-read-only=on|off]\n"
"             [,force-share=on|off][,detect-zeroes=on|off|unmap]\n"
"             [,driver specific parameters...]\n"
"  --blockdev '{\"driver\": <driver>, \"node-name\": <N>, ...}'\n"
"                         configure a block node (drivers: file, raw,\n"
"                         qcow2, null-co, null-aio, blkdebug; options in\n"
"                         docs/block-options.md)\n"
"\n"
"  --chardev socket,id=<id>,path=<path>[,server=on|off][,wait=on|off]\n"
"  --chardev socket,id=<id>,fd=<n>[,server=on|off][,wait=on|off]\n"
"  --chardev stdio,id=<id>\n"
"  --chardev null,id=<id>\n"
"  --chardev file,id=<id>,path=<path>[,input-path=<path>][,append=on|off]\n"
"  --chardev ringbuf|memory,id=<id>[,size=<n>]\n"
"                         configure a character device for a monitor\n"
"                         (server=off: connect to <path>; wait=on, the\n"
"                         default, waits for the first client; fd=<n>: an\n"
"                         inherited socket, to listen on or talk over)\n"
"\n"
"  --daemonize            daemonize the process, and have the parent exit\n"
"                         once startup is complete\n"
"\n"
"  --export [type=]nbd,id=<id>,node-name=<node-name>[,name=<export-name>]\n"
"           [,description=<text>][,writable=on|off][,writethrough=on|off]\n"
"           [,allocation-depth=on|off]\n"
"                         export the specified block node over NBD\n"
"                         (requires --nbd-server; writethrough=off, the\n"
"                         default, caches writes until a flush)\n"
"\n"
"  --export [type=]fuse,id=<id>,node-name=<node-name>,mountpoint=<file>\n"
"           [,growable=on|off][,writable=on|off][,allow-other=on|off|auto]\n"
"                         export the specified block node over FUSE\n"
"\n"
"  --export [type=]vhost-user-blk,id=<id>,node-name=<node-name>,\n"
"           addr.type=unix,addr.path=<socket-path>[,writable=on|off]\n"
"           [,logical-block-size=<block-size>][,num-queues=<num-queues>]\n"
"                         export the specified block node as a\n"
"                         vhost-user-blk device over UNIX domain socket\n"
"  --export [type=]vhost-user-blk,id=<id>,node-name=<node-name>,\n"
"           addr.type=fd,addr.str=<fd>[,writable=on|off]\n"
"           [,logical-block-size=<block-size>][,num-queues=<num-queues>]\n"
"                         export the specified block node as a\n"
"                         vhost-user-blk device over file descriptor\n"
"\n"
"  --monitor [chardev=]name[,mode=control][,pretty[=on|off]]\n"
"                         configure a QMP monitor\n"
"\n"
"  --nbd-server addr.type=inet,addr.host=<host>,addr.port=<port>\n"
"               [,max-connections=<n>]\n"
"  --nbd-server addr.type=unix,addr.path=<path>[,max-connections=<n>]\n"
"  --nbd-server addr.type=fd,addr.str=<n>[,max-connections=<n>]\n"
"                         start an NBD server for exporting block nodes\n"
"                         (max-connections: default 100, 0 for no limit)\n"
"\n"
"  --object help          list object types that can be added\n"
"  --object <type>,help   list properties for the given object type\n"
"  --object <type>[,<property>=<value>...]\n"
"                         create a new object of type <type>, setting\n"
"                         properties in the order they are specified. Note\n"
"                         that the 'id' property must be set.\n"
"\n"
"  --pidfile <path>       write process ID to a file after startup\n"
"\n"
"The QMP commands are listed in docs/qmp-reference.md.\n",
           qemu_get_progname());
}

static void qsd_print_version(void)
{
    qemu_print_version("qemu-storage-daemon");
    printf("Copyright (c) the qblock authors\n");
}

static void qsd_request_shutdown(const char *reason)
{
    if (!qsd_shutdown_reason) {
        qsd_shutdown_reason = reason;
    }
    aio_notify(qemu_get_aio_context());
}

static void qmp_quit(JsonObject *args, JsonNode **ret, Error **errp)
{
    /*
     * Requests queued behind it never run; its reply goes out last, once
     * the images are closed, as QEMU's daemon sends it.
     */
    monitor_stop_dispatch();
    monitor_defer_reply();
    qsd_request_shutdown("host-qmp-quit");
}

static void qsd_signal_read(void *opaque)
{
    int fd = GPOINTER_TO_INT(opaque);
    struct signalfd_siginfo info;

    while (read(fd, &info, sizeof(info)) == sizeof(info)) {
        qsd_request_shutdown("host-signal");
    }
}

/*
 * The shutdown signals are blocked in every thread (the thread pool's
 * inherit the mask) and read from a signalfd by the event loop, so that
 * shutdown runs as ordinary code, never in a signal handler.
 */
static void qsd_block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
    sigprocmask(SIG_BLOCK, set, NULL);
    /* a client that goes away must not kill the daemon */
    signal(SIGPIPE, SIG_IGN);
}

static void qsd_watch_signals(const sigset_t *set)
{
    int fd = signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC);

    if (fd < 0) {
        error_report("Failed to create a signalfd: %s", strerror(errno));
        exit(1);
    }
    aio_set_fd_handler_rare(qemu_get_aio_context(), fd, qsd_signal_read,
                            NULL, GINT_TO_POINTER(fd));
}

/* --daemonize: the child serves; a daemon is in / (its files are absolute). */
static void qsd_daemonize_finish(void)
{
    if (!qsd_daemonize) {
        return;
    }
    if (chdir("/") < 0) {
        error_report("Failed to change to /: %s", strerror(errno));
        exit(1);
    }
    qemu_daemon_ready(&qsd_daemon, 0);
}

/* Writes and locks the pid file; it is removed at exit, as QEMU's is. */
static bool qsd_write_pidfile(const char *path, Error **errp)
{
    g_autofree char *cwd = g_get_current_dir();
    int fd = qemu_write_pidfile(path, errp);

    if (fd < 0) {
        return false;
    }
    /* absolute: a daemon is in / by the time it removes it */
    qsd_pidfile = g_canonicalize_filename(path, cwd);
    qsd_pidfile_fd = fd;
    return true;
}

/* The keyval options of --chardev and --monitor, checked. */
static JsonNode *qsd_keyval_options(const QapiType *type, const char *arg,
                                    const char *implied_key, Error **errp)
{
    g_autoptr(QDict) qdict = keyval_parse(arg, implied_key, errp);

    return qdict ? qapi_input_from_keyval(type, qdict, errp) : NULL;
}

static int qsd_chardev_add(const char *arg, Error **errp)
{
    g_autoptr(JsonNode) node = qsd_keyval_options(&qapi_type_ChardevOptions,
                                                  arg, "backend", errp);
    JsonObject *opts;
    Chardev *chr;

    if (!node) {
        return -EINVAL;
    }
    opts = json_node_get_object(node);
    if (qsd_daemonize &&
        !strcmp(json_object_get_string_member(opts, "backend"), "stdio")) {
        error_setg(errp, "cannot use stdio with --daemonize");
        return -EINVAL;
    }
    chr = chardev_add(opts, errp);
    if (!chr) {
        return -EINVAL;
    }
    if (chardev_is_waiting(chr)) {
        g_autofree char *desc = chardev_describe(chr);

        info_report("--chardev %s: info: waiting for connection on: %s",
                    arg, desc);
        /* a signal ends the wait, as it ends the daemon */
        while (chardev_is_waiting(chr) && !qsd_shutdown_reason) {
            aio_poll(qemu_get_aio_context(), true);
        }
    }
    return 0;
}

static int qsd_monitor_add(const char *arg, Error **errp)
{
    g_autoptr(JsonNode) node = qsd_keyval_options(&qapi_type_MonitorOptions,
                                                  arg, "chardev", errp);

    return node ? monitor_add(json_node_get_object(node), errp) : -EINVAL;
}

/*
 * The next option of the command line, -1 after the last.  Both passes
 * read the options through this, so that they agree on what each
 * argument is.
 */
static int qsd_next_option(int argc, char **argv)
{
    return getopt_long(argc, argv, QSD_SHORT_OPTIONS, qsd_long_options,
                       NULL);
}

/* Pass 1: what must be known before anything is opened. */
static void qsd_process_early_options(int argc, char **argv)
{
    int c;

    opterr = 1;
    optind = 1;
    while ((c = qsd_next_option(argc, argv)) != -1) {
        switch (c) {
        case 'h':
            qsd_usage();
            exit(0);
        case 'V':
            qsd_print_version();
            exit(0);
        case 'T':
            error_report("--trace is not supported by qblock-storage-daemon");
            exit(1);
        case OPTION_DAEMONIZE:
            qsd_daemonize = true;
            break;
        case '?':
            exit(1);
        }
    }
}

static const char *qsd_option_name(int val)
{
    for (const struct option *o = qsd_long_options; o->name; o++) {
        if (o->val == val) {
            return o->name;
        }
    }
    g_assert_not_reached();
}

/* Undoes what start-up did (socket files above all), then exits 1. */
static void QEMU_NORETURN qsd_startup_failed(void)
{
    iothread_acquire_all();
    blk_exp_close_all();
    if (nbd_export_server_running()) {
        nbd_export_server_stop(&error_abort);
    }
    blockdev_close_all();
    iothread_release_all();
    user_object_del_all();
    monitor_cleanup();
    chardev_cleanup();
    exit(1);
}

/* Creates what one option's argument @arg describes; 0 or -errno. */
typedef int QsdCreateFunc(const char *arg, Error **errp);

/* The options that create something, each with its function. */
static const struct {
    int option;
    QsdCreateFunc *create;
} qsd_creators[] = {
    { OPTION_BLOCKDEV,   blockdev_add_cmdline },
    { OPTION_CHARDEV,    qsd_chardev_add },
    { OPTION_EXPORT,     block_export_add_cmdline },
    { OPTION_MONITOR,    qsd_monitor_add },
    { OPTION_NBD_SERVER, nbd_server_start_cmdline },
    { OPTION_OBJECT,     object_add_cmdline },
};

static QsdCreateFunc *qsd_creator(int option)
{
    for (size_t i = 0; i < ARRAY_SIZE(qsd_creators); i++) {
        if (qsd_creators[i].option == option) {
            return qsd_creators[i].create;
        }
    }
    return NULL;
}

/*
 * Runs @create as if it were a QMP command: no request runs meanwhile,
 * and what it touches in iothreads stands still (--object creates them,
 * and touches no node).
 */
static int qsd_create(int option, QsdCreateFunc *create, const char *arg,
                      Error **errp)
{
    int ret;

    /* a monitor's client that is quick must wait as for a command */
    monitor_hold();
    if (option == OPTION_OBJECT) {
        ret = create(arg, errp);
    } else {
        iothread_acquire_all();
        ret = create(arg, errp);
        iothread_release_all();
    }
    monitor_release();
    return ret;
}

/* Pass 2: everything else, in order; the first error ends the daemon. */
static void qsd_process_options(int argc, char **argv)
{
    int c;

    opterr = 0;
    optind = 1;
    while ((c = qsd_next_option(argc, argv)) != -1) {
        QsdCreateFunc *create = qsd_creator(c);
        Error *err = NULL;

        if (c == OPTION_PIDFILE) {
            g_free(qsd_pidfile);
            qsd_pidfile = g_strdup(optarg);
        }
        if (c == 1) {
            /* as QEMU: what came before it is done (--object help) */
            error_report("%s: Unexpected argument", optarg);
            qsd_startup_failed();
        }
        if (create && qsd_create(c, create, optarg, &err) < 0) {
            error_prepend(&err, "--%s %s: ", qsd_option_name(c), optarg);
            error_report_err(err);
            qsd_startup_failed();
        }
    }
}

static void qsd_register_commands(void)
{
    qmp_register_dispatch_commands();
    monitor_init();
    blockdev_register_commands();
    blockdev_ops_register_commands();
    blockdev_reopen_register_commands();
    transaction_register_commands();
    block_export_register_commands();
    nbd_register_commands();
    object_register_commands();
    job_register_commands();
    backup_register_commands();
    dirty_bitmap_register_commands();
    chardev_register_commands(NULL);
    qmp_register_command("quit", qmp_quit);
}

static int qsd_shutdown(void)
{
    QDict *data = qdict_new();
    int ret;

    monitor_stop_dispatch();
    qdict_put_bool(data, "guest", false);
    qdict_put_str(data, "reason", qsd_shutdown_reason);
    qapi_event_emit("SHUTDOWN", data);

    /* the nodes of iothreads stand still as for a QMP command */
    iothread_acquire_all();
    blk_exp_close_all();
    /* as QEMU: jobs are cancelled (a mirror does not pivot) */
    job_cancel_sync_all();
    if (nbd_export_server_running()) {
        nbd_export_server_stop(&error_abort);
    }
    ret = blockdev_close_all();
    iothread_release_all();
    /* invariant 2 of util/iothread.c: their nodes are gone: stop them */
    user_object_del_all();
    monitor_cleanup();
    chardev_cleanup();
    if (qsd_pidfile_fd >= 0) {
        unlink(qsd_pidfile);
        close(qsd_pidfile_fd);
    }
    return ret < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    sigset_t signals;
    g_autofree char *pidfile = NULL;

    qemu_init_progname(argv[0]);
    /* getopt's complaints begin with argv[0]: the name, as ours do */
    argv[0] = (char *)qemu_get_progname();
    qsd_process_early_options(argc, argv);
    qsd_block_signals(&signals);
    if (qsd_daemonize) {
        qemu_daemon_fork(&qsd_daemon);
    }
    qsd_watch_signals(&signals);
    /* exports in the main loop poll as in an iothread (docs/iothreads.md) */
    main_loop_poll_by_default();
    bdrv_init();
    qsd_register_commands();

    qsd_process_options(argc, argv);
    if (qsd_pidfile) {
        Error *err = NULL;

        pidfile = g_steal_pointer(&qsd_pidfile);
        if (!qsd_write_pidfile(pidfile, &err)) {
            error_prepend(&err, "cannot create PID file: ");
            error_report_err(err);
            qsd_startup_failed();
        }
    }
    qsd_daemonize_finish();

    while (!qsd_shutdown_reason) {
        aio_poll(qemu_get_aio_context(), true);
    }
    return qsd_shutdown();
}
