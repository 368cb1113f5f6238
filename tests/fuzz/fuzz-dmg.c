/*
 * fuzz-dmg: a mutated Apple disk image (dmg), held in memory (fuzz-mem),
 * goes through what qblock-img info/convert and qblock-io do with one:
 * open (read-only: the driver never writes), reads at the start, at an
 * offset the input chooses and at the end of the disk, close.  What is
 * fuzzed is block/dmg.c's trailer search, its property list and base64
 * mish blocks, its resource fork's walk (header, data area, resource
 * lengths), the chunk table's checks (its invariant 1: sorted, no
 * overlap, every stored chunk bounded and inside the file) and the
 * inflating of zlib and bzip2 chunks the file may garble.
 *
 * The input is the image itself; its last bytes, read as a little-endian
 * offset, also place the middle read (they are the trailer's reserved
 * bytes, so a mutation there moves the read and not the tables).
 */
#include "fuzz-mem.h"

#include "block/block_int.h"
#include "qblock/block-backend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    BlockBackend *blk = fuzz_mem_open_image("dmg", data, size, false, 0);
    int64_t len;

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
