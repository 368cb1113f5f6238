/*
 * Stream sockets: addresses, listening and connecting (see sockets.h).
 */
#include "util/osdep.h"
#include "util/sockets.h"

#include "util/cutils.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

SocketAddress *socket_address_new_inet(const char *host, const char *port)
{
    SocketAddress *addr = g_new0(SocketAddress, 1);

    addr->type = SOCKET_ADDRESS_TYPE_INET;
    addr->host = g_strdup(host);
    addr->port = g_strdup(port);
    return addr;
}

SocketAddress *socket_address_new_unix(const char *path)
{
    SocketAddress *addr = g_new0(SocketAddress, 1);

    addr->type = SOCKET_ADDRESS_TYPE_UNIX;
    addr->path = g_strdup(path);
    return addr;
}

SocketAddress *socket_address_new_fd(const char *str)
{
    SocketAddress *addr = g_new0(SocketAddress, 1);

    addr->type = SOCKET_ADDRESS_TYPE_FD;
    addr->str = g_strdup(str);
    return addr;
}

void socket_address_free(SocketAddress *addr)
{
    if (!addr) {
        return;
    }
    g_free(addr->host);
    g_free(addr->port);
    g_free(addr->path);
    g_free(addr->str);
    g_free(addr);
}

char *socket_address_to_string(const SocketAddress *addr)
{
    if (addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
        return g_strdup(addr->path);
    }
    if (addr->type == SOCKET_ADDRESS_TYPE_FD) {
        return g_strdup_printf("fd:%s", addr->str);
    }
    /* IPv6 literals keep their brackets, as in URLs */
    if (strchr(addr->host, ':')) {
        return g_strdup_printf("[%s]:%s", addr->host, addr->port);
    }
    return g_strdup_printf("%s:%s", addr->host, addr->port);
}

/*
 * A unix stream socket (@flags: SOCK_NONBLOCK or 0, close-on-exec
 * always) and the address of @path in @un.  Returns the fd or -errno.
 */
static int socket_new_unix(const char *path, int flags,
                           struct sockaddr_un *un, Error **errp)
{
    int fd;

    memset(un, 0, sizeof(*un));
    un->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(un->sun_path)) {
        error_setg(errp, "UNIX socket path '%s' is too long", path);
        error_append_hint(errp, "Path must be less than %zu bytes\n",
                          sizeof(un->sun_path));
        return -ENAMETOOLONG;
    }
    strcpy(un->sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    if (fd < 0) {
        int ret = -errno;

        error_setg_errno(errp, errno, "Failed to create Unix socket");
        return ret;
    }
    return fd;
}

/*
 * QEMU unlinks whatever is at the path, even a regular file (an image
 * passed by mistake is lost); only a socket is replaced here.
 */
static int socket_remove_stale_unix(const char *path, Error **errp)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        int ret = -errno;

        if (errno == ENOENT) {
            return 0;
        }
        error_setg_errno(errp, errno, "Failed to bind socket to %s", path);
        return ret;
    }
    if (!S_ISSOCK(st.st_mode)) {
        error_setg(errp, "Failed to bind socket to %s: %s", path,
                   "the path exists and is not a socket");
        return -EEXIST;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        int ret = -errno;

        error_setg_errno(errp, errno, "Failed to unlink socket %s", path);
        return ret;
    }
    return 0;
}

/*
 * Binds @fd to @path and listens, so that @path appears only once the
 * socket listens: bind() alone makes the file, and a client that waits
 * for it and connects before listen() would be refused.  The socket is
 * bound to a temporary name beside @path and renamed into place; where
 * that name would not fit in sun_path, @path itself is bound.
 */
static int socket_bind_listen_unix(int fd, struct sockaddr_un *un,
                                   const char *path, int backlog,
                                   Error **errp)
{
    g_autofree char *tmp = g_strdup_printf("%s.%d.tmp", path, getpid());
    bool staged = strlen(tmp) < sizeof(un->sun_path);
    int ret;

    if (staged) {
        /* a crashed process of the same pid may have left it */
        ret = socket_remove_stale_unix(tmp, errp);
        if (ret < 0) {
            return ret;
        }
        strcpy(un->sun_path, tmp);
    }
    if (bind(fd, (struct sockaddr *)un, sizeof(*un)) < 0) {
        ret = -errno;
        error_setg_errno(errp, errno, "Failed to bind socket to %s", path);
        return ret;
    }
    if (listen(fd, backlog) < 0) {
        ret = -errno;
        error_setg_errno(errp, errno, "Failed to listen on socket");
        unlink(un->sun_path);
        return ret;
    }
    if (staged && rename(tmp, path) < 0) {
        ret = -errno;
        error_setg_errno(errp, errno, "Failed to bind socket to %s", path);
        unlink(tmp);
        return ret;
    }
    return 0;
}

