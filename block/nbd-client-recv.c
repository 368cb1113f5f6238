/*
 * The NBD client's receive coroutine: one per connection, the only reader
 * of the socket (invariant 3 of block/nbd.c).  It reads each reply, finds
 * the request by the reply's cookie (invariant 1), reads the payload
 * straight into that request's buffer and completes the request when its
 * last chunk came.  Every length and offset the server sends is checked
 * against the request before anything is read into a buffer.  A fault of
 * the server ends the connection for good (nbd_client_kill); a connection
 * that breaks (a read fails) is lost (nbd_client_lost), which a client
 * with reconnect-delay survives.
 *
 * A server that sends nothing at all is lost too (x-request-timeout):
 * while requests are in flight, s->silence_timer watches the time since
 * bytes last came (s->rx_stamp, stamped by every read of the socket, so
 * a long read that trickles in is alive).  The timer is not moved for
 * each read: when it fires early it moves itself to the stamp's end, so
 * a busy connection costs one clock read per recv() and nothing more.
 */
#include "block/nbd-client-int.h"

/*
 * Every read of the socket goes through here, so that the loop can tell
 * a broken connection (s->recv_err set) from a server that sent nonsense,
 * and so that every byte received proves the server alive.
 */
static int coroutine_fn nbd_recv_read(BDRVNBDState *s, void *buf, size_t len)
{
    uint8_t *p = buf;

    while (len) {
        ssize_t n = co_socket_read_some(&s->sock, p, len);

        if (n < 0) {
            s->recv_err = n;
            return n;
        }
        s->rx_stamp = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
        p += n;
        len -= n;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The server's silence */

void nbd_recv_watch_start(BDRVNBDState *s)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);

    s->rx_stamp = now;
    if (s->request_timeout && !timer_pending(s->silence_timer)) {
        timer_mod(s->silence_timer,
                  now + (int64_t)s->request_timeout * NBD_NS_PER_SEC);
    }
}

/*
 * Nothing came for x-request-timeout seconds while requests waited: the
 * connection is lost, exactly as if it had broken (reconnect-delay then
 * applies).  Unlike a broken connection this is said, once, since
 * nothing else would tell the user why the requests failed.
 */
static void nbd_recv_silence_cb(void *opaque)
{
    BlockDriverState *bs = opaque;
    BDRVNBDState *s = bs->opaque;
    int64_t end = s->rx_stamp +
                  (int64_t)s->request_timeout * NBD_NS_PER_SEC;

    if (s->state != NBD_CLIENT_CONNECTED || !s->in_flight) {
        return;         /* idle: the next request starts the watch */
    }
    if (qemu_clock_get_ns(QEMU_CLOCK_REALTIME) < end) {
        timer_mod(s->silence_timer, end);
        return;
    }
    error_report("NBD server %s: sent nothing for %" PRIu32 " s with %u "
                 "request%s in flight (x-request-timeout): connection "
                 "taken as lost", bs->filename, s->request_timeout,
                 s->in_flight, s->in_flight == 1 ? "" : "s");
    nbd_client_lost(bs);
}

static int nbd_recv_errno(uint32_t err)
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
        ret = nbd_recv_read(s, (uint8_t *)qiov->iov[i].iov_base + qiov_off,
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
        int ret = nbd_recv_read(s, buf, n);

        if (ret < 0) {
            return ret;
        }
        len -= n;
    }
    return 0;
}

/* A reply is complete: its request runs once the loop yields (below). */
static void nbd_recv_complete(BDRVNBDState *s, NBDClientRequest *req)
{
    s->recv_woke |= req->waiting;
    nbd_client_complete(req);
}

/*
 * Lets the requests woken by the last reply run before the next reply is
 * read.  A woken coroutine is only scheduled (it may not nest in this
 * one), and while replies keep arriving this loop would never yield on
 * the socket: a convert's reads would all arrive before the first of
 * them is written, receiving and writing would take turns instead of
 * overlapping, and no new read would be sent meanwhile.  s->recv_bh,
 * scheduled after the woken requests' wake-up, resumes this coroutine
 * right after them.  It is a bottom half of its own rather than
 * aio_co_schedule(self): a woken request may close a node in a nested
 * event loop (create on an export does), where a coroutine scheduled in
 * the same batch as that request would wait for it for ever.
 */
static void coroutine_fn nbd_recv_yield_to_woken(BDRVNBDState *s)
{
    s->recv_woke = false;
    s->recv_yielded = true;
    qemu_bh_schedule(s->recv_bh);
    qemu_coroutine_yield();
}

