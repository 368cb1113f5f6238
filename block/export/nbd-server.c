/*
 * The NBD server: listeners, exports and the life of a client connection
 * (see include/block/nbd.h).  The handshake is in nbd-negotiate.c, the
 * transmission phase in nbd-transmit.c.
 *
 * A connection goes through these states:
 *
 *   accepted --nbd_negotiate()--> transmission --nbd_transmit()--> ended
 *       |                              |                              |
 *       +---- error, ABORT, timeout ---+----- DISC, error, close -----+
 *                                                                     v
 *                                         nbd_client_free_bh(): freed
 *
 * Invariants:
 *  1. The server owns each client: a client is on server->clients from
 *     the moment it is created until nbd_client_free_bh() frees it, and
 *     nothing else frees it.  That bottom half is scheduled only by the
 *     connection coroutine, as its last action, after nbd_negotiate() and
 *     nbd_transmit() returned; nbd_transmit() returns only once every
 *     request coroutine of the client has finished.  So no coroutine of
 *     a client runs or waits when it is freed.
 *  2. Closing a client (nbd_client_close(): handshake timeout, export
 *     removal, server shutdown) never frees it: it shuts the socket down,
 *     every read and write of its coroutines then fails with -ESHUTDOWN,
 *     and the connection ends through invariant 1.
 *  3. An export is referenced by the server's export list (until it is
 *     removed) and by each client that chose it (until that client is
 *     freed); the last reference frees it and drops its BlockBackend.
 *     Removed exports are not found by new clients.
 *  4. Replies are serialised by the client's send queue: a reply, or one
 *     chunk of a structured reply, is queued whole, and one coroutine at
 *     a time (client->send_busy) writes what is queued, in order.
 *     Chunks of different requests may interleave on the wire, as the
 *     protocol allows; the last chunk of every reply carries
 *     NBD_REPLY_FLAG_DONE.  Only the connection coroutine reads from the
 *     socket, so requests are read one at a time, each with its payload.
 *  5. The listeners are registered with the loop (server->accepting)
 *     exactly while the server is not being freed, has fewer clients
 *     than cfg.max_connections (or no limit), and is not backing off:
 *     an accept that failed for lack of descriptors or memory
 *     unregisters them for SOCKET_ACCEPT_BACKOFF_NS (server->backoff,
 *     util/accept-backoff.h), and is logged once until a connection is
 *     accepted again.
 *  6. A client in the handshake holds a reference to the export that the
 *     option it is answering names (client->opt_exp), taken before its
 *     first wait on the socket and dropped once the option is answered;
 *     an export chosen for transmission is client->exp.  Both count as
 *     the export's clients (nbd_export_client_count()), and removing the
 *     export closes both kinds, so a reply that waits for as long as the
 *     client does not read never resumes on a freed export.  After every
 *     such wait the handshake checks exp->removed before it chooses the
 *     export or stores anything that names it.
 *  7. client->contexts.exp, the export a handshake client selected meta
 *     contexts for, is NULL or an export on the server's list: it is
 *     stored only for an export not removed (invariant 6), and removing
 *     the export clears it.  It holds no reference.
 *  8. Request buffers are budgeted: a request is charged the bytes of
 *     its buffer (nbd-transmit.c) before the buffer is allocated, and
 *     the charge is returned when the request is freed.  A client never
 *     holds more than NBD_CLIENT_BUFFER_BUDGET, all clients together
 *     never more than server->buffer_budget; the connection coroutine
 *     waits on server->buffer_waiters (reading no further requests)
 *     until its request fits, and closing a client wakes it.  Buffers
 *     given back stay in the client's pool, beside the budget, up to
 *     NBD_CLIENT_IDLE_BUFFERS, and go with the client.
 *
 *  9. Everything runs in the thread of server->ctx (the main loop in the
 *     storage daemon), except a client's transmission phase, which runs
 *     in its export's context (exp->ctx, an iothread's when the export
 *     has iothread=): the connection coroutine moves there once the
 *     handshake chose the export, and back before the client is freed.
 *     What the main loop does to such a client meanwhile (closing it,
 *     removing its export) it does holding that context
 *     (aio_context_acquire()).  The one thing shared between clients of
 *     different threads, the buffer budget (invariant 8), is under
 *     server->buffer_lock.
 * 10. With conn_ctxs (an export with a list of iothreads), connection k
 *     of the export runs its transmission phase in conn_ctxs[k mod n]
 *     instead of exp->ctx: its connection coroutine, socket, receive
 *     buffer, send queue, request slots and buffers stay there, and each
 *     request coroutine moves to exp->ctx for its block layer calls and
 *     back to queue its reply (nbd-transmit.c's nbd_co_to_node() and
 *     nbd_co_to_conn()), so the node is only touched in its own thread
 *     (threading rule 13 of docs/architecture.md).  A move is a
 *     coroutine scheduled on the other context: the requests that move
 *     in one loop iteration share one wake-up of the other thread (each
 *     move allocates the one-shot bottom half that schedules it).
 */
