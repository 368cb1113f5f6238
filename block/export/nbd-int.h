/*
 * The NBD server's private interface between its files:
 *
 *   nbd-server.c     server, listeners, exports, the life of a client
 *   nbd-negotiate.c  the handshake: greeting and options (phase 1)
 *   nbd-transmit.c   requests and replies (phase 2)
 *   nbd-meta-bitmap.c  the qemu:dirty-bitmap:NAME meta contexts
 *   ../nbd-proto.c   protocol names and the errno mapping (shared with
 *                    the client, block/nbd*.c)
 *
 * The invariants are stated at the top of nbd-server.c.
 */
#ifndef QBLOCK_NBD_INT_H
#define QBLOCK_NBD_INT_H

#include "block/nbd.h"
#include "block/nbd-proto.h"
#include "util/accept-backoff.h"
#include "util/buffer-pool.h"
#include "util/co-socket.h"

/*
 * Requests a client may have in flight; more wait in the socket.  A
 * client at queue depth 32 (fio, a guest's NBD driver) must reach the
 * device with all 32: with qemu-nbd's 16 the export cut such a client's
 * depth in half (docs/performance.md).  64 leaves room for deeper
 * clients; what the requests hold is bounded by the buffer budget
 * (invariant 8 of nbd-server.c), their coroutines' stacks are touched
 * only as deep as the request path goes.
 */
#define NBD_MAX_REQUESTS            64

/*
 * Bytes of request buffers one client may hold at once (invariant 8 of
 * nbd-server.c): two of the largest requests, so that one can be read
 * while the reply of the other is sent, and a client that does not read
 * its replies holds this much at most instead of NBD_MAX_REQUESTS of
 * the largest size (512 MiB).
 */
#define NBD_CLIENT_BUFFER_BUDGET    (2 * NBD_MAX_PAYLOAD_SIZE)

/*
 * The transmission phase reads the socket through a buffer of this size,
 * so that one recv() takes every request header that has arrived (a
 * client at depth 32 sends 32 of 28 bytes at once) and the small WRITE
 * payloads between them; a payload of NBD_RECV_DIRECT bytes or more is
 * read straight into its own buffer, without the copy.
 */
#define NBD_RECV_BUFFER_SIZE        (64 * KiB)

/*
 * Idle data buffers a client keeps for its next requests
 * (util/buffer-pool.h): what 32 requests of 64 KiB in flight use, so that
 * a client at queue depth 32 allocates nothing per request; what it holds
 * beyond that while busy is bounded by the budget (invariant 8 of
 * nbd-server.c) and freed when given back.
 */
#define NBD_CLIENT_IDLE_BUFFERS     (2 * MiB)
#define NBD_RECV_DIRECT             (16 * KiB)

/*
 * Reply iovecs sent with one sendmsg() at most: the replies of every
 * request that completes in one event-loop iteration (a READ reply is two
 * to four iovecs), well under the kernel's IOV_MAX of 1024.
 */
#define NBD_SEND_IOV_MAX            256

/*
 * A reply this large is written at once instead of at the end of the
 * event-loop iteration: a large READ reply goes out as soon as it is
 * read, so that the client takes it and sends its next request while the
 * server reads the next one, instead of waiting for the replies of every
 * read that completes in this iteration (page-cache reads complete at
 * once).  Small replies (32 of 4 KiB at depth 32) still share one
 * sendmsg(); a large one is worth a system call of its own.
 */
#define NBD_SEND_AT_ONCE_BYTES      (64 * KiB)

/*
 * Largest option payload read during the handshake.  The longest
 * legitimate option is NBD_OPT_SET_META_CONTEXT: a name and a handful of
 * queries of at most NBD_MAX_STRING_SIZE each; 64 KiB leaves room for a
 * dozen, and bounds what a client can make the server allocate.
 */
#define NBD_MAX_OPTION_SIZE         (64 * KiB)

/*
 * Most extents in one NBD_REPLY_TYPE_BLOCK_STATUS chunk: 1 MiB of
 * extents, the size QEMU's client and server accept.
 */
