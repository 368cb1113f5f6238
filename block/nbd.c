/*
 * nbd: the NBD client as a protocol driver.
 *
 * Open connects (util/qemu-sockets.c), negotiates the export on the
 * blocking socket (block/nbd-handshake.c), retrying for open-timeout
 * seconds (block/nbd-reconnect.c), all in a worker thread while the
 * opener's event loop goes on, then hands the socket to the node's
 * AioContext as a CoSocket.  From then on:
 *
 *  - each request coroutine takes a free slot of s->reqs (waiting on
 *    s->free_slots when all NBD_CLIENT_MAX_REQUESTS are busy), sends its
 *    request under s->send_mutex and yields until its slot is done;
 *  - one connection coroutine (nbd_conn_entry) reads every reply
 *    (nbd-client-recv.c), finds the slot by the reply's cookie, reads the
 *    payload straight into that request's buffer, and wakes the request
 *    when its last chunk came;
 *  - a lost connection fails the requests, or within reconnect-delay
 *    holds them until the connection coroutine has reconnected, and they
 *    are sent again (nbd-reconnect.c, which draws the states);
 *  - while requests are in flight, a timer watches the server's silence
 *    (nbd-client-recv.c): x-request-timeout seconds without a byte
 *    received, and the connection counts as lost;
 *  - every handshake ends by open-timeout, or by
 *    NBD_CLIENT_HANDSHAKE_TIMEOUT_S without it (nbd-handshake.c).
 *
 * Invariants:
 *  1. A slot is in_use from the moment a request takes it until that
 *     request has seen done and released it; only an in_use slot that is
 *     not done may receive a reply (a cookie naming any other slot is a
 *     protocol error, so nothing is ever written into a buffer whose
 *     request has gone).
 *  2. Requests are sent only while s->state is CONNECTED; when it leaves
 *     CONNECTED the socket is shut down and every slot not done is
 *     completed (with -EIO, and marked lost if it may be sent again).
 *     QUIT is final: new requests fail at once.
 *  3. Only the connection coroutine reads from the socket; only the
 *     holder of s->send_mutex writes to it.
 *  4. A request coroutine is woken exactly once, and only while it
 *     waits for its reply (waiting): a reply or a failure that comes
 *     while it is still sending just marks the slot done, so no wake-up
 *     ever lands in the socket's or the mutex's yield.
 *  6. (5 is nbd-reconnect.c's.)  The node moves to another AioContext
 *     (an export's iothread, a job's) only while no attempt to reconnect,
 *     pause between attempts or reconnect-delay is under way, and while
 *     the connection coroutine, if there is one, waits on the socket or
 *     for its bottom half: the places a move can take it along.  Anything
 *     else is refused, and the caller may try again.
 *
 * Everything runs in the node's AioContext thread (s->ctx).
 */
#include "block/nbd-client-int.h"
#include "util/co-socket-tls.h"
#include "qapi/qapi-opts.h"
#include "util/thread-pool.h"
#include <sys/socket.h>

/* ---------------------------------------------------------------------- */
/* Failure */

/* Marks @req done and wakes it if it waits for that (invariant 4). */
void nbd_client_complete(NBDClientRequest *req)
{
    req->done = true;
    if (req->waiting) {
        aio_co_wake(req->co);
    }
}

/* ---------------------------------------------------------------------- */
/* Sending */

typedef struct NBDClientCmd {
    uint16_t type;
    uint16_t flags;             /* NBD_CMD_FLAG_* */
    uint64_t offset;
    uint32_t length;
    QEMUIOVector *write_qiov;   /* payload of a write */
    QEMUIOVector *read_qiov;    /* destination of a read */
} NBDClientCmd;

static NBDClientRequest *coroutine_fn nbd_co_take_slot(BDRVNBDState *s,
                                                       uint64_t *cookie)
{
    while (s->state == NBD_CLIENT_CONNECTED &&
           s->in_flight == NBD_CLIENT_MAX_REQUESTS) {
        qemu_co_queue_wait(&s->free_slots, NULL);
    }
    if (s->state != NBD_CLIENT_CONNECTED) {
        return NULL;
    }
    for (int i = 0; i < NBD_CLIENT_MAX_REQUESTS; i++) {
        if (!s->reqs[i].in_use) {
            *cookie = i;
            if (s->in_flight++ == 0) {
                nbd_recv_watch_start(s);
            }
            return &s->reqs[i];
        }
    }
    g_assert_not_reached();
}

