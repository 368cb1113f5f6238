/*
 * vmstate-snapshot IMAGE NAME STATEFILE
 *
 * Saves the bytes of STATEFILE as the VM state of the qcow2 image IMAGE
 * and creates the internal snapshot NAME that carries it, through the
 * block layer API (blk_save_vmstate, bdrv_snapshot_create), as a
 * hypervisor does on savevm.  tests/interop/qcow2-snapshot-interop.sh
 * feeds it the state that QEMU itself saved and has QEMU load it back.
 */
#include "block/snapshot.h"
#include "qblock/block-backend.h"
#include "util/cutils.h"

int main(int argc, char **argv)
{
    QEMUSnapshotInfo sn = { .icount = QEMU_SNAPSHOT_NO_ICOUNT };
    g_autofree char *state = NULL;
    Error *err = NULL;
    BlockBackend *blk;
    QDict *options;
    gsize len;
    int64_t now = g_get_real_time();
    int ret;

    qemu_init_progname(argv[0]);
    if (argc != 4) {
        error_report("usage: vmstate-snapshot IMAGE NAME STATEFILE");
        return 2;
    }
    if (!g_file_get_contents(argv[3], &state, &len, NULL)) {
        error_report("Could not read '%s'", argv[3]);
        return 1;
    }
    bdrv_init();
    options = qdict_new();
    qdict_put_str(options, "driver", "qcow2");
    blk = blk_new_open(argv[1], NULL, options, BDRV_O_RDWR, &err);
    if (!blk) {
        error_report_err(err);
        return 1;
    }
    ret = blk_save_vmstate(blk, (const uint8_t *)state, 0, len);
    if (ret < 0) {
        error_report("Could not save the VM state: %s", strerror(-ret));
        blk_unref(blk);
        return 1;
    }
    pstrcpy(sn.name, sizeof(sn.name), argv[2]);
    sn.vm_state_size = len;
    sn.date_sec = now / G_USEC_PER_SEC;
    sn.date_nsec = (now % G_USEC_PER_SEC) * 1000;
    ret = bdrv_snapshot_create(blk_bs(blk), &sn);
    blk_unref(blk);
    if (ret < 0) {
        error_report("Could not create snapshot '%s': %s", argv[2],
                     strerror(-ret));
        return 1;
    }
    return 0;
}
