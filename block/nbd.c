/*
 * nbd: the NBD client as a protocol driver.
 *
 * Open connects (util/qemu-sockets.c), negotiates the export on the
 * blocking socket (block/nbd-handshake.c), then hands the socket to the
 * node's AioContext as a CoSocket.  From then on:
 *
 *  - each request coroutine takes a free slot of s->reqs (waiting on
 *    s->free_slots when all NBD_CLIENT_MAX_REQUESTS are busy), sends its
 *    request under s->send_mutex and yields until its slot is done;
 *  - one receive coroutine (nbd_recv_entry) reads every reply, finds the
 *    slot by the reply's cookie, reads the payload straight into that
 *    request's buffer, and wakes the request when its last chunk came.
 *
 * Invariants:
 *  1. A slot is in_use from the moment a request takes it until that
 *     request has seen done and released it; only an in_use slot that is
 *     not done may receive a reply (a cookie naming any other slot is a
 *     protocol error, so nothing is ever written into a buffer whose
 *     request has gone).
 *  2. Once s->dead is set it stays set: the connection is shut down, every
 *     slot not done is completed with -EIO, and new requests fail at once.
 *  3. Only the receive coroutine reads from the socket; only the holder
 *     of s->send_mutex writes to it.
 *  4. A request coroutine is woken exactly once, and only while it
 *     waits for its reply (waiting): a reply or a failure that comes
 *     while it is still sending just marks the slot done, so no wake-up
 *     ever lands in the socket's or the mutex's yield.
 *
 * Everything runs in the node's AioContext thread.
 */
#include "block/block_int.h"
#include "block/nbd-client.h"
#include "block/nbd-proto.h"
#include "qapi/qapi-opts.h"
#include "util/co-socket.h"
#include "util/sockets.h"
#include <sys/socket.h>

/*
 * Requests in flight on the connection at once: enough to keep a server
 * busy during convert's parallel copies (QEMU uses the same number).
 */
#define NBD_CLIENT_MAX_REQUESTS 16

/* The protocol's limit on a request's length, and QEMU's default max. */
#define NBD_CLIENT_MAX_TRANSFER (32 * MiB)

/* Error chunks carry at most a short message; longer is hostile. */
#define NBD_CLIENT_MAX_CHUNK    (NBD_MAX_STRING_SIZE + 64)

typedef struct NBDClientRequest {
    bool in_use;
    bool done;
    /* yielded for its reply: only then may it be woken (invariant 4) */
    bool waiting;
    Coroutine *co;
    uint16_t type;              /* NBD_CMD_* */
    uint64_t offset;
    uint32_t length;
    QEMUIOVector *qiov;         /* where a read's data goes */
    int ret;                    /* first error of the reply, or 0 */
    /* block status: the first extent, once received */
    bool have_extent;
    uint32_t extent_length;
    uint32_t extent_flags;
} NBDClientRequest;

typedef struct BDRVNBDState {
    /* --- set at open, immutable until close --- */
    SocketAddress *addr;
    char *export_name;
    NBDExportInfo info;

    /* --- event-loop thread only --- */
    CoSocket sock;
    CoMutex send_mutex;         /* invariant 3; taken with no other lock */
    CoQueue free_slots;         /* requests waiting for a slot */
    NBDClientRequest reqs[NBD_CLIENT_MAX_REQUESTS];
    unsigned int in_flight;     /* slots in_use */
    Coroutine *recv_co;         /* NULL once the receive loop ended */
    bool dead;                  /* invariant 2 */
} BDRVNBDState;

/* ---------------------------------------------------------------------- */
/* Failure */

/* Marks @req done and wakes it if it waits for that (invariant 4). */
static void nbd_client_complete(NBDClientRequest *req)
{
    req->done = true;
    if (req->waiting) {
        aio_co_wake(req->co);
    }
}