static int coroutine_fn nbd_co_send(BDRVNBDState *s, const NBDClientCmd *cmd,
                                    NBDClientRequest *req, uint64_t cookie)
{
    NBDRequestHeader hdr = {
        .magic = GUINT32_TO_BE(NBD_REQUEST_MAGIC),
        .flags = GUINT16_TO_BE(cmd->flags),
        .type = GUINT16_TO_BE(cmd->type),
        .cookie = GUINT64_TO_BE(cookie),
        .offset = GUINT64_TO_BE(cmd->offset),
        .length = GUINT32_TO_BE(cmd->length),
    };
    int niov = cmd->write_qiov ? cmd->write_qiov->niov : 0;
    g_autofree struct iovec *iov = g_new(struct iovec, niov + 1);
    int ret;

    iov[0] = (struct iovec){ .iov_base = &hdr, .iov_len = sizeof(hdr) };
    if (niov) {
        memcpy(iov + 1, cmd->write_qiov->iov, niov * sizeof(*iov));
    }
    qemu_co_mutex_lock(&s->send_mutex);
    /*
     * A request whose connection was lost while it waited for the mutex
     * is done; the socket may be a new connection's by now (invariant 2).
     */
    ret = s->state != NBD_CLIENT_CONNECTED || req->done ? -EIO :
          co_socket_writev_all(&s->sock, iov, niov + 1);
    qemu_co_mutex_unlock(&s->send_mutex);
    return ret;
}

/*
 * Sends @cmd and waits for its whole reply.  @req_out, if given, gets a
 * copy of the slot (block status) before the slot is released.  Returns
 * -EAGAIN if the connection was lost and the request may be sent again.
 */
static int coroutine_fn nbd_co_request_once(BlockDriverState *bs,
                                            const NBDClientCmd *cmd,
                                            NBDClientRequest *req_out)
{
    BDRVNBDState *s = bs->opaque;
    NBDClientRequest *req;
    uint64_t cookie;
    int ret;

    req = nbd_co_take_slot(s, &cookie);
    if (!req) {
        return -EAGAIN;
    }
    *req = (NBDClientRequest){
        .in_use = true,
        .co = qemu_coroutine_self(),
        .type = cmd->type,
        .offset = cmd->offset,
        .length = cmd->length,
        .qiov = cmd->read_qiov,
    };
    ret = nbd_co_send(s, cmd, req, cookie);
    if (ret < 0) {
        nbd_client_lost(bs);
    }
    req->waiting = true;
    while (!req->done) {
        qemu_coroutine_yield();
    }
    req->waiting = false;
    ret = req->lost ? -EAGAIN : req->ret;
    if (req_out) {
        *req_out = *req;
    }
    req->in_use = false;
    s->in_flight--;
    qemu_co_queue_next(&s->free_slots);
    return ret;
}

