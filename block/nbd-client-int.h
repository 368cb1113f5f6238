/*
 * The NBD client driver's private interface between its files:
 *
 *   nbd.c              open/close, sending requests, the driver table;
 *                      the invariants are stated at its top
 *   nbd-client-recv.c  the receive coroutine: replies into requests
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

/* Marks @req done and wakes it if it waits for that (invariant 4). */
void nbd_client_complete(NBDClientRequest *req);
/* Ends the connection (invariant 2); @reason, if any, is reported once. */
void nbd_client_kill(BlockDriverState *bs, const char *reason);
/* The receive coroutine (invariant 3); @opaque is the node. */
void coroutine_fn nbd_recv_entry(void *opaque);

#endif
