/*
 * savevm/loadvm/delvm (migration/savevm.c) through the harness's monitor
 * command (qguest_hmp), on real qcow2 image files:
 *  - the IDE write cache the guest disabled (SET FEATURES 82h) comes back
 *    in a fresh machine: IDENTIFY word 85 off, one file flush per DMA
 *    write; the same for virtio-blk's writeback field; the disks and RAM
 *    are the snapshot's;
 *  - the VM state size the tools list (qblock-img and the real qemu-img);
 *  - which drives get snapshots and which holds the VM state;
 *  - errors, each naming what is wrong: no such snapshot, a raw drive, a
 *    disk-only snapshot, corrupt, truncated, oversized or foreign VM
 *    state, an unknown, missing or newer device section, a device that
 *    refuses to be saved; a failed load leaves the devices and RAM reset;
 *  - crashes: a process killed right after savevm, or after any write it
 *    makes, and a power cut at any request of savevm (blkcrash), leave an
 *    image that checks clean and either has no snapshot or one that
 *    loads; a savevm that returned is never lost.
 */

#include <math.h>
#include <signal.h>

#include "ide-guest.h"
#include "virtio-guest.h"
#include "block/blkcrash.h"
#include "block/snapshot.h"
#include "util/cutils.h"

#define DISK_SIZE (64 * MiB)
#define STATUS_OK (ATA_STAT_DRDY | ATA_STAT_DSC)
/* what the guest writes before savevm: one 64 KiB cluster at LBA 0 */
#define DATA_SECTORS 128
#define DATA_BYTES (DATA_SECTORS * 512)
#define F(bit) (UINT64_C(1) << (bit))
#define VIRTIO_FEATURES (F(VIRTIO_F_VERSION_1) | F(VIRTIO_BLK_F_FLUSH) | \
                         F(VIRTIO_BLK_F_CONFIG_WCE))
#define WRITEBACK offsetof(VirtIOBlkConfig, writeback)

/* A machine with an IDE channel whose unit 0 is the image at path. */
typedef struct Machine {
    BlockBackend *blk;
    IDEGuest *ig;
} Machine;

static void machine_open(Machine *m, const char *path, const char *fmt,
                         const char *mode)
{
    m->blk = qguest_blk_open(path, fmt, mode, NULL);
    m->ig = ide_guest_new(m->blk);
}

static void machine_close(Machine *m)
{
    ide_guest_free(m->ig);
    blk_unref(m->blk);
}

static void hmp_ok(QGuest *g, const char *cmd)
{
    g_autofree char *msg = qguest_hmp(g, cmd);

    if (msg) {
        g_error("'%s' failed: %s", cmd, msg);
    }
}

/* @cmd fails with a message that contains every string of @expect. */
static void hmp_fails(QGuest *g, const char *cmd, const char *const *expect)
{
    g_autofree char *msg = qguest_hmp(g, cmd);

    if (!msg) {
        g_error("'%s' succeeded", cmd);
    }
    for (; *expect; expect++) {
        if (!strstr(msg, *expect)) {
            g_error("'%s': expected '%s' in: %s", cmd, *expect, msg);
        }
    }
    g_test_message("%s: %s", cmd, msg);
}

#define HMP_FAILS(g, cmd, ...) \
    hmp_fails((g), (cmd), (const char *const[]) { __VA_ARGS__, NULL })

static void identify(IDEGuest *ig, uint16_t id[ATA_ID_WORDS])
{
    g_assert_cmphex(ide_guest_identify(ig, id), ==, STATUS_OK);
}

static bool id_wce(IDEGuest *ig)
{
    uint16_t id[ATA_ID_WORDS];

    identify(ig, id);
    return id[ATA_ID_CFS_ENABLE_1] & ATA_ID_CS1_WCACHE;
}

static void dma_write(IDEGuest *ig, uint64_t lba, uint32_t count,
                      uint32_t seed)
{
    g_autofree uint8_t *buf = g_malloc((size_t)count * 512);

    qguest_pattern(buf, (size_t)count * 512, lba, seed);
    g_assert_cmphex(ide_guest_dma(ig, ATA_CMD_WRITE_DMA, lba, count, 0, buf,
                                  NULL), ==, STATUS_OK);
}

static void dma_read_check(IDEGuest *ig, uint64_t lba, uint32_t count,
                           uint32_t seed)
{
    size_t len = (size_t)count * 512;
    g_autofree uint8_t *buf = g_malloc(len);
    g_autofree uint8_t *expect = g_malloc(len);

    g_assert_cmphex(ide_guest_dma(ig, ATA_CMD_READ_DMA, lba, count, 0, buf,
                                  NULL), ==, STATUS_OK);
    qguest_pattern(expect, len, lba, seed);
    g_assert_cmpmem(buf, len, expect, len);
}

static uint64_t dma_write_flushes(Machine *m, uint64_t lba, uint32_t count,
                                  uint32_t seed)
{
    uint64_t before = qguest_file_flushes(m->blk);

    dma_write(m->ig, lba, count, seed);
    return qguest_file_flushes(m->blk) - before;
}

/* The guest's work before savevm: data, the cache off, multiple mode. */
static void ide_guest_setup(Machine *m)
{
    dma_write(m->ig, 0, DATA_SECTORS, 1);
    g_assert_cmphex(ide_guest_nodata(m->ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_DISABLE_WCE, 0), ==, STATUS_OK);
    g_assert_cmphex(ide_guest_nodata(m->ig, ATA_CMD_SET_MULTIPLE, 0, 8), ==,
                    STATUS_OK);
    g_assert_false(blk_enable_write_cache(m->blk));
}

/* A fresh machine after loadvm of what ide_guest_setup() left. */
static void ide_check_loaded(Machine *m)
{
    uint8_t ram[DATA_BYTES], expect[DATA_BYTES];
    uint16_t id[ATA_ID_WORDS];

    /* RAM first: the DMA buffer still holds the data the guest wrote */
    qguest_memread(m->ig->g, m->ig->buf, ram, sizeof(ram));
    qguest_pattern(expect, sizeof(expect), 0, 1);
    g_assert_cmpmem(ram, sizeof(ram), expect, sizeof(expect));
    identify(m->ig, id);
    g_assert_false(id[ATA_ID_CFS_ENABLE_1] & ATA_ID_CS1_WCACHE);
    g_assert_cmphex(id[ATA_ID_MULTSECT], ==, 0x0108);
    g_assert_false(blk_enable_write_cache(m->blk));
    dma_read_check(m->ig, 0, DATA_SECTORS, 1);
}