/* Sends @cmd, again after each reconnection, until it has a reply. */
static int coroutine_fn nbd_co_request(BlockDriverState *bs,
                                       const NBDClientCmd *cmd,
                                       NBDClientRequest *req_out)
{
    int ret;

    do {
        ret = nbd_co_wait_connected(bs);
        if (ret == 0) {
            ret = nbd_co_request_once(bs, cmd, req_out);
        }
    } while (ret == -EAGAIN);
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Data path */

static int coroutine_fn nbd_co_preadv(BlockDriverState *bs, int64_t offset,
                                      int64_t bytes, QEMUIOVector *qiov,
                                      BdrvRequestFlags flags)
{
    NBDClientCmd cmd = {
        .type = NBD_CMD_READ,
        .offset = offset,
        .length = bytes,
        .read_qiov = qiov,
    };

    assert(bytes <= NBD_CLIENT_MAX_TRANSFER);
    if (flags & BDRV_REQ_PREFETCH) {
        /* only offered with NBD_FLAG_SEND_CACHE (nbd_open), which a
         * reconnection cannot take away (nbd-reconnect.c) */
        cmd.type = NBD_CMD_CACHE;
        cmd.read_qiov = NULL;
    }
    return nbd_co_request(bs, &cmd, NULL);
}

static int coroutine_fn nbd_co_pwritev(BlockDriverState *bs, int64_t offset,
                                       int64_t bytes, QEMUIOVector *qiov,
                                       BdrvRequestFlags flags)
{
    NBDClientCmd cmd = {
        .type = NBD_CMD_WRITE,
        .flags = (flags & BDRV_REQ_FUA) ? NBD_CMD_FLAG_FUA : 0,
        .offset = offset,
        .length = bytes,
        .write_qiov = qiov,
    };

    assert(bytes <= NBD_CLIENT_MAX_TRANSFER);
    return nbd_co_request(bs, &cmd, NULL);
}

/*
 * Zero writes and trims are commands the server need not offer (@offered,
 * its NBD_FLAG_SEND_* bit), and the generic layer passes them on unsplit
 * (no max_pwrite_zeroes or max_pdiscard here) although the command's
 * length field has 32 bits.  Both decline either case with -ENOTSUP, after
 * which the generic layer writes zeroes instead or skips the discard.
 */
static int coroutine_fn nbd_co_optional_request(BlockDriverState *bs,
                                                uint16_t offered,
                                                uint16_t type,
                                                uint16_t cmd_flags,
                                                int64_t offset, int64_t bytes)
{
    BDRVNBDState *s = bs->opaque;
    NBDClientCmd cmd = {
        .type = type,
        .flags = cmd_flags,
        .offset = offset,
        .length = bytes,
    };

    if (!(s->info.flags & offered) || bytes > UINT32_MAX) {
        return -ENOTSUP;
    }
    return nbd_co_request(bs, &cmd, NULL);
}

static int coroutine_fn nbd_co_pwrite_zeroes(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             BdrvRequestFlags flags)
{
    uint16_t cmd_flags = 0;

    if (flags & BDRV_REQ_FUA) {
        cmd_flags |= NBD_CMD_FLAG_FUA;
    }
    if (!(flags & BDRV_REQ_MAY_UNMAP)) {
        cmd_flags |= NBD_CMD_FLAG_NO_HOLE;
    }
    if (flags & BDRV_REQ_NO_FALLBACK) {
        cmd_flags |= NBD_CMD_FLAG_FAST_ZERO;
    }
    return nbd_co_optional_request(bs, NBD_FLAG_SEND_WRITE_ZEROES,
                                   NBD_CMD_WRITE_ZEROES, cmd_flags, offset,
                                   bytes);
}

static int coroutine_fn nbd_co_pdiscard(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes)
{
    return nbd_co_optional_request(bs, NBD_FLAG_SEND_TRIM, NBD_CMD_TRIM, 0,
                                   offset, bytes);
}

static int coroutine_fn nbd_co_flush(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;
    NBDClientCmd cmd = { .type = NBD_CMD_FLUSH };

    if (!(s->info.flags & NBD_FLAG_SEND_FLUSH)) {
        return 0;
    }
    return nbd_co_request(bs, &cmd, NULL);
}

/*
 * base:allocation: a hole reads as no data here, a zero extent as zeroes.
 * Without the context everything is data, as QEMU reports it.
 * x-dirty-bitmap puts another context's bits in the place of these two
 * (QEMU's debugging aid, which scripts use to read a bitmap or the
 * allocation depth through qemu-img map); qemu:allocation-depth's depths
 * beyond 2 become 2, as in QEMU, so that they keep to the two bits.
 */
static int coroutine_fn nbd_co_block_status(BlockDriverState *bs,
                                            bool want_zero, int64_t offset,
                                            int64_t bytes, int64_t *pnum,
                                            int64_t *map,
                                            BlockDriverState **file)
{
    BDRVNBDState *s = bs->opaque;
    NBDClientRequest res;
    NBDClientCmd cmd = {
        .type = NBD_CMD_BLOCK_STATUS,
        .flags = NBD_CMD_FLAG_REQ_ONE,
        .offset = offset,
        .length = MIN(bytes, UINT32_MAX -
                             UINT32_MAX % bs->bl.request_alignment),
    };
    int ret;

    *map = offset;
    *file = bs;
    if (!s->info.have_context) {
        *pnum = bytes;
        return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
    }
    ret = nbd_co_request(bs, &cmd, &res);
    if (ret < 0) {
        return ret;
    }
    if (!res.have_extent || res.extent_length == 0) {
        error_report("NBD server %s: block status at offset %" PRId64
                     " without an extent", bs->filename, offset);
        return -EIO;
    }
    if (s->alloc_depth && res.extent_flags > 2) {
        res.extent_flags = 2;
    }
    *pnum = MIN(res.extent_length, cmd.length);
    if (*pnum < bytes) {
        /*
         * A server must answer in whole blocks; if it does not, claim data
         * for the first block rather than more than is known.
         */
        uint32_t align = bs->bl.request_alignment;

        if (*pnum < align) {
            *pnum = MIN(align, bytes);
            return BDRV_BLOCK_DATA | BDRV_BLOCK_OFFSET_VALID;
        }
        *pnum -= *pnum % align;
    }
    return BDRV_BLOCK_OFFSET_VALID |
           (res.extent_flags & NBD_STATE_HOLE ? 0 : BDRV_BLOCK_DATA) |
           (res.extent_flags & NBD_STATE_ZERO ? BDRV_BLOCK_ZERO : 0);
}

/* ---------------------------------------------------------------------- */
/* Open and close */

static void nbd_parse_filename(const char *filename, QDict *options,
                               Error **errp)
{
    static const char *const keys[] = {
        NBD_OPT_KEY_SERVER_TYPE, NBD_OPT_KEY_SERVER_HOST,
        NBD_OPT_KEY_SERVER_PORT, NBD_OPT_KEY_SERVER_PATH,
        NBD_OPT_KEY_EXPORT,
    };

    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (qdict_haskey(options, keys[i])) {
            error_setg(errp, "NBD file name '%s' cannot be combined with "
                       "the option '%s'", filename, keys[i]);
            return;
        }
    }
    nbd_client_parse_filename(filename, options, errp);
}

