/*
 * virtio-blk: a block device on a virtio transport, and the request
 * processing that the vhost-user-blk export shares with it.
 *
 * The write cache is the BlockBackend's write cache flag: the drive's
 * cache mode gives its default; a driver that negotiates
 * VIRTIO_BLK_F_CONFIG_WCE (and VIRTIO_BLK_F_FLUSH) reads and writes it
 * through the configuration space's writeback field, and a driver that
 * does not negotiate VIRTIO_BLK_F_FLUSH gets writethrough, as the virtio
 * spec requires (it could never make its writes durable otherwise).
 */
#ifndef HW_VIRTIO_BLK_H
#define HW_VIRTIO_BLK_H

#include "qblock/block-backend.h"
#include "hw/virtio/virtio.h"
#include "hw/virtio/virtio-blk-wire.h"

/* ---- request processing, independent of any transport ---- */

/*
 * What requests need to know of the disk.  The device (or the export)
 * fills it at setup and updates the negotiated part at FEATURES_OK.
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

/* ---- the device ---- */

typedef struct VirtIOBlock VirtIOBlock;

typedef struct VirtIOBlkConf {
    BlockBackend *blk;          /* a reference is taken */
    const char *serial;         /* at most 20 bytes; NULL: none */
    uint32_t logical_block_size;
    uint16_t queue_size;
    bool config_wce;            /* offer VIRTIO_BLK_F_CONFIG_WCE */
    bool discard;               /* offer VIRTIO_BLK_F_DISCARD */
    bool write_zeroes;          /* offer VIRTIO_BLK_F_WRITE_ZEROES */
} VirtIOBlkConf;

/* The defaults: 512-byte blocks, 256 entries, every feature offered. */
void virtio_blk_conf_init(VirtIOBlkConf *conf, BlockBackend *blk);
/* A device on virtio-mmio; errors name the setting that is wrong. */
VirtIOBlock *virtio_blk_new(const VirtIOBlkConf *conf,
                            const GuestMemory *mem, const IRQLine *irq,
                            Error **errp);
/* Waits for requests in flight, then frees the device. */
void virtio_blk_free(VirtIOBlock *s);
VirtIODevice *virtio_blk_vdev(VirtIOBlock *s);
/* Requests started and not completed. */
unsigned int virtio_blk_inflight(VirtIOBlock *s);

/*
 * The device state (the virtio core's and virtio-blk's, the write cache
 * flag included).  Saving needs no request in flight (drain first).
 */
extern const VMStateDescription vmstate_virtio_blk;

#endif
