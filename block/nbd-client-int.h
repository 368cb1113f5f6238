/*
 * The NBD client driver's private interface between its files:
 *
 *   nbd.c              open/close, sending requests, the driver table;
 *                      the invariants are stated at its top
 *   nbd-client-recv.c  the receive coroutine: replies into requests
 *   nbd-reconnect.c    the connection's states: loss, reconnection
 *                      within reconnect-delay, open-timeout
 *   nbd-handshake.c    negotiation (include/block/nbd-client.h)
 *   nbd-uri.c          file names (include/block/nbd-client.h)
 */
#ifndef QBLOCK_NBD_CLIENT_INT_H
#define QBLOCK_NBD_CLIENT_INT_H

#include "block/block_int.h"
#include "block/nbd-client.h"
#include "block/nbd-proto.h"
#include "util/co-socket.h"
#include "util/sockets.h"

/*
 * Requests in flight on the connection at once: enough to keep a server
 * busy during convert's parallel copies (QEMU uses the same number).
 */
#define NBD_CLIENT_MAX_REQUESTS 16

/* The protocol's limit on a request's length, and QEMU's default max. */
#define NBD_CLIENT_MAX_TRANSFER (32 * MiB)

/*
 * The time limit of a handshake (at open and at each reconnection) when
 * open-timeout gives none.  A live server answers each option at once;
 * the slowest ones seen (nbdkit plugins that reach a remote store when
 * the export is chosen, a TLS handshake on a loaded host) take seconds.
 * A minute leaves them a wide margin and still ends a silent server's
 * hold on the user's command.
 */
#define NBD_CLIENT_HANDSHAKE_TIMEOUT_S  60

/*
 * x-request-timeout's default: how long requests in flight wait while
 * the server sends nothing at all before the connection counts as lost.
 * The longest silence of a live server is one request that it works on
 * without a byte of reply: a flush of a large write-back cache, or a
 * write of zeroes (up to 4 GiB) or a trim on slow storage, which at
 * 30 MB/s takes about 140 s.  Five minutes is twice that; a server
 * silent for longer is taken as gone.
 */
#define NBD_CLIENT_REQUEST_TIMEOUT_S    300

#define NBD_NS_PER_SEC                  INT64_C(1000000000)

/* Error chunks carry at most a short message; longer is hostile. */
#define NBD_CLIENT_MAX_CHUNK    (NBD_MAX_STRING_SIZE + 64)

/*
 * The connection's states (nbd-reconnect.c draws the transitions).
 * Requests are sent only while CONNECTED.
 */
typedef enum NBDClientState {
    NBD_CLIENT_CONNECTED,
    /* lost, within reconnect-delay: requests wait, and are sent again */
    NBD_CLIENT_CONNECTING_WAIT,
    /* lost, no delay left: a request tries once to reconnect, else EIO */
    NBD_CLIENT_CONNECTING_NOWAIT,
    /* a protocol fault or close: final (invariant 2) */
    NBD_CLIENT_QUIT,
} NBDClientState;

typedef struct NBDClientRequest {
    bool in_use;
    bool done;
    /* done because the connection was lost: may be sent again */
    bool lost;
    /* yielded for its reply: only then may it be woken (invariant 4) */
    bool waiting;
    Coroutine *co;
    uint16_t type;              /* NBD_CMD_* */
    uint64_t offset;
    uint32_t length;
    QEMUIOVector *qiov;         /* where a read's data goes */
    int ret;                    /* first error of the reply, or 0 */
    /* bytes of a structured read covered by data and hole chunks */
    uint64_t covered;
    /* block status: the first extent, once received */
    bool have_extent;
    uint32_t extent_length;
    uint32_t extent_flags;
} NBDClientRequest;

