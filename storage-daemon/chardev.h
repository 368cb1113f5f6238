/*
 * Character devices: where the daemon's monitors get their connections
 * (--chardev, qapi/storage-daemon.json's ChardevOptions).
 *
 *  - socket,server=on: listens on a unix socket.  Every connection it
 *    accepts goes to its user, so several clients may use the monitor at
 *    once (QEMU's socket chardev serves one at a time and keeps the next
 *    in the listen backlog).  With wait=on (the default, as in QEMU) the
 *    daemon waits for the first client before it goes on starting.  The
 *    socket file is removed when the daemon ends.
 *  - socket,server=off: connects to a listening socket when created; one
 *    connection.
 *  - stdio: standard input and output; one connection.
 *  - null: reads nothing (end of file), discards what is written; file:
 *    writes to a file, reads from another or nothing; one connection.
 *  - ringbuf (or memory): a ring buffer that QMP's ringbuf-write and
 *    ringbuf-read fill and drain; no monitor can use it.
 *
 * A device has at most one user (a monitor).  Connections that come
 * before the user attaches wait for it.  Listening sockets are accepted
 * from the main loop.
 */
#ifndef QBLOCK_CHARDEV_H
#define QBLOCK_CHARDEV_H

#include "util/json.h"

typedef struct Chardev Chardev;

/*
 * A new connection: @in_fd and @out_fd (the same fd for sockets), which
 * the callee takes over.  @out_fd may not be pollable (stdout on a file):
 * see chardev_fd_is_pollable().
 */
typedef void ChardevConnectFunc(void *opaque, int in_fd, int out_fd);

/*
 * Creates a device from @opts, a ChardevOptions object checked against
 * the schema.  Errors: a duplicate id, a socket that cannot be created,
 * bound or connected (the message names the path).
 */
Chardev *chardev_add(JsonObject *opts, Error **errp);
/* The device @id, or NULL with QEMU's error: chardev "x" not found. */
Chardev *chardev_find(const char *id, Error **errp);
/*
 * Makes @fn the user of @chr (errors: "Device 'x' is in use").  Waiting
 * connections are handed over at once.
 */
int chardev_attach(Chardev *chr, ChardevConnectFunc *fn, void *opaque,
                   Error **errp);
/* A server=on,wait=on device that has not had its first client yet. */
bool chardev_is_waiting(Chardev *chr);
/* The text QEMU prints while it waits: "disconnected:unix:PATH,server=on" */
char *chardev_describe(Chardev *chr);

/* True if epoll can watch @fd (not a regular file, not /dev/null). */
bool chardev_fd_is_pollable(int fd);

/* Whether a device uses standard input and output already. */
bool chardev_stdio_in_use(void);

/*
 * chardev-remove: errors are QEMU's ("Chardev 'x' not found", "Chardev
 * 'x' is busy" while a monitor uses it).
 */
int chardev_remove(const char *id, Error **errp);
/*
 * chardev-change: @opts as chardev_add()'s, for the device of its id,
 * which no monitor may use; if the new device cannot be made the old one
 * stays.
 */
int chardev_change(JsonObject *opts, Error **errp);

/* Calls @fn on every device, oldest first (query-chardev). */
void chardev_foreach(void (*fn)(Chardev *chr, void *opaque), void *opaque);
const char *chardev_id(Chardev *chr);
/* What QEMU's query-chardev says it is ("null", "unix:PATH", ...). */
char *chardev_filename(Chardev *chr);
/* A connection that chardev_attach()'s function got has ended. */
void chardev_connection_ended(Chardev *chr);
/* Whether a monitor uses it (query-chardev's frontend-open). */
bool chardev_has_user(Chardev *chr);

/*
 * ringbuf-write and ringbuf-read on the ringbuf device @id: a full ring
 * loses its oldest bytes; a read takes at most @size (> 0) of the oldest.
 * Errors are QEMU's ("Device 'x' not found", "x is not a ringbuf device").
 */
int chardev_ringbuf_write(const char *id, const uint8_t *buf, size_t len,
                          Error **errp);
GByteArray *chardev_ringbuf_read(const char *id, int64_t size,
                                 Error **errp);

/* Closes every device: listeners stop, socket files are removed. */
void chardev_cleanup(void);

#endif
