/*
 * The NBD client's connection: its states, what a lost connection does to
 * the requests, and reconnection (reconnect-delay, open-timeout), with
 * QEMU's semantics.
 *
 *            loss, delay > 0                     delay over
 *  CONNECTED ----------------> CONNECTING_WAIT -----------> CONNECTING_NOWAIT
 *     ^  |                          |                              |
 *     |  |    reconnected           |                              |
 *     |  +-- <--------------------- +                              |
 *     |  | loss, delay = 0                 a request reconnects    |
 *     |  +----------------------> CONNECTING_NOWAIT ---------------+
 *     +------------------------------------------------------------+
 *  any state --- a fault of the server, or close ---> QUIT (final)
 *
 * Transitions: nbd_client_lost() (loss), nbd_co_reconnect() (reconnected),
 * nbd_delay_expired() (delay over), nbd_client_kill() (QUIT).
 *
 *  - CONNECTING_WAIT: the requests that were in flight, and new ones,
 *    wait; the connection coroutine (nbd_conn_entry) tries to reconnect,
 *    pausing between attempts, and once it has, they are sent again.
 *  - CONNECTING_NOWAIT: waiting requests fail with EIO; a new request
 *    makes one attempt to reconnect itself (QEMU's client keeps trying in
 *    a thread meanwhile; one attempt per request finds the server just as
 *    soon as it is back, without a thread left behind at close).
 *
 * Invariant 5 (with those of nbd.c): an attempt to reconnect connects
 * in the event loop without blocking it (nbd_co_connect: the coroutine
 * yields until the socket is connected, and a close or the end of
 * reconnect-delay abandons it), then negotiates in a worker thread (the
 * handshake blocks, within its deadline); only one attempt runs at a
 * time (s->connecting), and only when no coroutine uses the old socket:
 * the receive loop has ended and the send mutex is held while it is
 * closed.
 *
 * Every connect is bounded: by open-timeout when given, else by the
 * handshake's deadline (NBD_CLIENT_HANDSHAKE_TIMEOUT_S), never by the
 * kernel's SYN retries (about two minutes for a host that is away).
 */
#include "block/nbd-client-int.h"
#include "util/co-socket-tls.h"
#include "util/thread-pool.h"

/*
 * Pauses between attempts to reconnect: short first (a server that
 * restarts is back in moments), longer while it stays away, so that a
 * server that is down is not hammered.
 */
#define NBD_RECONNECT_FIRST_PAUSE_NS    (100 * SCALE_MS)
#define NBD_RECONNECT_MAX_PAUSE_NS      (1000 * SCALE_MS)
/* The pause between connection attempts within open-timeout. */
#define NBD_OPEN_RETRY_US               (100 * 1000)
/* How often a unix server whose backlog is full is asked again. */
#define NBD_CONNECT_AGAIN_US            (10 * 1000)

int64_t nbd_client_handshake_deadline(const BDRVNBDState *s)
{
    uint32_t secs = s->open_timeout ?: NBD_CLIENT_HANDSHAKE_TIMEOUT_S;

    return g_get_monotonic_time() + (int64_t)secs * G_USEC_PER_SEC;
}

/*
 * The handshake on the connected blocking @fd (left open, whatever the
 * outcome); on success @fd is made non-blocking, for the event loop.
 */
static int nbd_client_negotiate(BDRVNBDState *s, int fd, int64_t deadline,
                                QCryptoTLSSession **sess,
                                NBDExportInfo *info, Error **errp)
{
    int ret, fl;

    ret = nbd_client_handshake(fd, s->export_name, s->context, &s->tls,
                               sess, info, deadline, errp);
    if (ret == -ETIMEDOUT) {
        g_autofree char *addr = socket_address_to_string(s->addr);

        if (s->open_timeout) {
            error_prepend(errp, "NBD server '%s' did not complete the "
                          "handshake within open-timeout=%" PRIu32 " s: ",
                          addr, s->open_timeout);
        } else {
            error_prepend(errp, "NBD server '%s' did not complete the "
                          "handshake within %d s: ", addr,
                          NBD_CLIENT_HANDSHAKE_TIMEOUT_S);
        }
    }
    if (ret < 0) {
        return ret;
    }
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        ret = -errno;
        error_setg_errno(errp, errno, "Failed to make the NBD socket "
                         "non-blocking");
        qcrypto_tls_session_free(*sess);
        *sess = NULL;
        return ret;
    }
    return 0;
}

