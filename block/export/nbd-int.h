/*
 * The NBD server's private interface between its files:
 *
 *   nbd-server.c     server, listeners, exports, the life of a client
 *   nbd-negotiate.c  the handshake: greeting and options (phase 1)
 *   nbd-transmit.c   requests and replies (phase 2)
 *   ../nbd-proto.c   protocol names and the errno mapping (shared with
 *                    the client, block/nbd*.c)
 *
 * The invariants are stated at the top of nbd-server.c.
 */
#ifndef QBLOCK_NBD_INT_H
#define QBLOCK_NBD_INT_H

#include "block/nbd.h"
#include "block/nbd-proto.h"
#include "util/co-socket.h"

/* Requests a client may have in flight; more wait in the socket. */
#define NBD_MAX_REQUESTS            16

/*
 * Bytes of request buffers one client may hold at once (invariant 8 of
 * nbd-server.c): two of the largest requests, so that one can be read
 * while the reply of the other is sent, and a client that does not read
 * its replies holds this much at most instead of NBD_MAX_REQUESTS of
 * the largest size (512 MiB).
 */
#define NBD_CLIENT_BUFFER_BUDGET    (2 * NBD_MAX_PAYLOAD_SIZE)

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

typedef struct NBDClient NBDClient;

struct NBDServer {
    AioContext *ctx;
    NBDServerConfig cfg;
    GList *listeners;           /* NBDListener */
    GQueue clients;             /* NBDClient, in accept order */
    GQueue exports;             /* NBDExport that clients can find */
    bool accepting;             /* listeners registered with the loop */
    bool closing;               /* nbd_server_free() has begun */
    /* invariant 5: out of descriptors, retry when accept_timer fires */
    bool accept_backoff;
    bool accept_error_logged;   /* since the last accepted connection */
    QEMUTimer *accept_timer;
    /* invariant 8: request buffer bytes held by all clients, its limit */
    uint64_t buffer_bytes;
    uint64_t buffer_budget;
    /* connection coroutines waiting for buffer budget */
    CoQueue buffer_waiters;
};

struct NBDExport {
    NBDServer *server;
    /* --- immutable after nbd_export_new() --- */
    BlockBackend *blk;          /* one reference held */
    char *name;
    char *description;          /* NULL for none */
    int64_t size;
    uint16_t flags;             /* transmission flags, less DF */
    bool allocation_depth;
    /* --- event loop only --- */
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
} NBDMetaContexts;

struct NBDClient {
    NBDServer *server;
    GList link;                 /* entry of server->clients */
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
    /* exp is not referenced: a listed export or NULL (invariant 7) */
    NBDMetaContexts contexts;

    /* --- transmission --- */
    /* one reply chunk on the wire at a time (invariant 4) */
    CoMutex send_lock;
    unsigned int nr_requests;   /* request coroutines alive */
    uint64_t buffer_bytes;      /* invariant 8: held by its requests */
    /* the connection coroutine sleeps until nr_requests drops */
    bool waiting_for_requests;
    /* stop reading requests: protocol error, DISC, or close requested */
    bool quitting;
};

/* nbd-server.c */
void nbd_export_ref(NBDExport *exp);
void nbd_export_unref(NBDExport *exp);
/* Ends @client's connection: its coroutines see -ESHUTDOWN. */
void nbd_client_close(NBDClient *client);

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

/* nbd-transmit.c */
/*
 * Serves requests until the client disconnects, misbehaves (@errp says
 * how) or the connection is closed; returns once every request of the
 * client has completed.
 */
void coroutine_fn nbd_transmit(NBDClient *client, Error **errp);

#endif