static SocketAddress *nbd_opts_to_addr(QemuOpts *opts, Error **errp)
{
    const char *type = qemu_opt_get(opts, NBD_OPT_KEY_SERVER_TYPE);
    const char *host = qemu_opt_get(opts, NBD_OPT_KEY_SERVER_HOST);
    const char *port = qemu_opt_get(opts, NBD_OPT_KEY_SERVER_PORT);
    const char *path = qemu_opt_get(opts, NBD_OPT_KEY_SERVER_PATH);

    if (!type) {
        error_setg(errp, "NBD server address missing: give a file name "
                   "(nbd://HOST/EXPORT, nbd+unix:///EXPORT?socket=PATH) or "
                   "server.type with server.host or server.path");
        return NULL;
    }
    if (!strcmp(type, "unix")) {
        if (!path || host || port) {
            error_setg(errp, "server.type=unix needs server.path, and no "
                       "server.host or server.port");
            return NULL;
        }
        return socket_address_new_unix(path);
    }
    if (!strcmp(type, "inet")) {
        if (!host || path) {
            error_setg(errp, "server.type=inet needs server.host, and no "
                       "server.path");
            return NULL;
        }
        return socket_address_new_inet(host, port ?: NBD_DEFAULT_PORT);
    }
    error_setg(errp, "server.type '%s' is not supported (inet or unix)",
               type);
    return NULL;
}

/* Block sizes from NBD_INFO_BLOCK_SIZE become the node's limits. */
static void nbd_refresh_limits(BlockDriverState *bs, Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    /* Without block sizes, simple replies cannot say less than a sector */
    uint32_t min = s->info.min_block ?:
                   (s->info.structured_reply ? 1 : BDRV_SECTOR_SIZE);
    uint32_t max = NBD_CLIENT_MAX_TRANSFER;

    if (s->info.max_block) {
        max = MIN(max, s->info.max_block - s->info.max_block % min);
    }
    bs->bl.request_alignment = min;
    bs->bl.max_transfer = max;
    if (s->info.opt_block > min) {
        bs->bl.opt_transfer = s->info.opt_block;
    }
}

