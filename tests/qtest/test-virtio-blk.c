/*
 * hw/block/virtio-blk on virtio-mmio, driven as a guest driver would:
 * registers and feature negotiation, the configuration space, requests of
 * every type (IN, OUT, FLUSH, GET_ID, DISCARD, WRITE_ZEROES) with direct
 * and indirect chains, errors the guest gets for bad requests, hostile
 * rings that break the device without hurting it, and the write cache:
 * the writeback field flips the BlockBackend's flag, writethrough costs
 * exactly one file flush per write, a driver without FLUSH gets
 * writethrough, and requests in flight across a switch are flushed
 * before they complete.
 */

#include "virtio-guest.h"
#include "block/blkcrash.h"

#define DISK_SIZE (64 * MiB)
#define F(bit) (UINT64_C(1) << (bit))
#define FEATURES_ALL (F(VIRTIO_F_VERSION_1) | F(VIRTIO_BLK_F_FLUSH) |        \
                      F(VIRTIO_BLK_F_CONFIG_WCE) | F(VIRTIO_BLK_F_SEG_MAX) | \
                      F(VIRTIO_BLK_F_BLK_SIZE) | F(VIRTIO_BLK_F_TOPOLOGY) |  \
                      F(VIRTIO_BLK_F_DISCARD) |                              \
                      F(VIRTIO_BLK_F_WRITE_ZEROES) | F(VIRTIO_BLK_F_RO))
#define WRITEBACK offsetof(VirtIOBlkConfig, writeback)

typedef struct VFixture {
    char *path;
    BlockBackend *blk;
    VirtioBlkGuest *vg;
} VFixture;

static void vfixture_open(VFixture *f, const char *fmt, const char *mode,
                          QDict *extra)
{
    f->path = qguest_image_new(fmt, DISK_SIZE);
    if (extra) {
        qdict_put_str(extra, "file.file.filename", f->path);
    }
    f->blk = qguest_blk_open(f->path, fmt, mode, extra);
    f->vg = vbg_new(f->blk, NULL);
}

static void vfixture_close(VFixture *f)
{
    vbg_free(f->vg);
    blk_unref(f->blk);
    unlink(f->path);
    g_free(f->path);
}

static void test_registers(void)
{
    VFixture f;
    uint64_t features;

    vfixture_open(&f, "raw", "writeback", NULL);
    g_assert_cmphex(vbg_readl(f.vg, VIRTIO_MMIO_MAGIC_VALUE), ==,
                    VIRTIO_MMIO_MAGIC);
    g_assert_cmpuint(vbg_readl(f.vg, VIRTIO_MMIO_VERSION), ==, 2);
    g_assert_cmpuint(vbg_readl(f.vg, VIRTIO_MMIO_DEVICE_ID), ==,
                     VIRTIO_ID_BLOCK);
    features = vbg_device_features(f.vg);
    g_assert_cmphex(features & (FEATURES_ALL | F(VIRTIO_RING_F_EVENT_IDX) |
                                F(VIRTIO_RING_F_INDIRECT_DESC)), ==,
                    (FEATURES_ALL & ~F(VIRTIO_BLK_F_RO)) |
                    F(VIRTIO_RING_F_EVENT_IDX) |
                    F(VIRTIO_RING_F_INDIRECT_DESC));
    /* only 32-bit accesses reach the registers */
    g_assert_cmphex(virtio_mmio_read(f.vg->vdev, VIRTIO_MMIO_MAGIC_VALUE, 1),
                    ==, 0);
    /* a driver without VERSION_1 is refused */
    g_assert_false(vbg_init(f.vg, FEATURES_ALL & ~F(VIRTIO_F_VERSION_1)));
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    /* DRIVER_OK without FEATURES_OK: requests are not served */
    {
        uint8_t buf[512];
        int slot;

        g_assert_true(vbg_init(f.vg, FEATURES_ALL));
        vbg_writel(f.vg, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE |
                   VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_DRIVER_OK);
        slot = vbg_submit(f.vg, VIRTIO_BLK_T_IN, 0, buf, sizeof(buf), 1,
                          true);
        qguest_settle();
        g_assert_false(vbg_poll(f.vg, slot));
        f.vg->busy[slot] = false;
        g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    }
    /* a queue size that is no power of 2 does not make the queue ready */
    vbg_writel(f.vg, VIRTIO_MMIO_STATUS, 0);
    vbg_writel(f.vg, VIRTIO_MMIO_QUEUE_NUM, 100);
    vbg_writel(f.vg, VIRTIO_MMIO_QUEUE_READY, 1);
    g_assert_cmpuint(vbg_readl(f.vg, VIRTIO_MMIO_QUEUE_READY), ==, 0);
    vfixture_close(&f);
}

