/*
 * The NBD server: exports of BlockBackends over the NBD protocol.
 *
 * An NBDServer listens on any number of sockets (TCP, unix) and serves
 * every connection it accepts from its AioContext's event loop, with
 * coroutines: no thread of its own, so a tool or a daemon runs it by
 * polling the loop (aio_poll) as it runs everything else.  Clients pick
 * one of the server's exports by name during the handshake.
 *
 * The server owns its listeners, its clients and its exports.  An export
 * holds a reference to its BlockBackend for as long as it lives; removing
 * an export disconnects the clients that use it, and it is freed when the
 * last of them is gone.  nbd_server_free() does all of that for every
 * export and returns once nothing of the server is left.
 *
 * Everything here runs in the thread of the server's AioContext, which
 * must be the context of every exported BlockBackend.
 */
#ifndef QBLOCK_NBD_H
#define QBLOCK_NBD_H

#include "qblock/block-backend.h"
#include "util/sockets.h"

typedef struct NBDServer NBDServer;
typedef struct NBDExport NBDExport;

/* Largest READ/WRITE/CACHE payload the server accepts (as QEMU's). */
#define NBD_MAX_PAYLOAD_SIZE        (32 * MiB)
/* Handshake time limit of qblock-nbd and of the storage daemon. */
#define NBD_DEFAULT_HANDSHAKE_MAX_SECS 10
/*
 * Bytes of request buffers (READ data, WRITE payloads, CACHE and
 * BLOCK_STATUS buffers) all clients of a server may hold at once, unless
 * NBDServerConfig says otherwise.  Eight requests of the largest size:
 * enough to keep a few clients busy at full speed, and a bound on what
 * clients that send requests and never read the replies can make the
 * server hold (issue 14: three such clients held 1.5 GB).
 */
#define NBD_DEFAULT_BUFFER_BUDGET   (8 * NBD_MAX_PAYLOAD_SIZE)

typedef struct NBDServerConfig {
    /*
     * TLS credentials (endpoint=server), or NULL for none: with them a
     * client must start TLS (NBD_OPT_STARTTLS) before any other option.
     * The caller holds a reference until nbd_server_free().
     */
    struct QCryptoTLSCreds *tls_creds;
    /*
     * With tls_creds: the id of an authz-simple object that each client's
     * identity must satisfy, or NULL for any client the credentials
     * accept.  The string must outlive the server.
     */
    const char *tls_authz;
    /*
     * Connections served at once; 0 for no limit.  While the limit is
     * reached the server stops accepting, and further clients wait in the
     * listen backlog until a connection ends (qemu-nbd -e).
     */
    unsigned int max_connections;
    /*
     * A client that has not finished its handshake after this many
     * nanoseconds is disconnected; 0 for no limit.
     */
    int64_t handshake_max_ns;
    /*
     * Bytes of request buffers the server's clients may hold at once; 0
     * for NBD_DEFAULT_BUFFER_BUDGET, and never less than
     * NBD_MAX_PAYLOAD_SIZE, so that every request fits.  A request that
     * would exceed it (or its client's share, NBD_CLIENT_BUFFER_BUDGET)
     * waits until earlier replies are sent; it is never refused.
     */
    uint64_t max_buffer_bytes;
    /*
     * Optional: called from the event loop after a connection has ended
     * and its client is freed.  @negotiated tells whether the client got
     * as far as the transmission phase (a client that only listed the
     * exports did not).  Not called for the connections that
     * nbd_server_free() ends.
     */
    void (*client_closed)(void *opaque, bool negotiated);
    void *opaque;
} NBDServerConfig;

NBDServer *nbd_server_new(AioContext *ctx, const NBDServerConfig *cfg);
/*
 * Starts listening on @addr.  A unix socket is removed again when the
 * server is freed.  Returns 0 or -errno.
 */
int nbd_server_listen(NBDServer *server, const SocketAddress *addr,
                      Error **errp);
/* Serves @fd, a connected stream socket, as a client (takes it over). */
void nbd_server_add_client(NBDServer *server, int fd);
/* Connections open now (in handshake or transmission). */
unsigned int nbd_server_client_count(NBDServer *server);
/*
 * Stops listening, disconnects every client, waits until they are gone
 * (polling the loop), frees every export and the server.
 */
void nbd_server_free(NBDServer *server);

/* Bitmaps one export may offer: a client selects them in a 64-bit mask. */
#define NBD_MAX_EXPORT_BITMAPS 64

typedef struct NBDExportConfig {
    const char *name;           /* "" is the default export */
    const char *description;    /* NULL for none */
    /* accept writes; the BlockBackend must have the WRITE permission */
    bool writable;
    /* offer the qemu:allocation-depth meta context (qemu-nbd -A) */
    bool allocation_depth;
    /*
     * Dirty bitmaps offered as qemu:dirty-bitmap:NAME contexts (qemu-nbd
     * -B, block-export-add's "bitmaps"): looked up on the exported node,
     * then down its backing chain; busy while exported.  At most
     * NBD_MAX_EXPORT_BITMAPS.
     */
    const char *const *bitmaps;
    /*
     * NULL, or for each bitmap the node it is on (block-export-add's
     * {"node", "name"} form, as QEMU 7.1 has it: any node, the way a
     * snapshot-access export offers its source's bitmap); a NULL entry
     * is looked up as above.
     */
    const char *const *bitmap_nodes;
    int nr_bitmaps;
    /*
     * Advertise NBD_FLAG_CAN_MULTI_CONN.  It is safe for every export of
     * this server: all connections to an export share one BlockBackend
     * in one process, so a read on any connection sees every write that
     * completed on any other, and a flush on one connection flushes the
     * whole graph, i.e. every write completed on any of them.  Callers
     * set it when more than one client may connect (qemu-nbd -e N with
     * N != 1, as qemu-nbd does), where it lets clients spread their
     * requests over several connections.
     */
    bool multi_conn;
    /*
     * Optional: the contexts connections are spread over in the
     * transmission phase, connection k in conn_ctxs[k % nr_conn_ctxs];
     * their request coroutines visit the BlockBackend's context for each
     * block layer call (threading rule 13 of docs/architecture.md).
     * None: every connection runs in the BlockBackend's context.  Each
     * must outlive the export.
     */
    AioContext *const *conn_ctxs;
    unsigned int nr_conn_ctxs;
} NBDExportConfig;

/*
 * Adds an export of @blk to @server (taking a reference to @blk).
 * Errors: a name or description longer than the protocol allows, a name
 * already exported, a writable export of a backend without the WRITE
 * permission, a backend without a medium.
 */
NBDExport *nbd_export_new(NBDServer *server, BlockBackend *blk,
                          const NBDExportConfig *cfg, Error **errp);
NBDExport *nbd_export_find(NBDServer *server, const char *name);
const char *nbd_export_name(NBDExport *exp);
BlockBackend *nbd_export_blk(NBDExport *exp);
/* Clients connected to @exp now. */
unsigned int nbd_export_client_count(NBDExport *exp);
/*
 * Removes @exp from its server: new clients no longer find it, its
 * clients are disconnected, and once the last one is gone the export is
 * freed (dropping its BlockBackend reference) and @done(@opaque) runs,
 * from the event loop.  @done may be NULL.
 */
void nbd_export_remove(NBDExport *exp, void (*done)(void *opaque),
                       void *opaque);

#endif
