/*
 * The NBD transmission phase, server side: requests in, replies out.
 *
 * The connection coroutine reads one request at a time, with its WRITE
 * payload, through a receive buffer (nbd_recv(): one recv() takes every
 * header that has arrived), checks it, and starts a request coroutine
 * for it; up to
 * NBD_MAX_REQUESTS of them run at once, so a client's requests overlap
 * in the block layer.  Each request coroutine queues its own reply
 * (invariant 4 of nbd-server.c), the replies of one event-loop iteration
 * go out in one sendmsg() (nbd_send()), and it frees itself.
 *
 * Replies: without structured replies every reply is simple.  With them,
 * READ answers with data and hole chunks (one data chunk under
 * NBD_CMD_FLAG_DF), BLOCK_STATUS with one chunk per selected context,
 * errors of every command with an error chunk carrying a message, and
 * the other commands' successes with simple replies, which the protocol
 * allows.
 *
 * A request that breaks the protocol in a way the stream cannot recover
 * from (bad magic, a WRITE payload too large to read) ends the
 * connection; any other bad request gets an error reply and the client
 * stays.
 *
 * A connection may run in another thread than its export's node
 * (invariant 10 of nbd-server.c): then a request coroutine is in the
 * node's context from nbd_co_to_node() before its block layer calls to
 * nbd_co_to_conn() before it touches the connection again (its reply,
 * its buffers, its slot); both are no-ops otherwise.
 */
#include "util/osdep.h"
#include "block/block_int.h"
#include "nbd-int.h"

struct NBDRequest {
    NBDClient *client;
    uint16_t flags;             /* NBD_CMD_FLAG_* */
    uint16_t type;              /* NBD_CMD_* */
    uint64_t cookie;
    uint64_t offset;
    uint32_t len;
    void *data;                 /* the WRITE payload */
    int error;                  /* -errno found by the checks, or 0 */
    uint64_t charge;            /* buffer bytes budgeted (invariant 8) */
    NBDRequest *next_free;      /* in client->free_requests */
};

/* ---- the two threads of a request (invariant 10 of nbd-server.c) ---- */

/* Before the block layer: the node's context. */
static void coroutine_fn nbd_co_to_node(NBDClient *client)
{
    aio_co_reschedule_self(client->exp->ctx);
}

/* Before anything of the connection: its context. */
static void coroutine_fn nbd_co_to_conn(NBDClient *client)
{
    aio_co_reschedule_self(client->ctx);
}

/* ---- request slots and their buffers ---- */

/*
 * A request slot: one a finished request left in client->free_requests,
 * or a new one while fewer than NBD_MAX_REQUESTS were ever in flight, so
 * that a steady stream of requests allocates none.
 */
static NBDRequest *nbd_request_new(NBDClient *client)
{
    NBDRequest *req = client->free_requests;

    if (req) {
        client->free_requests = req->next_free;
        *req = (NBDRequest) { .client = client };
    } else {
        req = g_new0(NBDRequest, 1);
        req->client = client;
    }
    return req;
}

/*
 * A data buffer of @len bytes for @client's export, from the client's
 * pool (util/buffer-pool.h): reused, not allocated, request after
 * request.  NULL when memory is short.
 */
static void *nbd_buffer_get(NBDClient *client, size_t len)
{
    return buffer_pool_try_get(client->buffers,
                               bdrv_opt_mem_align(blk_bs(client->exp->blk)),
                               len);
}

static void nbd_buffer_put(NBDClient *client, void *buf, size_t len)
{
    if (buf) {
        buffer_pool_put(client->buffers, buf, len);
    }
}

static void nbd_buffer_release(NBDRequest *req);

/* Gives back @req's payload, its budget and the slot itself. */
static void nbd_request_free(NBDRequest *req)
{
    NBDClient *client = req->client;

    nbd_buffer_put(client, req->data, req->len);
    nbd_buffer_release(req);
    req->next_free = client->free_requests;
    client->free_requests = req;
}

/* ---- receiving ---- */