static void test_config(void)
{
    VFixture f;

    vfixture_open(&f, "raw", "writeback", NULL);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    g_assert_cmpuint(vbg_config64(f.vg, 0), ==, DISK_SIZE / 512);
    g_assert_cmpuint(vbg_config32(f.vg, offsetof(VirtIOBlkConfig, blk_size)),
                     ==, 512);
    g_assert_cmpuint(vbg_config32(f.vg, offsetof(VirtIOBlkConfig, seg_max)),
                     ==, 254);
    g_assert_cmpuint(vbg_config8(f.vg, WRITEBACK), ==, 1);
    g_assert_cmpuint(vbg_config32(f.vg, offsetof(VirtIOBlkConfig,
                                                 max_discard_seg)), ==, 8);
    g_assert_cmpuint(vbg_config8(f.vg, offsetof(VirtIOBlkConfig,
                                                write_zeroes_may_unmap)),
                     ==, 1);
    /* only the writeback field is writable */
    vbg_config_write8(f.vg, 0, 0x55);
    g_assert_cmpuint(vbg_config64(f.vg, 0), ==, DISK_SIZE / 512);
    /* past the end reads as 0 */
    g_assert_cmpuint(vbg_config32(f.vg, sizeof(VirtIOBlkConfig)), ==, 0);
    vfixture_close(&f);
}

/* A read-only drive offers F_RO and fails writes with IOERR. */
static void test_read_only(void)
{
    g_autofree char *path = qguest_image_new("raw", DISK_SIZE);
    QDict *opts = qdict_new();
    BlockBackend *blk;
    VirtioBlkGuest *vg;
    uint8_t buf[512] = { 0 };

    qdict_put_str(opts, "driver", "raw");
    qdict_put_str(opts, "file.driver", "file");
    qdict_put_str(opts, "file.filename", path);
    blk = blk_new_open(NULL, NULL, opts, 0, &error_abort);
    vg = vbg_new(blk, NULL);
    g_assert_true(vbg_device_features(vg) & F(VIRTIO_BLK_F_RO));
    g_assert_true(vbg_init(vg, FEATURES_ALL));
    g_assert_cmpuint(vbg_request(vg, VIRTIO_BLK_T_IN, 0, buf, 512), ==,
                     VIRTIO_BLK_S_OK);
    g_assert_cmpuint(vbg_request(vg, VIRTIO_BLK_T_OUT, 0, buf, 512), ==,
                     VIRTIO_BLK_S_IOERR);
    vbg_free(vg);
    blk_unref(blk);
    unlink(path);
}

static void round_trip(VFixture *f, uint64_t features)
{
    size_t len = 128 * KiB;
    g_autofree uint8_t *out = g_malloc(len), *in = g_malloc(len);
    g_autofree uint8_t *disk = g_malloc(len);
    int slot;

    g_assert_true(vbg_init(f->vg, features));
    qguest_pattern(out, len, 1000, 1);
    /* two data descriptors, the slot's buffer across the RAM halves */
    slot = vbg_submit(f->vg, VIRTIO_BLK_T_OUT, 1000, out, len, 2, true);
    g_assert_cmpuint(vbg_wait(f->vg, slot, NULL, 0), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(f->vg->used_len[slot], ==, 1);
    g_assert_cmpint(blk_pread(f->blk, 1000 * 512, len, disk, 0), ==, 0);
    g_assert_cmpmem(disk, len, out, len);
    slot = vbg_submit(f->vg, VIRTIO_BLK_T_IN, 1000, NULL, len, 2, true);
    g_assert_cmpuint(vbg_wait(f->vg, slot, in, len), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(f->vg->used_len[slot], ==, len + 1);
    g_assert_cmpmem(in, len, out, len);
}

static void test_round_trip(void)
{
    VFixture f;

    vfixture_open(&f, "raw", "writeback", NULL);
    round_trip(&f, FEATURES_ALL);
    round_trip(&f, FEATURES_ALL | F(VIRTIO_RING_F_INDIRECT_DESC));
    round_trip(&f, FEATURES_ALL | F(VIRTIO_RING_F_EVENT_IDX));
    round_trip(&f, FEATURES_ALL | F(VIRTIO_RING_F_EVENT_IDX) |
               F(VIRTIO_RING_F_INDIRECT_DESC));
    vfixture_close(&f);
}

/* Many requests at once, completed in any order, each reaped once. */
static void test_many_in_flight(void)
{
    VFixture f;
    uint8_t buf[VBG_SLOTS][4096];
    int slots[VBG_SLOTS];

    vfixture_open(&f, "qcow2", "writeback", NULL);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL | F(VIRTIO_RING_F_EVENT_IDX)));
    for (int i = 0; i < VBG_SLOTS; i++) {
        qguest_pattern(buf[i], sizeof(buf[i]), i * 1024, 2);
        slots[i] = vbg_submit(f.vg, VIRTIO_BLK_T_OUT, i * 1024, buf[i],
                              sizeof(buf[i]), 1, false);
    }
    vbg_kick(f.vg);
    for (int i = 0; i < VBG_SLOTS; i++) {
        g_assert_cmpuint(vbg_wait(f.vg, slots[i], NULL, 0), ==,
                         VIRTIO_BLK_S_OK);
    }
    g_assert_cmpuint(virtio_blk_inflight(f.vg->dev), ==, 0);
    for (int i = 0; i < VBG_SLOTS; i++) {
        uint8_t in[4096];

        g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_IN, i * 1024, in,
                                     sizeof(in)), ==, VIRTIO_BLK_S_OK);
        g_assert_cmpmem(in, sizeof(in), buf[i], sizeof(buf[i]));
    }
    vfixture_close(&f);
}