/*
 * The devices are as just created (IDENTIFY as a new drive of the same
 * size and cache mode shows it) and RAM is zero: the reset state.
 */
static void ide_check_reset(Machine *m, const char *mode)
{
    g_autofree char *scratch = qguest_image_new("qcow2", DISK_SIZE);
    uint16_t id[ATA_ID_WORDS], pristine[ATA_ID_WORDS];
    uint8_t ram[4096];
    Machine fresh;

    machine_open(&fresh, scratch, "qcow2", mode);
    identify(fresh.ig, pristine);
    machine_close(&fresh);
    unlink(scratch);
    identify(m->ig, id);
    g_assert_cmpmem(id, sizeof(id), pristine, sizeof(pristine));
    qguest_memread(m->ig->g, m->ig->buf, ram, sizeof(ram));
    g_assert_true(buffer_is_zero(ram, sizeof(ram)));
}

/* Dirties what a reset must undo: a setting and RAM. */
static void ide_dirty(Machine *m)
{
    g_assert_cmphex(ide_guest_nodata(m->ig, ATA_CMD_SET_MULTIPLE, 0, 16), ==,
                    STATUS_OK);
    qguest_memset(m->ig->g, m->ig->buf, 0xaa, 4096);
}

/* The snapshots of the image at @path (g_free *tab). */
static int list_snapshots(const char *path, QEMUSnapshotInfo **tab)
{
    BlockBackend *blk = qguest_blk_open(path, "qcow2", "writeback", NULL);
    int n = bdrv_snapshot_list(blk_bs(blk), tab);

    blk_unref(blk);
    g_assert_cmpint(n, >=, 0);
    return n;
}

static bool find_snapshot(const char *path, const char *name,
                          QEMUSnapshotInfo *sn)
{
    QEMUSnapshotInfo *tab;
    int n = list_snapshots(path, &tab);
    bool found = false;

    for (int i = 0; i < n && !found; i++) {
        if (!strcmp(tab[i].name, name)) {
            *sn = tab[i];
            found = true;
        }
    }
    g_free(tab);
    return found;
}

/* ---- the scenarios ---- */

/*
 * IDE: the guest turns the write cache off; after savevm it writes on;
 * a fresh machine (its drive defaults to writeback) loads the snapshot:
 * IDENTIFY shows the cache off, the disk and RAM are the snapshot's, and
 * every DMA write costs exactly one flush of the file.
 */
static void test_ide_write_cache(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    ide_guest_setup(&m);
    hmp_ok(m.ig->g, "savevm snap1");
    /* the machine runs on, in writethrough */
    g_assert_cmpuint(dma_write_flushes(&m, 0, DATA_SECTORS, 2), >=, 1);
    dma_read_check(m.ig, 0, DATA_SECTORS, 2);
    machine_close(&m);

    machine_open(&m, path, "qcow2", "writeback");
    g_assert_true(id_wce(m.ig));
    hmp_ok(m.ig->g, "loadvm snap1");
    ide_check_loaded(&m);
    /* the first write copies the cluster it shares with the snapshot */
    g_assert_cmpuint(dma_write_flushes(&m, 0, 8, 3), >=, 1);
    for (int i = 0; i < 4; i++) {
        g_assert_cmpuint(dma_write_flushes(&m, i * 8, 8, 4 + i), ==, 1);
    }
    /* the guest can turn it back on: no more flushes */
    g_assert_cmphex(ide_guest_nodata(m.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_ENABLE_WCE, 0), ==, STATUS_OK);
    g_assert_cmpuint(dma_write_flushes(&m, 0, 8, 9), ==, 0);
    machine_close(&m);
    unlink(path);
}

/* virtio-blk: the same through the configuration's writeback field. */
static void test_virtio_writeback(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    uint8_t buf[4096], expect[4096];
    VirtioBlkGuest *vg;
    BlockBackend *blk;

    blk = qguest_blk_open(path, "qcow2", "writeback", NULL);
    vg = vbg_new(blk, NULL);
    g_assert_true(vbg_init(vg, VIRTIO_FEATURES));
    qguest_pattern(buf, sizeof(buf), 0, 1);
    g_assert_cmpuint(vbg_request(vg, VIRTIO_BLK_T_OUT, 0, buf, sizeof(buf)),
                     ==, VIRTIO_BLK_S_OK);
    vbg_config_write8(vg, WRITEBACK, 0);
    g_assert_false(blk_enable_write_cache(blk));
    hmp_ok(vg->g, "savevm snap1");
    qguest_pattern(buf, sizeof(buf), 0, 2);
    g_assert_cmpuint(vbg_request(vg, VIRTIO_BLK_T_OUT, 0, buf, sizeof(buf)),
                     ==, VIRTIO_BLK_S_OK);
    vbg_free(vg);
    blk_unref(blk);

    blk = qguest_blk_open(path, "qcow2", "writeback", NULL);
    vg = vbg_new(blk, NULL);
    hmp_ok(vg->g, "loadvm snap1");
    vbg_resume(vg, VIRTIO_FEATURES);
    g_assert_cmphex(vbg_readl(vg, VIRTIO_MMIO_STATUS) & 0xf, ==, 0xf);
    g_assert_cmpuint(vbg_config8(vg, WRITEBACK), ==, 0);
    g_assert_false(blk_enable_write_cache(blk));
    g_assert_cmpuint(vbg_request(vg, VIRTIO_BLK_T_IN, 0, buf, sizeof(buf)),
                     ==, VIRTIO_BLK_S_OK);
    qguest_pattern(expect, sizeof(expect), 0, 1);
    g_assert_cmpmem(buf, sizeof(buf), expect, sizeof(expect));
    /* after the copy of the shared cluster, one flush per write */
    g_assert_cmpuint(vbg_request(vg, VIRTIO_BLK_T_OUT, 0, buf, sizeof(buf)),
                     ==, VIRTIO_BLK_S_OK);
    for (int i = 0; i < 4; i++) {
        uint64_t before = qguest_file_flushes(blk);

        g_assert_cmpuint(vbg_request(vg, VIRTIO_BLK_T_OUT, i * 8, buf,
                                     sizeof(buf)), ==, VIRTIO_BLK_S_OK);
        g_assert_cmpuint(qguest_file_flushes(blk) - before, ==, 1);
    }
    vbg_config_write8(vg, WRITEBACK, 1);
    {
        uint64_t before = qguest_file_flushes(blk);

        g_assert_cmpuint(vbg_request(vg, VIRTIO_BLK_T_OUT, 0, buf,
                                     sizeof(buf)), ==, VIRTIO_BLK_S_OK);
        g_assert_cmpuint(qguest_file_flushes(blk) - before, ==, 0);
    }
    vbg_free(vg);
    blk_unref(blk);
    unlink(path);
}

