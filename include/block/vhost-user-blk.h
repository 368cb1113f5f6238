/*
 * The vhost-user-blk export: a BlockBackend served as a virtio-blk device
 * to a vhost-user front-end (QEMU's vhost-user-blk-pci) over a unix
 * socket.  Requests are processed by the virtio-blk request code that
 * the device model shares (virtio/virtio-blk-req.c), over the guest
 * memory the front-end shares.
 *
 * The write cache is the BlockBackend's flag: the export starts with the
 * flag as the caller set it (writethrough=on clears it), the guest reads
 * that very value in the config's writeback field, and the guest's
 * writes of the field (VIRTIO_BLK_F_CONFIG_WCE) flip the flag.  A driver
 * that does not negotiate VIRTIO_BLK_F_FLUSH gets writethrough while it
 * is connected, since it could never make its writes durable.
 *
 * Everything runs in the thread of the BlockBackend's AioContext, but the
 * request queues given contexts of their own (queue_ctxs): each pops and
 * completes in that context's thread and hands its requests to the
 * BlockBackend's thread in batches (threading rule 13 of
 * docs/architecture.md).
 */
#ifndef QBLOCK_VHOST_USER_BLK_H
#define QBLOCK_VHOST_USER_BLK_H

#include "qblock/block-backend.h"

typedef struct VhostUserBlkExport VhostUserBlkExport;

/* Most request queues an export has (the protocol's vring index limit). */
#define VHOST_USER_BLK_MAX_QUEUES 256

typedef struct VhostUserBlkExportConfig {
    /* the export id: names it in messages; the guest's serial (GET_ID) */
    const char *id;
    const char *path;           /* the unix socket to listen on, or */
    const char *fd_str;         /* an inherited socket's number (not both) */
    /* accept writes; the BlockBackend must have the WRITE permission */
    bool writable;
    unsigned int num_queues;    /* 1 to VHOST_USER_BLK_MAX_QUEUES */
    /*
     * Optional: num_queues contexts, queue i's ring runs in the thread of
     * queue_ctxs[i] (NULL: all in the BlockBackend's).  Each must outlive
     * the export.
     */
    AioContext *const *queue_ctxs;
    /* a power of 2 from 512 to 65536 that divides the disk size */
    uint64_t logical_block_size;
    /*
     * Optional: a front-end connected (@connected), or its connection
     * ended and its requests are done (!@connected).  Not called for a
     * connection that vhost_user_blk_export_free() ends.
     */
    void (*client_changed)(void *opaque, bool connected);
    void *opaque;
} VhostUserBlkExportConfig;

/*
 * Starts listening on cfg->path or cfg->fd_str for front-ends, taking a
 * reference to
 * @blk.  Errors name the export and the setting that is wrong.
 */
VhostUserBlkExport *vhost_user_blk_export_new(
    BlockBackend *blk, const VhostUserBlkExportConfig *cfg, Error **errp);
/*
 * Stops listening (removing the socket) and disconnects the front-end;
 * once its requests are done and its connection has ended,
 * @done(@opaque) runs from the loop (@done may be NULL).  At most once.
 */
void vhost_user_blk_export_shutdown(VhostUserBlkExport *exp,
                                    void (*done)(void *opaque),
                                    void *opaque);
/*
 * Shuts down if that has not begun, waits (polling the loop) until the
 * connection has ended, and drops the BlockBackend reference.
 */
void vhost_user_blk_export_free(VhostUserBlkExport *exp);
/*
 * The disk's length changed (block_resize): the capacity in the
 * configuration space follows it, and the front-end is sent a
 * config-change notification if it negotiated one.
 */
void vhost_user_blk_export_resize(VhostUserBlkExport *exp);
/*
 * The operator sets the write cache: kept aside while a driver that
 * cannot flush is connected (invariant 1 of vhost-user-blk.c), and the
 * front-end is sent a config-change notification, so that a guest sees
 * the new writeback field.
 */
void vhost_user_blk_export_set_write_cache(VhostUserBlkExport *exp,
                                           bool writeback);
/* Whether a front-end is connected now. */
bool vhost_user_blk_export_has_client(VhostUserBlkExport *exp);

#endif