static void test_get_id(void)
{
    VFixture f;
    char id[VIRTIO_BLK_ID_BYTES + 1] = { 0 };
    int slot;

    vfixture_open(&f, "raw", "writeback", NULL);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_GET_ID, 0, id,
                                 VIRTIO_BLK_ID_BYTES), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpstr(id, ==, "QBVIRTIO0001");
    /* a shorter buffer gets what fits */
    memset(id, 0, sizeof(id));
    slot = vbg_submit(f.vg, VIRTIO_BLK_T_GET_ID, 0, NULL, 4, 1, true);
    g_assert_cmpuint(vbg_wait(f.vg, slot, id, 4), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpuint(f.vg->used_len[slot], ==, 5);
    g_assert_cmpstr(id, ==, "QBVI");
    vfixture_close(&f);
}

static uint8_t dwz(VFixture *f, uint32_t type, uint64_t sector,
                   uint32_t count, uint32_t flags, int nsegs)
{
    VirtIOBlkDiscardWriteZeroes segs[16];

    for (int i = 0; i < nsegs; i++) {
        segs[i] = (VirtIOBlkDiscardWriteZeroes) {
            .sector = GUINT64_TO_LE(sector + (uint64_t)i * count),
            .num_sectors = GUINT32_TO_LE(count),
            .flags = GUINT32_TO_LE(flags),
        };
    }
    return vbg_request(f->vg, type, 0, segs, nsegs * sizeof(segs[0]));
}

static bool disk_is_zero(VFixture *f, uint64_t sector, uint32_t count)
{
    g_autofree uint8_t *buf = g_malloc((size_t)count * 512);

    g_assert_cmpint(blk_pread(f->blk, sector * 512, count * 512, buf, 0), ==,
                    0);
    return buffer_is_zero(buf, (size_t)count * 512);
}

static void test_discard_write_zeroes(void)
{
    g_autofree uint8_t *ones = g_malloc(1 * MiB);
    VFixture f;

    memset(ones, 1, 1 * MiB);
    vfixture_open(&f, "qcow2", "writeback", NULL);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    g_assert_cmpint(blk_pwrite(f.blk, 0, 1 * MiB, ones, 0), ==, 0);
    /* three segments of 8 sectors, with and without unmap */
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, 0, 8,
                         VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP, 3), ==,
                     VIRTIO_BLK_S_OK);
    g_assert_true(disk_is_zero(&f, 0, 24));
    g_assert_false(disk_is_zero(&f, 24, 1));
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, 256, 128, 0, 1), ==,
                     VIRTIO_BLK_S_OK);
    g_assert_true(disk_is_zero(&f, 256, 128));
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_DISCARD, 1024, 128, 0, 2), ==,
                     VIRTIO_BLK_S_OK);
    /* the guest's mistakes */
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_DISCARD, 0, 8,
                         VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP, 1), ==,
                     VIRTIO_BLK_S_UNSUPP);
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, 0, 8, 0x4, 1), ==,
                     VIRTIO_BLK_S_UNSUPP);
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, 0, 8, 0, 9), ==,
                     VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_DISCARD, DISK_SIZE / 512 - 4, 8, 0,
                         1), ==, VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, UINT64_MAX - 2, 8, 0,
                         1), ==, VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_DISCARD, 0, ones, 15), ==,
                     VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_DISCARD, 0, NULL, 0), ==,
                     VIRTIO_BLK_S_IOERR);
    /* not negotiated: not supported */
    g_assert_true(vbg_init(f.vg, FEATURES_ALL & ~F(VIRTIO_BLK_F_DISCARD) &
                           ~F(VIRTIO_BLK_F_WRITE_ZEROES)));
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_DISCARD, 0, 8, 0, 1), ==,
                     VIRTIO_BLK_S_UNSUPP);
    g_assert_cmpuint(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, 0, 8, 0, 1), ==,
                     VIRTIO_BLK_S_UNSUPP);
    vfixture_close(&f);
}

static void test_bad_requests(void)
{
    VFixture f;
    uint8_t buf[4096] = { 0 };

    vfixture_open(&f, "raw", "writeback", NULL);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    /* past the end, straddling it, far past it */
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_IN, DISK_SIZE / 512, buf,
                                 512), ==, VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_OUT, DISK_SIZE / 512 - 1,
                                 buf, 1024), ==, VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_OUT, UINT64_MAX, buf,
                                 512), ==, VIRTIO_BLK_S_IOERR);
    /* not a whole number of sectors */
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_OUT, 0, buf, 100), ==,
                     VIRTIO_BLK_S_IOERR);
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_IN, 0, buf, 513), ==,
                     VIRTIO_BLK_S_IOERR);
    /* unknown types, incl. the legacy SCSI and barrier ones */
    g_assert_cmpuint(vbg_request(f.vg, 2, 0, buf, 512), ==,
                     VIRTIO_BLK_S_UNSUPP);
    g_assert_cmpuint(vbg_request(f.vg, 0x80000001, 0, buf, 512), ==,
                     VIRTIO_BLK_S_UNSUPP);
    /* the last sector is fine */
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_IN, DISK_SIZE / 512 - 8,
                                 buf, 4096), ==, VIRTIO_BLK_S_OK);
    g_assert_false(vbg_needs_reset(f.vg));
    vfixture_close(&f);
}

