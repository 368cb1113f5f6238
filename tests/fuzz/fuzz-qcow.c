/*
 * fuzz-qcow: a mutated qcow (version 1) image, held in memory
 * (fuzz-mem), goes through what qblock-img info/convert/map and
 * qblock-io do with one: probe, open read-write without its backing file
 * (no host file is reached), block status and reads at the start, at an
 * offset the input chooses and at the end of the disk, then writes: a
 * partial cluster there (allocating an L2 table and a cluster, or
 * rewriting a compressed one), a sector at the start, a compressed
 * cluster in the middle, and a flush.  What is fuzzed is block/qcow1.c's
 * header checks and L1 table (invariant 1: only the entries the file
 * holds are read), the offsets its L1 and L2 entries give (invariant 2),
 * the inflating of compressed clusters, and block/qcow1-write.c's
 * appending to a file whose tables lie.  An encrypted header is refused
 * without a secret, as QEMU refuses it.  The input is the image itself;
 * its last bytes, read as a little-endian offset, also place the middle
 * read.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_qcow_write(BlockBackend *blk, int64_t off, int64_t len)
{
    static uint8_t buf[4096];
    BlockDriverInfo bdi = { 0 };
    int64_t mid;

    memset(buf, 0x5a, sizeof(buf));
    blk_pwrite(blk, off, MIN(len - off, 1024), buf, 0);
    blk_pwrite(blk, 0, MIN(len, 512), buf, 0);
    /* a whole cluster, or the disk's last one, compressed */
    if (bdrv_get_info(blk_bs(blk), &bdi) == 0 && bdi.cluster_size > 0 &&
        bdi.cluster_size <= (int)sizeof(buf)) {
        mid = QEMU_ALIGN_DOWN(len / 2, bdi.cluster_size);
        blk_pwrite_compressed(blk, mid, MIN(len - mid, bdi.cluster_size),
                              buf);
    }
    blk_flush(blk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockBackend *blk;
    int64_t len;

    bdrv_find_format("qcow")->bdrv_probe(data, size, NULL);
    blk = fuzz_mem_open_image("qcow", data, size, true, BDRV_O_RDWR);
    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    assert(len >= 0 && len % 512 == 0);
    if (len > 0) {
        fuzz_mem_read_spots(blk, data, size, len);
        fuzz_qcow_write(blk, fuzz_mem_io_offset(data, size, len, 1024), len);
    }
    blk_unref(blk);
    return 0;
}
