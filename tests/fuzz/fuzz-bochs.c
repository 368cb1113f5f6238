/*
 * fuzz-bochs: a mutated Bochs growing image, held in memory (fuzz-mem),
 * goes through what qblock-img info/convert and qblock-io do with one:
 * probe, open (read-only: the driver never writes), reads at the start,
 * at an offset the input chooses and at the end of the disk, close.
 * What is fuzzed is block/bochs.c's header and catalog checks (its
 * invariant 1: every sector has a catalog entry and every offset computed
 * from one fits in 64 bits) and the extent bitmap walk of a read.
 *
 * The input is the image itself; its last bytes, read as a little-endian
 * offset, also place the middle read.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

/* A read spans a few extents of the smallest size: enough to walk bitmaps. */
#define FUZZ_BOCHS_IO_SIZE  (16 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t buf[FUZZ_BOCHS_IO_SIZE];
    BlockBackend *blk = fuzz_mem_open_image("bochs", data, size, false, 0);
    int64_t len, off;

    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    assert(len >= 0);
    if (len > 0) {
        off = fuzz_mem_io_offset(data, size, len, FUZZ_BOCHS_IO_SIZE);
        blk_pread(blk, 0, MIN(len, FUZZ_BOCHS_IO_SIZE), buf, 0);
        blk_pread(blk, off, MIN(len - off, FUZZ_BOCHS_IO_SIZE), buf, 0);
        off = len > FUZZ_BOCHS_IO_SIZE ? len - FUZZ_BOCHS_IO_SIZE : 0;
        blk_pread(blk, off, len - off, buf, 0);
    }
    blk_unref(blk);
    return 0;
}