/*
 * After a hostile chain: broken for the reason given, and usable again
 * after a reset.
 */
static void assert_broken_then_reset(VFixture *f, const char *reason)
{
    const char *got;
    uint8_t buf[512];

    qguest_settle();
    g_assert_true(vbg_needs_reset(f->vg));
    got = virtio_device_broken_reason(f->vg->vdev);
    g_assert_nonnull(got);
    if (!strstr(got, reason)) {
        g_error("expected '%s' in: %s", reason, got);
    }
    g_assert_true(vbg_readl(f->vg, VIRTIO_MMIO_INTERRUPT_STATUS) &
                  VIRTIO_MMIO_INT_CONFIG);
    g_assert_cmpuint(virtio_blk_inflight(f->vg->dev), ==, 0);
    g_assert_true(vbg_init(f->vg, FEATURES_ALL |
                           F(VIRTIO_RING_F_INDIRECT_DESC)));
    g_assert_false(vbg_needs_reset(f->vg));
    g_assert_null(virtio_device_broken_reason(f->vg->vdev));
    g_assert_cmpuint(vbg_request(f->vg, VIRTIO_BLK_T_IN, 0, buf, 512), ==,
                     VIRTIO_BLK_S_OK);
}

static void test_hostile_rings(void)
{
    VirtioBlkGuest *vg;
    uint64_t hdr, ram = 64 * MiB;
    uint64_t table;
    VFixture f;

    vfixture_open(&f, "raw", "writeback", NULL);
    vg = f.vg;
    hdr = vg->hdr_area;
    table = vg->indirect_area;
    qguest_writel(vg->g, hdr, VIRTIO_BLK_T_IN);
    qguest_writeq(vg->g, hdr + 8, 0);
    g_assert_true(vbg_init(vg, FEATURES_ALL | F(VIRTIO_RING_F_INDIRECT_DESC)));
    /* each case writes every descriptor it uses: the request made after
     * each reset reuses descriptor 0 */

    /* a head index past the queue */
    vbg_post_head(vg, 300);
    assert_broken_then_reset(&f, "available ring names descriptor 300 of 256");

    /* an avail idx far ahead of what the device has seen */
    vbg_post_idx(vg, vg->avail_idx + vg->num + 1);
    assert_broken_then_reset(&f, "is more than 256 entries ahead");

    /* a loop: 0 -> 1 -> 0 */
    vbg_write_desc(vg, vg->desc, 0, hdr, 16, VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, vg->desc, 1, hdr, 16, VRING_DESC_F_NEXT, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "a loop");

    /* next past the queue */
    vbg_write_desc(vg, vg->desc, 0, hdr, 16, VRING_DESC_F_NEXT, 5000);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "descriptor 0 points at 5000 of 256");

    /* a buffer outside guest RAM, and one that wraps the address space */
    vbg_write_desc(vg, vg->desc, 0, hdr, 16, VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, vg->desc, 1, ram - 8, 512,
                   VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
    vbg_write_desc(vg, vg->desc, 2, hdr + 16, 1, VRING_DESC_F_WRITE, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "buffer 0x3fffff8+512 is not in guest memory");
    vbg_write_desc(vg, vg->desc, 0, hdr, 16, VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, vg->desc, 1, UINT64_MAX - 100, 512,
                   VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
    vbg_write_desc(vg, vg->desc, 2, hdr + 16, 1, VRING_DESC_F_WRITE, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f,
                             "buffer 0xffffffffffffff9b+512 is"
                             " not in guest memory");

    /* a readable descriptor after a writable one */
    vbg_write_desc(vg, vg->desc, 0, hdr + 16, 1,
                   VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, vg->desc, 1, hdr, 16, 0, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f,
                             "a device-readable descriptor follows a"
                             " device-writable one");

    /* no status byte, and a header shorter than 16 bytes */
    vbg_write_desc(vg, vg->desc, 0, hdr, 16, 0, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "request 0 has no status byte");
    vbg_write_desc(vg, vg->desc, 0, hdr, 8, VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, vg->desc, 1, hdr + 16, 1, VRING_DESC_F_WRITE, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "request 0 has a 8-byte header, not 16");

    /* indirect: a table of odd size, a nested table, a loop inside it,
     * an indirect descriptor that is chained */
    vbg_write_desc(vg, vg->desc, 0, table, 24, VRING_DESC_F_INDIRECT, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "indirect table of 24 bytes");
    vbg_write_desc(vg, table, 0, table, 32, VRING_DESC_F_INDIRECT, 0);
    vbg_write_desc(vg, vg->desc, 0, table, 32, VRING_DESC_F_INDIRECT, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "nested indirect table");
    vbg_write_desc(vg, table, 0, hdr, 16, VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, table, 1, hdr + 16, 1,
                   VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 0);
    vbg_write_desc(vg, vg->desc, 0, table, 32, VRING_DESC_F_INDIRECT, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f,
                             "indirect chain longer than its"
                             " table (2 entries)");
    vbg_write_desc(vg, table, 0, hdr, 16, VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, table, 1, hdr + 16, 1, VRING_DESC_F_WRITE, 0);
    vbg_write_desc(vg, vg->desc, 0, table, 32,
                   VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, vg->desc, 1, hdr + 16, 1, VRING_DESC_F_WRITE, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "indirect descriptor 0 is part of a chain");
    /* a table outside RAM, and a huge one */
    vbg_write_desc(vg, vg->desc, 0, ram + 4096, 32, VRING_DESC_F_INDIRECT, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "is not in guest memory");
    vbg_write_desc(vg, vg->desc, 0, table, 0xfffffff0,
                   VRING_DESC_F_INDIRECT, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "indirect table of 4294967280 bytes");

    /* rings outside RAM or misaligned */
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_READY, 0);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_DESC_LOW, vg->desc + 8);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_READY, 1);
    vbg_kick(vg);
    assert_broken_then_reset(&f, "are not aligned as the spec requires");
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_READY, 0);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_DRIVER_HIGH, 0x10);
    vbg_writel(vg, VIRTIO_MMIO_QUEUE_READY, 1);
    vbg_kick(vg);
    assert_broken_then_reset(&f,
                             "available ring at 0x1000002000 is"
                             " not in guest memory");

    /* indirect without the feature */
    g_assert_true(vbg_init(vg, FEATURES_ALL));
    vbg_write_desc(vg, table, 0, hdr, 16, VRING_DESC_F_NEXT, 1);
    vbg_write_desc(vg, table, 1, hdr + 16, 1, VRING_DESC_F_WRITE, 0);
    vbg_write_desc(vg, vg->desc, 0, table, 32, VRING_DESC_F_INDIRECT, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f,
                             "indirect descriptor without"
                             " VIRTIO_RING_F_INDIRECT_DESC");
    vfixture_close(&f);
}