int socket_listen_unix(const char *path, int backlog, SocketUnixFile *file,
                       Error **errp)
{
    struct sockaddr_un un;
    struct stat st;
    int fd = socket_new_unix(path, SOCK_NONBLOCK, &un, errp);
    int ret;

    if (fd < 0) {
        return fd;
    }
    ret = socket_remove_stale_unix(path, errp);
    if (ret == 0) {
        ret = socket_bind_listen_unix(fd, &un, path, backlog, errp);
    }
    if (ret < 0) {
        close(fd);
        return ret;
    }
    if (file) {
        /* a failed stat leaves an identity that matches no file */
        *file = (SocketUnixFile) { 0 };
        if (stat(path, &st) == 0) {
            file->dev = st.st_dev;
            file->ino = st.st_ino;
        }
    }
    return fd;
}

void socket_unlink_unix(const char *path, const SocketUnixFile *file)
{
    struct stat st;

    if (stat(path, &st) == 0 && st.st_dev == file->dev &&
        st.st_ino == file->ino) {
        unlink(path);
    }
}

static struct addrinfo *socket_resolve(const char *host, const char *port,
                                       int flags, Error **errp)
{
    struct addrinfo hints = {
        .ai_flags = flags | AI_ADDRCONFIG,
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
    };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);

    if (rc == EAI_BADFLAGS || (rc != 0 && (hints.ai_flags & AI_ADDRCONFIG))) {
        /* AI_ADDRCONFIG hides loopback when no interface is configured */
        hints.ai_flags &= ~AI_ADDRCONFIG;
        rc = getaddrinfo(host, port, &hints, &res);
    }
    if (rc != 0) {
        error_setg(errp, "address resolution failed for %s:%s: %s", host,
                   port, gai_strerror(rc));
        return NULL;
    }
    return res;
}

static int socket_listen_inet(const char *host, const char *port,
                              int backlog, Error **errp)
{
    struct addrinfo *res = socket_resolve(host, port, AI_PASSIVE, errp);
    int last_err = 0;

    if (!res) {
        return -EINVAL;
    }
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int one = 1;
        int fd = socket(ai->ai_family,
                        ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        ai->ai_protocol);

        if (fd < 0) {
            last_err = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ai->ai_family == AF_INET6) {
            /* "::" then serves IPv4 as well, as QEMU's does */
            int zero = 0;

            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            last_err = errno;
            close(fd);
            continue;
        }
        if (listen(fd, backlog) < 0) {
            int ret = -errno;

            error_setg_errno(errp, errno, "Failed to listen on socket");
            close(fd);
            freeaddrinfo(res);
            return ret;
        }
        freeaddrinfo(res);
        return fd;
    }
    freeaddrinfo(res);
    if (last_err == EADDRINUSE) {
        error_setg_errno(errp, last_err, "Failed to find an available port");
    } else {
        error_setg_errno(errp, last_err, "Failed to bind socket");
    }
    return -last_err;
}

static bool socket_fd_names_only;

void socket_set_fd_names_only(bool on)
{
    socket_fd_names_only = on;
}

/*
 * The socket an fd address names, in QEMU's words when it names none.
 * One that is not a socket is left open: it is not ours to close.
 */
static int socket_get_fd(const char *str, Error **errp)
{
    struct stat st;
    int fd;

    if (socket_fd_names_only) {
        error_setg(errp, "only QEMU supports file descriptor passing");
        return -EINVAL;
    }
    if (qemu_strtoi(str, NULL, 10, &fd) < 0) {
        error_setg(errp, "Unable to parse FD number %s", str);
        return -EINVAL;
    }
    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        error_setg(errp, "File descriptor '%s' is not a socket", str);
        return -ENOTSOCK;
    }
    return fd;
}

/*
 * An inherited socket made like the ones created here (sockets.h):
 * close-on-exec, non-blocking or blocking as @nonblock says.
 */