/*
 * Reads exactly @len bytes of the stream into @buf, through the client's
 * receive buffer: what it holds first, then one recv() for as much as
 * has arrived, or a read straight into @buf for a large payload.  After
 * a recv() that emptied the socket, it waits for the socket to be
 * readable rather than try a recv() that would fail with EAGAIN.
 * Returns 0 or the -errno of co_socket_read_all().
 */
static int coroutine_fn nbd_recv(NBDClient *client, void *buf, size_t len)
{
    uint8_t *p = buf;

    while (len > 0) {
        size_t n = MIN(len, client->recv_len - client->recv_pos);
        ssize_t got;

        memcpy(p, client->recv_buf + client->recv_pos, n);
        client->recv_pos += n;
        p += n;
        len -= n;
        if (len == 0) {
            break;
        }
        /* the buffer is empty */
        client->recv_pos = client->recv_len = 0;
        if (len >= NBD_RECV_DIRECT) {
            client->recv_drained = false;
            return co_socket_read_all(&client->sock, p, len);
        }
        if (client->recv_drained) {
            /* a recv() now would most likely find nothing: poll first */
            int ret = co_socket_wait_readable(&client->sock);

            if (ret < 0) {
                return ret;
            }
        }
        got = co_socket_read_some(&client->sock, client->recv_buf,
                                  NBD_RECV_BUFFER_SIZE);
        if (got < 0) {
            return got;
        }
        client->recv_len = got;
        client->recv_drained = got < NBD_RECV_BUFFER_SIZE;
    }
    return 0;
}

/* ---- the buffer budget (invariant 8 of nbd-server.c) ---- */

/*
 * Charges @bytes to @req once they fit in its client's and the server's
 * budgets, waiting (and reading no further requests) until they do.
 * Returns 0, or -ESHUTDOWN if the client was closed meanwhile.
 */
static int coroutine_fn nbd_buffer_acquire(NBDRequest *req, uint64_t bytes)
{
    NBDClient *client = req->client;
    NBDServer *server = client->server;

    assert(req->charge == 0 && bytes <= NBD_MAX_PAYLOAD_SIZE);
    do {
        if (client->quitting) {
            return -ESHUTDOWN;
        }
    } while (!nbd_server_buffer_charge_or_wait(
                 server, bytes,
                 client->buffer_bytes + bytes <= NBD_CLIENT_BUFFER_BUDGET));
    client->buffer_bytes += bytes;
    req->charge = bytes;
    return 0;
}

static void nbd_buffer_release(NBDRequest *req)
{
    NBDClient *client = req->client;
    NBDServer *server;

    if (!req->charge) {
        return;
    }
    server = client->server;
    assert(client->buffer_bytes >= req->charge);
    client->buffer_bytes -= req->charge;
    nbd_server_buffer_uncharge(server, req->charge);
    req->charge = 0;
}

/* How many meta contexts the client selected. */
static unsigned int nbd_contexts_count(const NBDMetaContexts *ctx)
{
    return ctx->base_allocation + ctx->allocation_depth +
           __builtin_popcountll(ctx->bitmaps);
}

/*
 * The bytes of buffer a checked request without payload will allocate:
 * the data of READ and CACHE, the extents of BLOCK_STATUS (at most
 * NBD_MAX_BLOCK_STATUS_EXTENTS per selected context).
 */
static uint64_t nbd_request_buffer_size(NBDRequest *req)
{
    NBDMetaContexts *ctx = &req->client->contexts;

    switch (req->type) {
    case NBD_CMD_READ:
    case NBD_CMD_CACHE:
        return req->len;
    case NBD_CMD_BLOCK_STATUS:
        return nbd_contexts_count(ctx) *
               NBD_MAX_BLOCK_STATUS_EXTENTS * sizeof(NBDBlockStatusExtent);
    default:
        return 0;
    }
}

/* ---- sending ---- */

/* A coroutine whose reply is queued, until it has been written. */
struct NBDSendWaiter {
    Coroutine *co;
    int ret;
    bool done;
    NBDSendWaiter *next;        /* in client->send_waiters */
};

