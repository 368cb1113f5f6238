/*
 * Character devices of the storage daemon (see chardev.h).
 *
 * Invariants:
 *  1. A device with a user hands every connection to it at once; one
 *     without keeps them in chr->waiting (fds it still owns).
 *  2. A listening device removes its socket file at cleanup only if the
 *     path still names the socket it bound (same device and inode), so a
 *     newer daemon's socket at the same path survives an older one's exit.
 *     One on an inherited socket (fd=) has no path: whoever bound the
 *     socket owns its file.
 *  3. A listening device's socket is registered with the loop except for
 *     SOCKET_ACCEPT_BACKOFF_NS after an accept that failed for lack of
 *     descriptors or memory (chr->backoff, util/accept-backoff.h), which
 *     is logged once until a connection is accepted again.
 *
 * The sockets themselves are util/qemu-sockets.c's; what is the
 * chardev's own is who gets a connection and when (wait=on).
 */
#include "chardev.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "util/accept-backoff.h"
#include "util/aio.h"
#include "util/sockets.h"

typedef enum ChardevKind {
    CHARDEV_SOCKET_SERVER,
    CHARDEV_SOCKET_CLIENT,
    CHARDEV_STDIO,
} ChardevKind;

struct Chardev {
    char *id;
    ChardevKind kind;
    char *path;                 /* sockets: absolute path; NULL with fd= */
    char *fd_str;               /* sockets: an inherited one's number */
    char *where;                /* "unix:PATH", "tcp:HOST:PORT": messages */
    int listen_fd;              /* server: -1 once closed */
    SocketUnixFile sock_file;   /* server: what the path named after bind */
    bool wait;                  /* server: wait=on and no client yet */
    AcceptBackoff backoff;      /* server: invariant 3 */
    GArray *waiting;            /* int pairs (in, out) without a user */
    ChardevConnectFunc *connect;
    void *opaque;
};

/* Chardev *, in creation order */
static GPtrArray *chardevs;

Chardev *chardev_find(const char *id, Error **errp)
{
    for (guint i = 0; chardevs && i < chardevs->len; i++) {
        Chardev *chr = g_ptr_array_index(chardevs, i);

        if (!strcmp(chr->id, id)) {
            return chr;
        }
    }
    error_setg(errp, "chardev \"%s\" not found", id);
    return NULL;
}

static void chardev_deliver(Chardev *chr, int in_fd, int out_fd)
{
    if (chr->connect) {
        chr->connect(chr->opaque, in_fd, out_fd);
    } else {
        int fds[2] = { in_fd, out_fd };

        g_array_append_vals(chr->waiting, fds, 2);
    }
}

static void chardev_accept(void *opaque);

/* Invariant 3: the backoff began or ended. */
static void chardev_backoff_changed(void *opaque)
{
    Chardev *chr = opaque;
    bool on = !accept_backoff_active(&chr->backoff);

    aio_set_fd_handler_rare(qemu_get_aio_context(), chr->listen_fd,
                            on ? chardev_accept : NULL, NULL, chr);
}

static void chardev_accept(void *opaque)
{
    Chardev *chr = opaque;
    int fd = socket_accept(chr->listen_fd);

    if (accept_backoff_check(&chr->backoff, fd,
                             "chardev '%s': accepting a connection on %s",
                             chr->id, chr->path)) {
        return;
    }
    if (fd < 0) {
        /* EAGAIN: another wake-up took it; anything else is the client's */
        return;
    }
    chr->wait = false;
    chardev_deliver(chr, fd, fd);
}

/* A stale socket at the path is replaced; any other file is not. */
static int chardev_listen(Chardev *chr, Error **errp)
{
    g_autoptr(SocketAddress) addr = NULL;
    int fd;

    /* several clients may connect at once: give them some backlog */
    if (chr->fd_str) {
        addr = socket_address_new_fd(chr->fd_str);
        fd = socket_listen(addr, 16, errp);
    } else {
        fd = socket_listen_unix(chr->path, 16, &chr->sock_file, errp);
    }

    if (fd < 0) {
        return fd;
    }
    chr->listen_fd = fd;
    accept_backoff_init(&chr->backoff, qemu_get_aio_context(),
                        chardev_backoff_changed, chr);
    aio_set_fd_handler_rare(qemu_get_aio_context(), fd, chardev_accept, NULL,
                            chr);
    return 0;
}

static int chardev_connect(Chardev *chr, Error **errp)
{
    g_autoptr(SocketAddress) addr = chr->fd_str ?
                                    socket_address_new_fd(chr->fd_str) :
                                    socket_address_new_unix(chr->path);
    int fd = socket_connect(addr, errp);

    if (fd < 0) {
        return fd;
    }
    /* the monitor reads it from the event loop */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    chardev_deliver(chr, fd, fd);
    return 0;
}

static void chardev_free(Chardev *chr)
{
    /* stdio's descriptors stay open for the messages at exit */
    for (guint i = 0; chr->kind != CHARDEV_STDIO &&
                      i + 1 < chr->waiting->len; i += 2) {
        int in_fd = g_array_index(chr->waiting, int, i);
        int out_fd = g_array_index(chr->waiting, int, i + 1);

        close(in_fd);
        if (out_fd != in_fd) {
            close(out_fd);
        }
    }
    g_array_unref(chr->waiting);
    g_free(chr->id);
    g_free(chr->path);
    g_free(chr->fd_str);
    g_free(chr->where);
    g_free(chr);
}

