/*
 * CoSocket: coroutine reads and writes on a non-blocking socket (see
 * co-socket.h).
 *
 * Invariants:
 *  1. The fd is registered with the context for reading iff
 *     s->watch_read (io_read is co_socket_readable), for writing iff
 *     s->watch_write.  A direction is watched while a coroutine waits in
 *     it, and from then on until its handler runs with no one waiting or
 *     the socket is closed: so a socket that is waited on again and again
 *     costs no epoll_ctl() per wait, and one that nobody reads from is
 *     dropped by the first event that finds it so (level-triggered epoll
 *     would otherwise report it on every poll).
 *  2. A waiting coroutine is woken only by the fd handler of its
 *     direction (or by co_socket_shutdown()), and the handler clears its
 *     pointer before waking it, so no coroutine is entered twice.
 *  3. A waiter resumes in s->ctx, where the handler that wakes it runs:
 *     its own context, except after co_socket_move(), which so takes the
 *     waiter along to the new one.
 */
#include "util/osdep.h"
#include "util/co-socket.h"

#include <sys/socket.h>

static void co_socket_readable(void *opaque);
static void co_socket_writable(void *opaque);

/* Invariant 1: registers the fd for the directions in s->watch_*. */
static void co_socket_update_handler(CoSocket *s)
{
    IOHandler *io_read = s->watch_read ? co_socket_readable : NULL;
    IOHandler *io_write = s->watch_write ? co_socket_writable : NULL;

    if (s->poll_rare) {
        aio_set_fd_handler_rare(s->ctx, s->fd, io_read, io_write, s);
    } else {
        aio_set_fd_handler(s->ctx, s->fd, io_read, io_write, s);
    }
}

/*
 * The direction is ready: wakes its waiter, or stops watching it if no
 * one waits.  Nothing touches @s after the wake-up: the coroutine may
 * finish and free the socket's owner (closing the socket, which
 * unregisters it) before aio_co_wake() returns.
 */
static void co_socket_wake(CoSocket *s, Coroutine **waiter, bool *watch)
{
    Coroutine *co = *waiter;

    if (!co) {
        *watch = false;
        co_socket_update_handler(s);
        return;
    }
    *waiter = NULL;
    aio_co_enter(s->ctx, co);     /* invariant 3 */
}

static void co_socket_readable(void *opaque)
{
    CoSocket *s = opaque;

    co_socket_wake(s, &s->read_co, &s->watch_read);
}

static void co_socket_writable(void *opaque)
{
    CoSocket *s = opaque;

    co_socket_wake(s, &s->write_co, &s->watch_write);
}

static void coroutine_fn co_socket_wait(CoSocket *s, Coroutine **waiter,
                                        bool *watch)
{
    assert(!*waiter);
    *waiter = qemu_coroutine_self();
    if (!*watch) {
        *watch = true;
        co_socket_update_handler(s);
    }
    qemu_coroutine_yield();
    /* invariant 2: whoever woke us cleared *waiter */
    assert(*waiter != qemu_coroutine_self());
}

void co_socket_init(CoSocket *s, int fd, AioContext *ctx)
{
    *s = (CoSocket) {
        .fd = fd,
        .ctx = ctx,
    };
}

void co_socket_set_poll_rare(CoSocket *s)
{
    s->poll_rare = true;
}

void co_socket_shutdown(CoSocket *s)
{
    if (s->shut_down) {
        return;
    }
    s->shut_down = true;
    shutdown(s->fd, SHUT_RDWR);
    /* the fd is now ready both ways: its handler wakes the waiters */
}

void co_socket_set_aio_context(CoSocket *s, AioContext *ctx)
{
    assert(!s->read_co && !s->write_co);
    if (s->fd >= 0 && (s->watch_read || s->watch_write)) {
        aio_set_fd_handler(s->ctx, s->fd, NULL, NULL, NULL);
    }
    /* invariant 1: nothing registered, nothing watched */
    s->watch_read = s->watch_write = false;
    s->ctx = ctx;
}

