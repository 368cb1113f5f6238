/*
 * fuzz-cloop: a mutated cloop image, held in memory (fuzz-mem), goes
 * through what qblock-img info/convert and qblock-io do with one: probe,
 * open (read-only: the driver never writes), reads at the start, at an
 * offset the input chooses and at the end of the disk, close.  What is
 * fuzzed is block/cloop.c's header and offset table checks (its invariant
 * 1: offsets increase, no stream is longer than its buffer) and the
 * inflating of streams the file may cut short or garble.
 *
 * The input is the image itself; its last bytes, read as a little-endian
 * offset, also place the middle read.
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockBackend *blk;
    int64_t len;

    bdrv_find_format("cloop")->bdrv_probe(data, size, NULL);
    blk = fuzz_mem_open_image("cloop", data, size, false, 0);
    if (!blk) {
        return 0;
    }
    len = blk_getlength(blk);
    assert(len >= 0 && len % 512 == 0);
    if (len > 0) {
        fuzz_mem_read_spots(blk, data, size, len);
    }
    blk_unref(blk);
    return 0;
}
