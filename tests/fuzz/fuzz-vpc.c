/*
 * fuzz-vpc: a mutated VHD image (dynamic: footer copy, dynamic header,
 * BAT, blocks; or fixed: data and footer), held in memory (fuzz-mem),
 * goes through what qblock-img info/convert/map and qblock-io do with
 * one: probe, open read-write, block status and reads at the start, at
 * an offset the input chooses and at the end of the disk, then a write
 * of part of a block there and of zeroes over the first 64 KiB, the
 * driver information, a flush, close.  What is fuzzed is block/vpc.c's
 * footer, header and BAT checks (its invariant 1: every disk offset has
 * a BAT entry, every block lies past the metadata and inside the file)
 * and block/vpc-write.c's block allocation in a file whose BAT lies.
 *
 * The input is the image itself; its last bytes, read as a
 * little-endian offset, also place the middle read and the write.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Part of a block at @off, then zeroes over the first 64 KiB; a flush. */
static void fuzz_vpc_write(BlockBackend *blk, int64_t off, int64_t len)
{
    static uint8_t buf[4096];

    memset(buf, 0x5a, sizeof(buf));
    blk_pwrite(blk, off, MIN(len - off, (int64_t)sizeof(buf)), buf, 0);
    blk_pwrite_zeroes(blk, 0, MIN(len, 64 * 1024), 0);
    blk_flush(blk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockBackend *blk;
    BlockDriverInfo bdi;
    int64_t len;

    blk = fuzz_mem_open_image("vpc", data, size, false, BDRV_O_RDWR);
    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    assert(len >= 0 && len % 512 == 0);
    if (len > 0) {
        fuzz_mem_read_spots(blk, data, size, len);
        fuzz_vpc_write(blk, fuzz_mem_io_offset(data, size, len, 4096),
                       len);
    }
    bdrv_get_info(blk_bs(blk), &bdi);
    blk_unref(blk);
    return 0;
}