#include "util/osdep.h"
#include "crypto/tls-session.h"
#include "nbd-int.h"

#include <sys/socket.h>

typedef struct NBDListener {
    NBDServer *server;
    int fd;
    /*
     * Removed when the listener closes, if it still names the socket
     * bound (socket_unlink_unix()): a newer server that replaced it as
     * stale, while this one was closing, keeps its socket.
     */
    char *unix_path;
    SocketUnixFile unix_file;
} NBDListener;

static void nbd_server_update_accepting(NBDServer *server);

/* ---- exports ---- */

NBDExport *nbd_export_new(NBDServer *server, BlockBackend *blk,
                          const NBDExportConfig *cfg, Error **errp)
{
    const char *name = cfg->name ? cfg->name : "";
    uint64_t perm, shared;
    NBDExport *exp;
    int64_t size;

    if (strlen(name) > NBD_MAX_STRING_SIZE) {
        error_setg(errp, "export name '%s' too long", name);
        return NULL;
    }
    if (cfg->description &&
        strlen(cfg->description) > NBD_MAX_STRING_SIZE) {
        error_setg(errp, "export description '%s' too long",
                   cfg->description);
        return NULL;
    }
    if (nbd_export_find(server, name)) {
        error_setg(errp, "NBD server already has export named '%s'", name);
        return NULL;
    }
    blk_get_perm(blk, &perm, &shared);
    if (cfg->writable && !(perm & BLK_PERM_WRITE)) {
        error_setg(errp, "export '%s' is writable but its block backend "
                   "was opened read-only", name);
        return NULL;
    }
    size = blk_getlength(blk);
    if (size < 0) {
        error_setg_errno(errp, -size, "Failed to determine the size of "
                         "export '%s'", name);
        return NULL;
    }

    exp = g_new0(NBDExport, 1);
    exp->server = server;
    exp->blk = blk;
    exp->ctx = blk_get_aio_context(blk);
    blk_ref(blk);
    exp->name = g_strdup(name);
    exp->description = g_strdup(cfg->description);
    exp->allocation_depth = cfg->allocation_depth;
    if (nbd_export_bitmaps_init(exp, blk, cfg, errp) < 0) {
        blk_unref(blk);
        g_free(exp->name);
        g_free(exp->description);
        g_free(exp);
        return NULL;
    }
    /* FLUSH and FUA are always offered: with the write cache off they are
     * no-ops, and a client cannot know the cache mode otherwise. */
    exp->flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
                 NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_CACHE;
    if (cfg->writable) {
        exp->flags |= NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
                      NBD_FLAG_SEND_FAST_ZERO;
    } else {
        exp->flags |= NBD_FLAG_READ_ONLY;
    }
    if (cfg->multi_conn) {
        exp->flags |= NBD_FLAG_CAN_MULTI_CONN;
    }
    if (cfg->nr_conn_ctxs) {
        exp->conn_ctxs = g_memdup2(cfg->conn_ctxs,
                                   cfg->nr_conn_ctxs * sizeof(AioContext *));
        exp->nr_conn_ctxs = cfg->nr_conn_ctxs;
    }
    exp->refcnt = 1;            /* invariant 3: the server's list */
    g_queue_push_tail(&server->exports, exp);
    return exp;
}

NBDExport *nbd_export_find(NBDServer *server, const char *name)
{
    for (GList *l = server->exports.head; l; l = l->next) {
        NBDExport *exp = l->data;

        if (!strcmp(exp->name, name)) {
            return exp;
        }
    }
    return NULL;
}

