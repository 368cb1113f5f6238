/*
 * The virtio-blk device's private state, shared by virtio-blk.c (the
 * device) and virtio-blk-vmstate.c (its device state).
 */
#ifndef HW_VIRTIO_BLK_INTERNAL_H
#define HW_VIRTIO_BLK_INTERNAL_H

#include "hw/virtio-blk.h"
#include "virtio/virtio-blk-req.h"

struct VirtIOBlock {
    /* --- the virtio core, with the transport's registers --- */
    VirtIODevice vdev;
    VirtQueue vqs[1];

    /* --- set by virtio_blk_new, immutable --- */
    BlockBackend *blk;
    bool offer_config_wce;
    bool offer_discard;
    bool offer_write_zeroes;
    uint16_t queue_size;
    bool wce_default;           /* the write cache after reset */

    /* --- requests: the limits are fixed, the negotiated part is not --- */
    VirtIOBlkHandler handler;
    unsigned int inflight;

    /* --- copied by save for load to apply or check --- */
    bool wce;                   /* the BlockBackend's write cache flag */
    uint64_t saved_sectors;
};

#endif
