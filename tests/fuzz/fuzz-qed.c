/*
 * fuzz-qed: a mutated QED image, held in memory (fuzz-mem), goes through
 * what qblock-img info/convert/map/check/resize and qblock-io do with
 * one: probe, open read-write (which repairs an image left with the
 * need-check flag; else read-only), block status and reads at the start,
 * at an offset the input chooses and at the end of the disk, a write
 * there and one in the middle (allocating clusters and L2 tables at the
 * file's end, copy-on-write filling with zeroes), a zero write of a whole
 * cluster (zero clusters), a flush, a resize that grows, check and
 * repair, close (which clears the need-check flag).  What is fuzzed is
 * block/qed.c's header checks (inv. 1), the offsets taken from the tables
 * (inv. 2: a bad one is an error, never followed), the allocation at the
 * end of a file whose tables lie (inv. 3), and block/qed-check.c's walk
 * of tables that overlap, repeat and point anywhere.  The backing file
 * the header may name is not opened (no host file is reached).  The input
 * is the image itself; its last bytes, read as a little-endian offset,
 * also place the middle read.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The header's cluster size at 4 (zero past a short input). */
static uint32_t fuzz_qed_cluster_size(const uint8_t *data, size_t size)
{
    uint32_t cs = 0;

    if (size >= 4 + sizeof(cs)) {
        memcpy(&cs, data + 4, sizeof(cs));
    }
    return GUINT32_FROM_LE(cs);
}

static void fuzz_qed_write(BlockBackend *blk, int64_t off, int64_t len,
                           uint32_t cluster_size)
{
    static uint8_t buf[4096];
    int64_t mid = QEMU_ALIGN_DOWN(len / 2, 512);

    if (bdrv_is_read_only(blk_bs(blk))) {
        return;
    }
    memset(buf, 0x5a, sizeof(buf));
    blk_pwrite(blk, off, MIN(len - off, (int64_t)sizeof(buf)), buf, 0);
    blk_pwrite(blk, mid, MIN(len - mid, (int64_t)sizeof(buf)), buf, 0);
    /* a whole cluster at the start: the driver's own zero write */
    if (cluster_size && cluster_size <= len) {
        blk_pwrite_zeroes(blk, 0, cluster_size, 0);
    }
    blk_flush(blk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockBackend *blk;
    BdrvCheckResult result = { 0 };
    uint32_t cs = fuzz_qed_cluster_size(data, size);
    int64_t len;

    bdrv_find_format("qed")->bdrv_probe(data, size, NULL);
    blk = fuzz_mem_open_image("qed", data, size, true,
                              BDRV_O_RDWR | BDRV_O_RESIZE);
    if (!blk) {
        /* a failed repair: read-only it reads as it is, as in QEMU */
        blk = fuzz_mem_open_image("qed", data, size, true, 0);
    }
    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    assert(len >= 0 && len % 512 == 0);
    if (len > 0) {
        fuzz_mem_read_spots(blk, data, size, len);
        fuzz_qed_write(blk, fuzz_mem_io_offset(data, size, len, 4096), len,
                       cs);
    }
    if (!bdrv_is_read_only(blk_bs(blk))) {
        blk_truncate(blk, len + (1 << 20), false, PREALLOC_MODE_OFF, 0,
                     NULL);
        bdrv_check(blk_bs(blk), &result, BDRV_FIX_ERRORS);
    } else {
        bdrv_check(blk_bs(blk), &result, 0);
    }
    blk_unref(blk);
    return 0;
}