const char *nbd_export_name(NBDExport *exp)
{
    return exp->name;
}

BlockBackend *nbd_export_blk(NBDExport *exp)
{
    return exp->blk;
}

unsigned int nbd_export_client_count(NBDExport *exp)
{
    unsigned int n = 0;

    for (GList *l = exp->server->clients.head; l; l = l->next) {
        NBDClient *client = l->data;

        /* invariant 6: a handshake client answering about it counts */
        n += client->exp == exp || client->opt_exp == exp;
    }
    return n;
}

int64_t nbd_export_size(NBDExport *exp)
{
    int64_t len = blk_getlength(exp->blk);

    /* a node that cannot tell its length serves no request at all */
    return len < 0 ? 0 : len;
}

void nbd_export_ref(NBDExport *exp)
{
    assert(exp->refcnt > 0);
    exp->refcnt++;
}

void nbd_export_unref(NBDExport *exp)
{
    assert(exp->refcnt > 0);
    if (--exp->refcnt > 0) {
        return;
    }
    /* invariant 3: only a removed export loses its last reference */
    assert(exp->removed);
    if (exp->removed_done) {
        aio_bh_schedule_oneshot(exp->server->ctx, exp->removed_done,
                                exp->removed_opaque);
    }
    nbd_export_bitmaps_fini(exp);
    blk_unref(exp->blk);
    g_free(exp->conn_ctxs);
    g_free(exp->name);
    g_free(exp->description);
    g_free(exp);
}

void nbd_export_remove(NBDExport *exp, void (*done)(void *opaque),
                       void *opaque)
{
    NBDServer *server = exp->server;

    assert(!exp->removed);
    exp->removed = true;
    exp->removed_done = done;
    exp->removed_opaque = opaque;
    g_queue_remove(&server->exports, exp);
    for (GList *l = server->clients.head; l; l = l->next) {
        NBDClient *client = l->data;

        if (client->exp == exp || client->opt_exp == exp) {
            /* invariant 6: its waits end with -ESHUTDOWN */
            nbd_client_close(client);
        }
        if (client->contexts.exp == exp) {
            /* invariant 7: a client in the handshake must not carry them
             * over to an export that might later live at the same
             * address */
            client->contexts = (NBDMetaContexts) { 0 };
        }
    }
    nbd_export_unref(exp);
}

/* ---- clients ---- */

/* Invariants 8 and 9: wakes every coroutine waiting for budget. */
static void nbd_server_buffer_wake_all(NBDServer *server)
{
    GSList *waiters;

    g_mutex_lock(&server->buffer_lock);
    waiters = g_steal_pointer(&server->buffer_waiters);
    g_mutex_unlock(&server->buffer_lock);
    for (GSList *l = waiters; l; l = l->next) {
        /* in its own context: scheduled there unless this is its thread */
        aio_co_wake(l->data);
    }
    g_slist_free(waiters);
}

bool coroutine_fn nbd_server_buffer_charge_or_wait(NBDServer *server,
                                                   uint64_t bytes,
                                                   bool client_fits)
{
    g_mutex_lock(&server->buffer_lock);
    if (client_fits &&
        server->buffer_bytes + bytes <= server->buffer_budget) {
        server->buffer_bytes += bytes;
        g_mutex_unlock(&server->buffer_lock);
        return true;
    }
    /*
     * Listed under the lock, so a release in another thread after our
     * check wakes us; it cannot enter us before we yield (aio_co_wake
     * schedules us in our context, whose thread is running us).
     */
    server->buffer_waiters = g_slist_prepend(server->buffer_waiters,
                                             qemu_coroutine_self());
    g_mutex_unlock(&server->buffer_lock);
    qemu_coroutine_yield();
    return false;
}

void nbd_server_buffer_uncharge(NBDServer *server, uint64_t bytes)
{
    g_mutex_lock(&server->buffer_lock);
    assert(server->buffer_bytes >= bytes);
    server->buffer_bytes -= bytes;
    g_mutex_unlock(&server->buffer_lock);
    nbd_server_buffer_wake_all(server);
}