/*
 * Writes what is queued, batch after batch, until the queue is empty;
 * run by one coroutine at a time (client->send_busy).  Each batch is
 * detached first, so that replies queued while it is written join the
 * next one.
 */
static void coroutine_fn nbd_send_queued(NBDClient *client)
{
    struct iovec iov[NBD_SEND_IOV_MAX];

    while (client->send_cnt) {
        unsigned int cnt = client->send_cnt;
        NBDSendWaiter *w = client->send_waiters;
        int ret;

        memcpy(iov, client->send_iov, cnt * sizeof(iov[0]));
        client->send_cnt = 0;
        client->send_waiters = NULL;
        qemu_co_queue_restart_all(&client->send_room);
        ret = co_socket_writev_all(&client->sock, iov, cnt);
        while (w) {
            /* read the link first: a woken waiter's frame goes away */
            NBDSendWaiter *next = w->next;

            w->ret = ret;
            w->done = true;
            if (w->co != qemu_coroutine_self()) {
                aio_co_wake(w->co);
            }
            w = next;
        }
    }
}

/*
 * Writes one reply or chunk whole (invariant 4); a failure closes.  The
 * replies of the requests that complete in one event-loop iteration go
 * out together, with one sendmsg(): the first to queue yields once, to
 * the end of the iteration, before it writes the queue; a reply of
 * NBD_SEND_AT_ONCE_BYTES or more is written at once, with the queue.
 */
static int coroutine_fn nbd_send(NBDClient *client, struct iovec *iov,
                                 unsigned int iovcnt)
{
    NBDSendWaiter w = { .co = qemu_coroutine_self() };

    nbd_co_to_conn(client);
    assert(iovcnt <= NBD_SEND_IOV_MAX);
    while (client->send_cnt + iovcnt > NBD_SEND_IOV_MAX) {
        qemu_co_queue_wait(&client->send_room, NULL);
    }
    memcpy(client->send_iov + client->send_cnt, iov,
           iovcnt * sizeof(*iov));
    client->send_cnt += iovcnt;
    w.next = client->send_waiters;
    client->send_waiters = &w;
    if (!client->send_busy) {
        client->send_busy = true;
        if (iov_size(iov, iovcnt) < NBD_SEND_AT_ONCE_BYTES) {
            aio_co_schedule(client->ctx, w.co);
            qemu_coroutine_yield();
        }
        nbd_send_queued(client);
        client->send_busy = false;
    }
    while (!w.done) {
        qemu_coroutine_yield();
    }
    if (w.ret < 0) {
        /* the client is gone: stop reading its requests too */
        nbd_client_close(client);
    }
    return w.ret;
}

static int coroutine_fn nbd_send_simple(NBDRequest *req, uint32_t error,
                                        void *data, size_t len)
{
    NBDSimpleReply reply = {
        .magic = GUINT32_TO_BE(NBD_SIMPLE_REPLY_MAGIC),
        .error = GUINT32_TO_BE(error),
        .cookie = GUINT64_TO_BE(req->cookie),
    };
    struct iovec iov[2] = {
        { .iov_base = &reply, .iov_len = sizeof(reply) },
        { .iov_base = data, .iov_len = len },
    };

    return nbd_send(req->client, iov, 2);
}

/* A structured chunk: header, then the @n iovecs of @payload. */
static int coroutine_fn nbd_send_chunk(NBDRequest *req, uint16_t flags,
                                       uint16_t type, struct iovec *payload,
                                       unsigned int n)
{
    NBDStructuredReplyChunk chunk = {
        .magic = GUINT32_TO_BE(NBD_STRUCTURED_REPLY_MAGIC),
        .flags = GUINT16_TO_BE(flags),
        .type = GUINT16_TO_BE(type),
        .cookie = GUINT64_TO_BE(req->cookie),
        .length = GUINT32_TO_BE(iov_size(payload, n)),
    };
    struct iovec iov[4];

    assert(n < ARRAY_SIZE(iov));
    iov[0] = (struct iovec) { .iov_base = &chunk, .iov_len = sizeof(chunk) };
    if (n) {
        memcpy(iov + 1, payload, n * sizeof(*payload));
    }
    return nbd_send(req->client, iov, n + 1);
}