/* Ends the connection (invariant 2); @reason is reported once. */
static void nbd_client_kill(BlockDriverState *bs, const char *reason)
{
    BDRVNBDState *s = bs->opaque;

    if (s->dead) {
        return;
    }
    s->dead = true;
    if (reason) {
        error_report("NBD server %s: %s", bs->filename, reason);
    }
    co_socket_shutdown(&s->sock);
    for (int i = 0; i < NBD_CLIENT_MAX_REQUESTS; i++) {
        NBDClientRequest *req = &s->reqs[i];

        if (req->in_use && !req->done) {
            req->ret = -EIO;
            nbd_client_complete(req);
        }
    }
    qemu_co_queue_restart_all(&s->free_slots);
}

static int nbd_errno_from_wire(uint32_t err)
{
    switch (err) {
    case NBD_EPERM:
        return -EPERM;
    case NBD_ENOMEM:
        return -ENOMEM;
    case NBD_EINVAL:
        return -EINVAL;
    case NBD_ENOSPC:
        return -ENOSPC;
    case NBD_EOVERFLOW:
        return -EOVERFLOW;
    case NBD_ENOTSUP:
        return -ENOTSUP;
    case NBD_ESHUTDOWN:
        return -ESHUTDOWN;
    default:
        return -EIO;
    }
}

/* ---------------------------------------------------------------------- */
/* Receiving */

/* Reads @len bytes of payload into @qiov at @qiov_off. */
static int coroutine_fn nbd_recv_into(BDRVNBDState *s, QEMUIOVector *qiov,
                                      size_t qiov_off, size_t len)
{
    for (int i = 0; i < qiov->niov && len; i++) {
        size_t iov_len = qiov->iov[i].iov_len;
        size_t n;
        int ret;

        if (qiov_off >= iov_len) {
            qiov_off -= iov_len;
            continue;
        }
        n = MIN(iov_len - qiov_off, len);
        ret = co_socket_read_all(&s->sock,
                                 (uint8_t *)qiov->iov[i].iov_base + qiov_off,
                                 n);
        if (ret < 0) {
            return ret;
        }
        qiov_off = 0;
        len -= n;
    }
    return 0;
}

/* Reads and drops @len bytes of a payload nobody needs. */
static int coroutine_fn nbd_recv_skip(BDRVNBDState *s, size_t len)
{
    uint8_t buf[512];

    while (len) {
        size_t n = MIN(len, sizeof(buf));
        int ret = co_socket_read_all(&s->sock, buf, n);

        if (ret < 0) {
            return ret;
        }
        len -= n;
    }
    return 0;
}

/* The slot a reply's cookie names, or NULL if none may get it (inv. 1). */
static NBDClientRequest *nbd_recv_slot(BDRVNBDState *s, uint64_t cookie)
{
    NBDClientRequest *req;

    if (cookie >= NBD_CLIENT_MAX_REQUESTS) {
        return NULL;
    }
    req = &s->reqs[cookie];
    return req->in_use && !req->done ? req : NULL;
}

/* A simple reply: error, and for a successful read the data. */
static const char *coroutine_fn nbd_recv_simple(BDRVNBDState *s,
                                                const NBDSimpleReply *rep)
{
    NBDClientRequest *req = nbd_recv_slot(s, GUINT64_FROM_BE(rep->cookie));
    uint32_t err = GUINT32_FROM_BE(rep->error);

    if (!req) {
        return "reply to a request that is not in flight";
    }
    if (s->info.structured_reply && req->type == NBD_CMD_READ && !err) {
        return "simple reply with data after structured replies were "
               "negotiated";
    }
    req->ret = err ? nbd_errno_from_wire(err) : 0;
    if (!err && req->type == NBD_CMD_READ &&
        nbd_recv_into(s, req->qiov, 0, req->length) < 0) {
        return "connection lost while reading data";
    }
    nbd_client_complete(req);
    return NULL;
}