/* A chain needing more buffer pieces than an element may hold. */
static void test_too_many_pieces(void)
{
    VFixture f;
    VirtioBlkGuest *vg;
    uint64_t table;

    vfixture_open(&f, "raw", "writeback", NULL);
    vg = f.vg;
    g_assert_true(vbg_init(vg, FEATURES_ALL | F(VIRTIO_RING_F_INDIRECT_DESC)));
    table = qguest_alloc(vg->g, VIRTQUEUE_MAX_SIZE * 16, 16);
    qguest_writel(vg->g, vg->hdr_area, VIRTIO_BLK_T_IN);
    vbg_write_desc(vg, table, 0, vg->hdr_area, 16, VRING_DESC_F_NEXT, 1);
    /* 1022 buffers, each across the RAM boundary: 2044 pieces */
    for (int i = 1; i < VIRTQUEUE_MAX_SIZE - 1; i++) {
        vbg_write_desc(vg, table, i, 32 * MiB - 256, 512,
                       VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, i + 1);
    }
    vbg_write_desc(vg, table, VIRTQUEUE_MAX_SIZE - 1, vg->hdr_area + 16, 1,
                   VRING_DESC_F_WRITE, 0);
    vbg_write_desc(vg, vg->desc, 0, table, VIRTQUEUE_MAX_SIZE * 16,
                   VRING_DESC_F_INDIRECT, 0);
    vbg_post_head(vg, 0);
    assert_broken_then_reset(&f, "a chain needs more than 1024 buffer pieces");
    vfixture_close(&f);
}

/* Flushes of the file node while one 4 KiB OUT request runs. */
static uint64_t out_flushes(VFixture *f, uint64_t sector)
{
    uint8_t buf[4096];
    uint64_t before = qguest_file_flushes(f->blk);

    qguest_pattern(buf, sizeof(buf), sector, 3);
    g_assert_cmpuint(vbg_request(f->vg, VIRTIO_BLK_T_OUT, sector, buf,
                                 sizeof(buf)), ==, VIRTIO_BLK_S_OK);
    return qguest_file_flushes(f->blk) - before;
}

static uint64_t flush_req_flushes(VFixture *f)
{
    uint64_t before = qguest_file_flushes(f->blk);

    g_assert_cmpuint(vbg_request(f->vg, VIRTIO_BLK_T_FLUSH, 0, NULL, 0), ==,
                     VIRTIO_BLK_S_OK);
    return qguest_file_flushes(f->blk) - before;
}

/*
 * The scenario for virtio-blk: writeback=0 in the config makes
 * every write cost one flush of the file node, writeback=1 stops that, and
 * VIRTIO_BLK_T_FLUSH flushes once.  Over raw and qcow2 (overwrites).
 */