/*
 * QEMU's older flat options, host=, port= and path=, which scripts (and
 * iotest 233) still use: they become server.*, never mixed with them.
 */
static int nbd_legacy_socket_options(QDict *options, Error **errp)
{
    g_autofree char *host = g_strdup(qdict_get_try_str(options, "host"));
    g_autofree char *port = g_strdup(qdict_get_try_str(options, "port"));
    g_autofree char *path = g_strdup(qdict_get_try_str(options, "path"));

    if (!host && !port && !path) {
        return 0;
    }
    if (qdict_haskey(options, NBD_OPT_KEY_SERVER_TYPE)) {
        /* QEMU's words, as those below */
        error_setg(errp, "Cannot use 'server' and path/host/port at the "
                   "same time");
        return -EINVAL;
    }
    if (path && host) {
        error_setg(errp, "path and host may not be used at the same time");
        return -EINVAL;
    }
    qdict_del(options, "host");
    qdict_del(options, "port");
    qdict_del(options, "path");
    if (path) {
        qdict_put_str(options, NBD_OPT_KEY_SERVER_TYPE, "unix");
        qdict_put_str(options, NBD_OPT_KEY_SERVER_PATH, path);
        return 0;
    }
    if (!host) {
        return 0;       /* a port alone: the address is missing, said later */
    }
    qdict_put_str(options, NBD_OPT_KEY_SERVER_TYPE, "inet");
    qdict_put_str(options, NBD_OPT_KEY_SERVER_HOST, host);
    if (port) {
        qdict_put_str(options, NBD_OPT_KEY_SERVER_PORT, port);
    }
    return 0;
}

/* x-dirty-bitmap: the context whose bits block status reports. */
static int nbd_open_context(BDRVNBDState *s, const char *bitmap,
                            Error **errp)
{
    if (!bitmap) {
        s->context = g_strdup(NBD_META_BASE_ALLOCATION);
        return 0;
    }
    if (strlen(bitmap) > NBD_MAX_STRING_SIZE) {
        error_setg(errp, "x-dirty-bitmap is %zu bytes long (at most %d)",
                   strlen(bitmap), NBD_MAX_STRING_SIZE);
        return -EINVAL;
    }
    s->context = g_strdup(bitmap);
    s->alloc_depth = !strcmp(bitmap, NBD_META_QEMU_ALLOC_DEPTH);
    return 0;
}