/*
 * The final reply of a failed request: an error chunk with a message for
 * people when structured replies are on, else a simple reply.  @wire is
 * the protocol's error value for @err.
 */
static int coroutine_fn nbd_send_error(NBDRequest *req, uint32_t wire,
                                       int err)
{
    g_autofree char *msg = NULL;
    NBDReplyError head;
    struct iovec payload[2];

    if (!req->client->structured_reply) {
        return nbd_send_simple(req, wire, NULL, 0);
    }
    msg = g_strdup_printf("%s failed: %s", nbd_cmd_name(req->type),
                          strerror(-err));
    head = (NBDReplyError) {
        .error = GUINT32_TO_BE(wire),
        .message_length = GUINT16_TO_BE(strlen(msg)),
    };
    payload[0] = (struct iovec) { .iov_base = &head,
                                  .iov_len = sizeof(head) };
    payload[1] = (struct iovec) { .iov_base = msg, .iov_len = strlen(msg) };
    return nbd_send_chunk(req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR,
                          payload, 2);
}

/* The reply of a request without data: success or an error. */
static int coroutine_fn nbd_send_result(NBDRequest *req, int ret)
{
    if (ret < 0) {
        return nbd_send_error(req, nbd_errno_to_wire(ret), ret);
    }
    return nbd_send_simple(req, 0, NULL, 0);
}

static int coroutine_fn nbd_send_data_chunk(NBDRequest *req, bool last,
                                            uint64_t offset, void *buf,
                                            size_t len)
{
    uint64_t be_offset = GUINT64_TO_BE(offset);
    struct iovec payload[2] = {
        { .iov_base = &be_offset, .iov_len = sizeof(be_offset) },
        { .iov_base = buf, .iov_len = len },
    };

    return nbd_send_chunk(req, last ? NBD_REPLY_FLAG_DONE : 0,
                          NBD_REPLY_TYPE_OFFSET_DATA, payload, 2);
}

static int coroutine_fn nbd_send_hole_chunk(NBDRequest *req, bool last,
                                            uint64_t offset, uint32_t len)
{
    NBDReplyOffsetHole hole = {
        .offset = GUINT64_TO_BE(offset),
        .length = GUINT32_TO_BE(len),
    };
    struct iovec payload = { .iov_base = &hole, .iov_len = sizeof(hole) };

    return nbd_send_chunk(req, last ? NBD_REPLY_FLAG_DONE : 0,
                          NBD_REPLY_TYPE_OFFSET_HOLE, &payload, 1);
}

/* ---- READ ---- */

/*
 * A structured read without DF: ranges that read as zeroes go out as
 * hole chunks, the rest as data chunks, so a sparse image costs little
 * bandwidth.  Block status errors only cost precision: the range is then
 * read as data.
 */
static void coroutine_fn nbd_co_read_sparse(NBDRequest *req, uint8_t *buf)
{
    NBDExport *exp = req->client->exp;
    int64_t offset = req->offset;
    int64_t end = req->offset + req->len;

    while (offset < end) {
        int64_t pnum = 0;
        bool zero, last;
        int st, ret;

        nbd_co_to_node(req->client);
        st = bdrv_co_block_status_above(blk_bs(exp->blk), NULL, true, offset,
                                        end - offset, &pnum, NULL, NULL,
                                        NULL);
        zero = st >= 0 && pnum > 0 && (st & BDRV_BLOCK_ZERO);
        if (st < 0 || pnum <= 0) {
            pnum = end - offset;
        }
        last = offset + pnum == end;
        if (zero) {
            ret = nbd_send_hole_chunk(req, last, offset, pnum);
        } else {
            uint8_t *p = buf + (offset - req->offset);
            QEMUIOVector qiov;

            qemu_iovec_init_buf(&qiov, p, pnum);
            ret = blk_co_preadv(exp->blk, offset, pnum, &qiov, 0);
            if (ret < 0) {
                nbd_send_result(req, ret);
                return;
            }
            ret = nbd_send_data_chunk(req, last, offset, p, pnum);
        }
        if (ret < 0) {
            return;
        }
        offset += pnum;
    }
}