/* NBD_REPLY_TYPE_OFFSET_DATA and _HOLE: a part of the read. */
static const char *coroutine_fn nbd_recv_read_chunk(BDRVNBDState *s,
                                                    NBDClientRequest *req,
                                                    uint16_t type,
                                                    uint32_t len)
{
    uint64_t offset;
    uint32_t data_len;

    if (req->type != NBD_CMD_READ) {
        return "data chunk in the reply to a request that is no read";
    }
    if (type == NBD_REPLY_TYPE_OFFSET_HOLE) {
        NBDReplyOffsetHole hole;

        if (len != sizeof(hole) ||
            co_socket_read_all(&s->sock, &hole, sizeof(hole)) < 0) {
            return "hole chunk of the wrong size or cut short";
        }
        offset = GUINT64_FROM_BE(hole.offset);
        data_len = GUINT32_FROM_BE(hole.length);
    } else {
        if (len <= sizeof(offset) ||
            co_socket_read_all(&s->sock, &offset, sizeof(offset)) < 0) {
            return "data chunk of the wrong size or cut short";
        }
        offset = GUINT64_FROM_BE(offset);
        data_len = len - sizeof(offset);
    }
    if (offset < req->offset || data_len == 0 ||
        offset - req->offset > req->length ||
        data_len > req->length - (offset - req->offset)) {
        return "chunk outside the range that was read";
    }
    if (type == NBD_REPLY_TYPE_OFFSET_HOLE) {
        qemu_iovec_memset(req->qiov, offset - req->offset, 0, data_len);
        return NULL;
    }
    if (nbd_recv_into(s, req->qiov, offset - req->offset, data_len) < 0) {
        return "connection lost while reading data";
    }
    return NULL;
}

/* NBD_REPLY_TYPE_ERROR and _ERROR_OFFSET. */
static const char *coroutine_fn nbd_recv_error_chunk(BDRVNBDState *s,
                                                     NBDClientRequest *req,
                                                     uint32_t len)
{
    NBDReplyError head;
    uint32_t err;

    if (len < sizeof(head) ||
        co_socket_read_all(&s->sock, &head, sizeof(head)) < 0) {
        return "error chunk of the wrong size or cut short";
    }
    if (GUINT16_FROM_BE(head.message_length) > len - sizeof(head)) {
        return "error chunk whose message is longer than the chunk";
    }
    err = GUINT32_FROM_BE(head.error);
    if (err == NBD_SUCCESS) {
        return "error chunk without an error";
    }
    /* The message and the offset say nothing the block layer can use. */
    if (nbd_recv_skip(s, len - sizeof(head)) < 0) {
        return "connection lost while reading an error chunk";
    }
    if (!req->ret) {
        req->ret = nbd_errno_from_wire(err);
    }
    return NULL;
}

static const char *coroutine_fn nbd_recv_status_chunk(BDRVNBDState *s,
                                                      NBDClientRequest *req,
                                                      uint32_t len)
{
    struct QEMU_PACKED {
        uint32_t context_id;
        NBDBlockStatusExtent ext;
    } head;

    if (req->type != NBD_CMD_BLOCK_STATUS) {
        return "block status chunk in the reply to another command";
    }
    if (len < sizeof(head) ||
        (len - sizeof(uint32_t)) % sizeof(NBDBlockStatusExtent) ||
        co_socket_read_all(&s->sock, &head, sizeof(head)) < 0) {
        return "block status chunk of the wrong size or cut short";
    }
    if (GUINT32_FROM_BE(head.context_id) != s->info.context_id) {
        return "block status for a context that was not selected";
    }
    if (req->have_extent) {
        return "more than one block status chunk";
    }
    /* NBD_CMD_FLAG_REQ_ONE was set: the first extent is all we asked. */
    req->have_extent = true;
    req->extent_length = GUINT32_FROM_BE(head.ext.length);
    req->extent_flags = GUINT32_FROM_BE(head.ext.flags);
    if (nbd_recv_skip(s, len - sizeof(head)) < 0) {
        return "connection lost while reading block status";
    }
    return NULL;
}