/*
 * A DMA write in flight at savevm is waited for: the state saved is that
 * of the completed command, which a fresh machine finishes as the guest
 * would have (interrupt, status, bus master stopped).
 */
static void test_ide_request_in_flight(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    uint8_t buf[DATA_BYTES];
    uint8_t bm;
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    qguest_pattern(buf, sizeof(buf), 0, 5);
    qguest_memwrite(m.ig->g, m.ig->buf, buf, sizeof(buf));
    ide_guest_dma_start(m.ig, ATA_CMD_WRITE_DMA, 0, DATA_SECTORS, 0);
    hmp_ok(m.ig->g, "savevm snap1");
    g_assert_false(ide_bus_busy(m.ig->bus));
    machine_close(&m);

    machine_open(&m, path, "qcow2", "writeback");
    hmp_ok(m.ig->g, "loadvm snap1");
    g_assert_cmphex(ide_guest_dma_finish(m.ig, &bm), ==, STATUS_OK);
    g_assert_true(bm & BM_STATUS_INTR);
    dma_read_check(m.ig, 0, DATA_SECTORS, 5);
    machine_close(&m);
    unlink(path);
}

/* ---- what the tools show ---- */

static char *tool_path(const char *name)
{
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    g_autofree char *dir = g_path_get_dirname(exe);

    /* build/tests/qtest/test-savevm -> build/<name> */
    return g_build_filename(dir, "..", "..", name, NULL);
}

/*
 * Runs @argv; returns its exit status, its stdout in *out (and its stderr
 * after it, with @with_stderr).
 */
static int run_tool_full(char **argv, char **out, bool with_stderr)
{
    g_autofree char *err_text = NULL;
    GError *gerr = NULL;
    int status;

    g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               out, &err_text, &status, &gerr));
    g_assert_no_error(gerr);
    if (with_stderr) {
        char *both = g_strconcat(*out, err_text, NULL);

        g_free(*out);
        *out = both;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_tool(char **argv, char **out)
{
    return run_tool_full(argv, out, false);
}

/* The VM SIZE column of snapshot @tag in `snapshot -l` output. */
static char *listed_vm_size(const char *out, const char *tag)
{
    g_auto(GStrv) lines = g_strsplit(out, "\n", -1);

    for (char **l = lines; *l; l++) {
        g_auto(GStrv) col = g_strsplit_set(*l, " ", -1);
        GPtrArray *words = g_ptr_array_new();
        char *size = NULL;

        for (char **c = col; *c; c++) {
            if (**c) {
                g_ptr_array_add(words, *c);
            }
        }
        /* ID TAG size unit date time clock */
        if (words->len >= 5 && !strcmp(g_ptr_array_index(words, 1), tag)) {
            size = g_strdup_printf("%s %s",
                                   (char *)g_ptr_array_index(words, 2),
                                   (char *)g_ptr_array_index(words, 3));
        }
        g_ptr_array_free(words, true);
        if (size) {
            return size;
        }
    }
    g_error("no snapshot '%s' in:\n%s", tag, out);
}

/* "202 KiB" is @size rounded to three significant digits. */
static void check_size_text(const char *text, uint64_t size)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB" };
    char unit[8];
    double value;

    g_assert_cmpint(sscanf(text, "%lf %7s", &value, unit), ==, 2);
    for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
        if (!strcmp(unit, units[i])) {
            double bytes = value * (double)(UINT64_C(1) << (10 * i));

            /* three significant digits: within half a unit of the third */
            g_assert_cmpfloat(fabs(bytes - (double)size), <=,
                              0.005 * (double)size + 0.5);
            return;
        }
    }
    g_error("unknown unit in '%s'", text);
}

/*
 * `qblock-img snapshot -l` and the real `qemu-img snapshot -l` both show
 * the snapshot's VM state: the size savevm wrote, as QEMU rounds it; and
 * the real `qemu-img check` finds the image clean.
 */
static void test_snapshot_list(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    g_autofree char *qblock_img = tool_path("qblock-img");
    g_autofree char *qemu_img = g_find_program_in_path("qemu-img");
    g_autofree char *expect = NULL;
    QEMUSnapshotInfo sn;
    int64_t size;
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    ide_guest_setup(&m);
    size = savevm_save_snapshot(m.ig->g->savevm, "snap1", NULL,
                                &error_abort);
    machine_close(&m);
    g_assert_cmpint(size, >, DATA_BYTES);
    g_assert_true(find_snapshot(path, "snap1", &sn));
    g_assert_cmpuint(sn.vm_state_size, ==, size);
    expect = size_to_str(size);
    g_test_message("VM state: %" PRId64 " bytes, listed as %s", size,
                   expect);
    {
        char *argv[] = { qblock_img, "snapshot", "-l", path, NULL };
        g_autofree char *out = NULL;
        g_autofree char *text = NULL;

        g_assert_cmpint(run_tool(argv, &out), ==, 0);
        text = listed_vm_size(out, "snap1");
        check_size_text(text, size);
        g_assert_cmpstr(text, ==, expect);
    }
    if (!qemu_img) {
        g_test_skip("qemu-img is not installed (Debian package qemu-utils)");
        unlink(path);
        return;
    }
    {
        char *argv[] = { qemu_img, "snapshot", "-l", path, NULL };
        g_autofree char *out = NULL;
        g_autofree char *text = NULL;

        g_assert_cmpint(run_tool(argv, &out), ==, 0);
        text = listed_vm_size(out, "snap1");
        check_size_text(text, size);
        g_assert_cmpstr(text, ==, expect);
    }
    {
        char *argv[] = { qemu_img, "check", path, NULL };
        g_autofree char *out = NULL;

        g_assert_cmpint(run_tool(argv, &out), ==, 0);
    }
    unlink(path);
}

/* ---- snapshots and drives ---- */

/*
 * savevm NAME replaces the snapshot called NAME once the new one exists;
 * the machine's clock goes on from the snapshot's after loadvm; delvm
 * deletes it.
 */