#define NBD_MAX_BLOCK_STATUS_EXTENTS (MiB / sizeof(NBDBlockStatusExtent))

/* Context ids this server hands out in NBD_OPT_SET_META_CONTEXT. */
#define NBD_META_ID_BASE_ALLOCATION 0
#define NBD_META_ID_ALLOCATION_DEPTH 1
/* qemu:dirty-bitmap:NAME for the export's bitmap i has id BASE + i */
#define NBD_META_ID_DIRTY_BITMAP_BASE 2

typedef struct NBDClient NBDClient;
typedef struct NBDSendWaiter NBDSendWaiter;     /* nbd-transmit.c */
typedef struct NBDRequest NBDRequest;           /* nbd-transmit.c */

struct NBDServer {
    AioContext *ctx;
    NBDServerConfig cfg;
    GList *listeners;           /* NBDListener */
    GQueue clients;             /* NBDClient, in accept order */
    GQueue exports;             /* NBDExport that clients can find */
    bool accepting;             /* listeners registered with the loop */
    bool closing;               /* nbd_server_free() has begun */
    AcceptBackoff backoff;      /* invariant 5: out of descriptors */
    /*
     * Invariant 8: request buffer bytes held by all clients, its limit.
     * Clients of exports in iothreads charge it from their threads:
     * buffer_bytes and buffer_waiters are under buffer_lock (invariant
     * 9).
     */
    GMutex buffer_lock;
    uint64_t buffer_bytes;
    uint64_t buffer_budget;
    /* Coroutine *: connection coroutines waiting for buffer budget */
    GSList *buffer_waiters;
};

struct NBDExport {
    NBDServer *server;
    /* --- immutable after nbd_export_new() --- */
    BlockBackend *blk;          /* one reference held */
    AioContext *ctx;            /* its node's: transmission runs there */
    char *name;
    char *description;          /* NULL for none */
    uint16_t flags;             /* transmission flags, less DF */
    bool allocation_depth;
    /* invariant 10: where connections run (none: ctx) */
    AioContext **conn_ctxs;
    unsigned int nr_conn_ctxs;
    /* the bitmaps offered (busy while the export holds them) */
    struct BdrvDirtyBitmap **bitmaps;
    char **bitmap_contexts;     /* "qemu:dirty-bitmap:NAME" each */
    int nr_bitmaps;
    /* --- event loop only --- */
    unsigned int next_conn;     /* invariant 10: the next connection's k */
    int refcnt;                 /* the server's list + each client */
    bool removed;               /* off the server's list */
    void (*removed_done)(void *opaque);
    void *removed_opaque;
};

/* The meta contexts a client selected with NBD_OPT_SET_META_CONTEXT. */
typedef struct NBDMetaContexts {
    NBDExport *exp;             /* the export they were chosen for */
    bool base_allocation;
    bool allocation_depth;
    uint64_t bitmaps;           /* bit i: the export's bitmap i */
} NBDMetaContexts;

struct NBDClient {
    NBDServer *server;
    GList link;                 /* entry of server->clients */
    /*
     * Where the connection runs: server->ctx, and the context its export
     * gave it during transmission (invariants 9 and 10).
     */
    AioContext *ctx;
    CoSocket sock;
    struct QCryptoTLSSession *tls;  /* under sock once STARTTLS is done */
    Coroutine *co;              /* the connection coroutine */
    QEMUTimer *handshake_timer;

    /* --- set by the handshake, read-only in transmission --- */
    NBDExport *exp;             /* one reference held; NULL until chosen */
    /*
     * The export the option being answered is about: one reference held
     * while the handshake may wait on the socket (invariant 6).
     */
    NBDExport *opt_exp;
    bool structured_reply;
    /*
     * The export's length as the handshake told it; requests are checked
     * against it.  A resize of the export afterwards reaches new clients
     * only: NBD has no way to tell a connected one.
     */
    int64_t size;
    /* exp is not referenced: a listed export or NULL (invariant 7) */
    NBDMetaContexts contexts;

