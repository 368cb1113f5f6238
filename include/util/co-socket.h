/*
 * CoSocket: a connected non-blocking socket that coroutines read and write.
 *
 * A read or write that would block registers the socket's fd with the
 * AioContext and yields; the fd handler wakes the coroutine when the fd
 * is ready.  The registration outlives the wait until an event finds no
 * one waiting, so a connection that waits again and again (a server
 * reading request after request) registers once, not twice per wait.  At most one coroutine waits to read and one to write at a
 * time (callers serialise their readers and their writers, e.g. with a
 * CoMutex); the two directions are independent.
 *
 * co_socket_shutdown() ends both directions: waiters wake up and every
 * later read or write fails with -ESHUTDOWN, so a server can end a
 * connection whose coroutines are blocked in I/O.
 *
 * Everything runs in the thread of the socket's AioContext.
 */
#ifndef QBLOCK_CO_SOCKET_H
#define QBLOCK_CO_SOCKET_H

#include "util/aio.h"

/*
 * A layer between the socket and its users (TLS, util/co-socket-tls.c):
 * it reads or writes the fd itself, never blocking.  Each returns the
 * bytes it took or gave (read: 0 at the end of the stream), -EAGAIN when
 * the fd must become ready first, or another -errno.
 */
typedef struct CoSocketFilter {
    ssize_t (*read)(void *opaque, void *buf, size_t len);
    ssize_t (*write)(void *opaque, const void *buf, size_t len);
} CoSocketFilter;

typedef enum CoSocketDirection {
    CO_SOCKET_READ,
    CO_SOCKET_WRITE,
} CoSocketDirection;

typedef struct CoSocket {
    int fd;
    AioContext *ctx;
    Coroutine *read_co;         /* waiting for the fd to be readable */
    Coroutine *write_co;        /* waiting for the fd to be writable */
    /* the directions the fd is registered for (invariant 1) */
    bool watch_read;
    bool watch_write;
    bool shut_down;
    bool poll_rare;             /* see co_socket_set_poll_rare() */
    const CoSocketFilter *filter;   /* NULL: plain recv/sendmsg */
    void *filter_opaque;
} CoSocket;

/* Takes over @fd (which must be non-blocking). */
void co_socket_init(CoSocket *s, int fd, AioContext *ctx);
/*
 * The socket's traffic is rare (a control channel): its events may wait
 * until an event loop's busy-poll window ends (aio_poll_rare in
 * util/aio.h), so that it does not keep the loop from polling.
 */
void co_socket_set_poll_rare(CoSocket *s);
/*
 * From now on every read and write goes through @filter (not for
 * co_socket_read_fds); the caller keeps @opaque alive until the socket is
 * closed.
 */
void co_socket_set_filter(CoSocket *s, const CoSocketFilter *filter,
                          void *opaque);
/*
 * Waits until the fd is ready for @dir (a filter's own handshake); at
 * most one coroutine per direction, as for reads and writes.
 */
void coroutine_fn co_socket_wait_fd(CoSocket *s, CoSocketDirection dir);
/*
 * Moves the socket's fd handlers to @ctx: unregisters them from the
 * current context (called in its thread); the next wait registers them
 * in @ctx, from @ctx's thread.  No coroutine may be waiting.
 */
void co_socket_set_aio_context(CoSocket *s, AioContext *ctx);
/*
 * Moves the socket's fd handlers to @ctx with its waiters: a coroutine
 * waiting on the socket resumes in @ctx (a node's connection moving to an
 * iothread while its reader waits).  The caller owns both contexts
 * (aio_context_acquire()), so no handler of either runs meanwhile.
 */
void co_socket_move(CoSocket *s, AioContext *ctx);
/* Unregisters and closes the fd; no coroutine may be waiting. */
void co_socket_close(CoSocket *s);
/* Shuts both directions down and wakes the waiters (see above). */
void co_socket_shutdown(CoSocket *s);

/*
 * Reads exactly @len bytes.  Returns 0, -EPIPE if the peer closed the
 * connection first (at any point), -ESHUTDOWN after co_socket_shutdown(),
 * or another -errno.
 */
int coroutine_fn co_socket_read_all(CoSocket *s, void *buf, size_t len);
/*
 * Waits until the fd is readable (or shut down: -ESHUTDOWN), for a
 * reader that knows it took everything that had arrived and would only
 * get EAGAIN from another read now.  With a filter (TLS, whose buffer
 * the fd does not show) it returns at once.  Returns 0 or -ESHUTDOWN.
 */
int coroutine_fn co_socket_wait_readable(CoSocket *s);
/*
 * Reads what has arrived, at least one byte and at most @len (> 0),
 * waiting if nothing has; through the filter, if one is set.  Returns the bytes read, or the errors of
 * co_socket_read_all().
 */
ssize_t coroutine_fn co_socket_read_some(CoSocket *s, void *buf, size_t len);
/*
 * Reads exactly @len bytes, like co_socket_read_all(), and collects the
 * file descriptors that arrive with them (SCM_RIGHTS) into @fds, at most
 * @max_fds; *@nfds says how many.  More descriptors than that, or
 * truncated ancillary data, fail with -EMSGSIZE.  On any error every
 * descriptor received is closed and *@nfds is 0.  Received descriptors
 * are close-on-exec.
 */
int coroutine_fn co_socket_read_fds(CoSocket *s, void *buf, size_t len,
                                    int *fds, size_t max_fds, size_t *nfds);
/* Writes all of @iov.  Returns 0 or -errno (-EPIPE: the peer is gone). */
int coroutine_fn co_socket_writev_all(CoSocket *s, const struct iovec *iov,
                                      unsigned int iovcnt);
/* Most descriptors co_socket_writev_fds() sends at once. */
#define CO_SOCKET_MAX_SEND_FDS 8
/*
 * The same, and @nfds (at most CO_SOCKET_MAX_SEND_FDS) file descriptors
 * with the first byte (SCM_RIGHTS); the caller keeps its own copies.
 * -EINVAL with a filter, which carries bytes only.
 */
int coroutine_fn co_socket_writev_fds(CoSocket *s, const struct iovec *iov,
                                      unsigned int iovcnt, const int *fds,
                                      size_t nfds);
int coroutine_fn co_socket_write_all(CoSocket *s, const void *buf,
                                     size_t len);

#endif