/* The options other than the server's address and the export. */
static int nbd_open_options(BDRVNBDState *s, QemuOpts *opts, Error **errp)
{
    static const struct {
        const char *key;
        uint64_t def;
    } secs[] = {
        { NBD_OPT_KEY_RECONNECT_DELAY, 0 },
        { NBD_OPT_KEY_OPEN_TIMEOUT, 0 },
        { NBD_OPT_KEY_REQUEST_TIMEOUT, NBD_CLIENT_REQUEST_TIMEOUT_S },
    };
    uint64_t val[G_N_ELEMENTS(secs)];

    if (qemu_opt_get(opts, NBD_OPT_KEY_TLS_CREDS)) {
        s->tls.creds = qcrypto_tls_creds_get(
            qemu_opt_get(opts, NBD_OPT_KEY_TLS_CREDS),
            QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT, errp);
        if (!s->tls.creds) {
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < G_N_ELEMENTS(secs); i++) {
        val[i] = qemu_opt_get_number(opts, secs[i].key, secs[i].def);
        if (val[i] > UINT32_MAX) {
            error_setg(errp, "%s=%" PRIu64 " is out of range (at most %"
                       PRIu32 " seconds)", secs[i].key, val[i], UINT32_MAX);
            return -EINVAL;
        }
    }
    s->reconnect_delay = val[0];
    s->open_timeout = val[1];
    s->request_timeout = val[2];
    return nbd_open_context(s, qemu_opt_get(opts, NBD_OPT_KEY_DIRTY_BITMAP),
                            errp);
}

/* What the negotiated export must offer for the node as opened. */
static int nbd_open_check(BlockDriverState *bs, int flags, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    if (strcmp(s->context, NBD_META_BASE_ALLOCATION) &&
        !s->info.have_context) {
        /* QEMU's words */
        error_setg(errp, "requested x-dirty-bitmap %s not found",
                   s->context);
        return -EINVAL;
    }
    if ((s->info.flags & NBD_FLAG_READ_ONLY) && (flags & BDRV_O_RDWR)) {
        if (!(flags & BDRV_O_AUTO_RDONLY)) {
            /* QEMU's words, which scripts written against it match */
            error_setg_errno(errp, EACCES, "Could not open image");
            return -EACCES;
        }
        bs->read_only = true;
    }
    s->writable = !bs->read_only && (flags & BDRV_O_RDWR);
    if (s->info.size > INT64_MAX) {
        error_setg(errp, "NBD export '%s' has the impossible size %" PRIu64,
                   s->export_name, s->info.size);
        return -EPROTO;
    }
    return 0;
}

static void nbd_free_config(BDRVNBDState *s)
{
    qcrypto_tls_creds_put(s->tls.creds);
    g_free((char *)s->tls.hostname);
    socket_address_free(s->addr);
    g_free(s->export_name);
    g_free(s->context);
}

typedef struct NBDOpenConnect {
    BDRVNBDState *s;            /* only its configuration is read */
    int fd;
    QCryptoTLSSession *sess;
    Error *err;
    int ret;
    bool done;
} NBDOpenConnect;

static int nbd_open_connect_worker(void *opaque)
{
    NBDOpenConnect *c = opaque;

    c->ret = nbd_client_connect_retry(c->s, &c->fd, &c->sess, &c->err);
    return c->ret;
}

static void nbd_open_connect_done(void *opaque, int ret)
{
    NBDOpenConnect *c = opaque;

    c->done = true;
}

/*
 * The first connect and handshake (bounded by open-timeout, or by the
 * handshake's limit) run in a worker thread while the opener's event
 * loop goes on: a daemon's other exports and jobs in the main loop are
 * served meanwhile (its monitor stays busy with the command; QEMU 7.2's
 * daemon stops them all).  The node is nobody's yet, so nothing else can
 * reach @s.
 */
static int nbd_open_connect(BlockDriverState *bs, int *fd, Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    AioContext *ctx = bdrv_get_aio_context(bs);
    ThreadPool *pool = aio_get_thread_pool(ctx);
    NBDOpenConnect c = { .s = s, .fd = -1 };

    if (qemu_in_coroutine()) {
        /* creation on an export opens it from a coroutine */
        thread_pool_submit_co(pool, nbd_open_connect_worker, &c);
    } else {
        thread_pool_submit_aio(pool, nbd_open_connect_worker, &c,
                               nbd_open_connect_done, &c);
        AIO_WAIT_WHILE(ctx, !c.done);
    }
    *fd = c.fd;
    s->tls_sess = c.sess;
    error_propagate(errp, c.err);
    return c.ret;
}

static int nbd_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    QemuOpts *opts;
    int fd = -1;
    int ret;

    /* the default export, unless named even as "": QEMU's file names */
    s->export_named = qdict_haskey(options, NBD_OPT_KEY_EXPORT);
    if (nbd_legacy_socket_options(options, errp) < 0) {
        return -EINVAL;
    }
    s->port_named = qdict_haskey(options, NBD_OPT_KEY_SERVER_PORT);
    opts = qemu_opts_absorb_qdict(&qapi_opts_nbd_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    ret = nbd_open_options(s, opts, errp);
    if (ret == 0) {
        s->addr = nbd_opts_to_addr(opts, errp);
        ret = s->addr ? 0 : -EINVAL;
    }
    if (ret == 0 && s->tls.creds) {
        /* the certificate must name the host dialled, or tls-hostname */
        const char *host = qemu_opt_get(opts, NBD_OPT_KEY_TLS_HOSTNAME);

        if (!host && s->addr->type == SOCKET_ADDRESS_TYPE_INET) {
            host = s->addr->host;
        }
        s->tls.hostname = g_strdup(host);
    }
    s->export_name = g_strdup(qemu_opt_get(opts, NBD_OPT_KEY_EXPORT) ?: "");
    qemu_opts_del(opts);
    if (ret == 0) {
        ret = nbd_open_connect(bs, &fd, errp);
    }
    if (ret == 0) {
        ret = nbd_open_check(bs, flags, errp);
    }
    if (ret < 0) {
        g_clear_pointer(&s->tls_sess, qcrypto_tls_session_free);
        if (fd >= 0) {
            close(fd);
        }
        /* the node is freed without bdrv_close after a failed open */
        nbd_free_config(s);
        return ret;
    }
    if (s->info.flags & NBD_FLAG_SEND_CACHE) {
        /* a prefetch becomes NBD_CMD_CACHE: the server pulls the data
         * into its caches, nothing crosses the network */
        bs->supported_read_flags = BDRV_REQ_PREFETCH;
    }
    if (s->info.flags & NBD_FLAG_SEND_FUA) {
        bs->supported_write_flags = BDRV_REQ_FUA;
        bs->supported_zero_flags |= BDRV_REQ_FUA;
    }
    if (s->info.flags & NBD_FLAG_SEND_WRITE_ZEROES) {
        bs->supported_zero_flags |= BDRV_REQ_MAY_UNMAP;
        if (s->info.flags & NBD_FLAG_SEND_FAST_ZERO) {
            bs->supported_zero_flags |= BDRV_REQ_NO_FALLBACK;
        }
    }
    s->ctx = bdrv_get_aio_context(bs);
    co_socket_init(&s->sock, fd, s->ctx);
    if (s->tls_sess) {
        co_socket_set_tls(&s->sock, s->tls_sess);
    }
    qemu_co_mutex_init(&s->send_mutex);
    qemu_co_queue_init(&s->free_slots);
    nbd_client_reconnect_init(bs);
    nbd_recv_init(bs);
    s->conn_co = qemu_coroutine_create(nbd_conn_entry, bs);
    aio_co_enter(bdrv_get_aio_context(bs), s->conn_co);
    return 0;
}

/*
 * Drained, in the thread that holds both contexts (block-aio-context.c):
 * the socket's handlers, its waiting reader, the timers and the bottom
 * half go to @new_ctx (invariant 6).
 */
static int nbd_change_aio_context(BlockDriverState *bs, AioContext *new_ctx,
                                  Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    bool conn_co_parked = !s->conn_co || s->recv_yielded ||
                          s->sock.read_co == s->conn_co;

    if (s->connecting || s->conn_sleeping ||
        s->state == NBD_CLIENT_CONNECTING_WAIT || !conn_co_parked) {
        error_setg(errp, "Cannot move node '%s' to another iothread while "
                   "it reconnects to its NBD server; try again once it is "
                   "connected", bs->node_name);
        return -EBUSY;
    }
    co_socket_move(&s->sock, new_ctx);
    nbd_recv_move(bs, new_ctx);
    nbd_client_reconnect_move(bs, new_ctx);
    s->ctx = new_ctx;
    return 0;
}

static void nbd_close(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;
    AioContext *ctx = bdrv_get_aio_context(bs);

    if (s->state == NBD_CLIENT_CONNECTED) {
        NBDRequestHeader disc = {
            .magic = GUINT32_TO_BE(NBD_REQUEST_MAGIC),
            .type = GUINT16_TO_BE(NBD_CMD_DISC),
        };

        /*
         * Nothing is in flight (drained): the socket has room for it.  If
         * the server is gone already, there is nothing left to tell it.
         */
        if (s->tls_sess) {
            if (qcrypto_tls_session_write(s->tls_sess, &disc,
                                          sizeof(disc)) == sizeof(disc)) {
                qcrypto_tls_session_bye(s->tls_sess);
            }
        } else if (send(s->sock.fd, &disc, sizeof(disc), MSG_NOSIGNAL) < 0) {
            /* see above */
        }
    }
    nbd_client_kill(bs, NULL);
    AIO_WAIT_WHILE(ctx, s->conn_co);
    co_socket_close(&s->sock);
    g_clear_pointer(&s->tls_sess, qcrypto_tls_session_free);
    nbd_client_reconnect_cleanup(bs);
    nbd_recv_cleanup(bs);
    nbd_free_config(s);
}

static int64_t nbd_getlength(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;

    return s->info.size;
}

/*
 * NBD has no resize: a "truncate" that keeps the size, or that needs no
 * exact size and stays within the export, is accepted as it is (what
 * creation on an export asks for); anything else is refused, as in QEMU.
 */
static int coroutine_fn nbd_co_truncate(BlockDriverState *bs, int64_t offset,
                                        bool exact, PreallocMode prealloc,
                                        BdrvRequestFlags flags, Error **errp)
{
    BDRVNBDState *s = bs->opaque;

    if (offset != s->info.size && exact) {
        error_setg(errp, "Cannot resize NBD nodes");
        return -ENOTSUP;
    }
    if (offset > s->info.size) {
        error_setg(errp, "Cannot grow NBD nodes");
        return -EINVAL;
    }
    return 0;
}

static void nbd_refresh_filename(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;
    const char *slash = s->export_named ? "/" : "";
    const char *exp = s->export_name;

    if (s->addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
        snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                 "nbd+unix://%s%s?socket=%s", slash, exp, s->addr->path);
    } else if (!s->port_named) {
        snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                 "nbd://%s%s%s", s->addr->host, slash, exp);
    } else {
        snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                 "nbd://%s:%s%s%s", s->addr->host, s->addr->port, slash,
                 exp);
    }
}