static void coroutine_fn nbd_co_read(NBDRequest *req)
{
    NBDClient *client = req->client;
    BlockBackend *blk = client->exp->blk;
    QEMUIOVector qiov;
    uint8_t *buf;
    int ret;

    if (req->len == 0) {
        /* nothing to read; a structured reply still needs a DONE chunk */
        if (client->structured_reply) {
            nbd_send_chunk(req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE,
                           NULL, 0);
        } else {
            nbd_send_simple(req, 0, NULL, 0);
        }
        return;
    }
    buf = nbd_buffer_get(client, req->len);
    if (!buf) {
        nbd_send_result(req, -ENOMEM);
        return;
    }
    if (client->structured_reply && !(req->flags & NBD_CMD_FLAG_DF)) {
        nbd_co_read_sparse(req, buf);
        nbd_co_to_conn(client);
        nbd_buffer_put(client, buf, req->len);
        return;
    }
    qemu_iovec_init_buf(&qiov, buf, req->len);
    nbd_co_to_node(client);
    ret = blk_co_preadv(blk, req->offset, req->len, &qiov, 0);
    if (ret < 0) {
        nbd_send_result(req, ret);
    } else if (client->structured_reply) {
        nbd_send_data_chunk(req, true, req->offset, buf, req->len);
    } else {
        nbd_send_simple(req, 0, buf, req->len);
    }
    nbd_buffer_put(client, buf, req->len);
}

/* ---- BLOCK_STATUS ---- */

/*
 * Collects the extents of [req->offset, +len) for one context: at most
 * NBD_MAX_BLOCK_STATUS_EXTENTS, one with REQ_ONE, neighbours with the
 * same flags merged.  The last extent may end before the range does.
 */
static int coroutine_fn nbd_collect_extents(NBDRequest *req, bool depth_ctx,
                                            GArray *extents)
{
    BlockDriverState *bs = blk_bs(req->client->exp->blk);
    int64_t offset = req->offset;
    int64_t end = req->offset + req->len;

    while (offset < end && extents->len < NBD_MAX_BLOCK_STATUS_EXTENTS) {
        NBDBlockStatusExtent *prev;
        int64_t pnum = 0;
        uint32_t flags;
        int depth = 0;
        int ret = bdrv_co_block_status_above(bs, NULL, !depth_ctx, offset,
                                             end - offset, &pnum, NULL,
                                             NULL, &depth);

        if (ret < 0) {
            return ret;
        }
        if (pnum <= 0) {
            break;
        }
        if (depth_ctx) {
            /* 0: no layer has it, 1: the top image, 2: its backing... */
            flags = (ret & BDRV_BLOCK_ALLOCATED) ? depth : 0;
        } else {
            flags = ((ret & BDRV_BLOCK_DATA) ? 0 : NBD_STATE_HOLE) |
                    ((ret & BDRV_BLOCK_ZERO) ? NBD_STATE_ZERO : 0);
        }
        prev = extents->len ? &g_array_index(extents, NBDBlockStatusExtent,
                                             extents->len - 1) : NULL;
        if (prev && prev->flags == flags &&
            prev->length + pnum <= UINT32_MAX) {
            prev->length += pnum;
        } else {
            NBDBlockStatusExtent e = { .length = pnum, .flags = flags };

            g_array_append_val(extents, e);
        }
        offset += pnum;
        if (req->flags & NBD_CMD_FLAG_REQ_ONE) {
            break;
        }
    }
    return 0;
}

/*
 * One chunk of extents for context @ctx_id, which says what they describe:
 * base:allocation, qemu:allocation-depth or one of the export's bitmaps
 * (NBD_META_ID_DIRTY_BITMAP_BASE + its index); @last ends the reply.
 */
