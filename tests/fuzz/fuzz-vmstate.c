/*
 * fuzz-vmstate: loadvm of a hostile VM state stream.  A machine of real
 * device models (an IDE bus with a qcow2 disk, a virtio-blk device) and
 * two pages of guest RAM, registered with a SaveState as a hypervisor
 * does; per input, the input becomes the VM state of an internal snapshot
 * of the disk and savevm_load_snapshot() loads it: header, sections, RAM
 * pages, and each device's fields and post_load checks.
 *
 * The input is the stream without its trailer: the harness appends the
 * "QBVE" trailer with the right CRC (so that the fuzzer gets past the
 * checksum, which only guards against accidents), writes the result to
 * the disk's VM state area and creates the snapshot "fz" with that VM
 * state size, then loads it and deletes the snapshot.  The disk is a
 * qcow2 image made at start-up and held in memory (fuzz-mem).
 *
 * FUZZ_VMSTATE_SEED=FILE: writes the stream a real savevm of this machine
 * produced (the seed corpus's valid stream) to FILE at start-up.
 */
#include <zlib.h>

#include "fuzz-mem.h"

#include "block/block_int.h"
#include "block/snapshot.h"
#include "hw/ide.h"
#include "hw/virtio-blk.h"
#include "migration/savevm.h"
#include "qapi/qapi-opts.h"
#include "util/qemu-option.h"

#define FUZZ_VMSTATE_RAM_PAGES  2
#define FUZZ_VMSTATE_RAM_SIZE   (FUZZ_VMSTATE_RAM_PAGES * SAVEVM_PAGE_SIZE)
/* "QBVE" and the CRC-32: see migration/savevm.h */
#define FUZZ_VMSTATE_TRAILER    8

typedef struct FuzzMachine {
    uint8_t ram[FUZZ_VMSTATE_RAM_SIZE];
    GuestMemory mem;
    IRQLine irq;
    BlockBackend *disk;
    BlockBackend *vdisk;
    IDEBus *ide;
    VirtIOBlock *vblk;
    SaveState *savevm;
    /* the largest stream savevm wrote for this machine */
    size_t max_stream;
} FuzzMachine;

static FuzzMachine *fuzz_machine;

static void *fuzz_vmstate_map(void *opaque, uint64_t addr, uint64_t *len)
{
    FuzzMachine *m = opaque;

    if (addr >= sizeof(m->ram)) {
        return NULL;
    }
    *len = MIN(*len, sizeof(m->ram) - addr);
    return m->ram + addr;
}

static void fuzz_vmstate_irq_set(void *opaque, int level)
{
}

static void fuzz_vmstate_ide_reset(void *opaque)
{
    ide_bus_reset(opaque);
}

static void fuzz_vmstate_vblk_reset(void *opaque)
{
    virtio_device_reset(virtio_blk_vdev(opaque));
}

