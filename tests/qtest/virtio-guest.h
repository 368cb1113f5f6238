/*
 * A guest driver for virtio-blk on virtio-mmio, in the way Linux's
 * virtio_mmio and virtio_blk drivers work: it negotiates features, sets up
 * one split virtqueue, posts requests as descriptor chains, takes the
 * interrupt and reaps the used ring.  It can also write raw descriptors
 * and ring entries, to play a hostile driver.
 */
#ifndef VIRTIO_GUEST_H
#define VIRTIO_GUEST_H

#include "libqguest.h"
#include "hw/virtio-blk.h"
#include "hw/virtio/virtio-mmio-regs.h"

/* Requests that can be in flight at once: each owns 4 descriptors. */
#define VBG_SLOTS        32
#define VBG_SLOT_DESCS   4
#define VBG_QUEUE_SIZE   256
#define VBG_SLOT_DATA    (256 * KiB)

typedef struct VirtioBlkGuest {
    QGuest *g;
    VirtIOBlock *dev;
    VirtIODevice *vdev;
    uint64_t features;          /* what the driver accepted */
    uint16_t num;
    uint64_t desc, avail, used;
    uint16_t avail_idx;         /* the driver's next avail entry */
    uint16_t last_used;         /* the next used entry to reap */
    uint64_t hdr_area;          /* per slot: 16-byte header, 1 status byte */
    uint64_t data_area;         /* per slot: VBG_SLOT_DATA bytes */
    bool busy[VBG_SLOTS];
    bool done[VBG_SLOTS];
    uint32_t used_len[VBG_SLOTS];
    /* indirect tables, one per slot, when VIRTIO_RING_F_INDIRECT_DESC */
    uint64_t indirect_area;
    bool use_indirect;
} VirtioBlkGuest;

/*
 * A device on @blk (with @conf, or the defaults when NULL); the machine
 * (vg->g->savevm) has it as device "virtio-blk" 0 and @blk as drive
 * "virtio0".
 */
VirtioBlkGuest *vbg_new(BlockBackend *blk, const VirtIOBlkConf *conf);
void vbg_free(VirtioBlkGuest *vg);

uint32_t vbg_readl(VirtioBlkGuest *vg, uint64_t offset);
void vbg_writel(VirtioBlkGuest *vg, uint64_t offset, uint32_t val);
uint64_t vbg_device_features(VirtioBlkGuest *vg);
/*
 * Resets the device and negotiates @want & offered features; sets up the
 * queue and DRIVER_OK.  Returns false if the device refused FEATURES_OK.
 */
bool vbg_init(VirtioBlkGuest *vg, uint64_t want);
/*
 * The driver's own variables after a loadvm brought its rings back in
 * guest RAM: the queue as vbg_init() set it up with @features accepted,
 * and the ring positions as RAM holds them (every request was reaped
 * before the savevm).
 */
void vbg_resume(VirtioBlkGuest *vg, uint64_t features);
uint8_t vbg_config8(VirtioBlkGuest *vg, size_t offset);
uint32_t vbg_config32(VirtioBlkGuest *vg, size_t offset);
uint64_t vbg_config64(VirtioBlkGuest *vg, size_t offset);
void vbg_config_write8(VirtioBlkGuest *vg, size_t offset, uint8_t val);

/*
 * Posts a request of @type at @sector; @len bytes of @data go out (OUT,
 * DISCARD, WRITE_ZEROES: segments) or come back (IN, GET_ID) split into
 * @pieces descriptors (1 or 2).  Notifies the device unless !@kick.
 * Returns the slot.
 */
int vbg_submit(VirtioBlkGuest *vg, uint32_t type, uint64_t sector,
               const void *data, size_t len, int pieces, bool kick);
void vbg_kick(VirtioBlkGuest *vg);
/* Waits for @slot, copies the data of an IN/GET_ID to @data; status. */
uint8_t vbg_wait(VirtioBlkGuest *vg, int slot, void *data, size_t len);
/* Submit and wait in one. */
uint8_t vbg_request(VirtioBlkGuest *vg, uint32_t type, uint64_t sector,
                    void *data, size_t len);
/* Reaps whatever the used ring holds; true if @slot is done. */
bool vbg_poll(VirtioBlkGuest *vg, int slot);
bool vbg_needs_reset(VirtioBlkGuest *vg);

/* Raw access for hostile tests. */
void vbg_write_desc(VirtioBlkGuest *vg, uint64_t table, uint16_t i,
                    uint64_t addr, uint32_t len, uint16_t flags,
                    uint16_t next);
/* Makes descriptor @head available and notifies. */
void vbg_post_head(VirtioBlkGuest *vg, uint16_t head);
/* Sets the avail idx to @idx and notifies. */
void vbg_post_idx(VirtioBlkGuest *vg, uint16_t idx);

#endif