static int nbd_reopen_prepare(BDRVReopenState *state, Error **errp)
{
    BDRVNBDState *s = state->bs->opaque;

    if ((state->flags & BDRV_O_RDWR) &&
        (s->info.flags & NBD_FLAG_READ_ONLY)) {
        error_setg(errp, "NBD export is read-only");
        return -EACCES;
    }
    return 0;
}

/* What names a different export; the rest (TLS) only how to reach it. */
static const char *const nbd_strong_runtime_opts[] = {
    "server.",
    NBD_OPT_KEY_EXPORT,
    NULL
};

/*
 * One table per URI scheme, since a table has one protocol prefix; they
 * differ only in that ("nbd:" also covers the legacy syntax).
 */
#define NBD_DRIVER(proto)                                               \
    {                                                                   \
        .format_name            = "nbd",                                \
        .protocol_name          = proto,                                \
        .instance_size          = sizeof(BDRVNBDState),                 \
        .runtime_opts           = &qapi_opts_nbd_runtime,               \
        .strong_runtime_opts    = nbd_strong_runtime_opts,              \
        .bdrv_needs_filename    = false,                                \
        .bdrv_parse_filename    = nbd_parse_filename,                   \
        .bdrv_open              = nbd_open,                             \
        .bdrv_close             = nbd_close,                            \
        .bdrv_change_aio_context = nbd_change_aio_context,           \
        .bdrv_reopen_prepare    = nbd_reopen_prepare,                   \
        .bdrv_refresh_filename  = nbd_refresh_filename,                 \
        .bdrv_refresh_limits    = nbd_refresh_limits,                   \
        .bdrv_getlength         = nbd_getlength,                        \
        .bdrv_co_truncate       = nbd_co_truncate,                      \
        .create_opts            = &qapi_opts_nbd_create,                \
        .bdrv_co_create_opts    = bdrv_co_create_opts_simple,           \
        .bdrv_co_preadv         = nbd_co_preadv,                        \
        .bdrv_co_pwritev        = nbd_co_pwritev,                       \
        .bdrv_co_pwrite_zeroes  = nbd_co_pwrite_zeroes,                 \
        .bdrv_co_pdiscard       = nbd_co_pdiscard,                      \
        .bdrv_co_flush_to_disk  = nbd_co_flush,                         \
        .bdrv_co_block_status   = nbd_co_block_status,                  \
    }

static const BlockDriver bdrv_nbd = NBD_DRIVER("nbd");
static const BlockDriver bdrv_nbd_tcp = NBD_DRIVER("nbd+tcp");
static const BlockDriver bdrv_nbd_unix = NBD_DRIVER("nbd+unix");

block_init(bdrv_register, bdrv_nbd)
block_init(bdrv_register, bdrv_nbd_tcp)
block_init(bdrv_register, bdrv_nbd_unix)
