/*
 * Listening on an inherited socket (fd addresses), and connecting with a
 * time limit (socket_connect_deadline) and without
 * blocking (socket_connect_start/continue), against listeners on this
 * host: a healthy one, a closed port, and listeners whose backlog is
 * full, which is how a host that drops the SYNs looks to TCP (the kernel
 * drops a SYN that finds the accept queue full) and how a unix server
 * that stopped accepting looks.
 */
#include "util/sockets.h"
#include "util/socket-activation.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Short, so that the suite stays fast; long enough for a loaded host. */
#define DEADLINE_US     (300 * 1000)

typedef struct Listener {
    int fd;
    int fillers[2];
    SocketAddress *addr;
    char *dir;
} Listener;

/* A listener with room for one pending connection, never accepting. */
static void listener_open(Listener *l, SocketAddressType type)
{
    *l = (Listener) { .fd = -1, .fillers = { -1, -1 } };
    if (type == SOCKET_ADDRESS_TYPE_INET) {
        struct sockaddr_in sin = { .sin_family = AF_INET };
        socklen_t len = sizeof(sin);
        g_autofree char *port = NULL;

        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        g_assert_cmpint(bind(l->fd, (struct sockaddr *)&sin, sizeof(sin)),
                        ==, 0);
        g_assert_cmpint(getsockname(l->fd, (struct sockaddr *)&sin, &len),
                        ==, 0);
        port = g_strdup_printf("%u", ntohs(sin.sin_port));
        l->addr = socket_address_new_inet("127.0.0.1", port);
    } else {
        struct sockaddr_un un = { .sun_family = AF_UNIX };

        l->dir = g_dir_make_tmp("test-sockets-XXXXXX", NULL);
        g_assert_nonnull(l->dir);
        snprintf(un.sun_path, sizeof(un.sun_path), "%s/s", l->dir);
        l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        g_assert_cmpint(bind(l->fd, (struct sockaddr *)&un, sizeof(un)),
                        ==, 0);
        l->addr = socket_address_new_unix(un.sun_path);
    }
    g_assert_cmpint(listen(l->fd, 0), ==, 0);
}

/*
 * Fills the backlog with connections of our own: later TCP SYNs are
 * dropped, later unix connects wait (EAGAIN when non-blocking).
 */
static void listener_fill(Listener *l)
{
    for (int i = 0; i < 2; i++) {
        SocketConnect c;
        int ret = socket_connect_start(&c, l->addr, &error_abort);

        if (ret >= 0) {
            l->fillers[i] = ret;
        } else {
            /* the second one is dropped or refused for now: keep it */
            l->fillers[i] = c.fd;
            c.fd = -1;
            socket_connect_abort(&c);
        }
    }
    /* TCP: the first filler's handshake completes */
    g_usleep(100 * 1000);
}

static void listener_close(Listener *l)
{
    for (int i = 0; i < 2; i++) {
        if (l->fillers[i] >= 0) {
            close(l->fillers[i]);
        }
    }
    close(l->fd);
    if (l->dir) {
        g_autofree char *path = g_strdup_printf("%s/s", l->dir);

        unlink(path);
        rmdir(l->dir);
        g_free(l->dir);
    }
    socket_address_free(l->addr);
}

static void check_timeout(SocketAddressType type)
{
    Listener l;
    Error *err = NULL;
    int64_t start, took;
    g_autofree char *name = NULL;
    g_autofree char *want = NULL;
    int ret;

    listener_open(&l, type);
    listener_fill(&l);
    name = socket_address_to_string(l.addr);
    start = g_get_monotonic_time();
    ret = socket_connect_deadline(l.addr, start + DEADLINE_US, &err);
    took = g_get_monotonic_time() - start;
    g_assert_cmpint(ret, ==, -ETIMEDOUT);
    want = g_strdup_printf("Failed to connect to '%s': Connection timed out",
                           name);
    g_assert_cmpstr(error_get_pretty(err), ==, want);
    error_free(err);
    /* bounded by the deadline, not by the kernel's retries */
    g_assert_cmpint(took, >=, DEADLINE_US - 10 * 1000);
    g_assert_cmpint(took, <, 5 * G_USEC_PER_SEC);
    listener_close(&l);
}

static void test_tcp_timeout(void)
{
    check_timeout(SOCKET_ADDRESS_TYPE_INET);
}

static void test_unix_timeout(void)
{
    check_timeout(SOCKET_ADDRESS_TYPE_UNIX);
}

/* A listener with room connects at once; the fd is blocking. */
static void check_healthy(SocketAddressType type)
{
    Listener l;
    int fd, peer;

    listener_open(&l, type);
    fd = socket_connect_deadline(l.addr, g_get_monotonic_time() +
                                 5 * G_USEC_PER_SEC, &error_abort);
    g_assert_cmpint(fd, >=, 0);
    g_assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
    g_assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    peer = accept(l.fd, NULL, NULL);
    g_assert_cmpint(peer, >=, 0);
    g_assert_cmpint(write(peer, "x", 1), ==, 1);
    {
        char c;

        g_assert_cmpint(read(fd, &c, 1), ==, 1);
        g_assert_cmpint(c, ==, 'x');
    }
    close(peer);
    close(fd);
    listener_close(&l);
}

