/*
 * Durability through a device: a guest writes to a qcow2 disk on IDE or
 * virtio-blk while a blkcrash filter below qcow2 plays the disk's volatile
 * cache, and the power is cut at every point of the workload's I/O in turn
 * (losing all unflushed writes, a random subset of them, or of their
 * sectors).  After each cut the image must check clean (no corruption;
 * leaked clusters are allowed) and:
 *  - writethrough (the drive's cache mode, or the guest's choice through
 *    the virtio-blk writeback field): every write the device completed
 *    reads back;
 *  - writeback: every write completed before the guest's last completed
 *    flush (FLUSH CACHE, VIRTIO_BLK_T_FLUSH) reads back; later ones may be
 *    lost.
 * A sector may otherwise hold only a version the guest wrote to it (or
 * zeroes if none was durable): never garbage, never another sector's data.
 */

#include "ide-guest.h"
#include "virtio-guest.h"
#include "block/blkcrash.h"

#define DISK_SIZE   (4 * GiB)
#define SECTOR      512
/* 64 KiB clusters: 128 sectors; one L2 table maps 512 MiB */
#define CLUSTER     128
#define L2_SPAN     (512 * MiB / SECTOR)

typedef struct WorkOp {
    uint64_t lba;
    uint32_t count;         /* 0: a FLUSH CACHE */
} WorkOp;

/* Allocating writes (new clusters, new L2 tables, spanning two clusters),
 * overwrites, partial-cluster writes, with flushes between some. */
static const WorkOp workload[] = {
    { 0, 8 },                           /* first cluster, first L2 table */
    { 8, 8 },                           /* same cluster */
    { 0, 8 },                           /* overwrite */
    { 5 * CLUSTER, 16 },                /* a new cluster */
    { CLUSTER - 8, 16 },                /* spans clusters 0 and 1 */
    { 0, 0 },
    { 4 * L2_SPAN + 40, 8 },            /* a new L2 table */
    { 0, 2 * CLUSTER },                 /* overwrites two clusters */
    { 7 * CLUSTER + 100, 200 },         /* allocates three clusters */
    { 0, 0 },
    { 6 * L2_SPAN + 64, 8 },            /* another new L2 table */
    { 5 * CLUSTER + 8, 16 },            /* overwrite */
    { 4 * L2_SPAN + 40, 8 },            /* overwrite in the far table */
};

/* What the guest did to one sector: the versions it wrote, in order. */
typedef struct SectorLog {
    uint64_t lba;
    GArray *seeds;          /* uint32_t: the pattern seed of each version */
    /* index of the version that must have survived, -1 for none */
    int durable;
    int completed;          /* last completed version, -1 for none */
} SectorLog;

/* How the guest reaches the disk. */
typedef enum GuestDevice {
    DEV_IDE,
    DEV_VIRTIO,
    /* virtio-blk on a writeback drive; the guest sets writeback=0 */
    DEV_VIRTIO_GUEST_WT,
} GuestDevice;

typedef struct Run {
    GHashTable *sectors;    /* lba -> SectorLog */
    bool writethrough;
    GuestDevice dev;
    IDEGuest *ig;
    VirtioBlkGuest *vg;
} Run;

/* One guest write or flush; true if the device reported success. */
static bool run_dev_write(Run *r, uint64_t lba, uint32_t count, void *buf)
{
    if (r->dev == DEV_IDE) {
        return !(ide_guest_dma(r->ig, ATA_CMD_WRITE_DMA_EXT, lba, count, 0,
                               buf, NULL) & ATA_STAT_ERR);
    }
    return vbg_request(r->vg, VIRTIO_BLK_T_OUT, lba, buf,
                       (size_t)count * SECTOR) == VIRTIO_BLK_S_OK;
}

static bool run_dev_flush(Run *r)
{
    if (r->dev == DEV_IDE) {
        return !(ide_guest_nodata(r->ig, ATA_CMD_FLUSH_CACHE_EXT, 0, 0) &
                 ATA_STAT_ERR);
    }
    return vbg_request(r->vg, VIRTIO_BLK_T_FLUSH, 0, NULL, 0) ==
           VIRTIO_BLK_S_OK;
}