int nbd_client_connect(BDRVNBDState *s, int64_t deadline, int *fd_out,
                       QCryptoTLSSession **sess, NBDExportInfo *info,
                       Error **errp)
{
    /* the kernel would wait about 2 minutes for a host that is away */
    int fd = socket_connect_deadline(s->addr, deadline, errp);
    int ret;

    if (fd == -ETIMEDOUT && s->open_timeout) {
        /* QEMU's words for it, then which server and which limit */
        error_prepend(errp, "Connection attempt cancelled by timeout "
                      "(open-timeout=%" PRIu32 " s): ", s->open_timeout);
    }
    if (fd < 0) {
        return fd;
    }
    ret = nbd_client_negotiate(s, fd, deadline, sess, info, errp);
    if (ret < 0) {
        close(fd);
        return ret;
    }
    *fd_out = fd;
    return 0;
}

int nbd_client_connect_retry(BDRVNBDState *s, int *fd,
                             QCryptoTLSSession **sess, Error **errp)
{
    /* with open-timeout, every attempt's handshake ends by its deadline */
    int64_t deadline = nbd_client_handshake_deadline(s);

    for (;;) {
        Error *local_err = NULL;
        int64_t left;
        int ret = nbd_client_connect(s, deadline, fd, sess, &s->info,
                                     &local_err);

        left = deadline - g_get_monotonic_time();
        if (ret == 0 || left <= 0 || !s->open_timeout) {
            error_propagate(errp, local_err);
            return ret;
        }
        error_free(local_err);
        g_usleep(MIN(left, NBD_OPEN_RETRY_US));
    }
}

/* ---------------------------------------------------------------------- */
/* Losing the connection */

/* Resumes nbd_co_connect(): the fd is writable, time is up, or the state
 * changed. */
static void nbd_connect_wake(void *opaque)
{
    BDRVNBDState *s = opaque;
    Coroutine *co = s->connect_co;

    if (co) {
        s->connect_co = NULL;
        aio_co_wake(co);
    }
}

static void nbd_wake_conn_co(BDRVNBDState *s)
{
    if (s->conn_sleeping) {
        s->conn_sleeping = false;
        timer_del(s->retry_timer);
        aio_co_wake(s->conn_co);
    }
}

/* Completes every request in flight with EIO; @lost lets it retry. */
static void nbd_fail_requests(BDRVNBDState *s, bool lost)
{
    for (int i = 0; i < NBD_CLIENT_MAX_REQUESTS; i++) {
        NBDClientRequest *req = &s->reqs[i];

        if (req->in_use && !req->done) {
            req->ret = -EIO;
            req->lost = lost;
            nbd_client_complete(req);
        }
    }
    qemu_co_queue_restart_all(&s->free_slots);
}

void nbd_client_kill(BlockDriverState *bs, const char *reason)
{
    BDRVNBDState *s = bs->opaque;

    if (s->state == NBD_CLIENT_QUIT) {
        return;
    }
    if (s->state == NBD_CLIENT_CONNECTED) {
        co_socket_shutdown(&s->sock);
    }
    s->state = NBD_CLIENT_QUIT;
    if (reason) {
        error_report("NBD server %s: %s", bs->filename, reason);
    }
    nbd_fail_requests(s, false);
    timer_del(s->delay_timer);
    qemu_co_queue_restart_all(&s->reconnect_waiters);
    nbd_wake_conn_co(s);
    nbd_connect_wake(s);
}

/*
 * A lost connection is not reported: the requests' EIO says it, as in
 * QEMU, whose output scripts (iotest 083) compare.
 */
void nbd_client_lost(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;

    if (s->state != NBD_CLIENT_CONNECTED) {
        return;
    }
    co_socket_shutdown(&s->sock);
    if (!s->reconnect_delay) {
        s->state = NBD_CLIENT_CONNECTING_NOWAIT;
        nbd_fail_requests(s, false);
        return;
    }
    s->state = NBD_CLIENT_CONNECTING_WAIT;
    nbd_fail_requests(s, true);
    timer_mod(s->delay_timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
              s->reconnect_delay * NBD_NS_PER_SEC);
}

/* reconnect-delay is over: what waits fails, what comes tries once. */
static void nbd_delay_expired(void *opaque)
{
    BlockDriverState *bs = opaque;
    BDRVNBDState *s = bs->opaque;

    if (s->state != NBD_CLIENT_CONNECTING_WAIT) {
        return;
    }
    s->state = NBD_CLIENT_CONNECTING_NOWAIT;
    qemu_co_queue_restart_all(&s->reconnect_waiters);
    nbd_wake_conn_co(s);
    nbd_connect_wake(s);
}

/* ---------------------------------------------------------------------- */
/* Reconnecting */