static void toggle_fmt(const char *fmt)
{
    g_autofree uint8_t *buf = g_malloc(1 * MiB);
    VFixture f;

    vfixture_open(&f, fmt, "writeback", NULL);
    memset(buf, 7, 1 * MiB);
    g_assert_cmpint(blk_pwrite(f.blk, 0, 1 * MiB, buf, 0), ==, 0);
    g_assert_cmpint(blk_flush(f.blk), ==, 0);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    g_assert_cmpuint(vbg_config8(f.vg, WRITEBACK), ==, 1);
    g_assert_cmpuint(out_flushes(&f, 0), ==, 0);

    vbg_config_write8(f.vg, WRITEBACK, 0);
    g_assert_false(blk_enable_write_cache(f.blk));
    g_assert_cmpuint(vbg_config8(f.vg, WRITEBACK), ==, 0);
    for (int i = 0; i < 5; i++) {
        g_assert_cmpuint(out_flushes(&f, i * 16), ==, 1);
    }
    vbg_config_write8(f.vg, WRITEBACK, 1);
    g_assert_true(blk_enable_write_cache(f.blk));
    g_assert_cmpuint(vbg_config8(f.vg, WRITEBACK), ==, 1);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(out_flushes(&f, i * 16), ==, 0);
    }
    g_assert_cmpuint(flush_req_flushes(&f), ==, 1);
    g_assert_cmpuint(flush_req_flushes(&f), ==, 0);
    /* a reset brings the drive's default back */
    vbg_config_write8(f.vg, WRITEBACK, 0);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    g_assert_true(blk_enable_write_cache(f.blk));
    vfixture_close(&f);
}

static void test_toggle_raw(void)
{
    toggle_fmt("raw");
}

static void test_toggle_qcow2(void)
{
    toggle_fmt("qcow2");
}

/* The drive's cache mode is the default the driver sees. */
static void test_default_from_cache_mode(void)
{
    VFixture f;

    vfixture_open(&f, "raw", "writethrough", NULL);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    g_assert_cmpuint(vbg_config8(f.vg, WRITEBACK), ==, 0);
    g_assert_cmpuint(out_flushes(&f, 0), ==, 1);
    vbg_config_write8(f.vg, WRITEBACK, 1);
    g_assert_cmpuint(out_flushes(&f, 0), ==, 0);
    vfixture_close(&f);
}

/*
 * A driver that negotiates neither FLUSH nor CONFIG_WCE gets writethrough,
 * whatever the drive's default; so does one with CONFIG_WCE but no FLUSH,
 * whose writes to writeback are then ignored.  FLUSH alone keeps the
 * default.
 */
static void test_negotiation_writethrough(void)
{
    uint64_t base = FEATURES_ALL & ~F(VIRTIO_BLK_F_FLUSH) &
                    ~F(VIRTIO_BLK_F_CONFIG_WCE);
    VFixture f;

    vfixture_open(&f, "raw", "writeback", NULL);
    g_assert_true(vbg_init(f.vg, base));
    g_assert_false(blk_enable_write_cache(f.blk));
    g_assert_cmpuint(out_flushes(&f, 0), ==, 1);
    g_assert_cmpuint(out_flushes(&f, 8), ==, 1);

    g_assert_true(vbg_init(f.vg, base | F(VIRTIO_BLK_F_CONFIG_WCE)));
    g_assert_cmpuint(vbg_config8(f.vg, WRITEBACK), ==, 0);
    vbg_config_write8(f.vg, WRITEBACK, 1);
    g_assert_cmpuint(vbg_config8(f.vg, WRITEBACK), ==, 0);
    g_assert_cmpuint(out_flushes(&f, 0), ==, 1);

    g_assert_true(vbg_init(f.vg, base | F(VIRTIO_BLK_F_FLUSH)));
    g_assert_true(blk_enable_write_cache(f.blk));
    g_assert_cmpuint(out_flushes(&f, 0), ==, 0);
    /* without CONFIG_WCE the field is not the driver's to write */
    vbg_config_write8(f.vg, WRITEBACK, 0);
    g_assert_true(blk_enable_write_cache(f.blk));
    g_assert_cmpuint(flush_req_flushes(&f), ==, 1);
    vfixture_close(&f);
}

/*
 * Requests in flight across a switch: with the power-cut filter below the
 * format, each write must be out of the volatile cache (flushed) by the
 * time the guest sees it complete, when the switch to writethrough came
 * before that; and writes issued in writethrough stay flushed after a
 * switch to writeback.
 */
static void in_flight_toggle(bool to_writethrough)
{
    QDict *extra = qdict_new();
    BlockDriverState *crash;
    uint8_t buf[8][4096];
    int slots[8];
    VFixture f;

    qdict_put_str(extra, "file.driver", "blkcrash");
    qdict_put_str(extra, "file.file.driver", "file");
    vfixture_open(&f, "raw", "writeback", extra);
    crash = blkcrash_find(blk_bs(f.blk));
    g_assert_nonnull(crash);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    if (!to_writethrough) {
        vbg_config_write8(f.vg, WRITEBACK, 0);
    }
    for (int i = 0; i < 8; i++) {
        qguest_pattern(buf[i], sizeof(buf[i]), i * 64, 4);
        slots[i] = vbg_submit(f.vg, VIRTIO_BLK_T_OUT, i * 64, buf[i],
                              sizeof(buf[i]), 1, false);
    }
    vbg_kick(f.vg);
    g_assert_cmpuint(virtio_blk_inflight(f.vg->dev), ==, 8);
    vbg_config_write8(f.vg, WRITEBACK, to_writethrough ? 0 : 1);
    for (int i = 0; i < 8; i++) {
        g_assert_cmpuint(vbg_wait(f.vg, slots[i], NULL, 0), ==,
                         VIRTIO_BLK_S_OK);
        g_assert_false(blkcrash_is_unflushed(crash, i * 64 * 512, 4096));
    }
    vfixture_close(&f);
}

