/*
 * virtio-blk request processing, independent of any transport, and the
 * parts of the device's face that do not depend on the transport either:
 * the features it offers, its configuration space, which write of the
 * configuration changes the write cache.
 *
 * Two users sit above it and call down into it: the in-process device
 * model (hw/block/virtio-blk.c, on virtio-mmio) and the vhost-user-blk
 * export (block/export/vhost-user-blk.c).  Neither depends on the other;
 * an export never includes hw/.
 *
 * The write cache is the BlockBackend's write cache flag.  Each user
 * decides when it changes (the rules differ between a device and an
 * export whose front-end caches the field); the helpers here only say
 * whether a configuration write may change it.
 */
#ifndef VIRTIO_BLK_REQ_H
#define VIRTIO_BLK_REQ_H

#include "qblock/block-backend.h"
#include "virtio/virtqueue.h"
#include "virtio/virtio-blk-wire.h"

/*
 * What requests need to know of the disk.  The device (or the export)
 * fills it at setup with virtio_blk_handler_init() and updates the
 * negotiated part with virtio_blk_handler_set_features().
 */
typedef struct VirtIOBlkHandler {
    BlockBackend *blk;
    uint64_t sectors;               /* capacity, 512-byte sectors */
    uint32_t blk_size;              /* logical block size, bytes */
    bool read_only;
    char serial[VIRTIO_BLK_ID_BYTES];   /* zero padded, not terminated */
    uint32_t max_discard_sectors;
    uint32_t max_discard_seg;
    uint32_t max_write_zeroes_sectors;
    uint32_t max_write_zeroes_seg;
    /* negotiated */
    bool discard;
    bool write_zeroes;
} VirtIOBlkHandler;

/*
 * A request is done: @in_len bytes (data and status byte) were written
 * into @elem's device-writable buffers; @elem goes back to the caller.
 */
typedef void VirtIOBlkCompleteFunc(VirtIOBlkHandler *h,
                                   VirtQueueElement *elem, uint32_t in_len,
                                   void *opaque);

/* Segments of one discard or write-zeroes request. */
#define VIRTIO_BLK_MAX_DWZ_SEG 8

/*
 * One request in flight: storage that virtio_blk_handle_request_in()
 * uses until the completion callback, so that a user that keeps one per
 * ring entry runs requests without allocating.  Its fields are
 * virtio-blk-req.c's.
 */
typedef struct VirtIOBlkReq {
    VirtIOBlkHandler *h;
    VirtQueueElement *elem;
    VirtIOBlkCompleteFunc *cb;
    void *opaque;
    bool allocated;             /* by virtio_blk_handle_request() */
    VirtIOBlkOutHdr hdr;
    QEMUIOVector out;           /* device-readable bytes after the header */
    QEMUIOVector in;            /* device-writable bytes before the status */
    uint8_t *status;
    /* the pieces cut for @out and @status (invariants 4 and 5) */
    struct iovec *out_cut;
    size_t out_skip;
    struct iovec *status_piece;
    uint32_t in_len;            /* data bytes written into @in */
    /* discard / write zeroes: the segments and the next one to run */
    VirtIOBlkDiscardWriteZeroes segs[VIRTIO_BLK_MAX_DWZ_SEG];
    uint32_t nsegs;
    uint32_t next_seg;
} VirtIOBlkReq;

/*
 * Runs the request in @elem, whose buffers are host pointers into guest
 * memory (a popped chain).  The guest's mistakes (a range past the disk,
 * an unaligned length, an unknown type) complete it with IOERR or UNSUPP;
 * @cb runs once, possibly before this returns.  A chain too malformed to
 * carry a status (no 16-byte header, no status byte) returns -EINVAL with
 * @errp set and @cb never runs: the caller is to break the queue.
 */
int virtio_blk_handle_request(VirtIOBlkHandler *h, VirtQueueElement *elem,
                              VirtIOBlkCompleteFunc *cb, void *opaque,
                              Error **errp);
/*
 * The same in the caller's @req, which is free again once @cb has run.
 * The pieces of @elem are the request's until then (it cuts off the
 * header and the status byte); @cb gets them back as they were.
 */
int virtio_blk_handle_request_in(VirtIOBlkHandler *h, VirtIOBlkReq *req,
                                 VirtQueueElement *elem,
                                 VirtIOBlkCompleteFunc *cb, void *opaque,
                                 Error **errp);

/*
 * Whether @blk_size may be a logical block size: a power of 2 from 512
 * to 65536.  Callers word the error, each in its own option's name.
 */
bool virtio_blk_block_size_valid(uint64_t blk_size);

/*
 * Sets up @h for @blk of @len bytes (a multiple of @blk_size, checked by
 * the caller), with the discard and write-zeroes limits every user
 * offers, nothing negotiated, and @serial (NULL: none) cut to what
 * GET_ID returns.
 */
void virtio_blk_handler_init(VirtIOBlkHandler *h, BlockBackend *blk,
                             int64_t len, uint32_t blk_size, bool read_only,
                             const char *serial);

/*
 * The disk is now @len bytes long (a resize): the capacity and the range
 * checks of the requests that come next follow it.
 */
void virtio_blk_handler_set_length(VirtIOBlkHandler *h, int64_t len);

/*
 * The features every user offers (VERSION_1, indirect descriptors, event
 * index, SEG_MAX, BLK_SIZE, TOPOLOGY, FLUSH, and RO for a read-only
 * disk); the user adds the optional ones it offers.
 */
uint64_t virtio_blk_handler_features(const VirtIOBlkHandler *h);

/* Applies the negotiated @features (0 at reset) to the requests. */
void virtio_blk_handler_set_features(VirtIOBlkHandler *h, uint64_t features);

/*
 * Fills @config: the disk's geometry and limits from @h, and what the
 * user decides: @seg_max, @num_queues and the writeback field @wce.
 */
void virtio_blk_handler_get_config(const VirtIOBlkHandler *h,
                                   uint32_t seg_max, uint16_t num_queues,
                                   bool wce, VirtIOBlkConfig *config);

/*
 * Whether a driver that negotiated @features may switch the write cache
 * through the writeback field: only with CONFIG_WCE and FLUSH (without
 * FLUSH it could not empty a cache it turned on).
 */
bool virtio_blk_wce_writable(uint64_t features);

/* Whether a configuration write of @len bytes at @offset covers writeback. */
bool virtio_blk_config_write_has_wce(uint32_t offset, uint32_t len);

#endif