void nbd_client_close(NBDClient *client)
{
    client->quitting = true;
    co_socket_shutdown(&client->sock);
    /* invariant 8: a client waiting for buffer budget sees quitting */
    nbd_server_buffer_wake_all(client->server);
}

/*
 * Invariant 9: moves the connection coroutine, and the socket's
 * handlers, to @ctx.  Called in the coroutine, nothing waiting.
 */
static void coroutine_fn nbd_client_move(NBDClient *client, AioContext *ctx)
{
    if (client->ctx == ctx) {
        return;
    }
    co_socket_set_aio_context(&client->sock, ctx);
    client->ctx = ctx;
    aio_co_reschedule_self(ctx);
}

/* Invariant 10: where the next connection to @exp transmits. */
static AioContext *nbd_export_next_conn_ctx(NBDExport *exp)
{
    if (!exp->nr_conn_ctxs) {
        return exp->ctx;
    }
    return exp->conn_ctxs[exp->next_conn++ % exp->nr_conn_ctxs];
}

static void nbd_client_handshake_timeout(void *opaque)
{
    NBDClient *client = opaque;

    error_report("Disconnect client, due to: handshake not finished "
                 "within %" PRId64 " seconds",
                 client->server->cfg.handshake_max_ns / (1000 * SCALE_MS));
    nbd_client_close(client);
}

/* Invariant 1: the only place a client is freed. */
static void nbd_client_free_bh(void *opaque)
{
    NBDClient *client = opaque;
    NBDServer *server = client->server;
    bool negotiated = client->exp != NULL;

    assert(client->nr_requests == 0);
    assert(!client->opt_exp);   /* invariant 6: the option was answered */
    assert(client->buffer_bytes == 0);  /* invariant 8 */
    g_queue_unlink(&server->clients, &client->link);
    timer_free(client->handshake_timer);
    co_socket_close(&client->sock);
    qcrypto_tls_session_free(client->tls);
    if (client->exp) {
        nbd_export_unref(client->exp);
    }
    g_free(client);

    nbd_server_update_accepting(server);
    if (server->cfg.client_closed) {
        server->cfg.client_closed(server->cfg.opaque, negotiated);
    }
}

static void coroutine_fn nbd_client_co_run(void *opaque)
{
    NBDClient *client = opaque;
    Error *err = NULL;

    if (nbd_negotiate(client, &err) == 0) {
        timer_del(client->handshake_timer);
        nbd_client_move(client, nbd_export_next_conn_ctx(client->exp));
        nbd_transmit(client, &err);
        nbd_client_move(client, client->server->ctx);
        if (err) {
            error_prepend(&err, "Disconnect client, due to: ");
        }
    } else if (err) {
        /* QEMU's words for a failed handshake (iotest 233 compares them) */
        error_prepend(&err, "option negotiation failed: ");
    }
    if (err) {
        error_report_err(err);
    }
    aio_bh_schedule_oneshot(client->server->ctx, nbd_client_free_bh,
                            client);
}