typedef struct NBDConnectJob {
    BDRVNBDState *s;            /* only its immutable fields are read */
    int64_t deadline;           /* of the handshake */
    int fd;                     /* connected, blocking */
    QCryptoTLSSession *sess;
    NBDExportInfo info;
    Error *err;
} NBDConnectJob;

static int nbd_negotiate_worker(void *opaque)
{
    NBDConnectJob *job = opaque;

    return nbd_client_negotiate(job->s, job->fd, job->deadline, &job->sess,
                                &job->info, &job->err);
}

/*
 * Connects to the server without blocking the event loop (invariant 5):
 * the coroutine yields until the socket is connected, @deadline
 * (g_get_monotonic_time()) passes, or the state changes (close, the end
 * of reconnect-delay: the attempt was made for what no longer waits).
 * Returns a blocking fd, for the handshake in a worker, or -errno.
 */
static int coroutine_fn nbd_co_connect(BlockDriverState *bs,
                                       int64_t deadline, Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    AioContext *ctx = bdrv_get_aio_context(bs);
    NBDClientState state = s->state;
    SocketConnect c;
    int ret = socket_connect_start(&c, s->addr, errp);

    while (ret == -EINPROGRESS || ret == -EAGAIN) {
        int64_t left = deadline - g_get_monotonic_time();

        if (s->state != state) {
            error_setg(errp, "Connection attempt to '%s' cancelled by "
                       "other operation", c.name);
            socket_connect_abort(&c);
            return -ECANCELED;
        }
        if (left <= 0) {
            error_setg_errno(errp, ETIMEDOUT, "Failed to connect to '%s'",
                             c.name);
            socket_connect_abort(&c);
            return -ETIMEDOUT;
        }
        if (ret == -EAGAIN) {
            /* a unix server's full backlog: nothing to poll, ask again */
            left = MIN(left, NBD_CONNECT_AGAIN_US);
        } else {
            aio_set_fd_handler(ctx, c.fd, NULL, nbd_connect_wake, s);
        }
        timer_mod(s->connect_timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                  left * SCALE_US);
        s->connect_co = qemu_coroutine_self();
        qemu_coroutine_yield();
        assert(!s->connect_co);
        timer_del(s->connect_timer);
        if (ret == -EINPROGRESS) {
            aio_set_fd_handler(ctx, c.fd, NULL, NULL, NULL);
        }
        ret = socket_connect_continue(&c, errp);
    }
    if (ret >= 0) {
        int fl = fcntl(ret, F_GETFL);

        if (fl < 0 || fcntl(ret, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            int err = errno;

            error_setg_errno(errp, err, "Failed to make the NBD socket "
                             "blocking for the handshake");
            close(ret);
            return -err;
        }
    }
    return ret;
}

/*
 * The node's size and what it was opened for were promised to its users:
 * a server that comes back with another export is no reconnection.
 */
static int nbd_reconnect_check(BDRVNBDState *s, const NBDExportInfo *info,
                               Error **errp)
{
    if (info->size != s->info.size) {
        error_setg(errp, "the export's size changed from %" PRIu64 " to %"
                   PRIu64 " bytes", s->info.size, info->size);
        return -EINVAL;
    }
    if (s->info.flags & ~info->flags & ~NBD_FLAG_ROTATIONAL) {
        error_setg(errp, "the export's flags changed from 0x%x to 0x%x "
                   "(a feature in use went away)", s->info.flags,
                   info->flags);
        return -EINVAL;
    }
    if (s->writable && (info->flags & NBD_FLAG_READ_ONLY)) {
        error_setg(errp, "the export became read-only");
        return -EACCES;
    }
    return 0;
}

/* One attempt to reconnect (invariant 5).  Returns 0 when CONNECTED. */
static int coroutine_fn nbd_co_reconnect(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;
    AioContext *ctx = bdrv_get_aio_context(bs);
    NBDConnectJob job = {
        .s = s,
        .deadline = nbd_client_handshake_deadline(s),
        .fd = -1,
    };
    int ret;

    assert(!s->connecting && s->state != NBD_CLIENT_CONNECTED);
    s->connecting = true;
    qemu_co_mutex_lock(&s->send_mutex);
    co_socket_close(&s->sock);
    g_clear_pointer(&s->tls_sess, qcrypto_tls_session_free);
    qemu_co_mutex_unlock(&s->send_mutex);
    ret = nbd_co_connect(bs, job.deadline, &job.err);
    if (ret >= 0) {
        job.fd = ret;
        ret = thread_pool_submit_co(aio_get_thread_pool(ctx),
                                    nbd_negotiate_worker, &job);
    }
    if (ret == 0) {
        ret = nbd_reconnect_check(s, &job.info, &job.err);
    }
    if (ret == 0 && s->state == NBD_CLIENT_QUIT) {
        ret = -ESHUTDOWN;       /* closed meanwhile */
    }
    s->connecting = false;
    if (ret < 0) {
        qcrypto_tls_session_free(job.sess);
        if (job.fd >= 0) {
            close(job.fd);
        }
        error_free(job.err);
        qemu_co_queue_restart_all(&s->reconnect_waiters);
        return ret;
    }
    s->info = job.info;
    co_socket_init(&s->sock, job.fd, ctx);
    s->tls_sess = job.sess;
    if (s->tls_sess) {
        co_socket_set_tls(&s->sock, s->tls_sess);
    }
    s->state = NBD_CLIENT_CONNECTED;
    timer_del(s->delay_timer);
    qemu_co_queue_restart_all(&s->reconnect_waiters);
    return 0;
}

static void nbd_retry_timer_cb(void *opaque)
{
    nbd_wake_conn_co(opaque);
}

/* Waits @ns, or until the state changes (delay over, close). */
static void coroutine_fn nbd_co_retry_pause(BDRVNBDState *s, int64_t ns)
{
    s->conn_sleeping = true;
    timer_mod(s->retry_timer, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) + ns);
    qemu_coroutine_yield();
}