void co_socket_move(CoSocket *s, AioContext *ctx)
{
    bool watched = s->fd >= 0 && (s->watch_read || s->watch_write);

    if (watched) {
        aio_set_fd_handler(s->ctx, s->fd, NULL, NULL, NULL);
    }
    s->ctx = ctx;
    if (watched) {
        co_socket_update_handler(s);    /* invariant 1, in @ctx */
    }
}

void co_socket_close(CoSocket *s)
{
    assert(!s->read_co && !s->write_co);
    if (s->fd >= 0) {
        aio_set_fd_handler(s->ctx, s->fd, NULL, NULL, NULL);
        s->watch_read = s->watch_write = false;
        close(s->fd);
        s->fd = -1;
    }
}

/*
 * recv() or, with a filter, its read: the same conventions (-1 with
 * errno), so that the loops below serve both.
 */
static ssize_t co_socket_recv(CoSocket *s, void *buf, size_t len)
{
    ssize_t n;

    if (!s->filter) {
        return recv(s->fd, buf, len, 0);
    }
    n = s->filter->read(s->filter_opaque, buf, len);
    if (n < 0) {
        errno = -n;
        return -1;
    }
    return n;
}

/* sendmsg() or, with a filter, its write of the first buffer. */
static ssize_t co_socket_send(CoSocket *s, struct msghdr *msg)
{
    ssize_t n;

    if (!s->filter) {
        /* MSG_NOSIGNAL: a peer that went away is an error, not SIGPIPE */
        return sendmsg(s->fd, msg, MSG_NOSIGNAL);
    }
    n = s->filter->write(s->filter_opaque, msg->msg_iov[0].iov_base,
                         msg->msg_iov[0].iov_len);
    if (n < 0) {
        errno = -n;
        return -1;
    }
    return n;
}

void co_socket_set_filter(CoSocket *s, const CoSocketFilter *filter,
                          void *opaque)
{
    s->filter = filter;
    s->filter_opaque = opaque;
}

void coroutine_fn co_socket_wait_fd(CoSocket *s, CoSocketDirection dir)
{
    if (dir == CO_SOCKET_WRITE) {
        co_socket_wait(s, &s->write_co, &s->watch_write);
    } else {
        co_socket_wait(s, &s->read_co, &s->watch_read);
    }
}

int coroutine_fn co_socket_read_all(CoSocket *s, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = co_socket_read_some(s, p, len);

        if (n < 0) {
            return n;
        }
        p += n;
        len -= n;
    }
    return 0;
}

int coroutine_fn co_socket_wait_readable(CoSocket *s)
{
    if (s->shut_down) {
        return -ESHUTDOWN;
    }
    if (s->filter) {
        /*
         * A filter (TLS) may hold decrypted bytes that no poll of the fd
         * would announce: let the next read find out, it waits if need be.
         */
        return 0;
    }
    co_socket_wait(s, &s->read_co, &s->watch_read);
    return 0;
}

ssize_t coroutine_fn co_socket_read_some(CoSocket *s, void *buf, size_t len)
{
    assert(len > 0);
    for (;;) {
        ssize_t n;

        if (s->shut_down) {
            return -ESHUTDOWN;
        }
        n = co_socket_recv(s, buf, len);
        if (n > 0) {
            return n;
        } else if (n == 0) {
            return s->shut_down ? -ESHUTDOWN : -EPIPE;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            co_socket_wait(s, &s->read_co, &s->watch_read);
        } else if (errno != EINTR) {
            return -errno;
        }
    }
}

/*
 * Room for this many descriptors in one recvmsg(): a sender that passes
 * more than the caller takes is still seen (and refused), up to here.
 */
#define CO_SOCKET_FDS_ROOM 16

/* Moves the descriptors of @msg into @fds; false if they do not fit. */
static bool co_socket_take_fds(struct msghdr *msg, int *fds, size_t max_fds,
                               size_t *nfds)
{
    bool fit = !(msg->msg_flags & MSG_CTRUNC);

    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c;
         c = CMSG_NXTHDR(msg, c)) {
        size_t n;
        int *p;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        p = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            int fd;

            memcpy(&fd, p + i, sizeof(fd));
            if (*nfds < max_fds) {
                fds[(*nfds)++] = fd;
            } else {
                close(fd);
                fit = false;
            }
        }
    }
    return fit;
}