static SectorLog *run_sector(Run *r, uint64_t lba)
{
    SectorLog *l = g_hash_table_lookup(r->sectors, &lba);

    if (!l) {
        l = g_new0(SectorLog, 1);
        l->lba = lba;
        l->seeds = g_array_new(false, false, sizeof(uint32_t));
        l->durable = l->completed = -1;
        g_hash_table_insert(r->sectors, &l->lba, l);
    }
    return l;
}

static void sector_log_free(gpointer p)
{
    SectorLog *l = p;

    g_array_free(l->seeds, true);
    g_free(l);
}

/* A guest write of @op as version @seed; records it as the guest saw it. */
static bool run_write(Run *r, const WorkOp *op, uint32_t seed)
{
    size_t len = (size_t)op->count * SECTOR;
    g_autofree uint8_t *buf = g_malloc(len);
    bool ok;

    for (uint32_t i = 0; i < op->count; i++) {
        qguest_pattern(buf + (size_t)i * SECTOR, SECTOR, op->lba + i, seed);
        g_array_append_val(run_sector(r, op->lba + i)->seeds, seed);
    }
    ok = run_dev_write(r, op->lba, op->count, buf);
    for (uint32_t i = 0; ok && i < op->count; i++) {
        SectorLog *l = run_sector(r, op->lba + i);

        l->completed = l->seeds->len - 1;
        if (r->writethrough) {
            l->durable = l->completed;
        }
    }
    return ok;
}

static bool run_flush(Run *r)
{
    GHashTableIter it;
    gpointer value;

    if (!run_dev_flush(r)) {
        return false;
    }
    g_hash_table_iter_init(&it, r->sectors);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        SectorLog *l = value;

        l->durable = l->completed;
    }
    return true;
}

/* Which version sector @l holds now (-1: zeroes), or -2 if none fits. */
static int sector_version(SectorLog *l, const uint8_t *data)
{
    uint8_t expect[SECTOR];

    if (buffer_is_zero(data, SECTOR)) {
        return -1;
    }
    for (guint v = 0; v < l->seeds->len; v++) {
        qguest_pattern(expect, SECTOR, l->lba,
                       g_array_index(l->seeds, uint32_t, v));
        if (!memcmp(expect, data, SECTOR)) {
            return v;
        }
    }
    return -2;
}

/* The image after the cut: clean, and every sector allowed by its log. */
static void run_verify(Run *r, const char *path, const char *what)
{
    BlockBackend *blk = qguest_blk_open(path, "qcow2", "writeback", NULL);
    BdrvCheckResult res;
    GHashTableIter it;
    gpointer value;

    g_assert_cmpint(bdrv_check(blk_bs(blk), &res, 0), ==, 0);
    if (res.corruptions || res.check_errors) {
        g_error("%s: qcow2 check found %d corruptions, %d errors", what,
                res.corruptions, res.check_errors);
    }
    g_hash_table_iter_init(&it, r->sectors);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        SectorLog *l = value;
        uint8_t data[SECTOR];
        int v;

        g_assert_cmpint(blk_pread(blk, l->lba * SECTOR, SECTOR, data, 0), ==,
                        0);
        v = sector_version(l, data);
        if (v == -2 || v < l->durable) {
            g_error("%s: sector %" PRIu64 " holds %s, the guest needs version"
                    " %d or later of %u", what, l->lba,
                    v == -2 ? "data it never wrote there" :
                    v == -1 ? "zeroes" : "an older version", l->durable,
                    l->seeds->len);
        }
    }
    blk_unref(blk);
}

static void run_dev_open(Run *r, BlockBackend *blk)
{
    if (r->dev == DEV_IDE) {
        r->ig = ide_guest_new(blk);
        return;
    }
    r->vg = vbg_new(blk, NULL);
    g_assert_true(vbg_init(r->vg, (UINT64_C(1) << VIRTIO_F_VERSION_1) |
                           (UINT64_C(1) << VIRTIO_BLK_F_FLUSH) |
                           (UINT64_C(1) << VIRTIO_BLK_F_CONFIG_WCE)));
    if (r->dev == DEV_VIRTIO_GUEST_WT) {
        vbg_config_write8(r->vg, offsetof(VirtIOBlkConfig, writeback), 0);
        g_assert_false(blk_enable_write_cache(blk));
    }
}