static void test_replace_and_delete(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    QEMUSnapshotInfo *tab, first;
    Machine m;
    int n;

    machine_open(&m, path, "qcow2", "writeback");
    ide_guest_setup(&m);
    hmp_ok(m.ig->g, "savevm snap1");
    g_assert_cmphex(ide_guest_nodata(m.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_ENABLE_WCE, 0), ==, STATUS_OK);
    machine_close(&m);
    g_assert_true(find_snapshot(path, "snap1", &first));

    machine_open(&m, path, "qcow2", "writethrough");
    hmp_ok(m.ig->g, "loadvm snap1");
    g_assert_cmpuint(savevm_vm_clock_ns(m.ig->g->savevm), >=,
                     first.vm_clock_nsec);
    g_assert_cmphex(ide_guest_nodata(m.ig, ATA_CMD_SET_FEATURES,
                                     ATA_SF_ENABLE_WCE, 0), ==, STATUS_OK);
    hmp_ok(m.ig->g, "savevm snap1");
    machine_close(&m);
    n = list_snapshots(path, &tab);
    g_assert_cmpint(n, ==, 1);
    g_assert_cmpstr(tab[0].name, ==, "snap1");
    g_assert_cmpstr(tab[0].id_str, !=, first.id_str);
    g_assert_cmpuint(tab[0].vm_clock_nsec, >=, first.vm_clock_nsec);
    g_free(tab);

    /* the replacement holds the cache the guest enabled */
    machine_open(&m, path, "qcow2", "writethrough");
    g_assert_false(id_wce(m.ig));
    hmp_ok(m.ig->g, "loadvm snap1");
    g_assert_true(id_wce(m.ig));
    hmp_ok(m.ig->g, "delvm snap1");
    HMP_FAILS(m.ig->g, "loadvm snap1",
              "Snapshot 'snap1' does not exist on drive 'ide0-hd0'");
    HMP_FAILS(m.ig->g, "delvm snap1",
              "Snapshot 'snap1' does not exist on any drive");
    machine_close(&m);
    g_assert_cmpint(list_snapshots(path, &tab), ==, 0);
    unlink(path);
}

/*
 * Every writable drive gets the disk snapshot and goes back on loadvm;
 * the VM state is in the first one's, or in the one named; a read-only
 * drive takes no part.
 */
static void test_drives(void)
{
    g_autofree char *path_a = qguest_image_new("qcow2", DISK_SIZE);
    g_autofree char *path_b = qguest_image_new("qcow2", DISK_SIZE);
    g_autofree char *path_ro = qguest_image_new("raw", DISK_SIZE);
    IDEDriveConf conf = { .serial = "QBSERIAL02" };
    uint8_t buf[4096], expect[4096];
    QEMUSnapshotInfo sn;
    BlockBackend *blk_b, *blk_ro;
    QDict *opts = qdict_new();
    Error *err = NULL;
    SaveState *vms;
    Machine m;

    machine_open(&m, path_a, "qcow2", "writeback");
    vms = m.ig->g->savevm;
    blk_b = qguest_blk_open(path_b, "qcow2", "writeback", NULL);
    conf.blk = blk_b;
    g_assert_cmpint(ide_bus_attach(m.ig->bus, 1, &conf, &error_abort), ==, 0);
    g_assert_cmpint(savevm_register_drive(vms, "ide0-hd1", blk_b,
                                          &error_abort), ==, 0);
    qdict_put_str(opts, "driver", "raw");
    blk_ro = blk_new_open(path_ro, NULL, opts, 0, &error_abort);
    g_assert_cmpint(savevm_register_drive(vms, "cdrom", blk_ro,
                                          &error_abort), ==, 0);
    g_assert_cmpint(savevm_register_drive(vms, "cdrom", blk_ro, &err), ==,
                    -EEXIST);
    error_free(err);
    err = NULL;

    ide_guest_setup(&m);
    qguest_pattern(buf, sizeof(buf), 0, 1);
    g_assert_cmpint(blk_pwrite(blk_b, 0, sizeof(buf), buf, 0), ==, 0);
    hmp_ok(m.ig->g, "savevm snap1");
    g_assert_cmpint(savevm_save_snapshot(vms, "snap2", "ide0-hd1",
                                         &error_abort), >, 0);
    g_assert_cmpint(savevm_save_snapshot(vms, "snap3", "cdrom", &err), ==,
                    -ENOTSUP);
    g_assert_nonnull(strstr(error_get_pretty(err), "Drive 'cdrom' cannot "
                            "hold VM state"));
    error_free(err);
    dma_write(m.ig, 0, DATA_SECTORS, 2);
    qguest_pattern(buf, sizeof(buf), 0, 2);
    g_assert_cmpint(blk_pwrite(blk_b, 0, sizeof(buf), buf, 0), ==, 0);

    hmp_ok(m.ig->g, "loadvm snap1");
    dma_read_check(m.ig, 0, DATA_SECTORS, 1);
    g_assert_cmpint(blk_pread(blk_b, 0, sizeof(buf), buf, 0), ==, 0);
    qguest_pattern(expect, sizeof(expect), 0, 1);
    g_assert_cmpmem(buf, sizeof(buf), expect, sizeof(expect));
    /* snap2's VM state is on ide0-hd1: the default drive has none */
    HMP_FAILS(m.ig->g, "loadvm snap2", "Snapshot 'snap2' of drive "
              "'ide0-hd0' is a disk-only snapshot");
    g_assert_cmpint(savevm_load_snapshot(vms, "snap2", "ide0-hd1",
                                         &error_abort), ==, 0);
    /* a snapshot that one writable drive lacks is not loaded */
    {
        QEMUSnapshotInfo only = { .name = "a-only" };

        g_assert_cmpint(bdrv_snapshot_create(blk_bs(m.blk), &only), ==, 0);
        HMP_FAILS(m.ig->g, "loadvm a-only",
                  "Snapshot 'a-only' does not exist on drive 'ide0-hd1'");
    }
    ide_guest_free(m.ig);
    blk_unref(m.blk);
    blk_unref(blk_b);
    blk_unref(blk_ro);

    g_assert_true(find_snapshot(path_a, "snap1", &sn));
    g_assert_cmpuint(sn.vm_state_size, >, 0);
    g_assert_true(find_snapshot(path_a, "snap2", &sn));
    g_assert_cmpuint(sn.vm_state_size, ==, 0);
    g_assert_true(find_snapshot(path_b, "snap1", &sn));
    g_assert_cmpuint(sn.vm_state_size, ==, 0);
    g_assert_true(find_snapshot(path_b, "snap2", &sn));
    g_assert_cmpuint(sn.vm_state_size, >, 0);
    unlink(path_a);
    unlink(path_b);
    unlink(path_ro);
}

