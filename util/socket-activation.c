/*
 * systemd's socket activation protocol (see socket-activation.h).
 *
 * Our own code rather than libsystemd's sd_listen_fds(): the protocol is
 * two environment variables, and the messages are qemu-nbd's.
 */
#include "util/socket-activation.h"

#include <fcntl.h>

#include "util/cutils.h"

/* A variable's value as a whole decimal number, or false. */
static bool socket_activation_var(const char *name, uint64_t *value)
{
    const char *s = getenv(name);

    return s && qemu_strtou64(s, NULL, 10, value) == 0;
}

int socket_activation_check(Error **errp)
{
    uint64_t pid, nr_fds;

    if (!socket_activation_var("LISTEN_PID", &pid) || pid != getpid() ||
        !socket_activation_var("LISTEN_FDS", &nr_fds)) {
        return 0;
    }
    if (nr_fds > INT_MAX - SOCKET_ACTIVATION_FIRST_FD) {
        nr_fds = INT_MAX - SOCKET_ACTIVATION_FIRST_FD;
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    for (uint64_t i = 0; i < nr_fds; i++) {
        int fd = SOCKET_ACTIVATION_FIRST_FD + i;
        int flags = fcntl(fd, F_GETFD);

        if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
            error_setg_errno(errp, errno, "Socket activation failed: "
                             "invalid file descriptor fd = %d", fd);
            return -EBADF;
        }
    }
    return nr_fds;
}
