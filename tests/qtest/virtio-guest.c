/*
 * A guest driver for virtio-blk on virtio-mmio (see virtio-guest.h).
 */

#include "virtio-guest.h"

#define VBG_RAM (64 * MiB)

static void vbg_reset(void *opaque)
{
    virtio_device_reset(virtio_blk_vdev(opaque));
}

VirtioBlkGuest *vbg_new(BlockBackend *blk, const VirtIOBlkConf *conf)
{
    VirtioBlkGuest *vg = g_new0(VirtioBlkGuest, 1);
    VirtIOBlkConf c;

    if (!conf) {
        virtio_blk_conf_init(&c, blk);
        c.serial = "QBVIRTIO0001";
        conf = &c;
    }
    vg->g = qguest_new(VBG_RAM);
    vg->dev = virtio_blk_new(conf, &vg->g->mem, &vg->g->irq, &error_abort);
    vg->vdev = virtio_blk_vdev(vg->dev);
    g_assert_cmpint(savevm_register_device(vg->g->savevm, &vmstate_virtio_blk,
                                           0, vg->dev, vbg_reset,
                                           &error_abort), ==, 0);
    g_assert_cmpint(savevm_register_drive(vg->g->savevm, "virtio0", blk,
                                          &error_abort), ==, 0);
    vg->desc = qguest_alloc(vg->g, VBG_QUEUE_SIZE * 16, 4096);
    vg->avail = qguest_alloc(vg->g, VRING_AVAIL_SIZE(VBG_QUEUE_SIZE), 4096);
    vg->used = qguest_alloc(vg->g, VRING_USED_SIZE(VBG_QUEUE_SIZE), 4096);
    vg->hdr_area = qguest_alloc(vg->g, VBG_SLOTS * 32, 4096);
    vg->indirect_area = qguest_alloc(vg->g, VBG_SLOTS * 16 * VBG_SLOT_DESCS,
                                     4096);
    /* the data areas straddle the boundary of the two RAM halves */
    vg->data_area = VBG_RAM / 2 - VBG_SLOTS * VBG_SLOT_DATA / 2;
    g_assert_cmpuint(vg->g->alloc_next, <=, vg->data_area);
    return vg;
}

void vbg_free(VirtioBlkGuest *vg)
{
    virtio_blk_free(vg->dev);
    qguest_free(vg->g);
    g_free(vg);
}

uint32_t vbg_readl(VirtioBlkGuest *vg, uint64_t offset)
{
    return virtio_mmio_read(vg->vdev, offset, 4);
}

void vbg_writel(VirtioBlkGuest *vg, uint64_t offset, uint32_t val)
{
    virtio_mmio_write(vg->vdev, offset, 4, val);
}

uint64_t vbg_device_features(VirtioBlkGuest *vg)
{
    uint64_t f;

    vbg_writel(vg, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
    f = vbg_readl(vg, VIRTIO_MMIO_DEVICE_FEATURES);
    vbg_writel(vg, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
    return f | ((uint64_t)vbg_readl(vg, VIRTIO_MMIO_DEVICE_FEATURES) << 32);
}

bool vbg_init(VirtioBlkGuest *vg, uint64_t want)
{
    uint32_t status = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;

    vbg_writel(vg, VIRTIO_MMIO_STATUS, 0);
    g_assert_cmpuint(vbg_readl(vg, VIRTIO_MMIO_STATUS), ==, 0);
    vbg_writel(vg, VIRTIO_MMIO_STATUS, status);
    vg->features = want & vbg_device_features(vg);
    vbg_writel(vg, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
    vbg_writel(vg, VIRTIO_MMIO_DRIVER_FEATURES, vg->features);
    vbg_writel(vg, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
    vbg_writel(vg, VIRTIO_MMIO_DRIVER_FEATURES, vg->features >> 32);
    status |= VIRTIO_CONFIG_S_FEATURES_OK;
    vbg_writel(vg, VIRTIO_MMIO_STATUS, status);
    if (!(vbg_readl(vg, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_FEATURES_OK)) {
        return false;
    }
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_SEL, 0);
    g_assert_cmpuint(vbg_readl(vg, VIRTIO_MMIO_QUEUE_NUM_MAX), >=,
                     VBG_QUEUE_SIZE);
    vg->num = VBG_QUEUE_SIZE;
    qguest_memset(vg->g, vg->desc, 0, vg->num * 16);
    qguest_memset(vg->g, vg->avail, 0, VRING_AVAIL_SIZE(vg->num));
    qguest_memset(vg->g, vg->used, 0, VRING_USED_SIZE(vg->num));
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_NUM, vg->num);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_DESC_LOW, vg->desc);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_DESC_HIGH, vg->desc >> 32);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_DRIVER_LOW, vg->avail);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_DRIVER_HIGH, vg->avail >> 32);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_DEVICE_LOW, vg->used);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_DEVICE_HIGH, vg->used >> 32);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_READY, 1);
    g_assert_cmpuint(vbg_readl(vg, VIRTIO_MMIO_QUEUE_READY), ==, 1);
    vbg_writel(vg, VIRTIO_MMIO_STATUS, status | VIRTIO_CONFIG_S_DRIVER_OK);
    vg->avail_idx = vg->last_used = 0;
    memset(vg->busy, 0, sizeof(vg->busy));
    vg->use_indirect = vg->features &
                       (UINT64_C(1) << VIRTIO_RING_F_INDIRECT_DESC);
    return true;
}