static const char *coroutine_fn nbd_recv_structured(BDRVNBDState *s,
                                                    const uint8_t *hdr_buf)
{
    NBDStructuredReplyChunk chunk;
    NBDClientRequest *req;
    uint16_t type, flags;
    uint32_t len;
    const char *fault = NULL;

    memcpy(&chunk, hdr_buf, sizeof(chunk));
    if (!s->info.structured_reply) {
        return "structured reply that was not negotiated";
    }
    req = nbd_recv_slot(s, GUINT64_FROM_BE(chunk.cookie));
    if (!req) {
        return "reply to a request that is not in flight";
    }
    type = GUINT16_FROM_BE(chunk.type);
    flags = GUINT16_FROM_BE(chunk.flags);
    len = GUINT32_FROM_BE(chunk.length);
    if (type == NBD_REPLY_TYPE_OFFSET_DATA) {
        if (len > sizeof(uint64_t) + req->length) {
            return "data chunk longer than the read";
        }
    } else if (len > NBD_CLIENT_MAX_CHUNK &&
               type != NBD_REPLY_TYPE_BLOCK_STATUS) {
        return "chunk larger than any the protocol allows";
    }

    switch (type) {
    case NBD_REPLY_TYPE_NONE:
        if (len || !(flags & NBD_REPLY_FLAG_DONE)) {
            return "NBD_REPLY_TYPE_NONE with a payload or not final";
        }
        break;
    case NBD_REPLY_TYPE_OFFSET_DATA:
    case NBD_REPLY_TYPE_OFFSET_HOLE:
        fault = nbd_recv_read_chunk(s, req, type, len);
        break;
    case NBD_REPLY_TYPE_BLOCK_STATUS:
        fault = nbd_recv_status_chunk(s, req, len);
        break;
    case NBD_REPLY_TYPE_ERROR:
    case NBD_REPLY_TYPE_ERROR_OFFSET:
        fault = nbd_recv_error_chunk(s, req, len);
        break;
    default:
        if (!(type & (1 << 15))) {
            return "chunk of an unknown type";
        }
        /* An unknown error type is still an error (protocol). */
        fault = nbd_recv_skip(s, len) < 0 ? "connection lost" : NULL;
        req->ret = req->ret ?: -EIO;
        break;
    }
    if (!fault && (flags & NBD_REPLY_FLAG_DONE)) {
        nbd_client_complete(req);
    }
    return fault;
}

/*
 * The receive loop (invariant 3).  Any fault kills the connection, which
 * fails every request in flight; it is never guessed around.
 */
static void coroutine_fn nbd_recv_entry(void *opaque)
{
    BlockDriverState *bs = opaque;
    BDRVNBDState *s = bs->opaque;
    uint8_t hdr[sizeof(NBDStructuredReplyChunk)];
    const char *fault = NULL;

    _Static_assert(sizeof(NBDSimpleReply) < sizeof(hdr), "header sizes");
    while (!s->dead && !fault) {
        uint32_t magic;
        int ret = co_socket_read_all(&s->sock, hdr, sizeof(NBDSimpleReply));

        if (ret < 0) {
            /*
             * A server that hangs up on an idle client is no fault worth a
             * message: the next request fails with EIO.
             */
            if (ret != -ESHUTDOWN && s->in_flight) {
                fault = "connection lost with requests in flight";
            }
            break;
        }
        memcpy(&magic, hdr, sizeof(magic));
        magic = GUINT32_FROM_BE(magic);
        if (magic == NBD_SIMPLE_REPLY_MAGIC) {
            NBDSimpleReply rep;

            memcpy(&rep, hdr, sizeof(rep));
            fault = nbd_recv_simple(s, &rep);
        } else if (magic == NBD_STRUCTURED_REPLY_MAGIC) {
            if (co_socket_read_all(&s->sock, hdr + sizeof(NBDSimpleReply),
                                   sizeof(hdr) - sizeof(NBDSimpleReply))) {
                fault = "connection lost in a reply header";
            } else {
                fault = nbd_recv_structured(s, hdr);
            }
        } else {
            fault = "reply with a bad magic";
        }
    }
    nbd_client_kill(bs, fault);
    s->recv_co = NULL;
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
    while (!s->dead && s->in_flight == NBD_CLIENT_MAX_REQUESTS) {
        qemu_co_queue_wait(&s->free_slots, NULL);
    }
    if (s->dead) {
        return NULL;
    }
    for (int i = 0; i < NBD_CLIENT_MAX_REQUESTS; i++) {
        if (!s->reqs[i].in_use) {
            *cookie = i;
            s->in_flight++;
            return &s->reqs[i];
        }
    }
    g_assert_not_reached();
}