void coroutine_fn nbd_conn_entry(void *opaque)
{
    BlockDriverState *bs = opaque;
    BDRVNBDState *s = bs->opaque;

    for (;;) {
        int64_t pause = NBD_RECONNECT_FIRST_PAUSE_NS;

        nbd_recv_loop(bs);
        while (s->state == NBD_CLIENT_CONNECTING_WAIT &&
               nbd_co_reconnect(bs) < 0 &&
               s->state == NBD_CLIENT_CONNECTING_WAIT) {
            nbd_co_retry_pause(s, pause);
            pause = MIN(pause * 2, NBD_RECONNECT_MAX_PAUSE_NS);
        }
        if (s->state != NBD_CLIENT_CONNECTED) {
            break;
        }
    }
    s->conn_co = NULL;
    qemu_co_queue_restart_all(&s->reconnect_waiters);
}

int coroutine_fn nbd_co_wait_connected(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;
    bool tried = false;

    for (;;) {
        switch (s->state) {
        case NBD_CLIENT_CONNECTED:
            return 0;
        case NBD_CLIENT_QUIT:
            return -EIO;
        case NBD_CLIENT_CONNECTING_WAIT:
            /* a request that waited out the delay fails (QEMU) */
            tried = true;
            qemu_co_queue_wait(&s->reconnect_waiters, NULL);
            continue;
        case NBD_CLIENT_CONNECTING_NOWAIT:
            break;
        }
        if (tried) {
            return -EIO;
        }
        tried = true;
        if (s->conn_co || s->connecting) {
            /* someone else's attempt (or the old receive loop's end) */
            qemu_co_queue_wait(&s->reconnect_waiters, NULL);
            continue;
        }
        if (nbd_co_reconnect(bs) == 0) {
            s->conn_co = qemu_coroutine_create(nbd_conn_entry, bs);
            aio_co_enter(bdrv_get_aio_context(bs), s->conn_co);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Setup */

static void nbd_client_reconnect_bind(BlockDriverState *bs, AioContext *ctx)
{
    BDRVNBDState *s = bs->opaque;

    s->delay_timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                                   nbd_delay_expired, bs);
    s->retry_timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                                   nbd_retry_timer_cb, s);
    s->connect_timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                                     nbd_connect_wake, s);
}

static void nbd_client_reconnect_unbind(BDRVNBDState *s)
{
    timer_free(s->delay_timer);
    timer_free(s->retry_timer);
    timer_free(s->connect_timer);
}

void nbd_client_reconnect_init(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;

    s->state = NBD_CLIENT_CONNECTED;
    qemu_co_queue_init(&s->reconnect_waiters);
    nbd_client_reconnect_bind(bs, bdrv_get_aio_context(bs));
}

void nbd_client_reconnect_move(BlockDriverState *bs, AioContext *ctx)
{
    BDRVNBDState *s = bs->opaque;

    /* invariant 6 of nbd.c: no attempt, pause or delay under way */
    assert(!timer_pending(s->delay_timer) &&
           !timer_pending(s->retry_timer) &&
           !timer_pending(s->connect_timer));
    nbd_client_reconnect_unbind(s);
    nbd_client_reconnect_bind(bs, ctx);
}

void nbd_client_reconnect_cleanup(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;

    assert(!s->conn_co && !s->connecting);
    nbd_client_reconnect_unbind(s);
}