/* ---- errors ---- */

/*
 * A drive whose snapshot cannot be made after another's was (qcow2 with
 * an external data file refuses snapshots): savevm fails naming it and
 * removes the snapshot it had made on the first drive.
 */
static void test_partial_failure(void)
{
    g_autofree char *qblock_img = tool_path("qblock-img");
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    g_autofree char *ext = qguest_image_new("raw", 0);
    g_autofree char *ext_data = g_strconcat(ext, ".data", NULL);
    g_autofree char *opt = g_strconcat("data_file=", ext_data, NULL);
    char *create[] = { qblock_img, "create", "-q", "-f", "qcow2", "-o", opt,
                       ext, "64M", NULL };
    g_autofree char *out = NULL;
    QEMUSnapshotInfo *tab;
    BlockBackend *blk_ext;
    Machine m;

    g_assert_cmpint(run_tool(create, &out), ==, 0);
    machine_open(&m, path, "qcow2", "writeback");
    blk_ext = qguest_blk_open(ext, "qcow2", "writeback", NULL);
    g_assert_cmpint(savevm_register_drive(m.ig->g->savevm, "ext", blk_ext,
                                          &error_abort), ==, 0);
    blk_unref(blk_ext);
    ide_guest_setup(&m);
    HMP_FAILS(m.ig->g, "savevm snap1", "Could not create snapshot 'snap1' "
              "on drive 'ext'", "not supported");
    machine_close(&m);
    g_assert_cmpint(list_snapshots(path, &tab), ==, 0);
    unlink(path);
    unlink(ext);
    unlink(ext_data);
}

/* A missing snapshot changes nothing (not even the devices). */
static void test_unknown_snapshot(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    uint16_t id[ATA_ID_WORDS];
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    ide_guest_setup(&m);
    HMP_FAILS(m.ig->g, "loadvm nosuch",
              "Snapshot 'nosuch' does not exist on drive 'ide0-hd0'");
    identify(m.ig, id);
    g_assert_cmphex(id[ATA_ID_MULTSECT], ==, 0x0108);
    g_assert_false(id[ATA_ID_CFS_ENABLE_1] & ATA_ID_CS1_WCACHE);
    HMP_FAILS(m.ig->g, "delvm nosuch", "'nosuch' does not exist");
    machine_close(&m);
    unlink(path);
}

/* A writable raw drive: refused before anything is written. */
static void test_raw(void)
{
    g_autofree char *raw = qguest_image_new("raw", DISK_SIZE);
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    QEMUSnapshotInfo *tab;
    BlockBackend *blk_raw;
    Machine m;

    machine_open(&m, raw, "raw", "writeback");
    HMP_FAILS(m.ig->g, "savevm snap1", "Drive 'ide0-hd0' is writable but "
              "its format 'raw' does not support snapshots");
    HMP_FAILS(m.ig->g, "loadvm snap1", "Drive 'ide0-hd0' is writable but "
              "its format 'raw' does not support snapshots");
    machine_close(&m);

    /* the qcow2 drive could, but the machine's raw one cannot */
    machine_open(&m, path, "qcow2", "writeback");
    blk_raw = qguest_blk_open(raw, "raw", "writeback", NULL);
    g_assert_cmpint(savevm_register_drive(m.ig->g->savevm, "data", blk_raw,
                                          &error_abort), ==, 0);
    blk_unref(blk_raw);
    HMP_FAILS(m.ig->g, "savevm snap1", "Drive 'data' is writable");
    machine_close(&m);
    g_assert_cmpint(list_snapshots(path, &tab), ==, 0);
    unlink(raw);
    unlink(path);
}

/* A snapshot without VM state (qemu-img snapshot -c) is not loaded. */
static void test_disk_only(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    QEMUSnapshotInfo sn = { .name = "disk" };
    uint16_t id[ATA_ID_WORDS];
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    ide_guest_setup(&m);
    g_assert_cmpint(bdrv_snapshot_create(blk_bs(m.blk), &sn), ==, 0);
    HMP_FAILS(m.ig->g, "loadvm disk", "Snapshot 'disk' of drive 'ide0-hd0' "
              "is a disk-only snapshot");
    identify(m.ig, id);
    g_assert_cmphex(id[ATA_ID_MULTSECT], ==, 0x0108);
    machine_close(&m);
    unlink(path);
}

/* Offset of the first byte of the VM state stream in the image file. */
static off_t find_stream(const char *path)
{
    static const uint8_t magic[8] = { 'Q', 'B', 'V', 'M', 0, 0, 0, 1 };
    g_autofree char *data = NULL;
    gsize len;

    g_assert_true(g_file_get_contents(path, &data, &len, NULL));
    for (gsize i = 0; i + sizeof(magic) <= len; i += 512) {
        if (!memcmp(data + i, magic, sizeof(magic))) {
            return i;
        }
    }
    g_error("no VM state stream in %s", path);
}

static void file_pwrite(const char *path, const void *buf, size_t len,
                        off_t offset)
{
    int fd = open(path, O_WRONLY);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pwrite(fd, buf, len, offset), ==, len);
    close(fd);
}

/* Sets the VM state size of the image's first snapshot table entry. */
static void set_vm_state_size(const char *path, uint64_t size)
{
    uint8_t hdr[72], entry[48];
    uint64_t table, large = GUINT64_TO_BE(size);
    uint32_t small = GUINT32_TO_BE(size <= UINT32_MAX ? size : 0), extra;
    int fd = open(path, O_RDONLY);

    g_assert_cmpint(pread(fd, hdr, sizeof(hdr), 0), ==, sizeof(hdr));
    memcpy(&table, hdr + 64, 8);
    table = GUINT64_FROM_BE(table);
    g_assert_cmpint(pread(fd, entry, sizeof(entry), table), ==,
                    sizeof(entry));
    close(fd);
    memcpy(&extra, entry + 36, 4);
    /* the 64-bit size in the extra data is the one that counts */
    g_assert_cmpuint(GUINT32_FROM_BE(extra), >=, 8);
    file_pwrite(path, &small, 4, table + 32);
    file_pwrite(path, &large, 8, table + 40);
}

