/*
 * Running in the background (include/util/daemonize.h).
 *
 * Two pipes join the parent and the child: the child's standard error,
 * which the parent copies to its own until the child lets it go (so the
 * reason of a failed start reaches whoever started the program, and a
 * warning on the way is only a warning), and one byte that says the
 * child serves.  The parent reads the first to its end, then the second:
 * a byte is success, the end of the pipe (the child died) is failure.
 */
#include "util/daemonize.h"
#include "util/error.h"

#include <sys/file.h>

static void qemu_daemon_parent(int err_fd, int ready_fd)
{
    char buf[4096];
    ssize_t n;

    while ((n = read(err_fd, buf, sizeof(buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (write(STDERR_FILENO, buf, n) < 0) {
            break;
        }
    }
    do {
        n = read(ready_fd, buf, 1);
    } while (n < 0 && errno == EINTR);
    _exit(n == 1 ? EXIT_SUCCESS : EXIT_FAILURE);
}

void qemu_daemon_fork(QemuDaemon *d)
{
    int err_pipe[2], ready_pipe[2];
    pid_t pid;

    if (pipe2(err_pipe, O_CLOEXEC) < 0 || pipe2(ready_pipe, O_CLOEXEC) < 0) {
        error_report("Failed to create a pipe: %s", strerror(errno));
        exit(EXIT_FAILURE);
    }
    /* what is buffered is printed once, not by both processes */
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        error_report("Failed to fork: %s", strerror(errno));
        exit(EXIT_FAILURE);
    }
    if (pid > 0) {
        close(err_pipe[1]);
        close(ready_pipe[1]);
        qemu_daemon_parent(err_pipe[0], ready_pipe[0]);
    }
    close(err_pipe[0]);
    close(ready_pipe[0]);
    setsid();
    d->saved_stderr = dup(STDERR_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[1]);
    d->ready_fd = ready_pipe[1];
}

void qemu_daemon_ready(QemuDaemon *d, QemuDaemonReadyFlags flags)
{
    int null_fd = open("/dev/null", O_RDWR);

    if (flags & QEMU_DAEMON_KEEP_STDERR) {
        dup2(d->saved_stderr, STDERR_FILENO);
    } else if (null_fd >= 0) {
        dup2(null_fd, STDERR_FILENO);
    }
    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
        if (null_fd > STDERR_FILENO) {
            close(null_fd);
        }
    }
    close(d->saved_stderr);
    if (write(d->ready_fd, "R", 1) != 1) {
        /* the parent is gone; nobody waits for the news */
    }
    close(d->ready_fd);
    d->ready_fd = d->saved_stderr = -1;
}

int qemu_write_pidfile(const char *path, Error **errp)
{
    g_autofree char *pid = g_strdup_printf("%d\n", (int)getpid());
    size_t len = strlen(pid);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

    if (fd < 0) {
        error_setg_errno(errp, errno, "Could not create '%s'", path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        error_setg_errno(errp, errno, "Cannot lock pid file '%s'", path);
        close(fd);
        return -1;
    }
    if (ftruncate(fd, 0) < 0 || write(fd, pid, len) != (ssize_t)len) {
        error_setg_errno(errp, errno, "Failed to write pid file '%s'", path);
        close(fd);
        return -1;
    }
    return fd;
}
