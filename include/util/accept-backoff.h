/*
 * The back-off of a listening socket (SOCKET_ACCEPT_BACKOFF_NS in
 * util/sockets.h): after an accept that failed for lack of descriptors or
 * memory, the listener stops watching its socket until a timer fires, and
 * the failure is reported once until a connection is accepted again.
 * The NBD server, the vhost-user server and the storage daemon's chardevs
 * listen this way; each decides itself when its socket is registered with
 * the loop, and asks accept_backoff_active() as one of its reasons.
 *
 * Runs in the thread of the AioContext given at init.
 */
#ifndef QBLOCK_UTIL_ACCEPT_BACKOFF_H
#define QBLOCK_UTIL_ACCEPT_BACKOFF_H

#include "util/osdep.h"

#include "util/aio.h"

typedef struct AcceptBackoff {
    QEMUTimer *timer;
    bool active;                /* backing off until the timer fires */
    bool logged;                /* reported since the last accepted one */
    /* active changed: the owner (un)registers its listening socket */
    void (*changed)(void *opaque);
    void *opaque;
} AcceptBackoff;

/* @b must not move until accept_backoff_cleanup(): its timer points to it. */
void accept_backoff_init(AcceptBackoff *b, AioContext *ctx,
                         void (*changed)(void *opaque), void *opaque);

/* Stops the timer; @b may be one that was never initialised (zeroed). */
void accept_backoff_cleanup(AcceptBackoff *b);

static inline bool accept_backoff_active(const AcceptBackoff *b)
{
    return b->active;
}

/*
 * Looks at socket_accept()'s result @fd.  Out of descriptors or memory:
 * reports it unless already reported ("<what>: <strerror>; retrying every
 * N ms", @what formatted from @fmt), becomes active, calls changed() and
 * arms the timer, whose expiry makes it inactive and calls changed()
 * again; returns true: the caller stops accepting for now.  Otherwise
 * returns false; a connection (@fd >= 0) lets the next failure be
 * reported again.
 */
bool accept_backoff_check(AcceptBackoff *b, int fd, const char *fmt, ...)
    QEMU_PRINTF(3, 4);

#endif