/* Saves ide_guest_setup()'s state as snap1 of a new image. */
static char *image_with_snapshot(void)
{
    char *path = qguest_image_new("qcow2", DISK_SIZE);
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    ide_guest_setup(&m);
    hmp_ok(m.ig->g, "savevm snap1");
    machine_close(&m);
    return path;
}

/*
 * VM state that is not what savevm wrote: the load is refused as a whole,
 * naming the problem, and leaves the devices and RAM reset; a size no
 * machine of this kind can have is refused before the disk is touched.
 */
static void test_bad_vm_state(void)
{
    g_autofree char *path = image_with_snapshot();
    QEMUSnapshotInfo sn;
    uint8_t byte;
    off_t off;
    Machine m;

    /* a byte flipped inside a device's values */
    off = find_stream(path) + 100;
    {
        int fd = open(path, O_RDONLY);

        g_assert_cmpint(pread(fd, &byte, 1, off), ==, 1);
        close(fd);
    }
    byte ^= 0x55;
    file_pwrite(path, &byte, 1, off);
    machine_open(&m, path, "qcow2", "writeback");
    ide_dirty(&m);
    HMP_FAILS(m.ig->g, "loadvm snap1", "snapshot 'snap1'", "'ide0-hd0'",
              "the devices are reset", "The VM state is corrupt: its "
              "checksum is");
    ide_check_reset(&m, "writeback");
    machine_close(&m);
    byte ^= 0x55;
    file_pwrite(path, &byte, 1, off);

    /* cut short: the trailer is not where the size says */
    g_assert_true(find_snapshot(path, "snap1", &sn));
    set_vm_state_size(path, sn.vm_state_size - 100);
    machine_open(&m, path, "qcow2", "writeback");
    ide_dirty(&m);
    HMP_FAILS(m.ig->g, "loadvm snap1", "does not end with a 'QBVE' trailer: "
              "it is truncated");
    ide_check_reset(&m, "writeback");
    machine_close(&m);

    /* a hostile size: refused with the devices untouched */
    set_vm_state_size(path, UINT64_C(1) << 40);
    machine_open(&m, path, "qcow2", "writeback");
    ide_guest_setup(&m);
    HMP_FAILS(m.ig->g, "loadvm snap1", "is 1099511627776 bytes, more than "
              "the");
    {
        uint16_t id[ATA_ID_WORDS];

        identify(m.ig, id);
        g_assert_cmphex(id[ATA_ID_MULTSECT], ==, 0x0108);
    }
    machine_close(&m);

    /* the right size again: it loads */
    set_vm_state_size(path, sn.vm_state_size);
    machine_open(&m, path, "qcow2", "writeback");
    hmp_ok(m.ig->g, "loadvm snap1");
    ide_check_loaded(&m);
    machine_close(&m);
    unlink(path);
}

/*
 * VM state another hypervisor saved (QEMU's stream starts "QEVM", version
 * 3) is refused as such, the devices reset.
 */
static void test_foreign_vm_state(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    QEMUSnapshotInfo sn = { .name = "qemu" };
    uint8_t state[4096] = { 'Q', 'E', 'V', 'M', 0, 0, 0, 3 };
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    g_assert_cmpint(blk_save_vmstate(m.blk, state, 0, sizeof(state)), ==, 0);
    sn.vm_state_size = sizeof(state);
    g_assert_cmpint(bdrv_snapshot_create(blk_bs(m.blk), &sn), ==, 0);
    ide_dirty(&m);
    HMP_FAILS(m.ig->g, "loadvm qemu", "(the devices are reset): Not a "
              "device state stream (no 'QBVM' magic)");
    ide_check_reset(&m, "writeback");
    machine_close(&m);
    unlink(path);
}

/* A device of the test's own, in two versions. */
typedef struct Toy {
    uint32_t value;
    uint32_t extra;         /* new in version 2 */
    bool refuse;            /* pre_save refuses, as a busy device does */
} Toy;

static int toy_pre_save(void *opaque, Error **errp)
{
    Toy *t = opaque;

    if (t->refuse) {
        error_setg(errp, "toy has a request in flight");
        return -EBUSY;
    }
    return 0;
}

static void toy_reset(void *opaque)
{
    Toy *t = opaque;

    t->value = t->extra = 0;
}

static const VMStateDescription vmstate_toy_v1 = {
    .name = "toy",
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(Toy),
    .pre_save = toy_pre_save,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(value, Toy),
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_toy_v2 = {
    .name = "toy",
    .version_id = 2,
    .minimum_version_id = 1,
    .size = sizeof(Toy),
    .pre_save = toy_pre_save,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(value, Toy),
        VMSTATE_UINT32_V(extra, Toy, 2),
        VMSTATE_END_OF_LIST()
    },
};

static void toy_register(Machine *m, Toy *t, const VMStateDescription *vmsd)
{
    g_assert_cmpint(savevm_register_device(m->ig->g->savevm, vmsd, 0, t,
                                           toy_reset, &error_abort), ==, 0);
}

/*
 * Saves an IDE machine (with the toy device @saved_vmsd unless NULL) and
 * loads it into one with @load_vmsd (unless NULL): the load must fail with
 * @expect, the IDE device and the toy reset although the IDE section
 * loaded before the problem showed.
 */
static void sections_case(const VMStateDescription *saved_vmsd,
                          const VMStateDescription *load_vmsd,
                          const char *const *expect)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    Toy saved = { .value = 7, .extra = 8 }, loaded = { .value = 77 };
    g_autofree char *msg = NULL;
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    if (saved_vmsd) {
        toy_register(&m, &saved, saved_vmsd);
    }
    ide_guest_setup(&m);
    hmp_ok(m.ig->g, "savevm snap1");
    machine_close(&m);

    machine_open(&m, path, "qcow2", "writeback");
    if (load_vmsd) {
        toy_register(&m, &loaded, load_vmsd);
    }
    ide_dirty(&m);
    hmp_fails(m.ig->g, "loadvm snap1", expect);
    ide_check_reset(&m, "writeback");
    g_assert_true(blk_enable_write_cache(m.blk));
    if (load_vmsd) {
        g_assert_cmpuint(loaded.value, ==, 0);
    }
    machine_close(&m);
    unlink(path);
}

static void test_sections(void)
{
    /* a device the machine does not have */
    sections_case(&vmstate_toy_v1, NULL, (const char *const[]) {
        "Section 'toy' instance 0 is not a device of this machine", NULL });
    /* a device the stream does not have */
    sections_case(NULL, &vmstate_toy_v1, (const char *const[]) {
        "There is no section for device 'toy' instance 0", NULL });
    /* a newer version of a device than the machine's */
    sections_case(&vmstate_toy_v2, &vmstate_toy_v1, (const char *const[]) {
        "Section 'toy' instance 0",
        "Device state 'toy' version 2 is not supported (versions 1 to 1 "
        "are)", NULL });
}