void vbg_resume(VirtioBlkGuest *vg, uint64_t features)
{
    vg->features = features;
    vg->num = VBG_QUEUE_SIZE;
    vg->avail_idx = qguest_readw(vg->g, vg->avail + VRING_AVAIL_OFF_IDX);
    vg->last_used = qguest_readw(vg->g, vg->used + VRING_USED_OFF_IDX);
    memset(vg->busy, 0, sizeof(vg->busy));
    vg->use_indirect = features & (UINT64_C(1) << VIRTIO_RING_F_INDIRECT_DESC);
}

uint8_t vbg_config8(VirtioBlkGuest *vg, size_t offset)
{
    return virtio_mmio_read(vg->vdev, VIRTIO_MMIO_CONFIG + offset, 1);
}

uint32_t vbg_config32(VirtioBlkGuest *vg, size_t offset)
{
    return virtio_mmio_read(vg->vdev, VIRTIO_MMIO_CONFIG + offset, 4);
}

uint64_t vbg_config64(VirtioBlkGuest *vg, size_t offset)
{
    return vbg_config32(vg, offset) |
           ((uint64_t)vbg_config32(vg, offset + 4) << 32);
}

void vbg_config_write8(VirtioBlkGuest *vg, size_t offset, uint8_t val)
{
    virtio_mmio_write(vg->vdev, VIRTIO_MMIO_CONFIG + offset, 1, val);
}

void vbg_write_desc(VirtioBlkGuest *vg, uint64_t table, uint16_t i,
                    uint64_t addr, uint32_t len, uint16_t flags,
                    uint16_t next)
{
    uint64_t d = table + (uint64_t)i * 16;

    qguest_writeq(vg->g, d, addr);
    qguest_writel(vg->g, d + 8, len);
    qguest_writew(vg->g, d + 12, flags);
    qguest_writew(vg->g, d + 14, next);
}

void vbg_kick(VirtioBlkGuest *vg)
{
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
}

static void vbg_publish(VirtioBlkGuest *vg, uint16_t head)
{
    qguest_writew(vg->g, vg->avail + VRING_AVAIL_OFF_RING +
                  2 * (vg->avail_idx % vg->num), head);
    vg->avail_idx++;
    qguest_writew(vg->g, vg->avail + VRING_AVAIL_OFF_IDX, vg->avail_idx);
}

void vbg_post_head(VirtioBlkGuest *vg, uint16_t head)
{
    vbg_publish(vg, head);
    vbg_kick(vg);
}

void vbg_post_idx(VirtioBlkGuest *vg, uint16_t idx)
{
    qguest_writew(vg->g, vg->avail + VRING_AVAIL_OFF_IDX, idx);
    vbg_kick(vg);
}

static bool vbg_is_data_in(uint32_t type)
{
    return type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_GET_ID;
}

