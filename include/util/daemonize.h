/*
 * Running in the background as qemu-nbd --fork and qemu-storage-daemon
 * --daemonize do: the parent stays until the child serves or fails,
 * passing the child's messages on to its own standard error, and exits
 * with the outcome (0 once the child serves, 1 if it ended before).
 */
#ifndef QBLOCK_UTIL_DAEMONIZE_H
#define QBLOCK_UTIL_DAEMONIZE_H

#include "util/osdep.h"
#include "util/error.h"

typedef struct QemuDaemon {
    int ready_fd;       /* the child tells the parent it serves here */
    int saved_stderr;   /* the parent's standard error, in the child */
} QemuDaemon;

/*
 * Forks.  Returns in the child only, in a session of its own, its
 * standard error read by the parent; the parent exits when the child
 * calls qemu_daemon_ready() (0) or ends without (1).  Failing to fork
 * exits 1 with a message.
 */
void qemu_daemon_fork(QemuDaemon *d);

/* What the child keeps when it detaches. */
typedef enum QemuDaemonReadyFlags {
    QEMU_DAEMON_KEEP_STDERR = 1 << 0,   /* the parent's stderr (verbose) */
} QemuDaemonReadyFlags;

/*
 * The child serves: its standard input and output (and error, unless
 * @flags keep it) go to /dev/null, and the parent exits 0.
 */
void qemu_daemon_ready(QemuDaemon *d, QemuDaemonReadyFlags flags);

/*
 * Writes this process's ID and a newline to @path (created 0600, as
 * QEMU's programs do) and keeps it locked while the returned descriptor
 * is open, so that a second server given the same file fails instead of
 * overwriting it.  Returns the descriptor, or -1 with @errp set.  What
 * happens to the file at exit is the caller's: qemu-storage-daemon
 * removes it, qemu-nbd leaves it.
 */
int qemu_write_pidfile(const char *path, Error **errp);

#endif