typedef struct BDRVNBDState {
    /* --- set at open, immutable until close --- */
    SocketAddress *addr;
    char *export_name;
    bool export_named;          /* given, even as "" (file names differ) */
    bool port_named;            /* server.port given (file names differ) */
    char *context;              /* meta context of block status */
    bool alloc_depth;           /* context is qemu:allocation-depth */
    uint32_t reconnect_delay;   /* seconds */
    uint32_t open_timeout;      /* seconds; 0: one attempt */
    uint32_t request_timeout;   /* x-request-timeout, seconds; 0: none */
    bool writable;              /* opened read-write */
    NBDClientTLS tls;           /* creds (a reference held) and hostname */

    /* --- event-loop thread only --- */
    AioContext *ctx;            /* the node's: where conn_co runs */
    NBDExportInfo info;         /* of the current connection */
    NBDClientState state;
    CoSocket sock;
    QCryptoTLSSession *tls_sess;    /* under sock with TLS; freed after it */
    CoMutex send_mutex;         /* invariant 3; taken with no other lock */
    CoQueue free_slots;         /* requests waiting for a slot */
    NBDClientRequest reqs[NBD_CLIENT_MAX_REQUESTS];
    unsigned int in_flight;     /* slots in_use */
    /* receives, and reconnects while CONNECTING_WAIT; NULL once ended */
    Coroutine *conn_co;
    bool conn_sleeping;         /* conn_co waits for retry_timer */
    bool connecting;            /* an attempt to reconnect is under way */
    CoQueue reconnect_waiters;  /* requests waiting for a connection */
    QEMUTimer *delay_timer;     /* ends CONNECTING_WAIT */
    QEMUTimer *retry_timer;     /* the pause between attempts */
    Coroutine *connect_co;      /* waits in nbd_co_connect() */
    QEMUTimer *connect_timer;   /* its deadline, or its next try */
    int recv_err;               /* a read of the socket failed: lost */
    bool recv_woke;             /* the last reply woke its request */
    QEMUBH *recv_bh;            /* resumes conn_co after the woken ones */
    bool recv_yielded;          /* conn_co waits for recv_bh */
    /* x-request-timeout: when bytes last came, or the wait began */
    int64_t rx_stamp;           /* QEMU_CLOCK_REALTIME ns */
    QEMUTimer *silence_timer;   /* pending at most once per timeout */
} BDRVNBDState;

/* Marks @req done and wakes it if it waits for that (invariant 4). */
void nbd_client_complete(NBDClientRequest *req);
/* Ends the connection for good (invariant 2); @reason is reported once. */
void nbd_client_kill(BlockDriverState *bs, const char *reason);
/*
 * The connection was lost: requests in flight fail, or within
 * reconnect-delay wait to be sent again (nbd-reconnect.c).
 */
void nbd_client_lost(BlockDriverState *bs);
/*
 * Waits, as the state demands, until the client is CONNECTED: returns 0,
 * or -EIO when the request must fail.
 */
int coroutine_fn nbd_co_wait_connected(BlockDriverState *bs);
/*
 * Connects and negotiates, blocking (open); the connect and the
 * handshake must be over by @deadline (g_get_monotonic_time()).
 */
int nbd_client_connect(BDRVNBDState *s, int64_t deadline, int *fd,
                       QCryptoTLSSession **sess, NBDExportInfo *info,
                       Error **errp);
/* When a handshake that starts now must be over, without open-timeout. */
int64_t nbd_client_handshake_deadline(const BDRVNBDState *s);
/* Connects for open, retrying for s->open_timeout seconds. */
int nbd_client_connect_retry(BDRVNBDState *s, int *fd,
                             QCryptoTLSSession **sess, Error **errp);
/* Sets up the timers and queues of reconnection at open. */
void nbd_client_reconnect_init(BlockDriverState *bs);
/* Frees them at close, once conn_co has ended. */
void nbd_client_reconnect_cleanup(BlockDriverState *bs);
/*
 * The connection coroutine (invariant 3): receives replies; after a loss
 * within reconnect-delay, reconnects.  @opaque is the node.
 */
void coroutine_fn nbd_conn_entry(void *opaque);
/*
 * Receives replies until the connection ends (nbd-client-recv.c); called
 * by the connection coroutine only.
 */
void coroutine_fn nbd_recv_loop(BlockDriverState *bs);
/*
 * x-request-timeout (nbd-client-recv.c): a request was taken while none
 * was in flight, or the connection is new; the server's silence counts
 * from now.
 */
void nbd_recv_watch_start(BDRVNBDState *s);
/*
 * Creates and frees what the receive side keeps for the node's life: the
 * timer that watches the server's silence, the BH that resumes conn_co.
 */
void nbd_recv_init(BlockDriverState *bs);
void nbd_recv_cleanup(BlockDriverState *bs);
/* Binds the receive side's timer and bottom half to @ctx (a move). */
void nbd_recv_move(BlockDriverState *bs, AioContext *ctx);
/* Binds the reconnection timers to @ctx; none may be pending (a move). */
void nbd_client_reconnect_move(BlockDriverState *bs, AioContext *ctx);

#endif
