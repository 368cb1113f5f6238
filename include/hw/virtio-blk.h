/*
 * virtio-blk: a block device on a virtio transport.  Its requests are
 * processed by virtio/virtio-blk-req.c, which the vhost-user-blk export
 * shares (include/virtio/virtio-blk-req.h).
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
#include "virtio/virtio-blk-wire.h"

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