int coroutine_fn co_socket_read_fds(CoSocket *s, void *buf, size_t len,
                                    int *fds, size_t max_fds, size_t *nfds)
{
    union {
        char buf[CMSG_SPACE(CO_SOCKET_FDS_ROOM * sizeof(int))];
        struct cmsghdr align;
    } control;
    char *p = buf;
    int ret = 0;

    assert(max_fds <= CO_SOCKET_FDS_ROOM);
    *nfds = 0;
    while (len > 0) {
        struct iovec iov = { .iov_base = p, .iov_len = len };
        struct msghdr msg = {
            .msg_iov = &iov,
            .msg_iovlen = 1,
            .msg_control = control.buf,
            .msg_controllen = sizeof(control.buf),
        };
        ssize_t n;

        if (s->shut_down) {
            ret = -ESHUTDOWN;
            break;
        }
        n = recvmsg(s->fd, &msg, MSG_CMSG_CLOEXEC);
        if (n > 0) {
            if (!co_socket_take_fds(&msg, fds, max_fds, nfds)) {
                ret = -EMSGSIZE;
                break;
            }
            p += n;
            len -= n;
        } else if (n == 0) {
            ret = s->shut_down ? -ESHUTDOWN : -EPIPE;
            break;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            co_socket_wait(s, &s->read_co, &s->watch_read);
        } else if (errno != EINTR) {
            ret = -errno;
            break;
        }
    }
    if (ret < 0) {
        for (size_t i = 0; i < *nfds; i++) {
            close(fds[i]);
        }
        *nfds = 0;
    }
    return ret;
}

int coroutine_fn co_socket_writev_fds(CoSocket *s, const struct iovec *iov,
                                      unsigned int iovcnt, const int *fds,
                                      size_t nfds)
{
    struct iovec local[8];
    struct iovec *v = iovcnt <= ARRAY_SIZE(local) ? local
                                                  : g_new(struct iovec, iovcnt);
    union {
        char buf[CMSG_SPACE(sizeof(int) * CO_SOCKET_MAX_SEND_FDS)];
        struct cmsghdr align;
    } control;
    unsigned int first = 0;
    int ret = 0;

    assert(nfds <= CO_SOCKET_MAX_SEND_FDS);
    if (nfds && s->filter) {
        /* a filter (TLS) carries bytes only */
        if (v != local) {
            g_free(v);
        }
        return -EINVAL;
    }
    memcpy(v, iov, iovcnt * sizeof(*iov));
    while (first < iovcnt) {
        struct msghdr msg = {
            .msg_iov = v + first,
            .msg_iovlen = iovcnt - first,
        };
        ssize_t n;

        if (nfds) {
            /* the descriptors travel with the first byte sent */
            struct cmsghdr *c;

            memset(&control, 0, sizeof(control));
            msg.msg_control = control.buf;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
            c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
            memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }

        if (v[first].iov_len == 0) {
            first++;
            continue;
        }
        if (s->shut_down) {
            ret = -ESHUTDOWN;
            break;
        }
        n = co_socket_send(s, &msg);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                co_socket_wait(s, &s->write_co, &s->watch_write);
                continue;
            }
            if (errno == EINTR) {
                continue;
            }
            ret = -errno;
            break;
        }
        nfds = 0;
        while (n > 0) {
            size_t step = MIN((size_t)n, v[first].iov_len);

            v[first].iov_base = (char *)v[first].iov_base + step;
            v[first].iov_len -= step;
            n -= step;
            if (v[first].iov_len == 0) {
                first++;
            }
        }
    }
    if (v != local) {
        g_free(v);
    }
    return ret;
}

int coroutine_fn co_socket_writev_all(CoSocket *s, const struct iovec *iov,
                                      unsigned int iovcnt)
{
    return co_socket_writev_fds(s, iov, iovcnt, NULL, 0);
}

int coroutine_fn co_socket_write_all(CoSocket *s, const void *buf,
                                     size_t len)
{
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

    return co_socket_writev_all(s, &iov, 1);
}