void nbd_server_add_client(NBDServer *server, int fd)
{
    NBDClient *client = g_new0(NBDClient, 1);
    int fl = fcntl(fd, F_GETFL);

    if (fl >= 0 && !(fl & O_NONBLOCK)) {
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
    client->server = server;
    client->link.data = client;
    client->ctx = server->ctx;
    co_socket_init(&client->sock, fd, server->ctx);
    qemu_co_queue_init(&client->send_room);
    client->handshake_timer = aio_timer_new(server->ctx, QEMU_CLOCK_REALTIME,
                                            SCALE_NS,
                                            nbd_client_handshake_timeout,
                                            client);
    if (server->cfg.handshake_max_ns > 0) {
        timer_mod(client->handshake_timer,
                  qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                  server->cfg.handshake_max_ns);
    }
    g_queue_push_tail_link(&server->clients, &client->link);
    nbd_server_update_accepting(server);

    client->co = qemu_coroutine_create(nbd_client_co_run, client);
    aio_co_enter(server->ctx, client->co);
}

unsigned int nbd_server_client_count(NBDServer *server)
{
    return server->clients.length;
}

/* ---- listeners ---- */

/* Invariant 5: the back-off began or ended. */
static void nbd_server_backoff_changed(void *opaque)
{
    nbd_server_update_accepting(opaque);
}

static void nbd_listener_accept(void *opaque)
{
    NBDListener *l = opaque;
    NBDServer *server = l->server;

    /* invariant 5: adding a client may unregister us; stop then */
    while (server->accepting) {
        int fd = socket_accept(l->fd);

        if (accept_backoff_check(&server->backoff, fd,
                                 "Failed to accept a connection")) {
            return;
        }
        if (fd < 0) {
            if (fd != -EAGAIN && fd != -ECONNABORTED) {
                error_report("Failed to accept a connection: %s",
                             strerror(-fd));
            }
            return;
        }
        nbd_server_add_client(server, fd);
    }
}

/* Invariant 5. */
static void nbd_server_set_accepting(NBDServer *server, bool on)
{
    if (server->accepting == on) {
        return;
    }
    server->accepting = on;
    for (GList *l = server->listeners; l; l = l->next) {
        NBDListener *listener = l->data;

        aio_set_fd_handler_rare(server->ctx, listener->fd,
                                on ? nbd_listener_accept : NULL, NULL,
                                listener);
    }
}

static void nbd_server_update_accepting(NBDServer *server)
{
    unsigned int max = server->cfg.max_connections;

    nbd_server_set_accepting(server, !server->closing &&
                             !accept_backoff_active(&server->backoff) &&
                             (!max || server->clients.length < max));
}

int nbd_server_listen(NBDServer *server, const SocketAddress *addr,
                      Error **errp)
{
    NBDListener *l = g_new0(NBDListener, 1);
    int fd;

    if (addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
        fd = socket_listen_unix(addr->path, SOMAXCONN, &l->unix_file, errp);
    } else {
        fd = socket_listen(addr, SOMAXCONN, errp);
    }
    if (fd < 0) {
        g_free(l);
        return fd;
    }
    l->server = server;
    l->fd = fd;
    if (addr->type == SOCKET_ADDRESS_TYPE_UNIX) {
        l->unix_path = g_strdup(addr->path);
    }
    server->listeners = g_list_append(server->listeners, l);
    if (server->accepting) {
        aio_set_fd_handler_rare(server->ctx, fd, nbd_listener_accept, NULL,
                                l);
    }
    return 0;
}

static void nbd_listener_free(NBDListener *l)
{
    aio_set_fd_handler(l->server->ctx, l->fd, NULL, NULL, NULL);
    close(l->fd);
    if (l->unix_path) {
        socket_unlink_unix(l->unix_path, &l->unix_file);
        g_free(l->unix_path);
    }
    g_free(l);
}

/* ---- the server ---- */

NBDServer *nbd_server_new(AioContext *ctx, const NBDServerConfig *cfg)
{
    NBDServer *server = g_new0(NBDServer, 1);

    server->ctx = ctx ? ctx : qemu_get_aio_context();
    if (cfg) {
        server->cfg = *cfg;
    }
    g_queue_init(&server->clients);
    g_queue_init(&server->exports);
    accept_backoff_init(&server->backoff, server->ctx,
                        nbd_server_backoff_changed, server);
    g_mutex_init(&server->buffer_lock);
    /* invariant 8: every request must fit, or it would wait forever */
    server->buffer_budget = MAX(server->cfg.max_buffer_bytes ?
                                server->cfg.max_buffer_bytes :
                                NBD_DEFAULT_BUFFER_BUDGET,
                                NBD_MAX_PAYLOAD_SIZE);
    nbd_server_update_accepting(server);
    return server;
}

void nbd_server_free(NBDServer *server)
{
    GList *l;

    /* invariant 5: no new clients from here on */
    server->closing = true;
    server->cfg.client_closed = NULL;
    nbd_server_update_accepting(server);
    g_list_free_full(server->listeners, (GDestroyNotify)nbd_listener_free);
    server->listeners = NULL;

    while ((l = server->exports.head)) {
        nbd_export_remove(l->data, NULL, NULL);
    }
    for (l = server->clients.head; l; l = l->next) {
        nbd_client_close(l->data);
    }
    AIO_WAIT_WHILE(server->ctx, server->clients.length > 0);
    accept_backoff_cleanup(&server->backoff);
    assert(!server->buffer_waiters);
    g_mutex_clear(&server->buffer_lock);
    g_free(server);
}