/* In s->ctx, which a move may have made another than conn_co's last. */
static void nbd_recv_resume_bh(void *opaque)
{
    BDRVNBDState *s = opaque;

    s->recv_yielded = false;
    aio_co_enter(s->ctx, s->conn_co);
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
    req->ret = err ? nbd_recv_errno(err) : 0;
    if (!err && req->type == NBD_CMD_READ &&
        nbd_recv_into(s, req->qiov, 0, req->length) < 0) {
        return "connection lost while reading data";
    }
    nbd_recv_complete(s, req);
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

    assert(req->type == NBD_CMD_READ);
    if (type == NBD_REPLY_TYPE_OFFSET_HOLE) {
        NBDReplyOffsetHole hole;

        if (len != sizeof(hole) ||
            nbd_recv_read(s, &hole, sizeof(hole)) < 0) {
            return "hole chunk of the wrong size or cut short";
        }
        offset = GUINT64_FROM_BE(hole.offset);
        data_len = GUINT32_FROM_BE(hole.length);
    } else {
        if (len <= sizeof(offset) ||
            nbd_recv_read(s, &offset, sizeof(offset)) < 0) {
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
    /*
     * Chunks may not overlap (protocol), so they cover the read once they
     * add up to it; more than that means an overlap.
     */
    req->covered += data_len;
    if (req->covered > req->length) {
        return "chunks that overlap in a read";
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
        nbd_recv_read(s, &head, sizeof(head)) < 0) {
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
        req->ret = nbd_recv_errno(err);
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
        nbd_recv_read(s, &head, sizeof(head)) < 0) {
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
    if ((type == NBD_REPLY_TYPE_OFFSET_DATA ||
         type == NBD_REPLY_TYPE_OFFSET_HOLE) && req->type != NBD_CMD_READ) {
        return "data chunk in the reply to a request that is no read";
    }
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
    if (!fault && (flags & NBD_REPLY_FLAG_DONE) &&
        req->type == NBD_CMD_READ && !req->ret &&
        req->covered != req->length) {
        /* the rest of the buffer would be whatever it held before */
        return "read reply that leaves part of the range without data";
    }
    if (!fault && (flags & NBD_REPLY_FLAG_DONE)) {
        nbd_recv_complete(s, req);
    }
    return fault;
}

/*
 * The receive loop (invariant 3), until the connection ends.  A fault of
 * the server kills the connection, which fails every request in flight;
 * it is never guessed around.
 */
void coroutine_fn nbd_recv_loop(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;
    uint8_t hdr[sizeof(NBDStructuredReplyChunk)];
    const char *fault = NULL;

    _Static_assert(sizeof(NBDSimpleReply) < sizeof(hdr), "header sizes");
    s->recv_err = 0;
    /* a new connection: requests resent on it wait from now */
    s->rx_stamp = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    while (s->state == NBD_CLIENT_CONNECTED && !fault) {
        uint32_t magic;

        if (nbd_recv_read(s, hdr, sizeof(NBDSimpleReply)) < 0) {
            break;
        }
        memcpy(&magic, hdr, sizeof(magic));
        magic = GUINT32_FROM_BE(magic);
        if (magic == NBD_SIMPLE_REPLY_MAGIC) {
            NBDSimpleReply rep;

            memcpy(&rep, hdr, sizeof(rep));
            fault = nbd_recv_simple(s, &rep);
        } else if (magic == NBD_STRUCTURED_REPLY_MAGIC) {
            if (nbd_recv_read(s, hdr + sizeof(NBDSimpleReply),
                              sizeof(hdr) - sizeof(NBDSimpleReply))) {
                fault = "connection lost in a reply header";
            } else {
                fault = nbd_recv_structured(s, hdr);
            }
        } else {
            fault = "reply with a bad magic";
        }
        if (s->recv_woke && !fault) {
            nbd_recv_yield_to_woken(s);
        }
    }
    if (s->state != NBD_CLIENT_CONNECTED) {
        /* ended from outside (close, a failed send): said there */
        return;
    }
    if (s->recv_err) {
        nbd_client_lost(bs);
    } else {
        nbd_client_kill(bs, fault);
    }
}

/* ---------------------------------------------------------------------- */
/* Setup */

static void nbd_recv_bind(BlockDriverState *bs, AioContext *ctx)
{
    BDRVNBDState *s = bs->opaque;

    s->silence_timer = aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                                     nbd_recv_silence_cb, bs);
    s->recv_bh = aio_bh_new(ctx, nbd_recv_resume_bh, s);
}

void nbd_recv_init(BlockDriverState *bs)
{
    nbd_recv_bind(bs, bdrv_get_aio_context(bs));
}

/*
 * Nothing is in flight (a move is drained): an armed silence timer would
 * find the connection idle and do nothing, so it is dropped; the next
 * request arms the new one.  A resumption conn_co waits for is handed
 * over to the new bottom half.
 */
void nbd_recv_move(BlockDriverState *bs, AioContext *ctx)
{
    BDRVNBDState *s = bs->opaque;

    assert(!s->in_flight);
    timer_free(s->silence_timer);
    qemu_bh_cancel(s->recv_bh);
    qemu_bh_delete(s->recv_bh);
    nbd_recv_bind(bs, ctx);
    if (s->recv_yielded) {
        qemu_bh_schedule(s->recv_bh);
    }
}

void nbd_recv_cleanup(BlockDriverState *bs)
{
    BDRVNBDState *s = bs->opaque;

    timer_free(s->silence_timer);
    /* conn_co has ended: it waited for this BH to run before it did */
    qemu_bh_delete(s->recv_bh);
}