static int socket_adopt_fd(int fd, const char *str, bool nonblock,
                           Error **errp)
{
    int flags = fcntl(fd, F_GETFL);

    if (flags < 0 ||
        fcntl(fd, F_SETFL, nonblock ? flags | O_NONBLOCK
                                    : flags & ~O_NONBLOCK) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        int ret = -errno;

        error_setg_errno(errp, errno, "File descriptor '%s'", str);
        return ret;
    }
    return fd;
}

static int socket_listen_fd(const char *str, int backlog, Error **errp)
{
    int fd = socket_get_fd(str, errp);

    if (fd < 0) {
        return fd;
    }
    /* harmless on a socket that listens already (socket activation) */
    if (listen(fd, backlog) < 0) {
        int ret = -errno;

        error_setg_errno(errp, errno, "Failed to listen on fd socket");
        return ret;
    }
    return socket_adopt_fd(fd, str, true, errp);
}

int socket_listen(const SocketAddress *addr, int backlog, Error **errp)
{
    switch (addr->type) {
    case SOCKET_ADDRESS_TYPE_UNIX:
        return socket_listen_unix(addr->path, backlog, NULL, errp);
    case SOCKET_ADDRESS_TYPE_FD:
        return socket_listen_fd(addr->str, backlog, errp);
    case SOCKET_ADDRESS_TYPE_INET:
        break;
    }
    return socket_listen_inet(addr->host, addr->port, backlog, errp);
}

/* An inherited connection, as socket_connect() returns one. */
static int socket_connected_fd(const char *str, Error **errp)
{
    int fd = socket_get_fd(str, errp);
    int listening = 0;
    socklen_t len = sizeof(listening);

    if (fd < 0) {
        return fd;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 &&
        listening) {
        error_setg(errp, "File descriptor '%s' is a listening socket, not a "
                   "connection", str);
        return -EINVAL;
    }
    return socket_adopt_fd(fd, str, false, errp);
}

/* Connections without blocking are made to inet and unix addresses. */
static int socket_connect_refuse_fd(const SocketAddress *addr, Error **errp)
{
    error_setg(errp, "File descriptor '%s': an inherited connection cannot "
               "be connected again", addr->str);
    return -EINVAL;
}

static int socket_connect_unix(const char *path, Error **errp)
{
    struct sockaddr_un un;
    int fd = socket_new_unix(path, 0, &un, errp);
    int ret;

    if (fd < 0) {
        return fd;
    }
    if (connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
        ret = -errno;
        error_setg_errno(errp, errno, "Failed to connect to '%s'", path);
        close(fd);
        return ret;
    }
    return fd;
}

static int socket_connect_inet(const char *host, const char *port,
                               Error **errp)
{
    struct addrinfo *res = socket_resolve(host, port, 0, errp);
    int last_err = ECONNREFUSED;

    if (!res) {
        return -EINVAL;
    }
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int one = 1;
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                        ai->ai_protocol);

        if (fd < 0) {
            last_err = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            last_err = errno;
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        freeaddrinfo(res);
        return fd;
    }
    freeaddrinfo(res);
    error_setg_errno(errp, last_err, "Failed to connect to '%s:%s'", host,
                     port);
    return -last_err;
}

int socket_connect(const SocketAddress *addr, Error **errp)
{
    if (addr->type == SOCKET_ADDRESS_TYPE_FD) {
        return socket_connected_fd(addr->str, errp);
    }
    if (addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
        return socket_connect_unix(addr->path, errp);
    }
    return socket_connect_inet(addr->host, addr->port, errp);
}

/* ---------------------------------------------------------------------- */
/* Connecting without blocking (sockets.h) */

/* @fd is connected: hands it over (SocketConnect's contract). */
static int socket_connect_done(SocketConnect *c, int fd)
{
    int one = 1;

    if (c->res) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    c->fd = -1;
    socket_connect_abort(c);
    return fd;
}

static int socket_connect_fail(SocketConnect *c, Error **errp)
{
    int err = c->last_err;

    error_setg_errno(errp, err, "Failed to connect to '%s'", c->name);
    socket_connect_abort(c);
    return -err;
}

/* Starts a connect to the next address resolved, while one is left. */
static int socket_connect_next_inet(SocketConnect *c, Error **errp)
{
    while (c->next) {
        struct addrinfo *ai = c->next;
        int fd = socket(ai->ai_family,
                        ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        ai->ai_protocol);

        c->next = ai->ai_next;
        if (fd < 0) {
            c->last_err = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            return socket_connect_done(c, fd);
        }
        if (errno == EINPROGRESS) {
            c->fd = fd;
            return -EINPROGRESS;
        }
        c->last_err = errno;
        close(fd);
    }
    return socket_connect_fail(c, errp);
}

