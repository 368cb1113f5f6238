/*
 * The back-end side of the vhost-user protocol: a unix socket that one
 * front-end (QEMU) at a time connects to, the guest memory it shares,
 * and the split virtqueues it sets up.  A device type (vhost-user-blk)
 * supplies its features, its configuration space and the processing of
 * its queues; the server does the rest.
 *
 * The server listens from creation to vu_server_free().  While a
 * front-end is connected it accepts no other (later ones wait in the
 * listen backlog); when the front-end disconnects, the server waits for
 * the requests in flight, forgets everything the front-end set (memory,
 * rings, features) and accepts again, so a front-end may reconnect.
 *
 * Everything the front-end sends is checked before it is used: message
 * sizes, file descriptors, region counts, addresses, ring sizes and
 * indexes.  A message that breaks the protocol ends the connection with
 * an error report naming the request and the value; the server goes on
 * listening.  The guest's own mistakes in a ring break that queue only:
 * it stops, and the front-end is told through the vring's error eventfd.
 *
 * The server, its messages and the device's requests run in the thread
 * of the server's AioContext, which must be the context of the device's
 * BlockBackend.  Each ring runs in the thread of the context it was given
 * (VuServerConfig.queue_ctxs): a ring in another thread pops and pushes
 * there and hands its requests to the server's thread, and their
 * completions back, in batches (vhost-user-vring.c invariant 12).
 */
#ifndef QBLOCK_VHOST_USER_SERVER_H
#define QBLOCK_VHOST_USER_SERVER_H

#include "block/vhost-user-proto.h"
#include "virtio/virtqueue.h"
#include "util/aio.h"

/* Queues one server may have: the vring index of SET_VRING_KICK is 8 bits */
#define VU_MAX_QUEUES 256

typedef struct VuServer VuServer;
typedef struct VuVirtq VuVirtq;

/*
 * What a device type provides.  Everything is called from the event loop
 * in the server's thread (never a ring's); a callback may run inside a
 * message handler coroutine, so none may poll the loop.
 */
typedef struct VuDeviceOps {
    /* bytes of configuration space (at most VHOST_USER_MAX_CONFIG_SIZE) */
    size_t config_size;
    /*
     * Bytes of the device's own state per request, kept beside each
     * ring entry's element (vu_virtq_req_data()) so that requests
     * allocate nothing.
     */
    size_t req_size;
    /*
     * Required.  The virtio features offered (the server adds
     * VHOST_USER_F_PROTOCOL_FEATURES).
     */
    uint64_t (*get_features)(VuServer *s);
    /*
     * Required.  The front-end set @features (a subset of the offer, with
     * VHOST_USER_F_PROTOCOL_FEATURES masked out).  May come again at any
     * time, also while queues run.
     */
    void (*set_features)(VuServer *s, uint64_t features);
    /* Required.  Fills @config (config_size bytes, little-endian). */
    void (*get_config)(VuServer *s, uint8_t *config);
    /*
     * Optional (NULL: the configuration is read-only).  The front-end
     * wrote @len bytes at @offset; the range lies within the protocol's
     * limit but may extend past config_size.  Returns 0, or -errno with
     * @errp set when the write is refused: the front-end is told if it
     * asked for a reply, and the connection stays.
     */
    int (*set_config)(VuServer *s, const uint8_t *data, uint32_t offset,
                      uint32_t len, Error **errp);
    /*
     * Required.  Runs the request in @elem, popped from @q; it completes
     * with vu_virtq_complete(), in the server's thread, maybe before this
     * returns.  A request too malformed to complete returns -errno with
     * @errp set: the server breaks the queue.
     */
    int (*handle_request)(VuServer *s, VuVirtq *q, VirtQueueElement *elem,
                          Error **errp);
    /*
     * Optional.  The front-end is gone (or reset the device) and no
     * request is in flight any more: restore what a new front-end is to
     * find.
     */
    void (*reset)(VuServer *s);
} VuDeviceOps;

typedef struct VuServerConfig {
    const char *name;           /* for messages: "vhost-user-blk export 'x'" */
    const char *path;           /* the unix socket to listen on, or */
    const char *fd_str;         /* an inherited socket's number (not both) */
    unsigned int num_queues;    /* 1 to VU_MAX_QUEUES */
    /*
     * Optional: num_queues contexts, the one whose thread runs each ring
     * (NULL: all in the server's).  Each must outlive the server.
     */
    AioContext *const *queue_ctxs;
    const VuDeviceOps *ops;
    void *opaque;               /* vu_server_opaque() */
    /*
     * Optional: a front-end connected (@connected) or its connection has
     * ended and is cleaned up (!@connected).  Not called for a
     * connection that vu_server_free() ends.
     */
    void (*client_changed)(void *opaque, bool connected);
} VuServerConfig;

/*
 * Listens on @cfg->path (replacing a stale socket there, never another
 * kind of file) or on the inherited socket @cfg->fd_str.  Returns NULL with @errp set on failure.
 */
VuServer *vu_server_new(AioContext *ctx, const VuServerConfig *cfg,
                        Error **errp);
/*
 * Stops listening, removes the socket and disconnects the front-end;
 * once its connection has ended (its requests done, client_changed
 * called), @done(@opaque) runs from the loop.  @done may be NULL.  At
 * most once per server.
 */
void vu_server_shutdown(VuServer *s, void (*done)(void *opaque),
                        void *opaque);
/*
 * Shuts down (unless vu_server_shutdown() did), waits (polling the loop)
 * for the connection to end, and frees.  A pending @done still runs.
 */
void vu_server_free(VuServer *s);
void *vu_server_opaque(VuServer *s);
/* Whether a front-end is connected now. */
bool vu_server_has_client(VuServer *s);
/* The features the front-end set (0 before SET_FEATURES). */
uint64_t vu_server_features(VuServer *s);

/*
 * The device's configuration space changed: tells the front-end with a
 * VHOST_USER_BACKEND_CONFIG_CHANGE_MSG on its backend channel, if it
 * negotiated VHOST_USER_PROTOCOL_F_CONFIG and F_BACKEND_REQ and gave one
 * (as libvhost-user's back-ends do); without them it learns nothing.
 * Never waits: a front-end whose channel is full misses the message,
 * which is reported.
 */
void vu_server_config_changed(VuServer *s);

/* The queue's index (0 to num_queues - 1). */
unsigned int vu_virtq_index(VuVirtq *q);
/* The device's req_size bytes of state for @elem, a popped element. */
void *vu_virtq_req_data(VirtQueueElement *elem);
/*
 * Returns @elem through the used ring with @len bytes written into it,
 * and gives its slot back.  The front-end is notified, if the driver
 * wants it, once for the completions of a loop iteration.  Called in the
 * server's thread.
 */
void vu_virtq_complete(VuVirtq *q, VirtQueueElement *elem, uint32_t len);

#endif
