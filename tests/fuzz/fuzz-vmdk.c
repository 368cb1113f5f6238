/*
 * fuzz-vmdk: a mutated VMDK sparse extent, held in memory (fuzz-mem),
 * goes through what qblock-img info/convert/map and qblock-io do with
 * one: probe, open read-write (else read-only, as an image with its
 * directory in a footer must be),
 * block status and reads at the start, at an offset the input chooses
 * and at the end of the disk, then a write of part of a grain there and
 * of zeroes over the first grain, the format-specific information, a
 * flush, close.  What is fuzzed is block/vmdk.c's header checks (its
 * invariant 1: every grain has a directory entry, every offset computed
 * from the tables fits in 64 bits), the embedded descriptor, the footer
 * of a stream-optimized extent, an ESX sparse ("COWD") file opened alone
 * (block/vmdk-cowd.c: its header, a directory shorter than the disk,
 * the descriptor text inside its header), the inflating of compressed
 * grains, and
 * block/vmdk-write.c's allocation of grains and tables in a file whose
 * tables lie (the CID rewritten in the embedded descriptor).
 *
 * The image must not reach a host file: the options forbid a backing
 * file ("backing": ""), and a descriptor file (which names its extents'
 * files) is skipped, as it is tested with real files by
 * tests/interop/vmdk-interop.sh and vmdk-write-interop.sh.  The input is the image itself; its
 * last bytes, read as a little-endian offset, also place the middle read.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "block/qapi.h"
#include "qblock/block-backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Part of a grain at @off, then zeroes over the first grain; a flush. */
static void fuzz_vmdk_write(BlockBackend *blk, int64_t off, int64_t len)
{
    static uint8_t buf[4096];

    if (bdrv_is_read_only(blk_bs(blk))) {
        return;
    }
    memset(buf, 0x5a, sizeof(buf));
    blk_pwrite(blk, off, MIN(len - off, (int64_t)sizeof(buf)), buf, 0);
    blk_pwrite_zeroes(blk, 0, MIN(len, 64 * 1024), 0);
    blk_flush(blk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockBackend *blk;
    JsonNode *info;
    int64_t len;

    if (size >= 1 && data[0] == '#') {
        return 0;               /* a descriptor file: names host files */
    }
    blk = fuzz_mem_open_image("vmdk", data, size, true, BDRV_O_RDWR);
    if (!blk) {
        /* VMware's stream layout is read-only; a bad one fails again */
        blk = fuzz_mem_open_image("vmdk", data, size, true, 0);
    }
    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    assert(len >= 0 && len % 512 == 0);
    if (len > 0) {
        fuzz_mem_read_spots(blk, data, size, len);
        fuzz_vmdk_write(blk, fuzz_mem_io_offset(data, size, len, 4096),
                        len);
    }
    info = bdrv_get_specific_info(blk_bs(blk));
    if (info) {
        json_node_unref(info);
    }
    blk_unref(blk);
    return 0;
}