/* absolute: the daemon may chdir("/") when it daemonizes */
static void chardev_set_path(Chardev *chr, const char *path)
{
    g_autofree char *cwd = NULL;

    if (path) {
        cwd = g_get_current_dir();
        chr->path = g_canonicalize_filename(path, cwd);
    }
}

/*
 * Where a listening device listens, as QEMU names it in "waiting for
 * connection on" (an inherited socket's own address).
 */
static char *chardev_local_name(Chardev *chr)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[INET6_ADDRSTRLEN], port[8];

    if (chr->path) {
        return g_strdup_printf("unix:%s", chr->path);
    }
    if (getsockname(chr->listen_fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_UNIX) {
            return g_strdup_printf("unix:%s",
                                   ((struct sockaddr_un *)&ss)->sun_path);
        }
        if ((ss.ss_family == AF_INET || ss.ss_family == AF_INET6) &&
            getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host),
                        port, sizeof(port),
                        NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
            return g_strdup_printf("tcp:%s:%s", host, port);
        }
    }
    return g_strdup_printf("fd:%s", chr->fd_str);
}

Chardev *chardev_add(JsonObject *opts, Error **errp)
{
    const char *id = json_object_get_string_member(opts, "id");
    const char *backend = json_object_get_string_member(opts, "backend");
    Chardev *chr;
    int ret = 0;

    if (chardev_find(id, NULL)) {
        error_setg(errp, "Duplicate chardev id '%s'", id);
        return NULL;
    }
    chr = g_new0(Chardev, 1);
    chr->id = g_strdup(id);
    chr->listen_fd = -1;
    chr->waiting = g_array_new(false, false, sizeof(int));
    if (!strcmp(backend, "stdio")) {
        chr->kind = CHARDEV_STDIO;
        chardev_deliver(chr, STDIN_FILENO, STDOUT_FILENO);
    } else {
        const char *path = json_object_get_string_member_with_default(
                               opts, "path", NULL);

        chr->fd_str = g_strdup(json_object_get_string_member_with_default(
                                   opts, "fd", NULL));
        if (path && chr->fd_str) {
            /* QEMU's words */
            error_setg(errp, "None or one of 'path', 'fd' or 'host' option "
                       "required.");
            ret = -EINVAL;
        } else if (!path && !chr->fd_str) {
            /* QEMU waits on no socket at all, for ever */
            error_setg(errp, "A socket needs 'path' or 'fd'");
            ret = -EINVAL;
        } else if (json_object_get_boolean_member_with_default(opts, "server",
                                                               false)) {
            chr->kind = CHARDEV_SOCKET_SERVER;
            chr->wait = json_object_get_boolean_member_with_default(
                            opts, "wait", true);
            chardev_set_path(chr, path);
            ret = chardev_listen(chr, errp);
            if (ret == 0) {
                chr->where = chardev_local_name(chr);
            }
        } else {
            chr->kind = CHARDEV_SOCKET_CLIENT;
            chardev_set_path(chr, path);
            ret = chardev_connect(chr, errp);
        }
    }
    if (ret < 0) {
        chardev_free(chr);
        return NULL;
    }
    if (!chardevs) {
        chardevs = g_ptr_array_new();
    }
    g_ptr_array_add(chardevs, chr);
    return chr;
}

int chardev_attach(Chardev *chr, ChardevConnectFunc *fn, void *opaque,
                   Error **errp)
{
    g_autoptr(GArray) waiting = NULL;

    if (chr->connect) {
        error_setg(errp, "Device '%s' is in use", chr->id);
        return -EBUSY;
    }
    chr->connect = fn;
    chr->opaque = opaque;
    waiting = chr->waiting;
    chr->waiting = g_array_new(false, false, sizeof(int));
    for (guint i = 0; i + 1 < waiting->len; i += 2) {
        fn(opaque, g_array_index(waiting, int, i),
           g_array_index(waiting, int, i + 1));
    }
    return 0;
}

bool chardev_is_waiting(Chardev *chr)
{
    return chr->kind == CHARDEV_SOCKET_SERVER && chr->wait;
}

char *chardev_describe(Chardev *chr)
{
    return g_strdup_printf("disconnected:%s,server=on", chr->where);
}

bool chardev_fd_is_pollable(int fd)
{
    /* the event loop is what will watch it: ask the event loop */
    return aio_fd_can_be_watched(fd);
}

static void chardev_close(Chardev *chr)
{
    if (chr->listen_fd >= 0) {
        aio_set_fd_handler(qemu_get_aio_context(), chr->listen_fd, NULL,
                           NULL, NULL);
        close(chr->listen_fd);
        chr->listen_fd = -1;
        accept_backoff_cleanup(&chr->backoff);
        /* invariant 2 */
        if (chr->path) {
            socket_unlink_unix(chr->path, &chr->sock_file);
        }
    }
    chardev_free(chr);
}

void chardev_cleanup(void)
{
    if (!chardevs) {
        return;
    }
    for (guint i = 0; i < chardevs->len; i++) {
        chardev_close(g_ptr_array_index(chardevs, i));
    }
    g_ptr_array_unref(chardevs);
    chardevs = NULL;
}