static void run_dev_close(Run *r)
{
    if (r->ig) {
        ide_guest_free(r->ig);
    }
    if (r->vg) {
        vbg_free(r->vg);
    }
}

/*
 * Runs the workload on a fresh image; with @cut_at, the power goes at that
 * request of the blkcrash node.  Returns the requests the node saw.
 */
static uint64_t run_once(GuestDevice dev, const char *mode, uint64_t cut_at,
                         BlkcrashCut how)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    g_autofree char *what = g_strdup_printf("device %d, %s, cut at request %"
                                            PRIu64 " (mode %d)", dev, mode,
                                            cut_at, how);
    Run r = {
        .sectors = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL,
                                         sector_log_free),
        .writethrough = !strcmp(mode, "writethrough") ||
                        dev == DEV_VIRTIO_GUEST_WT,
        .dev = dev,
    };
    QDict *extra = qdict_new();
    BlockDriverState *crash;
    BlockBackend *blk;
    uint64_t requests;

    qdict_put_str(extra, "file.driver", "blkcrash");
    qdict_put_str(extra, "file.file.driver", "file");
    qdict_put_str(extra, "file.file.filename", path);
    blk = qguest_blk_open(path, "qcow2", mode, extra);
    crash = blkcrash_find(blk_bs(blk));
    g_assert_nonnull(crash);
    run_dev_open(&r, blk);
    if (cut_at) {
        g_assert_cmpint(blkcrash_arm(crash, blkcrash_requests(crash) + cut_at,
                                     how, cut_at), ==, 0);
    }
    requests = blkcrash_requests(crash);
    for (size_t i = 0; i < ARRAY_SIZE(workload); i++) {
        const WorkOp *op = &workload[i];
        bool ok = op->count ? run_write(&r, op, i + 1) : run_flush(&r);

        if (!ok) {
            g_assert_true(blkcrash_is_dead(crash));
            break;
        }
    }
    requests = blkcrash_requests(crash) - requests;
    if (!cut_at) {
        /* no cut: the end of the run is the cut, after a final flush */
        g_assert_true(run_flush(&r));
        g_assert_cmpint(blkcrash_power_cut(crash, how, 1), >=, 0);
    }
    run_dev_close(&r);
    blk_unref(blk);
    run_verify(&r, path, what);
    g_hash_table_destroy(r.sectors);
    unlink(path);
    return requests;
}

static void test_sweep(GuestDevice dev, const char *mode)
{
    static const BlkcrashCut cuts[] = {
        BLKCRASH_CUT_ALL, BLKCRASH_CUT_RANDOM_WRITES,
        BLKCRASH_CUT_RANDOM_SECTORS,
    };
    uint64_t total = run_once(dev, mode, 0, BLKCRASH_CUT_ALL);

    g_assert_cmpuint(total, >, ARRAY_SIZE(workload));
    g_test_message("%s: the workload makes %" PRIu64 " requests below qcow2",
                   mode, total);
    /* every point of the I/O, each cut mode in turn */
    for (uint64_t n = 1; n <= total + 1; n++) {
        run_once(dev, mode, n, cuts[n % ARRAY_SIZE(cuts)]);
    }
}

static void test_ide_writethrough(void)
{
    test_sweep(DEV_IDE, "writethrough");
}

static void test_ide_writeback(void)
{
    test_sweep(DEV_IDE, "writeback");
}

static void test_virtio_writethrough(void)
{
    test_sweep(DEV_VIRTIO, "writethrough");
}

static void test_virtio_writeback(void)
{
    test_sweep(DEV_VIRTIO, "writeback");
}

static void test_virtio_guest_writethrough(void)
{
    test_sweep(DEV_VIRTIO_GUEST_WT, "writeback");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    g_test_add_func("/durability/ide/qcow2/writethrough",
                    test_ide_writethrough);
    g_test_add_func("/durability/ide/qcow2/writeback", test_ide_writeback);
    g_test_add_func("/durability/virtio-blk/qcow2/writethrough",
                    test_virtio_writethrough);
    g_test_add_func("/durability/virtio-blk/qcow2/writeback",
                    test_virtio_writeback);
    g_test_add_func("/durability/virtio-blk/qcow2/guest-writethrough",
                    test_virtio_guest_writethrough);
    return g_test_run();
}