/* An older version loads into a newer device: the later field stays. */
static void test_section_older_version(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    Toy saved = { .value = 7 }, loaded = { .value = 1, .extra = 2 };
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    toy_register(&m, &saved, &vmstate_toy_v1);
    hmp_ok(m.ig->g, "savevm snap1");
    machine_close(&m);
    machine_open(&m, path, "qcow2", "writeback");
    toy_register(&m, &loaded, &vmstate_toy_v2);
    hmp_ok(m.ig->g, "loadvm snap1");
    g_assert_cmpuint(loaded.value, ==, 7);
    /* reset before the load, then untouched: version 1 has no extra */
    g_assert_cmpuint(loaded.extra, ==, 0);
    machine_close(&m);
    unlink(path);
}

/* A device that cannot be saved: savevm fails and writes nothing. */
static void test_device_refuses(void)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    Toy toy = { .refuse = true };
    QEMUSnapshotInfo *tab;
    Error *err = NULL;
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    toy_register(&m, &toy, &vmstate_toy_v1);
    g_assert_cmpint(savevm_register_device(m.ig->g->savevm, &vmstate_toy_v1,
                                           0, &toy, toy_reset, &err), ==,
                    -EEXIST);
    error_free(err);
    ide_guest_setup(&m);
    HMP_FAILS(m.ig->g, "savevm snap1", "Device 'toy' instance 0 cannot be "
              "saved: toy has a request in flight");
    machine_close(&m);
    g_assert_cmpint(list_snapshots(path, &tab), ==, 0);
    unlink(path);
}

/* ---- crashes ---- */

#define ENV_IMAGE "QBLOCK_SAVEVM_IMAGE"
#define ENV_KILL "QBLOCK_SAVEVM_KILL"

/*
 * The image after a crash, as iotest 103 judges one: `qblock-img check`
 * finds nothing harmful (leaks are harmless, and so is OFLAG_COPIED out of
 * date on a cluster whose extra reference nothing uses; a refcount below
 * the references, or anything else, is not) and `check -r all` repairs
 * the rest; with @clean it must find nothing at all.  Then snap1 exists if
 * savevm returned (@saved), and if it exists it loads with everything
 * ide_guest_setup() left.
 */
static void verify_after_crash(const char *path, bool saved, bool clean,
                               const char *what)
{
    g_autofree char *qblock_img = tool_path("qblock-img");
    char *check[] = { qblock_img, "check", (char *)path, NULL };
    char *repair[] = { qblock_img, "check", "-r", "all", (char *)path, NULL };
    g_autofree char *out = NULL;
    QEMUSnapshotInfo sn;
    BlockBackend *blk;
    bool has;
    int rc = run_tool_full(check, &out, true);

    if (rc != 0) {
        g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
        g_autofree char *again = NULL;

        if (clean) {
            g_error("%s: check is not clean:\n%s", what, out);
        }
        for (char **l = lines; *l; l++) {
            if (g_str_has_prefix(*l, "ERROR") && !strstr(*l, "OFLAG_COPIED")) {
                g_error("%s: check found harmful errors:\n%s", what, out);
            }
        }
        g_free(out);
        out = NULL;
        run_tool_full(repair, &out, true);
        if (run_tool_full(check, &again, true) != 0) {
            g_error("%s: check -r all left problems:\n%s", what, again);
        }
    }
    blk = qguest_blk_open(path, "qcow2", "writeback", NULL);
    has = bdrv_snapshot_find(blk_bs(blk), &sn, "snap1") == 0;
    blk_unref(blk);
    if (saved && !has) {
        g_error("%s: savevm returned, but the snapshot is gone", what);
    }
    if (has) {
        Machine m;

        machine_open(&m, path, "qcow2", "writeback");
        hmp_ok(m.ig->g, "loadvm snap1");
        ide_check_loaded(&m);
        machine_close(&m);
    }
}

/* The marker a child leaves once its savevm returned. */
static char *done_marker(const char *path)
{
    return g_strconcat(path, ".saved", NULL);
}

/*
 * The child: ide_guest_setup() and savevm on the image named in the
 * environment, then it marks the savevm done and kills itself (or closes
 * the machine normally).
 */
static void savevm_child(void)
{
    const char *path = g_getenv(ENV_IMAGE);
    g_autofree char *marker = done_marker(path);
    Machine m;

    machine_open(&m, path, "qcow2", "writeback");
    ide_guest_setup(&m);
    hmp_ok(m.ig->g, "savevm snap1");
    g_assert_true(g_file_set_contents(marker, "", 0, NULL));
    if (g_getenv(ENV_KILL)) {
        kill(getpid(), SIGKILL);
    }
    machine_close(&m);
}

/* Runs the child on a new image; true if its savevm returned. */
static bool run_child(const char *path)
{
    g_autofree char *marker = done_marker(path);
    bool saved;

    unlink(marker);
    g_setenv(ENV_IMAGE, path, true);
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_unsetenv(ENV_IMAGE);
    saved = g_file_test(marker, G_FILE_TEST_EXISTS);
    unlink(marker);
    return saved;
}

/*
 * Killed right after savevm returned (SIGKILL: no close, no flush): the
 * real qemu-img check finds the image clean and the snapshot loads.
 */
static void test_killed_after_savevm(void)
{
    g_autofree char *path = NULL;
    g_autofree char *qemu_img = NULL;

    if (g_test_subprocess()) {
        savevm_child();
        return;
    }
    path = qguest_image_new("qcow2", DISK_SIZE);
    g_setenv(ENV_KILL, "1", true);
    g_assert_true(run_child(path));
    g_unsetenv(ENV_KILL);
    g_test_trap_assert_failed();
    qemu_img = g_find_program_in_path("qemu-img");
    if (qemu_img) {
        char *argv[] = { qemu_img, "check", path, NULL };
        g_autofree char *out = NULL;

        g_assert_cmpint(run_tool(argv, &out), ==, 0);
    } else {
        /*
         * The real check is half of what this test claims: without it the
         * test is a skip, not a pass (qblock's own check still runs).
         */
        g_test_skip("qemu-img is not installed (Debian package qemu-utils): "
                    "only qblock's check ran");
    }
    verify_after_crash(path, true, true, "killed after savevm");
    unlink(path);
}