static void test_tcp_healthy(void)
{
    check_healthy(SOCKET_ADDRESS_TYPE_INET);
}

static void test_unix_healthy(void)
{
    check_healthy(SOCKET_ADDRESS_TYPE_UNIX);
}

/* A closed port is refused at once, with QEMU's message. */
static void test_tcp_refused(void)
{
    Listener l;
    Error *err = NULL;
    g_autofree char *want = NULL;
    int ret;

    listener_open(&l, SOCKET_ADDRESS_TYPE_INET);
    close(l.fd);
    l.fd = socket(AF_INET, SOCK_STREAM, 0);     /* for listener_close */
    want = g_strdup_printf("Failed to connect to '127.0.0.1:%s': "
                           "Connection refused", l.addr->port);
    ret = socket_connect_deadline(l.addr, g_get_monotonic_time() +
                                  5 * G_USEC_PER_SEC, &err);
    g_assert_cmpint(ret, ==, -ECONNREFUSED);
    g_assert_cmpstr(error_get_pretty(err), ==, want);
    error_free(err);
    listener_close(&l);
}

/*
 * The non-blocking steps: a connect to a full TCP backlog stays in
 * progress (the caller may poll and give up when it likes); the fd is
 * non-blocking, and abort closes it.
 */
static void test_tcp_in_progress(void)
{
    Listener l;
    SocketConnect c;
    struct pollfd pfd;
    int ret;

    listener_open(&l, SOCKET_ADDRESS_TYPE_INET);
    listener_fill(&l);
    ret = socket_connect_start(&c, l.addr, &error_abort);
    g_assert_cmpint(ret, ==, -EINPROGRESS);
    g_assert_cmpint(c.fd, >=, 0);
    g_assert_true(fcntl(c.fd, F_GETFL) & O_NONBLOCK);
    pfd = (struct pollfd) { .fd = c.fd, .events = POLLOUT };
    g_assert_cmpint(poll(&pfd, 1, 200), ==, 0);
    /* asked too soon, it says so rather than taking SO_ERROR's 0 */
    g_assert_cmpint(socket_connect_continue(&c, &error_abort), ==,
                    -EINPROGRESS);
    socket_connect_abort(&c);
    g_assert_cmpint(c.fd, ==, -1);
    socket_connect_abort(&c);
    listener_close(&l);
}

/*
 * An fd address: a bound unix socket, not listening yet, is made to
 * listen, non-blocking and close-on-exec, and accepts; as a connection,
 * a listening socket is refused and a connected one taken as it is.
 */