int vbg_submit(VirtioBlkGuest *vg, uint32_t type, uint64_t sector,
               const void *data, size_t len, int pieces, bool kick)
{
    bool in = vbg_is_data_in(type);
    uint16_t data_flags = in ? VRING_DESC_F_WRITE : 0;
    uint64_t hdr, buf, table;
    uint16_t base, n = 0;
    int slot;

    for (slot = 0; slot < VBG_SLOTS && vg->busy[slot]; slot++) {
        continue;
    }
    g_assert_cmpint(slot, <, VBG_SLOTS);
    g_assert_cmpuint(len, <=, VBG_SLOT_DATA);
    vg->busy[slot] = true;
    vg->done[slot] = false;
    hdr = vg->hdr_area + slot * 32;
    buf = vg->data_area + (uint64_t)slot * VBG_SLOT_DATA;
    qguest_writel(vg->g, hdr, type);
    qguest_writel(vg->g, hdr + 4, 0);
    qguest_writeq(vg->g, hdr + 8, sector);
    qguest_memset(vg->g, hdr + 16, 0xff, 1);     /* the status byte */
    if (len && !in) {
        qguest_memwrite(vg->g, buf, data, len);
    } else if (len) {
        qguest_memset(vg->g, buf, 0xcc, len);
    }

    /* a direct chain in the slot's descriptors, or an indirect table */
    base = slot * VBG_SLOT_DESCS;
    table = vg->use_indirect ? vg->indirect_area +
                               (uint64_t)slot * 16 * VBG_SLOT_DESCS
                             : vg->desc;
    if (vg->use_indirect) {
        base = 0;
    }
    vbg_write_desc(vg, table, base + n, hdr, 16, VRING_DESC_F_NEXT,
                   base + n + 1);
    n++;
    if (len && pieces == 2 && len > 512) {
        size_t first = QEMU_ALIGN_DOWN(len / 2, 512);

        vbg_write_desc(vg, table, base + n, buf, first,
                       data_flags | VRING_DESC_F_NEXT, base + n + 1);
        n++;
        vbg_write_desc(vg, table, base + n, buf + first, len - first,
                       data_flags | VRING_DESC_F_NEXT, base + n + 1);
        n++;
    } else if (len) {
        vbg_write_desc(vg, table, base + n, buf, len,
                       data_flags | VRING_DESC_F_NEXT, base + n + 1);
        n++;
    }
    vbg_write_desc(vg, table, base + n, hdr + 16, 1, VRING_DESC_F_WRITE, 0);
    n++;
    if (vg->use_indirect) {
        base = slot * VBG_SLOT_DESCS;
        vbg_write_desc(vg, vg->desc, base, table, n * 16,
                       VRING_DESC_F_INDIRECT, 0);
    }
    vbg_publish(vg, base);
    if (kick) {
        vbg_kick(vg);
    }
    return slot;
}

bool vbg_poll(VirtioBlkGuest *vg, int slot)
{
    uint16_t used_idx = qguest_readw(vg->g, vg->used + VRING_USED_OFF_IDX);

    while (vg->last_used != used_idx) {
        uint64_t e = vg->used + VRING_USED_OFF_RING +
                     8 * (vg->last_used % vg->num);
        uint32_t id = qguest_readl(vg->g, e);
        int s = id / VBG_SLOT_DESCS;

        g_assert_cmpuint(id % VBG_SLOT_DESCS, ==, 0);
        g_assert_cmpint(s, <, VBG_SLOTS);
        g_assert_true(vg->busy[s] && !vg->done[s]);
        vg->done[s] = true;
        vg->used_len[s] = qguest_readl(vg->g, e + 4);
        vg->last_used++;
    }
    /* acknowledge what the device raised */
    if (vg->g->irq_level) {
        vbg_writel(vg, VIRTIO_MMIO_INTERRUPT_ACK,
                   vbg_readl(vg, VIRTIO_MMIO_INTERRUPT_STATUS));
    }
    return slot >= 0 && vg->done[slot];
}

typedef struct VbgWait {
    VirtioBlkGuest *vg;
    int slot;
} VbgWait;

static bool vbg_slot_done(void *opaque)
{
    VbgWait *w = opaque;

    return vbg_poll(w->vg, w->slot);
}

uint8_t vbg_wait(VirtioBlkGuest *vg, int slot, void *data, size_t len)
{
    VbgWait w = { vg, slot };
    uint8_t status;

    qguest_wait(vbg_slot_done, &w);
    qguest_memread(vg->g, vg->hdr_area + slot * 32 + 16, &status, 1);
    if (data && len) {
        qguest_memread(vg->g, vg->data_area + (uint64_t)slot * VBG_SLOT_DATA,
                       data, len);
    }
    vg->busy[slot] = false;
    return status;
}

uint8_t vbg_request(VirtioBlkGuest *vg, uint32_t type, uint64_t sector,
                    void *data, size_t len)
{
    int slot = vbg_submit(vg, type, sector, data, len, 1, true);

    return vbg_wait(vg, slot, vbg_is_data_in(type) ? data : NULL, len);
}

bool vbg_needs_reset(VirtioBlkGuest *vg)
{
    return vbg_readl(vg, VIRTIO_MMIO_STATUS) &
           VIRTIO_CONFIG_S_DEVICE_NEEDS_RESET;
}