/* (Re)tries the unix connect of c->fd: a full backlog says EAGAIN. */
static int socket_connect_try_unix(SocketConnect *c, Error **errp)
{
    struct sockaddr_un un = { .sun_family = AF_UNIX };

    /* socket_new_unix() checked the length at the start */
    strcpy(un.sun_path, c->path);
    if (connect(c->fd, (struct sockaddr *)&un, sizeof(un)) == 0) {
        return socket_connect_done(c, c->fd);
    }
    if (errno == EAGAIN) {
        return -EAGAIN;
    }
    c->last_err = errno;
    return socket_connect_fail(c, errp);
}

int socket_connect_start(SocketConnect *c, const SocketAddress *addr,
                         Error **errp)
{
    *c = (SocketConnect) {
        .name = socket_address_to_string(addr),
        .fd = -1,
        .last_err = ECONNREFUSED,
    };
    if (addr->type == SOCKET_ADDRESS_TYPE_FD) {
        socket_connect_abort(c);
        return socket_connect_refuse_fd(addr, errp);
    }
    if (addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
        struct sockaddr_un un;
        int fd = socket_new_unix(addr->path, SOCK_NONBLOCK, &un, errp);

        if (fd < 0) {
            socket_connect_abort(c);
            return fd;
        }
        c->fd = fd;
        c->path = g_strdup(addr->path);
        return socket_connect_try_unix(c, errp);
    }
    c->res = socket_resolve(addr->host, addr->port, 0, errp);
    if (!c->res) {
        socket_connect_abort(c);
        return -EINVAL;
    }
    c->next = c->res;
    return socket_connect_next_inet(c, errp);
}

int socket_connect_continue(SocketConnect *c, Error **errp)
{
    struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };
    socklen_t len = sizeof(int);
    int err = 0;

    assert(c->fd >= 0);
    if (c->path) {
        return socket_connect_try_unix(c, errp);
    }
    /* SO_ERROR reads 0 while the connect is still under way */
    if (poll(&pfd, 1, 0) == 0) {
        return -EINPROGRESS;
    }
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
        err = errno;
    }
    if (err == 0) {
        return socket_connect_done(c, c->fd);
    }
    c->last_err = err;
    close(c->fd);
    c->fd = -1;
    return socket_connect_next_inet(c, errp);
}

void socket_connect_abort(SocketConnect *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    g_clear_pointer(&c->res, freeaddrinfo);
    c->next = NULL;
    g_clear_pointer(&c->path, g_free);
    g_clear_pointer(&c->name, g_free);
}

/* A unix server with a full backlog is asked again this often. */
#define SOCKET_CONNECT_RETRY_US     (10 * 1000)

int socket_connect_deadline(const SocketAddress *addr, int64_t deadline,
                            Error **errp)
{
    SocketConnect c;
    int ret = socket_connect_start(&c, addr, errp);

    while (ret == -EINPROGRESS || ret == -EAGAIN) {
        int64_t left = deadline - g_get_monotonic_time();
        struct pollfd pfd = { .fd = c.fd, .events = POLLOUT };

        if (left <= 0) {
            c.last_err = ETIMEDOUT;
            return socket_connect_fail(&c, errp);
        }
        if (ret == -EAGAIN) {
            g_usleep(MIN(left, SOCKET_CONNECT_RETRY_US));
        } else if (poll(&pfd, 1, (left + 999) / 1000) < 0 &&
                   errno != EINTR) {
            c.last_err = errno;
            return socket_connect_fail(&c, errp);
        }
        ret = socket_connect_continue(&c, errp);
    }
    if (ret >= 0) {
        int fl = fcntl(ret, F_GETFL);

        if (fl < 0 || fcntl(ret, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            g_autofree char *name = socket_address_to_string(addr);
            int err = errno;

            error_setg_errno(errp, err, "Failed to make the socket to '%s' "
                             "blocking", name);
            close(ret);
            return -err;
        }
    }
    return ret;
}

int socket_accept(int listen_fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int one = 1;
    int fd;

    do {
        fd = accept4(listen_fd, (struct sockaddr *)&ss, &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
    if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
        /* replies are small and latency matters more than packet count */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
}