static int coroutine_fn nbd_co_send(BDRVNBDState *s, const NBDClientCmd *cmd,
                                    uint64_t cookie)
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
    ret = s->dead ? -EIO : co_socket_writev_all(&s->sock, iov, niov + 1);
    qemu_co_mutex_unlock(&s->send_mutex);
    return ret;
}

/*
 * Sends @cmd and waits for its whole reply.  @req_out, if given, gets a
 * copy of the slot (block status) before the slot is released.
 */
static int coroutine_fn nbd_co_request(BlockDriverState *bs,
                                       const NBDClientCmd *cmd,
                                       NBDClientRequest *req_out)
{
    BDRVNBDState *s = bs->opaque;
    NBDClientRequest *req;
    uint64_t cookie;
    int ret;

    req = nbd_co_take_slot(s, &cookie);
    if (!req) {
        return -EIO;
    }
    *req = (NBDClientRequest){
        .in_use = true,
        .co = qemu_coroutine_self(),
        .type = cmd->type,
        .offset = cmd->offset,
        .length = cmd->length,
        .qiov = cmd->read_qiov,
    };
    ret = nbd_co_send(s, cmd, cookie);
    if (ret < 0) {
        nbd_client_kill(bs, "sending a request failed");
    }
    req->waiting = true;
    while (!req->done) {
        qemu_coroutine_yield();
    }
    req->waiting = false;
    ret = req->ret;
    if (req_out) {
        *req_out = *req;
    }
    req->in_use = false;
    s->in_flight--;
    qemu_co_queue_next(&s->free_slots);
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

static int coroutine_fn nbd_co_pwrite_zeroes(BlockDriverState *bs,
                                             int64_t offset, int64_t bytes,
                                             BdrvRequestFlags flags)
{
    BDRVNBDState *s = bs->opaque;
    NBDClientCmd cmd = {
        .type = NBD_CMD_WRITE_ZEROES,
        .offset = offset,
        .length = bytes,
    };

    if (!(s->info.flags & NBD_FLAG_SEND_WRITE_ZEROES) ||
        bytes > UINT32_MAX) {
        return -ENOTSUP;
    }
    if (flags & BDRV_REQ_FUA) {
        cmd.flags |= NBD_CMD_FLAG_FUA;
    }
    if (!(flags & BDRV_REQ_MAY_UNMAP)) {
        cmd.flags |= NBD_CMD_FLAG_NO_HOLE;
    }
    if (flags & BDRV_REQ_NO_FALLBACK) {
        cmd.flags |= NBD_CMD_FLAG_FAST_ZERO;
    }
    return nbd_co_request(bs, &cmd, NULL);
}

static int coroutine_fn nbd_co_pdiscard(BlockDriverState *bs, int64_t offset,
                                        int64_t bytes)
{
    BDRVNBDState *s = bs->opaque;
    NBDClientCmd cmd = {
        .type = NBD_CMD_TRIM,
        .offset = offset,
        .length = bytes,
    };

    if (!(s->info.flags & NBD_FLAG_SEND_TRIM) || bytes > UINT32_MAX) {
        return -ENOTSUP;
    }
    return nbd_co_request(bs, &cmd, NULL);
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
        .length = MIN(bytes, UINT32_MAX - (UINT32_MAX % bs->bl.request_alignment)),
    };
    int ret;

    *map = offset;
    *file = bs;
    if (!s->info.base_allocation) {
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

static int nbd_connect(BlockDriverState *bs, Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    int fd, ret, fl;

    fd = socket_connect(s->addr, errp);
    if (fd < 0) {
        return fd;
    }
    ret = nbd_client_handshake(fd, s->export_name, &s->info, errp);
    if (ret < 0) {
        close(fd);
        return ret;
    }
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        error_setg_errno(errp, errno, "Failed to make the NBD socket "
                         "non-blocking");
        close(fd);
        return -errno;
    }
    co_socket_init(&s->sock, fd, bdrv_get_aio_context(bs));
    return 0;
}

static int nbd_open(BlockDriverState *bs, QDict *options, int flags,
                    Error **errp)
{
    BDRVNBDState *s = bs->opaque;
    QemuOpts *opts;
    int ret;

    opts = qemu_opts_absorb_qdict(&qapi_opts_nbd_runtime, options, errp);
    if (!opts) {
        return -EINVAL;
    }
    if (qemu_opt_get(opts, NBD_OPT_KEY_TLS_CREDS)) {
        error_setg(errp, "tls-creds '%s': qblock's NBD client does not "
                   "support TLS yet", qemu_opt_get(opts,
                   NBD_OPT_KEY_TLS_CREDS));
        qemu_opts_del(opts);
        return -ENOTSUP;
    }
    s->addr = nbd_opts_to_addr(opts, errp);
    s->export_name = g_strdup(qemu_opt_get(opts, NBD_OPT_KEY_EXPORT) ?: "");
    qemu_opts_del(opts);
    if (!s->addr) {
        ret = -EINVAL;
        goto fail;
    }
    ret = nbd_connect(bs, errp);
    if (ret < 0) {
        goto fail;
    }
    if ((s->info.flags & NBD_FLAG_READ_ONLY) && (flags & BDRV_O_RDWR)) {
        if (!(flags & BDRV_O_AUTO_RDONLY)) {
            /* QEMU's words, which scripts written against it match */
            error_setg_errno(errp, EACCES, "Could not open image");
            ret = -EACCES;
            goto fail_close;
        }
        bs->read_only = true;
    }
    if (s->info.size > INT64_MAX) {
        error_setg(errp, "NBD export '%s' has the impossible size %" PRIu64,
                   s->export_name, s->info.size);
        ret = -EPROTO;
        goto fail_close;
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
    qemu_co_mutex_init(&s->send_mutex);
    qemu_co_queue_init(&s->free_slots);
    s->recv_co = qemu_coroutine_create(nbd_recv_entry, bs);
    aio_co_enter(bdrv_get_aio_context(bs), s->recv_co);
    return 0;

fail_close:
    co_socket_close(&s->sock);
fail:
    /* the node is freed without bdrv_close after a failed open */
    socket_address_free(s->addr);
    g_free(s->export_name);
    return ret;
}

static void nbd_close(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;
    AioContext *ctx = bdrv_get_aio_context(bs);

    if (!s->dead) {
        NBDRequestHeader disc = {
            .magic = GUINT32_TO_BE(NBD_REQUEST_MAGIC),
            .type = GUINT16_TO_BE(NBD_CMD_DISC),
        };

        /* Nothing is in flight (drained): the socket has room for it. */
        if (send(s->sock.fd, &disc, sizeof(disc), MSG_NOSIGNAL) < 0) {
            /* the server is gone already; nothing left to tell it */
        }
        nbd_client_kill(bs, NULL);
    }
    AIO_WAIT_WHILE(ctx, s->recv_co);
    co_socket_close(&s->sock);
    socket_address_free(s->addr);
    g_free(s->export_name);
}

static int64_t nbd_getlength(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;

    return s->info.size;
}

static void nbd_refresh_filename(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;
    const char *exp = s->export_name;

    if (s->addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
        snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                 "nbd+unix:///%s?socket=%s", exp, s->addr->path);
    } else if (!strcmp(s->addr->port, NBD_DEFAULT_PORT)) {
        snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                 "nbd://%s/%s", s->addr->host, exp);
    } else {
        snprintf(bs->exact_filename, sizeof(bs->exact_filename),
                 "nbd://%s:%s/%s", s->addr->host, s->addr->port, exp);
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
        .bdrv_reopen_prepare    = nbd_reopen_prepare,                   \
        .bdrv_refresh_filename  = nbd_refresh_filename,                 \
        .bdrv_refresh_limits    = nbd_refresh_limits,                   \
        .bdrv_getlength         = nbd_getlength,                        \
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