/*
 * Killed after each write the child makes to the image file, by the
 * crash injector (tests/crash/crashpoint.c): what the process wrote stays
 * (the page cache survives a process), so the image must be consistent
 * at every point.
 */
static void test_killed_at_every_write(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *exe = NULL;
    g_autofree char *lib = NULL;
    g_autofree char *count_file = NULL;
    g_autofree char *text = NULL;
    long writes;

    if (g_test_subprocess()) {
        savevm_child();
        return;
    }
    exe = g_file_read_link("/proc/self/exe", NULL);
    dir = g_path_get_dirname(exe);
    lib = g_build_filename(dir, "..", "crash", "libcrashpoint.so", NULL);
    if (!g_file_test(lib, G_FILE_TEST_EXISTS)) {
        g_test_skip("the crash injector tests/crash/libcrashpoint.so is not "
                    "built");
        return;
    }
    count_file = g_strconcat(exe, ".writes", NULL);
    g_setenv("LD_PRELOAD", lib, true);
    /* under AddressSanitizer, its runtime must not insist on coming first */
    g_setenv("ASAN_OPTIONS", "verify_asan_link_order=0", true);
    {
        g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);

        g_setenv("CRASHPOINT_FILE", path, true);
        g_setenv("CRASHPOINT_COUNT", count_file, true);
        g_assert_true(run_child(path));
        g_test_trap_assert_passed();
        g_unsetenv("CRASHPOINT_COUNT");
        unlink(path);
    }
    g_assert_true(g_file_get_contents(count_file, &text, NULL, NULL));
    unlink(count_file);
    writes = strtol(text, NULL, 10);
    g_assert_cmpint(writes, >, 5);
    g_test_message("the child makes %ld writes to the image", writes);
    for (long k = 1; k <= writes; k++) {
        g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
        g_autofree char *at = g_strdup_printf("%ld", k);
        g_autofree char *what = g_strdup_printf("killed after write %ld", k);
        bool saved;

        g_setenv("LD_PRELOAD", lib, true);
        g_setenv("CRASHPOINT_FILE", path, true);
        g_setenv("CRASHPOINT_AT", at, true);
        saved = run_child(path);
        g_unsetenv("CRASHPOINT_AT");
        g_unsetenv("LD_PRELOAD");
        verify_after_crash(path, saved, false, what);
        unlink(path);
    }
    g_unsetenv("CRASHPOINT_FILE");
    g_unsetenv("ASAN_OPTIONS");
}

/*
 * A power cut (blkcrash below qcow2: the disk's volatile cache is lost,
 * all of it or a random part) at every request of savevm, and right after
 * it returned.  If the VM state were not flushed before the snapshot that
 * names it, some cut would keep the snapshot and lose its state.
 */
static uint64_t power_cut_once(uint64_t cut_at, BlkcrashCut how)
{
    g_autofree char *path = qguest_image_new("qcow2", DISK_SIZE);
    g_autofree char *what = g_strdup_printf("power cut at request %" PRIu64
                                            " (mode %d)", cut_at, how);
    g_autofree char *msg = NULL;
    QDict *extra = qdict_new();
    BlockDriverState *crash;
    uint64_t requests;
    Machine m;

    qdict_put_str(extra, "file.driver", "blkcrash");
    qdict_put_str(extra, "file.file.driver", "file");
    qdict_put_str(extra, "file.file.filename", path);
    m.blk = qguest_blk_open(path, "qcow2", "writeback", extra);
    m.ig = ide_guest_new(m.blk);
    crash = blkcrash_find(blk_bs(m.blk));
    g_assert_nonnull(crash);
    ide_guest_setup(&m);
    requests = blkcrash_requests(crash);
    if (cut_at) {
        g_assert_cmpint(blkcrash_arm(crash, requests + cut_at, how, cut_at),
                        ==, 0);
    }
    msg = qguest_hmp(m.ig->g, "savevm snap1");
    requests = blkcrash_requests(crash) - requests;
    if (!blkcrash_is_dead(crash)) {
        g_assert_null(msg);
        g_assert_cmpint(blkcrash_power_cut(crash, how, cut_at + 1), >=, 0);
    }
    machine_close(&m);
    verify_after_crash(path, msg == NULL, false, what);
    unlink(path);
    return requests;
}

static void test_power_cut(void)
{
    static const BlkcrashCut cuts[] = {
        BLKCRASH_CUT_ALL, BLKCRASH_CUT_RANDOM_WRITES,
        BLKCRASH_CUT_RANDOM_SECTORS,
    };
    uint64_t total = power_cut_once(0, BLKCRASH_CUT_ALL);

    g_assert_cmpuint(total, >, 3);
    g_test_message("savevm makes %" PRIu64 " requests below qcow2", total);
    for (uint64_t n = 1; n <= total; n++) {
        power_cut_once(n, cuts[n % ARRAY_SIZE(cuts)]);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    bdrv_init();
    g_test_add_func("/savevm/ide/write-cache", test_ide_write_cache);
    g_test_add_func("/savevm/ide/request-in-flight",
                    test_ide_request_in_flight);
    g_test_add_func("/savevm/virtio-blk/writeback", test_virtio_writeback);
    g_test_add_func("/savevm/snapshot-list", test_snapshot_list);
    g_test_add_func("/savevm/replace-and-delete", test_replace_and_delete);
    g_test_add_func("/savevm/drives", test_drives);
    g_test_add_func("/savevm/error/unknown-snapshot", test_unknown_snapshot);
    g_test_add_func("/savevm/error/partial-failure", test_partial_failure);
    g_test_add_func("/savevm/error/raw", test_raw);
    g_test_add_func("/savevm/error/disk-only", test_disk_only);
    g_test_add_func("/savevm/error/bad-vm-state", test_bad_vm_state);
    g_test_add_func("/savevm/error/foreign-vm-state", test_foreign_vm_state);
    g_test_add_func("/savevm/error/sections", test_sections);
    g_test_add_func("/savevm/section-older-version",
                    test_section_older_version);
    g_test_add_func("/savevm/error/device-refuses", test_device_refuses);
    g_test_add_func("/savevm/crash/killed-after-savevm",
                    test_killed_after_savevm);
    g_test_add_func("/savevm/crash/killed-at-every-write",
                    test_killed_at_every_write);
    g_test_add_func("/savevm/crash/power-cut", test_power_cut);
    return g_test_run();
}