static int coroutine_fn nbd_send_extents(NBDRequest *req, uint32_t ctx_id,
                                         bool last)
{
    g_autoptr(GArray) extents =
        g_array_new(false, false, sizeof(NBDBlockStatusExtent));
    uint32_t be_id = GUINT32_TO_BE(ctx_id);
    struct iovec payload[2];
    int ret = 0;

    nbd_co_to_node(req->client);
    if (ctx_id >= NBD_META_ID_DIRTY_BITMAP_BASE) {
        nbd_meta_bitmap_extents(req->client->exp,
                                ctx_id - NBD_META_ID_DIRTY_BITMAP_BASE,
                                req->offset, req->offset + req->len,
                                (req->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 :
                                NBD_MAX_BLOCK_STATUS_EXTENTS, extents);
    } else {
        ret = nbd_collect_extents(req,
                                  ctx_id == NBD_META_ID_ALLOCATION_DEPTH,
                                  extents);
    }
    if (ret < 0) {
        nbd_send_result(req, ret);
        return ret;
    }
    for (guint i = 0; i < extents->len; i++) {
        NBDBlockStatusExtent *e = &g_array_index(extents,
                                                 NBDBlockStatusExtent, i);

        e->length = GUINT32_TO_BE(e->length);
        e->flags = GUINT32_TO_BE(e->flags);
    }
    payload[0] = (struct iovec) { .iov_base = &be_id,
                                  .iov_len = sizeof(be_id) };
    payload[1] = (struct iovec) {
        .iov_base = extents->data,
        .iov_len = extents->len * sizeof(NBDBlockStatusExtent),
    };
    return nbd_send_chunk(req, last ? NBD_REPLY_FLAG_DONE : 0,
                          NBD_REPLY_TYPE_BLOCK_STATUS, payload, 2);
}

/* One chunk per selected context; the checks made sure there is one. */
static void coroutine_fn nbd_co_block_status(NBDRequest *req)
{
    NBDMetaContexts *ctx = &req->client->contexts;
    unsigned int left = nbd_contexts_count(ctx);

    if (ctx->base_allocation &&
        nbd_send_extents(req, NBD_META_ID_BASE_ALLOCATION, --left == 0) < 0) {
        return;
    }
    if (ctx->allocation_depth &&
        nbd_send_extents(req, NBD_META_ID_ALLOCATION_DEPTH, --left == 0) < 0) {
        return;
    }
    for (int i = 0; i < req->client->exp->nr_bitmaps; i++) {
        if ((ctx->bitmaps & (1ULL << i)) &&
            nbd_send_extents(req, NBD_META_ID_DIRTY_BITMAP_BASE + i,
                             --left == 0) < 0) {
            return;
        }
    }
}

/* ---- the other commands ---- */

static int coroutine_fn nbd_co_cache(NBDRequest *req)
{
    BlockBackend *blk = req->client->exp->blk;

    /* a prefetch: a read where nothing below can do better, an
     * NBD_CMD_CACHE where the export is itself an NBD client */
    return blk_co_preadv(blk, req->offset, req->len, NULL,
                         BDRV_REQ_PREFETCH);
}

/* The commands whose reply carries no data; returns 0 or -errno. */
static int coroutine_fn nbd_co_simple_command(NBDRequest *req)
{
    BlockBackend *blk = req->client->exp->blk;
    BdrvRequestFlags fua = (req->flags & NBD_CMD_FLAG_FUA) ? BDRV_REQ_FUA
                                                            : 0;
    BdrvRequestFlags flags;
    QEMUIOVector qiov;
    int ret;

    nbd_co_to_node(req->client);
    switch (req->type) {
    case NBD_CMD_WRITE:
        qemu_iovec_init_buf(&qiov, req->data, req->len);
        return blk_co_pwritev(blk, req->offset, req->len, &qiov, fua);
    case NBD_CMD_FLUSH:
        return blk_co_flush(blk);
    case NBD_CMD_TRIM:
        ret = blk_co_pdiscard(blk, req->offset, req->len);
        if (ret == 0 && fua) {
            ret = blk_co_flush(blk);
        }
        return ret;
    case NBD_CMD_WRITE_ZEROES:
        flags = fua;
        if (!(req->flags & NBD_CMD_FLAG_NO_HOLE)) {
            flags |= BDRV_REQ_MAY_UNMAP;
        }
        if (req->flags & NBD_CMD_FLAG_FAST_ZERO) {
            flags |= BDRV_REQ_NO_FALLBACK;
        }
        return blk_co_pwrite_zeroes(blk, req->offset, req->len, flags);
    case NBD_CMD_CACHE:
        return nbd_co_cache(req);
    }
    g_assert_not_reached();
}

/* ---- requests ---- */

/* The request coroutine ended: let the connection coroutine go on. */
static void nbd_request_done(NBDClient *client)
{
    assert(client->nr_requests > 0);
    client->nr_requests--;
    if (client->waiting_for_requests) {
        client->waiting_for_requests = false;
        aio_co_wake(client->co);
    }
}

static void coroutine_fn nbd_request_co(void *opaque)
{
    NBDRequest *req = opaque;
    NBDClient *client = req->client;
    int ret;

    if (req->error) {
        nbd_send_result(req, req->error);
    } else if (req->type == NBD_CMD_READ) {
        nbd_co_read(req);
    } else if (req->type == NBD_CMD_BLOCK_STATUS) {
        nbd_co_block_status(req);
    } else {
        ret = nbd_co_simple_command(req);
        if (ret == -ENOTSUP && (req->flags & NBD_CMD_FLAG_FAST_ZERO)) {
            /* the one case where the protocol wants ENOTSUP back */
            nbd_send_error(req, NBD_ENOTSUP, ret);
        } else {
            nbd_send_result(req, ret);
        }
    }
    nbd_co_to_conn(client);
    nbd_request_free(req);
    nbd_request_done(client);
}

/* The flags each command accepts. */
static uint16_t nbd_valid_flags(NBDClient *client, uint16_t type)
{
    uint16_t valid = NBD_CMD_FLAG_FUA;

    switch (type) {
    case NBD_CMD_READ:
        return valid | (client->structured_reply ? NBD_CMD_FLAG_DF : 0);
    case NBD_CMD_WRITE_ZEROES:
        return valid | NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO;
    case NBD_CMD_BLOCK_STATUS:
        return valid | NBD_CMD_FLAG_REQ_ONE;
    default:
        return valid;
    }
}

/* Checks a request that was read whole; returns 0 or the -errno to send. */
static int nbd_check_request(NBDClient *client, NBDRequest *req)
{
    NBDExport *exp = client->exp;
    bool is_write = false;

    switch (req->type) {
    case NBD_CMD_READ:
    case NBD_CMD_CACHE:
        if (req->len > NBD_MAX_PAYLOAD_SIZE) {
            return -EINVAL;
        }
        break;
    case NBD_CMD_WRITE:
    case NBD_CMD_TRIM:
    case NBD_CMD_WRITE_ZEROES:
        is_write = true;
        break;
    case NBD_CMD_FLUSH:
        return req->flags & ~nbd_valid_flags(client, req->type) ? -EINVAL
                                                                 : 0;
    case NBD_CMD_BLOCK_STATUS:
        if (!nbd_contexts_count(&client->contexts)) {
            /* no context selected (or no structured replies) */
            return -EINVAL;
        }
        if (req->len == 0) {
            return -EINVAL;
        }
        break;
    default:
        return -EINVAL;
    }
    if (req->flags & ~nbd_valid_flags(client, req->type)) {
        return -EINVAL;
    }
    if (is_write && (exp->flags & NBD_FLAG_READ_ONLY)) {
        return -EPERM;
    }
    if (req->offset > (uint64_t)client->size ||
        req->len > (uint64_t)client->size - req->offset) {
        /* the protocol asks for ENOSPC on writes past the end */
        return req->type == NBD_CMD_WRITE ||
               req->type == NBD_CMD_WRITE_ZEROES ? -ENOSPC : -EINVAL;
    }
    return 0;
}

/*
 * Reads the next request with its payload into @req.  Returns 0, or
 * -errno when the connection must end: the client left or was closed
 * (no error set), or broke the protocol (@errp).
 */
static int coroutine_fn nbd_receive_request(NBDClient *client,
                                            NBDRequest *req, Error **errp)
{
    NBDRequestHeader hdr;
    int ret;

    ret = nbd_recv(client, &hdr, sizeof(hdr));
    if (ret == -EPIPE || ret == -ESHUTDOWN) {
        /* a client that hangs up without NBD_CMD_DISC is no error */
        return ret;
    }
    if (ret < 0) {
        error_setg_errno(errp, -ret, "Failed to read a request");
        return ret;
    }
    if (GUINT32_FROM_BE(hdr.magic) != NBD_REQUEST_MAGIC) {
        error_setg(errp, "invalid request magic 0x%08" PRIx32,
                   GUINT32_FROM_BE(hdr.magic));
        return -EINVAL;
    }
    req->client = client;
    req->flags = GUINT16_FROM_BE(hdr.flags);
    req->type = GUINT16_FROM_BE(hdr.type);
    req->cookie = GUINT64_FROM_BE(hdr.cookie);
    req->offset = GUINT64_FROM_BE(hdr.offset);
    req->len = GUINT32_FROM_BE(hdr.length);

    if (req->type == NBD_CMD_WRITE) {
        if (req->len > NBD_MAX_PAYLOAD_SIZE) {
            /* its payload follows: the stream is lost, hang up */
            error_setg(errp, "write of %" PRIu32 " bytes exceeds the "
                       "limit of %u", req->len,
                       (unsigned int)NBD_MAX_PAYLOAD_SIZE);
            return -EINVAL;
        }
        ret = nbd_buffer_acquire(req, req->len);
        if (ret < 0) {
            return ret;
        }
        req->data = nbd_buffer_get(client, req->len);
        if (!req->data) {
            error_setg(errp, "no memory for a write of %" PRIu32 " bytes",
                       req->len);
            return -ENOMEM;
        }
        ret = nbd_recv(client, req->data, req->len);
        if (ret < 0) {
            if (ret != -ESHUTDOWN) {
                error_setg_errno(errp, -ret, "Failed to read the payload "
                                 "of a write");
            }
            return ret;
        }
    }
    if (req->type == NBD_CMD_DISC) {
        return 0;
    }
    req->error = nbd_check_request(client, req);
    if (!req->error && req->type != NBD_CMD_WRITE) {
        /* a failed check allocates nothing: its reply carries no data */
        return nbd_buffer_acquire(req, nbd_request_buffer_size(req));
    }
    return 0;
}

/* Sleeps until at most @max requests of @client are in flight. */
static void coroutine_fn nbd_wait_requests(NBDClient *client,
                                           unsigned int max)
{
    while (client->nr_requests > max) {
        client->waiting_for_requests = true;
        qemu_coroutine_yield();
    }
}

void coroutine_fn nbd_transmit(NBDClient *client, Error **errp)
{
    client->recv_buf = g_malloc(NBD_RECV_BUFFER_SIZE);
    client->buffers = buffer_pool_new(NBD_CLIENT_IDLE_BUFFERS);
    while (!client->quitting) {
        NBDRequest *req;
        int ret;

        nbd_wait_requests(client, NBD_MAX_REQUESTS - 1);
        if (client->quitting) {
            break;
        }
        req = nbd_request_new(client);
        ret = nbd_receive_request(client, req, errp);
        if (ret < 0 || req->type == NBD_CMD_DISC) {
            if (ret < 0 && ret != -EPIPE) {
                /* replies still due would go to a broken stream; a
                 * client that only closed its sending side still reads */
                nbd_client_close(client);
            }
            nbd_request_free(req);
            break;
        }
        client->nr_requests++;
        qemu_coroutine_enter(qemu_coroutine_create(nbd_request_co, req));
    }
    /* invariant 1 of nbd-server.c: no request may outlive the client */
    nbd_wait_requests(client, 0);
    g_free(client->recv_buf);
    client->recv_buf = NULL;
    while (client->free_requests) {
        NBDRequest *req = client->free_requests;

        client->free_requests = req->next_free;
        g_free(req);
    }
    buffer_pool_free(client->buffers);
    client->buffers = NULL;
}