/* A 1 MiB qcow2 image, made by the driver in a scratch file and read in. */
static void fuzz_vmstate_make_image(void)
{
    g_autofree char *dir = g_dir_make_tmp("fuzz-vmstate-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "disk.qcow2", NULL);
    QemuOptsList *list = qemu_opts_append(NULL, &qapi_opts_qcow2_create);
    QemuOpts *opts;
    gchar *image;
    gsize len;

    list = qemu_opts_append(list, &qapi_opts_file_create);
    opts = qemu_opts_parse(list, "size=1M,cluster_size=4096", &error_abort);
    if (bdrv_create(bdrv_find_format("qcow2"), path, opts, &error_abort) < 0 ||
        !g_file_get_contents(path, &image, &len, NULL)) {
        abort();
    }
    qemu_opts_del(opts);
    qemu_opts_free(list);
    unlink(path);
    rmdir(dir);
    /* fuzz-mem copies it at open; the copy is the machine's for good */
    fuzz_mem_set_image((const uint8_t *)image, len);
}

static BlockBackend *fuzz_vmstate_open(const char *driver)
{
    QDict *opts = qdict_new();

    qdict_put_str(opts, "driver", driver);
    if (!strcmp(driver, "qcow2")) {
        qdict_put_str(opts, "file.driver", "fuzz-mem");
    } else {
        qdict_put_str(opts, "size", "1M");
    }
    return blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
}

static void fuzz_vmstate_seed(FuzzMachine *m, const char *seed_path)
{
    int64_t len = savevm_save_snapshot(m->savevm, "seed", NULL,
                                       &error_abort);
    g_autofree uint8_t *buf = g_malloc(len);

    /* creating the snapshot dropped the active VM state area: go back */
    if (len <= FUZZ_VMSTATE_TRAILER ||
        bdrv_snapshot_goto(blk_bs(m->disk), "seed", &error_abort) < 0 ||
        blk_load_vmstate(m->disk, buf, 0, len) < 0) {
        abort();
    }
    m->max_stream = len;
    if (seed_path && !g_file_set_contents(seed_path, (const char *)buf,
                                          len - FUZZ_VMSTATE_TRAILER, NULL)) {
        abort();
    }
    savevm_delete_snapshot(m->savevm, "seed", &error_abort);
}

static void fuzz_vmstate_init(void)
{
    IDEDriveConf ide_conf = { .serial = "FUZZ0001" };
    VirtIOBlkConf vconf;
    FuzzMachine *m;

    if (fuzz_machine) {
        return;
    }
    fuzz_mem_register();
    fuzz_vmstate_make_image();
    m = g_new0(FuzzMachine, 1);
    m->mem = (GuestMemory) { .map = fuzz_vmstate_map, .opaque = m };
    m->irq = (IRQLine) { .set = fuzz_vmstate_irq_set, .opaque = m };
    m->disk = fuzz_vmstate_open("qcow2");
    m->vdisk = fuzz_vmstate_open("null-co");
    m->ide = ide_bus_new(&m->mem, &m->irq);
    ide_conf.blk = m->disk;
    ide_bus_attach(m->ide, 0, &ide_conf, &error_abort);
    virtio_blk_conf_init(&vconf, m->vdisk);
    m->vblk = virtio_blk_new(&vconf, &m->mem, &m->irq, &error_abort);
    m->savevm = savevm_state_new();
    savevm_register_ram(m->savevm, &m->mem, sizeof(m->ram), &error_abort);
    savevm_register_device(m->savevm, &vmstate_ide_bus, 0, m->ide,
                           fuzz_vmstate_ide_reset, &error_abort);
    savevm_register_device(m->savevm, &vmstate_virtio_blk, 0, m->vblk,
                           fuzz_vmstate_vblk_reset, &error_abort);
    savevm_register_drive(m->savevm, "ide0-hd0", m->disk, &error_abort);
    /* every page saved: the stream is as long as this machine's can be */
    memset(m->ram, 0x5a, sizeof(m->ram));
    fuzz_vmstate_seed(m, g_getenv("FUZZ_VMSTATE_SEED"));
    fuzz_machine = m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    QEMUSnapshotInfo sn = { .name = "fz",
                            .icount = QEMU_SNAPSHOT_NO_ICOUNT };
    BlockDriverState *bs;
    g_autofree uint8_t *stream = NULL;
    size_t len;
    uint32_t crc;
    Error *err = NULL;

    fuzz_vmstate_init();
    bs = blk_bs(fuzz_machine->disk);
    len = MIN(size, fuzz_machine->max_stream - FUZZ_VMSTATE_TRAILER);
    stream = g_malloc(len + FUZZ_VMSTATE_TRAILER);
    memcpy(stream, data, len);
    crc = GUINT32_TO_BE(crc32(0, stream, len));
    memcpy(stream + len, "QBVE", 4);
    memcpy(stream + len + 4, &crc, 4);
    if (blk_save_vmstate(fuzz_machine->disk, stream, 0,
                         len + FUZZ_VMSTATE_TRAILER) < 0) {
        abort();
    }
    sn.vm_state_size = len + FUZZ_VMSTATE_TRAILER;
    if (bdrv_snapshot_create(bs, &sn) < 0) {
        abort();
    }
    savevm_load_snapshot(fuzz_machine->savevm, "fz", NULL, &err);
    error_free(err);
    bdrv_snapshot_delete(bs, NULL, "fz", &error_abort);
    return 0;
}