static void test_fd_listen(void)
{
    g_autofree char *dir = g_dir_make_tmp("test-sockets-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "s", NULL);
    struct sockaddr_un un = { .sun_family = AF_UNIX };
    g_autofree char *str = NULL, *name = NULL, *want = NULL;
    g_autoptr(SocketAddress) addr = NULL;
    g_autoptr(SocketAddress) unix_addr = socket_address_new_unix(path);
    Error *err = NULL;
    int fd, lfd, client, conn;

    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    g_strlcpy(un.sun_path, path, sizeof(un.sun_path));
    g_assert_cmpint(bind(fd, (struct sockaddr *)&un, sizeof(un)), ==, 0);
    str = g_strdup_printf("%d", fd);
    addr = socket_address_new_fd(str);
    name = socket_address_to_string(addr);
    want = g_strdup_printf("fd:%d", fd);
    g_assert_cmpstr(name, ==, want);

    lfd = socket_listen(addr, 1, &error_abort);
    g_assert_cmpint(lfd, ==, fd);
    g_assert_true(fcntl(lfd, F_GETFL) & O_NONBLOCK);
    g_assert_true(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
    client = socket_connect(unix_addr, &error_abort);
    g_assert_cmpint(client, >=, 0);
    conn = socket_accept(lfd);
    g_assert_cmpint(conn, >=, 0);

    /* a listening socket is no connection */
    g_assert_cmpint(socket_connect(addr, &err), ==, -EINVAL);
    g_assert_nonnull(strstr(error_get_pretty(err), "is a listening socket"));
    g_clear_pointer(&err, error_free);
    /* an inherited connection is taken as it is, blocking */
    {
        g_autofree char *cstr = g_strdup_printf("%d", conn);
        g_autoptr(SocketAddress) caddr = socket_address_new_fd(cstr);
        SocketConnect sc;
        char byte = 'x';

        g_assert_cmpint(socket_connect(caddr, &error_abort), ==, conn);
        g_assert_false(fcntl(conn, F_GETFL) & O_NONBLOCK);
        g_assert_cmpint(write(client, &byte, 1), ==, 1);
        g_assert_cmpint(read(conn, &byte, 1), ==, 1);
        /* without blocking, there is nothing to connect */
        g_assert_cmpint(socket_connect_start(&sc, caddr, &err), ==, -EINVAL);
        g_assert_nonnull(strstr(error_get_pretty(err),
                                "cannot be connected again"));
        g_clear_pointer(&err, error_free);
    }
    close(conn);
    close(client);
    close(lfd);
    unlink(path);
    rmdir(dir);
}

/* Not a number, not a socket, not in the monitor's names; nothing closed. */
static void test_fd_errors(void)
{
    int pipefd[2];
    g_autofree char *str = NULL;
    struct {
        const char *str;
        const char *msg;
    } cases[] = {
        { "abc", "Unable to parse FD number abc" },
        { "3x", "Unable to parse FD number 3x" },
        { "-1", "File descriptor '-1' is not a socket" },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(SocketAddress) addr = socket_address_new_fd(cases[i].str);
        Error *err = NULL;

        g_assert_cmpint(socket_listen(addr, 1, &err), <, 0);
        g_assert_cmpstr(error_get_pretty(err), ==, cases[i].msg);
        error_free(err);
    }

    g_assert_cmpint(pipe(pipefd), ==, 0);
    str = g_strdup_printf("%d", pipefd[0]);
    {
        g_autoptr(SocketAddress) addr = socket_address_new_fd(str);
        g_autofree char *msg = g_strdup_printf(
            "File descriptor '%d' is not a socket", pipefd[0]);
        Error *err = NULL;
        int sv[2];

        g_assert_cmpint(socket_listen(addr, 1, &err), ==, -ENOTSOCK);
        g_assert_cmpstr(error_get_pretty(err), ==, msg);
        g_clear_pointer(&err, error_free);
        /* the descriptor is not ours: still open */
        g_assert_cmpint(fcntl(pipefd[0], F_GETFD), >=, 0);

        /* a real socket, but a command may not name it by number */
        g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
        g_free(addr->str);
        addr->str = g_strdup_printf("%d", sv[0]);
        socket_set_fd_names_only(true);
        g_assert_cmpint(socket_listen(addr, 1, &err), ==, -EINVAL);
        socket_set_fd_names_only(false);
        g_assert_cmpstr(error_get_pretty(err), ==,
                        "only QEMU supports file descriptor passing");
        error_free(err);
        g_assert_cmpint(fcntl(sv[0], F_GETFD), >=, 0);
        close(sv[0]);
        close(sv[1]);
    }
    close(pipefd[0]);
    close(pipefd[1]);
}

static void set_activation_env(const char *pid, const char *fds)
{
    g_setenv("LISTEN_PID", pid, true);
    g_setenv("LISTEN_FDS", fds, true);
    g_setenv("LISTEN_FDNAMES", "nbd", true);
}

/*
 * socket_activation_check(), in a subprocess that owns descriptors 3 and
 * 4: the variables must name this process; the handed-over descriptors
 * become close-on-exec and the variables go; a missing one fails.
 */
static void test_socket_activation(void)
{
    if (g_test_subprocess()) {
        g_autofree char *self = g_strdup_printf("%d", (int)getpid());
        Error *err = NULL;
        int sv[2];

        g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
        g_assert_cmpint(dup2(sv[0], 3), ==, 3);
        close(4);

        g_unsetenv("LISTEN_PID");
        g_assert_cmpint(socket_activation_check(&error_abort), ==, 0);
        set_activation_env("1", "1");
        g_assert_cmpint(socket_activation_check(&error_abort), ==, 0);
        g_assert_cmpstr(g_getenv("LISTEN_FDS"), ==, "1");
        set_activation_env(self, "1x");
        g_assert_cmpint(socket_activation_check(&error_abort), ==, 0);

        set_activation_env(self, "1");
        g_assert_false(fcntl(3, F_GETFD) & FD_CLOEXEC);
        g_assert_cmpint(socket_activation_check(&error_abort), ==, 1);
        g_assert_true(fcntl(3, F_GETFD) & FD_CLOEXEC);
        g_assert_null(g_getenv("LISTEN_PID"));
        g_assert_null(g_getenv("LISTEN_FDS"));
        g_assert_null(g_getenv("LISTEN_FDNAMES"));

        set_activation_env(self, "2");
        g_assert_cmpint(socket_activation_check(&err), ==, -EBADF);
        g_assert_cmpstr(error_get_pretty(err), ==,
                        "Socket activation failed: invalid file descriptor "
                        "fd = 4: Bad file descriptor");
        error_free(err);
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/sockets/tcp/timeout", test_tcp_timeout);
    g_test_add_func("/sockets/unix/timeout", test_unix_timeout);
    g_test_add_func("/sockets/tcp/healthy", test_tcp_healthy);
    g_test_add_func("/sockets/unix/healthy", test_unix_healthy);
    g_test_add_func("/sockets/tcp/refused", test_tcp_refused);
    g_test_add_func("/sockets/tcp/in-progress", test_tcp_in_progress);
    g_test_add_func("/sockets/fd/listen", test_fd_listen);
    g_test_add_func("/sockets/fd/errors", test_fd_errors);
    g_test_add_func("/sockets/activation", test_socket_activation);
    return g_test_run();
}