static void test_in_flight_to_writethrough(void)
{
    in_flight_toggle(true);
}

static void test_in_flight_to_writeback(void)
{
    in_flight_toggle(false);
}

/*
 * The same with a write held inside the graph (a blkdebug break point
 * above the power-cut filter) while the driver switches: when it is let
 * go and completes, it is out of the volatile cache.
 */
static void suspended_toggle(bool to_writethrough)
{
    g_autofree char *path = qguest_image_new("raw", DISK_SIZE);
    QDict *extra = qdict_new();
    BlockDriverState *dbg, *crash;
    VirtioBlkGuest *vg;
    BlockBackend *blk;
    uint8_t buf[4096];
    int slot;

    qdict_put_str(extra, "file.driver", "blkdebug");
    qdict_put_str(extra, "file.image.driver", "blkcrash");
    qdict_put_str(extra, "file.image.file.driver", "file");
    qdict_put_str(extra, "file.image.file.filename", path);
    blk = qguest_blk_open(path, "raw", "writeback", extra);
    dbg = blk_bs(blk)->file->bs;
    crash = blkcrash_find(blk_bs(blk));
    vg = vbg_new(blk, NULL);
    g_assert_true(vbg_init(vg, FEATURES_ALL));
    if (!to_writethrough) {
        vbg_config_write8(vg, WRITEBACK, 0);
    }
    g_assert_cmpint(bdrv_debug_breakpoint(dbg, "pwritev", "held"), ==, 0);
    qguest_pattern(buf, sizeof(buf), 0, 7);
    slot = vbg_submit(vg, VIRTIO_BLK_T_OUT, 0, buf, sizeof(buf), 1, true);
    qguest_settle();
    g_assert_true(bdrv_debug_is_suspended(dbg, "held"));
    vbg_config_write8(vg, WRITEBACK, to_writethrough ? 0 : 1);
    g_assert_cmpint(bdrv_debug_resume(dbg, "held"), ==, 0);
    g_assert_cmpuint(vbg_wait(vg, slot, NULL, 0), ==, VIRTIO_BLK_S_OK);
    g_assert_false(blkcrash_is_unflushed(crash, 0, sizeof(buf)));
    vbg_free(vg);
    blk_unref(blk);
    unlink(path);
}

static void test_suspended_to_writethrough(void)
{
    suspended_toggle(true);
}

static void test_suspended_to_writeback(void)
{
    suspended_toggle(false);
}

/* ---- device state ---- */

static void save_dev(VirtioBlkGuest *vg, VMStateBuffer *b)
{
    vmstate_buffer_init(b);
    vmstate_save_header(b);
    g_assert_cmpint(vmstate_save(b, &vmstate_virtio_blk, 0, vg->dev,
                                 &error_abort), ==, 0);
}

static char *load_dev(VirtioBlkGuest *vg, VMStateBuffer *b)
{
    Error *err = NULL;
    char *msg = NULL;

    b->pos = 0;
    if (vmstate_load_header(b, &err) == 0) {
        vmstate_load(b, &vmstate_virtio_blk, 0, vg->dev, &err);
    }
    if (err) {
        msg = g_strdup(error_get_pretty(err));
        error_free(err);
    }
    return msg;
}

/*
 * The guest set writeback=0; a fresh device whose drive defaults to
 * writeback loads the state into the same guest memory (the rings move
 * with the guest), shows writeback=0 and flushes every write; the queue
 * goes on where it was.
 */
static void test_vmstate_round_trip(void)
{
    VirtioBlkGuest *target;
    BlockBackend *blk2;
    uint8_t buf[4096], in[4096];
    VMStateBuffer b;
    Error *err = NULL;
    VFixture f;
    int slot;

    vfixture_open(&f, "raw", "writeback", NULL);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL | F(VIRTIO_RING_F_EVENT_IDX)));
    qguest_pattern(buf, sizeof(buf), 8, 6);
    g_assert_cmpuint(vbg_request(f.vg, VIRTIO_BLK_T_OUT, 8, buf,
                                 sizeof(buf)), ==, VIRTIO_BLK_S_OK);
    vbg_config_write8(f.vg, WRITEBACK, 0);
    /* with a request in flight the save is refused */
    slot = vbg_submit(f.vg, VIRTIO_BLK_T_OUT, 16, buf, sizeof(buf), 1, true);
    vmstate_buffer_init(&b);
    g_assert_cmpint(vmstate_save(&b, &vmstate_virtio_blk, 0, f.vg->dev,
                                 &err), ==, -EBUSY);
    error_free(err);
    vmstate_buffer_destroy(&b);
    g_assert_cmpuint(vbg_wait(f.vg, slot, NULL, 0), ==, VIRTIO_BLK_S_OK);
    save_dev(f.vg, &b);

    /* the target: same guest RAM contents, a new device and backend */
    blk2 = qguest_blk_open(f.path, "raw", "writeback", NULL);
    target = vbg_new(blk2, NULL);
    memcpy(target->g->ram[0], f.vg->g->ram[0], f.vg->g->ram_size / 2);
    memcpy(target->g->ram[1], f.vg->g->ram[1], f.vg->g->ram_size / 2);
    target->num = f.vg->num;
    target->features = f.vg->features;
    target->avail_idx = f.vg->avail_idx;
    target->last_used = f.vg->last_used;
    g_assert_true(blk_enable_write_cache(blk2));
    g_assert_null(load_dev(target, &b));
    g_assert_false(blk_enable_write_cache(blk2));
    g_assert_cmpuint(vbg_config8(target, WRITEBACK), ==, 0);
    g_assert_cmphex(vbg_readl(target, VIRTIO_MMIO_STATUS) & 0xf, ==, 0xf);
    {
        uint64_t before = qguest_file_flushes(blk2);

        g_assert_cmpuint(vbg_request(target, VIRTIO_BLK_T_OUT, 24, buf,
                                     sizeof(buf)), ==, VIRTIO_BLK_S_OK);
        g_assert_cmpuint(qguest_file_flushes(blk2) - before, ==, 1);
    }
    g_assert_cmpuint(vbg_request(target, VIRTIO_BLK_T_IN, 8, in,
                                 sizeof(in)), ==, VIRTIO_BLK_S_OK);
    g_assert_cmpmem(in, sizeof(in), buf, sizeof(buf));
    vbg_free(target);
    blk_unref(blk2);
    vmstate_buffer_destroy(&b);
    vfixture_close(&f);
}