    /* --- transmission --- */
    /*
     * Bytes read from the socket and not yet consumed: recv_buf[recv_pos,
     * recv_len).  Only the connection coroutine reads (invariant 4).
     */
    uint8_t *recv_buf;          /* NBD_RECV_BUFFER_SIZE, from transmission */
    size_t recv_pos;
    size_t recv_len;
    bool recv_drained;          /* the last recv() emptied the socket */
    /*
     * Replies queued for the next sendmsg() (invariant 4): send_cnt
     * iovecs in send_iov, the coroutines that queued them on
     * send_waiters; send_busy while one of them writes, send_room for
     * those waiting for a full queue to go out.
     */
    struct iovec send_iov[NBD_SEND_IOV_MAX];
    unsigned int send_cnt;
    NBDSendWaiter *send_waiters;        /* newest first */
    bool send_busy;
    CoQueue send_room;
    unsigned int nr_requests;   /* request coroutines alive */
    /* slots of finished requests, for the next ones (nbd-transmit.c) */
    NBDRequest *free_requests;
    BufferPool *buffers;        /* their data buffers */
    uint64_t buffer_bytes;      /* invariant 8: held by its requests */
    /* the connection coroutine sleeps until nr_requests drops */
    bool waiting_for_requests;
    /* stop reading requests: protocol error, DISC, or close requested */
    bool quitting;
};

/* nbd-server.c */
/* The export's length now (it follows block_resize), 0 if unknown. */
int64_t nbd_export_size(NBDExport *exp);
void nbd_export_ref(NBDExport *exp);
void nbd_export_unref(NBDExport *exp);
/* Ends @client's connection: its coroutines see -ESHUTDOWN. */
void nbd_client_close(NBDClient *client);
/*
 * Invariant 8: charges @bytes to the server's budget if they fit there
 * and @client_fits (the client's own budget, which only its thread
 * touches); otherwise waits until a release or a close and returns false
 * (the caller checks again).
 */
bool coroutine_fn nbd_server_buffer_charge_or_wait(NBDServer *server,
                                                   uint64_t bytes,
                                                   bool client_fits);
/* Returns @bytes to the budget and wakes the waiters. */
void nbd_server_buffer_uncharge(NBDServer *server, uint64_t bytes);

/* nbd-negotiate.c */
/*
 * Runs the handshake.  Returns 0 when the client chose an export and
 * transmission begins (client->exp set), or -errno when the connection
 * is to be closed: the client aborted or went away (no error set), or it
 * broke the protocol (@errp says how).
 */
int coroutine_fn nbd_negotiate(NBDClient *client, Error **errp);
/* The transmission flags @client gets for @exp. */
uint16_t nbd_client_export_flags(NBDClient *client, NBDExport *exp);

/* nbd-meta-bitmap.c */
/* Finds and holds cfg->bitmaps for @exp; errors in qemu-nbd's words. */
int nbd_export_bitmaps_init(NBDExport *exp, BlockBackend *blk,
                            const NBDExportConfig *cfg, Error **errp);
/* Lets the bitmaps go (no longer busy). */
void nbd_export_bitmaps_fini(NBDExport *exp);
/* Adds to *@sel the bitmaps of @exp that @query names (a full context
 * name, "qemu:dirty-bitmap:" or "qemu:" for all of them). */
void nbd_meta_bitmaps_match(NBDExport *exp, const char *query,
                            uint64_t *sel);
/*
 * The extents of bitmap @i of @exp over [offset, end): dirty ones with
 * NBD_STATE_DIRTY, at most @max (1 with REQ_ONE), appended to @extents
 * (NBDBlockStatusExtent, host-endian).
 */
void nbd_meta_bitmap_extents(NBDExport *exp, int i, int64_t offset,
                             int64_t end, unsigned int max, GArray *extents);

/* nbd-transmit.c */
/*
 * Serves requests until the client disconnects, misbehaves (@errp says
 * how) or the connection is closed; returns once every request of the
 * client has completed.
 */
void coroutine_fn nbd_transmit(NBDClient *client, Error **errp);

#endif