/* Loaded values that do not fit are refused, naming what is wrong. */
static void test_vmstate_hostile(void)
{
    VMStateBuffer b;
    VFixture f;
    struct {
        const char *name;
        uint64_t value;
        int size;
        const char *error;
    } cases[] = {
        { "num", 100, 2, "queue 0 has 100 entries" },
        { "num", 2048, 2, "queue 0 has 2048 entries" },
        { "guest_features", UINT64_MAX, 8, "were never offered" },
        { "isr", 0x80, 4, "has unknown bits" },
        { "saved_sectors", 5, 8, "a disk of 5 sectors" },
    };

    vfixture_open(&f, "raw", "writeback", NULL);
    g_assert_true(vbg_init(f.vg, FEATURES_ALL));
    save_dev(f.vg, &b);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        size_t len = strlen(cases[i].name);
        g_autofree char *msg = NULL;
        VMStateBuffer bad;
        size_t off = 0;

        vmstate_buffer_init_data(&bad, b.data->data, b.data->len);
        for (size_t j = 0; j + 1 + len + 5 < bad.data->len; j++) {
            if (bad.data->data[j] == len &&
                !memcmp(bad.data->data + j + 1, cases[i].name, len)) {
                off = j + 1 + len + 5;
                break;
            }
        }
        g_assert_cmpuint(off, >, 0);
        for (int k = 0; k < cases[i].size; k++) {
            bad.data->data[off + k] = cases[i].value >>
                                      (8 * (cases[i].size - 1 - k));
        }
        msg = load_dev(f.vg, &bad);
        g_assert_nonnull(msg);
        if (!strstr(msg, cases[i].error)) {
            g_error("%s: expected '%s' in: %s", cases[i].name,
                    cases[i].error, msg);
        }
        vmstate_buffer_destroy(&bad);
        vbg_writel(f.vg, VIRTIO_MMIO_STATUS, 0);
    }
    vmstate_buffer_destroy(&b);
    vfixture_close(&f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    g_test_add_func("/virtio-blk/registers", test_registers);
    g_test_add_func("/virtio-blk/config", test_config);
    g_test_add_func("/virtio-blk/read-only", test_read_only);
    g_test_add_func("/virtio-blk/round-trip", test_round_trip);
    g_test_add_func("/virtio-blk/many-in-flight", test_many_in_flight);
    g_test_add_func("/virtio-blk/get-id", test_get_id);
    g_test_add_func("/virtio-blk/discard-write-zeroes",
                    test_discard_write_zeroes);
    g_test_add_func("/virtio-blk/bad-requests", test_bad_requests);
    g_test_add_func("/virtio-blk/hostile-rings", test_hostile_rings);
    g_test_add_func("/virtio-blk/too-many-pieces", test_too_many_pieces);
    g_test_add_func("/virtio-blk/write-cache-toggle/raw", test_toggle_raw);
    g_test_add_func("/virtio-blk/write-cache-toggle/qcow2",
                    test_toggle_qcow2);
    g_test_add_func("/virtio-blk/default-from-cache-mode",
                    test_default_from_cache_mode);
    g_test_add_func("/virtio-blk/negotiation-writethrough",
                    test_negotiation_writethrough);
    g_test_add_func("/virtio-blk/in-flight/to-writethrough",
                    test_in_flight_to_writethrough);
    g_test_add_func("/virtio-blk/in-flight/to-writeback",
                    test_in_flight_to_writeback);
    g_test_add_func("/virtio-blk/in-flight/held-to-writethrough",
                    test_suspended_to_writethrough);
    g_test_add_func("/virtio-blk/in-flight/held-to-writeback",
                    test_suspended_to_writeback);
    g_test_add_func("/virtio-blk/vmstate/round-trip",
                    test_vmstate_round_trip);
    g_test_add_func("/virtio-blk/vmstate/hostile", test_vmstate_hostile);
    return g_test_run();
}
